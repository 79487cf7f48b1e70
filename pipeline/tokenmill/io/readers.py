"""Streaming readers: every input shard becomes a sequence of Arrow
`large_string` arrays (one document per element), batch by batch, so memory
is bounded by the batch size rather than the shard size.

Bad documents (invalid UTF-8, a JSON line that does not parse, a text that is
null or not a string) raise a TokenmillError naming the file and row, unless
an `on_skip` callback is given: then each is reported to it and left out, and
reading carries on. A file that cannot be read at all (truncated gzip, corrupt
Parquet or Arrow, no text column, text in UTF-16 or UTF-32) always raises; the
caller decides whether to skip it, and `skipped_file_documents` says how many
documents such a file held. Text is UTF-8 and nothing else: a line in another
encoding is a bad document, never text decoded by a guess.

Suffixes are matched case-insensitively (`A.JSONL.GZ` is JSON Lines, gzipped);
`.arrow` and `.feather` are Arrow IPC, file or stream format (`ipc.py`).
Blank lines (empty, or only ASCII whitespace) are not documents in text and
JSON Lines shards: rows count documents, skip reasons name the 1-based line.
A text document is a line, a paragraph (lines up to a blank line) or the
whole file, as `txt_unit` says (config.TXT_UNITS); a paragraph's or file's
line is the one it starts on.

The text column may be a dotted path (meta.content) into Parquet or Arrow
struct columns and nested JSON objects; a column or key literally named so
wins (`field_path`, `pick_column`).

A shard may be an object of a remote DATA (a UPath, io/storage.py): it is read
through the same readers from a file object that fetches byte ranges as they
are read, never downloaded whole: Parquet reads its footer, then each row
group's column chunk in ranges of PARQUET_READ's buffer_size; line formats
and Arrow IPC read front to back, storage.REMOTE_BLOCK_BYTES per request.
Memory is bounded as for a local file.
"""

from __future__ import annotations

import json
import lzma
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.json as pj

from tokenmill.errors import StoreError, TokenmillError, one_line
from tokenmill.io import ipc
from tokenmill.io.arrow import is_text, large_text, one_array, text_bytes, valid_utf8
from tokenmill.io.decompress import decompressed
from tokenmill.io.storage import (
    AnyPath,
    is_remote,
    is_store_error,
    is_tapped,
    location,
    open_read,
    parquet_file,
)
from tokenmill.memory import RELEASE_BYTES, release_memory

# pyarrow.compute is imported by the functions that use it: the import makes
# ~300 function wrappers (~25 ms of every start-up), and reading Parquet or
# Arrow text needs none of them.

# Line formats come plain or compressed; each decompressor streams, and each
# raises on a truncated or damaged stream (io/decompress.py).
COMPRESSIONS = ("", ".gz", ".zst", ".bz2", ".xz")
FORMATS = {
    ".parquet": "parquet",
    **{f".jsonl{c}": "jsonl" for c in COMPRESSIONS},
    **{f".json{c}": "jsonl" for c in COMPRESSIONS},  # JSON Lines named .json, as many crawls do
    **{f".txt{c}": "text" for c in COMPRESSIONS},
    ".arrow": "ipc",  # Arrow IPC, file or stream format (datasets writes streams)
    ".feather": "ipc",
}
# The formats as the one-line errors name them.
KNOWN_INPUTS = (
    "*.parquet, *.arrow, *.feather; *.jsonl, *.json, *.txt, each optionally .gz, .zst, .bz2 or .xz"
)
BATCH_ROWS = 8192
# How Parquet shards are read. With PyArrow's default pre-buffering, reading
# every row group buffers them all first: the whole file in memory (1.1 GiB
# resident for a 1 GiB file). A column chunk is read in pieces of buffer_size
# (one range request each from an object store), so memory does not grow with
# the writer's row group size either; a page larger than that is read into a
# buffer of its own, beside this one, which lives as long as the reader.
PARQUET_READ = {"pre_buffer": False, "buffer_size": 32 << 20}
# A local file's buffer: a read costs no request, and a 32 MB buffer beside a
# one-row page of 64 MB was half the document again at encode's peak.
LOCAL_BUFFER_BYTES = 1 << 20
# Rows of a batch are also bounded by bytes: 8192 source files of 20 KB are
# 160 MB of text per batch and per worker, plus their ids, which made the
# encode stage the peak of a run on a corpus of code (800 MB resident on
# 500 MB of C, against 450 MB with batches of a few MB). The row groups'
# uncompressed size per row gives the rows per batch; ids are the same.
PARQUET_BATCH_BYTES = 2 << 20
TEXT_BLOCK_BYTES = 16 << 20
# Text blocks are read in pieces of this size, so that when a stream breaks
# (truncated gzip) the lines read before the break are known and counted.
READ_BYTES = 1 << 18
# A blank line of a text shard: nothing but ASCII whitespace (bytes.isspace()).
TEXT_BLANK = r"^[ \t\r\f\v]*$"
# A blank line of a JSON Lines shard: nothing but JSON whitespace.
JSONL_BLANK = r"^[ \t\r]*$"
# The first byte (none: the empty line) of every line either pattern can match.
_MAYBE_BLANK = [b"", b" ", b"\t", b"\r", b"\f", b"\v"]
# Byte-order marks of the encodings whose text is no line-format input (UTF-16
# text of ASCII letters is valid UTF-8 with a NUL byte after every letter).
# UTF-32 first: its little-endian mark begins with UTF-16's.
WIDE_BOMS = {
    b"\xff\xfe\x00\x00": "UTF-32",
    b"\x00\x00\xfe\xff": "UTF-32",
    b"\xff\xfe": "UTF-16",
    b"\xfe\xff": "UTF-16",
}
# How much of a line-format file's start _check_not_wide looks at for NULs.
WIDE_SAMPLE_BYTES = 4096
# UTF-8's byte-order mark, which some editors begin a file with: not text
# (Python's utf-8-sig drops it), so a line-format file's is dropped.
UTF8_BOM = b"\xef\xbb\xbf"
# What reading a file can raise when the file, not a document, is bad.
READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)

OnSkip = Callable[[dict], None]


def shard_format(path: AnyPath) -> str | None:
    """The input format of a file from its suffix, in any case; None if it is no input."""
    name = location(path).name.lower()
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
    path: AnyPath,
    text_column: str = "text",
    batch_rows: int = BATCH_ROWS,
    on_skip: OnSkip | None = None,
    stats: dict | None = None,
    *,
    txt_unit: str = "line",
) -> Iterator[pa.LargeStringArray]:
    """Documents of one shard as `large_string` arrays without nulls."""
    for _, docs in read_batches(path, text_column, batch_rows, on_skip, stats, txt_unit=txt_unit):
        yield docs


def read_batches(
    path: AnyPath,
    text_column: str = "text",
    batch_rows: int = BATCH_ROWS,
    on_skip: OnSkip | None = None,
    stats: dict | None = None,
    *,
    txt_unit: str = "line",
) -> Iterator[tuple[pa.UInt64Array, pa.LargeStringArray]]:
    """(row numbers, documents) of one shard, batch by batch. `txt_unit` (config.
    TXT_UNITS) says what one document of a text shard is: a line, a paragraph
    or the file. Row numbers count
    every document of the shard, so skipped ones leave gaps; `stats["rows"]`,
    if given, is kept at the number of rows read so far. When a text or JSON
    Lines stream breaks (truncated or corrupt gzip), it is raised to the
    documents read before the break, those not yet handed out included: a
    lower bound of the documents the file holds."""
    path = location(path)
    row = 0
    try:
        for raw in raw_batches(path, text_column, batch_rows, txt_unit=txt_unit):
            checked = _checked(raw, path, text_column, row, on_skip)
            row += len(raw.values)
            if stats is not None:
                stats["rows"] = row
            if text_bytes(checked[1]) > RELEASE_BYTES:
                # A long document's: what reading it freed (a JSON line parsed, a
                # Parquet page decoded) goes back before the stage works on it.
                release_memory()
            yield checked
    except TokenmillError:
        raise
    except StreamBroken as e:
        if stats is not None:
            stats["rows"] = row + e.documents
        raise TokenmillError(f"{path}: cannot read ({one_line(e.cause)})") from e.cause
    except (*READ_ERRORS, pa.ArrowException, ValueError) as e:
        raise TokenmillError(f"{path}: cannot read ({one_line(e)})") from e
    except Exception as e:
        # An object store failing mid-read (botocore, aiohttp): not the file's fault.
        if not is_store_error(e):
            raise
        raise StoreError(f"{path}: cannot read ({one_line(e)})") from e


def raw_batches(
    path: AnyPath, column: str, batch_rows: int = BATCH_ROWS, *, txt_unit: str = "line"
) -> Iterator[RawBatch]:
    """`column` of a shard batch by batch as its format reader sees it, unchecked
    (`read_batches` checks the documents; `columns.read_column` reads other columns
    row for row with them). Text shards have one column, the `txt_unit`: every
    format reader takes (path, column, batch_rows); the unit picks the text one."""
    readers = {
        "parquet": _parquet_batches,
        "jsonl": _jsonl_batches,
        "text": TEXT_READERS[txt_unit],
        "ipc": _ipc_batches,
    }
    path = location(path)
    kind = shard_format(path)
    if kind is None:  # find_inputs takes shards by format; a manifest may name others
        raise TokenmillError(f"{path}: not a known input format ({KNOWN_INPUTS})")
    return readers[kind](path, column, batch_rows)


def skipped_file_documents(path: AnyPath, rows_read: int) -> dict:
    """The documents a shard that could not be read (and is skipped whole) is known
    to hold, as the fields of its skip record: for Parquet and the Arrow IPC file
    format, the row count of the footer when the footer reads (exact); otherwise
    the `rows_read` before the file broke (`stats["rows"]` of `read_batches`),
    with "lower_bound": True. A store failing to give the file raises StoreError."""
    path = location(path)
    if shard_format(path) == "parquet":
        try:
            with parquet_file(path) as pf:
                return {"documents": pf.metadata.num_rows}
        except TokenmillError:  # a store's failure (a ValueError too): see above
            raise
        except (*READ_ERRORS, pa.ArrowException, ValueError):
            pass
    if shard_format(path) == "ipc" and (rows := ipc.row_count(path)) is not None:
        return {"documents": rows}
    return {"documents": rows_read, "lower_bound": True}


class StreamBroken(Exception):
    """Reading a text or JSON Lines stream failed (`cause`) after `documents`
    documents that were read but not yet handed out; `data`: the bytes read
    since the last block handed out, for readers that count documents otherwise."""

    def __init__(self, cause: BaseException, documents: int, data: bytes = b""):
        super().__init__(str(cause))
        self.cause = cause
        self.documents = documents
        self.data = data


def _checked(raw: RawBatch, path: AnyPath, column: str, first_row: int, on_skip: OnSkip | None):
    arr = raw.values
    if isinstance(arr, pa.ChunkedArray):
        arr = pa.chunked_array(
            [_undictionary(c) for c in arr.chunks], _undictionary_type(arr.type)
        ).combine_chunks()
    arr = _undictionary(arr)
    bad = dict(raw.bad)
    if pa.types.is_string(arr.type):
        arr = large_text(arr)  # once, here: the UTF-8 check takes 64-bit offsets too
    if is_text(arr.type) and not valid_utf8(arr):
        try:
            arr.validate(full=True)  # UTF-8, which not every reader checks
        except pa.ArrowInvalid:
            arr = _as_binary(arr)
    if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type):
        arr, bad = _decode_utf8(arr, bad)
    elif not is_text(arr.type):
        raise TokenmillError(f"{path}: column {column!r} holds {arr.type}, not text")
    arr = large_text(arr)
    if arr.null_count > len(bad):
        import pyarrow.compute as pc

        nulls = pc.indices_nonzero(pc.is_null(arr)).to_pylist()
        for i in nulls:
            bad.setdefault(i, f"{column!r} is null")
    n = len(arr)
    rows = pa.Array.from_buffers(
        pa.uint64(), n, [None, pa.py_buffer(np.arange(first_row, first_row + n, dtype=np.uint64))]
    )
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


def field_path(schema: pa.Schema, column: str) -> list[str] | None:
    """The names leading to `column` in `schema`: [column] for a top-level column,
    else, for a dotted name (meta.content), the path through struct fields split
    at every dot; None if there is none."""
    # A top-level column literally named "meta.content" wins over the path
    # meta -> content: it is what the name says exactly, and the user has no
    # other way to name it.
    if column in schema.names:
        return [column]
    parts = column.split(".")
    if len(parts) < 2 or "" in parts:
        return None
    fields: pa.Schema | pa.StructType = schema
    for depth, part in enumerate(parts):
        i = fields.get_field_index(part)
        if i < 0:
            return None
        t = fields.field(i).type
        if depth < len(parts) - 1:
            if not pa.types.is_struct(t):
                return None
            fields = t
    return parts


def check_column(schema: pa.Schema, column: str, path: AnyPath) -> list[str]:
    """`field_path`, or the one-line error naming the columns there are."""
    steps = field_path(schema, column)
    if steps is None:
        raise TokenmillError(
            f"{path}: no column {column!r} (columns: {', '.join(_leaf_names(schema))}); "
            "use --text-column"
        )
    if (named := len(schema.get_all_field_indices(steps[0]))) > 1:
        raise TokenmillError(
            f"{path}: {named} columns are named {steps[0]!r}; which holds the text is not known"
        )
    return steps


def pick_column(batch: pa.RecordBatch | pa.Table, column: str, path: AnyPath) -> pa.Array:
    """The values of `column` (a top-level name, or a dotted path into struct
    columns as `field_path` resolves it) of a RecordBatch (an Array) or Table (a
    ChunkedArray). A row whose struct is null on the way is null. Raises the
    one-line TokenmillError naming `path` when there is no such column."""
    steps = check_column(batch.schema, column, path)
    values = batch.column(batch.schema.get_field_index(steps[0]))
    for name in steps[1:]:
        import pyarrow.compute as pc

        # pc.struct_field, not StructArray.field: it nulls the rows whose struct is null.
        values = pc.struct_field(values, name)
    return values


def _leaf_names(schema: pa.Schema | pa.StructType, prefix: str = "") -> list[str]:
    """Every name --text-column can take: top-level columns, struct fields dotted."""
    names = []
    for field in schema if isinstance(schema, pa.Schema) else list(schema):
        name = prefix + field.name
        if pa.types.is_struct(field.type) and field.type.num_fields:
            names += _leaf_names(field.type, name + ".")
        else:
            names.append(name)
    return names


def _parquet_batches(path: AnyPath, column: str, batch_rows: int) -> Iterator[RawBatch]:
    # A remote file is read by byte ranges: the footer, then each row group's
    # chunk of the column, as a local file is read (storage.parquet_file).
    options = (
        PARQUET_READ if is_remote(path) else {**PARQUET_READ, "buffer_size": LOCAL_BUFFER_BYTES}
    )
    with parquet_file(path, **options) as pf:
        check_column(pf.schema_arrow, column, path)
        # A dotted name is also Parquet's path of a nested leaf, so only that leaf
        # is read (its struct pruned to it); a top-level column so named comes too,
        # and pick_column prefers it.
        # Tasks already run in parallel, one per shard: Arrow's own thread pool
        # would only add hand-offs (it nearly doubled the time to read a shard).
        rows = _rows_per_batch(pf.metadata, batch_rows)
        meta = pf.metadata  # the row groups' rows, which the batches are cut from
        left = sum(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
        batches = pf.iter_batches(batch_size=rows, columns=[column], use_threads=False)
        for batch in batches:
            left -= batch.num_rows
            if left <= 0:
                # Until closed, the reader keeps its last page, decompressed and
                # not: twice a document that fills the page, while it is encoded.
                batches.close()
            yield RawBatch(pick_column(batch, column, path), {})


def _rows_per_batch(metadata, batch_rows: int) -> int:
    """Up to `batch_rows` rows, and about PARQUET_BATCH_BYTES of the file's
    (uncompressed) data, all columns counted, however large its rows are."""
    if metadata.num_rows == 0:
        return batch_rows
    groups = (metadata.row_group(i) for i in range(metadata.num_row_groups))
    per_row = sum(g.total_byte_size for g in groups) / metadata.num_rows
    return max(1, min(batch_rows, int(PARQUET_BATCH_BYTES / max(per_row, 1))))


def _ipc_batches(path: AnyPath, column: str, batch_rows: int) -> Iterator[RawBatch]:
    schema = ipc.schema(path)
    steps = check_column(schema, column, path)
    # Only the top-level field holding the column is read, as for Parquet.
    for batch in ipc.record_batches(path, schema.names.index(steps[0]), batch_rows):
        yield RawBatch(pick_column(batch, column, path), {})


def _line_blocks(path: AnyPath, blank: str) -> Iterator[tuple[int, bytearray, pa.Array]]:
    """(number of lines before the block, the block, its lines as large_binary),
    in blocks of about TEXT_BLOCK_BYTES cut at line ends; a line longer than
    that is a block of its own. When reading breaks, raises StreamBroken with
    the number of whole lines not matching `blank` read since the last block.

    A block is grown in place (a large one is moved by remapping its pages,
    not copied), and a long line's block is its one line as it is, not split
    into a copy: a line of the size of memory is held once, not three times."""
    with open_stream(path) as stream:
        carry = bytearray()  # what the blocks so far end in after their last line end
        before = 0
        first = True
        while True:
            parts: list[bytes] = []
            try:
                block = _read_block(stream, parts)
            except READ_ERRORS as e:
                read = bytes(carry) + b"".join(parts)
                raise StreamBroken(e, _whole_lines(read, blank), read) from e
            if not block:
                break
            if first:
                _check_not_wide(path, block)
                block = block.removeprefix(UTF8_BOM)
                first = False
            end = block.find(b"\n")
            if end >= 0 and len(carry) + end > TEXT_BLOCK_BYTES:
                carry += memoryview(block)[:end]
                yield before, carry, _binaries([carry])
                before += 1
                carry, block = bytearray(), block[end + 1 :]
            cut = block.rfind(b"\n")
            if cut < 0:
                carry += block
                continue
            carry += memoryview(block)[:cut]
            data, carry = carry, bytearray(memoryview(block)[cut + 1 :])
            lines = _split_lines(data)
            yield before, data, lines
            before += len(lines)
        if carry:  # no line end in it: one line
            yield before, carry, _binaries([carry])


@contextmanager
def open_stream(path: AnyPath):
    """The bytes of a line-format file, decompressed as its suffix says, streaming.
    A remote file is opened once (storage.open_read) and the decompressor reads
    from it; both are closed after the block."""
    path = location(path)
    with ExitStack() as stack:
        opened = is_remote(path) or is_tapped(path)  # a tapped file: storage.tapped
        source = stack.enter_context(open_read(path)) if opened else path
        yield stack.enter_context(decompressed(path.name.lower(), source))


def _check_not_wide(path: AnyPath, head: bytes | bytearray) -> None:
    """Refuse a file that begins with the byte-order mark of UTF-16 or UTF-32,
    or whose first bytes are NUL in every other place, as UTF-16 (or UTF-32)
    text of mostly ASCII is without a mark: valid UTF-8, it became documents
    of a NUL after every letter."""
    for bom, encoding in WIDE_BOMS.items():
        if head.startswith(bom):
            raise TokenmillError(
                f"{path}: {encoding} text (it begins with a byte-order mark), not UTF-8; "
                f"convert it, e.g. iconv -f {encoding} -t UTF-8"
            )
    sample = bytes(head[:WIDE_SAMPLE_BYTES])
    if len(sample) < 8:
        return
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    if max(even, odd) * 4 >= len(sample):  # NUL in half the places of one parity
        encoding = "UTF-16LE" if odd >= even else "UTF-16BE"
        if (even + odd) * 4 >= len(sample) * 3:  # three NULs of every four
            encoding = "UTF-32LE" if sample[3::4].count(0) > sample[0::4].count(0) else "UTF-32BE"
        raise TokenmillError(
            f"{path}: NUL bytes in every other place: {encoding} text without a "
            f"byte-order mark, not UTF-8; convert it, e.g. iconv -f {encoding} -t UTF-8"
        )


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
    import pyarrow.compute as pc

    maybe = pc.is_in(pc.binary_slice(lines, 0, 1), value_set=_binaries(_MAYBE_BLANK))
    if not maybe.true_count:
        return maybe
    matched = pc.match_substring_regex(lines.filter(maybe), pattern=blank)
    return pc.replace_with_mask(maybe, maybe, matched)


def _binaries(values: Sequence[bytes | bytearray]) -> pa.Array:
    """`values` as a large_binary array, made from buffers: pa.array on a
    Python list (or a NumPy array) imports pandas, a fifth of a second of
    start-up that reading never needs (tests/test_imports.py checks). One
    value is not copied: it may be a whole file, or a line as long."""
    offsets = pa.py_buffer(np.cumsum([0, *map(len, values)], dtype=np.int64))
    data = pa.py_buffer(values[0] if len(values) == 1 else b"".join(values))
    return pa.Array.from_buffers(pa.large_binary(), len(values), [None, offsets, data])


def _split_lines(data: bytes | bytearray) -> pa.Array:
    import pyarrow.compute as pc

    return pc.split_pattern(_binaries([data]), b"\n").flatten()


def _text_batches(path: AnyPath, column: str, batch_rows: int) -> Iterator[RawBatch]:
    """One document per non-blank line; a trailing '\\r' is dropped so CRLF files
    read the same. A blank line (empty, or only ASCII whitespace) is no document."""
    import pyarrow.compute as pc

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
        yield RawBatch(_drop_cr(lines), {}, numbers)


def _drop_cr(lines: pa.Array) -> pa.Array:
    """The lines without a trailing '\\r', so that CRLF files read as LF files."""
    import pyarrow.compute as pc

    if pc.ends_with(lines, b"\r").true_count:  # a regex on every line costs more
        lines = pc.replace_substring_regex(lines, pattern="\r$", replacement="")
    return lines


_NEWLINE = _binaries([b"\n"])[0]  # pa.scalar, like pa.array, imports pandas


def _paragraph_batches(path: AnyPath, column: str, batch_rows: int) -> Iterator[RawBatch]:
    """One document per paragraph: a run of non-blank lines, ended by a blank
    line (see _text_batches) or the end of the file, its lines joined by '\\n'
    (each without a trailing '\\r'). Its line number is that of its first line.
    A paragraph the block ends in is held back, joined so far, and finished by
    the next block, so memory holds one block and one paragraph."""
    import pyarrow.compute as pc

    held: list[bytes] = []  # the unfinished paragraph: its lines of each block, joined
    held_line = 0
    try:
        for before, _, lines in _line_blocks(path, TEXT_BLANK):
            keep = np.flatnonzero(~_blank_lines(lines, TEXT_BLANK).to_numpy(zero_copy_only=False))
            docs: list[pa.Array] = []
            numbers: list[int] = []
            if held and (not len(keep) or keep[0] > 0):  # a blank line ends it
                docs.append(_binaries([b"\n".join(held)]))
                numbers.append(held_line)
                held = []
            if len(keep):
                # A paragraph starts at each kept line that does not follow a kept line.
                starts = np.flatnonzero(np.diff(keep, prepend=-2) > 1)
                offsets = pa.array(np.append(starts, len(keep)), pa.int64())
                kept = _drop_cr(lines.take(pa.array(keep)))
                paragraphs = pc.binary_join(pa.LargeListArray.from_arrays(offsets, kept), _NEWLINE)
                first = (before + 1 + keep[starts]).tolist()
                # The last paragraph may go on in the next block.
                open_end = keep[-1] == len(lines) - 1
                if held:  # the block begins with more of it
                    held.append(paragraphs[0].as_py())
                    paragraphs, first = paragraphs[1:], first[1:]
                    if len(paragraphs) or not open_end:
                        docs.append(_binaries([b"\n".join(held)]))
                        numbers.append(held_line)
                        held = []
                if len(paragraphs) and open_end:
                    held, held_line = [paragraphs[-1].as_py()], first[-1]
                    paragraphs, first = paragraphs[:-1], first[:-1]
                docs.append(paragraphs)
                numbers += first
            if numbers:
                yield RawBatch(pa.concat_arrays(docs), {}, numbers)
    except StreamBroken as e:
        raise StreamBroken(e.cause, _whole_paragraphs(e.data, bool(held)), e.data) from e.cause
    if held:
        yield RawBatch(_binaries([b"\n".join(held)]), {}, [held_line])


def _whole_paragraphs(data: bytes, held: bool) -> int:
    """How many paragraphs have a whole line in `data` (read since the last block)
    or were held back from that block (`held`): those a broken stream is known to
    have held, the paragraph it broke in among them if one of its lines is whole."""
    end = data.rfind(b"\n")
    if end < 0:
        return int(held)
    lines = _split_lines(data[:end])
    nonblank = ~_blank_lines(lines, TEXT_BLANK).to_numpy(zero_copy_only=False)
    starts = int(np.count_nonzero(nonblank & ~np.concatenate([[held], nonblank[:-1]])))
    return starts + int(held)


def _file_batches(path: AnyPath, column: str, batch_rows: int) -> Iterator[RawBatch]:
    """The whole file as one document, its bytes exactly as they are (line ends
    and a final newline kept). A file of nothing but ASCII whitespace is no
    document, as a blank line is none in the other units."""
    # One buffer grown in place (a large one is moved by remapping its pages,
    # not copied): joining the pieces held the file twice at the peak.
    data = bytearray()
    with open_stream(path) as stream:
        try:
            while piece := stream.read(READ_BYTES):
                data += piece
        except READ_ERRORS as e:
            # The file held a document if anything but whitespace was read.
            raise StreamBroken(e, int(bool(data) and not data.isspace())) from e
    _check_not_wide(path, data)
    if data.startswith(UTF8_BOM):
        del data[: len(UTF8_BOM)]  # in place: a copy would hold the file twice
    if data and not data.isspace():  # strip() would copy the file
        yield RawBatch(_binaries([data]), {}, [1])


# The text reader for each --txt-unit (config.TXT_UNITS).
TEXT_READERS = {"line": _text_batches, "paragraph": _paragraph_batches, "file": _file_batches}


def _jsonl_batches(path: AnyPath, column: str, batch_rows: int) -> Iterator[RawBatch]:
    """One JSON object per non-blank line. Arrow parses a block at once; a block
    it refuses is parsed line by line to name (or skip) the bad lines."""
    import pyarrow.compute as pc

    schema = _json_schema(column)
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    # A record with a key literally named so (the precedence of field_path) is
    # left to the line-by-line parser, which can tell that key present from absent.
    literal = json.dumps(column, ensure_ascii=False).encode() if len(schema) > 1 else None
    if _named_json(path):
        _check_json_lines(path)
    for before, data, lines in _line_blocks(path, JSONL_BLANK):
        blank = _blank_lines(lines, JSONL_BLANK)
        keep = pc.indices_nonzero(pc.invert(blank))
        if len(keep) == 0:
            continue
        records = lines if len(keep) == len(lines) else lines.take(keep)
        numbers = [before + 1 + i for i in keep.to_pylist()]
        # The block as Arrow should parse it: one object per line, no blank lines.
        block = data if len(keep) == len(lines) else b"\n".join(records.to_pylist())
        if not valid_utf8(_binaries([block]).view(pa.large_string())):
            # Arrow's parser takes bytes that are not UTF-8 in a field it skips
            # (a key in Latin-1): the line by line parser refuses such a record.
            yield _parse_lines(records.to_pylist(), column, numbers)
            continue
        try:
            table = pj.read_json(
                pa.BufferReader(block),
                read_options=pj.ReadOptions(block_size=max(len(block) + 1, 1 << 20)),
                parse_options=options,
            )
            if table.num_rows != len(records):
                raise ValueError("not one object per line")
            if literal is not None and (
                literal in block or table.column(column).null_count < table.num_rows
            ):
                raise ValueError("a key named like the path")
            values = pick_column(table.drop_columns([column]) if literal else table, column, path)
            values = one_array(values)
        except TokenmillError:  # no such column (a ValueError too): not a parse failure
            raise
        except (pa.ArrowException, ValueError, UnicodeDecodeError):
            yield _parse_lines(records.to_pylist(), column, numbers)
            continue
        bad: dict[int, str] = {}
        if values.null_count:
            for i in pc.indices_nonzero(pc.is_null(values)).to_pylist():
                # A null is a record without text: _why_not_text says why.
                bad[i] = _why_not_text(records[i].as_py(), column) or f"{column!r} is null"
        # The block (a long line's is the line itself) is freed before its
        # text is encoded, not held beside the text and its ids: Arrow's
        # parser copied the text out of it.
        del lines, records, block, table
        data.clear()
        yield RawBatch(values, bad, numbers)


def _named_json(path: AnyPath) -> bool:
    """Whether the file is named `.json` (not `.jsonl`), compressed or not."""
    name = path.name.lower()
    for c in COMPRESSIONS[1:]:
        name = name.removesuffix(c)
    return name.endswith(".json")


def _check_json_lines(path: AnyPath) -> None:
    """A `.json` file must be JSON Lines: one JSON array, or one object spread
    over lines, is refused whole rather than read as bad lines."""
    with open_stream(path) as stream:
        parts: list[bytes] = []
        # A read may give less (a compressed stream ending): the head is read whole.
        try:
            while sum(map(len, parts)) < 1 << 16 and (piece := stream.read(1 << 16)):
                parts.append(piece)
        except READ_ERRORS:
            # A stream broken in its head: the reader meets the break too, and
            # counts the documents before it, as in any other place.
            pass
    head = b"".join(parts)[: 1 << 16].removeprefix(UTF8_BOM)
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


def _json_schema(column: str) -> pa.Schema:
    """What Arrow's JSON reader is to read: `column`, and for a dotted name also
    the nested objects it names (meta.content: a struct `meta` of `content`)."""
    schema = [(column, pa.large_string())]
    parts = column.split(".")
    if len(parts) > 1 and "" not in parts:
        t = pa.large_string()
        for part in reversed(parts[1:]):
            t = pa.struct([(part, t)])
        schema.append((parts[0], t))
    return pa.schema(schema)


def _parse_lines(records: list[bytes], column: str, numbers: list[int]) -> RawBatch:
    values: list[str | None] = []
    bad = {}
    for i, record in enumerate(records):
        reason = _why_not_text(record, column)
        if reason is None:
            text, _ = _json_field(_json_loads(record), column)
            assert isinstance(text, str)  # _why_not_text found a string there
            values.append(text)
        else:
            bad[i] = reason
            values.append(None)
    return RawBatch(pa.array(values, pa.large_string()), bad, numbers)


def _json_field(obj: dict, column: str) -> tuple[object, str | None]:
    """(the value of `column` in a JSON object, None), or (None, why there is
    none); a dotted name walks nested objects as `field_path` walks structs."""
    if column in obj:  # a key literally so named wins, as a column does in field_path
        return obj[column], None
    parts = column.split(".")
    if len(parts) < 2 or "" in parts:
        return None, f"no {column!r} field; use --text-column"
    value: object = obj
    for depth, part in enumerate(parts):
        if not isinstance(value, dict):  # never at depth 0: `obj` is a dict
            where = ".".join(parts[:depth])
            what = "null" if value is None else type(value).__name__
            return None, f"{where!r} is {what}, not an object, so no {column!r} field"
        if part not in value:
            return None, f"no {column!r} field; use --text-column"
        value = value[part]
    return value, None


def _why_not_text(record: bytes, column: str) -> str | None:
    """Why a JSON line has no usable text (None if it has)."""
    try:
        obj = _json_loads(record)
    except UnicodeDecodeError:
        return "not valid UTF-8"
    except ValueError as e:
        return f"not JSON ({e})"
    if not isinstance(obj, dict):
        return f"not a JSON object but {type(obj).__name__}"
    value, missing = _json_field(obj, column)
    if missing is not None:
        return missing
    if value is None:
        return f"{column!r} is null"
    if not isinstance(value, str):
        return f"{column!r} is {type(value).__name__}, not a string"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"{column!r} holds a lone surrogate, not valid Unicode"
    return None


def _json_loads(record: bytes) -> Any:
    """A JSON line read as UTF-8, with or without a byte-order mark: json.loads
    on bytes would also take UTF-16 and UTF-32, guessed from where NUL bytes fall."""
    return json.loads(record.decode("utf-8").removeprefix("\ufeff"))


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False
