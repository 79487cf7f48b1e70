"""merge: the per-shard word tables summed into one, in first-occurrence order.

The native core adds the tables one at a time into one map of the distinct
words, so memory holds the merged table and one shard's table, never all
tables together. A word's first occurrence is the smallest
(shard ordinal, first key) over the shards; shards are ordered by source path.
The output holds word and count, sorted by that first occurrence.
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline import _native
from pipeline.errors import TokenmillError
from pipeline.io.arrow import arrow_buffers, fixed_width_buffer
from pipeline.io.files import file_sha256
from pipeline.io.metadata import count_table_source
from pipeline.io.storage import AnyPath, is_remote, location, parquet_file, walk_files
from pipeline.io.writers import atomic_path
from pipeline.memory import release_memory
from pipeline.stages.results import MergeResult
from pipeline.stages.state import record_file, reusable_file


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


def read_table(path: AnyPath) -> pa.Table:
    """A count table's word and count columns (local, or remote by byte ranges)."""
    try:
        with parquet_file(path) as pf:
            return pf.read(columns=["word", "count"], use_threads=False)
    except (OSError, ValueError) as e:
        raise TokenmillError(f"{path}: cannot read count table ({e})") from None


def merged_counts(files: list[AnyPath], min_count: int = 1) -> pa.Table:
    """The tables of `files` summed: word and count, in first-occurrence order."""
    # Each table is sorted by first occurrence and the files come in shard
    # order, so a row's index in their concatenation orders (shard, first).
    merger = _native.Counter.tables()
    row = 0
    for f in files:
        table = read_table(f)
        words = table["word"].combine_chunks().cast(pa.large_string())
        counts = table["count"].combine_chunks().cast(pa.uint64())
        del table
        try:
            merger.add_table(*arrow_buffers(words), fixed_width_buffer(counts), row)
        except _native.NativeError as e:
            raise TokenmillError(f"{f}: cannot merge count table ({e})") from None
        row += len(words)
    offsets, data, counts, _, n = merger.finish()
    del merger
    words = pa.Array.from_buffers(
        pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    merged = pa.table(
        {
            "word": words,
            "count": pa.Array.from_buffers(pa.uint64(), n, [None, pa.py_buffer(counts)]),
        }
    )
    if min_count > 1:
        merged = merged.filter(pc.greater_equal(merged["count"], min_count))
    return merged


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
        "tables": [[count_table_source(f), file_sha256(f)] for f in files],
    }
    reused = reusable_file(counts_file, key, force)
    if reused:
        with parquet_file(location(counts_file)) as pf:
            n_words = pf.metadata.num_rows
            n_total = pc.sum(pf.read(columns=["count"], use_threads=False)["count"]).as_py()
    else:
        merged = merged_counts(files, min_count)
        n_words, n_total = merged.num_rows, pc.sum(merged["count"]).as_py()
        with atomic_path(counts_file) as tmp:
            # LZ4: the table is written once and read once, right away, by train.
            pq.write_table(merged, tmp, compression="lz4")
        del merged
        release_memory()
        record_file(counts_file, key)
    return MergeResult(
        tables=len(files),
        words=n_words,
        occurrences=n_total or 0,
        reused=int(reused),
        redone=int(not reused),
        seconds=time.monotonic() - start,
    )
