"""Each command's help says what its options do there."""

from __future__ import annotations

import itertools

import pytest


def option_help(cli, command: str, option: str) -> str:
    """The help of `option` in `tokenmill COMMAND --help`, on one line."""
    lines = cli(command, "--help").output.splitlines()
    first = next(i for i, line in enumerate(lines) if line.lstrip().startswith(f"{option} "))
    # Its wrapped lines: indented, up to the next option.
    more = itertools.takewhile(
        lambda line: line.startswith(" ") and not line.lstrip().startswith("-"), lines[first + 1 :]
    )
    block = [lines[first], *more]
    return " ".join(" ".join(block).split())


@pytest.mark.parametrize("command", ["tokenize", "decode", "export", "encode"])
def test_commands_that_only_read_a_tokenizer_say_their_options_read_tiktoken_files(cli, command):
    """They take NAME=ID alone and train nothing: training's help misled there."""
    special = option_help(cli, command, "--special-token")
    assert special.startswith("--special-token NAME=ID For a .tiktoken file"), special
    pattern = option_help(cli, command, "--pattern")
    assert pattern.startswith("--pattern PRESET|REGEX For a .tiktoken file"), pattern
    assert "Training" not in special + pattern


@pytest.mark.parametrize("command", ["run", "train"])
def test_commands_that_train_say_what_training_takes(cli, command):
    assert "Training: NAME" in option_help(cli, command, "--special-token")
    assert "Training takes a preset" in option_help(cli, command, "--pattern")


@pytest.mark.parametrize("command", ["pack", "bin"])
def test_pack_and_bin_describe_their_own_options_not_runs(cli, command):
    """They share --val-fraction, --bos and --force with run, whose help spoke
    of token shards, --pack, --format and OUT that these commands have none of."""
    for option in ("--val-fraction", "--bos / --no-bos", "--force"):
        text = option_help(cli, command, option)
        for foreign in ("--pack", "--format", "Packed sequences", "run:", "DATA", "split column"):
            assert foreign not in text, (option, text)
    assert "another DATA in OUT" in option_help(cli, "run", "--force")


@pytest.mark.parametrize("command", ["decode", "run"])
def test_the_default_special_tokens_of_a_ranks_file_are_said_as_they_are_picked(cli, command):
    """Help said "tiktoken's for a public vocabulary"; they are picked by the
    number of ranks and the pattern read with, which name the encoding: gpt2's
    ranks read with o200k's pattern are no encoding tiktoken has, and get none."""
    from realtext import GPT2_FILE

    said = option_help(cli, command, "--special-token")
    assert "for a public vocabulary read with its own pattern (50256 ranks with gpt2, " in said
    assert "100256 with cl100k, 199998 with o200k), else none" in said
    if command == "decode":
        args = ("decode", "--tokenizer", GPT2_FILE, "50256", "--pattern")
        assert cli(*args, "gpt2").output == "<|endoftext|>"
        result = cli(*args, "o200k", ok=False)
        assert result.exit_code == 1 and "id 50256 is not in the vocabulary" in result.output
