"""`tokenmill run DATA OUT --tokenizer FILE` (encode only) with a .tiktoken file:
the manifest records the tokenizer actually used, and every command that reads
OUT afterwards (stats, report, decode --shard, pack) works on it, with no
--tokenizer or --pattern; decoding ids never needs a pattern."""

from __future__ import annotations

import hashlib
import json

import pytest
from conftest import assert_one_line_error, make_documents, write_shard
from realtext import GPT2_FILE
from runs import manifest, output_files, tokenmill_here

from tokenmill.formats import load_any

DOCS = make_documents(30, seed=3)
SPLIT = 12  # a.jsonl holds DOCS[:SPLIT], b.parquet the rest


@pytest.fixture(scope="module")
def encoded(tmp_path_factory):
    root = tmp_path_factory.mktemp("encode-only")
    data = root / "data"
    write_shard(data / "a.jsonl", DOCS[:SPLIT])
    write_shard(data / "b.parquet", DOCS[SPLIT:])
    out = root / "out"
    tokenmill_here(
        "run", data, out, "--tokenizer", GPT2_FILE, "--pattern", "gpt2", "--workers", "1"
    )
    return data, out


@pytest.fixture(scope="module")
def gpt2():
    return load_any(GPT2_FILE, pattern="gpt2")


@pytest.mark.parametrize("command", [("tokenize", "hello"), ("encode", "{data}", "{out}")])
def test_a_command_that_needs_a_tokenizer_says_so_in_one_line(cli, tmp_path, command):
    write_shard(tmp_path / "data" / "a.jsonl", DOCS[:2])
    args = [a.format(data=tmp_path / "data", out=tmp_path / "out") for a in command]
    assert_one_line_error(cli(*args, ok=False), "--tokenizer")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "option",
    [
        ("--superword-at", "300"),
        ("--min-count", "5"),
        ("--vocab-size", "50000"),
        ("--lowercase",),
        ("--mode", "char"),
    ],
)
def test_a_training_option_with_a_tokenizer_is_refused(cli, tmp_path, option):
    """Training options have nothing to act on when the tokenizer is given: the
    run would end 0 with a tokenizer other than the one asked for."""
    write_shard(tmp_path / "data" / "a.jsonl", DOCS[:2])
    args = ("run", tmp_path / "data", tmp_path / "out", "--tokenizer", GPT2_FILE, *option)
    result = cli(*args, ok=False)
    assert_one_line_error(result, f"{option[0]} trains", "--tokenizer")
    assert result.exit_code == 2  # a usage error, as every other conflict of options
    assert not (tmp_path / "out").exists()


def test_a_training_option_in_a_job_with_a_tokenizer_is_refused(cli, tmp_path):
    write_shard(tmp_path / "data" / "a.jsonl", DOCS[:2])
    job = tmp_path / "job.toml"
    job.write_text(f'inputs = "data"\noutput = "out"\ntokenizer = "{GPT2_FILE}"\n'
                   'pattern = "gpt2"\nsuperword_at = 300\n')  # fmt: skip
    assert_one_line_error(cli("run", "--job", job, ok=False), f"{job}: superword_at trains")


def test_manifest_config_holds_the_tokenizer_and_its_options(encoded, gpt2):
    _, out = encoded
    config = manifest(out)["config"]
    assert config["tokenizer"] == {
        "path": str(GPT2_FILE),
        "sha256": hashlib.sha256(GPT2_FILE.read_bytes()).hexdigest(),
    }
    assert config["mode"] == "byte"
    assert config["pattern"] == "gpt2"
    assert config["vocab_size"] == gpt2.vocab_size
    assert config["special_tokens"] == [f"{t}={i}" for t, i in gpt2.special_map.items()]
    assert "min_count" not in config  # a training option, which encoding does not use


def test_out_holds_a_copy_of_the_tokenizer_and_verifies(encoded, gpt2):
    data, out = encoded
    m = manifest(out)
    copy = out / "tokenizer.json"
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == gpt2.sha256 == m["tokenizer_sha256"]
    assert "tokenizer.json" in [e["path"] for e in m["files"]]
    assert "files match the manifest" in tokenmill_here("verify", out).stderr
    # A rerun keeps everything, the copy included.
    before = output_files(out)
    tokenmill_here(
        "run", data, out, "--tokenizer", GPT2_FILE, "--pattern", "gpt2", "--workers", "1"
    )
    assert output_files(out) == before
    assert manifest(out)["stages"]["encode"]["redone"] == 0


def test_stats_and_report_read_out_with_no_tokenizer_given(encoded, cli):
    _, out = encoded
    stats = json.loads(cli("stats", out, "--json").output.split("\nstats: ")[0])
    assert stats["documents"] == len(DOCS)
    assert stats["tokenizer_sha256"] == manifest(out)["tokenizer_sha256"]
    cli("report", out)
    assert "<svg" in (out / "report.html").read_text(encoding="utf-8")


def test_stats_takes_the_tiktoken_file_itself_without_a_pattern(encoded, cli):
    _, out = encoded
    stats = json.loads(
        cli("stats", out, "--json", "--tokenizer", GPT2_FILE).output.split("\nstats: ")[0]
    )
    assert stats["documents"] == len(DOCS)


@pytest.mark.parametrize("tokenizer", [(), ("--tokenizer", str(GPT2_FILE))])
def test_decode_shard_reads_out_with_or_without_the_tiktoken_file(encoded, cli, tokenizer):
    _, out = encoded
    [shard] = [out / e["path"] for e in manifest(out)["outputs"] if e["shard"] == "b.parquet"]
    text = cli("decode", "--shard", shard, "--row", 4, *tokenizer).stdout_bytes
    assert text == DOCS[SPLIT + 4].encode()


def test_decoding_ids_needs_no_pattern(cli, gpt2):
    ids = [*gpt2.encode("Hello world"), gpt2.eos_id]
    text = cli("decode", "--tokenizer", GPT2_FILE, *ids).output
    assert text == "Hello world<|endoftext|>"


def test_pack_reads_out_with_no_tokenizer_given(encoded, cli, tmp_path):
    _, out = encoded
    cli("pack", out / "tokens", tmp_path / "packed", "--seq-len", 64)
    assert list((tmp_path / "packed").rglob("*.parquet"))
