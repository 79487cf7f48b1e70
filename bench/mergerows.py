"""Many small inputs: `tokenmill count` of TABLES one-line text files, then
`tokenmill merge` of their TABLES count tables, each its own process, with
its wall time and peak RSS. merge sums at most merge.FAN_IN tables in one
query, so its memory follows the data, not the number of tables.

run.py runs it as the `merge-many` phase; alone, at any size:

    python bench/mergerows.py [--tables 100000] [--tmp DIR]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
from pathlib import Path

from cliruns import distinct_words, measured
from measure import busy_seconds
from realvocab import tokenmill_command
from report import MB, Row

TABLES = 100_000
VOCABULARY = 5000  # distinct words the inputs draw from
WORDS = 6  # per input


def write_inputs(folder: Path, n: int) -> int:
    """`n` one-line text inputs of WORDS words each (seeded); their bytes."""
    rng = random.Random(0)
    words = [f"w{i}" for i in range(VOCABULARY)]
    folder.mkdir(parents=True)
    total = 0
    for i in range(n):
        text = " ".join(rng.choices(words, k=WORDS)) + "\n"
        (folder / f"{i:07d}.txt").write_text(text)
        total += len(text)
    return total


def measure(phase: str, label: str, args: list, n_bytes: int) -> tuple[Row, dict]:
    busy = busy_seconds()
    r = measured([tokenmill_command(), *map(str, args)])
    other = max(0.0, (busy_seconds() - busy - r["cpu_seconds"]) / r["seconds"])
    row = Row(
        phase,
        label,
        r["seconds"],
        r["peak_rss"],
        r["tree_rss"],
        n_bytes,
        cpu_seconds=r["cpu_seconds"],
        process_seconds=r["seconds"],
        other_cores=other,
    )
    return row, r


def many_tables(ctx, n: int = TABLES) -> tuple[list, list, dict]:
    """The `merge-many` phase: count and merge of `n` one-line inputs."""
    root = ctx.tmp / "merge-many"
    shutil.rmtree(root, ignore_errors=True)
    n_bytes = write_inputs(root / "data", n)
    counts, table = root / "counts", root / "counts.parquet"
    phase = f"{n} small inputs"
    count, count_r = measure(
        phase, f"tokenmill count, {n} one-line inputs", ["count", root / "data", counts], n_bytes
    )
    merge, merge_r = measure(
        phase, f"tokenmill merge of their {n} tables", ["merge", counts, table], 0
    )
    words = distinct_words(table)
    shutil.rmtree(root)
    note = (
        f"{phase} rows: {n} text files of one line ({WORDS} words from {VOCABULARY}, "
        f"{n_bytes / MB:.1f} MB in all), each `tokenmill` command its own process; "
        f"{words} distinct pre-tokens."
    )
    return [count, merge], [note], {"merge_many": {"count": count_r, "merge": merge_r}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=TABLES)
    ap.add_argument("--tmp", type=Path, help="scratch folder (default: a new temporary one)")
    args = ap.parse_args()
    tmp = args.tmp or Path(tempfile.mkdtemp(prefix="tokenmill-merge-many-"))
    ctx = argparse.Namespace(tmp=tmp)
    try:
        rows, notes, _ = many_tables(ctx, args.tables)
    finally:
        if args.tmp is None:
            shutil.rmtree(tmp, ignore_errors=True)
    for r in rows:
        print(f"{r.contender}: {r.seconds:.1f} s, peak RSS {r.peak_rss / MB:.0f} MB")
    print(*notes, sep="\n")


if __name__ == "__main__":
    main()
