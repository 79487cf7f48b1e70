"""A store that fails while an input object is read (here an fsspec memory
filesystem made to fail as an unreachable S3 endpoint does) is a StoreError
naming the object, whichever read meets it first: its fingerprint, its size,
its schema, the count of a file being skipped, its documents. Never a bare
library message, and never a skip: the input is not at fault."""

from __future__ import annotations

import io
import json
import re
import uuid

import botocore.exceptions
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from tokenmill.errors import StoreError
from tokenmill.io.columns import has_column
from tokenmill.io.files import fingerprint
from tokenmill.io.readers import read_batches, skipped_file_documents
from tokenmill.io.storage import location, size

TABLE = pa.table({"text": ["one document", "another"], "source": ["a", "b"]})


def arrow_stream() -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, TABLE.schema) as w:
        w.write_table(TABLE)
    return sink.getvalue().to_pybytes()


def parquet() -> bytes:
    buf = io.BytesIO()
    pq.write_table(TABLE, buf)
    return buf.getvalue()


JSONL = b"".join(json.dumps({"text": t}).encode() + b"\n" for t in TABLE["text"].to_pylist())
OBJECTS = {"a.parquet": parquet(), "b.arrow": arrow_stream(), "c.jsonl": JSONL}


def unreachable(*args, **kwargs):
    raise botocore.exceptions.EndpointConnectionError(endpoint_url="http://store.invalid")


class FailingFile(io.BytesIO):
    """An object that opens, then fails at its first read."""

    read = readinto = unreachable


@pytest.fixture
def objects():
    """The OBJECTS on a memory filesystem under a prefix of this test's own."""
    fs = MemoryFileSystem()
    root = f"memory://store-errors/{uuid.uuid4().hex}"
    for name, content in OBJECTS.items():
        fs.pipe(f"{root}/{name}", content)
    yield {name: location(f"{root}/{name}") for name in OBJECTS}
    fs.rm(f"{root}", recursive=True)


def fail(monkeypatch, how: str) -> None:
    if how == "info":
        monkeypatch.setattr(MemoryFileSystem, "info", unreachable)
    elif how == "open":
        monkeypatch.setattr(MemoryFileSystem, "_open", unreachable)
    else:
        monkeypatch.setattr(MemoryFileSystem, "_open", lambda *a, **k: FailingFile(b"x" * 64))


def named(path, action: str = "read") -> str:
    return rf"^{re.escape(str(path))}: cannot {action} \(Could not connect to the endpoint URL"


@pytest.mark.parametrize("how", ["info", "open", "read"])
@pytest.mark.parametrize("name", list(OBJECTS))
def test_the_fingerprint_of_an_object_names_it(objects, monkeypatch, name, how):
    path = objects[name]
    fail(monkeypatch, how)
    with pytest.raises(StoreError, match=named(path)):
        fingerprint(path)


def test_the_size_of_an_object_names_it(objects, monkeypatch):
    fail(monkeypatch, "info")
    with pytest.raises(StoreError, match=named(objects["a.parquet"])):
        size(objects["a.parquet"])


@pytest.mark.parametrize("how", ["open", "read"])
@pytest.mark.parametrize("name", ["a.parquet", "b.arrow"])
def test_the_schema_and_row_count_of_an_object_name_it(objects, monkeypatch, name, how):
    path = objects[name]
    fail(monkeypatch, how)
    with pytest.raises(StoreError, match=named(path)):
        has_column(path, "source")
    with pytest.raises(StoreError, match=named(path)):
        skipped_file_documents(path, 0)


@pytest.mark.parametrize("how", ["open", "read"])
@pytest.mark.parametrize("name", list(OBJECTS))
def test_the_documents_of_an_object_name_it(objects, monkeypatch, name, how):
    path = objects[name]
    fail(monkeypatch, how)
    with pytest.raises(StoreError, match=named(path)):
        list(read_batches(path, on_skip=lambda skip: None))


# While tokenmill writes (uploads an output and records it, writes its lock),
# the line says so, and names the object.


def test_reading_back_an_upload_says_so(objects, monkeypatch):
    from tokenmill.stages.state import record_output

    path = objects["a.parquet"]  # as just uploaded
    fail(monkeypatch, "info")
    with pytest.raises(StoreError, match=named(path, "read back its upload")):
        record_output(path)


def test_writing_the_lock_names_it(objects, monkeypatch):
    from tokenmill.errors import WriteError
    from tokenmill.io.lock import LOCK, output_lock

    folder = objects["a.parquet"].parent / "out"
    with output_lock(folder) as lock:
        monkeypatch.setattr(MemoryFileSystem, "pipe_file", unreachable)
        with pytest.raises(WriteError, match=named(folder / LOCK, "write")):
            lock.record(None, "run")


def test_an_output_that_does_not_read_back_is_one_line_naming_it(tmp_path):
    """A store that reports another size than was uploaded (a proxy's HEAD
    of Content-Length 0) made the read-back a traceback (ArrowInvalid)."""
    from tokenmill.errors import WriteError
    from tokenmill.stages.shards import output_record

    out = tmp_path / "a.parquet"
    out.write_bytes(b"")
    with pytest.raises(WriteError, match=r"a\.parquet: cannot read back what was written \("):
        output_record(out, "0" * 64)
