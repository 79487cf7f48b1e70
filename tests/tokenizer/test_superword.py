"""Superword tokens (`pipeline/tokenmill/tokenizer/superword.py`, `--superword-at`).

Differential: training with a transition point learns exactly the merges of the textbook's two
stages (tests/helpers/textbook.py, `train_superword`): stage 1 on each preset's words up to the
transition, stage 2 continued on the SuperBPE reference's stage-2 pieces, ties included, with
the word limit and the colon rule, at several transition points (from bytes, inside stage 1, at
its end); encoding replays every merge over each stage-2 piece. The native stage-2 scanner
splits as the reference's regex under Hugging Face's Split "isolated" does.
"""

from __future__ import annotations

import json
import threading

import pyarrow as pa
import pytest
import textbook as tb
from hypothesis import example, given
from hypothesis import strategies as st
from test_differential import SETTINGS, UNICODE_TEXT

from tokenmill import Tokenizer, _native
from tokenmill.errors import TokenmillError
from tokenmill.formats import regex
from tokenmill.tokenizer import superword
from tokenmill.tokenizer.core import word_tables
from tokenmill.tokenizer.superword import CORE, PATTERN

PATTERNS = ["gpt2", "cl100k", "o200k"]

# Words, the spaces and punctuation stage 2 joins across or stops at, digits, line breaks,
# colons: few enough that pairs repeat and tie.
ATOMS = [
    "a", "b", "ab", "ba", "the", "of", "É", "中",
    " ", " ", " ", "  ", " \n", "\n", "\n\n", "\t",
    ",", ".", ", ", ". ", ":", ": ", "!!", " --", "/", "'s",
    "1", "12", "1234", "٣",
]  # fmt: skip
PHRASES = st.lists(st.sampled_from(ATOMS), min_size=1, max_size=12).map("".join)
SUPERWORD_TEXTS = st.lists(
    st.one_of(PHRASES, PHRASES.map(lambda p: p * 3), UNICODE_TEXT), min_size=1, max_size=4
)


def textbook_tokens(text: str, merges: list) -> list[bytes]:
    pieces = tb.superword_pieces(text)
    return [t for piece in pieces for t in tb.encode_bytes(piece.encode(), merges)]


@SETTINGS
@given(
    texts=SUPERWORD_TEXTS,
    pattern=st.sampled_from(PATTERNS),
    stage1=st.integers(0, 25),
    stage2=st.integers(0, 30),
    max_words=st.sampled_from([None, 1, 2, 4]),
)
@example(texts=["of the a, of the b: of the"], pattern="o200k", stage1=4, stage2=12, max_words=1)
@example(texts=["ab ab ab ab ab ab"], pattern="gpt2", stage1=0, stage2=10, max_words=4)
# Stage 1 merges two of a stage-2 word's pieces (" " + " ", ".  " ...): segmenting stage 2's
# words piece by piece would not be merging them whole.
@example(
    texts=[":bathe.ba:bathe.ba", ":bathe.  :bathe.  "],
    pattern="cl100k",
    stage1=39,
    stage2=10,
    max_words=None,
)
def test_merges_are_the_textbooks_two_stages(texts, pattern, stage1, stage2, max_words):
    expected = tb.train_superword(texts, pattern, stage1, stage1 + stage2, max_words)
    tok = superword.train(
        texts,
        pattern=pattern,
        num_merges=stage1 + stage2,
        superword_at=257 + stage1,  # 256 bytes, <|endoftext|>, stage 1's merges
        max_words=max_words,
    )
    assert tok.merge_pairs() == expected
    assert tok.pattern == PATTERN
    for text in texts:
        ids = tok.encode(text)
        assert [tok.token_values[i] for i in ids] == textbook_tokens(text, expected)
        assert tok.decode(ids) == text
    again = Tokenizer.from_dict(json.loads(tok.to_json()))
    assert again == tok


@SETTINGS
@given(
    texts=SUPERWORD_TEXTS,
    pattern=st.sampled_from(PATTERNS),
    stage1=st.integers(0, 30),
    stage2=st.integers(0, 10),
)
def test_stage_one_is_ordinary_training(texts, pattern, stage1, stage2):
    tok = superword.train(
        texts, pattern=pattern, num_merges=stage1 + stage2, superword_at=257 + stage1
    )
    plain = Tokenizer.train(texts, pattern=pattern, num_merges=stage1)
    assert tok.merges[: len(plain.merges)] == plain.merges


def test_at_the_transition_the_same_merges_may_split_text_otherwise():
    """Both tokenizers hold stage 1's merges alone there, but the superword
    tokenizer applies them to stage 2's pieces, which keep together what
    cl100k splits (its contraction rule takes `'d` off `f'default`): docs/superword.md."""
    texts = ["default\n"] * 10
    tok = superword.train(texts, superword_at=263, vocab_size=263)
    plain = Tokenizer.train(texts, vocab_size=263)
    assert tok.merges == plain.merges
    assert tok.tokens("f'default") == ["f", "'", "default"]
    assert plain.tokens("f'default") == ["f", "'", "d", "e", "f", "a", "u", "l", "t"]


@SETTINGS
@given(text=st.one_of(PHRASES, UNICODE_TEXT))
def test_scanner_splits_as_the_reference_regex(text):
    assert _native.pretokenize(text, PATTERN) == tb.superword_pieces(text)


def test_pattern_is_the_reference_regex_covering_the_text():
    assert PATTERN == regex.covering(CORE)
    assert CORE == tb.SUPERWORD_REGEX
    # Covering a pattern that covers already changes nothing: an exported superword
    # tokenizer.json reads back with the scanner's pattern.
    assert regex.covering(PATTERN) == PATTERN


def made(tok: Tokenizer) -> list[bytes]:
    return [tok.token_values[i] for i in tok._merge_ids]


def test_word_limit_and_colon():
    corpus = ["Answer: yes, by the way and by the way and by the way."] * 30
    tok = superword.train(corpus, vocab_size=400, superword_at=270, max_words=2)
    assert b" by the" in made(tok)
    assert all(b": " not in v for v in made(tok))
    assert max(len(v.split()) for v in made(tok)) == 2
    unlimited = superword.train(corpus, vocab_size=400, superword_at=270, max_words=None)
    assert max(len(v.split()) for v in made(unlimited)) > 4


def test_special_tokens_as_tokenizer_train_takes_them():
    corpus = ["of the cat, of the dog, of the bird"] * 10
    chosen = {"<|endoftext|>": 400, "<|pad|>": 401}
    tok = superword.train(corpus, num_merges=20, superword_at=270, special_tokens=chosen)
    assert tok.special_map == chosen and tok.vocab_size == 402
    listed = superword.train(corpus, vocab_size=290, superword_at=270, special_tokens=["<|pad|>"])
    after = 256 + len(listed.merges)  # <|endoftext|> first, as `tokenmill train` gives it
    assert listed.special_map == {"<|endoftext|>": after, "<|pad|>": after + 1}


def test_stage_two_table_may_be_made_while_stage_one_trains():
    # run merges stage 2's table on another thread while stage 1 trains: a
    # function that makes the table gives the same merges, and its error is raised.
    corpus = pa.array(["one of the best, one of the worst"] * 20 + ["of the two"] * 9)
    table, table2 = word_tables([corpus.cast(pa.large_string())], "byte", ["gpt2", PATTERN], False)
    options = {"pattern": "gpt2", "superword_at": 280, "vocab_size": 300}
    given = superword.train_superword(table["word"], table["count"], table2, **options)
    made = superword.train_superword(table["word"], table["count"], lambda: table2, **options)
    assert made.tokenizer.merges == given.tokenizer.merges and made.stage2_merges > 0

    def broken() -> pa.Table:
        raise TokenmillError("superword-counts.parquet: cannot merge the count tables")

    with pytest.raises(TokenmillError, match="cannot merge the count tables"):
        superword.train_superword(table["word"], table["count"], broken, **options)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"vocab_size": 300, "superword_at": 255}, "superword_at=255: the transition point"),
        ({"vocab_size": 300, "superword_at": 256}, "superword_at=256 is out of range: 257"),
        ({"vocab_size": 300, "superword_at": 301}, "superword_at=301 is out of range"),
        ({"vocab_size": 300, "superword_at": 280, "max_words": -1}, "want a whole"),
        ({"vocab_size": 300, "superword_at": 280, "pattern": r"\S+"}, "takes a preset"),
    ],
)
def test_options_are_checked(options, message):
    with pytest.raises(TokenmillError, match=message):
        superword.train(["a b c"], **options)


def test_stage_one_stopped_does_not_wait_for_the_stage_two_table():
    """Ctrl-C during stage 1 (its progress raises) ends training at once: the
    stage-2 table, made on a side thread meanwhile, is not waited for."""
    corpus = pa.array(["of the cat, of the dog, of the bird"] * 10, pa.large_string())
    table, table2 = word_tables([corpus], "byte", ["gpt2", PATTERN], False)
    release, made = threading.Event(), threading.Event()

    def slow_table() -> pa.Table:
        release.wait(30)  # a guard: were it waited for, the test fails, not hangs
        made.set()
        return table2

    def stopped(_: int) -> None:
        raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            options = {"pattern": "gpt2", "superword_at": 270, "vocab_size": 300}
            superword.train_superword(
                table["word"], table["count"], slow_table, **options, progress=stopped
            )
        assert not made.is_set()
    finally:
        release.set()
