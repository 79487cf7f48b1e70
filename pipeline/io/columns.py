"""Reading an optional per-document column (such as ``source``) of an input shard,
batch by batch, alongside its documents."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from pipeline.errors import TokenmillError
from pipeline.io.readers import BATCH_ROWS, TEXT_BLOCK_BYTES, shard_format


def has_column(path: Path, column: str) -> bool:
    """Whether documents of this shard can carry `column` (Parquet: in the schema;
    JSON Lines: maybe, per record; text: never)."""
    fmt = shard_format(Path(path))
    if fmt == "parquet":
        return column in pq.read_schema(path).names
    return fmt == "jsonl"


def read_column(path: Path, column: str, batch_rows: int = BATCH_ROWS) -> Iterator[pa.Array]:
    """`column` of every document of a Parquet or JSON Lines shard as strings, in row
    order; null where a record lacks it."""
    path = Path(path)
    try:
        if shard_format(path) == "parquet":
            for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_rows, columns=[column]):
                yield pc.cast(batch.column(0), pa.large_string())
        else:
            source = pa.input_stream(str(path), compression="detect")
            reader = pj.open_json(
                source,
                read_options=pj.ReadOptions(block_size=TEXT_BLOCK_BYTES),
                parse_options=pj.ParseOptions(
                    explicit_schema=pa.schema([(column, pa.large_string())]),
                    unexpected_field_behavior="ignore",
                ),
            )
            for batch in reader:
                yield batch.column(0)
    except (OSError, pa.ArrowException, ValueError) as e:
        msg = " ".join(str(e).split())
        raise TokenmillError(f"{path}: cannot read column {column!r} ({msg})") from None
