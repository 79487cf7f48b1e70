"""Reading an optional per-document column (such as ``source``) of an input shard,
batch by batch, row for row as `readers.read_batches` reads the documents."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.errors import TokenmillError, one_line
from tokenmill.io import ipc
from tokenmill.io.readers import BATCH_ROWS, field_path, raw_batches, shard_format
from tokenmill.io.storage import AnyPath, is_store_error, location, parquet_file


def has_column(path: AnyPath, column: str) -> bool:
    """Whether documents of this shard can carry `column`, a name or a dotted path
    into structs or nested objects as for --text-column (Parquet, Arrow: in the
    schema; JSON Lines: maybe, per record; text: never)."""
    fmt = shard_format(path)
    if fmt == "parquet":
        with parquet_file(path) as pf:
            return field_path(pf.schema_arrow, column) is not None
    if fmt == "ipc":
        return field_path(ipc.schema(path), column) is not None
    return fmt == "jsonl"


def read_column(path: AnyPath, column: str, batch_rows: int = BATCH_ROWS) -> Iterator[pa.Array]:
    """`column` of every row of a Parquet, Arrow or JSON Lines shard as strings: null where a
    record lacks it, holds no string, or is no JSON object. The rows are those of
    `read_batches` (the same format readers: blank JSON lines are no rows), whatever
    the --txt-unit, which only shapes text shards, and those have no columns."""
    path = location(path)
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
    except Exception as e:
        if not isinstance(e, (pa.ArrowException, ValueError, EOFError)) and not is_store_error(e):
            raise
        raise TokenmillError(f"{path}: cannot read column {column!r} ({one_line(e)})") from None
