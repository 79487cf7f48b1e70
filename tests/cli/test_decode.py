"""`tokenmill decode` (issue 14): --row is the document's row in its input shard
(the token shard's `row` column), and the text is written exactly, as UTF-8
bytes with no newline added, so that `decode ... > x` equals the document."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from runs import manifest, tokenmill_here

from tokenmill.tokenizer import Tokenizer

DOCS = [
    "plain words, no newline at the end",
    "ends with a newline\n",
    "Windows\r\nline ends\r\n",
    None,  # row 3: not JSON, skipped
    "Καλημέρα κόσμε — 東京, naïve café, привіт 😀",
    "trailing spaces   ",
    "\n\nleading newlines",
    "the text of a special token at the end <|endoftext|>",
    "x",
    "  \t",  # only whitespace: a document in JSON Lines
    "last one",
]
SKIPPED = 3
LINES = [
    b"first line",
    b"",
    b"  \r",
    b"second, after blanks\r",
    b"bad \xff",
    b"",
    b"third \xc3\xa9",
]
# documents of the text shard: (row, bytes); line 5 (row 2) is bad UTF-8
TEXT_ROWS = [(0, b"first line"), (1, b"second, after blanks"), (3, "third é".encode())]
RUN = ("--vocab-size", "300", "--workers", "2", "--on-error", "skip")


def write_corpus(data: Path) -> None:
    data.mkdir(parents=True)
    records = [b"not json" if d is None else json.dumps({"text": d}).encode() for d in DOCS]
    (data / "docs.jsonl").write_bytes(b"".join(r + b"\n" for r in records))
    (data / "lines.txt").write_bytes(b"\n".join(LINES))  # no newline after the last line


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """{"eos": OUT, "no-eos": OUT}: runs of the same corpus with and without --eos."""
    base = tmp_path_factory.mktemp("decode")
    write_corpus(base / "data")
    outs = {"eos": base / "out", "no-eos": base / "out-no-eos"}
    tokenmill_here("run", base / "data", outs["eos"], *RUN)
    tokenmill_here("run", base / "data", outs["no-eos"], *RUN, "--no-eos")
    return outs


def token_shard(out: Path, shard: str) -> Path:
    [path] = [e["path"] for e in manifest(out)["outputs"] if e["shard"] == shard]
    return out / path


def decode(*args) -> subprocess.CompletedProcess:
    """`tokenmill decode ARGS`, stdout as bytes."""
    return subprocess.run(
        [sys.executable, "-m", "tokenmill", "decode", *map(str, args)],
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "ascii"},  # the output must not depend on it
    )


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, result
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), lines
    return lines[0]


@pytest.mark.parametrize("eos", ["eos", "no-eos"])
def test_decode_prints_each_document_byte_for_byte(runs, eos, cli):
    """In this process, for speed; the console's encoding is the next test's."""
    shard = token_shard(runs[eos], "docs.jsonl")
    for row, doc in enumerate(DOCS):
        if doc is None:
            continue
        result = cli("decode", "--shard", shard, "--row", row)
        assert result.stdout_bytes == doc.encode("utf-8"), row


def test_decode_redirected_to_a_file_equals_the_document(runs, tmp_path):
    shard = token_shard(runs["eos"], "docs.jsonl")
    row = 4  # non-ASCII, no trailing newline
    original = tmp_path / "original"
    original.write_bytes(DOCS[row].encode("utf-8"))
    decoded = tmp_path / "decoded"
    cmd = f'"{sys.executable}" -m tokenmill decode --shard "{shard}" --row {row} > "{decoded}"'
    # The bytes, whatever the console's encoding.
    subprocess.run(["sh", "-c", cmd], check=True, env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert subprocess.run(["diff", original, decoded]).returncode == 0


def test_row_is_the_input_row_not_the_position(runs):
    """After a skipped row, position and row differ: --row names the input's row."""
    shard = token_shard(runs["eos"], "docs.jsonl")
    rows = pq.read_table(shard)["row"].to_pylist()
    assert SKIPPED not in rows and rows[SKIPPED] == SKIPPED + 1  # the gap
    for row in (SKIPPED + 1, len(DOCS) - 1):
        assert decode("--shard", shard, "--row", row).stdout == DOCS[row].encode()


def test_rows_of_a_text_shard_count_documents_not_lines(runs):
    shard = token_shard(runs["eos"], "lines.txt")
    for row, text in TEXT_ROWS:
        assert decode("--shard", shard, "--row", row).stdout == text
    line = one_line_error(decode("--shard", shard, "--row", 2))
    assert f"row 2 is not in {shard}" in line and "skipped" in line and "line 5" in line


def test_a_skipped_row_is_one_line_saying_so(runs):
    shard = token_shard(runs["eos"], "docs.jsonl")
    result = decode("--shard", shard, "--row", SKIPPED)
    assert result.stdout == b""
    line = one_line_error(result)
    assert f"row {SKIPPED} is not in {shard}" in line and "skipped" in line
    assert "not JSON" in line


@pytest.mark.parametrize("row", [len(DOCS), 10**6, -1, 2**64])
def test_a_row_out_of_range_is_one_line_naming_the_range(runs, row):
    shard = token_shard(runs["eos"], "docs.jsonl")
    line = one_line_error(decode("--shard", shard, "--row", row))
    assert line == (
        f"Error: row {row} is not in {shard} (skipped, or out of range: rows 0..{len(DOCS) - 1})"
    )


def test_decode_ids_adds_no_newline(runs):
    tok_file = runs["eos"] / "tokenizer.json"
    text = "naïve café\n  and more"
    ids = Tokenizer.load(tok_file).encode(text)
    result = decode("--tokenizer", tok_file, *ids)
    assert result.returncode == 0, result.stderr
    assert result.stdout == text.encode("utf-8")
    # ids given by hand are printed as they are, a special token's text included
    eos_id = Tokenizer.load(tok_file).eos_id
    assert decode("--tokenizer", tok_file, *ids, eos_id).stdout == (text + "<|endoftext|>").encode()


def test_help_says_what_ids_of_a_split_character_give(runs, cli):
    tok_file = runs["eos"] / "tokenizer.json"
    help_text = " ".join(cli("decode", "--help").output.split())
    assert "U+FFFD" in help_text and "written exactly" not in help_text
    # byte ids 0xe6 0x9d: two of the three bytes of 東
    result = decode("--tokenizer", tok_file, 0xE6, 0x9D, ord("x"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "\ufffdx".encode()


def piped(*args, stdin) -> subprocess.CompletedProcess:
    """`tokenmill ARGS` reading `stdin` (bytes, or a file descriptor)."""
    cmd = [sys.executable, "-m", "tokenmill", *map(str, args)]
    if isinstance(stdin, bytes):
        return subprocess.run(cmd, input=stdin, capture_output=True)
    return subprocess.run(cmd, stdin=stdin, capture_output=True)


def test_decode_reads_the_ids_tokenize_prints_from_standard_input(runs):
    """Without IDS, decode printed nothing and succeeded, as for no ids at all."""
    tok_file = runs["eos"] / "tokenizer.json"
    text = "naïve café\n  and more"
    printed = piped("tokenize", "--tokenizer", tok_file, text, stdin=b"").stdout
    assert piped("decode", "--tokenizer", tok_file, stdin=printed).stdout == text.encode()
    ids = Tokenizer.load(tok_file).encode(text)
    spread = ", ".join(map(str, ids[:2])).encode() + b"\n" + " ".join(map(str, ids[2:])).encode()
    assert piped("decode", "--tokenizer", tok_file, stdin=spread).stdout == text.encode()
    empty_text = piped("tokenize", "--tokenizer", tok_file, "", stdin=b"").stdout
    assert empty_text == b"\n"
    assert piped("decode", "--tokenizer", tok_file, stdin=empty_text).stdout == b""


@pytest.mark.parametrize(
    "stdin, needle",
    [
        (b"", "standard input is empty: give IDS"),
        (b"12 x3 4", "standard input: 'x3' is not a token id"),
        ("terminal", "give IDS, or pipe them in"),
    ],
)
def test_decode_without_ids_refuses_what_is_no_ids(runs, stdin, needle):
    tok_file = runs["eos"] / "tokenizer.json"
    if stdin == "terminal":
        import pty

        leader, terminal = pty.openpty()
        try:
            result = piped("decode", "--tokenizer", tok_file, stdin=terminal)
        finally:
            os.close(leader)
            os.close(terminal)
    else:
        result = piped("decode", "--tokenizer", tok_file, stdin=stdin)
    lines = result.stderr.decode().strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1 and needle in lines[0], result
    assert result.stdout == b""


def test_row_without_shard_is_refused(runs):
    """--row was ignored, and IDS decoded."""
    tok_file = runs["eos"] / "tokenizer.json"
    result = decode("--tokenizer", tok_file, "--row", 7, 31)
    assert result.returncode == 2 and result.stdout == b""
    [line] = result.stderr.decode().strip().splitlines()
    assert line.startswith("Error: --row needs --shard")


def test_help_says_ids_are_read_from_standard_input(cli):
    help_text = " ".join(cli("decode", "--help").output.split())
    assert "standard input" in help_text and "tokenize" in help_text
