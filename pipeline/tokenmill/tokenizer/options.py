"""Training options checked without the native core: a Config (and so every
command's option check) must not load it just to say an option is wrong."""

from __future__ import annotations

from collections.abc import Sequence

from tokenmill.errors import TokenmillError
from tokenmill.tokenizer.ids import ENDOFTEXT, MAX_VOCAB_SIZE, MODES, PATTERNS, UNK, show

# The special tokens every tokenizer of a mode has, in id order.
REQUIRED_SPECIALS = {"byte": (ENDOFTEXT,), "char": (UNK, ENDOFTEXT)}


def default_special_tokens(mode: str) -> list[str]:
    """The special tokens every tokenizer of `mode` has, in id order.

    >>> default_special_tokens("char")
    ['<unk>', '<|endoftext|>']
    """
    return list(REQUIRED_SPECIALS.get(mode, REQUIRED_SPECIALS["byte"]))


def check_options(mode: str, pattern: str) -> None:
    """The mode and, for byte mode, the training pattern (a preset: the native
    pre-tokenizers implement exactly tiktoken's regexes for these)."""
    if mode not in MODES:
        raise TokenmillError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "byte" and pattern not in PATTERNS:
        raise TokenmillError(f"--pattern must be one of {', '.join(PATTERNS)}, not {pattern!r}")


def training_special_tokens(mode: str, extra: Sequence[str] = ()) -> list[str]:
    """The special tokens of a tokenizer trained with `extra` (train's --special-token),
    in id order: the mode's required tokens not listed in `extra` first, then `extra`
    as given. Their ids follow the merges.

    >>> training_special_tokens("byte", ["<|pad|>"])
    ['<|endoftext|>', '<|pad|>']
    """
    extra = list(extra)
    for name in extra:
        if not name or name.strip() != name:
            raise TokenmillError(f"--special-token {name!r}: a special token needs a name")
        if extra.count(name) > 1:
            raise TokenmillError(f"--special-token {name!r} is given twice")
    return [t for t in default_special_tokens(mode) if t not in extra] + extra


def merges_to_learn(
    vocab_size: int | None, num_merges: int | None, fixed: int, fixed_ids: str
) -> int:
    """`num_merges`, or what `vocab_size` leaves after the `fixed` ids that are
    no merge (base tokens and special tokens, described by `fixed_ids`); the
    total must fit 32-bit ids either way."""
    if num_merges is None:
        if vocab_size is None:
            raise TokenmillError("give --vocab-size (or num_merges)")
        num_merges = vocab_size - fixed
        if num_merges < 0:
            raise TokenmillError(f"--vocab-size {vocab_size} is below {fixed_ids}")
    if fixed + num_merges > MAX_VOCAB_SIZE:
        raise TokenmillError(
            f"{fixed} base and special ids + {num_merges} merges is more than the "
            f"{MAX_VOCAB_SIZE} tokens a vocabulary of 32-bit ids holds"
        )
    return num_merges


def check_count(value: object, what: str) -> None:
    """A count given to training: None, or an int from 0 to MAX_VOCAB_SIZE."""
    if value is None:
        return
    if type(value) is bool or not isinstance(value, int) or not 0 <= value <= MAX_VOCAB_SIZE:
        raise TokenmillError(
            f"{what} {show(value)}: want a whole number from 0 to {MAX_VOCAB_SIZE} "
            "(ids are 32-bit: a vocabulary holds at most 2**32-1 tokens)"
        )
