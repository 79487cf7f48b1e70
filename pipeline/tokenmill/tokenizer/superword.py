"""Superword tokens (SuperBPE, Liu et al., COLM 2025): tokens that span
whitespace, such as " of the" or ", and the".

Training runs in two stages. Stage 1 is ordinary training on the word table
the pattern (a preset) splits text into, up to the transition point
`superword_at`: the vocabulary size (as `vocab_size` counts it: bytes,
merges and special tokens) at which stage 2 starts. Stage 2 continues from
stage 1's merges, with the same rule and tie-breaking, on a second word
table: the corpus split by `PATTERN`, which no longer splits at whitespace
(see `native/src/superword.rs`). Each of its words is first segmented by
stage 1's merges replayed over the whole word, as encoding will meet it,
since the tokenizer encodes with `PATTERN` too.

Stage 2 learns a merge only if its token holds at most `max_words` words
(runs of bytes other than the space) and no colon followed by a space,
the two limits of the SuperBPE reference trainer, and, as `extend` does,
never a token whose bytes a token already has. DESIGN.md ("Superword
tokens") says why; `tests/helpers/textbook.py` (`train_superword`) is the
rule, which `tests/tokenizer/test_superword.py` holds the trainer to.

>>> corpus = ["one of the best, one of the worst"] * 20
>>> tok = train(corpus, vocab_size=300, superword_at=280)
>>> tok.tokens("one of the best")
['one of the best']
>>> tok.pattern == PATTERN
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from tokenmill import _native
from tokenmill.errors import TokenmillError
from tokenmill.io.arrow import arrow_buffers, byte_view
from tokenmill.memory import release_memory
from tokenmill.tokenizer.core import Tokenizer, word_table
from tokenmill.tokenizer.ids import PATTERNS
from tokenmill.tokenizer.options import (
    SUPERWORD_MAX_WORDS,
    check_chosen_ids,
    check_count,
    check_superword,
    lay_out_specials,
    merges_to_learn,
    special_names,
)

__all__ = ["CORE", "PATTERN", "Superword", "segment", "train", "train_superword"]

# The SuperBPE reference's stage-2 regex, applied as Hugging Face's Split
# "isolated": the text between its matches is a piece too.
CORE = r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)"
# CORE as one regex whose matches cover the text (formats.regex.covering):
# what a superword tokenizer records, exports and encodes with. The native
# core splits by it without a regex engine (native/src/superword.rs).
PATTERN = rf"(?:{CORE})|(?:(?!(?:{CORE}))[\s\S])+"
BASE = 256  # byte mode's base tokens: stage 1 starts from them


@dataclass
class Superword:
    tokenizer: Tokenizer
    stage1_merges: int  # superword_at less the ids of no merge, or fewer where pairs ran out
    stage2_merges: int


def train(
    texts: Iterable[str],
    *,
    superword_at: int,
    pattern: str = "cl100k",
    vocab_size: int | None = None,
    num_merges: int | None = None,
    special_tokens: Sequence[str] | Mapping[str, int] | None = None,
    max_words: int | None = SUPERWORD_MAX_WORDS,
) -> Tokenizer:
    """A superword tokenizer trained on in-memory texts, as `Tokenizer.train`
    trains one (the same options): stage 1 on the words of `pattern` (a
    preset) until the vocabulary holds `superword_at` tokens, counted as
    `vocab_size` counts them; stage 2 from there, at most `max_words` words a
    token (None: no limit)."""
    if pattern not in PATTERNS:
        raise TokenmillError(
            f"pattern={pattern!r}: stage 1 of superword tokens takes a preset "
            f"({', '.join(PATTERNS)})"
        )
    docs = pa.array(list(texts), pa.large_string())
    table = word_table([docs], "byte", pattern, False)
    table2 = word_table([docs], "byte", PATTERN, False)
    return train_superword(
        table["word"],
        table["count"],
        table2["word"],
        table2["count"],
        pattern=pattern,
        superword_at=superword_at,
        vocab_size=vocab_size,
        num_merges=num_merges,
        special_tokens=special_tokens,
        max_words=max_words,
    ).tokenizer


def train_superword(
    words: pa.Array,
    counts: pa.Array,
    superwords: pa.Array,
    superword_counts: pa.Array,
    *,
    pattern: str,
    superword_at: int,
    vocab_size: int | None = None,
    num_merges: int | None = None,
    special_tokens: Sequence[str] | Mapping[str, int] | None = None,
    max_words: int | None = SUPERWORD_MAX_WORDS,
    progress: Callable[[int], None] | None = None,
) -> Superword:
    """A superword tokenizer: stage 1 on the word table (`words`, `counts`,
    split by `pattern`) up to `superword_at` ids, stage 2 on the table split
    by PATTERN (`superwords`, `superword_counts`), both in first-occurrence
    order, until the vocabulary holds `vocab_size` tokens (or `num_merges`
    merges are made in all, or no pair is left). Special tokens as
    `Tokenizer.train` takes them."""
    check_superword(superword_at, max_words)
    check_count(vocab_size, "vocab_size")
    check_count(num_merges, "num_merges")
    names, chosen = special_names(special_tokens, "byte")
    fixed = BASE + len(names)
    total = merges_to_learn(
        vocab_size,
        num_merges,
        fixed,
        f"the base vocabulary: {BASE} base tokens + {len(names)} special tokens = {fixed}",
    )
    if not fixed <= superword_at <= fixed + total:
        raise TokenmillError(
            f"superword_at={superword_at} is out of range: {fixed} ({BASE} bytes + "
            f"{len(names)} special tokens: stage 2 from bytes) to {fixed + total} (the "
            "trained size: no stage 2)"
        )
    if chosen:
        check_chosen_ids(chosen, BASE + total, fixed + total)
    stage1 = Tokenizer._train_from_word_arrays(
        words, counts, pattern=pattern, num_merges=superword_at - fixed, progress=progress
    )
    merges = list(stage1.merges)
    superwords = superwords.cast(pa.large_string())
    if len(superwords) and total > len(merges):
        merges += _stage2(stage1, superwords, superword_counts, total, max_words, progress)
    if chosen and len(merges) < total:
        try:  # fewer tokens than planned number fewer ids
            check_chosen_ids(chosen, BASE + len(merges), fixed + len(merges))
        except TokenmillError as e:
            raise TokenmillError(
                f"training stopped at {len(merges)} merges (no pair left): {e}"
            ) from None
    specials, special_ids = lay_out_specials(names, chosen, BASE + len(merges))
    tok = Tokenizer(
        mode="byte",
        pattern=PATTERN,
        merges=merges,
        special_tokens=specials,
        special_ids=special_ids,
    )._checked("superword tokenizer")
    return Superword(tok, len(stage1.merges), len(merges) - len(stage1.merges))


def _stage2(
    stage1: Tokenizer,
    superwords: pa.Array,
    superword_counts: pa.Array,
    total: int,
    max_words: int | None,
    progress: Callable[[int], None] | None,
) -> list[tuple[int, int]]:
    """Stage 2's merges: each word segmented whole by stage 1's merges, then
    training continued."""
    done = len(stage1.merges)
    texts = stage1._byte_vocab[: BASE + done]  # byte mode: every id's bytes
    try:
        symbols, lens = segment(superwords, stage1.merges, stage1.pattern)
        merges = _native.train_segmented(
            symbols,
            lens,
            _buffer(superword_counts.cast(pa.uint64())),
            texts,
            total - done,
            None if progress is None else lambda k: progress(done + k),
            superword=True,
            max_words=max_words,
        )
    except _native.NativeError as e:
        raise TokenmillError(f"train: {e}") from None
    release_memory()
    return list(merges)


def segment(words: pa.Array, merges: list[tuple[int, int]], pattern: str) -> tuple[bytes, bytes]:
    """Each word segmented whole by `merges` (tokenmill's numbering: merge k
    makes 256 + k), whose words `pattern` split: the ids of every word one
    after another, and how many each has (little-endian u32). The same as
    encoding each word with a tokenizer that does not split it
    (`tests/tokenizer/test_superword.py` checks), a few times faster."""
    return _native.superword_segment(*arrow_buffers(words), list(merges), pattern)


def _buffer(arr: pa.Array) -> memoryview:
    """The values buffer of a primitive array, sliced to its extent."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    width = arr.type.byte_width
    return byte_view(arr.buffers()[1][arr.offset * width : (arr.offset + len(arr)) * width])
