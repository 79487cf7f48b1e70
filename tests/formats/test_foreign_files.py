"""Files other tools write that tokenmill reads as Hugging Face tokenizers or
tiktoken read them, or refuses with one line that says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tokenizers

from tokenmill.errors import TokenmillError
from tokenmill.formats import hf, load_any
from tokenmill.tokenizer import Tokenizer


def small() -> Tokenizer:
    return Tokenizer.train(["hello hello world, hello there"], pattern="gpt2", vocab_size=270)


def write(tmp_path: Path, d: dict, name: str = "tokenizer.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(d), encoding="utf-8")
    return path


def refused(path: Path, *needles: str) -> str:
    with pytest.raises(TokenmillError) as e:
        load_any(path)
    message = str(e.value)
    assert "\n" not in message and str(path) in message, message
    for needle in needles:
        assert needle in message, message
    return message


def test_a_bpe_model_without_merges_is_refused_as_tokenizers_refuses_it(tmp_path):
    d = hf.to_dict(small())
    del d["model"]["merges"]
    path = write(tmp_path, d)
    with pytest.raises(Exception, match="Missing vocab/merges"):
        tokenizers.Tokenizer.from_file(str(path))
    refused(path, 'no "merges"')
    d["model"]["merges"] = []  # an empty list is a model with no merges: both load it
    path = write(tmp_path, d)
    assert tokenizers.Tokenizer.from_file(str(path)).encode("hello").ids == [
        *load_any(path).encode("hello")
    ]


@pytest.mark.parametrize("content", ["he", "hello"])
def test_an_added_token_that_a_merge_makes_is_named(tmp_path, content):
    d = hf.to_dict(small())
    i = d["model"]["vocab"][content]
    d["added_tokens"].append({**d["added_tokens"][0], "id": i, "content": content})
    merge = next(k for k, m in enumerate(d["model"]["merges"]) if m.replace(" ", "") == content)
    refused(write(tmp_path, d), f"added token {content!r} (id {i}) is also the token merge {merge}")


def test_an_added_token_in_the_vocab_at_another_id_is_named(tmp_path):
    d = hf.to_dict(small())
    d["added_tokens"][0]["id"] = 5  # <|endoftext|>, which model.vocab has at 269
    path = write(tmp_path, d)
    assert tokenizers.Tokenizer.from_file(str(path)).token_to_id("<|endoftext|>") == 269
    message = refused(path, "has id 5, but model.vocab has it at 269")
    assert "missing" not in message


def test_a_byte_order_mark_is_refused_in_tokenizer_json_as_tokenizers_refuses_it(tmp_path):
    path = write(tmp_path, hf.to_dict(small()))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    with pytest.raises(Exception, match="expected value at line 1 column 1"):
        tokenizers.Tokenizer.from_file(str(path))
    refused(path, "byte order mark")


def test_a_byte_order_mark_in_a_tiktoken_file_is_read_as_tiktoken_reads_it(tmp_path):
    import tiktoken.load
    from realtext import GPT2_FILE

    path = tmp_path / "bom.tiktoken"
    path.write_bytes(b"\xef\xbb\xbf" + GPT2_FILE.read_bytes())
    assert tiktoken.load.load_tiktoken_bpe(str(path)) == tiktoken.load.load_tiktoken_bpe(
        str(GPT2_FILE)
    )
    assert load_any(path, pattern="gpt2") == load_any(GPT2_FILE, pattern="gpt2")


def test_truncation_and_padding_are_ignored_as_docs_say(tmp_path):
    """Pretraining encodes whole documents: a model's truncation (its context
    length) and padding are for its inputs, not for a corpus."""
    tok = small()
    d = hf.to_dict(tok)
    d["truncation"] = {
        "direction": "Right",
        "max_length": 2,
        "strategy": "LongestFirst",
        "stride": 0,
    }
    d["padding"] = {
        "strategy": {"Fixed": 8},
        "direction": "Right",
        "pad_to_multiple_of": None,
        "pad_id": 0,
        "pad_type_id": 0,
        "pad_token": "<|endoftext|>",
    }
    path = write(tmp_path, d)
    assert len(tokenizers.Tokenizer.from_file(str(path)).encode("hello world there").ids) == 8
    assert load_any(path).encode("hello world there") == tok.encode("hello world there")


def test_a_conversion_of_a_tiktoken_file_is_refused_naming_the_file_to_give(tmp_path):
    """transformers' TikTokenConverter writes a merge for every split of each
    token: tokenmill takes one merge per token, and says to give it the
    .tiktoken file the conversion came from, which it reads exactly."""
    converter = pytest.importorskip("transformers.convert_slow_tokenizer").TikTokenConverter
    import base64

    # Four spaces ranked before three, as in cl100k: one split of the four
    # joins the three, which a later merge makes.
    tokens = [bytes([b]) for b in range(256)] + [b"  ", b"    ", b"   ", b"ab", b"abc"]
    ranks = tmp_path / "small.tiktoken"
    ranks.write_text("".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate(tokens)))
    gpt2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    converted = converter(vocab_file=str(ranks), pattern=gpt2)
    path = tmp_path / "tokenizer.json"
    converted.converted().save(str(path))
    refused(path, "several merges that make one token", "give tokenmill that .tiktoken file")
    assert load_any(ranks, pattern="gpt2").encode_ordinary("abc     x") == [260, 257, 32, 120]
