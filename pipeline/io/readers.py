"""Streaming readers: every input shard becomes a sequence of Arrow
`large_string` arrays (one document per element), batch by batch, so memory
is bounded by the batch size rather than the shard size."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from pipeline.errors import TokenmillError

FORMATS = {
    ".parquet": "parquet",
    ".jsonl": "jsonl",
    ".jsonl.gz": "jsonl",
    ".txt": "text",
    ".txt.gz": "text",
}
BATCH_ROWS = 8192
TEXT_BLOCK_BYTES = 16 << 20


def shard_format(path: Path) -> str | None:
    name = path.name
    for suffix, fmt in FORMATS.items():
        if name.endswith(suffix):
            return fmt
    return None


def list_shards(data: Path, glob: str = "**/*") -> list[Path]:
    """Input shards under `data` (or `data` itself) matching `glob`, in sorted path order."""
    data = Path(data)
    if data.is_file():
        if shard_format(data) is None:
            raise TokenmillError(f"{data}: not a known input format ({', '.join(FORMATS)})")
        return [data]
    if not data.is_dir():
        raise TokenmillError(f"{data}: no such file or directory")
    shards = [
        p
        for p in data.glob(glob)
        if p.is_file() and not p.name.startswith(".") and shard_format(p) is not None
    ]
    if not shards:
        raise TokenmillError(f"{data}: no input shards matching {glob!r} ({', '.join(FORMATS)})")
    return sorted(shards, key=lambda p: shard_name(p, data))


def shard_name(path: Path, root: Path) -> str:
    """The shard's path relative to the input root: its identity in outputs."""
    root = Path(root)
    return path.name if root == path else path.relative_to(root).as_posix()


def read_documents(
    path: Path, text_column: str = "text", batch_rows: int = BATCH_ROWS
) -> Iterator[pa.LargeStringArray]:
    """Documents of one shard as `large_string` arrays without nulls."""
    path = Path(path)
    fmt = shard_format(path)
    readers = {"parquet": _parquet_batches, "jsonl": _jsonl_batches, "text": _text_batches}
    row = 0
    try:
        for batch in readers[fmt](path, text_column, batch_rows):
            batch = _as_large_string(batch, path, text_column, row)
            row += len(batch)
            yield batch
    except TokenmillError:
        raise
    except (OSError, pa.ArrowException, EOFError, ValueError) as e:
        raise TokenmillError(f"{path}: cannot read ({_one_line(e)})") from e


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _as_large_string(arr: pa.Array, path: Path, column: str, first_row: int) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not (
        pa.types.is_string(arr.type)
        or pa.types.is_large_string(arr.type)
        or pa.types.is_string_view(arr.type)
    ):
        raise TokenmillError(f"{path}: column {column!r} holds {arr.type}, not text")
    if arr.null_count:
        bad = pc.index(pc.is_null(arr), True).as_py()
        raise TokenmillError(f"{path}: row {first_row + bad}: {column!r} is null")
    return arr.cast(pa.large_string())


def _parquet_batches(path: Path, column: str, batch_rows: int) -> Iterator[pa.Array]:
    pf = pq.ParquetFile(path)
    names = pf.schema_arrow.names
    if column not in names:
        raise TokenmillError(
            f"{path}: no column {column!r} (columns: {', '.join(names)}); use --text-column"
        )
    for batch in pf.iter_batches(batch_size=batch_rows, columns=[column]):
        yield batch.column(0)


def _jsonl_batches(path: Path, column: str, batch_rows: int) -> Iterator[pa.Array]:
    schema = pa.schema([(column, pa.large_string())])
    source = pa.input_stream(str(path), compression="detect")
    reader = pj.open_json(
        source,
        read_options=pj.ReadOptions(block_size=TEXT_BLOCK_BYTES),
        parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
    )
    for batch in reader:
        yield batch.column(0)


def _text_batches(path: Path, column: str, batch_rows: int) -> Iterator[pa.Array]:
    """One document per line; a trailing '\\r' is dropped so CRLF files read the same."""
    with pa.input_stream(str(path), compression="detect") as stream:
        carry = b""
        while block := stream.read(TEXT_BLOCK_BYTES):
            data = carry + block
            cut = data.rfind(b"\n")
            if cut < 0:
                carry = data
                continue
            carry = data[cut + 1 :]
            yield _split_lines(data[:cut])
        if carry:
            yield _split_lines(carry)


def _split_lines(data: bytes) -> pa.Array:
    lines = pc.split_pattern(pa.array([data], pa.large_binary()), b"\n").flatten()
    try:
        text = lines.cast(pa.large_string())
    except pa.ArrowInvalid:
        bad = next(i for i, line in enumerate(lines.to_pylist()) if not _is_utf8(line))
        raise ValueError(f"line {bad + 1} of this block is not valid UTF-8") from None
    return pc.replace_substring_regex(text, pattern="\r$", replacement="")


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False
