"""Byte mode never drops text under a custom pattern. tiktoken drops what its
pattern leaves unmatched, so there are no reference ids for such text:
tokenmill refuses a pattern that leaves text unmatched, when it compiles the
pattern if it misses common text, else on the first text it misses; for any
pattern it takes, its ids are tiktoken's."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from realtext import GPT2_FILE

from tokenmill import _native, load
from tokenmill.errors import TokenmillError
from tokenmill.tokenizer import Tokenizer

tiktoken = pytest.importorskip("tiktoken")
from tiktoken.load import load_tiktoken_bpe  # noqa: E402

# \w+ misses common text (punctuation, whitespace); [^~]+ only "~".
SKIPS_COMMON = r"\w+"
SKIPS_TILDE = r"[^~]+"
# Patterns that cover all text, the last branch taking what the others miss.
COVERING = [r"\w+|[\s\S]", r"[^\W\d]+|\d{1,2}|\s+(?!\S)|[^~]+?|~"]


@pytest.fixture(scope="module")
def ranks():
    return load_tiktoken_bpe(str(GPT2_FILE))


def reference(ranks, pattern):
    return tiktoken.Encoding("custom", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})


def test_tiktoken_drops_unmatched_text(ranks):
    """Why tokenmill refuses such patterns instead of copying tiktoken."""
    enc = reference(ranks, SKIPS_COMMON)
    assert enc.decode(enc.encode_ordinary("Hello, world! 123")) == "Helloworld123"


@pytest.mark.parametrize(
    "make",
    [
        lambda: load(GPT2_FILE, pattern=SKIPS_COMMON),
        lambda: Tokenizer.train(["Hello, world!"] * 3, pattern=SKIPS_COMMON, num_merges=2),
        lambda: Tokenizer(pattern="not-a-preset-name").encode("x"),
    ],
    ids=["tiktoken-file", "train", "encode"],
)
def test_a_pattern_missing_common_text_is_refused_up_front(make):
    with pytest.raises(TokenmillError, match=r"leaves text such as .* unmatched") as e:
        make()
    assert "\n" not in str(e.value) and r"|[\s\S]" in str(e.value)


def test_text_a_pattern_misses_is_an_error_not_dropped():
    tok = load(GPT2_FILE, pattern=SKIPS_TILDE)
    assert tok.decode(tok.encode("no tilde here")) == "no tilde here"
    for encode in (tok.encode, lambda t: tok.encode_batch([t])[0]):
        with pytest.raises(TokenmillError, match=r"leaves text such as \"~\" unmatched"):
            encode("a~b")
    with pytest.raises(TokenmillError, match="unmatched"):
        Tokenizer.train(["fine", "not ~ fine"], pattern=SKIPS_TILDE, num_merges=2)


@pytest.fixture(scope="module", params=COVERING)
def covering(request, ranks):
    return load(GPT2_FILE, pattern=request.param), reference(ranks, request.param)


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=40))
def test_covering_patterns_round_trip_with_tiktokens_ids(covering, text):
    tok, enc = covering
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert ids == enc.encode_ordinary(text)


@pytest.fixture(scope="module")
def tilde(ranks):
    return load(GPT2_FILE, pattern=SKIPS_TILDE), reference(ranks, SKIPS_TILDE)


@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("ab ~,\n\u00e9\u65e5"), max_size=20))
def test_a_pattern_that_misses_text_never_loses_it(tilde, text):
    """Lossless or an error: what tiktoken would drop is never dropped."""
    tok, enc = tilde
    try:
        ids = tok.encode(text)
    except TokenmillError:
        assert "~" in text
    else:
        assert tok.decode(ids) == text
        assert ids == enc.encode_ordinary(text)


def test_empty_text_matches_nothing_and_loses_nothing():
    assert _native.pretokenize("", SKIPS_TILDE) == []


# ---- a tokenizer file's pattern and pattern_regex ------------------------


@pytest.fixture(scope="module")
def custom_file() -> dict:
    return Tokenizer.train(["Hello, world! 123"] * 5, pattern=COVERING[0], num_merges=3).to_dict()


def test_a_custom_pattern_is_written_as_its_regex_and_loads_as_it(custom_file, tmp_path):
    assert custom_file["pattern"] == custom_file["pattern_regex"] == COVERING[0]
    path = tmp_path / "tok.json"
    Tokenizer.from_dict(custom_file).save(path)
    tok = Tokenizer.load(path)
    assert tok.pattern == COVERING[0]
    assert tok.decode(tok.encode("Hello, world! 123")) == "Hello, world! 123"
    without = {k: v for k, v in custom_file.items() if k != "pattern_regex"}
    assert Tokenizer.from_dict(without).encode("a, b") == tok.encode("a, b")


@pytest.mark.parametrize(
    ("pattern", "pattern_regex"),
    [("my-split", COVERING[0]), ("gpt2", COVERING[0]), (COVERING[0], COVERING[1])],
    ids=["a-name-not-a-preset", "a-preset-another-regex", "two-regexes"],
)
def test_a_file_whose_pattern_and_pattern_regex_disagree_is_refused(
    custom_file, tmp_path, pattern, pattern_regex
):
    """Either field taken alone would split text as the other's reader does
    not (a name taken as a regex matched nothing, and every document became
    <|endoftext|>)."""
    path = tmp_path / "tok.json"
    path.write_text(
        json.dumps(custom_file | {"pattern": pattern, "pattern_regex": pattern_regex}),
        encoding="utf-8",
    )
    with pytest.raises(TokenmillError, match="pattern .* and pattern_regex .* disagree") as e:
        Tokenizer.load(path)
    assert str(e.value).startswith(f"{path}: ") and "\n" not in str(e.value)
