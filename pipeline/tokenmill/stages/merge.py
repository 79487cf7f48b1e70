"""merge: the per-shard word tables summed into one, in first-occurrence order.

Polars does it lazily with the streaming engine, so the tables need not fit
in memory together. A word's first occurrence is the smallest
(shard ordinal, first key) over the shards; shards are ordered by source path.
The output holds word and count, sorted by that first occurrence.
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl

from tokenmill.errors import TokenmillError
from tokenmill.io.files import known_sha256
from tokenmill.io.metadata import count_table_source
from tokenmill.io.storage import AnyPath, is_remote, location, walk_files
from tokenmill.io.writers import atomic_path
from tokenmill.stages.results import MergeResult
from tokenmill.stages.state import record_file, reusable_file

# Filesystems Polars reads itself (object_store: by byte ranges, streaming);
# endpoint and credentials from the same environment variables as fsspec's.
POLARS_PROTOCOLS = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "azure", "hf"}


def count_files(counts_dir: AnyPath) -> list[AnyPath]:
    """The count tables of `counts_dir`, in the order of their source shards."""
    counts_dir = location(counts_dir)
    if not counts_dir.is_dir():
        raise TokenmillError(f"{counts_dir}: no such directory")
    if is_remote(counts_dir):
        found = [p for _, p in walk_files(counts_dir) if p.name.endswith(".parquet")]
    else:
        found = list(counts_dir.rglob("*.parquet"))
    files = [p for p in found if not p.name.startswith(".")]
    if not files:
        raise TokenmillError(f"{counts_dir}: no count tables (run `tokenmill count` first)")
    return sorted(files, key=count_table_source)


def scan(path: AnyPath) -> pl.LazyFrame:
    """A lazy scan of a Parquet file, local or remote (streamed by byte ranges
    where Polars knows the filesystem)."""
    if not is_remote(path):
        return pl.scan_parquet(path)
    protocol = path.protocol if isinstance(path.protocol, str) else path.protocol[0]
    if protocol in POLARS_PROTOCOLS:
        return pl.scan_parquet(str(path))
    # Any other fsspec filesystem: through PyArrow (read whole, not streamed).
    import pyarrow.dataset as ds
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    filesystem = PyFileSystem(FSSpecHandler(path.fs))
    return pl.scan_pyarrow_dataset(ds.dataset(path.path, filesystem=filesystem, format="parquet"))


def merged_counts(files: list[AnyPath], min_count: int = 1) -> pl.LazyFrame:
    # Each table is sorted by first occurrence and the files come in shard
    # order, so a row's index in their concatenation orders (shard, first):
    # the earliest occurrence is a plain streaming `min` of a u32/u64 index.
    frames = [scan(f).select("word", "count") for f in files]
    return (
        pl.concat(frames)
        .with_row_index("at")
        .group_by("word")
        .agg(pl.col("count").sum(), pl.col("at").min())
        .filter(pl.col("count") >= min_count)
        .sort("at")
        .select("word", "count")
    )


def run_merge(
    counts_dir: Path,
    counts_file: Path,
    min_count: int = 1,
    *,
    files: list[Path] | None = None,
    force: bool = False,
) -> MergeResult:
    """Merge the tables of `counts_dir` (or exactly `files`, in that order).
    An existing COUNTS_FILE made from the same tables is kept unless `force`."""
    start = time.monotonic()
    if min_count < 1:
        raise TokenmillError(f"--min-count must be at least 1, not {min_count}")
    if files is None:
        files = count_files(counts_dir)
    elif not files:
        raise TokenmillError(f"{counts_dir}: no count tables (every input shard was skipped?)")
    key = {
        "stage": "merge",
        "min_count": min_count,
        "tables": [[count_table_source(f), known_sha256(f)[1]] for f in files],
    }
    reused = reusable_file(counts_file, key, force)
    if not reused:
        with atomic_path(counts_file) as tmp:
            # Uncompressed, without statistics (no reader filters on them):
            # train reads the table right away, and LZ4 cost a fifth of the
            # merge (6 of 30 ms on the multilingual slice) to make the file
            # half as big, which next to the corpus it counts is nothing
            # (13 B per distinct word on the C corpus: ~0.8 GB for the 65 M
            # words that 1 TB would have, see README "At scale").
            try:
                merged_counts(files, min_count).sink_parquet(
                    tmp, compression="uncompressed", statistics=False
                )
            except pl.exceptions.PolarsError as e:
                raise TokenmillError(
                    f"{counts_file}: cannot merge the count tables ({e})"
                ) from None
        record_file(counts_file, key)
    words = scan(location(counts_file)).select(pl.len(), pl.col("count").sum()).collect()
    n_words, n_total = words.row(0)
    return MergeResult(
        tables=len(files),
        words=n_words,
        occurrences=n_total or 0,
        reused=int(reused),
        redone=int(not reused),
        seconds=time.monotonic() - start,
    )
