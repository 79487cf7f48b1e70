"""The training layouts against encode: `tokenmill run CORPUS OUT --tokenizer T
--pack 2048 --format parquet,LAYOUTS` with --workers 1 and 2 in turn, ROUNDS
times, each its own process; each stage's seconds from its manifest. The bar:
writing any layout takes no longer than the encode stage of the same run, on
1 and on 2 workers (`tokenmill speed ×`, encode's seconds over the layout's,
at least 1).

run.py runs it as the `layouts` phase, with the tokenizer its training phase
learned; alone (training one with `tokenmill run` first):

    python bench/layoutrows.py [CORPUS] [--rounds 3] [--tmp DIR]
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from cliruns import against_encode, measured, staged_run, standalone
from contenders import fresh
from realvocab import tokenmill_command
from report import Row

SEQ_LEN = 2048
ROUNDS = 3  # times --repeat
WORKERS = (1, 2)
# Each layout's stage in the manifest, where it is not the layout's name.
STAGE = {"packed": "pack"}


def layout_names() -> list[str]:
    """packed, and every --format layout that tokenmill has."""
    from tokenmill.layouts import FORMATS

    have = [name for name in FORMATS if importlib.util.find_spec(f"tokenmill.layouts.{name}")]
    return ["packed", *have]


def one_run(ctx, workers: int, formats: list[str]) -> dict:
    """One `tokenmill run` writing every layout; its measures and stage seconds."""
    out = ctx.tmp / f"layouts-{workers}"
    fresh(out)
    cmd = [tokenmill_command(), "run", str(ctx.corpus), str(out), "--tokenizer", ctx.tokenizer]
    cmd += ["--workers", str(workers), "--pack", str(SEQ_LEN)]
    cmd += ["--format", ",".join(["parquet", *formats])]
    result = staged_run(cmd, out, ctx.quiet_wait)
    shutil.rmtree(out)
    return result


def layouts(ctx, rounds: int = ROUNDS) -> tuple[list[Row], list[str], dict]:
    """The `layouts` phase: encode, then every layout, on 1 and 2 workers."""
    names = layout_names()
    runs: dict[int, list[dict]] = {w: [] for w in WORKERS}
    for _ in range(ctx.repeat * rounds):
        for w in WORKERS:
            runs[w].append(one_run(ctx, w, names[1:]))
    stages = {name: STAGE.get(name, name) for name in names}
    rows, spans, extra = against_encode(ctx, "layouts", runs, stages)
    notes = [
        f"Layouts rows: `tokenmill run --tokenizer --pack {SEQ_LEN} --format "
        f"{','.join(['parquet', *names[1:]])}`, {len(runs[1])} rounds of --workers 1 then 2, "
        "each its own process; wall s: the stage's own seconds in the run's manifest (its "
        "fastest round), RSS the whole run's. `tokenmill speed ×`: the median over the rounds "
        "of encode's seconds ÷ the layout's in the same run (at least 1: writing the layout "
        "takes no longer than encoding). Per-round ratios: " + "; ".join(spans) + ".",
    ]
    return rows, notes, {"layouts": extra}


def trained(args, tmp: Path) -> dict:
    """The tokenizer of a `tokenmill run` on the corpus, for the layouts' runs."""
    train = tmp / "train"
    fresh(train)
    cmd = [tokenmill_command(), "run", str(args.corpus), str(train)]
    measured(cmd + ["--vocab-size", str(args.vocab_size)])
    return {"tokenizer": str(train / "tokenizer.json")}


def main() -> None:
    standalone(
        __doc__,
        lambda ctx, args: layouts(ctx, args.rounds),
        rounds=ROUNDS,
        options=lambda ap: ap.add_argument("--vocab-size", type=int, default=32768),
        context=trained,
        line=lambda r: (
            f"{r.contender}: {r.seconds:.2f} s"
            + ("" if r.speedup is None else f", encode ÷ layout {r.speedup:.2f}")
        ),
    )


if __name__ == "__main__":
    main()
