"""Bad input: one-line errors naming the file or option, non-zero exit, and
nothing half-written under a final name."""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import assert_one_line_error, make_documents, write_shard

from tokenmill.io.lock import LOCK
from tokenmill.io.writers import is_temporary


def final_outputs(out: Path) -> list[str]:
    """Output files under final names (temporaries start with a dot; the lock
    file is the run's bookkeeping, not an output)."""
    if not out.exists():
        return []
    return sorted(
        p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != LOCK
    )


def leftover_temporaries(out: Path) -> list[Path]:
    return [p for p in out.rglob(".*") if is_temporary(p.name)] if out.exists() else []


def good_and_bad(tmp_path: Path, bad_name: str, bad_bytes: bytes | None = None) -> Path:
    data = tmp_path / "data"
    write_shard(data / "a-good.jsonl", make_documents(30))
    if bad_bytes is not None:
        (data / bad_name).write_bytes(bad_bytes)
    return data


def test_missing_text_column(tmp_path, cli):
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table({"body": ["x y"]}), data / "docs.parquet")
    out = tmp_path / "out"
    result = cli("run", data, out, "--vocab-size", "300", ok=False)
    assert_one_line_error(result, "docs.parquet", "'text'", "--text-column")
    assert final_outputs(out) == []


def test_text_column_option_reads_another_column(tmp_path, cli):
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table({"body": make_documents(20)}), data / "docs.parquet")
    cli("run", data, tmp_path / "out", "--vocab-size", "300", "--text-column", "body")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_truncated_gzip(tmp_path, cli, workers):
    whole = gzip.compress(b"".join(b'{"text": "some words here"}\n' for _ in range(20000)))
    data = good_and_bad(tmp_path, "z-bad.jsonl.gz", whole[: len(whole) // 2])
    out = tmp_path / "out"
    result = cli("run", data, out, "--vocab-size", "300", "--workers", workers, ok=False)
    assert_one_line_error(result, "z-bad.jsonl.gz")
    assert "counts/z-bad.jsonl.gz.parquet" not in final_outputs(out)
    assert "tokenizer.json" not in final_outputs(out)
    assert leftover_temporaries(out) == []


def test_truncated_parquet(tmp_path, cli):
    good = tmp_path / "whole.parquet"
    write_shard(good, make_documents(50))
    data = good_and_bad(tmp_path, "b-bad.parquet", good.read_bytes()[:-100])
    out = tmp_path / "out"
    result = cli("count", data, out, ok=False)
    assert_one_line_error(result, "b-bad.parquet")
    assert "b-bad.parquet" not in final_outputs(out)
    assert leftover_temporaries(out) == []


def test_invalid_utf8_text_file(tmp_path, cli):
    data = good_and_bad(tmp_path, "bad.txt", b"fine line\nbroken \xff\xfe line\n")
    result = cli("count", data, tmp_path / "out", ok=False)
    assert_one_line_error(result, "bad.txt", "UTF-8")


def test_line_that_is_not_json(tmp_path, cli):
    data = good_and_bad(tmp_path, "bad.jsonl", b'{"text": "ok"}\nnot json\n')
    result = cli("count", data, tmp_path / "out", ok=False)
    assert_one_line_error(result, "bad.jsonl")


def test_null_text(tmp_path, cli):
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table({"text": ["a", None]}), data / "n.parquet")
    result = cli("count", data, tmp_path / "out", ok=False)
    assert_one_line_error(result, "n.parquet", "row 1", "null")


def test_vocab_size_below_base_alphabet(corpus, cli, tmp_path):
    out = tmp_path / "out"
    result = cli("run", corpus, out, "--vocab-size", "200", ok=False)
    assert_one_line_error(result, "--vocab-size 200", "256")
    assert "tokenizer.json" not in final_outputs(out)
    assert not (out / "tokens").exists()


def test_vocab_size_below_char_alphabet(corpus, cli, tmp_path):
    result = cli("run", corpus, tmp_path / "out", "--mode", "char", "--vocab-size", "10", ok=False)
    assert_one_line_error(result, "--vocab-size 10")


def test_empty_corpus(tmp_path, cli):
    data = tmp_path / "data"
    data.mkdir()
    (data / "empty.txt").write_bytes(b"")
    (data / "blank.jsonl").write_bytes(b'{"text": ""}\n')
    out = tmp_path / "out"
    result = cli("run", data, out, "--vocab-size", "300", ok=False)
    assert_one_line_error(result, "empty")
    assert "tokenizer.json" not in final_outputs(out)


@pytest.mark.parametrize(
    "command, stage",
    [
        (["run", "{data}", "{out}"], "count"),
        (["run", "{data}", "{out}", "--tokenizer", "vocabularies/gpt2.tiktoken"], "encode"),
        (["count", "{data}", "{out}"], "count"),
        (["encode", "{data}", "{out}", "--tokenizer", "vocabularies/gpt2.tiktoken"], "encode"),
    ],
)
def test_inputs_that_hold_no_document_are_an_empty_corpus_for_every_command(
    tmp_path, cli, command, stage
):
    """Only empty inputs: `run --tokenizer` (and `encode`) wrote a manifest of 0
    documents and exited 0, where `run` without one exits 1 (README: an empty
    corpus is status 1), so a scheduled job took nothing for a success."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_bytes(b"")
    (data / "b.jsonl").write_bytes(b"")
    out = tmp_path / "out"
    args = [a.format(data=data, out=out) for a in command]
    for _ in range(2):  # a rerun keeps the empty shards written, and is refused the same
        result = cli(*args, ok=False)
        assert result.exit_code == 1
        assert_one_line_error(result, f"{stage}: no document in 2 inputs", "empty corpus")
        assert not (out / "manifest.json").exists()


def test_folder_without_shards(tmp_path, cli):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "notes.md").write_text("hello")
    result = cli("count", tmp_path / "data", tmp_path / "out", ok=False)
    assert_one_line_error(result, "data", "no input shards")


def test_missing_input(tmp_path, cli):
    result = cli("run", tmp_path / "nope", tmp_path / "out", ok=False)
    assert_one_line_error(result, "nope")


def test_malformed_tokenizer_file(corpus, tmp_path, cli):
    bad = tmp_path / "tok.json"
    bad.write_text("{not json")
    result = cli("encode", corpus, tmp_path / "tokens", "--tokenizer", bad, ok=False)
    assert_one_line_error(result, "tok.json")
    assert not (tmp_path / "tokens").exists()
