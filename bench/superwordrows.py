"""Superword tokens (`--superword-at`, SuperBPE) against ordinary BPE of the
same size, 65536 ids, the transition at 90% of them (the paper puts it at
80-90%):

- training: count, merge and train as `tokenmill run` does them, through the
  tokenizer, ordinary and superword in turn, ROUNDS times or more (the
  fastest of each counts), each in a child process of its own, with the
  variables a `tokenmill` process sets for itself; the bar: superword
  training takes at most TRAIN_TARGET times ordinary training. Peak RSS of
  each child (its interpreter included, alike for both).
- encoding: both tokenizers on the whole corpus, in one child each.
- bytes per token on held-out text: the corpus split by a hash of each
  document, a tenth held out; both tokenizers trained on the rest, then the
  held-out documents encoded, per source and per language. The same on its
  English prose alone (source PROSE, the paper's setting), and on the
  multilingual corpus when the run has it.

run.py runs it as the `superword` phase; alone:

    python bench/superwordrows.py [CORPUS] [--multilingual DIR] [--rounds 3] [--tmp DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

from cliruns import measured, standalone
from contenders import fresh
from corpus import TEXT, corpus_stats, parquet_shards
from measure import busy_seconds, wait_for_quiet
from report import MB, Row

from tokenmill.entry import process_environment

VOCAB = 65536  # ids in all, <|endoftext|> included, both tokenizers
SHARE = 0.9  # the transition point's share of the ids
TRAIN_TARGET = 2.0  # superword training time ÷ ordinary, at most
HELD_OUT = 10  # one document in this many is held out (by a hash of its text)
GROUPS = ("source", "language")  # the held-out rows, per value of these columns
MOST_GROUPS = 12  # of each column, the values with the most held-out bytes
ROUNDS = 3  # training rounds, at least (--repeat when more): a few seconds each
PROSE = "prose-en"  # the bench corpus's English prose (bench/build_corpus.py)


def transition(vocab: int) -> int:
    return round(vocab * SHARE)


# ---- the phase -----------------------------------------------------------------


def superword(ctx) -> tuple[list[Row], list[str], dict]:
    vocab = getattr(ctx, "superword_vocab", VOCAB)
    at = transition(vocab)
    runs = train_rounds(ctx, ctx.corpus, vocab, ctx.workers, max(ctx.repeat, ROUNDS))
    ordinary = min(runs["ordinary"], key=lambda r: r["seconds"])
    sw = min(runs["superword"], key=lambda r: r["seconds"])
    base = row(ctx, "train ordinary BPE", ordinary)
    rows = [base, row(ctx, f"train superword, --superword-at {at}", sw, base)]
    encode = {
        kind: child(ctx, "encode", {"corpus": str(ctx.corpus), "tokenizer": r["tokenizer"]})
        for kind, r in (("ordinary", ordinary), ("superword", sw))
    }
    enc_base = row(ctx, "encode ordinary BPE (in-process)", encode["ordinary"])
    rows += [enc_base, row(ctx, "encode superword (in-process)", encode["superword"], enc_base)]
    ratio = sw["seconds"] / ordinary["seconds"]
    notes = [
        f"Superword rows: {vocab} ids, --superword-at {at}, on {ctx.corpus}. The × column "
        "of a superword row is its time over ordinary BPE's (training: at most "
        f"{TRAIN_TARGET:.0f}x wanted; {ratio:.2f}x here, "
        f"{'met' if ratio <= TRAIN_TARGET else 'NOT met'}); the RSS × column ordinary's "
        "tree RSS over superword's.",
        "Superword training by stage: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in sw["stages"].items())
        + "; ordinary: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in ordinary["stages"].items())
        + f". Word tables: {ordinary['words']} distinct words, {sw['superwords']} distinct "
        f"stage-2 words ({sw['superword_bytes'] / MB:.1f} MB of text).",
    ]
    held = {"bench": held_out(ctx, ctx.corpus, "bench", vocab)}
    if PROSE in sources(ctx.corpus):
        held[PROSE] = held_out(ctx, ctx.corpus, PROSE, vocab, source=PROSE)
    multilingual = getattr(ctx, "multilingual", None)
    if multilingual is not None and any(Path(multilingual).glob("*.parquet")):
        held["multilingual"] = held_out(ctx, Path(multilingual), "multilingual", vocab)
    about = {
        "bench": "the bench corpus",
        PROSE: f"the bench corpus's English prose ({PROSE}) alone",
        "multilingual": "the multilingual corpus",
    }
    for name, result in held.items():
        notes.append(held_out_note(about[name], result, at))
    extra = {"superword": {"train": runs, "encode": encode, "held_out": held}}
    return rows, notes, extra


def train_rounds(ctx, corpus: Path, vocab: int, workers: int, rounds: int) -> dict[str, list[dict]]:
    """`rounds` training children of each kind, ordinary and superword in
    turn, on `workers` workers: each kind's results."""
    runs: dict[str, list[dict]] = {"ordinary": [], "superword": []}
    for _ in range(rounds):
        for kind in runs:
            at = transition(vocab) if kind == "superword" else None
            params = {"corpus": str(corpus), "vocab": vocab, "workers": workers}
            runs[kind].append(child(ctx, "train", params | {"superword_at": at}))
    return runs


def row(ctx, contender: str, run: dict, baseline: Row | None = None) -> Row:
    """A row of the phase; against `baseline` (ordinary BPE's), the ×
    column is this row's time over the baseline's: what superword tokens cost."""
    return Row(
        "superword",
        contender,
        run["seconds"],
        run["peak_rss"],
        run["tree_rss"],
        run.get("bytes", ctx.n_bytes),
        baseline,
        cpu_seconds=run["cpu_seconds"],
        process_seconds=run["process_seconds"],
        other_cores=run["other_cores"],
    )


def child(ctx, mode: str, params: dict) -> dict:
    """Run this file's `mode` in a child process; its result, with the
    child's measures (wall of its whole life, CPU, peak RSS, other load)."""
    out = ctx.tmp / f"superword-{mode}.json"
    params = params | {"tmp": str(ctx.tmp / f"superword-{mode}")}
    if ctx.quiet_wait:
        wait_for_quiet(ctx.quiet_wait)
    print(f"running superword {mode} {params} ...", file=sys.stderr, flush=True)
    busy = busy_seconds()
    # The variables a `tokenmill` process sets for itself (allocators, BLAS).
    env = process_environment() | dict(os.environ)
    m = measured([sys.executable, __file__, "--child", mode, json.dumps(params), str(out)], env)
    other = max(0.0, busy_seconds() - busy - m["cpu_seconds"]) / m["seconds"]
    result = json.loads(out.read_text())
    print(f"  {result['seconds']:.2f} s", file=sys.stderr)
    return result | {
        "process_seconds": m["seconds"],
        "cpu_seconds": m["cpu_seconds"],
        "peak_rss": m["peak_rss"],
        "tree_rss": m["tree_rss"],
        "other_cores": other,
    }


def sources(corpus: Path) -> set[str]:
    import pyarrow.parquet as pq

    found: set[str] = set()
    for shard in parquet_shards(corpus):
        if "source" in pq.read_schema(shard).names:
            found.update(pq.read_table(shard, columns=["source"])["source"].to_pylist())
    return found


def held_out(ctx, corpus: Path, name: str, vocab: int, source: str | None = None) -> dict:
    """Bytes per token of both tokenizers on `corpus`'s held-out tenth (of
    the documents of `source` alone, when given)."""
    train, held = ctx.tmp / f"superword-{name}-train", ctx.tmp / f"superword-{name}-held"
    split(corpus, train, held, source)
    return child(ctx, "held_out", {"train": str(train), "held": str(held), "vocab": vocab})


def split(corpus: Path, train: Path, held: Path, source: str | None = None) -> None:
    """`corpus`'s shards (their documents of `source`, when given), each split
    into `train` and `held` by a hash of each document's text: the same
    split every run."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    fresh(train, held)
    train.mkdir(parents=True)
    held.mkdir(parents=True)
    for shard in parquet_shards(corpus):
        table = pq.read_table(shard)
        if source is not None:
            table = table.filter(pc.equal(table["source"], source))
        out = [
            hashlib.blake2b(t.encode(), digest_size=8).digest()[0] % HELD_OUT == 0
            for t in table[TEXT].to_pylist()
        ]
        mask = pa.array(out)
        pq.write_table(table.filter(pc.invert(mask)), train / shard.name)
        pq.write_table(table.filter(mask), held / shard.name)


def held_out_note(name: str, result: dict, at: int) -> str:
    lines = [
        f"Bytes per token on held-out text of {name} ({result['documents']} "
        f"documents, {result['bytes'] / MB:.1f} MB; both tokenizers trained on the other "
        f"{result['train_bytes'] / MB:.1f} MB), ordinary BPE against superword "
        f"(--superword-at {at}); fewer tokens: the share superword saves.",
        "",
        "| group | documents | MB | ordinary | superword | fewer tokens |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for g in result["groups"]:
        saved = 1 - g["superword_tokens"] / g["ordinary_tokens"]
        lines.append(
            f"| {g['name']} | {g['documents']} | {g['bytes'] / MB:.2f} | "
            f"{g['bytes'] / g['ordinary_tokens']:.3f} | {g['bytes'] / g['superword_tokens']:.3f} "
            f"| {saved:.1%} |"
        )
    return "\n".join(lines)


# ---- the child's work ------------------------------------------------------------


def train_child(p: dict) -> dict:
    """count + merge + train through the stage functions `tokenmill run` uses:
    with superword tokens, both word tables, counted from one read."""
    from tokenmill.config import Config
    from tokenmill.stages.count import run_counts
    from tokenmill.stages.merge import run_merge
    from tokenmill.stages.train import run_train
    from tokenmill.tokenizer.superword import PATTERN

    tmp, corpus = Path(p["tmp"]), Path(p["corpus"])
    config = Config(workers=p["workers"], vocab_size=p["vocab"], superword_at=p["superword_at"])
    fresh(tmp)
    tmp.mkdir(parents=True)
    start = time.perf_counter()
    stages = {}
    tables = [(tmp / "counts", None)]
    if p["superword_at"] is not None:
        tables.append((tmp / "superword-counts", PATTERN))
    count = run_counts(corpus, tables, config)[0]
    merge = run_merge(tmp / "counts", tmp / "counts.parquet")
    stages["count"], stages["merge"] = count["seconds"], merge["seconds"]
    table2 = merge2 = None
    result: dict = {}
    if p["superword_at"] is not None:
        table2 = tmp / "superword-counts.parquet"

        def merge2():  # as run does it: beside stage 1's training, handing the table over
            merged = run_merge(tmp / "superword-counts", table2, keep=True)
            stages["superword-merge"] = merged.seconds
            return merged.table

    train = run_train(tmp / "counts.parquet", tmp / "tokenizer.json", config, None, table2, merge2)
    stages["train"] = train["seconds"]
    seconds = time.perf_counter() - start
    if table2 is not None:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        words = pq.read_table(table2, columns=["word"])["word"]
        result["superwords"] = len(words)
        result["superword_bytes"] = pc.sum(pc.binary_length(words)).as_py()
    kept = [tmp.parent / f"{tmp.name}-{'superword' if table2 else 'ordinary'}.json"]
    shutil.copy(tmp / "tokenizer.json", kept[0])
    return result | {
        "seconds": seconds,
        "stages": stages,
        "words": merge["words"],
        "tokenizer": str(kept[0]),
        "bytes": corpus_stats(parquet_shards(corpus))["bytes"],
    }


def encode_child(p: dict) -> dict:
    """The corpus encoded in one process, its Parquet read first (not timed)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from tokenmill import Tokenizer

    tok = Tokenizer.load(p["tokenizer"])
    tok.encode_arrow(pa.array(["warm up"], pa.large_string()))
    docs = [pq.read_table(s, columns=[TEXT])[TEXT] for s in parquet_shards(Path(p["corpus"]))]
    start = time.perf_counter()
    tokens = sum(len(tok.encode_arrow(d.combine_chunks(), eos=False)[0]) for d in docs)
    return {
        "seconds": time.perf_counter() - start,
        "tokens": tokens,
        "bytes": sum(pc.sum(pc.binary_length(d)).as_py() or 0 for d in docs),
    }


def held_out_child(p: dict) -> dict:
    """Both tokenizers trained on `train`, then `held` encoded: tokens per group."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from tokenmill import Tokenizer

    vocab = p["vocab"]
    toks = {}
    for kind, at in (("ordinary", None), ("superword", transition(vocab))):
        trained = train_child(
            {"tmp": f"{p['tmp']}-{kind}", "corpus": p["train"], "vocab": vocab}
            | {"workers": 0, "superword_at": at}
        )
        toks[kind] = Tokenizer.load(trained["tokenizer"])
    groups: dict[str, dict] = {}
    held = [pq.read_table(s) for s in parquet_shards(Path(p["held"]))]
    table = pa.concat_tables(held)
    texts = table[TEXT].combine_chunks().cast(pa.large_string())
    n_bytes = pc.binary_length(texts).to_numpy()
    lens = {kind: tok.encode_arrow(texts, eos=False)[1].to_numpy() for kind, tok in toks.items()}
    labels = [("all", ["all"] * len(texts))]
    for column in GROUPS:
        values = table[column].to_pylist() if column in table.column_names else []
        if len(set(values)) > 1:  # one value: the row of all again
            labels.append((column, values))
    for column, values in labels:
        for i, value in enumerate(values):
            key = value if column == "all" else f"{column} {value}"
            g = groups.setdefault(key, dict.fromkeys(("documents", "bytes", "o", "s"), 0))
            g["documents"] += 1
            g["bytes"] += int(n_bytes[i])
            g["o"] += int(lens["ordinary"][i])
            g["s"] += int(lens["superword"][i])
    kept = ["all"]
    for column in GROUPS:
        mine = [k for k in groups if k.startswith(f"{column} ")]
        kept += sorted(mine, key=lambda k: -groups[k]["bytes"])[:MOST_GROUPS]
    groups = {k: groups[k] for k in kept}
    train_bytes = corpus_stats(parquet_shards(Path(p["train"])))["bytes"]
    return {
        "seconds": 0.0,
        "documents": len(texts),
        "bytes": int(n_bytes.sum()),
        "train_bytes": train_bytes,
        "groups": [
            {
                "name": name,
                "documents": g["documents"],
                "bytes": g["bytes"],
                "ordinary_tokens": g["o"],
                "superword_tokens": g["s"],
            }
            for name, g in groups.items()
        ],
    }


CHILD = {"train": train_child, "encode": encode_child, "held_out": held_out_child}


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        mode, params, out = sys.argv[2:5]
        Path(out).write_text(json.dumps(CHILD[mode](json.loads(params))) + "\n")
        return

    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--multilingual", type=Path, help="bench/build_multilingual.py's corpus")
        ap.add_argument("--vocab-size", type=int, default=VOCAB)

    standalone(
        __doc__,
        lambda ctx, args: superword(ctx),
        rounds=ROUNDS,
        options=options,
        context=lambda args, tmp: {
            "repeat": args.rounds,
            "workers": 0,
            "multilingual": args.multilingual,
            "superword_vocab": args.vocab_size,
        },  # fmt: skip
        line=lambda r: (
            f"{r.contender}: {r.seconds:.2f} s, peak RSS {r.peak_rss / MB:.0f} MB"
            + ("" if r.speedup is None else f", ÷ ordinary {r.speedup:.2f}")
        ),
    )


if __name__ == "__main__":
    main()
