"""Extend a tokenizer: keep every id of a base tokenizer and learn new merges
on a corpus, on top of the base's.

Each distinct word of the corpus's word table is first segmented by the base
(encoded with it, exactly as encoding will meet it); training then continues
from those segmentations with the same rule and tie-breaking as from bytes
(`tests/textbook.py`, started from the segmented table). The result keeps
the base's ids, merges (in order), pattern, normalization and special tokens
with their ids; merge k of the extension gets id `base.vocab_size + k`, and
new special tokens follow the new merges.

A merge whose bytes (char mode: text) some token already has is never
learned (`native/src/extend.rs` says why): every token keeps one text, so an
extended byte-level tokenizer exports to tokenizer.json and .tiktoken as its
base does. Special tokens never merge; in char mode a character the base
never saw is `<unk>`, which does not merge either, unless `extend_alphabet`
gives it an id (after the base's, before the new merges).

>>> from tokenmill import Tokenizer
>>> base = Tokenizer.train(["the cat sat on the mat"] * 10, vocab_size=270)
>>> table = word_table([pa.array(["der Hund und die Katze"] * 10, pa.large_string())],
...                    "byte", base.pattern, False)
>>> grown = extend(base, table["word"], table["count"], vocab_size=280)
>>> base.vocab_size, grown.tokenizer.vocab_size, grown.new_merges
(269, 280, 11)
>>> grown.tokenizer.eos_id == base.eos_id == 268
True
>>> grown.tokenizer.encode("the cat")[:2] == base.encode("the cat")[:2]
True
>>> grown.bytes_per_token > grown.base_bytes_per_token
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill import _native
from tokenmill.errors import TokenmillError
from tokenmill.io.arrow import arrow_buffers, byte_view
from tokenmill.memory import release_memory
from tokenmill.tokenizer.core import Tokenizer, word_table
from tokenmill.tokenizer.options import check_count, merges_to_learn, special_names

__all__ = ["Extension", "extend", "table_bytes_per_token", "word_table"]  # word_table: doctest


@dataclass
class Extension:
    tokenizer: Tokenizer
    new_merges: int
    # On the word table trained on (each word weighted by its count): UTF-8
    # bytes per token, specials not counted, as `stats` counts them.
    base_bytes_per_token: float | None
    bytes_per_token: float | None


def check_base(base: Tokenizer) -> None:
    """What extending needs of a base: words counted as the base splits them."""
    if base.normalization:
        raise TokenmillError(
            f"--extend: the base applies {base.normalization} normalization, which counting "
            "words does not (extend a tokenizer without a normalizer)"
        )


def extend(
    base: Tokenizer,
    words: pa.Array,
    counts: pa.Array,
    *,
    vocab_size: int | None = None,
    num_merges: int | None = None,
    special_tokens: Sequence[str] | None = None,
    extend_alphabet: bool = False,
    progress: Callable[[int], None] | None = None,
) -> Extension:
    """`base` grown with merges learned on the word table (`words`, in
    first-occurrence order, and their `counts`) to `vocab_size` ids in all (or
    exactly `num_merges` new merges, or until no pair is left). Special tokens
    the base lacks (of `special_tokens` and the mode's own) get ids after the
    new merges. Char mode: characters the base never saw are `<unk>`, unless
    `extend_alphabet` gives them ids (after the base's, before the new merges)."""
    if not isinstance(base, Tokenizer):
        raise TypeError(f"extend: base= is {type(base).__name__}, not a Tokenizer")
    for name, given in (("words", words), ("counts", counts)):
        if not isinstance(given, pa.Array | pa.ChunkedArray):
            raise TypeError(f"extend: {name}= is {type(given).__name__}, not an Arrow array")
    if isinstance(special_tokens, Mapping):
        raise TypeError("extend: special_tokens= names tokens; their ids follow the new merges")
    special_tokens, _ = special_names(special_tokens, base.mode)
    check_base(base)
    if extend_alphabet and base.mode != "char":
        raise TokenmillError("--extend-alphabet is for char mode (byte mode has every byte)")
    vocab_size = check_count(vocab_size, "vocab_size")
    num_merges = check_count(num_merges, "num_merges")
    words = words.cast(pa.large_string())
    counts = counts.cast(pa.uint64())
    new_specials = [t for t in special_tokens if t not in base.special_tokens]
    if extend_alphabet:
        base = _with_characters(base, words)
    size = base.vocab_size
    num_merges = merges_to_learn(
        vocab_size,
        num_merges,
        size + len(new_specials),
        f"the base's {size} ids"
        + (f" + {len(new_specials)} new special tokens" if new_specials else ""),
    )
    ids, lens = base.encode_arrow(words, eos=False)
    texts = token_texts(base)
    merges: list[tuple[int, int]] = []
    if len(words) and num_merges:
        try:
            merges = _native.train_segmented(
                _buffer(ids.values.cast(pa.uint32())),
                _buffer(lens),
                _buffer(counts),
                texts,
                num_merges,
                progress,
            )
        except _native.NativeError as e:
            raise TokenmillError(f"train: {e}") from None
        release_memory()
    tok = _grown(base, list(merges), new_specials)
    return Extension(
        tokenizer=tok,
        new_merges=len(merges),
        base_bytes_per_token=_bytes_per_token(words, counts, lens),
        bytes_per_token=table_bytes_per_token(tok, words, counts),
    )


def table_bytes_per_token(tok: Tokenizer, words: pa.Array, counts: pa.Array) -> float | None:
    """UTF-8 bytes per token of a word table encoded with `tok`, each word
    weighted by its count (byte mode: the corpus's bytes per text token)."""
    words = words.cast(pa.large_string())
    if not len(words):
        return None
    return _bytes_per_token(words, counts, tok.encode_arrow(words, eos=False)[1])


def token_texts(tok: Tokenizer) -> list[bytes | None]:
    """Each id's bytes (char mode: its string's UTF-8), None for a special
    token or a gap: the texts new merges must not repeat."""
    specials = set(tok.special_map.values())
    return [
        None if v is None or i in specials else v if isinstance(v, bytes) else v.encode()
        for i, v in enumerate(tok.token_values)
    ]


def _with_characters(base: Tokenizer, words: pa.Array) -> Tokenizer:
    """A char-mode `base` with the characters of `words` it lacks added, with
    ids after its own (sorted, as training sorts an alphabet)."""
    if not len(words):
        return base
    seen = set(base.alphabet)
    new = [c for c in _native.char_alphabet(*arrow_buffers(words)) if c not in seen]
    if not new:
        return base
    size = base.vocab_size
    ids = base.alphabet_ids or list(range(len(base.alphabet)))
    return Tokenizer(
        mode="char",
        pattern=base.pattern,
        lowercase=base.lowercase,
        alphabet=list(base.alphabet) + new,
        alphabet_ids=list(ids) + list(range(size, size + len(new))),
        merges=list(base.merges),
        special_tokens=list(base.special_tokens),
        special_ids=[base.special_id(t) for t in base.special_tokens],
    )._checked("extended alphabet")


def _grown(base: Tokenizer, new: list[tuple[int, int]], new_specials: list[str]) -> Tokenizer:
    """The base's tables with the new merges (ids from base.vocab_size on) and
    new special tokens after them."""
    size = base.vocab_size
    names = list(base.special_tokens) + new_specials
    after = size + len(new)
    ids = [base.special_id(t) for t in base.special_tokens]
    ids += list(range(after, after + len(new_specials)))
    merges = list(base.merges) + new
    if base.mode == "char":
        first = len(base.alphabet) + len(merges)
        default = list(range(first, first + len(names)))
        return Tokenizer(
            mode="char",
            pattern=base.pattern,
            lowercase=base.lowercase,
            alphabet=list(base.alphabet),
            merges=merges,
            special_tokens=names,
            special_ids=None if ids == default and base.alphabet_ids is None else ids,
            alphabet_ids=base.alphabet_ids,
        )._checked("extended tokenizer")
    vocab = list(base._byte_vocab) + [None] * (size - len(base._byte_vocab))
    for a, b in new:
        # Not None: merges join the ids of words, which all have bytes.
        vocab.append(vocab[a] + vocab[b])  # type: ignore[operator]
    return Tokenizer(
        mode="byte",
        pattern=base.pattern,
        merges=merges,
        special_tokens=names,
        vocab=vocab,
        special_ids=ids,
        whole_words=base.whole_words,
        normalization=base.normalization,
    )._checked("extended tokenizer")


def _bytes_per_token(words: pa.Array, counts: pa.Array, lens: pa.Array) -> float | None:
    """Bytes over tokens of a word table whose words encode to `lens` tokens."""
    weights = counts.cast(pa.int64()).to_numpy(zero_copy_only=False)
    n_bytes = int(np.dot(weights, pc.binary_length(words).cast(pa.int64()).to_numpy()))
    tokens = int(np.dot(weights, lens.cast(pa.int64()).to_numpy(zero_copy_only=False)))
    return round(n_bytes / tokens, 4) if tokens else None


def _buffer(arr: pa.Array) -> memoryview:
    """The values buffer of a primitive array, sliced to its extent."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    width = arr.type.byte_width
    return byte_view(arr.buffers()[1][arr.offset * width : (arr.offset + len(arr)) * width])
