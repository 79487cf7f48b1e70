"""The corpora the encode and floor rows run on, as a Context (context.py)
knows them: the bench corpus, its multilingual slice, ~500 MB of C (a prefix of
the large corpus's shards) and the multilingual corpus; and the prefixes of
the large corpus that the training rows take.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from build_corpus import MULTILINGUAL
from corpus import TEXT, corpus_stats, link_corpus, parquet_shards

CODE_BYTES = 500e6  # the C corpus of the encode rows: the prefix of shards nearest this
CODE_REPEAT = 2  # its runs take a minute each: at most this many rounds


@dataclass(frozen=True)
class Corpus:
    name: str  # in the rows' phase: bench, slice, C, multilingual
    path: Path
    n_bytes: int
    documents: int
    about: str  # what it is, for the notes
    most_rounds: int = 0  # --repeat, but at most this many rounds (0: no limit)

    def rounds(self, ctx) -> int:
        return min(ctx.repeat, self.most_rounds or ctx.repeat)


def corpora(ctx, names: tuple[str, ...]) -> list[Corpus]:
    """The corpora of `names` that this run has, built once per run (the
    slice and the prefix of C are written into the scratch folder)."""
    makers = {"bench": bench, "slice": sliced, "C": code, "multilingual": multilingual}
    found = []
    for name in names:
        if name not in ctx.corpora:
            ctx.corpora[name] = makers[name](ctx)
        if ctx.corpora[name] is not None:
            found.append(ctx.corpora[name])
    return found


def bench(ctx) -> Corpus:
    stats = corpus_stats(parquet_shards(ctx.corpus))
    about = f"the bench corpus ({stats['documents']} documents, {stats['bytes'] / 1e6:.1f} MB)"
    return Corpus("bench", ctx.corpus, stats["bytes"], stats["documents"], about)


def sliced(ctx) -> Corpus | None:
    made = make_slice(ctx)
    if made is None:
        return None
    path, n_bytes, documents = made
    about = (
        f"the bench corpus's documents in {', '.join(MULTILINGUAL)} (Ukrainian, Greek and "
        f"Vietnamese man pages; Japanese, Korean and Chinese gettext messages): "
        f"{documents} documents, {n_bytes / 1e6:.1f} MB"
    )
    return Corpus("slice", path, n_bytes, documents, about)


def code(ctx) -> Corpus | None:
    if ctx.big is None or not any(ctx.big.glob("*.parquet")):
        return None
    k = nearest_prefix(ctx.big, CODE_BYTES)
    folder, stats = prefix(ctx, k)
    about = (
        f"the first {k} of {len(shard_sizes(ctx.big))} shards of the C corpus ({ctx.big}, "
        f"bench/build_linux.py): {stats['documents']} .c and .h files, "
        f"{stats['bytes'] / 1e6:.0f} MB"
    )
    return Corpus("C", folder, stats["bytes"], stats["documents"], about, CODE_REPEAT)


def multilingual(ctx) -> Corpus | None:
    if ctx.multilingual is None or not any(ctx.multilingual.glob("*.parquet")):
        return None
    stats = corpus_stats(parquet_shards(ctx.multilingual))
    about = (
        f"the multilingual corpus ({ctx.multilingual}, bench/build_multilingual.py: "
        "LibreOffice's help and messages and man pages in 28 languages, CJK, Cyrillic, "
        f"Greek, Devanagari and Latin): {stats['documents']} documents, "
        f"{stats['bytes'] / 1e6:.1f} MB"
    )
    # Its Parquet shards only, as the peers read them (its README.txt is an input too).
    folder = ctx.tmp / "multilingual"
    if not folder.exists():
        link_corpus(ctx.multilingual, folder)
    return Corpus("multilingual", folder, stats["bytes"], stats["documents"], about)


# ---- the multilingual slice ---------------------------------------------------


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


# ---- prefixes of the large corpus of C ----------------------------------------


@cache
def shard_sizes(corpus: Path) -> list[tuple[Path, dict]]:
    """(shard, its corpus_stats) of each shard of `corpus`, in reading order."""
    return [(shard, corpus_stats([shard])) for shard in parquet_shards(corpus)]


def nearest_prefix(corpus: Path, n_bytes: float) -> int:
    """How many of the first shards of `corpus` come nearest `n_bytes` of text."""
    sizes = [s["bytes"] for _, s in shard_sizes(corpus)]
    cumulative = [sum(sizes[: k + 1]) for k in range(len(sizes))]
    return 1 + min(range(len(sizes)), key=lambda i: abs(cumulative[i] - n_bytes))


def prefix(ctx, shards: int) -> tuple[Path, dict]:
    """The first `shards` shards of the large corpus, linked into the scratch
    folder, and their stats; `largest`: the two largest of the shards' largest
    documents (two workers encode two shards at once)."""
    chosen = shard_sizes(ctx.big)[:shards]
    folder = ctx.tmp / f"big-{shards}"
    if not folder.exists():
        folder.mkdir()
        for shard, _ in chosen:
            (folder / shard.name).symlink_to(shard.resolve())
    stats = {
        "shards": len(chosen),
        "documents": sum(s["documents"] for _, s in chosen),
        "bytes": sum(s["bytes"] for _, s in chosen),
        "largest": sorted((s["largest"] for _, s in chosen), reverse=True)[:2],
    }
    return folder, stats
