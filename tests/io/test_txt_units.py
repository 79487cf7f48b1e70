"""`--txt-unit line|paragraph|file` (issue 16): what one document of a `.txt`
shard is. Each unit's documents come back exactly from the token shards (and
from `decode --row`), in order, plain or compressed, across block boundaries;
bad UTF-8 and truncated streams are one-line errors or accounted skips naming
the row and the line where the document starts."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import COMPRESS
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import manifest

import tokenmill.io.readers as readers
from tokenmill.errors import TokenmillError
from tokenmill.io.readers import raw_batches, read_batches
from tokenmill.tokenizer import Tokenizer

RUN = ("--vocab-size", "300", "--workers", "1")
WHITESPACE = b" \t\r\f\v"  # a line of nothing but these is blank (bytes.isspace, less \n)


# The references: what each unit means, written as plainly as possible.
def ref_lines(data: bytes) -> list[tuple[int, bytes]]:
    """(1-based line, document) of every non-blank line, a trailing \\r dropped."""
    return [
        (n, line.removesuffix(b"\r"))
        for n, line in enumerate(data.split(b"\n"), 1)
        if line.strip(WHITESPACE)
    ]


def ref_paragraphs(data: bytes) -> list[tuple[int, bytes]]:
    """(1-based line of its first line, document) of every run of non-blank lines."""
    out, current, start = [], [], 0
    for n, line in enumerate(data.split(b"\n"), 1):
        if not line.strip(WHITESPACE):
            if current:
                out.append((start, b"\n".join(current)))
            current = []
            continue
        if not current:
            start = n
        current.append(line.removesuffix(b"\r"))
    if current:
        out.append((start, b"\n".join(current)))
    return out


def ref_file(data: bytes) -> list[tuple[int, bytes]]:
    return [(1, data)] if data.strip() else []


REFERENCE = {"line": ref_lines, "paragraph": ref_paragraphs, "file": ref_file}

BOOK = (
    "\n\n"  # leading blank lines are no documents
    "CHAPTER I.\r\n"
    "Down the Rabbit-Hole\r\n"
    "\r\n"
    "Alice was beginning to get very tired of sitting by her sister on the\n"
    "bank, and of having nothing to do: once or twice she had peeped into the\n"
    "book her sister was reading.\n"
    "   \t\n"  # a blank line of whitespace
    "  Indented first line, trailing spaces   \n"
    "Καλημέρα κόσμε — 東京, naïve café 😀\n"
    "\n\n\n"
    "def f(x):\n"
    "    return x  # code keeps its indentation\n"
    "\n"
    "The end, with no newline after it"
).encode()


def decoded(out) -> dict[str, list[tuple[int, bytes]]]:
    """{input shard: [(row, document bytes)]} from the token shards of a run."""
    tok = Tokenizer.load(out / "tokenizer.json")
    docs = {}
    for entry in manifest(out)["outputs"]:
        table = pq.read_table(out / entry["path"])
        rows = []
        for row, ids in zip(table["row"].to_pylist(), table["ids"].to_pylist(), strict=True):
            assert ids[-1] == tok.eos_id
            rows.append((row, tok.decode(ids[:-1]).encode()))
        docs[entry["shard"]] = rows
    return docs


def numbered(refs: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """The reference documents with their rows in place of their lines."""
    return [(row, doc) for row, (_, doc) in enumerate(refs)]


@pytest.mark.parametrize("unit", ["line", "paragraph", "file"])
def test_each_unit_decodes_back_exactly_plain_and_compressed(tmp_path, cli, unit):
    data = tmp_path / "d"
    data.mkdir()
    for suffix, compress in COMPRESS.items():
        (data / f"book.txt{suffix}").write_bytes(compress(BOOK))
    out = tmp_path / "o"
    cli("run", data, out, *RUN, "--txt-unit", unit)
    expected = numbered(REFERENCE[unit](BOOK))
    assert len(expected) == {"line": 10, "paragraph": 5, "file": 1}[unit]
    docs = decoded(out)
    assert sorted(docs) == sorted(f"book.txt{s}" for s in COMPRESS)
    for shard, got in docs.items():
        assert got == expected, shard
    m = manifest(out)
    assert m["config"]["txt_unit"] == unit
    assert m["documents"] == len(COMPRESS) * len(expected)
    # decode --row prints each document of the unit byte for byte
    token_shard = out / m["outputs"][0]["path"]
    for row, doc in expected:
        result = cli("decode", "--shard", token_shard, "--row", row)
        assert result.stdout_bytes == doc


def test_the_unit_is_part_of_what_makes_an_output_reusable(tmp_path, cli):
    data = tmp_path / "d"
    data.mkdir()
    (data / "book.txt").write_bytes(BOOK)
    out = tmp_path / "o"
    cli("run", data, out, *RUN, "--txt-unit", "paragraph")
    again = cli("run", data, out, *RUN, "--txt-unit", "paragraph")
    assert "1 kept" in again.output
    cli("run", data, out, *RUN, "--txt-unit", "file")
    assert manifest(out)["documents"] == 1
    assert decoded(out)["book.txt"] == [(0, BOOK)]


FILES = {
    "src/readers.py": (
        b'"""A module."""\n\nimport os\n\n\ndef main():\n    print(os.getcwd())\n'
        b"\n\nif __name__ == '__main__':\n    main()\n"
    ),
    "src/lib.rs": b"pub fn add(a: u32, b: u32) -> u32 {\r\n    a + b\r\n}\r\n",
    "src/notes.txt": b"no final newline,\n\n\ntwo blank lines above",
    "book.txt": BOOK,
    "empty.txt": b"",  # no document
    "blank.txt": b"\n  \t\r\n\n",  # nothing but whitespace: no document
    "leading.txt": b"\n\n  indented after blank lines\n\n",
}


def test_a_folder_of_whole_file_documents(tmp_path, cli):
    data = tmp_path / "d"
    for name, content in FILES.items():
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_bytes(content)
    out = tmp_path / "o"
    # .py and .rs are no known input (not read); each .txt file with any text is one document.
    cli("run", data, out, *RUN, "--txt-unit", "file")
    docs = decoded(out)
    for name, content in FILES.items():
        if not name.endswith(".txt"):
            assert name not in docs
        elif content.strip():
            assert docs[name] == [(0, content)], name
        else:
            assert docs[name] == [], name
    assert manifest(out)["documents"] == sum(
        1 for n, c in FILES.items() if n.endswith(".txt") and c.strip()
    )


def test_source_files_renamed_txt_are_whole_documents(tmp_path, cli):
    """Code as a training corpus: each file one document, indentation and
    line ends exactly as written."""
    data = tmp_path / "d"
    data.mkdir()
    for name, content in FILES.items():
        if name.startswith("src/"):
            (data / (name.replace("/", "_") + ".txt")).write_bytes(content)
    out = tmp_path / "o"
    cli("run", data, out, *RUN, "--txt-unit", "file")
    docs = decoded(out)
    for name, content in FILES.items():
        if name.startswith("src/"):
            assert docs[name.replace("/", "_") + ".txt"] == [(0, content)]


def paragraphs_text(n: int) -> bytes:
    """n paragraphs of 1 to 4 lines of varied length, separated by 1 to 3 blank
    lines (some of whitespace, some CRLF), so that small blocks cut everywhere."""
    parts = []
    for i in range(n):
        lines = [f"p{i} l{j} " + "word " * ((i * 7 + j * 3) % 11) for j in range(1 + i % 4)]
        end = "\r\n" if i % 5 == 0 else "\n"
        parts.append(end.join(lines) + end)
        parts.append(["\n", " \n\t\n", "\r\n\n\n"][i % 3])
    return "".join(parts).encode()


@pytest.mark.parametrize(("block", "piece"), [(7, 3), (64, 16), (200, 64)])
def test_paragraphs_across_block_boundaries(tmp_path, cli, monkeypatch, block, piece):
    text = paragraphs_text(60)
    data = tmp_path / "d"
    data.mkdir()
    (data / "p.txt").write_bytes(text)
    (data / "p.txt.gz").write_bytes(gzip.compress(text, mtime=0))
    whole = tmp_path / "whole"
    cli("run", data, whole, *RUN, "--txt-unit", "paragraph")
    monkeypatch.setattr(readers, "TEXT_BLOCK_BYTES", block)
    monkeypatch.setattr(readers, "READ_BYTES", piece)
    out = tmp_path / "o"
    cli("run", data, out, *RUN, "--txt-unit", "paragraph")
    expected = numbered(ref_paragraphs(text))
    assert len(expected) == 60
    docs = decoded(out)
    assert docs["p.txt"] == docs["p.txt.gz"] == expected
    assert decoded(whole) == docs  # the same tokenizer and ids whatever the blocks
    # The reader's line numbers are the first lines of the paragraphs.
    lines = [
        n for raw in raw_batches(data / "p.txt", "text", txt_unit="paragraph") for n in raw.lines
    ]
    assert lines == [n for n, _ in ref_paragraphs(text)]


LINE = st.sampled_from([b"", b" ", b"\t", b"\r", b" \r", b"a", b"bc d", b"\xce\xb1", b"e\r"])


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(LINE, max_size=30),
    final_newline=st.booleans(),
    block=st.integers(1, 40),
    piece=st.integers(1, 16),
)
def test_paragraph_splitting_equals_splitting_on_blank_lines(
    tmp_path_factory, lines, final_newline, block, piece
):
    text = b"\n".join(lines) + (b"\n" if final_newline else b"")
    path = tmp_path_factory.mktemp("para") / "p.txt"
    path.write_bytes(text)
    saved = readers.TEXT_BLOCK_BYTES, readers.READ_BYTES
    readers.TEXT_BLOCK_BYTES, readers.READ_BYTES = block, piece
    try:
        got = [
            (n, d)
            for raw in raw_batches(path, "text", txt_unit="paragraph")
            for n, d in zip(raw.lines, raw.values.to_pylist(), strict=True)
        ]
        rows = [
            (r, d.encode())
            for rs, ds in read_batches(path, txt_unit="paragraph")
            for r, d in zip(rs.to_pylist(), ds.to_pylist(), strict=True)
        ]
    finally:
        readers.TEXT_BLOCK_BYTES, readers.READ_BYTES = saved
    assert got == ref_paragraphs(text)
    assert rows == numbered(ref_paragraphs(text))


BAD = b"good one\n\nbad \xff in a\nparagraph\n\nlast one\n"


@pytest.mark.parametrize(
    ("unit", "content", "row", "line", "good"),
    [
        ("paragraph", BAD, 1, 3, [(0, b"good one"), (2, b"last one")]),
        ("file", b"\n\nbad \xff file\n", 0, 1, []),
        ("line", BAD, 1, 3, [(0, b"good one"), (2, b"paragraph"), (3, b"last one")]),
    ],
)
def test_invalid_utf8_fails_or_is_skipped_with_row_and_line(
    tmp_path, cli, unit, content, row, line, good
):
    data = tmp_path / "d"
    data.mkdir()
    (data / "bad.txt").write_bytes(content)
    (data / "good.txt").write_bytes(b"fine\n")
    out = tmp_path / "o"
    failed = cli("run", data, out, *RUN, "--txt-unit", unit, ok=False)
    assert failed.exit_code == 1
    last = failed.output.strip().splitlines()[-1]
    assert last == f"Error: {data / 'bad.txt'}: row {row} (line {line}): not valid UTF-8"
    cli("run", data, out, *RUN, "--txt-unit", unit, "--on-error", "skip")
    m = manifest(out)
    [skip] = m["skipped"]
    assert (skip["shard"], skip["row"], skip["documents"]) == ("bad.txt", row, 1)
    assert f"row {row} (line {line}): not valid UTF-8" in skip["reason"]
    assert m["documents_in"] == m["documents"] + m["documents_skipped"]
    docs = decoded(out)
    assert docs["bad.txt"] == good
    assert docs["good.txt"] == numbered(REFERENCE[unit](b"fine\n"))
    if good:  # decode --row of a skipped row says it was skipped, and where
        shard = out / next(e["path"] for e in m["outputs"] if e["shard"] == "bad.txt")
        result = cli("decode", "--shard", shard, "--row", row, ok=False)
        assert result.exit_code == 1 and "skipped" in result.output
        assert f"line {line}" in result.output


# Enough paragraphs that half of a compressed stream decompresses to whole lines.
TRUNCATED = paragraphs_text(3000)


# test_compressed_inputs truncates JSON Lines; the .txt line unit is here with the others.
@pytest.mark.parametrize("unit", ["line", "paragraph", "file"])
@pytest.mark.parametrize("compression", [".zst", ".bz2", ".xz"])
def test_a_truncated_stream_is_one_line_or_an_accounted_skip(
    tmp_path, cli, monkeypatch, unit, compression
):
    # Small reads, so that what xz decompressed before the break is known and counted.
    monkeypatch.setattr(readers, "READ_BYTES", 4096)
    data = tmp_path / "d"
    data.mkdir()
    (data / "good.txt").write_bytes(b"a good document\n")
    whole = COMPRESS[compression](TRUNCATED)
    (data / f"bad.txt{compression}").write_bytes(whole[: len(whole) // 2])
    out = tmp_path / "o"
    failed = cli("run", data, out, *RUN, "--txt-unit", unit, ok=False)
    assert failed.exit_code == 1
    last = failed.output.strip().splitlines()[-1]
    assert last.startswith(f"Error: {data / f'bad.txt{compression}'}: cannot read (")
    assert "Traceback" not in failed.output
    cli("run", data, out, *RUN, "--txt-unit", unit, "--on-error", "skip")
    m = manifest(out)
    [skip] = m["skipped"]
    assert skip["shard"] == f"bad.txt{compression}" and skip["row"] is None
    assert skip["lower_bound"] is True
    assert 0 <= skip["documents"] <= len(REFERENCE[unit](TRUNCATED))
    if compression == ".xz":  # bz2 (one 900 kB block) and zstd give nothing before the break
        assert skip["documents"] >= (1 if unit == "file" else len(REFERENCE[unit](TRUNCATED)) // 3)
    assert m["documents_in"] == m["documents"] + m["documents_skipped"]
    assert decoded(out)["good.txt"] == numbered(REFERENCE[unit](b"a good document\n"))


class BreakingStream:
    """A stream that gives `data` in pieces of `piece` bytes, then breaks."""

    def __init__(self, data: bytes, piece: int):
        self.data, self.piece = data, piece

    def read(self, n: int) -> bytes:
        if not self.data:
            raise EOFError("Compressed file ended before the end-of-stream marker was reached")
        out, self.data = self.data[: min(n, self.piece)], self.data[min(n, self.piece) :]
        return out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# Paragraphs with a whole line read before the break: 'one', 'two' (a line of it
# is whole), not 'three' (no newline after it).
BROKEN = b"\none\n\n two a\r\n two b\n\n\nthree, cut sh"


@pytest.mark.parametrize("block", [3, 8, 11, 20, 1000])
@pytest.mark.parametrize(("unit", "known"), [("line", 3), ("paragraph", 2), ("file", 1)])
def test_a_broken_stream_counts_the_documents_read_before_it(monkeypatch, unit, known, block):
    monkeypatch.setattr(readers, "TEXT_BLOCK_BYTES", block)
    monkeypatch.setattr(readers, "open_stream", lambda path: BreakingStream(BROKEN, 5))
    seen = {"rows": 0}
    handed = 0
    with pytest.raises(TokenmillError, match="cannot read"):
        for rows, _ in read_batches(Path("x.txt.xz"), stats=seen, txt_unit=unit):
            handed += len(rows)
    assert seen["rows"] == known and handed <= known


def test_a_file_that_breaks_before_any_text_holds_no_known_document(monkeypatch):
    monkeypatch.setattr(readers, "open_stream", lambda path: BreakingStream(b" \n\t", 2))
    seen = {"rows": 0}
    with pytest.raises(TokenmillError, match="cannot read"):
        list(read_batches(Path("x.txt.bz2"), stats=seen, txt_unit="file"))
    assert seen["rows"] == 0


def test_a_job_file_takes_txt_unit(tmp_path, cli):
    data = tmp_path / "d"
    data.mkdir()
    (data / "book.txt").write_bytes(BOOK)
    job = tmp_path / "job.toml"
    job.write_text(
        'inputs = "d"\noutput = "o"\ntxt_unit = "paragraph"\nvocab_size = 300\nworkers = 1\n'
    )
    cli("run", "--job", job)
    out = tmp_path / "o"
    assert manifest(out)["config"]["txt_unit"] == "paragraph"
    assert decoded(out)["book.txt"] == numbered(ref_paragraphs(BOOK))
    job.write_text('inputs = "d"\noutput = "o"\ntxt_unit = "chapter"\n')
    bad = cli("run", "--job", job, ok=False)
    assert bad.exit_code == 1
    assert f"{job}: txt_unit must be one of line, paragraph, file" in bad.output


@pytest.mark.parametrize("unit", ["paragraph", "file"])
def test_stats_and_report_read_the_unit_of_the_run(tmp_path, cli, unit):
    data = tmp_path / "d"
    data.mkdir()
    (data / "book.txt").write_bytes(BOOK)
    (data / "p.txt").write_bytes(paragraphs_text(20))
    out = tmp_path / "o"
    cli("run", data, out, *RUN, "--txt-unit", unit)
    stats = json.loads(cli("stats", out, "--json").stdout)
    expected = {name: REFERENCE[unit]((data / name).read_bytes()) for name in ("book.txt", "p.txt")}
    by_shard = {s["name"]: s for s in stats["shards"]}
    for name, refs in expected.items():
        assert by_shard[name]["documents"] == len(refs)
        assert by_shard[name]["bytes"] == sum(len(d) for _, d in refs)
    cli("report", out)
    assert (out / "report.html").is_file()


def test_stats_of_a_manifest_from_before_txt_unit_reads_lines(tmp_path, cli):
    data = tmp_path / "d"
    data.mkdir()
    (data / "book.txt").write_bytes(BOOK)
    out = tmp_path / "o"
    cli("run", data, out, *RUN)
    path = out / "manifest.json"
    m = json.loads(path.read_text())
    del m["config"]["txt_unit"]
    path.write_text(json.dumps(m))
    stats = json.loads(cli("stats", out, "--json").stdout)
    assert stats["documents"] == len(ref_lines(BOOK))
    assert stats["bytes"] == sum(len(d) for _, d in ref_lines(BOOK))
