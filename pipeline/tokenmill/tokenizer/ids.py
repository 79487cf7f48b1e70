"""Names and the id space shared by every part of a tokenizer: the special
tokens tokenmill knows, the modes and patterns, and what counts as an id."""

from __future__ import annotations

import operator
from typing import TypeGuard

from tokenmill.errors import TokenmillError

ENDOFTEXT = "<|endoftext|>"
BOS = "<|bos|>"  # the token `--bos` puts before each document of packed sequences
UNK = "<unk>"
END_OF_WORD = "</w>"
MODES = ("byte", "char")
PATTERNS = ("gpt2", "cl100k", "o200k")
FORMAT = "tokenmill"
NORMALIZATIONS = ("", "NFC")
# Ids are uint32 (in the encoder and in token shards), and so is the vocabulary
# size: at most 2**32 - 1 tokens, ids 0 to 2**32 - 2 (as `--vocab-size` allows).
MAX_VOCAB_SIZE = (1 << 32) - 1


def id_limit(n_tokens: int) -> int:
    """Ids of a vocabulary of `n_tokens` tokens (special ones included) must lie
    below this. Gaps are allowed (tiktoken's cl100k leaves 15 ids unused before
    `<|endofprompt|>`), but not more unused ids than tokens (plus 1024): tables
    are allocated for the whole id space, which must stay in proportion to the
    file that describes it.

    >>> id_limit(100)
    1224
    """
    return min(2 * n_tokens + 1024, MAX_VOCAB_SIZE)


def show(value: object) -> str:
    """A value of a file for a one-line message: repr, shortened.

    >>> show("x" * 50)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..."
    """
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        # Only an int's repr raises it (more digits than sys.int_info allows).
        return f"an integer of {value.bit_length()} bits"  # type: ignore[attr-defined]
    return text if len(text) <= 40 else text[:37] + "..."


def is_id(value: object) -> TypeGuard[int]:
    """An id: an int (not a bool, float or string) that uint32 holds. (How far
    ids may reach beyond the tokens is `id_limit`'s to say.)

    >>> is_id(7), is_id(True), is_id(2**32)
    (True, False, False)
    """
    return type(value) is int and 0 <= value < 1 << 32


def whole_number(value: object) -> int | None:
    """`value` as an int if it is a whole number: an int or one of NumPy's
    integers (what `operator.index` takes), not a bool, a float or a string;
    else None.

    >>> import numpy as np
    >>> whole_number(np.int64(260)), whole_number(True), whole_number(2.0)
    (260, None, None)
    """
    if isinstance(value, bool):  # NumPy's bool has no __index__ already
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


def check_id(value: object, what: str) -> int:
    """`value` if it is an id, else a TokenmillError naming `what`."""
    if not is_id(value):
        raise TokenmillError(f"{what} has id {show(value)}: ids are integers from 0 to 2**32-1")
    return value


def check_special_ids(specials: dict, source: str | None = None) -> None:
    """Every special token's id is an id (`check_id`); the error names `source`
    (the file they came from) when given."""
    try:
        for name, i in specials.items():
            check_id(i, f"special token {name!r}")
    except TokenmillError as e:
        raise TokenmillError(f"{source}: {e}" if source else str(e)) from None
