"""encode's `allowed_special` and `disallowed_special`, `encode_ordinary` and
the batch forms behave as tiktoken's Encoding: tiktoken's own cases
(tests/test_encoding.py: test_special_token, test_hyp_special_ordinary,
test_batch_encode, test_encode_surrogate_pairs) run against tokenmill and
tiktoken built from the same shipped vocabulary, and give the same ids."""

from __future__ import annotations

import re
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from realtext import CL100K_FILE

import tokenmill
from tokenmill import DisallowedSpecialTokenError, Tokenizer, TokenmillError, _native
from tokenmill.formats import tiktoken as tiktoken_format

tiktoken = pytest.importorskip("tiktoken")

EOT, FIP, FIM = "<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>"


@cache
def ours() -> Tokenizer:
    return tokenmill.load(CL100K_FILE)


@cache
def theirs():
    """tiktoken's cl100k_base, built offline from the same file."""
    return tiktoken.Encoding(
        "cl100k_base",
        pat_str=_native.preset_regex("cl100k"),
        mergeable_ranks=tiktoken_format.read_ranks(CL100K_FILE),
        special_tokens=tiktoken_format.KNOWN_SPECIALS[("cl100k", 100256)],
    )


def same(text: str, **options) -> list[int]:
    """encode(text, **options) of both, checked equal, or both raising ValueError."""
    try:
        want = theirs().encode(text, **options)
    except ValueError:
        with pytest.raises(DisallowedSpecialTokenError):
            ours().encode(text, **options)
        with pytest.raises(ValueError):  # what tiktoken's users catch
            ours().encode(text, **options)
        return []
    got = ours().encode(text, **options)
    assert got == want, (text, options)
    return got


def test_special_token():
    enc = ours()
    eot, fip, fim = (enc.special_id(t) for t in (EOT, FIP, FIM))
    assert (eot, fip, fim) == (100257, 100258, 100259) == (theirs().eot_token, 100258, 100259)

    text = "<|endoftext|> hello <|fim_prefix|>"
    assert eot not in same(text, disallowed_special=())
    for disallowed in ("all", {EOT}, {FIP}):
        with pytest.raises(DisallowedSpecialTokenError):
            enc.encode(text, disallowed_special=disallowed)
        same(text, disallowed_special=disallowed)
    same(text)

    text = "<|endoftext|> hello <|fim_prefix|> there <|fim_middle|>"
    tokens = same(text, disallowed_special=())
    assert eot not in tokens and fip not in tokens and fim not in tokens
    for disallowed in ((), "all"):
        tokens = same(text, allowed_special="all", disallowed_special=disallowed)
        assert eot in tokens and fip in tokens and fim in tokens
    for token, i in ((FIP, fip), (EOT, eot), (FIM, fim)):
        tokens = same(text, allowed_special={token}, disallowed_special=())
        assert [t for t in (eot, fip, fim) if t in tokens] == [i]


def test_allowed_special_with_the_others_still_disallowed():
    text = "a<|endoftext|>b<|fim_prefix|>"
    same(text, allowed_special={EOT})  # fim_prefix is disallowed: both raise
    same(text, allowed_special={EOT, FIP})
    same("hello <|endoftext|>", allowed_special="all")
    same(EOT * 3, allowed_special="all")
    same("<|endoftext|><|endofprompt|>x", allowed_special="all")
    # disallowed_special need not be special tokens of the vocabulary
    same("a secret word", disallowed_special={"secret"})


def test_the_refusal_is_one_line_naming_the_token_and_the_arguments():
    with pytest.raises(DisallowedSpecialTokenError) as e:
        ours().encode("x <|endoftext|>")
    message = str(e.value)
    assert "\n" not in message and repr(EOT) in message
    assert "allowed_special=" in message and "disallowed_special=()" in message
    assert isinstance(e.value, TokenmillError) and isinstance(e.value, ValueError)


def test_a_token_disallowed_by_name_is_refused_as_tiktoken_refuses_it():
    """The message said to allow it, which leaves it refused."""
    for text, options in [
        ("<|nope|>", {"disallowed_special": {"<|nope|>"}}),
        ("x<|nope|>", {"allowed_special": "all", "disallowed_special": ["<|nope|>"]}),
        ("<|endoftext|>", {"allowed_special": {EOT}, "disallowed_special": {EOT}}),
    ]:
        same(text, **options)
        with pytest.raises(DisallowedSpecialTokenError) as e:
            ours().encode(text, **options)
        assert "it is in disallowed_special=: leave it out" in str(e.value)
        assert "pass allowed_special" not in str(e.value)
    assert same("<|nope|>", allowed_special={"<|nope|>"}) == ours().encode_ordinary("<|nope|>")


def test_a_token_name_is_no_set_of_them():
    """A TypeError, as None there is: it was a TokenmillError."""
    with pytest.raises(TypeError, match=re.escape("allowed_special='<|endoftext|>': want a set")):
        ours().encode("x", allowed_special=EOT)
    with pytest.raises(
        TypeError, match=re.escape("disallowed_special='<|endoftext|>': want a set")
    ):
        ours().encode("x", disallowed_special=EOT)


@settings(max_examples=40, deadline=None)
@given(
    text=st.lists(
        st.sampled_from([EOT, FIP, FIM, "<|endofprompt|>", "<|", "|>", " ", "a", "é", "\n"])
        | st.text(max_size=6),
        max_size=8,
    ).map("".join)
)
def test_hyp_special_ordinary(text):
    enc = ours()
    assert enc.encode_ordinary(text) == enc.encode(text, disallowed_special=())
    assert enc.encode_ordinary(text) == theirs().encode_ordinary(text)
    same(text, allowed_special="all")
    same(text, allowed_special={EOT}, disallowed_special=())


def test_batch_encode():
    enc, ref = ours(), theirs()
    text1, text2 = "hello world", "goodbye world"
    assert enc.encode_batch([text1]) == [enc.encode(text1)] == ref.encode_batch([text1])
    assert enc.encode_batch([text1, text2]) == ref.encode_batch([text1, text2])
    assert enc.encode_ordinary_batch([text1, text2]) == ref.encode_ordinary_batch([text1, text2])
    batch = ["a<|endoftext|>b", "", "<|fim_prefix|>x<|fim_middle|>", "plain"]
    want = ref.encode_batch(batch, allowed_special="all")
    assert enc.encode_batch(batch, allowed_special="all") == want
    assert enc.encode_batch(batch, allowed_special="all", parallel=False) == want
    assert enc.encode_batch(batch, allowed_special={EOT}, disallowed_special=()) == (
        ref.encode_batch(batch, allowed_special={EOT}, disallowed_special=())
    )
    assert enc.encode_batch(batch, disallowed_special=()) == ref.encode_ordinary_batch(batch)
    with pytest.raises(DisallowedSpecialTokenError, match="text 2 of the batch"):
        enc.encode_batch(batch, allowed_special={EOT})
    # eos after each text, special tokens allowed or not
    assert enc.encode_batch(batch, allowed_special="all", eos=True) == [w + [100257] for w in want]
    # One text is no batch (iterated, it would be each character's ids).
    for method in (enc.encode_batch, enc.encode_ordinary_batch):
        with pytest.raises(TypeError, match="takes a list of texts, not one text"):
            method(text1)


def test_encode_surrogate_pairs():
    enc = ours()
    assert enc.encode("👍") == [9468, 239, 235]
    # a surrogate pair written as two code points is that code point
    assert enc.encode("\ud83d\udc4d") == [9468, 239, 235]
    # a lone surrogate is U+FFFD
    assert enc.encode("\ud83d") == enc.encode("�")
    for text in ("\ud83d", "a\udc4d b", "x\ud83d\udc4d\ud83d", "\ud800" * 3):
        assert enc.encode(text) == theirs().encode(text), text
        assert enc.encode_ordinary(text) == theirs().encode_ordinary(text), text
        assert enc.encode_batch([text, "ok"]) == theirs().encode_batch([text, "ok"]), text
        assert enc.encode_ordinary_batch([text]) == theirs().encode_ordinary_batch([text])


def test_trained_and_char_mode_tokenizers_take_special_tokens_too():
    tok = Tokenizer.train(["hello world"] * 5, vocab_size=270, special_tokens=["<|pad|>"])
    pad = tok.special_id("<|pad|>")
    assert tok.encode("hi<|pad|>", allowed_special={"<|pad|>"}) == tok.encode("hi") + [pad]
    chars = Tokenizer.train(["hello world"] * 5, mode="char", vocab_size=30)
    eot = chars.special_id(EOT)
    ids = chars.encode("hello<|endoftext|>world", allowed_special="all")
    assert ids == chars.encode("hello") + [eot] + chars.encode("world")
    with pytest.raises(DisallowedSpecialTokenError):
        chars.encode("hello<|endoftext|>")
