"""Data integrity of the input readers (issue 14): blank text lines are not
documents, dictionary-encoded text columns are text, suffixes in any case are
inputs, and a file skipped whole counts the documents it is known to hold."""

from __future__ import annotations

import gzip
import io
import json
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import make_documents, write_shard
from runs import manifest, tokenmill_here

from tokenmill.errors import TokenmillError
from tokenmill.io.readers import (
    READ_BYTES,
    read_batches,
    shard_format,
    skipped_file_documents,
)

RUN = ("--vocab-size", "300", "--workers", "2")
GOOD_DOCS = 30


def read_all(path: Path, **kw) -> tuple[list[int], list[str], list[dict]]:
    """(rows, documents, skips) of a shard, read with --on-error skip."""
    rows, docs, skips = [], [], []
    for r, d in read_batches(path, on_skip=skips.append, batch_rows=kw.pop("batch_rows", 8192)):
        rows += r.to_pylist()
        docs += d.to_pylist()
    return rows, docs, skips


def token_table(out: Path, shard: str) -> pa.Table:
    """The token shard of input `shard`, found through the manifest."""
    [path] = [e["path"] for e in manifest(out)["outputs"] if e["shard"] == shard]
    return pq.read_table(out / path)


def good_corpus(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    write_shard(data / "a-good.jsonl", make_documents(GOOD_DOCS))
    return data


# -- 1. blank lines of text shards ------------------------------------------------

BLANKY = b"first\n\n   \n\r\n\t \r\nsecond\r\n\x0b\x0c\nthird \xff\n\nfourth"


@pytest.mark.parametrize("name", ["blank.txt", "blank.txt.gz"])
def test_blank_text_lines_are_not_documents(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(gzip.compress(BLANKY) if name.endswith(".gz") else BLANKY)
    rows, docs, skips = read_all(path)
    # rows count documents (non-blank lines), so they are 0..3; the bad one leaves a gap
    assert docs == ["first", "second", "fourth"]
    assert rows == [0, 1, 3]
    # the skip reason keeps the 1-based line number of the file
    assert skips == [{"row": 2, "reason": "row 2 (line 8): not valid UTF-8", "documents": 1}]


def test_a_text_shard_of_only_blank_lines_has_no_documents(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"\n \n\r\n\t\n")
    assert read_all(path) == ([], [], [])


def test_blank_text_lines_across_blocks(tmp_path, monkeypatch):
    """Line numbers and rows stay right when blank lines fall at block edges."""
    import tokenmill.io.readers as readers

    monkeypatch.setattr(readers, "TEXT_BLOCK_BYTES", 7)
    monkeypatch.setattr(readers, "READ_BYTES", 3)
    lines = [b"", b"ab", b"", b"", b"cdefghijk", b" ", b"\xff", b"", b"l"]
    path = tmp_path / "edges.txt"
    path.write_bytes(b"\n".join(lines) + b"\n")
    rows, docs, skips = read_all(path)
    assert docs == ["ab", "cdefghijk", "l"]
    assert rows == [0, 1, 3]
    assert [s["reason"] for s in skips] == ["row 2 (line 7): not valid UTF-8"]


def test_blank_text_lines_through_a_run(tmp_path):
    data = good_corpus(tmp_path)
    (data / "b.txt").write_bytes(b"alpha beta\n\n \r\ngamma\n\n")
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN)
    m = manifest(out)
    assert m["documents"] == m["documents_in"] == GOOD_DOCS + 2
    assert token_table(out, "b.txt")["row"].to_pylist() == [0, 1]
    # a bad line's error names its row (documents) and line (of the file)
    (data / "b.txt").write_bytes(b"alpha\n\n\nbad \xff\n")
    result = tokenmill_here("run", data, tmp_path / "out2", *RUN, check=False)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].endswith("b.txt: row 1 (line 4): not valid UTF-8")


# -- 2. dictionary-encoded text columns --------------------------------------------


def dictionary_table(value_type: pa.DataType, docs: list[str | None]) -> pa.Table:
    arr = pa.array(docs, value_type).dictionary_encode()
    return pa.table({"text": arr})


@pytest.mark.parametrize("value_type", [pa.string(), pa.large_string()])
def test_dictionary_encoded_text_is_read(tmp_path, value_type):
    docs = ["a b c", "naïve café", "a b c", None, "東京", "a b c", "x"] * 3
    path = tmp_path / "dict.parquet"
    # several row groups, each with a dictionary of its own
    pq.write_table(dictionary_table(value_type, docs), path, row_group_size=4)
    assert pa.types.is_dictionary(pq.read_schema(path).field("text").type)
    rows, got, skips = read_all(path)
    assert got == [d for d in docs if d is not None]
    assert rows == [i for i, d in enumerate(docs) if d is not None]
    assert [s["row"] for s in skips] == [i for i, d in enumerate(docs) if d is None]
    assert all("is null" in s["reason"] for s in skips)


def test_dictionary_of_invalid_utf8_is_a_bad_document(tmp_path):
    values = pa.array([b"good words", b"bad \xff"], pa.binary())
    arr = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()), values)
    # binary dictionaries hold bytes; the reader checks they are UTF-8
    path = tmp_path / "dict.parquet"
    pq.write_table(pa.table({"text": arr}), path)
    rows, got, skips = read_all(path)
    assert (rows, got) == ([0, 2], ["good words", "good words"])
    assert [(s["row"], s["reason"]) for s in skips] == [(1, "row 1: not valid UTF-8")]


def test_dictionary_encoded_parquet_through_a_run(tmp_path):
    data = good_corpus(tmp_path)
    docs = make_documents(40, seed=3)
    pq.write_table(dictionary_table(pa.string(), docs), data / "cat.parquet", row_group_size=9)
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN)
    m = manifest(out)
    assert m["documents"] == GOOD_DOCS + 40 and not m["skipped"]
    assert token_table(out, "cat.parquet")["row"].to_pylist() == list(range(40))


# -- 3. suffixes in any case --------------------------------------------------------


@pytest.mark.parametrize(
    "name, fmt",
    [
        ("UPPER.JSONL", "jsonl"),
        ("Notes.TXT", "text"),
        ("X.Parquet", "parquet"),
        ("a.JSONL.GZ", "jsonl"),
        ("b.Txt.Gz", "text"),
        ("plain.jsonl", "jsonl"),
        ("notes.md", None),
        ("a.GZ", None),
        ("archive.tar.gz", None),
    ],
)
def test_suffixes_match_in_any_case(name, fmt):
    assert shard_format(Path(name)) == fmt
    assert shard_format(Path("some/dir") / name) == fmt


def test_upper_case_shards_are_read_and_run(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    docs = ["one two", "three", "naïve café"]
    (data / "UPPER.JSONL").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    (data / "Notes.TXT").write_text("".join(d + "\n" for d in docs))
    pq.write_table(pa.table({"text": docs}), data / "X.Parquet")
    gz = gzip.compress("".join(json.dumps({"text": d}) + "\n" for d in docs).encode())
    (data / "a.JSONL.GZ").write_bytes(gz)
    for p in sorted(data.iterdir()):
        assert read_all(p)[1] == docs, p.name  # gzip is recognised in upper case too
    out = tmp_path / "out"
    tokenmill_here("run", data, out, "--vocab-size", "300")
    m = manifest(out)
    assert sorted(i["path"] for i in m["inputs"]) == sorted(p.name for p in data.iterdir())
    assert m["documents"] == 12


# -- 4. whole-file skips count what the file held ----------------------------------


def parquet_bytes(table: pa.Table, **kw) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, **kw)
    return buf.getvalue()


def corrupt_row_group(data: bytes, group: int) -> bytes:
    """The Parquet file with one row group's pages overwritten, its footer intact."""
    chunk = pq.read_metadata(io.BytesIO(data)).row_group(group).column(0)
    start = min(o for o in (chunk.dictionary_page_offset, chunk.data_page_offset) if o)
    out = bytearray(data)
    out[start : start + chunk.total_compressed_size] = b"\xff" * chunk.total_compressed_size
    return bytes(out)


DOCS_3000 = [f"document {i} of three thousand" for i in range(3000)]


@pytest.mark.parametrize(
    "content",
    [
        parquet_bytes(pa.table({"text": list(range(3000))})),  # a column that is not text
        parquet_bytes(pa.table({"body": DOCS_3000})),  # no text column
        corrupt_row_group(parquet_bytes(pa.table({"text": DOCS_3000}), row_group_size=1000), 1),
    ],
    ids=["not-text", "no-column", "corrupt-page"],
)
def test_a_skipped_parquet_file_counts_its_footer_rows(tmp_path, content):
    data = good_corpus(tmp_path)
    (data / "bad.parquet").write_bytes(content)
    assert skipped_file_documents(data / "bad.parquet", 0) == {"documents": 3000}
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN, "--on-error", "skip")
    m = manifest(out)
    [skip] = m["skipped"]
    assert skip["shard"] == "bad.parquet" and skip["row"] is None
    assert skip["documents"] == 3000 and "lower_bound" not in skip
    assert m["documents"] == GOOD_DOCS
    assert m["documents_skipped"] == 3000
    assert m["documents_in"] == GOOD_DOCS + 3000


def test_a_parquet_file_without_a_footer_counts_what_was_read(tmp_path):
    path = tmp_path / "cut.parquet"
    path.write_bytes(parquet_bytes(pa.table({"text": DOCS_3000}))[:-100])
    assert skipped_file_documents(path, 0) == {"documents": 0, "lower_bound": True}


def broken_gzip(lines: list[bytes], size: int | None = None) -> tuple[bytes, int]:
    """A gzip stream cut to `size` bytes (by default in the middle), and how many
    whole lines can be read from it."""
    whole = gzip.compress(b"".join(line + b"\n" for line in lines), mtime=0)
    cut = whole[: len(whole) // 2 if size is None else size]
    readable = zlib.decompressobj(wbits=31).decompress(cut)
    return cut, readable.count(b"\n")


def text_lines(n: int) -> list[bytes]:
    return [f"line {i} of a long file that broke".encode() for i in range(n)]


# A cut inside the first read (`head -c 20000`: its 8000 whole lines were
# counted as none), one inside the 64 kB a .json file's head is checked in
# (counted as none), and one past many reads.
@pytest.mark.parametrize("size", [20000, 3000, None])
@pytest.mark.parametrize("name", ["broken.txt.gz", "broken.jsonl.gz", "broken.json.gz"])
def test_a_broken_stream_counts_the_documents_read_before_it_broke(tmp_path, name, size):
    lines = text_lines(60000)
    if name.endswith((".jsonl.gz", ".json.gz")):  # .json: JSON Lines, its head checked first
        lines = [json.dumps({"text": line.decode()}).encode() for line in lines]
    content, readable = broken_gzip(lines, size)
    assert readable > (500 if size else 9000)
    data = good_corpus(tmp_path)
    (data / name).write_bytes(content)
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN, "--on-error", "skip")
    m = manifest(out)
    [skip] = m["skipped"]
    assert skip["shard"] == name and skip["row"] is None and "cannot read" in skip["reason"]
    assert skip["lower_bound"] is True
    assert skip["documents"] == readable  # every whole line, the cut one not
    assert m["documents_in"] == m["documents"] + m["documents_skipped"]
    assert m["documents_skipped"] == skip["documents"]


def test_blank_lines_read_before_a_break_are_not_counted(tmp_path):
    lines = [x for line in text_lines(40000) for x in (line, b"", b"  ")]
    content, readable = broken_gzip(lines)
    path = tmp_path / "broken.txt.gz"
    path.write_bytes(content)
    stats = {"rows": 0}
    with pytest.raises(TokenmillError, match="broken.txt.gz: cannot read"):
        for _ in read_batches(path, stats=stats):
            pass
    assert stats["rows"] == -(-readable // 3)  # one in three readable lines is a document


def corrupt_gzip() -> bytes:
    """Two gzip members, the second's deflate data damaged: a block of the reserved
    type 3 (zlib.error "invalid block type", which is no OSError)."""
    lines = text_lines(50000)
    first = gzip.compress(b"\n".join(lines[:25000]) + b"\n", mtime=0)
    second = bytearray(gzip.compress(b"\n".join(lines[25000:]) + b"\n", mtime=0))
    second[10] = 0b111  # after the 10-byte header: BFINAL 1, BTYPE 11
    return first + bytes(second)


def test_corrupt_gzip_is_one_line_error_or_a_skip(tmp_path):
    data = good_corpus(tmp_path)
    (data / "bad.txt.gz").write_bytes(corrupt_gzip())
    result = tokenmill_here("count", data, tmp_path / "counts", check=False)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: ") and "bad.txt.gz: cannot read" in last
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN, "--on-error", "skip")
    [skip] = manifest(out)["skipped"]
    assert skip["shard"] == "bad.txt.gz" and skip["row"] is None and skip["lower_bound"]
    # the first member's lines were read before the second broke
    assert 25000 - READ_BYTES // 36 - 1 <= skip["documents"] <= 25000
