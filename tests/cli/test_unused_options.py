"""An option that nothing else given acts on is refused in one line, before any
work: each of these ran to exit 0 without it having any effect, a run other
than the one asked for."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import assert_one_line_error, assert_usage_error

from tokenmill import Tokenizer
from tokenmill.config import Config


@pytest.mark.parametrize(
    "args, message",
    [
        (["--superword-max-words", "2"], "--superword-max-words goes with --superword-at"),
        (["--per-shard"], "--per-shard goes with --format"),
        (["--ray-address", "127.0.0.1:1"], "--ray-address goes with --executor ray"),
        (["--mode", "char", "--pattern", "gpt2"], "--pattern gpt2 is byte mode's"),
        (["--count-only", "--pack", "64"], "--pack acts on token shards: not with --count-only"),
        (["--count-only", "--format", "bin"], "--format acts on token shards"),
        (["--count-only", "--val-fraction", "0.1"], "--val-fraction acts on token shards"),
        (["--count-only", "--bos"], "--bos acts on token shards"),
        # Given, whatever its value: these were taken as left alone, being the default.
        (["--mode", "char", "--pattern", "cl100k"], "--pattern cl100k is byte mode's"),
        (["--superword-max-words", "4"], "--superword-max-words goes with --superword-at"),
        (["--superword-at", "0", "--superword-max-words", "4"], "--superword-max-words goes"),
        # bin writes a pair of arrays per shard with or without it.
        (["--format", "bin", "--per-shard"], "--per-shard goes with --format megatron"),
        (["--format", "bin", "--per-shard", "--val-fraction", "0.1"], "--per-shard goes with"),
        # Nothing is encoded to leave <|endoftext|> out of.
        (["--count-only", "--no-eos"], "--no-eos acts on token shards: not with --count-only"),
    ],
)
def test_an_option_nothing_acts_on_is_refused(cli, tmp_path, args, message):
    out = tmp_path / "out"
    size = [] if "--count-only" in args else ["--vocab-size", "1000"]  # nothing trains
    result = cli("run", "sample_data", out, *size, *args, ok=False)
    assert_usage_error(result, message, "run", out)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--vocab-size", "2000"], "--vocab-size trains: not with --count-only"),
        (["--special-token", "<|pad|>"], "--special-token trains: not with --count-only"),
        (
            ["--superword-at", "900", "--superword-max-words", "2"],
            "--superword-max-words trains",
        ),
    ],
)
def test_a_training_option_with_count_only_is_refused(cli, tmp_path, args, message):
    """Nothing trains: the run ended 0, the option dropped without a word."""
    out = tmp_path / "out"
    result = cli("run", "sample_data", out, "--count-only", *args, ok=False)
    assert_usage_error(result, message, "run", out)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--mode", "char"], "--mode char does not go with --superword: superword tokens are"),
        (["--pattern", "gpt2"], "--pattern gpt2 does not go with --superword: stage 2's words"),
    ],
)
def test_count_superword_refuses_a_mode_or_pattern_it_would_drop(cli, tmp_path, args, message):
    out = tmp_path / "counts"
    result = cli("count", "sample_data/multilingual.jsonl", out, "--superword", *args, ok=False)
    assert_usage_error(result, message, "count", out)


def test_the_same_options_where_they_act_are_taken():
    Config(superword_at=900, vocab_size=1000, superword_max_words=2)
    Config(per_shard=True, format="megatron")
    Config(executor="ray", ray_address="127.0.0.1:1")
    Config(mode="char", pattern="cl100k")  # the default, which char mode leaves alone


def test_a_tokenizer_with_count_only_is_refused_as_a_usage_error(cli, tmp_path):
    out = tmp_path / "out"
    tok = tmp_path / "tok.json"
    Tokenizer.train(["hello world"] * 3, num_merges=2).save(tok)
    result = cli("run", "sample_data", out, "--tokenizer", tok, "--count-only", ok=False)
    assert_usage_error(result, "--tokenizer encodes: not with --count-only", "run", out)
    job = tmp_path / "job.toml"
    job.write_text(f'inputs = "{tmp_path}"\noutput = "o"\ntokenizer = "tok.json"\n')
    result = cli("run", "--job", job, "--count-only", ok=False)
    assert_one_line_error(result, f"{job}: tokenizer encodes: not with --count-only")
    assert result.exit_code == 1  # the job file's key, not a usage error


@pytest.mark.parametrize("command", ["run", "count", "train"])
def test_a_pattern_given_in_char_mode_is_refused_whatever_it_is(cli, tmp_path, command):
    """--pattern cl100k, the default, was taken as not given: char mode left it alone."""
    reads = "sample_data/lines.txt"
    if command == "train":
        cli("run", reads, tmp_path / "counted", "--mode", "char", "--count-only")
        reads = tmp_path / "counted" / "counts.parquet"
    out = tmp_path / "out"
    size = ["--vocab-size", "1000"] if command != "count" else []
    args = (command, reads, out, *size, "--mode", "char", "--pattern", "cl100k")
    assert_usage_error(cli(*args, ok=False), "--pattern cl100k is byte mode's", command, out)
    if command == "train":
        args = ("train", reads, out, *size, "--mode", "char", "--superword-max-words", "4")
        assert_usage_error(cli(*args, ok=False), "--superword-max-words goes with", "train", out)


def lines_job(tmp_path: Path, setting: str) -> Path:
    """tmp_path/job.toml: sample_data/lines.txt into tmp_path/o, and `setting`."""
    job = tmp_path / "job.toml"
    data = Path("sample_data/lines.txt").resolve()
    job.write_text(f'inputs = "{data}"\noutput = "o"\n{setting}\n')
    return job


def test_bos_when_encoding_only_without_a_layout_is_refused(cli, tmp_path):
    """With a tokenizer given, nothing is trained to reserve <|bos|> in, and no
    layout puts it before a document: the run ended 0, its manifest saying bos."""
    tok = tmp_path / "tok.json"
    Tokenizer.train(["hello world"] * 3, num_merges=2, special_tokens=["<|bos|>"]).save(tok)
    out = tmp_path / "out"
    result = cli("run", "sample_data/lines.txt", out, "--tokenizer", tok, "--bos", ok=False)
    assert_usage_error(result, "--bos goes with --pack or --format when encoding only", "run", out)
    job = lines_job(tmp_path, "bos = true")
    result = cli("run", "--job", job, "--tokenizer", tok, ok=False)
    assert_one_line_error(result, f"{job}: bos goes with --pack or --format when encoding only")
    assert result.exit_code == 1 and not (tmp_path / "o").exists()
    cli("run", "sample_data/lines.txt", out, "--tokenizer", tok, "--bos", "--pack", "64")
    # Training reserves <|bos|> with it, layouts or none.
    cli("run", "sample_data/lines.txt", tmp_path / "trained", "--vocab-size", "300", "--bos")
    assert "<|bos|>" in Tokenizer.load(tmp_path / "trained" / "tokenizer.json").special_tokens


def test_a_special_token_read_with_a_tokenizer_names_its_option_or_job_key(cli, tmp_path):
    """The line said "Invalid value: 'pad' is not NAME=ID" naming no option, and
    for a job's special_tokens, as a usage error, neither the file nor the key."""
    tok = tmp_path / "tok.json"
    Tokenizer.train(["hello world"] * 3, num_merges=2).save(tok)
    out = tmp_path / "out"
    args = ("run", "sample_data/lines.txt", out, "--tokenizer", tok, "--special-token", "pad")
    result = cli(*args, ok=False)
    assert_usage_error(result, "Invalid value for '--special-token': 'pad' is not NAME=ID", "run")
    job = lines_job(tmp_path, 'special_tokens = ["<|pad|>"]')
    result = cli("run", "--job", job, "--tokenizer", tok, ok=False)
    assert_one_line_error(result, f"{job}: special_tokens: '<|pad|>' is not NAME=ID")
    assert result.exit_code == 1 and not (tmp_path / "o").exists()


def test_mix_and_no_mix_are_refused_before_the_recipe_is_read(cli, tmp_path):
    """The recipe was read first, and its fault (status 1) said instead of the pair's."""
    recipe = tmp_path / "mix.toml"
    recipe.write_text('[mix]\nweb = "lots"\n')
    out = tmp_path / "out"
    result = cli("run", "sample_data", out, "--mix", recipe, "--no-mix", ok=False)
    assert_usage_error(result, "--mix and --no-mix: give one", "run", out)
