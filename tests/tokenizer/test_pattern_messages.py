r"""A custom pattern the core refuses is named as it was given, not in the
core's Rust quoting (`"a*|[\\s\\S]"`) nor as tokenmill wrapped it, and the
advice the message gives works: `|[\s\S]` for text no branch matches, never
for a pattern that matches empty text there, which that branch cannot help."""

from __future__ import annotations

import json

import pytest
from realtext import GPT2_FILE

from tokenmill import load
from tokenmill.errors import TokenmillError
from tokenmill.formats import export, load_any
from tokenmill.tokenizer import Tokenizer

ENDING = r"end the pattern with |[\s\S] to make"


def refusal(cli, pattern: str) -> str:
    """A --pattern given is a value refused: a usage error (README, Exit status)."""
    result = cli("tokenize", "--tokenizer", GPT2_FILE, "--pattern", pattern, "x", ok=False)
    assert result.exit_code == 2
    [line] = result.output.splitlines()
    assert line.startswith(f"Error: {GPT2_FILE}: ")
    return line


@pytest.mark.parametrize("pattern", [r"(\d", r"\p{Nope}|[\s\S]", "[a-"])
def test_an_invalid_regex_is_named_as_given(cli, pattern):
    line = refusal(cli, pattern)
    assert f"invalid pre-tokenization pattern '{pattern}': " in line


@pytest.mark.parametrize(
    ("pattern", "fixed"),
    [(r"\w+", r"\w+|[\s\S]"), (r"x{2,1}", r"x{2,1}|[\s\S]")],
)
def test_text_no_branch_matches_is_advised_the_last_branch_that_works(cli, pattern, fixed):
    line = refusal(cli, pattern)
    assert f"pre-tokenization pattern '{pattern}' leaves text" in line and ENDING in line
    assert (
        load(GPT2_FILE, pattern=fixed).decode(load(GPT2_FILE, pattern=fixed).encode("a, b"))
        == "a, b"
    )


@pytest.mark.parametrize(
    ("pattern", "fixed"),
    [
        (r"a*", r"a+|[\s\S]"),
        (r"a*|[\s\S]", r"a+|[\s\S]"),
        (r"\b|\w+|[\s\S]", r"\w+|[\s\S]"),
        (r"(?=a)|[\s\S]", r"[\s\S]"),
    ],
)
def test_a_pattern_matching_empty_text_is_not_advised_a_last_branch(cli, pattern, fixed):
    line = refusal(cli, pattern)
    assert f"pre-tokenization pattern '{pattern}' leaves text" in line
    assert ENDING not in line and "matches empty text there" in line
    tok = load(GPT2_FILE, pattern=fixed)  # the advice followed
    assert tok.decode(tok.encode("banana, a")) == "banana, a"


def test_training_names_the_pattern_as_given():
    with pytest.raises(TokenmillError) as e:
        Tokenizer.train(["hi there"], pattern=r"\s*|[\s\S]", num_merges=1)
    assert r"pattern '\s*|[\s\S]' leaves text" in str(e.value)
    assert ENDING not in str(e.value)


@pytest.mark.parametrize("pattern", [r"(\d", r"\p{Nope}"])  # refused by tokenmill; the core
def test_a_tokenizer_json_split_is_named_as_its_file_has_it(tmp_path, pattern):
    path = tmp_path / "tokenizer.json"
    export(Tokenizer.train(["hi there"], pattern=r"[a-z]+|[\s\S]", num_merges=1), path, "hf")
    d = json.loads(path.read_text())
    [split] = [s for s in d["pre_tokenizer"]["pretokenizers"] if s["type"] == "Split"]
    split["pattern"] = {"Regex": pattern}
    path.write_text(json.dumps(d))
    with pytest.raises(TokenmillError) as e:
        load_any(path)
    assert f"'{pattern}'" in str(e.value) and r"[\s\S]|(?:" not in str(e.value)
