"""Streaming readers: every input shard becomes a sequence of Arrow
`large_string` arrays (one document per element), batch by batch, so memory
is bounded by the batch size rather than the shard size.

Bad documents (invalid UTF-8, a JSON line that does not parse, a text that is
null or not a string) raise a TokenmillError naming the file and row, unless
an `on_skip` callback is given: then each is reported to it and left out, and
reading carries on. A file that cannot be read at all (truncated gzip, corrupt
Parquet, no text column) always raises; the caller decides whether to skip it,
and `skipped_file_documents` says how many documents such a file held.

Suffixes are matched case-insensitively (`A.JSONL.GZ` is JSON Lines, gzipped).
Blank lines (empty, or only ASCII whitespace) are not documents in text and
JSON Lines shards: rows count documents, skip reasons name the 1-based line.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from pipeline.errors import TokenmillError

# Line formats come plain or compressed; each decompressor streams, and each
# raises on a truncated stream (Python's gzip, bz2 and lzma; PyArrow's zstd).
COMPRESSIONS = ("", ".gz", ".zst", ".bz2", ".xz")
FORMATS = {
    ".parquet": "parquet",
    **{f".jsonl{c}": "jsonl" for c in COMPRESSIONS},
    **{f".json{c}": "jsonl" for c in COMPRESSIONS},  # JSON Lines named .json, as many crawls do
    **{f".txt{c}": "text" for c in COMPRESSIONS},
}
# The formats as the one-line errors name them.
KNOWN_INPUTS = "*.parquet; *.jsonl, *.json, *.txt, each optionally .gz, .zst, .bz2 or .xz"
BATCH_ROWS = 8192
TEXT_BLOCK_BYTES = 16 << 20
# Text blocks are read in pieces of this size, so that when a stream breaks
# (truncated gzip) the lines read before the break are known and counted.
READ_BYTES = 1 << 18
# A blank line of a text shard: nothing but ASCII whitespace (bytes.isspace()).
TEXT_BLANK = r"^[ \t\r\f\v]*$"
# A blank line of a JSON Lines shard: nothing but JSON whitespace.
JSONL_BLANK = r"^[ \t\r]*$"
# The first byte (none: the empty line) of every line either pattern can match.
_MAYBE_BLANK = pa.array([b"", b" ", b"\t", b"\r", b"\f", b"\v"], pa.large_binary())
# What reading a file can raise when the file, not a document, is bad.
READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)

OnSkip = Callable[[dict], None]


def shard_format(path: Path) -> str | None:
    """The input format of a file from its suffix, in any case; None if it is no input."""
    name = Path(path).name.lower()
    for suffix, fmt in FORMATS.items():
        if name.endswith(suffix):
            return fmt
    return None


@dataclass
class RawBatch:
    """One batch as a format reader sees it: `values` (any Arrow type, one per
    row), rows already known to be bad (index -> reason), and for line-based
    formats the 1-based line number of each row."""

    values: pa.Array
    bad: dict[int, str]
    lines: list[int] | None = None


def read_documents(
    path: Path,
    text_column: str = "text",
    batch_rows: int = BATCH_ROWS,
    on_skip: OnSkip | None = None,
    stats: dict | None = None,
) -> Iterator[pa.LargeStringArray]:
    """Documents of one shard as `large_string` arrays without nulls."""
    for _, docs in read_batches(path, text_column, batch_rows, on_skip, stats):
        yield docs


def read_batches(
    path: Path,
    text_column: str = "text",
    batch_rows: int = BATCH_ROWS,
    on_skip: OnSkip | None = None,
    stats: dict | None = None,
) -> Iterator[tuple[pa.UInt64Array, pa.LargeStringArray]]:
    """(row numbers, documents) of one shard, batch by batch. Row numbers count
    every document of the shard, so skipped ones leave gaps; `stats["rows"]`,
    if given, is kept at the number of rows read so far. When a text or JSON
    Lines stream breaks (truncated or corrupt gzip), it is raised to the
    documents read before the break, those not yet handed out included: a
    lower bound of the documents the file holds."""
    path = Path(path)
    row = 0
    try:
        for raw in raw_batches(path, text_column, batch_rows):
            checked = _checked(raw, path, text_column, row, on_skip)
            row += len(raw.values)
            if stats is not None:
                stats["rows"] = row
            yield checked
    except TokenmillError:
        raise
    except _StreamBroken as e:
        if stats is not None:
            stats["rows"] = row + e.documents
        raise TokenmillError(f"{path}: cannot read ({_one_line(e.cause)})") from e.cause
    except (*READ_ERRORS, pa.ArrowException, ValueError) as e:
        raise TokenmillError(f"{path}: cannot read ({_one_line(e)})") from e


def raw_batches(path: Path, column: str, batch_rows: int = BATCH_ROWS) -> Iterator[RawBatch]:
    """`column` of a shard batch by batch as its format reader sees it, unchecked
    (`read_batches` checks the documents; `columns.read_column` reads other columns
    row for row with them). Text shards have one column, the line."""
    readers = {"parquet": _parquet_batches, "jsonl": _jsonl_batches, "text": _text_batches}
    return readers[shard_format(Path(path))](Path(path), column, batch_rows)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def skipped_file_documents(path: Path, rows_read: int) -> dict:
    """The documents a shard that could not be read (and is skipped whole) is known
    to hold, as the fields of its skip record: for Parquet, the row count of the
    footer when the footer reads (exact); otherwise the `rows_read` before the file
    broke (`stats["rows"]` of `read_batches`), with "lower_bound": True."""
    path = Path(path)
    if shard_format(path) == "parquet":
        try:
            return {"documents": pq.read_metadata(path).num_rows}
        except (*READ_ERRORS, pa.ArrowException, ValueError):
            pass
    return {"documents": rows_read, "lower_bound": True}


class _StreamBroken(Exception):
    """Reading a text or JSON Lines stream failed (`cause`) after `documents`
    documents that were read but not yet handed out."""

    def __init__(self, cause: BaseException, documents: int):
        super().__init__(str(cause))
        self.cause = cause
        self.documents = documents


def _checked(raw: RawBatch, path: Path, column: str, first_row: int, on_skip: OnSkip | None):
    arr = raw.values
    if isinstance(arr, pa.ChunkedArray):
        arr = pa.chunked_array(
            [_undictionary(c) for c in arr.chunks], _undictionary_type(arr.type)
        ).combine_chunks()
    arr = _undictionary(arr)
    bad = dict(raw.bad)
    if _is_text(arr.type):
        try:
            arr.validate(full=True)  # UTF-8, which not every reader checks
        except pa.ArrowInvalid:
            arr = _as_binary(arr)
    if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type):
        arr, bad = _decode_utf8(arr, bad)
    elif not _is_text(arr.type):
        raise TokenmillError(f"{path}: column {column!r} holds {arr.type}, not text")
    arr = arr.cast(pa.large_string())
    if arr.null_count > len(bad):
        nulls = pc.indices_nonzero(pc.is_null(arr)).to_pylist()
        for i in nulls:
            bad.setdefault(i, f"{column!r} is null")
    rows = pa.array(range(first_row, first_row + len(arr)), pa.uint64())
    if not bad:
        return rows, arr
    for i in sorted(bad):
        where = f"row {first_row + i}"
        if raw.lines is not None:
            where += f" (line {raw.lines[i]})"
        if on_skip is None:
            raise TokenmillError(f"{path}: {where}: {bad[i]}")
        on_skip({"row": first_row + i, "reason": f"{where}: {bad[i]}", "documents": 1})
    keep = pa.array([i not in bad for i in range(len(arr))])
    return rows.filter(keep), arr.filter(keep)


def _undictionary(arr: pa.Array) -> pa.Array:
    """A dictionary-encoded array (as Parquet gives a column written from one, or
    a categorical) as a plain array of its values, decoded by Arrow."""
    return arr.dictionary_decode() if pa.types.is_dictionary(arr.type) else arr


def _undictionary_type(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _as_binary(arr: pa.Array) -> pa.Array:
    """The same bytes as binary, without UTF-8 validation."""
    if pa.types.is_string(arr.type):
        return arr.view(pa.binary())
    if pa.types.is_large_string(arr.type):
        return arr.view(pa.large_binary())
    return arr.view(pa.binary_view()).cast(pa.large_binary())


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _decode_utf8(arr: pa.Array, bad: dict[int, str]) -> tuple[pa.Array, dict[int, str]]:
    try:
        return arr.cast(pa.large_string()), bad
    except pa.ArrowInvalid:
        pass
    bad = dict(bad)
    values = arr.to_pylist()
    for i, b in enumerate(values):
        if b is not None and i not in bad and not _is_utf8(b):
            bad[i] = "not valid UTF-8"
            values[i] = None
    return pa.array(values, pa.large_binary()).cast(pa.large_string()), bad


def _parquet_batches(path: Path, column: str, batch_rows: int) -> Iterator[RawBatch]:
    pf = pq.ParquetFile(path)
    names = pf.schema_arrow.names
    if column not in names:
        raise TokenmillError(
            f"{path}: no column {column!r} (columns: {', '.join(names)}); use --text-column"
        )
    # Tasks already run in parallel, one per shard: Arrow's own thread pool
    # would only add hand-offs (it nearly doubled the time to read a shard).
    for batch in pf.iter_batches(batch_size=batch_rows, columns=[column], use_threads=False):
        yield RawBatch(batch.column(0), {})


def _line_blocks(path: Path, blank: str) -> Iterator[tuple[int, bytes, pa.Array]]:
    """(number of lines before the block, the block, its lines as large_binary),
    in blocks of about TEXT_BLOCK_BYTES cut at line ends; a line longer than
    that is a block of its own. When reading breaks, raises _StreamBroken with
    the number of whole lines not matching `blank` read since the last block."""
    with open_stream(path) as stream:
        carry: list[bytes] = []
        before = 0
        while True:
            parts: list[bytes] = []
            try:
                block = _read_block(stream, parts)
            except READ_ERRORS as e:
                raise _StreamBroken(e, _whole_lines(b"".join([*carry, *parts]), blank)) from e
            if not block:
                break
            cut = block.rfind(b"\n")
            if cut < 0:
                carry.append(block)
                continue
            data = b"".join([*carry, block[:cut]])
            carry = [block[cut + 1 :]]
            lines = _split_lines(data)
            yield before, data, lines
            before += len(lines)
        if rest := b"".join(carry):
            yield before, rest, _split_lines(rest)


def open_stream(path: Path):
    """The bytes of a line-format file, decompressed as its suffix says, streaming."""
    name = path.name.lower()
    if name.endswith(".gz"):
        # Python's gzip, not Arrow's: Arrow reads a truncated gzip stream without a word.
        return gzip.open(path, "rb")
    if name.endswith(".bz2"):
        return bz2.open(path, "rb")
    if name.endswith(".xz"):
        return lzma.open(path, "rb")
    if name.endswith(".zst"):
        return pa.input_stream(str(path), compression="zstd")
    return open(path, "rb")


def _read_block(stream, parts: list[bytes]) -> bytes:
    """Up to TEXT_BLOCK_BYTES of `stream` (b"" at its end), read in pieces that
    are appended to `parts` as they come, so that they are known if a read fails."""
    size = 0
    while size < TEXT_BLOCK_BYTES:
        piece = stream.read(min(READ_BYTES, TEXT_BLOCK_BYTES - size))
        if not piece:
            break
        parts.append(piece)
        size += len(piece)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _whole_lines(data: bytes, blank: str) -> int:
    """How many whole (newline-ended) lines of `data` do not match `blank`."""
    end = data.rfind(b"\n")
    if end < 0:
        return 0
    lines = _split_lines(data[:end])
    return len(lines) - _blank_lines(lines, blank).true_count


def _blank_lines(lines: pa.Array, blank: str) -> pa.BooleanArray:
    """Whether each line matches `blank`; the regex runs only on the lines that
    are empty or begin with whitespace, a cheap test that rules out most lines."""
    maybe = pc.is_in(pc.binary_slice(lines, 0, 1), value_set=_MAYBE_BLANK)
    if not maybe.true_count:
        return maybe
    matched = pc.match_substring_regex(lines.filter(maybe), pattern=blank)
    return pc.replace_with_mask(maybe, maybe, matched)


def _split_lines(data: bytes) -> pa.Array:
    return pc.split_pattern(pa.array([data], pa.large_binary()), b"\n").flatten()


def _text_batches(path: Path, column: str, batch_rows: int) -> Iterator[RawBatch]:
    """One document per non-blank line; a trailing '\\r' is dropped so CRLF files
    read the same. A blank line (empty, or only ASCII whitespace) is no document."""
    for before, _, lines in _line_blocks(path, TEXT_BLANK):
        blank = _blank_lines(lines, TEXT_BLANK)
        if blank.true_count:
            keep = pc.indices_nonzero(pc.invert(blank))
            if len(keep) == 0:
                continue
            lines = lines.take(keep)
            numbers = pc.add(keep, before + 1).to_pylist()
        else:
            numbers = list(range(before + 1, before + 1 + len(lines)))
        if pc.ends_with(lines, b"\r").true_count:  # a regex on every line costs more
            lines = pc.replace_substring_regex(lines, pattern="\r$", replacement="")
        yield RawBatch(lines, {}, numbers)


def _jsonl_batches(path: Path, column: str, batch_rows: int) -> Iterator[RawBatch]:
    """One JSON object per non-blank line. Arrow parses a block at once; a block
    it refuses is parsed line by line to name (or skip) the bad lines."""
    schema = pa.schema([(column, pa.large_string())])
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    if _named_json(path):
        _check_json_lines(path)
    for before, data, lines in _line_blocks(path, JSONL_BLANK):
        blank = _blank_lines(lines, JSONL_BLANK)
        keep = pc.indices_nonzero(pc.invert(blank))
        if len(keep) == 0:
            continue
        records = lines.take(keep)
        numbers = [before + 1 + i for i in keep.to_pylist()]
        # The block as Arrow should parse it: one object per line, no blank lines.
        block = data if len(keep) == len(lines) else b"\n".join(records.to_pylist())
        try:
            table = pj.read_json(
                pa.BufferReader(block),
                read_options=pj.ReadOptions(block_size=max(len(block) + 1, 1 << 20)),
                parse_options=options,
            )
            if table.num_rows != len(records):
                raise ValueError("not one object per line")
            values = table.column(0).combine_chunks()
        except (pa.ArrowException, ValueError, UnicodeDecodeError):
            yield _parse_lines(records.to_pylist(), column, numbers)
            continue
        bad = {}
        if values.null_count:
            for i in pc.indices_nonzero(pc.is_null(values)).to_pylist():
                bad[i] = _why_not_text(records[i].as_py(), column)
        yield RawBatch(values, bad, numbers)


def _named_json(path: Path) -> bool:
    """Whether the file is named `.json` (not `.jsonl`), compressed or not."""
    name = path.name.lower()
    for c in COMPRESSIONS[1:]:
        name = name.removesuffix(c)
    return name.endswith(".json")


def _check_json_lines(path: Path) -> None:
    """A `.json` file must be JSON Lines: one JSON array, or one object spread
    over lines, is refused whole rather than read as bad lines."""
    with open_stream(path) as stream:
        head = stream.read(1 << 16)
    lines = head.split(b"\n")
    complete = lines[:-1]  # the last piece may be a line cut short by the read
    first = next((line.strip() for line in lines if line.strip()), b"")
    if first.startswith(b"["):
        raise TokenmillError(
            f"{path}: one JSON array, not JSON Lines (one object per line); "
            "convert it, e.g. jq -c '.[]'"
        )
    if first.startswith(b"{") and any(line.strip() == first for line in complete):
        try:
            json.loads(first)
        except ValueError:
            raise TokenmillError(
                f"{path}: one JSON document over several lines, not JSON Lines "
                "(one object per line); convert it, e.g. jq -c ."
            ) from None


def _parse_lines(records: list[bytes], column: str, numbers: list[int]) -> RawBatch:
    values: list[str | None] = []
    bad = {}
    for i, record in enumerate(records):
        reason = _why_not_text(record, column)
        if reason is None:
            values.append(json.loads(record)[column])
        else:
            bad[i] = reason
            values.append(None)
    return RawBatch(pa.array(values, pa.large_string()), bad, numbers)


def _why_not_text(record: bytes, column: str) -> str | None:
    """Why a JSON line has no usable text (None if it has)."""
    try:
        obj = json.loads(record)
    except UnicodeDecodeError:
        return "not valid UTF-8"
    except ValueError as e:
        return f"not JSON ({e})"
    if not isinstance(obj, dict):
        return f"not a JSON object but {type(obj).__name__}"
    if column not in obj:
        return f"no {column!r} field; use --text-column"
    value = obj[column]
    if value is None:
        return f"{column!r} is null"
    if not isinstance(value, str):
        return f"{column!r} is {type(value).__name__}, not a string"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"{column!r} holds a lone surrogate, not valid Unicode"
    return None


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False
