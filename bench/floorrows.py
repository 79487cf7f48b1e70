"""The floor under encode, per core, on each corpus: tokenmill's encode on
one worker beside what it cannot go below (reading the text and writing as
many ids with PyArrow; the pre-tokenizer alone), and gigatoken and
fastokens on one core, writing nothing.

The phase takes a Context (context.py) and returns (rows, notes, extra).
"""

from __future__ import annotations

from corpora import Corpus, corpora
from realrows import real_vocabs
from report import Row

FLOOR_VOCAB = "o200k_base"  # the vocabulary of the largest current models
CORPORA = ("bench", "C", "multilingual", "slice")
FLOOR = {
    "floor_encode": "tokenmill encode --workers 1 (vocabulary loaded before)",
    "floor_io": "PyArrow: read text, write the same ids (I/O alone)",
    "floor_pretokenize": "tokenmill pretokenize, pieces as Python str",
    "floor_counter": "tokenmill pre-tokenizer + word count (native)",
    "floor_gigatoken": "gigatoken encode_files, one core (no writing)",
    "floor_fastokens": "fastokens encode_batch_flat, one core (no writing)",
}


def floor(ctx) -> tuple[list, list, dict]:
    """One core each, on every corpus this run has (encode is furthest from
    its floor on the multilingual ones)."""
    v = next(v for v in real_vocabs(ctx.vocabularies) if v.name == FLOOR_VOCAB)
    rows, notes, extra = [], [], {}
    for corpus in corpora(ctx, CORPORA):
        more = floor_rows(ctx, v, corpus)
        rows, notes, extra = rows + more[0], notes + more[1], extra | more[2]
    return rows, notes, {"floor": extra}


def floor_rows(ctx, v, corpus: Corpus) -> tuple[list, list, dict]:
    params = v.tokenmill() | v.gigatoken() | {"pattern": v.pattern}
    params |= {"tokens": str(ctx.tmp / "floor-tokens"), "corpus": str(corpus.path)}
    runs = ctx.rounds([(name, params) for name in FLOOR], ctx.env, corpus.rounds(ctx))
    phase = f"floor {corpus.name} {v.name}"
    rows = [
        ctx.row(phase, label, m, n_bytes=m.result.get("bytes", corpus.n_bytes))
        for label, m in zip(FLOOR.values(), runs, strict=True)
    ]
    rates = dict(zip(FLOOR, (r.mb_per_s for r in rows), strict=True))
    return rows, [floor_note(phase, corpus, rates)], {corpus.name: rates}


def floor_note(phase: str, corpus: Corpus, mb_per_s: dict) -> str:
    enc, io, pre = mb_per_s["floor_encode"], mb_per_s["floor_io"], mb_per_s["floor_pretokenize"]
    counter = mb_per_s["floor_counter"]
    left = 1 / enc - 1 / io - 1 / counter
    return (
        f"{phase} rows, one core each, {corpus.about}: encode {enc:.1f} MB/s; I/O alone "
        f"{io:.1f} MB/s; the pre-tokenizer {counter:.1f} MB/s with a word count in native code "
        f"({pre:.1f} MB/s through `_native.pretokenize`, which makes each piece a Python str). "
        f"Per MB, encode takes {1000 / enc:.1f} ms, of which I/O {1000 / io:.1f} ms and "
        f"pre-tokenizing {1000 / counter:.1f} ms: {1000 * left:.1f} ms is left for looking up "
        "and merging the words, and building the id arrays. On one core, reading the text but "
        f"writing nothing: gigatoken {mb_per_s['floor_gigatoken']:.1f} MB/s, fastokens "
        f"{mb_per_s['floor_fastokens']:.1f} MB/s."
    )


def per_core_line(rows: list[Row]) -> list[str]:
    """For the README's summary: encode per core beside its floor, on each corpus."""
    by_phase: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.phase.startswith("floor ") and r.phase.endswith(FLOOR_VOCAB):
            by_phase.setdefault(r.phase, {})[r.contender] = r.mb_per_s
    rates, rests = [], []
    for phase, rate in by_phase.items():
        name = phase.removeprefix("floor ").removesuffix(f" {FLOOR_VOCAB}")
        if name == "slice":
            continue  # the multilingual corpus stands for it
        enc, io = rate[FLOOR["floor_encode"]], rate[FLOOR["floor_io"]]
        pre, giga = rate[FLOOR["floor_counter"]], rate[FLOOR["floor_gigatoken"]]
        rates.append(f"{CORPUS_NAMES.get(name, name)} {enc:.0f}, {io:.0f}, {pre:.0f}, {giga:.0f}")
        rests.append(f"{1000 * (1 / enc - 1 / io - 1 / pre):.1f}")
    if not rates:
        return []
    return [
        f"Per core ({FLOOR_VOCAB}, one worker), MB/s of tokenmill's encode, of I/O alone "
        "(PyArrow reading the text and writing as many ids), of the pre-tokenizer alone and of "
        f"gigatoken writing nothing: {'; '.join(rates)}. The rest of encode's time, looking "
        f"words up, merging and building the id arrays: {', '.join(rests)} ms per MB."
    ]


CORPUS_NAMES = {"bench": "the bench corpus", "C": "C", "multilingual": "multilingual"}
