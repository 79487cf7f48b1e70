"""merge: the per-shard word tables summed into one, in first-occurrence order.

Polars does it lazily with the streaming engine, so the tables need not fit
in memory together, and at most FAN_IN tables at a time, so that their number
does not bound it either. A word's first occurrence is the smallest
(shard ordinal, first key) over the shards; shards are ordered by source path.
The output holds word and count, sorted by that first occurrence.
"""

from __future__ import annotations

import os
import tempfile
import time
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, cast

import polars as pl

from tokenmill.config import MAX_MIN_COUNT
from tokenmill.errors import TokenmillError, one_line
from tokenmill.io.files import known_sha256
from tokenmill.io.metadata import count_table_source
from tokenmill.io.storage import (
    AnyPath,
    fence,
    filesystem,
    is_remote,
    location,
    scratch_file,
    walk_files,
)
from tokenmill.io.writers import TMP_MARK, atomic_path

if TYPE_CHECKING:
    from upath import UPath
from tokenmill.stages.results import MergeResult
from tokenmill.stages.state import record_file, reusable_file

# Filesystems Polars reads itself (object_store: by byte ranges, streaming);
# endpoint and credentials from the same environment variables as fsspec's.
POLARS_PROTOCOLS = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "azure", "hf"}
# Tables summed in one query, at most (see merge_tables).
FAN_IN = 1024
# Rows of a merged table's row group (a few MB of words).
ROW_GROUP_ROWS = 1 << 17


def count_tables(counts_dir: AnyPath) -> list[tuple[str, dict | None, AnyPath]]:
    """(source shard, split options, count table) of each table of
    `counts_dir`, in the order of their source shards."""
    counts_dir = location(counts_dir)
    if not counts_dir.is_dir():
        what = "a file, not a" if counts_dir.exists() else "no such"
        raise TokenmillError(f"{counts_dir}: {what} folder of count tables")
    if is_remote(counts_dir):
        found = [p for _, p in walk_files(counts_dir)]
    else:
        # os.walk, not rglob: a third of the memory per file (a million tables).
        found = [Path(root, n) for root, _, names in os.walk(counts_dir) for n in names]
    files = [p for p in found if p.name.endswith(".parquet") and not p.name.startswith(".")]
    if not files:
        raise TokenmillError(f"{counts_dir}: no count tables (run `tokenmill count` first)")
    return sorted(((*count_table_source(f), f) for f in files), key=itemgetter(0))


def common_split(tables: list[tuple[str, dict | None, AnyPath]]) -> dict | None:
    """The options every table's words were split with (None when no table
    says): tables split two ways summed would train a tokenizer that
    encodes neither way."""
    first = None
    for _, split, f in tables:
        if split is None:
            continue
        if first is None:
            first = (split, f)
        elif split != first[0]:
            differ = ", ".join(
                f"{k} {first[0][k]!r} and {split[k]!r}" for k in split if split[k] != first[0][k]
            )
            raise TokenmillError(
                f"{first[1]} and {f} were counted with other options ({differ}): "
                "count every shard with the same --mode, --pattern and --lowercase"
            )
    return None if first is None else first[0]


def scan_tables(files: list[AnyPath]) -> pl.LazyFrame:
    """One lazy scan of the Parquet files `files`, in that order, local or
    remote (streamed by byte ranges where Polars knows the filesystem). A
    name is a name, never a pattern: `a*.txt.parquet` is one file, not three."""
    # The tables of one folder (or one run's): all local, or all remote, as the first.
    first = files[0]
    if not is_remote(first):
        return pl.scan_parquet(cast("list[Path]", files), glob=False)
    remote = cast("list[UPath]", files)
    for f in remote:
        fence(f, "read")  # Polars reads them itself: the lock's check first (io/lock.py)
    protocol = first.protocol if isinstance(first.protocol, str) else first.protocol[0]
    if protocol in POLARS_PROTOCOLS:
        return pl.scan_parquet([str(f) for f in remote], glob=False)
    # Any other fsspec filesystem: through PyArrow (read whole, not streamed).
    import pyarrow.dataset as ds
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    arrow_fs = PyFileSystem(FSSpecHandler(filesystem(first)))
    return pl.concat(
        pl.scan_pyarrow_dataset(ds.dataset(f.path, filesystem=arrow_fs, format="parquet"))
        for f in remote
    )


def summed(tables: pl.LazyFrame, min_count: int = 1) -> pl.LazyFrame:
    # Each table is sorted by first occurrence and the files come in shard
    # order, so a row's index in their concatenation orders (shard, first):
    # the earliest occurrence is a plain streaming `min` of a u32/u64 index.
    # Summed tables are again sorted by first occurrence, so summing them in
    # order gives the same order as summing their tables at once.
    return (
        tables.select("word", "count")
        .with_row_index("at")
        .group_by("word")
        .agg(pl.col("count").sum(), pl.col("at").min())
        .filter(pl.col("count") >= min_count)
        .sort("at")
        .select("word", "count")
    )


def sink(frame: pl.LazyFrame, path: Path) -> None:
    # Uncompressed, without statistics (no reader filters on them): train
    # reads the table right away, and LZ4 cost a fifth of the merge (6 of
    # 30 ms on the multilingual slice) to make the file half as big, which
    # next to the corpus it counts is nothing (13 B per distinct word on the
    # C corpus: ~0.8 GB for the 65 M words that 1 TB would have, see README
    # "At scale").
    # Row groups of a fixed number of rows: left to the streaming engine they
    # follow its morsels, which vary from run to run with the threads'
    # timing, and the same table would not be the same bytes.
    frame.sink_parquet(
        path, compression="uncompressed", statistics=False, row_group_size=ROW_GROUP_ROWS
    )


def partial_file(counts_file: AnyPath) -> Path:
    """A new local file for a partial sum: beside a local COUNTS_FILE (its
    disk, not a /tmp that may be memory), named as a temporary so that a
    killed run's is removed with the others (io/writers.py)."""
    if is_remote(counts_file):
        return scratch_file(counts_file)
    fd, name = tempfile.mkstemp(
        prefix=f".{counts_file.name[:100]}{TMP_MARK}{os.getpid()}-",
        suffix=".parquet",
        dir=counts_file.parent,
    )
    os.close(fd)
    return Path(name)


def merge_tables(
    files: list[AnyPath], dest: Path, counts_file: AnyPath, min_count: int, keep: bool = False
) -> pl.DataFrame | None:
    """Sum `files` into `dest`, at most FAN_IN tables at a time: Polars holds
    some state for each file a query reads (over 20 KB each when every table
    was a scan of its own), which a million small tables would not fit in.
    Batches of consecutive tables are summed into partial tables, those
    again, until at most FAN_IN are left for the last sum. Only that one
    drops words under `min_count`: a word may be rare in every batch.
    `keep`: the last sum is made in memory and returned too (then written
    by the same sink, so the file is the same bytes)."""
    made: list[Path] = []
    try:
        level: list[AnyPath] = files
        while len(level) > FAN_IN:
            summed_level: list[AnyPath] = []
            for i in range(0, len(level), FAN_IN):
                part = partial_file(counts_file)
                made.append(part)
                sink(summed(scan_tables(level[i : i + FAN_IN])), part)
                summed_level.append(part)
            if level is not files:
                for done in level:  # partials of the level before: summed now
                    done.unlink()
            level = summed_level
        last = summed(scan_tables(level), min_count)
        frame = None
        if keep:
            frame = last.collect(engine="streaming").rechunk()
            sink(frame.lazy(), dest)
        else:
            sink(last, dest)
        if min_count > 1:
            if frame is not None:
                words = frame.height
            else:  # `dest` is local: atomic_path's temporary, or a store's scratch file
                words = pl.scan_parquet(dest).select(pl.len()).collect().item()
            if not words:
                refuse_dropping_all(level, min_count)
        return frame
    finally:
        for part in made:
            part.unlink(missing_ok=True)


def refuse_dropping_all(tables: list[AnyPath], min_count: int) -> None:
    """Refuse a `min_count` that left no word of the tables' (at most FAN_IN,
    so summed again at little cost): training would find the table empty
    and blame the corpus."""
    most = summed(scan_tables(tables)).select(pl.col("count").max()).collect().item()
    if most:
        raise TokenmillError(
            f"--min-count {min_count} dropped every word: the most frequent one is seen "
            f"{most} time{'s' if most > 1 else ''}"
        )


def run_merge(
    counts_dir: AnyPath,
    counts_file: AnyPath,
    min_count: int = 1,
    *,
    files: list[AnyPath] | None = None,
    force: bool = False,
    keep: bool = False,
) -> MergeResult:
    """Merge the tables of `counts_dir` (or exactly `files`, in that order).
    An existing COUNTS_FILE made from the same tables is kept unless `force`.
    `keep`: a table merged now is also returned, as the result's `table`
    (word and count), for a caller that would read it back at once."""
    start = time.monotonic()
    if not 1 <= min_count <= MAX_MIN_COUNT:
        raise TokenmillError(f"--min-count {min_count} is out of range: 1 to {MAX_MIN_COUNT}")
    if files is None:
        tables = count_tables(counts_dir)
    elif files:
        tables = [(*count_table_source(f), f) for f in files]
    else:
        raise TokenmillError(f"{counts_dir}: no count tables (every input shard was skipped?)")
    key = {
        "stage": "merge",
        "min_count": min_count,
        "tables": [[source, known_sha256(f)[1]] for source, _, f in tables],
    }
    split = common_split(tables)
    if split is not None:  # train checks it is given the same (stages/train.py)
        key["split"] = split
    files = [f for _, _, f in tables]
    reused = reusable_file(counts_file, key, force)
    frame = None
    if not reused:
        with atomic_path(counts_file) as tmp:
            try:
                frame = merge_tables(files, tmp, location(counts_file), min_count, keep)
            except pl.exceptions.PolarsError as e:
                raise TokenmillError(
                    f"{counts_file}: cannot merge the count tables ({one_line(e)})"
                ) from None
        record_file(counts_file, key)
    if frame is None:
        sums = scan_tables([location(counts_file)]).select(pl.len(), pl.col("count").sum())
        n_words, n_total = sums.collect().row(0)
    else:
        n_words, n_total = frame.height, frame["count"].sum()
    return MergeResult(
        # Arrow's large_string, as a word table is read (train.read_word_table).
        table=None if frame is None else frame.to_arrow(compat_level=pl.CompatLevel.oldest()),
        tables=len(files),
        words=n_words,
        occurrences=n_total or 0,
        reused=int(reused),
        redone=int(not reused),
        seconds=time.monotonic() - start,
    )
