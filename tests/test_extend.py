"""Extending a tokenizer (`pipeline/tokenizer/extend.py`, `--extend`).

Differential: a base trained on corpus A, extended on corpus B, learns exactly the merges of
the textbook algorithm (tests/textbook.py) started from B's word table segmented by A's
merges and continued, ties included, where a pair whose text is already a token's is never
learned; in byte mode (each preset pattern) and char mode (characters A never saw are
``<unk>``, which never merges). The base's ids, merges and special tokens are kept.

Real: GPT-2's public ranks file extended on sample_data/'s non-English text (tests/realtext.py
style), with its exports read back by tiktoken and Hugging Face tokenizers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
import textbook as tb
from test_differential import BYTE_TEXTS, SETTINGS, char_texts

from pipeline import Tokenizer
from pipeline.tokenizer import END_OF_WORD, UNK
from pipeline.tokenizer.core import word_table
from pipeline.tokenizer.extend import extend

ROOT = Path(__file__).resolve().parent.parent
PATTERNS = ["gpt2", "cl100k", "o200k"]


def extended(base: Tokenizer, texts: list[str], num_merges: int):
    table = word_table(
        [pa.array(texts, pa.large_string())], base.mode, base.pattern or "cl100k", base.lowercase
    )
    return extend(base, table["word"], table["count"], num_merges=num_merges)


def known_texts(tok: Tokenizer) -> list:
    specials = set(tok.special_map.values())
    return [v for i, v in enumerate(tok.token_values) if v is not None and i not in specials]


def check_kept(base: Tokenizer, tok: Tokenizer) -> None:
    """Every base id has its value, the base merges come first, special ids stay."""
    assert tok.token_values[: base.vocab_size] == base.token_values
    assert tok.merges[: len(base.merges)] == base.merges
    for name, i in base.special_map.items():
        assert tok.special_id(name) == i
    assert min(tok.merge_ids[len(base.merges) :], default=base.vocab_size) >= base.vocab_size


# --- differential ------------------------------------------------------------------------------


@SETTINGS
@given(
    a=BYTE_TEXTS,
    b=BYTE_TEXTS,
    pattern=st.sampled_from(PATTERNS),
    base_merges=st.integers(0, 30),
    num_merges=st.integers(1, 40),
)
@example(a=["aab aab ab"], b=["aaab aaab baab"], pattern="gpt2", base_merges=3, num_merges=10)
def test_byte_extend_is_textbook_continued(a, b, pattern, base_merges, num_merges):
    base = Tokenizer.train(a, pattern=pattern, num_merges=base_merges)
    pairs = base.merge_pairs()
    table = [
        (tb.encode_bytes(word, pairs), count)
        for word, count in tb.byte_word_counts(b, pattern).items()
    ]
    expected = tb.train_symbols(table, num_merges, known=known_texts(base))
    grown = extended(base, b, num_merges)
    tok = grown.tokenizer
    assert tok.merge_pairs()[len(base.merges) :] == expected
    assert grown.new_merges == len(expected)
    check_kept(base, tok)
    # Encoding replays the merges: each word of B is its textbook segmentation.
    for word in tb.byte_word_counts(b, pattern):
        ids = tok.encode(word.decode())
        assert [tok.token_values[i] for i in ids] == tb.encode_bytes(word, tok.merge_pairs())
    again = Tokenizer.from_dict(json.loads(tok.to_json()))
    assert again == tok


@SETTINGS
@given(
    a=char_texts(),
    b=char_texts(letters="abcdef"),
    base_merges=st.integers(0, 30),
    num_merges=st.integers(1, 40),
)
def test_char_extend_is_textbook_continued(a, b, base_merges, num_merges):
    base = Tokenizer.train(a, mode="char", num_merges=base_merges)
    pairs = base.merge_pairs()
    seen = set(base.alphabet)

    def symbols(word: str) -> tuple[str, ...]:
        return (*(c if c in seen else UNK for c in word), END_OF_WORD)

    table = [
        (tb.encode_symbols(symbols(word), pairs), count)
        for word, count in tb.char_word_counts(b).items()
    ]
    expected = tb.train_symbols(table, num_merges, known=known_texts(base), frozen=[UNK])
    tok = extended(base, b, num_merges).tokenizer
    assert tok.merge_pairs()[len(base.merges) :] == expected
    check_kept(base, tok)
    again = Tokenizer.from_dict(json.loads(tok.to_json()))
    assert again == tok
    assert again.encode(" ".join(b)) == tok.encode(" ".join(b))


def test_a_merge_making_a_token_that_exists_is_not_learned():
    # "ab" is a token of the base; (a, b) stays frequent in the extension's words only
    # where the base left them apart, so the extension must pass it over.
    base = Tokenizer.train(["ab"] * 5, mode="char", num_merges=2)  # a+b, ab+</w>
    assert base.merge_pairs() == [("a", "b"), ("ab", END_OF_WORD)]
    tok = extended(base, ["ab ab ab"], 5).tokenizer
    assert len(tok.merges) == len(base.merges)  # every pair of "ab</w>" is a token already
    tok = extended(base, ["abab abab"], 5).tokenizer
    new = tok.merge_pairs()[len(base.merges) :]
    assert ("ab", "ab</w>") in new and all(x + y not in known_texts(base) for x, y in new)


def test_vocab_size_is_the_total_and_new_specials_follow():
    base = Tokenizer.train(["the cat sat on the mat"] * 5, vocab_size=262)
    table = word_table([pa.array(["der Hund und die Katze"] * 5, pa.large_string())],
                       "byte", base.pattern, False)  # fmt: skip
    grown = extend(base, table["word"], table["count"], vocab_size=270,
                   special_tokens=["<|pad|>"])  # fmt: skip
    tok = grown.tokenizer
    assert tok.vocab_size == 270
    assert tok.special_map == {"<|endoftext|>": 261, "<|pad|>": 269}
    assert grown.new_merges == 270 - 262 - 1
    with pytest.raises(Exception, match="below the base"):
        extend(base, table["word"], table["count"], vocab_size=261)
