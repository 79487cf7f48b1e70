"""Issue 18's rows: tokenmill against fastokens and tiktoken with real model
vocabularies, as whole processes, on the corpus and on its multilingual slice;
loading a vocabulary; and the floor under encode, per core.

Each phase takes run.py's Context and returns (rows, notes, extra), like the
phases in run.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from build_corpus import MULTILINGUAL
from corpus import TEXT, parquet_shards
from exactness import differences
from report import Row
from vocab import CL100K, REAL, write_tiktoken

from tokenmill import _native

FLOOR_VOCAB = "o200k_base"  # the vocabulary of the largest current models
TARGETS = {"fastokens": 1.5, "tiktoken": 6.0}  # peer wall ÷ tokenmill wall, at least
LOAD_TARGET = 0.3  # seconds for tokenmill to load a real vocabulary
READ = "Python + PyArrow reading the text as Arrow, nothing else (whole process)"


@dataclass(frozen=True)
class Vocab:
    name: str
    ranks: str  # what tokenmill reads: a .tiktoken file or its own tokenizer.json
    preset: str | None  # tokenmill's --pattern (None: the file has its own)
    peer_ranks: str  # the same vocabulary as a .tiktoken file, for the peers
    pattern: str  # the same pattern as a regex, for the peers

    def tokenmill(self) -> dict:
        return {"ranks": self.ranks, "preset": self.preset}

    def peer(self) -> dict:
        return {"ranks": self.peer_ranks, "pattern": self.pattern}


def real_vocabs(folder: Path) -> list[Vocab]:
    vocabs = []
    for name, (file, preset) in REAL.items():
        path = folder / file
        if not path.exists():
            raise SystemExit(f"{path} is missing (vocabularies/README.md says where it comes from)")
        regex = _native.preset_regex(preset)
        vocabs.append(Vocab(name, str(path), preset, str(path), regex))
    return vocabs


def own_vocab(ctx) -> Vocab:
    """tokenmill's vocabulary learned in the training phase; the peers get it as
    a .tiktoken file (the same ranks)."""
    ranks = ctx.tmp / f"tokenmill-{ctx.vocab_size}.tiktoken"
    write_tiktoken(Path(ctx.tokenizer), ranks)
    return Vocab(f"own {ctx.vocab_size // 1024}k", ctx.tokenizer, None, str(ranks), CL100K)


def vocabs(ctx) -> list[Vocab]:
    return [*real_vocabs(ctx.vocabularies), own_vocab(ctx)]


# ---- encoding as whole processes ----------------------------------------


def whole_processes(ctx, scope: str, corpus: Path, n_bytes: int) -> tuple[list, list, dict]:
    rows, notes, extra = [], [], {}
    for v in vocabs(ctx):
        out = str(ctx.tmp / f"tokens-{scope}-{v.name.replace(' ', '-')}")
        common = {"corpus": str(corpus)}
        ours_params = common | v.tokenmill() | {"workers": ctx.workers, "tokens": out}
        ours, fast, tik, read = ctx.rounds(
            [
                ("process_tokenmill", ours_params),
                ("process_peer", common | v.peer() | {"peer": "fastokens"}),
                ("process_peer", common | v.peer() | {"peer": "tiktoken"}),
                ("process_peer", common | v.peer() | {"peer": "read"}),
            ],
            ctx.env,
        )
        params = {"corpus": str(corpus), "tokens": out, "peer_ranks": v.peer_ranks}
        check = ctx.run("verify_peers", ctx.env, repeat=1, pattern=v.pattern, **params).result
        phase = f"{scope} {v.name}"
        base = ctx.row(phase, "tokenmill encode CLI (whole process)", ours, n_bytes=n_bytes)
        rows += [
            base,
            ctx.row(phase, "fastokens encode_batch_flat (whole process)", fast, base, n_bytes),
            ctx.row(phase, "tiktoken encode_ordinary_batch (whole process)", tik, base, n_bytes),
            ctx.row(phase, READ, read, base, n_bytes),
        ]
        tokens = [m.result["tokens"] for m in (ours, fast, tik)]
        extra[phase] = {"exactness": check, "tokens": tokens}
        notes.append(exactness_note(phase, check, tokens))
    return rows, notes, {f"{scope}_whole_process": extra}


def exactness_note(key: str, check: dict, tokens: list[int]) -> str:
    parts = differences(check, ("fastokens", "tiktoken"))
    counts = ", ".join(f"{n} {t}" for n, t in zip(("tokenmill", *TARGETS), tokens, strict=True))
    return f"Exactness, {key}: " + "; ".join(parts) + f". Tokens: {counts}."


def real_encoding(ctx) -> tuple[list, list, dict]:
    return whole_processes(ctx, "encode", ctx.corpus, ctx.n_bytes)


def make_slice(ctx) -> tuple[Path, int, int] | None:
    """The corpus's documents in MULTILINGUAL languages, as shards of their own
    (path, bytes, documents); None when the corpus predates the language column."""
    out = ctx.tmp / "slice"
    n_bytes = documents = 0
    for shard in parquet_shards(ctx.corpus):
        if "language" not in pq.read_schema(shard).names:
            return None
        table = pq.read_table(shard, columns=[TEXT, "language"])
        table = table.filter(pc.is_in(table["language"], value_set=pa.array(MULTILINGUAL)))
        out.mkdir(exist_ok=True)
        pq.write_table(table.select([TEXT]), out / shard.name)
        documents += len(table)
        n_bytes += pc.sum(pc.binary_length(table[TEXT])).as_py() or 0
    return out, n_bytes, documents


def multilingual(ctx) -> tuple[list, list, dict]:
    made = make_slice(ctx)
    if made is None:
        return (
            [],
            [
                f"WARNING: no slice rows: {ctx.corpus} has no language column (built "
                "before the multilingual slice); rebuild it with bench/build_corpus.py."
            ],
            {},
        )
    path, n_bytes, documents = made
    rows, notes, extra = whole_processes(ctx, "slice", path, n_bytes)
    notes.insert(
        0,
        f"slice rows: the corpus's documents in {', '.join(MULTILINGUAL)} (Ukrainian, Greek "
        f"and Vietnamese man pages; Japanese, Korean and Chinese gettext messages): "
        f"{documents} documents, {n_bytes / 1e6:.1f} MB.",
    )
    return rows, notes, extra


# ---- loading --------------------------------------------------------------


def loading(ctx) -> tuple[list, list, dict]:
    rows, seconds = [], {}
    for v in real_vocabs(ctx.vocabularies):
        ours, fast, tik = ctx.rounds(
            [
                ("load_tokenmill", v.tokenmill()),
                ("load_fastokens", v.peer()),
                ("load_tiktoken", v.peer()),
            ],
            ctx.env,
        )
        phase = f"load {v.name}"
        base = ctx.row(phase, "tokenmill load_any (.tiktoken)", ours, n_bytes=0)
        rows += [
            base,
            ctx.row(phase, "fastokens Tokenizer.from_tiktoken", fast, base, n_bytes=0),
            ctx.row(phase, "tiktoken load_tiktoken_bpe + Encoding", tik, base, n_bytes=0),
        ]
        seconds[v.name] = ours.result["seconds"]
    note = (
        "load rows: a fresh process loading the .tiktoken file until it can encode (the "
        "first encode of 'a' included), imports excluded; tokenmill with its pattern preset, "
        "the peers with the same regex. Target: tokenmill under "
        f"{LOAD_TARGET} s: " + ", ".join(f"{k} {s:.2f} s" for k, s in seconds.items()) + "."
    )
    return rows, [note], {"load_seconds": seconds}


# ---- the floor ------------------------------------------------------------


FLOOR = {
    "floor_encode": "tokenmill encode --workers 1 (vocabulary loaded before)",
    "floor_io": "PyArrow: read text, write the same ids (I/O alone)",
    "floor_pretokenize": "tokenmill pretokenize, pieces as Python str",
    "floor_counter": "tokenmill pre-tokenizer + word count (native)",
    "floor_fastokens": "fastokens encode_batch_flat, one core (no writing)",
}


def floor(ctx) -> tuple[list, list, dict]:
    """One core each: encode beside what it cannot go below, on the corpus and
    on its multilingual slice (where encode is furthest from it)."""
    v = next(v for v in real_vocabs(ctx.vocabularies) if v.name == FLOOR_VOCAB)
    rows, notes, extra = floor_rows(ctx, v, "whole corpus", ctx.corpus, ctx.n_bytes)
    made = make_slice(ctx)
    if made is not None:
        path, n_bytes, _ = made
        more = floor_rows(ctx, v, "slice", path, n_bytes)
        rows, notes, extra = rows + more[0], notes + more[1], extra | more[2]
    return rows, notes, {"floor": extra}


def floor_rows(ctx, v: Vocab, scope: str, corpus: Path, n_bytes: int) -> tuple[list, list, dict]:
    params = v.tokenmill() | {"tokens": str(ctx.tmp / "floor-tokens"), "pattern": v.pattern}
    params["corpus"] = str(corpus)
    runs = ctx.rounds([(name, params) for name in FLOOR], ctx.env)
    phase = f"floor {v.name}" + (" slice" if scope == "slice" else "")
    rows = [
        ctx.row(phase, label, m, n_bytes=m.result.get("bytes", n_bytes))
        for label, m in zip(FLOOR.values(), runs, strict=True)
    ]
    enc, io, pre, counter, fast = (r.mb_per_s for r in rows)
    left = 1 / enc - 1 / io - 1 / counter
    note = (
        f"{phase} rows, one core each, {scope}: encode {enc:.1f} MB/s; I/O alone "
        f"{io:.1f} MB/s; the pre-tokenizer {counter:.1f} MB/s with a word count in native code "
        f"({pre:.1f} MB/s through `_native.pretokenize`, which makes each piece a Python str). "
        f"Per MB, encode takes {1000 / enc:.1f} ms, of which I/O {1000 / io:.1f} ms and "
        f"pre-tokenizing {1000 / counter:.1f} ms: {1000 * left:.1f} ms is left for looking up "
        "and merging the words, and building the id arrays. fastokens on one core, reading "
        f"the text but writing nothing: {fast:.1f} MB/s."
    )
    return rows, [note], {scope: {r.contender: round(r.mb_per_s, 2) for r in rows}}


# ---- the targets ------------------------------------------------------------


WHOLE_PROCESS = (
    "encode/slice rows with a vocabulary name: each contender is one whole process, timed by "
    "its parent from start to exit: interpreter start-up, imports, loading the vocabulary, "
    "reading the Parquet text. tokenmill: `tokenmill encode DATA OUT --tokenizer FILE "
    "--pattern PRESET --no-eos --workers 0`, which also writes its token shards (Parquet, "
    "zstd); fastokens: Tokenizer.from_tiktoken(FILE, pattern=REGEX, special_tokens={}) and "
    "one encode_batch_flat over all documents (all cores); tiktoken: load_tiktoken_bpe + "
    "Encoding and one encode_ordinary_batch(num_threads=cores); both peers read the text with "
    "PyArrow and keep their ids in memory (bench/standalone.py). For tokenmill's own "
    "vocabulary, tokenmill reads its tokenizer.json and the peers the same ranks written as a "
    ".tiktoken file, with the cl100k pattern. Exactness: tokenmill's token shards against "
    "fastokens and tiktoken encoding again, untimed, with the same file and pattern."
)


def targets_note(rows: list[Row]) -> list[str]:
    """What the whole-process rows mean, and the ratios they are held to."""
    parts = []
    for peer, target in TARGETS.items():
        got = [
            f"{r.phase.split(' ', 1)[1]} ({r.phase.split()[0]}) {r.speedup:.2f}"
            for r in rows
            if r.contender.startswith(peer) and r.phase.startswith(("encode ", "slice "))
        ]
        if got:
            parts.append(f"{peer} ÷ tokenmill (target ≥ {target}): " + ", ".join(got))
    if not parts:
        return []
    return [WHOLE_PROCESS, "Whole-process ratios: " + "; ".join(parts) + ".", *bound_note(rows)]


def bound_note(rows: list[Row]) -> list[str]:
    """How far the tiktoken target is from what reading the text alone takes: a
    Python process that reads the Parquet text and encodes nothing is as fast as
    any encoder of it can be, so tiktoken's time over its time bounds the ratio."""
    bounds = []
    for r in rows:
        if r.contender == READ and r.phase.startswith(("encode ", "slice ")):
            tik = next(x for x in rows if x.phase == r.phase and x.contender.startswith("tiktoken"))
            need = tik.seconds / TARGETS["tiktoken"]
            bounds.append(
                f"{r.phase}: {TARGETS['tiktoken']}x tiktoken needs {need:.2f} s, reading alone "
                f"takes {r.seconds:.2f} s (at most {tik.seconds / r.seconds:.1f}x)"
            )
    if not bounds:
        return []
    return [
        "The tiktoken target against the start-up floor (a whole process that starts Python, "
        "imports PyArrow and reads the same text as Arrow, encoding nothing, which is as fast "
        "as any Python process encoding that Parquet text can be): " + "; ".join(bounds) + "."
    ]


def mismatches(extra: dict) -> int:
    return sum(
        e["exactness"][peer]["mismatched_documents"]
        for key, runs in extra.items()
        if key.endswith("_whole_process")
        for e in runs.values()
        for peer in TARGETS
    )
