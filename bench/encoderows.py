"""The whole-process encode rows: tokenmill against gigatoken, fastokens and
tiktoken at each worker count of --workers-list, with o200k_base and
cl100k_base (and, on the bench corpus and its slice, the vocabulary tokenmill
learned), on each corpus: the bench corpus (`real`), its multilingual slice
(`slice`), ~500 MB of C (`code`) and the multilingual corpus
(`multilingual`). Every contender is a whole process timed from start to
exit; in every group, tokenmill's ids are compared with gigatoken's and, once
per vocabulary, with fastokens' and tiktoken's, document by document.

Each phase takes a Context (context.py) and returns (rows, notes, extra);
`workers_table` is the many-core table of RESULTS.md.
"""

from __future__ import annotations

import dataclasses
import re
import shutil

from corpora import Corpus, corpora
from exactness import differences
from realrows import real_vocabs, vocabs
from report import Row

TOKENMILL = "tokenmill encode CLI (whole process)"
GIGA_JOB = "gigatoken encode_files + PyArrow write (the same job)"
GIGA_BARE = "gigatoken encode_files, writing nothing"
FASTOKENS = "fastokens encode_batch_flat (whole process)"
TIKTOKEN = "tiktoken encode_ordinary_batch (whole process)"
READ = "Python + PyArrow reading the text as Arrow, nothing else (whole process)"
# peer -> how many times faster than it tokenmill is to be (its wall ÷ tokenmill's)
TARGETS = {GIGA_JOB: 1.5, GIGA_BARE: 1.2, FASTOKENS: 1.5, TIKTOKEN: 4.0}
SHORT = {
    TOKENMILL: "tokenmill",
    GIGA_JOB: "gigatoken, the same job",
    GIGA_BARE: "gigatoken, writing nothing",
    FASTOKENS: "fastokens",
    TIKTOKEN: "tiktoken",
}
PHASE = re.compile(r"^encode (?P<corpus>\S+) (?P<vocab>.+) w(?P<workers>\d+)$")


def group(v, corpus: Corpus, workers: int, tokens, out, first: bool) -> list[tuple]:
    """(label, contender, params) of one vocabulary and worker count."""
    common = {"corpus": str(corpus.path)}
    runs = [
        (TOKENMILL, "process_tokenmill", v.tokenmill() | {"workers": workers, "tokens": tokens}),
        (GIGA_JOB, "process_gigatoken", v.gigatoken() | {"threads": workers, "out": out}),
        (GIGA_BARE, "process_gigatoken", v.gigatoken() | {"threads": workers}),
        (FASTOKENS, "process_peer", v.peer() | {"peer": "fastokens", "threads": workers}),
        (TIKTOKEN, "process_peer", v.peer() | {"peer": "tiktoken", "threads": workers}),
    ]
    if first:  # reading alone does not change with the vocabulary or the workers
        runs.append((READ, "process_peer", v.peer() | {"peer": "read"}))
    return [(label, name, common | params) for label, name, params in runs]


def whole(ctx, phase: str, label: str, m, base: Row | None, n_bytes: int) -> Row:
    """The row of a whole process: its own wall and CPU time, not its harness's."""
    r = m.result
    m = dataclasses.replace(m, cpu_seconds=r["cpu_seconds"], process_seconds=r["seconds"])
    return ctx.row(phase, label, m, base, n_bytes)


def encode_rows(ctx, corpus: Corpus, vocab_list: list) -> tuple[list, list, dict]:
    rows, notes, extra = [], [], {}
    for v in vocab_list:
        checks, tokens, last = {}, {}, None
        for i, w in enumerate(ctx.workers_list):
            slug = f"{corpus.name}-{v.name.replace(' ', '-')}-w{w}"
            out, mine = str(ctx.tmp / f"gigatoken-{slug}"), str(ctx.tmp / f"tokens-{slug}")
            runs = group(v, corpus, w, mine, out, i == 0)
            done = ctx.rounds([(n, p) for _, n, p in runs], ctx.env, corpus.rounds(ctx))
            phase = f"encode {corpus.name} {v.name} w{w}"
            base = whole(ctx, phase, TOKENMILL, done[0], None, corpus.n_bytes)
            rows.append(base)
            for (label, _, _), m in zip(runs[1:], done[1:], strict=True):
                rows.append(whole(ctx, phase, label, m, base, corpus.n_bytes))
            params = {"corpus": str(corpus.path), "tokens": mine, "out": out}
            checks[f"w{w}"] = ctx.run("verify_gigatoken", ctx.env, repeat=1, **params).result
            shutil.rmtree(out)
            if last:
                shutil.rmtree(last)
            last = mine
            for (label, _, _), m in zip(runs, done, strict=True):
                if label in SHORT:
                    tokens.setdefault(SHORT[label], set()).add(m.result["tokens"])
        params = {"corpus": str(corpus.path), "tokens": last, "peer_ranks": v.peer_ranks}
        checks["peers"] = ctx.run("verify_peers", ctx.env, 1, pattern=v.pattern, **params).result
        shutil.rmtree(last)
        key = f"{corpus.name} {v.name}"
        extra[key] = {"checks": checks, "tokens": {k: sorted(t) for k, t in tokens.items()}}
        notes.append(exactness_note(key, checks, extra[key]["tokens"]))
    return rows, notes, {f"{corpus.name}_whole_process": extra}


def exactness_note(key: str, checks: dict, tokens: dict) -> str:
    workers = [k for k in checks if k != "peers"]
    parts = [
        f"{w}: " + "; ".join(differences(checks[w], ("gigatoken",))) + " (its written ids)"
        for w in workers
    ]
    parts += differences(checks["peers"], ("fastokens", "tiktoken"))
    counts = ", ".join(f"{k} {'/'.join(map(str, v))}" for k, v in tokens.items())
    differ = mismatches({"_whole_process": {key: {"checks": checks}}})
    return (
        ("MISMATCH, THE RUN FAILS: " if differ else "")
        + f"Exactness, encode {key}: tokenmill's ids from its token shards, "
        f"{'; '.join(parts)} (those two encoding again, untimed, against the {workers[-1]} "
        f"shards). Tokens: {counts}."
    )


def mismatches(extra: dict) -> int:
    """Documents whose ids differ from a peer's, over every group of every corpus."""
    return sum(
        result["mismatched_documents"]
        for key, groups in extra.items()
        if key.endswith("_whole_process")
        for g in groups.values()
        for check in g["checks"].values()
        for result in check.values()
        if isinstance(result, dict)
    )


# ---- the phases -------------------------------------------------------------


def on(ctx, name: str, vocab_list) -> tuple[list, list, dict]:
    found = corpora(ctx, (name,))
    if not found:
        return [], [f"WARNING: no encode {name} rows: the run has no such corpus."], {}
    corpus = found[0]
    rows, notes, extra = encode_rows(ctx, corpus, vocab_list(ctx))
    return rows, [f"encode {name} rows: {corpus.about}.", *notes], extra


def real_encoding(ctx) -> tuple[list, list, dict]:
    return on(ctx, "bench", vocabs)


def slice_encoding(ctx) -> tuple[list, list, dict]:
    return on(ctx, "slice", vocabs)


def code_encoding(ctx) -> tuple[list, list, dict]:
    return on(ctx, "C", lambda c: real_vocabs(c.vocabularies))


def multilingual_encoding(ctx) -> tuple[list, list, dict]:
    return on(ctx, "multilingual", lambda c: real_vocabs(c.vocabularies))


# ---- the notes and the many-core table ----------------------------------------


WHOLE_PROCESS = (
    "encode rows named `encode CORPUS VOCABULARY wN`: each contender is one whole process, "
    "timed by its parent from start to exit (interpreter start-up, imports, loading the "
    "vocabulary, reading the Parquet text), at N workers: tokenmill `tokenmill encode DATA OUT "
    "--tokenizer FILE --pattern PRESET --no-eos --workers N`, which writes its token shards "
    "(Parquet, zstd); gigatoken Tokenizer.from_tiktoken(FILE, pretokenizer=o200k|gpt4, "
    "special_tokens={}) and one encode_files(ParquetFileSource(shards)) on RAYON_NUM_THREADS=N, "
    "then, for the same job, its ids written through PyArrow as Parquet (a list<uint32> "
    "column, zstd, no dictionary, as tokenmill writes), a file per shard on N threads "
    "(bench/gigatoken_process.py), or, writing nothing, left in memory; fastokens "
    "Tokenizer.from_tiktoken(FILE, pattern=REGEX) and one encode_batch_flat over all "
    "documents on RAYON_NUM_THREADS=N; tiktoken load_tiktoken_bpe + Encoding and one "
    "encode_ordinary_batch(num_threads=N) per shard; both read the text with PyArrow and keep "
    "their ids in memory (bench/standalone.py). For tokenmill's own vocabulary, tokenmill reads "
    "its tokenizer.json and the peers the same ranks written as a .tiktoken file, with the "
    "cl100k pattern. `cores` in the workers table: each process's CPU time over its wall time."
)


def targets_note(rows: list[Row]) -> list[str]:
    """What the whole-process rows mean, and the ratios they are held to."""
    parts = []
    for peer, target in TARGETS.items():
        got = [r for r in rows if r.contender == peer and PHASE.match(r.phase)]
        if got:
            short = ", ".join(
                f"{r.phase.removeprefix('encode ')} {r.speedup:.2f}"
                + ("" if r.speedup >= target else " (below)")
                for r in got
            )
            parts.append(f"{SHORT[peer]} ÷ tokenmill (target ≥ {target}): {short}")
    if not parts:
        return []
    return [WHOLE_PROCESS, "Whole-process ratios: " + "; ".join(parts) + "."]


COLUMNS = (TOKENMILL, GIGA_JOB, GIGA_BARE, FASTOKENS, TIKTOKEN)
CORES = {TOKENMILL: "tokenmill", GIGA_JOB: "gigatoken job", GIGA_BARE: "gigatoken bare"}
CORES |= {FASTOKENS: "fastokens", TIKTOKEN: "tiktoken"}


def workers_table(rows: list[Row]) -> str:
    """The encode rows by corpus, vocabulary and workers, one line each:
    tokenmill's wall, each peer's wall and tokenmill's speed over it, and
    the cores each process kept busy."""
    lines: dict[tuple, dict[str, Row]] = {}
    for r in rows:
        m = PHASE.match(r.phase)
        if m and r.contender in COLUMNS:
            key = (m["corpus"], m["vocab"], int(m["workers"]))
            lines.setdefault(key, {})[r.contender] = r
    if not lines:
        return ""
    header = ["corpus", "vocabulary", "workers", *(SHORT[c] for c in COLUMNS)]
    header.append("cores used: " + " / ".join(CORES[c] for c in COLUMNS))
    out = ["| " + " | ".join(header) + " |", "| --- | --- | " + "---: | " * 6 + "--- |"]
    for (corpus, vocab, workers), got in lines.items():
        cells = [corpus, vocab, str(workers)]
        for c in COLUMNS:
            r = got.get(c)
            if r is None:
                cells.append("")
            elif c == TOKENMILL:
                cells.append(f"{r.seconds:.2f}")
            else:
                cells.append(f"{r.seconds:.2f} ({r.speedup:.2f})")
        cores = [f"{got[c].cpu_seconds / got[c].seconds:.1f}" if c in got else "" for c in COLUMNS]
        cells.append(" / ".join(cores))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)
