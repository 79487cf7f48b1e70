"""A superword tokenizer exported as tokenizer.json (read by unmodified Hugging Face
tokenizers and by transformers' AutoTokenizer) and as a .tiktoken file (read by tiktoken)
gives tokenmill's ids on every document of sample_data/ and of a generated corpus: each
format holds the stage-2 pattern exactly (a Split regex; tiktoken's pat_str)."""

from __future__ import annotations

import json
from functools import cache

import pytest
from conftest import make_documents
from realtext import iter_sample_documents

from tokenmill import load
from tokenmill.formats import export
from tokenmill.formats import tiktoken as tiktoken_format
from tokenmill.tokenizer import Tokenizer, superword
from tokenmill.tokenizer.superword import CORE, PATTERN


@cache
def documents() -> tuple[str, ...]:
    sample = [text for _, text in iter_sample_documents()]
    return (*sample, *make_documents(300, seed=7))


@pytest.fixture(scope="module", params=["cl100k", "gpt2"])
def exported(request, tmp_path_factory):
    sample = [text for _, text in iter_sample_documents()]
    tok = superword.train(sample[::2], pattern=request.param, vocab_size=6000, superword_at=4000)
    out = tmp_path_factory.mktemp(f"superword-{request.param}")
    export(tok, out / "tokenizer.json", "hf")
    export(tok, out / "tok.tiktoken", "tiktoken")
    export(tok, out / "model", "transformers")
    expected = [tok.encode(text) for text in documents()]
    return tok, out, expected


def check(expected: list[list[int]], got: list[list[int]], what: str) -> None:
    bad = [i for i, (w, g) in enumerate(zip(expected, got, strict=True)) if list(w) != list(g)]
    assert not bad, f"{what}: {len(bad)} of {len(expected)} documents differ, first {bad[0]}"


def test_superwords_were_learned(exported):
    tok, _, _ = exported
    spans = [tok.token_values[i] for i in tok._merge_ids[4000 - 256 :]]
    assert b" of the" in spans and b", and" in spans


def test_fewer_tokens_than_ordinary_bpe_of_the_same_size_on_held_out_text():
    sample = [text for _, text in iter_sample_documents()]
    train, held_out = sample[::2], sample[1::2]
    superwords = superword.train(train, vocab_size=6000, superword_at=4000)
    plain = Tokenizer.train(train, vocab_size=6000)

    def tokens(tok: Tokenizer) -> int:
        return sum(len(ids) for ids in tok.encode_ordinary_batch(held_out))

    assert tokens(superwords) < tokens(plain)


def test_tokenizer_json_in_hugging_face_tokenizers(exported):
    tokenizers = pytest.importorskip("tokenizers")
    _, out, expected = exported
    hf = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    got = [e.ids for e in hf.encode_batch(list(documents()), add_special_tokens=False)]
    check(expected, got, "tokenizers")
    split = json.loads((out / "tokenizer.json").read_text())["pre_tokenizer"]["pretokenizers"][0]
    assert split["pattern"]["Regex"] == PATTERN and split["behavior"] == "Isolated"


def test_transformers_auto_tokenizer(exported, tmp_path):
    transformers = pytest.importorskip("transformers")
    _, out, expected = exported
    auto = transformers.AutoTokenizer.from_pretrained(
        str(out / "model"), cache_dir=str(tmp_path), local_files_only=True
    )
    got = [auto.encode(text, add_special_tokens=False) for text in documents()]
    check(expected, got, "AutoTokenizer")


def test_tiktoken_files(exported):
    pytest.importorskip("tiktoken")
    _, out, expected = exported
    enc = tiktoken_format.encoding(out / "tok.tiktoken")
    check(expected, enc.encode_ordinary_batch(list(documents())), "tiktoken")


def test_exports_read_back_as_the_same_tokenizer(exported):
    tok, out, expected = exported
    for path in (out / "tokenizer.json", out / "tok.tiktoken"):
        again = load(path)
        assert again.pattern == PATTERN  # the scanner's: no second covering branch
        check(expected, [again.encode(t) for t in documents()], path.name)
    assert CORE in PATTERN
