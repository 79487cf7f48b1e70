"""tokenmill's --workers 1 against 2 (`scaling`): count and encode on the
bench corpus, beside what the machine itself gives a second thread for work
with no tokenmill code, all taking turns in the same rounds.

The phase takes a Context (context.py) and returns (rows, notes, extra).
"""

from __future__ import annotations

import statistics

from context import fastest
from report import Row

OUTPUT = {"count": "counts", "encode": "tokens"}
# Work with no tokenmill code, measured in the same rounds: what the machine
# itself gives a second thread, for compute and for Parquet I/O.
REFERENCES = {
    "reference_sha256": "SHA-256 of the text (compute in a core's own caches)",
    "reference_parquet": "PyArrow reading each shard's text and writing it back with zstd",
}
SCALING_ROUNDS = 3  # times --repeat: these runs take seconds, not minutes


def scaling(ctx) -> tuple[list[Row], list[str], dict]:
    """--workers 1 against 2, back to back in each round, tokenmill's stages
    and the machine references taking turns. The ratio shown is the median of
    the rounds' own ratios: the machine's speed drifts over minutes (other
    tenants), and runs seconds apart share its state, where the fastest runs
    of each side may come from different spells."""
    stages = ["count_tokenmill", "encode_tokenmill", *REFERENCES]
    runs = []
    for name in stages:
        for w in (1, 2):
            params = {"workers": w}
            if name.endswith("_tokenmill"):
                stage = name.removesuffix("_tokenmill")
                params[OUTPUT[stage]] = str(ctx.tmp / f"scaling-{stage}-{w}")
            runs.append((name, params))
    rounds = ctx.repeat * SCALING_ROUNDS
    done = ctx.all_rounds(runs, ctx.env, rounds)
    rows, spans, references, extra = [], [], [], {}
    for i, name in enumerate(stages):
        ones, twos = done[2 * i], done[2 * i + 1]
        ratios = sorted(
            a.result["seconds"] / b.result["seconds"] for a, b in zip(ones, twos, strict=True)
        )
        median = statistics.median(ratios)
        extra[name] = {"median": median, "ratios": ratios}
        if name in REFERENCES:
            references.append(
                f"{REFERENCES[name]}: {median:.2f} ({ratios[0]:.2f} to {ratios[-1]:.2f})"
            )
            continue
        stage = name.removesuffix("_tokenmill")
        baseline = ctx.row("scaling", f"tokenmill {stage} --workers 1", fastest(ones))
        two = ctx.row("scaling", f"tokenmill {stage} --workers 2", fastest(twos), baseline)
        two.ratio = median
        rows += [baseline, two]
        spans.append(
            f"{stage} {ratios[0]:.2f} to {ratios[-1]:.2f} "
            f"(fastest runs alone: {baseline.seconds / two.seconds:.2f})"
        )
    notes = [
        "Scaling rows: wall s is each one's fastest run; `tokenmill speed ×` is the median, "
        f"over {rounds} rounds, of the --workers 1 wall ÷ the --workers 2 wall of the "
        "same round, run back to back (2.00 would be linear on 2 cores). Per-round ratios: "
        + "; ".join(spans)
        + ". --workers is passed as tokenmill defines it.",
        "What this machine gives a second thread, in the same rounds, for work with no "
        "tokenmill code (1 thread ÷ 2 threads, median and range): " + "; ".join(references) + ".",
    ]
    return rows, notes, {"scaling": extra}
