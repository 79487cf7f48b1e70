"""Differential tests: the real trainer must learn exactly the textbook oracle's merges.

Random small corpora (words from alphabets of one to four letters, so ties are everywhere,
words repeated with random counts) go through ``tokenmill.tokenizer.Tokenizer`` and through
``helpers/textbook.py``; the merge lists must be equal, pair for pair and in order, in char mode
(with and without lowercasing) and in byte mode under each preset pattern, including
arbitrary Unicode text. Segmentations are compared too.
"""

from __future__ import annotations

import pytest
import textbook as tb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PATTERNS = ["gpt2", "cl100k", "o200k"]

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def tokenizer_cls():
    # Imported here, so that an import failure fails the tests that need it and no others.
    from tokenmill.tokenizer import Tokenizer

    return Tokenizer


def merges_of(tok) -> list:
    # Compare as plain lists of plain tuples, whatever sequence types the binding returns.
    return [tuple(pair) for pair in tok.merge_pairs()]


# --- strategies --------------------------------------------------------------------------------

SEPARATORS = [" ", " ", " ", "  ", "\n", "\t", " \n ", "\r\n"]
# Whitespace str.split() also splits on, beyond the usual ASCII: the information separators
# U+001C..U+001F, NEL, NBSP, the line/paragraph separators, ideographic space, VT, FF.
EXOTIC_SEPARATORS = ["\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0", "\u2028", "\u2029"]
EXOTIC_SEPARATORS += ["\u3000", "\x0b", "\x0c", "\u2003", "\u1680", "\u202f"]
# Not whitespace for str.split(), so part of a word: zero-width space, Mongolian vowel sep.
NOT_SEPARATORS = ["\u200b", "\u180e"]

CHAR_LETTERS = "abcde"
# Cased letters, including ones whose lowercase is special: Σ (final sigma: σ or ς),
# İ (lowercases to two code points, i + U+0307), ẞ (to ß), and the already-lower ß.
CASED_LETTERS = "aAbBéÉΣσİẞß"

BYTE_ATOMS = [
    "a", "b", "c", "A", "B", "é", "ж", "中", "😀", "1", "2", "3", "1234",
    " ", " ", " ", "  ", "\n", "\n\n", "\r\n", "\t", " \n",
    "'", "'s", "'ll", "'T", "'RE", ".", "!", "/", "-", "ab", "ba", "aa",
]  # fmt: skip


@st.composite
def char_texts(draw, letters=CHAR_LETTERS, separators=tuple(SEPARATORS)):
    """1-4 documents of words drawn from a small pool over a 1-4 letter alphabet."""
    alphabet = draw(st.lists(st.sampled_from(letters), min_size=1, max_size=4, unique=True))
    pool = draw(
        st.lists(st.text(alphabet=alphabet, min_size=1, max_size=6), min_size=1, max_size=8)
    )
    docs = []
    for _ in range(draw(st.integers(1, 4))):
        words = draw(st.lists(st.sampled_from(pool), min_size=0, max_size=12))
        parts = [draw(st.sampled_from(["", *separators]))]
        for word in words:
            parts += [word, draw(st.sampled_from(separators))]
        docs.append("".join(parts))
    if not any(doc.split() for doc in docs):
        docs.append(pool[0])
    return docs


@st.composite
def word_tables(draw, words_strategy):
    """Distinct words in first-occurrence order, with counts."""
    words = draw(st.lists(words_strategy, min_size=1, max_size=10, unique=True))
    counts = draw(
        st.lists(
            st.one_of(st.integers(1, 5), st.integers(1, 1000)),
            min_size=len(words),
            max_size=len(words),
        )
    )
    return words, counts


@st.composite
def small_alphabet_words(draw):
    alphabet = draw(st.lists(st.sampled_from(CHAR_LETTERS), min_size=1, max_size=3, unique=True))
    return draw(st.text(alphabet=alphabet, min_size=1, max_size=8))


SMALL_BYTE_TEXT = st.lists(st.sampled_from(BYTE_ATOMS), min_size=1, max_size=16).map("".join)
UNICODE_TEXT = st.text(
    st.characters(exclude_categories=("Cs", "Cn")), min_size=1, max_size=30
)  # Cn: code points unassigned in this Python's Unicode, whose properties may change later
BYTE_TEXTS = st.lists(st.one_of(SMALL_BYTE_TEXT, UNICODE_TEXT), min_size=1, max_size=4)
NUM_MERGES = st.integers(1, 40)


# --- char mode ---------------------------------------------------------------------------------


@SETTINGS
@given(texts=char_texts(), num_merges=NUM_MERGES)
def test_char_merges(tokenizer_cls, texts, num_merges):
    expected = tb.train_char(tb.char_word_counts(texts), num_merges)
    tok = tokenizer_cls.train(texts, mode="char", num_merges=num_merges)
    assert merges_of(tok) == expected


@SETTINGS
@given(texts=char_texts(letters=CASED_LETTERS), num_merges=NUM_MERGES)
def test_char_merges_lowercase(tokenizer_cls, texts, num_merges):
    expected = tb.train_char(tb.char_word_counts(texts, lowercase=True), num_merges)
    tok = tokenizer_cls.train(texts, mode="char", lowercase=True, num_merges=num_merges)
    assert merges_of(tok) == expected


@SETTINGS
@given(texts=char_texts(letters=CASED_LETTERS), num_merges=NUM_MERGES)
def test_char_merges_cased_without_lowercase(tokenizer_cls, texts, num_merges):
    expected = tb.train_char(tb.char_word_counts(texts), num_merges)
    tok = tokenizer_cls.train(texts, mode="char", num_merges=num_merges)
    assert merges_of(tok) == expected


@SETTINGS
@given(
    texts=char_texts(
        letters=CHAR_LETTERS[:3] + "".join(NOT_SEPARATORS),
        separators=(" ", *EXOTIC_SEPARATORS),
    ),
    num_merges=NUM_MERGES,
)
def test_char_whitespace_is_str_split(tokenizer_cls, texts, num_merges):
    expected = tb.train_char(tb.char_word_counts(texts), num_merges)
    tok = tokenizer_cls.train(texts, mode="char", num_merges=num_merges)
    assert merges_of(tok) == expected


@SETTINGS
@given(table=word_tables(small_alphabet_words()), num_merges=NUM_MERGES)
def test_char_merges_from_word_counts(tokenizer_cls, table, num_merges):
    words, counts = table
    expected = tb.train_char(dict(zip(words, counts, strict=True)), num_merges)
    tok = tokenizer_cls.train_from_word_counts(words, counts, mode="char", num_merges=num_merges)
    assert merges_of(tok) == expected


@SETTINGS
@given(texts=char_texts(), num_merges=NUM_MERGES)
def test_char_word_counts_agree_with_text(tokenizer_cls, texts, num_merges):
    # The word table of the texts, handed over directly, trains the same merges.
    counts = tb.char_word_counts(texts)
    from_text = tokenizer_cls.train(texts, mode="char", num_merges=num_merges)
    from_counts = tokenizer_cls.train_from_word_counts(
        list(counts), list(counts.values()), mode="char", num_merges=num_merges
    )
    assert merges_of(from_counts) == merges_of(from_text)


@SETTINGS
@given(texts=char_texts(), num_merges=NUM_MERGES)
def test_char_documents_do_not_matter(tokenizer_cls, texts, num_merges):
    # Only the word order matters, not how the words are cut into documents.
    split = tokenizer_cls.train(texts, mode="char", num_merges=num_merges)
    joined = tokenizer_cls.train(["\n".join(texts)], mode="char", num_merges=num_merges)
    assert merges_of(split) == merges_of(joined)


@SETTINGS
@given(texts=char_texts(), num_merges=NUM_MERGES)
def test_char_segmentation(tokenizer_cls, texts, num_merges):
    # tokens() is the articles' encode (replay the merges in order) on each word, and the
    # second article's decode (a token ending in </w> ends a word; words joined by a space).
    tok = tokenizer_cls.train(texts, mode="char", num_merges=num_merges)
    merges = tb.train_char(tb.char_word_counts(texts), num_merges)
    for text in texts:
        expected = [t for word in text.split() for t in tb.encode_char(word, merges)]
        assert tok.tokens(text) == expected
        assert tok.decode(tok.encode(text)) == " ".join(text.split())


# --- the oracle's tie rule, checked against DESIGN.md's wording ------------------------------


def first_met_best_pair(rows):
    """DESIGN.md's rule written out the long way: the highest count, and among equal counts
    the pair whose first occurrence (word index, position in the word) comes first."""
    counts: dict = {}
    first: dict = {}
    for w, (symbols, count) in enumerate(rows):
        for i in range(len(symbols) - 1):
            pair = (symbols[i], symbols[i + 1])
            counts[pair] = counts.get(pair, 0) + count
            first.setdefault(pair, (w, i))
    return min(counts, key=lambda p: (-counts[p], first[p])) if counts else None


@SETTINGS
@given(table=word_tables(small_alphabet_words()), num_merges=NUM_MERGES)
def test_textbook_tie_rule_is_first_met(table, num_merges):
    words, counts = table
    rows = [(tb.char_symbols(w), c) for w, c in zip(words, counts, strict=True)]
    merges = tb.train_char(dict(zip(words, counts, strict=True)), num_merges)
    for pair in merges:
        assert pair == first_met_best_pair(rows)
        rows = [(tb.merge_word(s, pair), c) for s, c in rows]
    if len(merges) < num_merges:
        assert first_met_best_pair(rows) is None


# --- byte mode ---------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", PATTERNS)
@SETTINGS
@given(texts=BYTE_TEXTS, num_merges=NUM_MERGES)
def test_byte_merges(tokenizer_cls, pattern, texts, num_merges):
    expected = tb.train_bytes(tb.byte_word_counts(texts, pattern), num_merges)
    tok = tokenizer_cls.train(texts, mode="byte", pattern=pattern, num_merges=num_merges)
    assert merges_of(tok) == expected


@pytest.mark.parametrize("pattern", PATTERNS)
@SETTINGS
@given(table=word_tables(st.one_of(small_alphabet_words(), UNICODE_TEXT)), num_merges=NUM_MERGES)
def test_byte_merges_from_word_counts(tokenizer_cls, pattern, table, num_merges):
    # The words are taken as given (already pre-tokenized): the pattern must not re-split them.
    words, counts = table
    expected = tb.train_bytes(
        {w.encode("utf-8"): c for w, c in zip(words, counts, strict=True)}, num_merges
    )
    tok = tokenizer_cls.train_from_word_counts(
        words, counts, mode="byte", pattern=pattern, num_merges=num_merges
    )
    assert merges_of(tok) == expected


@pytest.mark.parametrize("pattern", PATTERNS)
@SETTINGS
@given(texts=BYTE_TEXTS, num_merges=NUM_MERGES)
def test_byte_segmentation(tokenizer_cls, pattern, texts, num_merges):
    check_byte_segmentation(tokenizer_cls, pattern, texts, num_merges)


# A few multi-byte characters, often repeated: merges make them tokens, and
# also tokens that hold part of one with its neighbours, which decide where
# the encoder may start a character as one symbol (native/src/atoms.rs).
REPEATED_MULTIBYTE = st.lists(
    st.text(st.sampled_from("аоніп的是中αβệ😀ab .\n"), min_size=1, max_size=60),
    min_size=1,
    max_size=6,
)


@pytest.mark.parametrize("pattern", PATTERNS)
@SETTINGS
@given(texts=REPEATED_MULTIBYTE, num_merges=st.integers(1, 150))
def test_byte_segmentation_of_repeated_multibyte_characters(
    tokenizer_cls, pattern, texts, num_merges
):
    check_byte_segmentation(tokenizer_cls, pattern, texts, num_merges)


def check_byte_segmentation(tokenizer_cls, pattern, texts, num_merges):
    # encode() is the textbook segmentation of each pre-token, with ids per DESIGN.md
    # (byte value for a base token, 256 + k for merge k), and decode() inverts it.
    tok = tokenizer_cls.train(texts, mode="byte", pattern=pattern, num_merges=num_merges)
    merges = tb.train_bytes(tb.byte_word_counts(texts, pattern), num_merges)
    vocab = [bytes([i]) for i in range(256)] + [a + b for a, b in merges]
    for text in texts:
        expected = [
            t for piece in tb.pre_tokenize(text, pattern)
            for t in tb.encode_bytes(piece.encode("utf-8"), merges)
        ]  # fmt: skip
        ids = tok.encode(text)
        assert all(0 <= i < len(vocab) for i in ids), ids
        assert [vocab[i] for i in ids] == expected
        assert tok.decode(ids) == text
