"""The benchmark corpus: Parquet shards with a `text` column, read the same
way by every contender (sorted by relative path, documents in file order)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

TEXT = "text"
READ_ROWS = 1024


def parquet_shards(corpus: Path) -> list[Path]:
    """The Parquet shards under `corpus`, in the order tokenmill reads them."""
    corpus = Path(corpus)
    return sorted(corpus.rglob("*.parquet"), key=lambda p: p.relative_to(corpus).as_posix())


def link_corpus(src: Path, dst: Path) -> list[Path]:
    """Mirror the Parquet shards of `src` into `dst` as symlinks.

    tokenmill reads every known format in a folder (a README.txt beside the
    shards would be tokenized too); the peers read only the Parquet shards.
    The mirror makes all of them see exactly the same documents.
    """
    src, dst = Path(src).resolve(), Path(dst)
    for shard in parquet_shards(src):
        link = dst / shard.relative_to(src)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(shard)
    return parquet_shards(dst)


def iter_texts(shards: list[Path]) -> Iterator[str]:
    """Every document as a Python string, streaming (for trainers that take iterators)."""
    for shard in shards:
        for batch in pq.ParquetFile(shard).iter_batches(batch_size=READ_ROWS, columns=[TEXT]):
            yield from batch.column(0).to_pylist()


def shard_texts(shard: Path) -> list[str]:
    # Not pq.read_table: its first call imports pyarrow.dataset (about 0.4 s),
    # which would land in a peer's timing.
    return pq.ParquetFile(shard).read(columns=[TEXT]).column(TEXT).to_pylist()


def read_texts(shards: list[Path]) -> list[str]:
    """Every document of every shard, in one list (for batch encoders)."""
    return [text for shard in shards for text in shard_texts(shard)]


def corpus_stats(shards: list[Path]) -> dict:
    """Documents and UTF-8 text bytes (the denominator of every MB/s), and the
    largest document's bytes."""
    documents = n_bytes = largest = 0
    for shard in shards:
        lengths = pc.binary_length(pq.read_table(shard, columns=[TEXT]).column(TEXT))
        documents += len(lengths)
        n_bytes += pc.sum(lengths).as_py() or 0
        largest = max(largest, pc.max(lengths).as_py() or 0)
    return {"shards": len(shards), "documents": documents, "bytes": n_bytes, "largest": largest}
