"""An option that nothing else given acts on is refused in one line, before any
work: each of these ran to exit 0 without it having any effect, a run other
than the one asked for."""

from __future__ import annotations

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
