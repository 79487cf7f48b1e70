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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa

from tokenmill import _native
from tokenmill.errors import TokenmillError
from tokenmill.interrupt import TASK_THREADS
from tokenmill.io.arrow import arrow_buffers
from tokenmill.memory import release_memory
from tokenmill.tokenizer.core import (
    Tokenizer,
    arrow_texts,
    fixed_width_buffer,
    text_batch,
    trained,
    word_tables,
)
from tokenmill.tokenizer.ids import PATTERNS
from tokenmill.tokenizer.options import (
    SUPERWORD_MAX_WORDS,
    check_flag,
    check_options,
    check_superword,
)

__all__ = ["CORE", "PATTERN", "Superword", "train", "train_superword"]

# The SuperBPE reference's stage-2 regex, applied as Hugging Face's Split
# "isolated": the text between its matches is a piece too.
CORE = r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)"
# CORE as one regex whose matches cover the text (formats.regex.covering):
# what a superword tokenizer records, exports and encodes with. The native
# core splits by it without a regex engine (native/src/superword.rs).
PATTERN = rf"(?:{CORE})|(?:(?!(?:{CORE}))[\s\S])+"
BASE = 256  # byte mode's base tokens: stage 1 starts from them
Buffers = tuple[memoryview, memoryview, int, int]  # arrow_buffers' form of a word column


@dataclass
class Superword:
    tokenizer: Tokenizer
    stage1_merges: int  # superword_at less the ids of no merge, or fewer where pairs ran out
    stage2_merges: int


def train(
    texts: Iterable[str],
    *,
    superword_at: int,
    mode: str = "byte",
    pattern: str = "cl100k",
    lowercase: bool = False,
    vocab_size: int | None = None,
    num_merges: int | None = None,
    special_tokens: Sequence[str] | Mapping[str, int] | None = None,
    max_words: int | None = SUPERWORD_MAX_WORDS,
) -> Tokenizer:
    """A superword tokenizer trained on in-memory texts, as `Tokenizer.train`
    trains one (the same options, byte mode's only: `mode="byte"`,
    `lowercase=False`): stage 1 on the words of `pattern` (a preset) until
    the vocabulary holds `superword_at` tokens, counted as `vocab_size`
    counts them; stage 2 from there, at most `max_words` words a token (0 or
    None: no limit)."""
    check_options(mode, None)  # an unknown mode named as such, not as one not byte mode
    check_flag("lowercase", lowercase)
    if mode == "byte" and lowercase:
        raise TokenmillError(
            "lowercase=True is char mode's: superword tokens are byte mode's, which keeps "
            "every byte"
        )
    if pattern not in PATTERNS:
        raise TokenmillError(
            f"pattern={pattern!r}: stage 1 of superword tokens takes a preset "
            f"({', '.join(PATTERNS)})"
        )
    check_transition(superword_at, max_words, mode)  # before the words are counted
    docs = arrow_texts(text_batch(texts, "train", ""))
    table, table2 = word_tables([docs], "byte", [pattern, PATTERN], False)
    return train_superword(
        table["word"],
        table["count"],
        table2,
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
    table2: pa.Table | Callable[[], pa.Table],
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
    split by `pattern`) up to `superword_at` ids, stage 2 on `table2` (word
    and count columns, split by PATTERN), both in first-occurrence order,
    until the vocabulary holds `vocab_size` tokens (or `num_merges` merges
    are made in all, or no pair is left). Special tokens as
    `Tokenizer.train` takes them.

    `table2` may be a function that makes the table: it is called on
    another thread while stage 1 trains (stage 1 is mostly one merge after
    another, on one core), and so is splitting its words into stage 1's."""
    superword_at, max_words = check_transition(superword_at, max_words)
    check_options("byte", pattern)
    stage1_merges = 0
    buffers = arrow_buffers(words.cast(pa.large_string()))
    counts_buffer = fixed_width_buffer(counts.cast(pa.uint64()))

    def check_range(fixed: int, total: int) -> None:
        if not fixed <= superword_at <= fixed + total:
            specials = fixed - BASE
            raise TokenmillError(
                f"superword_at={superword_at} is out of range: {fixed} ({BASE} bytes + "
                f"{specials} special token{'' if specials == 1 else 's'}: stage 2 from bytes) "
                f"to {fixed + total} (the trained size: no stage 2)"
            )

    def stage2_words() -> tuple[Buffers, memoryview, _native.SuperwordSplit]:
        table = table2() if callable(table2) else table2
        buffers2 = arrow_buffers(table["word"].cast(pa.large_string()))
        split = _native.superword_split(*buffers, pattern, *buffers2)
        return buffers2, fixed_width_buffer(table["count"].cast(pa.uint64())), split

    def learn(total: int, fixed: int) -> list[tuple[int, int]]:
        nonlocal stage1_merges
        # A task thread's name: a run stopped by a signal leaves without
        # joining it (interrupt.exit_interrupted).
        pool = ThreadPoolExecutor(1, thread_name_prefix=f"{TASK_THREADS}-superword-table")
        try:
            try:
                side = pool.submit(stage2_words)
                stage1 = _native.superword_stage1(
                    *buffers, counts_buffer, superword_at - fixed, progress
                )
                buffers2, counts2, split = side.result()
            finally:
                # Stage 1 stopped by Ctrl-C ends at once: waiting for the side's
                # table would hold the signal for as long as that takes.
                pool.shutdown(wait=False, cancel_futures=True)
            merges, stage1_merges = _native.superword_stage2(
                stage1, split, *buffers, *buffers2, counts2, total, max_words, progress
            )
        except _native.NativeError as e:  # a word table beyond what training can hold
            raise TokenmillError(f"train: {e}") from None
        release_memory()
        return merges

    tok = trained(
        learn,
        mode="byte",
        base=BASE,
        vocab_size=vocab_size,
        num_merges=num_merges,
        special_tokens=special_tokens,
        check_range=check_range,
        pattern=PATTERN,
    )._checked("superword tokenizer")
    return Superword(tok, stage1_merges, len(tok.merges) - stage1_merges)


def check_transition(
    superword_at: object, max_words: object, mode: str = "byte"
) -> tuple[int, int | None]:
    """`superword_at` and `max_words` as training takes them, as ints:
    check_superword, for which a None transition point is no superword tokens."""
    if superword_at is None:
        raise TokenmillError(
            "superword_at=None: want the transition point, a vocabulary size past the 256 "
            "byte tokens"
        )
    at, words = check_superword(superword_at, max_words, mode)
    assert at is not None  # superword_at is not None
    return at, words
