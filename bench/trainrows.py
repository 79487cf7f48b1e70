"""Issue 18's training rows: training on the multilingual slice against
rustbpe; and, on the large corpus of C (bench/build_linux.py), the memory of
`tokenmill run` against rustbpe's streaming training, what bounds each
stage's memory, and how `run` grows with the corpus.

Each phase takes a Context (context.py) and returns (rows, notes, extra).
The large corpus's rows run min(--repeat, BIG_REPEAT) rounds: each takes
minutes, and peak RSS does not need the fastest run.
"""

from __future__ import annotations

import dataclasses
import math

from corpora import make_slice, nearest_prefix, prefix, shard_sizes
from report import MB, Row

TRAIN_TARGET = 0.15  # tokenmill count+merge+train wall ÷ rustbpe's, at most
MEMORY_TARGET = 1.0  # tokenmill run peak RSS ÷ rustbpe's, at most
BIG_VOCAB = 65536  # a size large trainers use; the memory rows were first measured here
MEMORY_BYTES = 500e6  # the memory row: the prefix of shards nearest this
SIZES = (0.25, 0.5, 1.0)  # the size rows: these shares of the shards
BIG_REPEAT = 2


def own_process(m):
    """The measurement with tokenmill's own process tree's RSS and CPU (cliruns)."""
    r = m.result
    return dataclasses.replace(
        m, peak_rss=r["peak_rss"], tree_rss=r["tree_rss"], cpu_seconds=r["cpu_seconds"]
    )


def big_repeat(ctx) -> int:
    return min(ctx.repeat, BIG_REPEAT)


def describe(stats: dict, total: int) -> str:
    return f"{stats['shards']} of {total} shards, {stats['bytes'] / MB:.0f} MB"


# ---- training on the multilingual slice ------------------------------------


def slice_training(ctx) -> tuple[list, list, dict]:
    made = make_slice(ctx)
    if made is None:
        return [], [f"WARNING: no train-slice rows: {ctx.corpus} has no language column."], {}
    path, n_bytes, _ = made
    tmp = ctx.tmp / "train-slice"
    tmp.mkdir(exist_ok=True)
    common = {"corpus": str(path), "tmp": str(tmp), "vocab_size": ctx.vocab_size}
    ours, rust = ctx.rounds(
        [
            (
                "train_tokenmill",
                common | {"workers": ctx.workers, "tokenizer": str(tmp / "tokenizer.json")},
            ),
            ("train_rustbpe", common),
        ],
        ctx.env,
    )
    base = ctx.row("train slice", "tokenmill count+merge+train", ours, n_bytes=n_bytes)
    rows = [base, ctx.row("train slice", "rustbpe", rust, base, n_bytes)]
    stages = ", ".join(f"{k} {v:.2f} s" for k, v in ours.result["stages"].items())
    note = (
        f"train slice rows: the multilingual slice ({n_bytes / MB:.1f} MB), vocabulary "
        f"{ctx.vocab_size} as in the train rows. Merges learned: tokenmill "
        f"{ours.result['merges']}, rustbpe {rust.result['merges']}. tokenmill by stage: "
        f"{stages} ({ours.result['words']} distinct pre-tokens)."
    )
    return rows, [note], {"train_slice": {"tokenmill": ours.result, "rustbpe": rust.result}}


# ---- memory on ~500 MB of C ---------------------------------------------------


def memory(ctx) -> tuple[list, list, dict]:
    folder, stats = prefix(ctx, nearest_prefix(ctx.big, MEMORY_BYTES))
    out = str(ctx.tmp / "memory-run")
    # tokenmill's --vocab-size also counts <|endoftext|>: one more for the same merges.
    ours, rust = ctx.rounds(
        [
            (
                "run_tokenmill",
                {"corpus": str(folder), "out": out, "workers": ctx.workers}
                | {"vocab_size": BIG_VOCAB + 1},
            ),
            ("train_rustbpe", {"corpus": str(folder), "vocab_size": BIG_VOCAB}),
        ],
        ctx.env,
        big_repeat(ctx),
    )
    stages = ctx.run(
        "stages_tokenmill",
        ctx.env,
        repeat=1,
        corpus=str(folder),
        out=out,
        workers=ctx.workers,
        vocab_size=BIG_VOCAB + 1,
    )
    n = stats["bytes"]
    phase = f"memory {n / MB:.0f} MB of C"
    base = ctx.row(phase, "tokenmill run (count+merge+train+encode)", own_process(ours), None, n)
    rows = [base, ctx.row(phase, "rustbpe train_from_iterator (streaming)", rust, base, n)]
    for stage, s in stages.result["stages"].items():
        m = dataclasses.replace(stages, result=s, **{k: s[k] for k in OWN})
        label = f"tokenmill {stage} (its own process)"
        rows.append(ctx.row("memory stages", label, m, n_bytes=n if stage in TEXT_STAGES else 0))
    s = ours.result["stages"]
    trained = s["count"] + s["merge"] + s["train"]
    notes = [
        f"memory rows: the first {describe(stats, len(shard_sizes(ctx.big)))} of the C corpus "
        f"({ctx.big}, bench/build_linux.py), vocabulary {BIG_VOCAB}, cl100k pattern. "
        f"tokenmill: one `tokenmill run DATA OUT --vocab-size {BIG_VOCAB + 1}` process "
        "(<|endoftext|> counted; the same merges), RSS of its own process only; rustbpe: "
        "Tokenizer.train_from_iterator over the documents read with PyArrow 1024 at a time, "
        "in one child process (its interpreter and PyArrow included). Merges: rustbpe "
        f"{rust.result['merges']}. Best of {big_repeat(ctx)} rounds for wall time. "
        f"tokenmill's run by stage: {stage_times(s)}; count+merge+train {trained:.1f} s, "
        f"{trained / rust.result['seconds']:.2f}x rustbpe's wall "
        f"({ours.result['words']} distinct pre-tokens).",
        "memory stages rows: the same work, each stage its own `tokenmill` process "
        "(count DATA COUNTS; merge; train; encode DATA TOKENS --tokenizer), run once: "
        "each one's peak RSS is what bounds that stage's memory.",
    ]
    extra = {"tokenmill": ours.result, "rustbpe": rust.result, "stages": stages.result}
    return rows, notes, {"memory": extra | {"bytes": n, "shards": stats["shards"]}}


OWN = ("peak_rss", "tree_rss", "cpu_seconds")
TEXT_STAGES = {"count", "encode"}


def stage_times(stages: dict) -> str:
    return ", ".join(f"{k} {v:.1f} s" for k, v in stages.items())


# ---- growth with size -------------------------------------------------------


def sizes(ctx) -> tuple[list, list, dict]:
    """`tokenmill run` on a quarter, a half and all of the C corpus's shards:
    each shard samples the whole tree, so only the amount changes."""
    total = len(shard_sizes(ctx.big))
    counts = sorted({max(1, math.ceil(total * share)) for share in SIZES})
    prefixes = [prefix(ctx, k) for k in counts]
    runs = ctx.rounds(
        [
            (
                "run_tokenmill",
                {"corpus": str(folder), "out": str(ctx.tmp / f"size-run-{k}")}
                | {"workers": ctx.workers, "vocab_size": BIG_VOCAB + 1},
            )
            for k, (folder, _) in zip(counts, prefixes, strict=True)
        ],
        ctx.env,
        big_repeat(ctx),
    )
    rows, lines, extra = [], [], []
    for (_, stats), m in zip(prefixes, runs, strict=True):
        label = f"tokenmill run, {describe(stats, total)}"
        rows.append(ctx.row("size", label, own_process(m), n_bytes=stats["bytes"]))
        lines.append(
            f"{stats['bytes'] / MB:.0f} MB: {stage_times(m.result['stages'])}, "
            f"{m.result['words']} distinct pre-tokens, the shards' largest documents "
            + ", ".join(f"{b / MB:.1f}" for b in stats["largest"])
            + " MB (top two)"
        )
        extra.append({"bytes": stats["bytes"], "shards": stats["shards"], **m.result})
    notes = [
        f"size rows: `tokenmill run --vocab-size {BIG_VOCAB + 1}` on prefixes of the C corpus's "
        f"shards ({ctx.big}; every shard samples the whole kernel tree), best of "
        f"{big_repeat(ctx)} rounds. By stage: " + "; ".join(lines) + ". Encode's peak "
        "follows the largest documents: each is one row of ids, which PyArrow writes "
        "with several times their size in buffers, two shards at a time.",
        growth_note(rows),
    ]
    return rows, notes, {"sizes": extra}


def growth_note(rows: list[Row]) -> str:
    """Time per MB and peak RSS of each size against the smallest: 1.00 and
    1.00 would be linear time and flat memory."""
    first = rows[0]
    wall, cpu = first.seconds / first.n_bytes, first.cpu_seconds / first.n_bytes
    parts = [
        f"{r.n_bytes / first.n_bytes:.1f}x the bytes: {r.seconds / r.n_bytes / wall:.2f}x "
        f"the wall time per MB ({r.cpu_seconds / r.n_bytes / cpu:.2f}x the CPU time), "
        f"{r.tree_rss / first.tree_rss:.2f}x the peak RSS"
        for r in rows[1:]
    ]
    return (
        f"Growth against the smallest size ({first.n_bytes / MB:.0f} MB: "
        f"{1e9 * wall:.0f} ms wall and {1e9 * cpu:.0f} ms CPU per MB, "
        f"{first.tree_rss / MB:.0f} MB peak RSS): " + "; ".join(parts) + ". 1.00 is linear "
        "time and flat memory; CPU time (user + system of tokenmill's process) is the "
        "steadier on a shared machine."
    )


# ---- the targets ------------------------------------------------------------


def targets_note(rows: list[Row]) -> list[str]:
    """Issue 18's training and memory ratios, where their rows ran."""
    parts = []
    for r in rows:
        if r.contender != "rustbpe" and not r.contender.startswith("rustbpe "):
            continue
        if r.phase in ("train", "train slice"):
            parts.append(
                f"{r.phase}: tokenmill count+merge+train {r.baseline.seconds / r.seconds:.2f}x "
                f"rustbpe's wall (target ≤ {TRAIN_TARGET})"
            )
        elif r.phase.startswith("memory "):
            parts.append(
                f"{r.phase}: tokenmill run's peak RSS {r.memory_ratio:.2f}x rustbpe's "
                f"(target ≤ {MEMORY_TARGET})"
            )
    return ["Training and memory ratios: " + "; ".join(parts) + "."] if parts else []
