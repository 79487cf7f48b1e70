"""JSON Lines (`.jsonl`, and `.json` with one object per line) and text, each
plain or compressed with gzip, zstd, bzip2 or xz, in any case: the same
documents and ids whatever the compression; a truncated stream is one line
(or a skip counting the documents read); a `.json` file that is one JSON
document, not JSON Lines, is refused whole, never half-read."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from conftest import COMPRESS, make_documents, one_line
from runs import manifest, tokenmill

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


def test_a_run_over_compressed_shards_equals_the_plain_run(tmp_path):
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    for i, compression in enumerate(COMPRESS):
        for folder, suffix in ((plain, ""), (packed, compression)):
            folder.mkdir(exist_ok=True)
            (folder / f"s{i}.jsonl{suffix}").write_bytes(COMPRESS[suffix](payload(".jsonl")))
    tokenmill("run", plain, tmp_path / "a", *RUN)
    tokenmill("run", packed, tmp_path / "b", *RUN)
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
    result = tokenmill("run", data, tmp_path / "o", *RUN, check=False)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("Error:") and f"bad.jsonl{compression}" in lines[-1]
    assert "Traceback" not in result.stderr
    tokenmill("run", data, tmp_path / "o", *RUN, "--on-error", "skip")
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
    result = tokenmill("run", data, tmp_path / "o", *RUN, check=False)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and why in lines[-1] and "docs.json" in lines[-1]
    tokenmill("run", data, tmp_path / "o", *RUN, "--on-error", "skip")
    m = manifest(tmp_path / "o")
    assert [s["shard"] for s in m["skipped"]] == [f"docs.json{compression}"]
    assert m["documents"] == 1  # nothing of docs.json half-read


def test_a_long_first_line_of_json_lines_is_not_mistaken_for_a_document(tmp_path):
    path = tmp_path / "long.json"
    docs = ["x" * 200_000, "short"]
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    assert [d for b in read_documents(path) for d in b.to_pylist()] == docs
