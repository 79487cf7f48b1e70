"""Reading an optional per-document column (such as ``source``) of an input shard,
batch by batch, row for row as `readers.read_batches` reads the documents."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.errors import TokenmillError
from pipeline.io import ipc
from pipeline.io.readers import BATCH_ROWS, field_path, raw_batches, shard_format


def has_column(path: Path, column: str) -> bool:
    """Whether documents of this shard can carry `column`, a name or a dotted path
    into structs or nested objects as for --text-column (Parquet, Arrow: in the
    schema; JSON Lines: maybe, per record; text: never)."""
    fmt = shard_format(Path(path))
    if fmt == "parquet":
        return field_path(pq.read_schema(path), column) is not None
    if fmt == "ipc":
        return field_path(ipc.schema(path), column) is not None
    return fmt == "jsonl"


def read_column(path: Path, column: str, batch_rows: int = BATCH_ROWS) -> Iterator[pa.Array]:
    """`column` of every row of a Parquet, Arrow or JSON Lines shard as strings: null where a
    record lacks it, holds no string, or is no JSON object. The rows are those of
    `read_batches` (the same format readers: blank JSON lines are no rows), whatever
    the --txt-unit, which only shapes text shards, and those have no columns."""
    path = Path(path)
    if shard_format(path) not in ("parquet", "ipc", "jsonl"):
        raise TokenmillError(f"{path}: no column {column!r} in a text shard")
    try:
        for raw in raw_batches(path, column, batch_rows):
            values = raw.values
            if isinstance(values, pa.ChunkedArray):
                values = values.combine_chunks()
            values = pc.cast(values, pa.large_string())
            if raw.bad:
                bad = pa.array([i in raw.bad for i in range(len(values))])
                values = pc.if_else(bad, pa.scalar(None, pa.large_string()), values)
            yield values
    except (OSError, pa.ArrowException, ValueError, EOFError) as e:
        msg = " ".join(str(e).split())
        raise TokenmillError(f"{path}: cannot read column {column!r} ({msg})") from None
