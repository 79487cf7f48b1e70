"""Arrow IPC inputs (`.arrow`, `.feather`) in both layouts: the file format
(a footer indexing the record batches, as `pyarrow.feather` writes) and the
stream format (no footer, as Hugging Face `datasets` writes its `.arrow`
files). The layout is told by the first bytes, whatever the suffix says.
A file must be whole: a file-format file ends in its footer, a stream in its
end-of-stream marker, without which PyArrow reads a stream cut after any
batch (a killed writer, a copy cut short) as a whole, shorter one.

Only the wanted top-level field is read (IPC read options project it), one
record batch at a time through ordinary reads rather than a memory map, so
memory is bounded by the writer's batch size and resident memory says so.
PyArrow does not check the buffers it reads, so each batch is validated
before anyone touches its values: a corrupt file is an error, never a crash.
A remote file (a UPath, io/storage.py) is read the same way from a file object
that fetches byte ranges as they are read.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa

from tokenmill.io.arrow import is_text
from tokenmill.io.storage import AnyPath, is_remote, is_tapped, open_read, store_errors

# The file format starts with these bytes; a stream starts with a message length.
FILE_MAGIC = b"ARROW1"
# What ends a stream: a continuation marker and a message length of 0, or in
# the format before Arrow 0.15 (IpcWriteOptions(use_legacy_format=True)) the
# zero length alone.
END_OF_STREAM = (b"\xff\xff\xff\xff\x00\x00\x00\x00", b"\x00\x00\x00\x00")


# Files named .arrow or .feather that are no Arrow IPC, by their first bytes:
# PyArrow reads their bytes as a message length ("Expected to read 826361158
# metadata bytes").
OTHER_FORMATS = {
    b"PAR1": "a Parquet file, not Arrow IPC: name it .parquet",
    b"FEA1": (
        "Feather version 1 (before Arrow 0.17), not Arrow IPC: write it again with "
        "pyarrow.feather.write_feather(pyarrow.feather.read_table(PATH), NEW_PATH)"
    ),
}


def is_file_format(path: AnyPath) -> bool:
    with store_errors(path), open_read(path) as f:
        return _is_file_format(f.read(len(FILE_MAGIC)))


def _is_file_format(head: bytes) -> bool:
    """Whether `head` (the first bytes) starts the file format; a stream is
    anything else but another format (ArrowInvalid, as PyArrow's own)."""
    for magic, what in OTHER_FORMATS.items():
        if head.startswith(magic):
            raise pa.ArrowInvalid(what)
    return head == FILE_MAGIC


@contextmanager
def _reader(path: AnyPath, fields: list[int] | None = None):
    # Tasks already run one per shard in parallel: Arrow's pool would only add hand-offs.
    options = pa.ipc.IpcReadOptions(use_threads=False, included_fields=fields)
    # A tapped local stream (storage.tapped) is read through its tap's object too;
    # a local file-format file never: PyArrow reads a footer on its I/O thread,
    # which then holds the Python object, and released there as the interpreter
    # exits (after a bad footer) it aborts the process. The tap hashes it after.
    if is_remote(path) or (is_tapped(path) and not is_file_format(path)):
        # One open object for the magic and the batches: each open costs a request.
        with store_errors(path, by_pyarrow=True), open_read(path) as f:
            file_format = _is_file_format(f.read(len(FILE_MAGIC)))
            f.seek(0)
            with pa.PythonFile(f, mode="r") as source:
                open_ = pa.ipc.open_file if file_format else pa.ipc.open_stream
                yield open_(source, options=options), source
        return
    with pa.OSFile(str(path)) as f:
        if is_file_format(path):
            yield pa.ipc.open_file(f, options=options), f
        else:
            yield pa.ipc.open_stream(f, options=options), f


def schema(path: AnyPath) -> pa.Schema:
    with _reader(path) as (reader, _):
        return reader.schema


def record_batches(path: AnyPath, index: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The top-level field number `index` of the file's `schema` as record
    batches of one column and at most `batch_rows` rows, in file order."""
    with _reader(path, [index]) as (reader, source):
        batches: Iterator[pa.RecordBatch]
        if isinstance(reader, pa.ipc.RecordBatchFileReader):
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        else:
            batches = _stream_batches(reader, source)
        for batch in batches:
            check_buffers(batch.column(0))
            for start in range(0, batch.num_rows, batch_rows):
                yield batch.slice(start, batch_rows)


def row_count(path: AnyPath) -> int | None:
    """The rows of a file-format file as its footer and batch headers say; None
    for a stream (which has no footer) or a file whose footer does not read."""
    try:
        if not is_file_format(path):
            return None
        with _reader(path) as (reader, _):
            return reader.count_rows()
    except (OSError, pa.ArrowException):
        return None


def _stream_batches(reader: pa.ipc.RecordBatchStreamReader, source) -> Iterator[pa.RecordBatch]:
    """The batches of a stream, then pa.ArrowInvalid unless the bytes the reader
    read last (`source` is read only by it, without read-ahead) are an
    end-of-stream marker rather than nothing: the end of the file."""
    while True:
        at = source.tell()
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            break
        yield batch
    end = source.tell()
    source.seek(at)
    if source.read(end - at) not in END_OF_STREAM:
        raise pa.ArrowInvalid("the stream ends without its end-of-stream marker (cut short)")
    if source.read(1):
        # PyArrow stops at the marker: a second stream appended (`cat a.arrow
        # b.arrow`) or other bytes would go unread, its documents lost.
        raise pa.ArrowInvalid(
            "bytes after the stream's end-of-stream marker (streams joined, or other "
            "bytes appended): give each stream a file of its own"
        )


def check_buffers(arr: pa.Array) -> None:
    """Raise pa.ArrowInvalid unless `arr`'s offsets and buffers are consistent.
    Text is checked as bytes: invalid UTF-8 is a bad document, for the readers
    to name row by row, not a bad file."""
    t = arr.type
    if is_text(t):
        binary = {pa.string(): pa.binary(), pa.large_string(): pa.large_binary()}
        arr.view(binary.get(t, pa.binary_view())).validate(full=True)
    elif pa.types.is_struct(t):
        arr.validate()
        for i in range(t.num_fields):
            check_buffers(arr.field(i))
    else:
        arr.validate(full=True)
