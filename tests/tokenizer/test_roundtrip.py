"""Byte mode is lossless: decode(encode(t)) == t for every Unicode string."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from conftest import make_documents
from hypothesis import given, settings
from hypothesis import strategies as st
from realtext import load_sample_texts

from tokenmill import _native
from tokenmill.errors import TokenmillError
from tokenmill.tokenizer import Tokenizer


@pytest.fixture(scope="module", params=["gpt2", "cl100k", "o200k"])
def tok(request) -> Tokenizer:
    return Tokenizer.train(make_documents(300), pattern=request.param, vocab_size=700)


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_round_trip_arbitrary_unicode(tok, text):
    # Ordinary: Hypothesis also draws the code's own strings, "<|endoftext|>"
    # among them, which `encode` refuses as tiktoken does.
    assert tok.decode(tok.encode_ordinary(text)) == text


@settings(max_examples=50, deadline=None)
@given(docs=st.lists(st.text(), max_size=20), parallel=st.booleans())
def test_batch_encoding_equals_one_by_one_and_round_trips(tok, docs, parallel):
    # parallel=False is how a stage encodes when its shards keep every core busy.
    ids, n_tokens = tok.encode_arrow(pa.array(docs, pa.large_string()), parallel=parallel)
    rows = ids.to_pylist()
    assert rows == [tok.encode_ordinary(d) + [tok.eos_id] for d in docs]  # specials as text
    assert n_tokens.to_pylist() == [len(r) for r in rows]
    assert [tok.decode(r[:-1]) for r in rows] == docs


def test_batch_encoding_on_the_calling_thread_equals_the_pool_on_real_text(tok):
    docs = pa.array(load_sample_texts() + make_documents(200, seed=5), pa.large_string())
    pooled = tok.encode_arrow(docs)
    inline = tok.encode_arrow(docs, parallel=False)
    assert len(pooled[0]) == len(docs) and pooled[0].equals(inline[0])
    assert pooled[1].equals(inline[1])


def test_batch_encoding_takes_every_arrow_string_type(tok):
    docs = load_sample_texts()[:20] + ["", "x"]
    want = tok.encode_arrow(pa.array(docs, pa.large_string()))
    for arr in (
        pa.array(docs, pa.string()),
        pa.array(docs, pa.string_view()),
        pa.chunked_array([pa.array(docs[:5]), pa.array(docs[5:])]),
    ):
        got = tok.encode_arrow(arr)
        assert got[0].equals(want[0]) and got[1].equals(want[1]), arr.type
    sliced = tok.encode_arrow(pa.array(docs, pa.string()).slice(3, 7))
    assert sliced[0].to_pylist() == want[0].to_pylist()[3:10]
    with pytest.raises(TokenmillError, match="array of strings, not of int64"):
        tok.encode_arrow(pa.array([1, 2]))


def test_batch_encoding_of_documents_of_millions_of_ids():
    """16-bit ids are narrowed from the end of each part the pool encoded, a
    million at a time (a long document's ids are not held at 32 and 16 bits
    at once): documents longer than that, in several parts, keep their ids
    and their order."""
    tok = Tokenizer.train(["ab cd"], vocab_size=260)
    docs = ["ab cd " * 700_000, "cd", "ab " * 1_100_000, "ab cd"] * 2
    ids, n_tokens = tok.encode_arrow(pa.array(docs, pa.large_string()))
    assert ids.type.value_type == pa.uint16()
    assert min(n_tokens.to_pylist()[::2]) > 2 * (1 << 20)
    for row, doc in zip(ids, docs, strict=True):
        assert np.array_equal(row.values.to_numpy(), tok.encode(doc, eos=True))


def test_empty_documents(tok):
    assert tok.encode("") == []
    ids, n_tokens = tok.encode_arrow(pa.array(["", "", "x"], pa.large_string()))
    assert ids.to_pylist()[:2] == [[tok.eos_id], [tok.eos_id]]
    assert n_tokens.to_pylist()[:2] == [1, 1]


def replay_merges(tok: Tokenizer, word: str) -> list[int]:
    """The textbook encoder: apply each merge, in order, left to right."""
    symbols = list(word.encode())
    for k, (a, b) in enumerate(tok.merges):
        out, i = [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                out.append(256 + k)
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        symbols = out
    return symbols


def test_threads_filling_a_cold_shared_cache_at_once_give_the_textbook_ids():
    # The pool's threads share one word cache, and a word is encoded by
    # whichever thread meets it first; every document must still get exactly
    # the merges replayed in order, word by word.
    tok = Tokenizer.train(make_documents(300), pattern="cl100k", vocab_size=700)
    texts = load_sample_texts()[::20] + make_documents(100, seed=11)
    _native.set_threads(4)
    try:
        ids, _ = tok.encode_arrow(pa.array(texts, pa.large_string()), eos=False)
    finally:
        _native.set_threads(0)
    textbook: dict[str, list[int]] = {}
    for text, row in zip(texts, ids.to_pylist(), strict=True):
        words = _native.pretokenize(text, "cl100k")
        for w in words:
            if w not in textbook:
                textbook[w] = replay_merges(tok, w)
        assert row == [i for w in words for i in textbook[w]]
    assert len(textbook) > 3000


@pytest.mark.parametrize("unit", ["a", "the", "καλημέρα", "ab", "δog"])
def test_long_words_match_replaying_the_merges(tok, unit):
    word = (unit * 4000)[:4000]
    assert tok.encode(word) == replay_merges(tok, word)


@pytest.mark.parametrize(
    "word",
    [
        "a" * 1_000_000,
        "the" * 300_000,
        "καλημέρα" * 100_000,
        "".join(chr(0x4E00 + i % 500) for i in range(300_000)),
    ],
)
def test_single_very_long_word_round_trips(tok, word):
    assert tok.decode(tok.encode(word)) == word


def test_char_mode_unseen_character_is_unk():
    tok = Tokenizer.train(["low lower lowest"], mode="char", num_merges=5)
    assert tok.tokens("ž") == ["<unk>", "</w>"]
    assert tok.encode("žž") == [tok.special_id("<unk>")] * 2 + [tok.alphabet.index("</w>")]


def test_save_load_round_trip(tok, tmp_path):
    path = tmp_path / "t.json"
    tok.save(path)
    again = Tokenizer.load(path)
    assert again == tok
    assert again.sha256 == tok.sha256
    assert path.read_text() == tok.to_json()
