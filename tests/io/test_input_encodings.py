"""Bytes that are not UTF-8 where a name or text is expected: a file name in
Latin-1 under DATA is refused in one printable line if it names an input (its
outputs would be named after it), listed printably if it names a file that is
not read; text in another encoding is a bad document or a bad file, never
text decoded by a guess and never a traceback. (Latin-1 and UTF-16 documents
under --on-error fail and skip: tests/stages/test_on_error.py.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from runs import manifest, tokenmill_here

from tokenmill.errors import TokenmillError
from tokenmill.io.readers import read_batches

RUN = ("--vocab-size", "300", "--workers", "1")


def latin1_name(folder: Path, name: bytes, content: bytes) -> None:
    """A file whose name is the bytes `name`, as a Latin-1 system writes it."""
    with open(os.path.join(os.fsencode(folder), name), "wb") as f:
        f.write(content)


def corpus(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "good.txt").write_text("a good document\nanother one\n")
    return data


def last_line(result) -> str:
    assert "Traceback" not in result.stderr
    return result.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("on_error", ["fail", "skip"])
def test_an_input_named_in_latin1_is_refused_in_one_printable_line(tmp_path, on_error):
    data = corpus(tmp_path)
    latin1_name(data, b"caf\xe9.txt", b"some text\n")
    out = tmp_path / "out"
    result = tokenmill_here("run", data, out, *RUN, "--on-error", on_error, check=False)
    assert result.returncode == 1, result.stderr
    assert last_line(result) == (
        f"Error: {data}/caf\\xe9.txt: file name is not UTF-8, and its outputs are named "
        "after it; rename it"
    )
    assert not (out / "manifest.json").exists()


def test_data_whose_path_is_not_utf8_is_refused_in_one_printable_line(tmp_path):
    # The manifest records DATA's path, so it is refused as every argument
    # that is not UTF-8 is, before any work: a value refused, a usage error
    # (README, Exit status). os.fsdecode: a name as Python holds it.
    folder = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"d\xe9"))
    os.mkdir(folder)
    Path(folder, "good.txt").write_text("a document\n")
    for i, data in enumerate((folder, Path(folder, "good.txt"))):
        result = tokenmill_here("run", data, tmp_path / f"out{i}", *RUN, check=False)
        assert result.returncode == 2, result.stderr
        assert last_line(result) == (
            f"Error: DATA {tmp_path}/d\\xe9{'' if data == folder else '/good.txt'}: "
            "not UTF-8; names, options and patterns must be UTF-8 (see 'main run --help')"
        )
        assert not (tmp_path / f"out{i}").exists()


def test_a_file_named_in_latin1_that_is_not_read_is_listed_printably(tmp_path):
    data = corpus(tmp_path)
    latin1_name(data, b"notes-\xe9.md", b"not an input\n")
    os.mkdir(os.path.join(os.fsencode(data), b".cach\xe9"))
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN)
    m = manifest(out)
    assert m["documents"] == 2
    assert sorted(m["not_read"], key=lambda e: e["path"]) == [
        {"path": ".cach\\xe9/", "reason": "hidden"},
        {"path": "notes-\\xe9.md", "reason": "unknown suffix"},
    ]
    assert tokenmill_here("verify", out).returncode == 0


def read_all(path: Path) -> tuple[list[str], list[str]]:
    """(documents, skip reasons) of a shard read with --on-error skip."""
    docs, skips = [], []
    for _, d in read_batches(path, on_skip=skips.append):
        docs += d.to_pylist()
    return docs, [s["reason"] for s in skips]


def test_json_lines_are_utf8_never_utf16_guessed_from_nul_bytes(tmp_path):
    # json.loads on bytes takes UTF-16 without a byte-order mark for ASCII, and
    # a line cut at b"\n" from its NUL byte reads as the other byte order.
    path = tmp_path / "wide.jsonl"
    lines = ['{"text": "жук"}', '{"text": "ok"}', '{"text": "ёж"}']
    path.write_bytes("\n".join(lines).encode("utf-16-le"))
    with pytest.raises(TokenmillError, match=r"wide\.jsonl: NUL bytes .* UTF-16LE text without"):
        read_all(path)


@pytest.mark.parametrize("unit", ["line", "paragraph", "file"])
@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_text_in_utf16_without_a_byte_order_mark_is_a_bad_file(tmp_path, encoding, unit):
    """ASCII letters in UTF-16 are valid UTF-8, a NUL after (or before) each:
    without a mark to tell, it became documents of such text, exit 0."""
    path = tmp_path / "wide.txt"
    path.write_bytes("hello world\nsecond line\n".encode(encoding))
    name = encoding.upper().replace("-LE", "LE").replace("-BE", "BE")
    with pytest.raises(
        TokenmillError, match=rf"wide\.txt: NUL bytes in every other place: {name} "
    ):
        list(read_batches(path, txt_unit=unit))
    # One NUL in a line of text is text, as in JSON's "\u0000".
    path.write_bytes(b"a line with one \x00 in it\n")
    assert [d.to_pylist() for _, d in read_batches(path, txt_unit=unit)] != []


def test_a_utf8_byte_order_mark_still_starts_json_lines(tmp_path):
    path = tmp_path / "bom.jsonl"
    docs = ["naïve café", "second"]
    lines = "".join(json.dumps({"text": d}) + "\n" for d in docs)
    path.write_bytes(b"\xef\xbb\xbf" + lines.encode())
    assert read_all(path) == (docs, [])


@pytest.mark.parametrize("unit", ["line", "paragraph", "file"])
def test_a_utf8_byte_order_mark_is_no_text_in_any_unit(tmp_path, unit):
    """An editor's mark before the first line is not part of the first
    document (it became a token of the vocabulary), and a file of nothing
    else holds no document, as in JSON Lines."""
    text = "first line\n\nsecond\n"
    marked, plain, alone = tmp_path / "marked.txt", tmp_path / "plain.txt", tmp_path / "alone.txt"
    marked.write_bytes(b"\xef\xbb\xbf" + text.encode())
    plain.write_text(text, encoding="utf-8")
    alone.write_bytes(b"\xef\xbb\xbf")
    docs = [d.to_pylist() for _, d in read_batches(marked, txt_unit=unit)]
    assert docs == [d.to_pylist() for _, d in read_batches(plain, txt_unit=unit)]
    assert list(read_batches(alone, txt_unit=unit)) == []
    only = tmp_path / "alone.jsonl"
    only.write_bytes(b"\xef\xbb\xbf\n" + json.dumps({"text": "x"}).encode() + b"\n")
    assert read_all(only) == (["x"], [])


@pytest.mark.parametrize("unit", ["line", "paragraph", "file"])
@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_text_with_a_utf16_or_utf32_byte_order_mark_is_a_bad_file(tmp_path, encoding, unit):
    # Without the check, UTF-16 text of ASCII letters reads as valid UTF-8, a
    # NUL byte after every letter.
    path = tmp_path / "wide.txt"
    path.write_bytes("\ufeffone line\n\nanother\n".encode(encoding))
    name = encoding[:6].upper()
    with pytest.raises(TokenmillError, match=rf"wide\.txt: {name} text .*not UTF-8; convert it"):
        list(read_batches(path, txt_unit=unit))


def test_a_name_with_a_line_break_stays_on_one_line(tmp_path):
    """A file name may hold any byte but / and NUL: errors and skips are one line each."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "bad\nname.jsonl").write_bytes(b"not json\n")
    failed = tokenmill_here("run", data, tmp_path / "out", *RUN, check=False)
    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines()[-1].startswith(f"Error: {data}/bad\\nname.jsonl: ")
    (data / "ok.jsonl").write_text('{"text": "some fine words"}\n')
    skipped = tokenmill_here("run", data, tmp_path / "out", *RUN, "--on-error", "skip")
    [line] = [line for line in skipped.stderr.splitlines() if line.startswith("skipped:")]
    assert line.startswith("skipped: bad\\nname.jsonl: row 0 (line 1): not JSON")


def test_an_option_that_is_not_utf8_is_refused_before_any_work(tmp_path):
    data = corpus(tmp_path)
    token = os.fsdecode(b"<|\xe9|>")
    result = tokenmill_here(
        "run", data, tmp_path / "out", *RUN, "--special-token", token, check=False
    )
    assert result.returncode == 2
    assert last_line(result) == (
        "Error: --special-token <|\\xe9|>: not UTF-8; names, options and patterns must be "
        "UTF-8 (see 'main run --help')"
    )
    assert not (tmp_path / "out").exists()


def test_a_tokenizer_name_that_is_not_utf8_is_shown_by_its_bytes():
    """tokenize takes its TEXT as given, but its options are refused as every
    command's are, up front, by their bytes: the file's error showed them as
    Python's surrogates (t\\udcff.json)."""
    from runs import tokenmill_here

    result = tokenmill_here("tokenize", "--tokenizer", "t\udcff.json", "hello", check=False)
    assert result.returncode == 2
    assert result.stderr.startswith("Error: --tokenizer t\\xff.json: not UTF-8; "), result.stderr
