"""Numbers for the README's "At scale" section: per-core throughput of count and
encode, and how the merged word table (what merge and train hold in the
driver) grows with the corpus.

    python bench/scale.py [CORPUS] [--json FILE]
    python bench/scale.py --report FILE     # print an earlier run's report

CORPUS (default /tmp/corpus, built by bench/build_corpus.py) is a folder of
Parquet shards. Each stage runs as a `tokenmill` child with `--workers 1`:
its CPU seconds (user + system, from wait4) and its peak RSS (VmHWM, which
the child writes at exit).

- Throughput per core: count and encode on the first shard and on the whole
  corpus read REPEAT times over; the difference in bytes over the difference
  in CPU seconds is the marginal rate, free of start-up and imports (which a
  long task on a cluster pays once). Other load on the machine still adds
  CPU time (shared caches, a busy sibling hyperthread), so each is the best
  of TRIES runs; on a busy machine, runs differ by a third.
- Merge throughput: table rows merged per CPU second, the same way.
- Growth: the per-shard count tables of prefixes of the corpus (1, 2, 4...
  shards) are merged, and the merged table trained on, each in its own
  child: distinct words (rows of counts.parquet), and how many are seen at
  least m times, against the bytes counted; peak RSS of merge and of train.
  A least-squares line in log-log space gives Heaps' law, distinct = K n^beta,
  for the extrapolation to 1 TB (a long way past what was measured: a rough
  guide, not a promise).
- Train's memory and time per distinct word: made-up tables of up to 2 M
  words, larger than the corpus gives.

Takes about three minutes on the 63 MB corpus (one core at a time).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

MIN_COUNTS = (1, 2, 5, 10, 100)
TB = 1e12
NODES = (8, 32)
CORES_PER_NODE = 32
VOCAB = 32768
# The corpus is read this many times over for throughput, so that the time
# measured is mostly work, not start-up.
REPEAT = 3
TRIES = 3
SHARD_BYTES = 512e6  # a typical shard of a large corpus, for the merge projection
SYNTHETIC_WORDS = (250_000, 1_000_000, 2_000_000)


# The child's own peak RSS (VmHWM of its exec'd image) written at exit: wait4's
# ru_maxrss would start from this process's size at fork, hiding small peaks.
WRAPPER = """
import atexit, os, sys
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            open(os.environ["SCALE_HWM_FILE"], "w").write(line.split()[1])
atexit.register(hwm)
from tokenmill.entry import main
sys.argv[0] = "tokenmill"
main()
"""


def run(*args: object) -> dict:
    """Run `tokenmill ARGS` in a child; its CPU seconds, peak RSS and wall time."""
    cmd = [sys.executable, "-c", WRAPPER, *map(str, args)]
    with tempfile.NamedTemporaryFile() as hwm:
        start = time.monotonic()
        env = {**os.environ, "SCALE_HWM_FILE": hwm.name}
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        err = proc.stderr.read().decode()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        proc.stderr.close()
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"tokenmill {' '.join(map(str, args))} failed:\n{err}")
        peak_kib = int(Path(hwm.name).read_text())
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss": peak_kib * 1024, "wall_s": wall}


def fastest(tries: int, *args: object) -> dict:
    """The run of `tokenmill ARGS` with the least CPU time of `tries`: other
    load on the machine (cache, a busy sibling hyperthread) only adds to it."""
    return min((run(*args) for _ in range(tries)), key=lambda r: r["cpu_s"])


def table_rows(folder: Path) -> int:
    return sum(pq.read_metadata(p).num_rows for p in folder.glob("*.parquet"))


def input_bytes(counts_dir: Path) -> int:
    """Bytes of text counted: the sum the count tables record (from their state)."""
    total = 0
    for p in counts_dir.glob("*.parquet"):
        meta = pq.read_metadata(p).metadata or {}
        state = json.loads(meta[b"tokenmill.state"]) if b"tokenmill.state" in meta else {}
        total += state.get("result", {}).get("bytes", 0)
    return total


def text_bytes(data: Path) -> int:
    """UTF-8 bytes of the `text` column of every Parquet shard under `data`."""
    return sum(
        pc.sum(pc.binary_length(pq.read_table(p, columns=["text"])["text"])).as_py()
        for p in sorted(data.glob("*.parquet"))
    )


def subset(src: Path, names: list[str], dest: Path) -> Path:
    """A folder of links to the files `names` of `src`."""
    dest.mkdir(parents=True)
    for name in names:
        (dest / name).symlink_to(src / name)
    return dest


def repeated(src: Path, names: list[str], times: int, dest: Path) -> Path:
    """A folder of links to the files `names` of `src`, each `times` over."""
    dest.mkdir(parents=True)
    for r in range(times):
        for name in names:
            (dest / f"r{r}-{name}").symlink_to(src / name)
    return dest


def synthetic_counts(path: Path, n: int) -> Path:
    """A merged table of `n` distinct made-up words (a space and 3 to 12
    letters, as most words of English text are) with Zipf counts: a table far
    larger than the corpus gives, to see how train's memory grows per word."""
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {" " + "".join(rng.choices(letters, k=rng.randint(3, 12))) for _ in range(n)}
    words = sorted(words)
    rng.shuffle(words)
    counts = [max(1, 10**7 // (rank + 1)) for rank in range(len(words))]
    table = pa.table(
        {"word": pa.array(words, pa.large_string()), "count": pa.array(counts, pa.uint64())}
    )
    pq.write_table(table, path)
    return path


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """K, beta of y = K x^beta, least squares on logs."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    n = len(xs)
    mx, my = sum(lx) / n, sum(ly) / n
    beta = sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum(
        (a - mx) ** 2 for a in lx
    )
    return math.exp(my - beta * mx), beta


def rate(small: dict, big: dict, small_bytes: int, big_bytes: int) -> float:
    """Marginal bytes per CPU second between two runs of the same stage."""
    return (big_bytes - small_bytes) / (big["cpu_s"] - small["cpu_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", nargs="?", type=Path, default=Path("/tmp/corpus"))
    ap.add_argument("--json", type=Path, help="also write every number here")
    ap.add_argument("--report", type=Path, help="only print the report of an earlier --json")
    args = ap.parse_args()
    if args.report:
        print_report(json.loads(args.report.read_text()))
        return
    shards = sorted(p.name for p in args.corpus.glob("*.parquet"))
    if len(shards) < 2:
        raise SystemExit(f"{args.corpus}: needs at least 2 Parquet shards")
    work = Path(tempfile.mkdtemp(prefix="tokenmill-scale-"))
    try:
        report = measure(args.corpus, shards, work)
    finally:
        shutil.rmtree(work)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    print_report(report)


def measure(corpus: Path, shards: list[str], work: Path) -> dict:
    one = subset(corpus, shards[:1], work / "one")
    every = subset(corpus, shards, work / "all")
    big = repeated(corpus, shards, REPEAT, work / "big")
    one_bytes, all_bytes = text_bytes(one), text_bytes(every)
    big_bytes = REPEAT * all_bytes
    one_w = ("--workers", 1)

    count_one = fastest(TRIES, "count", one, work / "counts-one", *one_w, "--force")
    count_big = fastest(TRIES, "count", big, work / "counts-big", *one_w, "--force")
    print(f"count: {count_big['cpu_s']:.1f} CPU s for {big_bytes / 1e6:.1f} MB", file=sys.stderr)
    # Merge throughput: the corpus's tables, REPEAT times over, against one table.
    rows_one = table_rows(work / "counts-one")
    rows_big = table_rows(work / "counts-big")
    merge_one = fastest(TRIES, "merge", work / "counts-one", work / "m-one.parquet", "--force")
    merge_big = fastest(TRIES, "merge", work / "counts-big", work / "m-big.parquet", "--force")
    run("count", every, work / "counts", *one_w)

    # Prefixes of 1, 2, 4... shards (and the whole), merged from the tables
    # already counted: the shards are shuffled documents, so a prefix is a
    # smaller sample of the same mix.
    sizes = sorted({min(2**i, len(shards)) for i in range(len(shards).bit_length() + 1)})
    growth = []
    for k in sizes:
        tables = subset(work / "counts", [output(s) for s in shards[:k]], work / f"c{k}")
        merged = work / f"merged-{k}.parquet"
        merge = run("merge", tables, merged)
        tokenizer = work / f"tok-{k}.json"
        train = run("train", merged, tokenizer, "--vocab-size", VOCAB)
        count = pq.read_table(merged, columns=["count"])["count"]
        row = {
            "shards": k,
            "bytes": input_bytes(tables),
            "distinct": len(count),
            # What merge reads: the rows of every per-shard table.
            "table_rows": table_rows(tables),
            "at_least": {str(m): pc.sum(pc.greater_equal(count, m)).as_py() for m in MIN_COUNTS},
            "merge": merge,
            "train": train,
        }
        growth.append(row)
        print(
            f"{k} shards: {row['bytes'] / 1e6:.1f} MB, {row['distinct']} distinct, "
            f"train {train['cpu_s']:.1f} CPU s",
            file=sys.stderr,
        )

    tok = work / f"tok-{sizes[-1]}.json"
    encode_one = fastest(
        TRIES, "encode", one, work / "tokens-one", "--tokenizer", tok, *one_w, "--force"
    )
    encode_big = fastest(
        TRIES, "encode", big, work / "tokens", "--tokenizer", tok, *one_w, "--force"
    )
    print(f"encode: {encode_big['cpu_s']:.1f} CPU s for {big_bytes / 1e6:.1f} MB", file=sys.stderr)

    synthetic = []
    for n in SYNTHETIC_WORDS:
        table = synthetic_counts(work / f"synthetic-{n}.parquet", n)
        train = run("train", table, work / f"synthetic-{n}.json", "--vocab-size", VOCAB)
        distinct = pq.read_metadata(table).num_rows
        synthetic.append({"distinct": distinct, "train": train})
        print(f"train on {distinct} made-up words: {train['cpu_s']:.1f} CPU s", file=sys.stderr)
    return {
        "corpus": str(corpus),
        "bytes": all_bytes,
        "count_bytes_per_cpu_s": rate(count_one, count_big, one_bytes, big_bytes),
        "encode_bytes_per_cpu_s": rate(encode_one, encode_big, one_bytes, big_bytes),
        "count": {"one": count_one, "big": count_big, "big_bytes": big_bytes},
        "encode": {"one": encode_one, "big": encode_big},
        "merge_rows_per_cpu_s": (rows_big - rows_one) / (merge_big["cpu_s"] - merge_one["cpu_s"]),
        "merge": {"one": merge_one, "big": merge_big, "rows": [rows_one, rows_big]},
        "growth": growth,
        "synthetic_train": synthetic,
    }


def output(shard: str) -> str:
    from tokenmill.io.inputs import output_name

    return output_name(shard)


def slope(rows: list[dict], x, y) -> float:
    """Marginal y per x between the first and last rows."""
    return (y(rows[-1]) - y(rows[0])) / (x(rows[-1]) - x(rows[0]))


def print_report(r: dict) -> None:
    mb, mib, gb = 1e6, 2**20, 1e9
    count, encode = r["count_bytes_per_cpu_s"], r["encode_bytes_per_cpu_s"]
    print(f"corpus {r['corpus']}: {r['bytes'] / mb:.1f} MB of text")
    print(
        f"per core (marginal, CPU time): count {count / mb:.0f} MB/s, encode {encode / mb:.0f} MB/s"
    )
    for nodes in NODES:
        cores = nodes * CORES_PER_NODE
        print(
            f"1 TB on {nodes} nodes x {CORES_PER_NODE} cores, CPU-bound: count "
            f"{TB / (count * cores) / 60:.1f} min, encode {TB / (encode * cores) / 60:.1f} min; "
            f"reading {count * CORES_PER_NODE / gb:.1f} GB/s (count) and "
            f"{encode * CORES_PER_NODE / gb:.1f} GB/s (encode) per node to keep up"
        )

    g = r["growth"]
    head = ["shards", "MB", "table rows", "distinct"] + [f">={m}" for m in MIN_COUNTS[1:]]
    head += ["merge MiB", "train MiB", "merge CPU s", "train CPU s"]
    print("\n" + " | ".join(head))
    for row in g:
        cells = [row["shards"], f"{row['bytes'] / mb:.1f}", row["table_rows"], row["distinct"]]
        cells += [row["at_least"][str(m)] for m in MIN_COUNTS[1:]]
        cells += [f"{row[k]['peak_rss'] / mib:.0f}" for k in ("merge", "train")]
        cells += [f"{row[k]['cpu_s']:.2f}" for k in ("merge", "train")]
        print(" | ".join(map(str, cells)))

    xs = [row["bytes"] for row in g]
    k, beta = fit(xs, [row["distinct"] for row in g])
    at_tb = k * TB**beta
    print(f"\nHeaps' law: distinct = {k:.3g} n^{beta:.3f} (n in bytes)")
    print(
        f"  at 1 TB: {at_tb:.3g} distinct words "
        f"(beta 0.65: {scaled(g, 0.65):.3g}, 0.70: {scaled(g, 0.70):.3g})"
    )
    big = g[-1]
    print(
        "  --min-count m keeps about the distinct words of a corpus m times smaller, "
        "distinct / m^beta:"
    )
    for m in MIN_COUNTS[1:]:
        print(
            f"    m={m}: measured {big['at_least'][str(m)]} of {big['distinct']} "
            f"at {big['bytes'] / mb:.0f} MB "
            f"(rule: {big['distinct'] / m**beta:.0f}); at 1 TB about {at_tb / m**beta:.3g}"
        )

    synthetic = r["synthetic_train"]
    train_word = slope(synthetic, lambda s: s["distinct"], lambda s: s["train"]["peak_rss"])
    train_s = slope(synthetic, lambda s: s["distinct"], lambda s: s["train"]["cpu_s"])
    merge_word = slope(g, lambda row: row["distinct"], lambda row: row["merge"]["peak_rss"])
    print(
        f"\ndriver, per distinct word: train {train_word:.0f} B of peak RSS and "
        f"{train_s * 1e6:.2f} us CPU (made-up tables of up to {synthetic[-1]['distinct']} words), "
        f"merge {merge_word:.0f} B"
    )
    shard = SHARD_BYTES
    rows = TB / shard * k * shard**beta
    print(
        f"merge reads {r['merge_rows_per_cpu_s'] / 1e6:.1f} M table rows per CPU s; 1 TB in "
        f"{shard / 1e6:.0f} MB shards: {TB / shard:.0f} tables of ~{k * shard**beta:.3g} rows, "
        f"{rows:.3g} rows, ~{rows / r['merge_rows_per_cpu_s'] / 60:.0f} CPU min"
    )
    for words in (at_tb, scaled(g, 0.70)):
        print(
            f"  {words:.3g} words: train ~{words * train_word / 2**30:.0f} GiB, "
            f"~{words * train_s / 60:.0f} CPU min at vocab {VOCAB}; "
            f"merge ~{words * merge_word / 2**30:.0f} GiB"
        )


def scaled(g: list[dict], beta: float) -> float:
    """Distinct words at 1 TB from the largest measured corpus with exponent `beta`."""
    return g[-1]["distinct"] * (TB / g[-1]["bytes"]) ** beta


if __name__ == "__main__":
    main()
