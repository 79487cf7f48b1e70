"""Bad inputs under --on-error fail (one-line error naming file and row) and
--on-error skip (the bad document or file is skipped and listed, in the
manifest and at the end of the run; documents in = out + skipped)."""

from __future__ import annotations

import gzip
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import assert_one_line_error, make_documents, write_shard
from runs import manifest, tokenmill_here

GOOD_DOCS = 30


def jsonl(*lines: bytes) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=2)
    return buf.getvalue()


def truncated_gzip() -> bytes:
    whole = gzip.compress(b"".join(b'{"text": "some words here"}\n' for _ in range(20000)))
    return whole[: len(whole) // 2]


def truncated_parquet() -> bytes:
    return parquet_bytes(pa.table({"text": make_documents(50)}))[:-100]


# name, content, bad row (None: the whole file is unreadable), rows in the file, reason
DOCUMENT_CASES = {
    "utf8-text": ("bad.txt", b"fine line\nbroken \xff\xfe line\nlast line\n", 1, 3, "UTF-8"),
    "utf8-jsonl": (
        "bad.jsonl",
        jsonl(b'{"text": "ok"}', b'{"text": "bad \xff here"}', b'{"text": "fine"}'),
        1,
        3,
        "UTF-8",
    ),
    "not-json": (
        "bad.jsonl",
        jsonl(b'{"text": "ok"}', b"not json", b'{"text": "x"}'),
        1,
        3,
        "not JSON",
    ),
    "not-an-object": (
        "bad.jsonl",
        jsonl(b'{"text": "ok"}', b"[1, 2]", b'{"text": "x"}'),
        1,
        3,
        "object",
    ),
    "null-jsonl": (
        "bad.jsonl",
        jsonl(b'{"text": "ok"}', b'{"text": null}', b'{"text": "x"}'),
        1,
        3,
        "null",
    ),
    "number-jsonl": (
        "bad.jsonl",
        jsonl(b'{"text": "ok"}', b'{"text": 5}', b'{"text": "x"}'),
        1,
        3,
        "not a string",
    ),
    "missing-field-jsonl": (
        "bad.jsonl",
        jsonl(b'{"text": "ok"}', b'{"body": "x"}', b'{"text": "x"}'),
        1,
        3,
        "no 'text' field",
    ),
    "latin1-text": ("bad.txt", "café\nplain words\nsimple\n".encode("latin-1"), 0, 3, "UTF-8"),
    "latin1-jsonl-key": (
        "bad.jsonl",
        jsonl(b'{"text": "ok"}', '{"clé": 1, "text": "fine"}'.encode("latin-1"), b'{"text": "x"}'),
        1,
        3,
        "UTF-8",
    ),
    "null-parquet": (
        "bad.parquet",
        parquet_bytes(pa.table({"text": ["a b", "c", None, "d e"]})),
        2,
        4,
        "null",
    ),
}
FILE_CASES = {
    "truncated-gzip-jsonl": ("bad.jsonl.gz", truncated_gzip(), "cannot read"),
    "truncated-gzip-text": ("bad.txt.gz", truncated_gzip()[:2000], "cannot read"),
    "truncated-parquet": ("bad.parquet", truncated_parquet(), "cannot read"),
    "garbage-parquet": ("bad.parquet", b"PAR1" + bytes(range(256)) * 8 + b"PAR1", "cannot read"),
    "utf16-text": ("bad.txt", "one line\nanother\n".encode("utf-16"), "UTF-16"),
    "utf16-jsonl": ("bad.jsonl", '{"text": "ok"}\n'.encode("utf-16"), "UTF-16"),
    "number-column-parquet": ("bad.parquet", parquet_bytes(pa.table({"text": [1, 2]})), "not text"),
}


def corpus_with(tmp_path, name: str, content: bytes):
    data = tmp_path / "data"
    write_shard(data / "a-good.jsonl", make_documents(GOOD_DOCS))
    (data / name).write_bytes(content)
    return data


RUN = ("--vocab-size", "300", "--workers", "2")


@pytest.mark.parametrize("case", list(DOCUMENT_CASES) + list(FILE_CASES))
def test_fail_stops_with_one_line_naming_file_and_row(tmp_path, case):
    if case in DOCUMENT_CASES:
        name, content, row, _, reason = DOCUMENT_CASES[case]
    else:
        (name, content, reason), row = FILE_CASES[case], None
    data = corpus_with(tmp_path, name, content)
    out = tmp_path / "out"
    result = tokenmill_here("run", data, out, *RUN, "--on-error", "fail", check=False)
    assert result.returncode == 1
    assert_one_line_error(
        _Result(result), name, reason, *([f"row {row}"] if row is not None else [])
    )
    assert not (out / "tokenizer.json").exists()
    assert not (out / "manifest.json").exists()


@pytest.mark.parametrize("case", list(DOCUMENT_CASES))
def test_skip_a_bad_document(tmp_path, case):
    name, content, row, rows, reason = DOCUMENT_CASES[case]
    data = corpus_with(tmp_path, name, content)
    out = tmp_path / "out"
    result = tokenmill_here("run", data, out, *RUN, "--on-error", "skip")
    m = manifest(out)
    [skip] = m["skipped"]
    assert skip["shard"] == name and skip["row"] == row and skip["documents"] == 1
    assert reason in skip["reason"] and f"row {row}" in skip["reason"]
    assert f"skipped: {name}: row {row}" in result.stderr
    assert reason in result.stderr.strip().splitlines()[-1]
    assert result.stderr.strip().endswith(" (1 document)")
    # nothing lost silently: documents in = documents out + documents skipped
    assert m["documents_in"] == GOOD_DOCS + rows
    assert m["documents_in"] == m["documents"] + m["documents_skipped"]
    written = {e["shard"]: pq.read_table(out / e["path"]) for e in m["outputs"]}
    assert sum(t.num_rows for t in written.values()) == m["documents"]
    assert written[name]["row"].to_pylist() == [r for r in range(rows) if r != row]
    assert m["config"]["on_error"] == "skip"


@pytest.mark.parametrize("case", list(FILE_CASES))
def test_skip_an_unreadable_file(tmp_path, case):
    name, content, reason = FILE_CASES[case]
    data = corpus_with(tmp_path, name, content)
    out = tmp_path / "out"
    result = tokenmill_here("run", data, out, *RUN, "--on-error", "skip")
    m = manifest(out)
    [skip] = m["skipped"]
    assert skip["shard"] == name and skip["row"] is None
    assert reason in skip["reason"] and name not in skip["reason"]  # "shard" names it
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"skipped: {name}: ") and line.count(name) == 1, line
    assert [e["shard"] for e in m["outputs"]] == ["a-good.jsonl"]
    assert [e["shard"] for e in m["counts"]] == ["a-good.jsonl"]
    assert m["documents"] == GOOD_DOCS
    assert m["documents_in"] == m["documents"] + m["documents_skipped"]
    # the documents read before the file turned out unreadable are counted as skipped
    assert skip["documents"] == m["documents_skipped"] >= 0


def test_skip_lists_every_skip_across_files(tmp_path):
    data = corpus_with(tmp_path, "b.txt", b"ok\n\xff\nfine\n\xfe\n")
    (data / "c.jsonl.gz").write_bytes(truncated_gzip())
    (data / "d.jsonl").write_bytes(jsonl(b'{"text": 1}', b'{"text": "good"}', b"{"))
    out = tmp_path / "out"
    result = tokenmill_here("run", data, out, *RUN, "--on-error", "skip")
    m = manifest(out)
    assert [(s["shard"], s["row"]) for s in m["skipped"]] == [
        ("b.txt", 1),
        ("b.txt", 3),
        ("c.jsonl.gz", None),
        ("d.jsonl", 0),
        ("d.jsonl", 2),
    ]
    listed = [line for line in result.stderr.splitlines() if line.startswith("skipped: ")]
    assert len(listed) == 5
    assert m["documents_in"] == m["documents"] + m["documents_skipped"]
    skipped = f"{m['documents_skipped']} documents skipped (1 whole file, 4 rows)"
    assert f"run: {m['documents']} documents, at least {skipped}" in result.stderr


def test_stage_commands_take_on_error_too(tmp_path):
    data = corpus_with(tmp_path, "bad.jsonl", jsonl(b'{"text": "ok"}', b"not json"))
    result = tokenmill_here("count", data, tmp_path / "counts", "--on-error", "skip")
    assert "skipped: bad.jsonl: row 1 (line 2): not JSON" in result.stderr
    result = tokenmill_here("count", data, tmp_path / "counts2", check=False)
    assert result.returncode == 1 and "row 1 (line 2)" in result.stderr


def test_a_skipped_shard_is_redone_under_fail(tmp_path):
    """A kept output that had skips would hide them from a --on-error fail rerun."""
    data = corpus_with(tmp_path, "bad.jsonl", jsonl(b'{"text": "ok"}', b"not json"))
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN, "--on-error", "skip")
    result = tokenmill_here("run", data, out, *RUN, check=False)
    assert result.returncode == 1 and "bad.jsonl: row 1" in result.stderr
    again = tokenmill_here("run", data, out, *RUN, "--on-error", "skip")
    assert "skipped: bad.jsonl: row 1" in again.stderr
    assert manifest(out)["stages"]["count"]["reused"] == 2


class _Result:
    """A subprocess result in the shape test_errors.assert_one_line_error reads."""

    def __init__(self, completed):
        self.exit_code = completed.returncode
        self.output = completed.stdout + completed.stderr


def test_blank_json_lines_are_not_documents_and_lines_are_counted_right(tmp_path):
    data = corpus_with(
        tmp_path, "gaps.jsonl", jsonl(b'{"text": "a"}', b"", b"  ", b'{"text": "b"}', b"oops")
    )
    result = tokenmill_here("count", data, tmp_path / "counts", check=False)
    assert "gaps.jsonl: row 2 (line 5): not JSON" in result.stderr
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN, "--on-error", "skip")
    m = manifest(out)
    assert [(s["row"], s["documents"]) for s in m["skipped"]] == [(2, 1)]
    assert m["documents_in"] == GOOD_DOCS + 3


def test_a_document_the_tokenizers_pattern_fails_on_is_a_bad_document(tmp_path):
    """A custom pattern past the regex engine's limits on one document's text:
    encode names the file and row, or under skip leaves that document out."""
    from tokenmill import Tokenizer

    # \s+(?!\S) backtracks over a run of spaces before a letter, one step each.
    pattern = r"\s+(?!\S)|\S+|\s"
    tok = tmp_path / "tok.json"
    Tokenizer.train(["hello world  x"] * 10, pattern=pattern, vocab_size=270).save(tok)
    data = corpus_with(
        tmp_path, "bad.jsonl", jsonl(b'{"text": "ok"}', b'{"text": "%s x"}' % (b" " * 1_100_000))
    )
    (data / "c.jsonl").write_bytes(jsonl(b'{"text": "fine"}'))
    out = tmp_path / "out"
    result = tokenmill_here("run", data, out, "--tokenizer", tok, check=False)
    assert_one_line_error(_Result(result), "bad.jsonl: row 1: pre-tokenization pattern failed")
    result = tokenmill_here("run", data, out, "--tokenizer", tok, "--on-error", "skip")
    m = manifest(out)
    [skip] = m["skipped"]
    assert (skip["shard"], skip["row"], skip["documents"]) == ("bad.jsonl", 1, 1)
    assert "skipped: bad.jsonl: row 1: pre-tokenization pattern failed" in result.stderr
    written = {e["shard"]: pq.read_table(out / e["path"]) for e in m["outputs"]}
    assert written["bad.jsonl"]["row"].to_pylist() == [0]
    assert written["c.jsonl"].num_rows == 1 and written["a-good.jsonl"].num_rows == GOOD_DOCS
    assert m["documents_in"] == m["documents"] + m["documents_skipped"] == GOOD_DOCS + 3
