"""Reading an optional per-document column (such as ``source``) of an input shard,
batch by batch, row for row as `readers.read_batches` reads the documents."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pyarrow as pa

from tokenmill.errors import TokenmillError, one_line
from tokenmill.io import ipc
from tokenmill.io.readers import (
    BATCH_ROWS,
    StreamBroken,
    field_path,
    raw_batches,
    shard_format,
)
from tokenmill.io.storage import AnyPath, is_store_error, location, parquet_file


@contextmanager
def _column_errors(path: AnyPath, column: str | None) -> Iterator[None]:
    """A file that does not read as one line naming it: as `read_batches` says it
    where the file itself is at fault (not Parquet, a broken stream), else naming
    `column` (None: opening the file only)."""
    what = "cannot read" if column is None else f"cannot read column {column!r}"
    try:
        yield
    except TokenmillError:
        raise  # about the file itself (a JSON array, a bad stream): it names the file
    except StreamBroken as e:
        raise TokenmillError(f"{path}: cannot read ({one_line(e.cause)})") from None
    except Exception as e:
        if not isinstance(e, (pa.ArrowException, ValueError, EOFError)) and not is_store_error(e):
            raise
        raise TokenmillError(f"{path}: {what} ({one_line(e)})") from None


def has_column(path: AnyPath, column: str) -> bool:
    """Whether documents of this shard can carry `column`, a name or a dotted path
    into structs or nested objects as for --text-column (Parquet, Arrow: in the
    schema; JSON Lines: maybe, per record; text: never)."""
    fmt = shard_format(path)
    with _column_errors(path, None):
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
    # Here, not at the top: encode imports this module, and pyarrow.compute's
    # import is a tenth of a small run's start-up.
    import pyarrow.compute as pc

    path = location(path)
    if shard_format(path) not in ("parquet", "ipc", "jsonl"):
        raise TokenmillError(f"{path}: no column {column!r} in a text shard")
    with _column_errors(path, column):
        for raw in raw_batches(path, column, batch_rows):
            values = raw.values
            if isinstance(values, pa.ChunkedArray):
                values = values.combine_chunks()
            values = pc.cast(values, pa.large_string())
            if raw.bad:
                bad = pa.array([i in raw.bad for i in range(len(values))])
                values = pc.if_else(bad, pa.scalar(None, pa.large_string()), values)
            yield values


class RowColumn:
    """`column` of a shard for the rows `read_batches` hands out, batch by batch:
    `take(rows)` gives each row's value as a string (null where none), reading the
    column along, never more than a batch ahead. Rows must come in increasing order,
    as `read_batches` gives them (skipped documents leave gaps). A shard that cannot
    hold the column (a text shard, a Parquet or Arrow one without it) gives nulls.
    The shard is first opened by the first `take`: a shard that does not read is
    the documents' reader's to report (or skip), not this one's."""

    def __init__(self, path: AnyPath, column: str):
        self.path, self.column = path, column
        self.values: Iterator[pa.Array] | None = None
        self.opened = False
        self.held = pa.array([], pa.large_string())
        self.first = 0  # the row of held[0]

    def take(self, rows: np.ndarray) -> pa.Array:
        if not self.opened and len(rows):
            self.opened = True
            if has_column(self.path, self.column):
                self.values = read_column(self.path, self.column)
        if self.values is None or not len(rows):
            return pa.nulls(len(rows), pa.large_string())
        end = int(rows[-1]) + 1
        parts = [self.held]
        have = self.first + len(self.held)
        while have < end:
            more = next(self.values, None)
            if more is None:
                break
            parts.append(more)
            have += len(more)
        held = pa.concat_arrays(parts) if len(parts) > 1 else self.held
        at = np.asarray(rows, np.int64) - self.first
        inside = at < len(held)  # all but when the column ended first (it should not)
        if not len(held):
            found = pa.nulls(len(rows), pa.large_string())
        else:
            found = held.take(pa.array(np.where(inside, at, 0), mask=~inside))
        self.held, self.first = held.slice(min(end - self.first, len(held))), end
        return found
