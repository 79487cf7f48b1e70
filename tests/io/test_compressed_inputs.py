"""JSON Lines (`.jsonl`, and `.json` with one object per line) and text, each
plain or compressed with gzip, zstd, bzip2 or xz, in any case: the same
documents and ids whatever the compression, in one compressed stream or
several one after another (pigz, pbzip2, `cat a.bz2 b.bz2`); a truncated
stream, or a damaged stream after a good one, is one line (or a skip counting
the documents read), never a file silently cut short; a `.json` file that is
one JSON document, not JSON Lines, is refused whole, never half-read."""

from __future__ import annotations

import json
from itertools import pairwise

import pyarrow.parquet as pq
import pytest
from conftest import COMPRESS, make_documents, one_line
from runs import manifest, tokenmill_here

from tokenmill.errors import TokenmillError
from tokenmill.io.readers import read_documents, shard_format

RUN = ("--vocab-size", "400", "--workers", "1")


DOCS = [d for d in one_line(make_documents(300, seed=7)) if d]  # a blank .txt line is no document


def payload(base: str) -> bytes:
    if base == ".txt":
        return "".join(d + "\n" for d in DOCS).encode()
    return "".join(json.dumps({"text": d}) + "\n" for d in DOCS).encode()


@pytest.mark.parametrize("compression", list(COMPRESS))
@pytest.mark.parametrize("base", [".jsonl", ".json", ".txt"])
def test_every_compression_reads_the_same_documents(tmp_path, base, compression):
    path = tmp_path / f"docs{base}{compression}".upper()  # suffixes in any case
    path.write_bytes(COMPRESS[compression](payload(base)))
    assert shard_format(path) == ("text" if base == ".txt" else "jsonl")
    got = [d for batch in read_documents(path) for d in batch.to_pylist()]
    assert got == DOCS


def streams(compression: str, base: str, parts: int = 3) -> list[bytes]:
    """payload(base) cut at line ends into `parts` pieces, each compressed on its
    own: joined, they make the multi-stream files of pigz, pbzip2 or `cat`."""
    lines = payload(base).splitlines(keepends=True)
    cuts = [len(lines) * k // parts for k in range(parts + 1)]
    return [COMPRESS[compression](b"".join(lines[a:b])) for a, b in pairwise(cuts)]


def read_all(path) -> list[str]:
    return [d for batch in read_documents(path) for d in batch.to_pylist()]


@pytest.mark.parametrize("compression", [".gz", ".zst", ".bz2", ".xz"])
@pytest.mark.parametrize("base", [".jsonl", ".json", ".txt"])
def test_every_stream_of_a_multi_stream_file_is_read(tmp_path, base, compression):
    path = tmp_path / f"docs{base}{compression}"
    path.write_bytes(b"".join(streams(compression, base)))
    assert read_all(path) == DOCS


def test_xz_stream_padding_is_read_past_and_must_be_whole_words(tmp_path):
    # The .xz format lets zero bytes pad streams, in multiples of four (its spec, 2.2).
    a, b, c = streams(".xz", ".jsonl")
    path = tmp_path / "padded.jsonl.xz"
    path.write_bytes(a + bytes(4) + b + bytes(8) + c + bytes(4))
    assert read_all(path) == DOCS
    for bad in (a + b + c + bytes(3), a + bytes(2) + b + c):
        path.write_bytes(bad)
        with pytest.raises(TokenmillError, match=r"padded\.jsonl\.xz: cannot read \(.*padding"):
            read_all(path)


@pytest.mark.parametrize(
    ("base", "compression"),
    [(".jsonl", c) for c in (".gz", ".zst", ".bz2", ".xz")] + [(".txt", ".bz2"), (".json", ".xz")],
)
def test_a_damaged_later_stream_is_one_line_or_an_accounted_skip(tmp_path, base, compression):
    data = tmp_path / "d"
    data.mkdir()
    (data / "good.txt").write_text("a good document\n")
    first, second, third = streams(compression, base)
    name = f"bad{base}{compression}"
    (data / name).write_bytes(first + bytes([second[0] ^ 0xFF]) + second[1:] + third)
    out = tmp_path / "o"
    result = tokenmill_here("run", data, out, *RUN, check=False)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: {data / name}: cannot read ("), last
    assert not (out / "manifest.json").exists()
    tokenmill_here("run", data, out, *RUN, "--on-error", "skip")
    m = manifest(out)
    (skip,) = m["skipped"]
    assert skip["shard"] == name and skip["row"] is None
    assert skip["lower_bound"] is True and skip["documents"] <= len(DOCS)
    assert m["documents"] == 1
    assert m["documents_in"] == m["documents"] + m["documents_skipped"]
    assert tokenmill_here("verify", out).returncode == 0


@pytest.mark.parametrize("parts", [1, 3])
def test_a_run_over_compressed_shards_equals_the_plain_run(tmp_path, parts):
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    for i, compression in enumerate(COMPRESS):
        for folder, suffix in ((plain, ""), (packed, compression)):
            folder.mkdir(exist_ok=True)
            content = b"".join(streams(suffix, ".jsonl", parts))
            (folder / f"s{i}.jsonl{suffix}").write_bytes(content)
    tokenmill_here("run", plain, tmp_path / "a", *RUN)
    tokenmill_here("run", packed, tmp_path / "b", *RUN)
    a, b = manifest(tmp_path / "a"), manifest(tmp_path / "b")
    assert a["documents"] == b["documents"] == 5 * len(DOCS)
    for x, y in zip(a["outputs"], b["outputs"], strict=True):
        ids_a = pq.read_table(tmp_path / "a" / x["path"])["ids"]
        ids_b = pq.read_table(tmp_path / "b" / y["path"])["ids"]
        assert ids_a.equals(ids_b)


@pytest.mark.parametrize("compression", [".gz", ".zst", ".bz2", ".xz"])
def test_a_truncated_stream_is_one_line_or_an_accounted_skip(tmp_path, compression):
    data = tmp_path / "d"
    data.mkdir()
    (data / "good.txt").write_text("a good document\n")
    whole = COMPRESS[compression](payload(".jsonl") * 20)
    (data / f"bad.jsonl{compression}").write_bytes(whole[: len(whole) // 2])
    result = tokenmill_here("run", data, tmp_path / "o", *RUN, check=False)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("Error:") and f"bad.jsonl{compression}" in lines[-1]
    assert "Traceback" not in result.stderr
    tokenmill_here("run", data, tmp_path / "o", *RUN, "--on-error", "skip")
    (skip,) = manifest(tmp_path / "o")["skipped"]
    assert skip["shard"] == f"bad.jsonl{compression}" and skip["row"] is None
    assert skip["lower_bound"] is True and skip["documents"] <= 20 * len(DOCS)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b'[{"text": "one"}, {"text": "two"}]\n', "one JSON array"),
        (b'[\n  {"text": "one"}\n]\n', "one JSON array"),
        (b'{\n  "text": "one document, pretty-printed"\n}\n', "one JSON document over several"),
    ],
)
@pytest.mark.parametrize("compression", ["", ".gz"])
def test_a_json_file_that_is_not_json_lines_is_refused_whole(tmp_path, content, why, compression):
    data = tmp_path / "d"
    data.mkdir()
    (data / f"docs.json{compression}").write_bytes(COMPRESS[compression](content))
    (data / "other.jsonl").write_text('{"text": "fine"}\n')
    result = tokenmill_here("run", data, tmp_path / "o", *RUN, check=False)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and why in lines[-1] and "docs.json" in lines[-1]
    tokenmill_here("run", data, tmp_path / "o", *RUN, "--on-error", "skip")
    m = manifest(tmp_path / "o")
    assert [s["shard"] for s in m["skipped"]] == [f"docs.json{compression}"]
    assert m["documents"] == 1  # nothing of docs.json half-read


def test_a_long_first_line_of_json_lines_is_not_mistaken_for_a_document(tmp_path):
    path = tmp_path / "long.json"
    docs = ["x" * 200_000, "short"]
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    assert [d for b in read_documents(path) for d in b.to_pylist()] == docs


@pytest.mark.parametrize("compression", [".gz", ".zst", ".bz2", ".xz"])
def test_a_file_of_no_bytes_holds_no_documents_in_every_compression(tmp_path, compression):
    path = tmp_path / f"empty.jsonl{compression}"
    path.write_bytes(b"")
    assert list(read_documents(path)) == []
    path.write_bytes(b"x")  # one byte is no stream of any of them
    with pytest.raises(TokenmillError, match="empty.jsonl"):
        list(read_documents(path))
