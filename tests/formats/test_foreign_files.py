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
