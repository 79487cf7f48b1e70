"""The textbook BPE algorithm, unoptimised: the oracle the fast trainer must agree with.

This is the algorithm exactly as the BPE articles this project started from write it (listed
in ``tests/tokenizer/test_articles.py``, which checks their worked examples): the PHP
``train()``/``getPairFrequencies()``/``mergePair()``/``encode()`` of the first article, the
Python ``count_adjacent_pairs``/``merge_pair_in_word``/``encode_word`` of the others:

* every merge recounts every adjacent pair of every word, weighted by the word's count;
* the winner is ``max(pairs, key=pairs.get)`` over a dict filled in scan order, so a tie goes
  to the pair met first when the words are scanned in first-occurrence order, each word left
  to right (the same as PHP's stable ``arsort`` + ``array_key_first``);
* the winner is merged everywhere, left to right, without overlap;
* training stops early when no pair is left.

Superword tokens (SuperBPE, ``train_superword``) are two runs of that loop: the first on the
words a preset splits text into, up to the transition point; the second continues from its
merges on the pieces of the SuperBPE reference's stage-2 regex, each replayed through the first
run's merges whole, learning only tokens of at most ``max_words`` words and without ": ".

Symbols are plain ``str`` (char mode) or ``bytes`` (byte mode), so, as in the articles' code,
two symbols with the same text are the same symbol. Nothing here is clever or fast on purpose.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import regex

END_OF_WORD = "</w>"
UNK = "<unk>"

# The pre-tokenization regexes, copied verbatim from tiktoken_ext/openai_public.py
# (r50k_pat_str, cl100k_base()["pat_str"], o200k_base()["pat_str"]).
PATTERNS: dict[str, str] = {
    "gpt2": (
        r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
    ),
    "cl100k": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
        r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
    "o200k": "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
}

S = TypeVar("S", str, bytes)


# --- word tables ---------------------------------------------------------------------------


def char_word_counts(texts: Iterable[str], lowercase: bool = False) -> dict[str, int]:
    """Whitespace-split words (``str.split()``) and their counts, in first-occurrence order."""
    counts: dict[str, int] = {}
    for text in texts:
        if lowercase:
            text = text.lower()
        for word in text.split():
            counts[word] = counts.get(word, 0) + 1
    return counts


def pre_tokenize(text: str, pattern: str) -> list[str]:
    """The pieces of ``text`` under a preset pattern name ("gpt2", "cl100k", "o200k")."""
    return regex.findall(PATTERNS[pattern], text)


def byte_word_counts(texts: Iterable[str], pattern: str) -> dict[bytes, int]:
    """UTF-8 pre-tokens and their counts, in first-occurrence order."""
    counts: dict[bytes, int] = {}
    for text in texts:
        for piece in pre_tokenize(text, pattern):
            word = piece.encode("utf-8")
            counts[word] = counts.get(word, 0) + 1
    return counts


# --- the algorithm -------------------------------------------------------------------------


# SuperBPE's stage-2 regex (its scripts/extend_tokenizer.sh), which Hugging Face's Split applies
# with behavior "isolated": the text between two matches is a piece as well.
SUPERWORD_REGEX = r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)"


def superword_pieces(text: str) -> list[str]:
    """The matches of SUPERWORD_REGEX and the runs of text between them, in order."""
    pieces: list[str] = []
    end = 0
    for m in regex.finditer(SUPERWORD_REGEX, text):
        if m.start() > end:
            pieces.append(text[end : m.start()])
        pieces.append(m.group())
        end = m.end()
    if end < len(text):
        pieces.append(text[end:])
    return pieces


def superword_word_counts(texts: Iterable[str]) -> dict[bytes, int]:
    """UTF-8 stage-2 pieces and their counts, in first-occurrence order."""
    counts: dict[bytes, int] = {}
    for text in texts:
        for piece in superword_pieces(text):
            word = piece.encode("utf-8")
            counts[word] = counts.get(word, 0) + 1
    return counts


def count_pairs(table: Iterable[tuple[Sequence[S], int]]) -> dict[tuple[S, S], int]:
    """Every adjacent pair of every word, weighted by the word's count, in scan order."""
    pairs: dict[tuple[S, S], int] = {}
    for symbols, count in table:
        for i in range(len(symbols) - 1):
            pair = (symbols[i], symbols[i + 1])
            pairs[pair] = pairs.get(pair, 0) + count
    return pairs


def merge_word(symbols: Sequence[S], pair: tuple[S, S]) -> tuple[S, ...]:
    """Replace every occurrence of ``pair`` in ``symbols``, left to right, without overlap."""
    left, right = pair
    merged: list[S] = []
    i = 0
    while i < len(symbols):
        if i < len(symbols) - 1 and symbols[i] == left and symbols[i + 1] == right:
            merged.append(left + right)
            i += 2
        else:
            merged.append(symbols[i])
            i += 1
    return tuple(merged)


def train_symbols(
    table: Sequence[tuple[Sequence[S], int]],
    num_merges: int,
    known: Iterable[S] | None = None,
    frozen: Iterable[S] = (),
    allowed: Callable[[S], bool] | None = None,
) -> list[tuple[S, S]]:
    """The textbook loop on a table of (symbols, count) rows in first-occurrence order.

    Extending a tokenizer (the rows are words segmented by its merges): ``known`` are the
    texts of its tokens, and a pair whose text is already a token's is never chosen (each
    merge made is one more such text); a pair holding a ``frozen`` symbol (a special token,
    char mode's unknown character) is never chosen either; nor is a pair whose text
    ``allowed`` refuses.
    """
    rows = [(tuple(symbols), count) for symbols, count in table]
    known = None if known is None else set(known)
    frozen = set(frozen)
    merges: list[tuple[S, S]] = []
    for _ in range(num_merges):
        pairs = count_pairs(rows)
        if known is not None:
            pairs = {
                p: c
                for p, c in pairs.items()
                if p[0] + p[1] not in known and p[0] not in frozen and p[1] not in frozen
            }
        if allowed is not None:
            pairs = {p: c for p, c in pairs.items() if allowed(p[0] + p[1])}
        if not pairs:
            break
        best = max(pairs, key=pairs.get)  # first maximum in insertion order
        if known is not None:
            known.add(best[0] + best[1])
        merges.append(best)
        rows = [(merge_word(symbols, best), count) for symbols, count in rows]
    return merges


def char_symbols(word: str) -> tuple[str, ...]:
    """A word as the articles start it: its characters, then ``</w>`` (one symbol)."""
    return (*word, END_OF_WORD)


def byte_symbols(word: bytes) -> tuple[bytes, ...]:
    """A word as byte-level BPE starts it: its bytes, one symbol each."""
    return tuple(word[i : i + 1] for i in range(len(word)))


def train_char(word_counts: dict[str, int], num_merges: int) -> list[tuple[str, str]]:
    """Char-mode merges: each word is its characters + ``</w>``."""
    return train_symbols([(char_symbols(w), c) for w, c in word_counts.items()], num_merges)


def train_bytes(word_counts: dict[bytes, int], num_merges: int) -> list[tuple[bytes, bytes]]:
    """Byte-mode merges: each word is its UTF-8 bytes."""
    return train_symbols([(byte_symbols(w), c) for w, c in word_counts.items()], num_merges)


def superword_allowed(token: bytes, max_words: int | None) -> bool:
    """Whether stage 2 may make ``token``: no ": " in it (the reference trainer's special case
    of the colon) and at most ``max_words`` words, the runs its ``split("Ġ")`` leaves."""
    if b": " in token:
        return False
    return max_words is None or len([w for w in token.split(b" ") if w]) <= max_words


def train_superword(
    texts: Sequence[str],
    pattern: str,
    stage1_merges: int,
    num_merges: int,
    max_words: int | None = 4,
) -> list[tuple[bytes, bytes]]:
    """Byte-mode superword merges: ``stage1_merges`` trained on the words of ``pattern``,
    then the rest (``num_merges`` in all) continued on the stage-2 pieces, each segmented by
    the first merges, never making a token's text twice."""
    stage1 = train_bytes(byte_word_counts(texts, pattern), stage1_merges)
    table = [
        (encode_bytes(word, stage1), count) for word, count in superword_word_counts(texts).items()
    ]
    known = [bytes([b]) for b in range(256)] + [a + b for a, b in stage1]
    stage2 = train_symbols(
        table,
        num_merges - len(stage1),
        known=known,
        allowed=lambda token: superword_allowed(token, max_words),
    )
    return stage1 + stage2


# --- segmentation --------------------------------------------------------------------------


def encode_symbols(symbols: Sequence[S], merges: Iterable[tuple[S, S]]) -> list[S]:
    """Replay the merges in the order they were learned (the articles' ``encode``)."""
    current = tuple(symbols)
    for pair in merges:
        current = merge_word(current, pair)
    return list(current)


def encode_char(word: str, merges: Iterable[tuple[str, str]]) -> list[str]:
    """Segment one word in char mode, e.g. ``["n", "ation</w>"]``."""
    return encode_symbols(char_symbols(word), merges)


def encode_bytes(word: bytes, merges: Iterable[tuple[bytes, bytes]]) -> list[bytes]:
    """Segment one pre-token in byte mode, as a list of byte strings."""
    return encode_symbols(byte_symbols(word), merges)


def char_vocab(word_counts: dict[str, int], merges: Iterable[tuple[str, str]]) -> list[str]:
    """The first article's ``buildTokenizer``: sorted base characters + ``</w>``, then the
    merged tokens in merge order, duplicates dropped; a token's id is its index."""
    base = sorted({ch for word in word_counts for ch in word} | {END_OF_WORD})
    vocab = list(base)
    for left, right in merges:
        if left + right not in vocab:
            vocab.append(left + right)
    return vocab
