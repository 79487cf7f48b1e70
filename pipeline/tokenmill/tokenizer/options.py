"""Training options checked without the native core: a Config (and so every
command's option check) must not load it just to say an option is wrong."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import PurePath

from tokenmill.errors import TokenmillError, escaped
from tokenmill.tokenizer.ids import (
    ENDOFTEXT,
    MAX_VOCAB_SIZE,
    MODES,
    PATTERNS,
    UNK,
    check_id,
    id_limit,
    show,
    whole_number,
)

# Superword tokens (tokenizer/superword.py): the SuperBPE reference trainer's
# limit on the words of one token.
SUPERWORD_MAX_WORDS = 4

# The special tokens every tokenizer of a mode has, in id order.
REQUIRED_SPECIALS = {"byte": (ENDOFTEXT,), "char": (UNK, ENDOFTEXT)}

# Byte mode's split when none is given (train, the CLI's --pattern); char
# mode takes no pattern, and only this default goes with it unremarked.
DEFAULT_PATTERN = "cl100k"


def check_flag(name: str, value: object) -> None:
    # A string is true: eos="no" would add the token it asks to leave out;
    # 1 and 0.0 equal True and False, but are no answer to a yes-or-no option.
    # A NumPy bool is one too; if NumPy is not imported, `value` is none.
    np = sys.modules.get("numpy")
    if not (isinstance(value, bool) or (np is not None and isinstance(value, np.bool_))):
        raise TypeError(f"{name}={show(value)}: want True or False")


def default_special_tokens(mode: str) -> list[str]:
    """The special tokens every tokenizer of `mode` has, in id order.

    >>> default_special_tokens("char")
    ['<unk>', '<|endoftext|>']
    """
    return list(REQUIRED_SPECIALS.get(mode, REQUIRED_SPECIALS["byte"]))


def check_options(mode: str, pattern: str | None, *, cli: bool = False) -> None:
    """The mode and, for byte mode, the pattern's type: a preset name, a regex
    (compiled where the tokenizer is made: that needs the native core), or
    None, no split. The CLI (`cli`) trains with a preset only, and its
    messages name its options."""
    if mode not in MODES:
        if cli:
            raise TokenmillError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
        raise TokenmillError(f"mode={show(mode)}: want one of {', '.join(map(repr, MODES))}")
    if mode != "byte":
        return
    if cli and pattern not in PATTERNS:
        shown = f"'{escaped(pattern)}'" if isinstance(pattern, str) else show(pattern)
        raise TokenmillError(f"--pattern must be one of {', '.join(PATTERNS)}, not {shown}")
    if pattern is not None and (not isinstance(pattern, str) or not pattern):
        raise TokenmillError(
            f"pattern={show(pattern)}: want a preset ({', '.join(PATTERNS)}), a regex, "
            "or None (no split)"
        )
    if pattern is not None:
        check_utf8(pattern, "pattern")


def check_utf8(text: str, what: str) -> None:
    """Refuse a str that UTF-8 cannot hold (a lone surrogate, as JSON's
    "\\ud800" reads): the native core, every file and every hash of the
    tokenizer take UTF-8, and would fail far from the cause."""
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise TokenmillError(
                f"{what}: {show(text)} is not UTF-8 (it holds a lone surrogate)"
            ) from None


def refuse_bare_name(pattern: str) -> None:
    """Refuse a pattern that is a bare word but no preset ("gpt4"): a preset
    was meant, and as a regex it would match its own text only."""
    if re.fullmatch(r"\w+", pattern) and pattern not in PATTERNS:
        raise TokenmillError(
            f"pattern={pattern!r} is not a preset ({', '.join(PATTERNS)}; GPT-4's is cl100k), "
            "and as a regex it matches only its own text"
        )


def training_special_tokens(mode: str, extra: Sequence[str] = ()) -> list[str]:
    """The special tokens of a tokenizer trained with `extra` (train's --special-token),
    in id order: the mode's required tokens not listed in `extra` first, then `extra`
    as given. Their ids follow the merges.

    >>> training_special_tokens("byte", ["<|pad|>"])
    ['<|endoftext|>', '<|pad|>']
    """
    extra = list(extra)
    check_special_names(extra, "--special-token")
    for name in extra:
        # Not a library rule: a file may hold " <mask>", but on a command line
        # the space is a quoting slip.
        if name.strip() != name:
            raise TokenmillError(f"--special-token {name!r}: a name without surrounding spaces")
    return with_mode_specials(extra, mode)


def numbered(value: str) -> tuple[str, int] | None:
    """(NAME, ID) of a --special-token NAME=ID (how a .tiktoken file's special
    tokens are read), or None for a value of another form."""
    name, equals, number = value.rpartition("=")
    return (name, int(number)) if equals and name and number.isdigit() else None


def refuse_numbered(names: Sequence[str]) -> None:
    """Refuse train's --special-token NAME=ID: training would take the whole
    of it as the name (`<|pad|>=3`), its id one after the merges."""
    for value in names:
        if pair := numbered(value):
            raise TokenmillError(
                f"--special-token {value!r}: training gives special tokens the ids after "
                f"the merges; give the name alone ({pair[0]!r})"
            )


def refuse_ranks_name(path: object, what: str) -> None:
    """Refuse to write tokenmill's JSON under a .tiktoken name (save's `path`,
    train's TOKENIZER_FILE: `what`): every reader takes a file of that name
    for tiktoken's ranks, and would not read it back."""
    # The name as the readers take it: "x.tiktoken/" and "x.tiktoken/." are that file too.
    if str(path).rstrip("/.").endswith(".tiktoken") or PurePath(str(path)).name.endswith(
        ".tiktoken"
    ):
        raise TokenmillError(
            f"{what}: {path}: a .tiktoken name is read as tiktoken's ranks, and this writes "
            "tokenmill's JSON: name it .json, then `tokenmill export FILE OUT.tiktoken "
            "--format tiktoken` writes the ranks"
        )


def check_special_names(names: Sequence[object], what: str) -> None:
    """Special tokens' names, each a non-empty str (an empty one would match
    all text) that UTF-8 holds (a lone surrogate would fail every file and
    hash of the tokenizer later, far from its cause), listed once (a second
    would take an id of its own that no text encodes to); `what` names them
    in the message: the option, the argument or the file's field."""
    seen: set[str] = set()
    for name in names:
        if not isinstance(name, str) or not name:
            raise TokenmillError(f"{what}: {show(name)} is no special token's name")
        check_utf8(name, what)
        if name in seen:
            raise TokenmillError(f"{what}: {name!r} is listed twice")
        seen.add(name)


def merges_to_learn(
    vocab_size: int | None, num_merges: int | None, fixed: int, fixed_ids: str
) -> int:
    """`num_merges`, or what `vocab_size` leaves after the `fixed` ids that are
    no merge (base tokens and special tokens, described by `fixed_ids`); the
    total must fit 32-bit ids either way."""
    if num_merges is not None and vocab_size is not None:
        # Either sets the other: one would be dropped without a word.
        raise TokenmillError(
            f"give vocab_size= or num_merges=, not both ({vocab_size}, {num_merges})"
        )
    if num_merges is None:
        if vocab_size is None:
            raise TokenmillError("give vocab_size= (or num_merges=)")
        num_merges = vocab_size - fixed
        if num_merges < 0:
            raise TokenmillError(f"vocab_size={vocab_size} is below {fixed_ids}")
    if fixed + num_merges > MAX_VOCAB_SIZE:
        raise TokenmillError(
            f"{fixed} base and special ids + {num_merges} merges is more than the "
            f"{MAX_VOCAB_SIZE} tokens a vocabulary of 32-bit ids holds"
        )
    return num_merges


def check_count(value: object, name: str) -> int | None:
    """A count given to training (the argument `name`): None, or a whole
    number (`whole_number`: NumPy's too) from 0 to MAX_VOCAB_SIZE, as an int."""
    if value is None:
        return None
    count = whole_number(value)
    if count is None or not 0 <= count <= MAX_VOCAB_SIZE:
        raise TokenmillError(
            f"{name}={show(value)}: want a whole number from 0 to {MAX_VOCAB_SIZE} "
            "(ids are 32-bit: a vocabulary holds at most 2**32-1 tokens)"
        )
    return count


def special_names(
    special_tokens: Sequence[str] | Mapping[str, int] | None, mode: str
) -> tuple[list[str], dict[str, int] | None]:
    """Train's `special_tokens` as (every special token, in order; the ids
    chosen for them, or None). A list is named tokens whose ids follow the
    merges, in order; a dict chooses each token's id. The mode's own tokens
    (`<|endoftext|>`; char mode also `<unk>`) are added first when missing.

    >>> special_names({"<|endoftext|>": 100257, "<|pad|>": 100258}, "byte")
    (['<|endoftext|>', '<|pad|>'], {'<|endoftext|>': 100257, '<|pad|>': 100258})
    """
    if isinstance(special_tokens, str):
        raise TokenmillError(
            f"special_tokens={show(special_tokens)}: want a list of names or a dict of "
            "name to id, not a string"
        )
    names = list(special_tokens or [])  # a dict's keys
    check_special_names(names, "special_tokens")
    chosen = None
    if isinstance(special_tokens, Mapping):
        chosen = dict(special_tokens)
        for name, i in chosen.items():
            check_id(i, f"special_tokens: {name!r}")
        by_id: dict[int, str] = {}
        for name, i in chosen.items():
            if i in by_id:
                raise TokenmillError(
                    f"special_tokens: {by_id[i]!r} and {name!r} have the same id {i}"
                )
            by_id[i] = name
    return with_mode_specials(names, mode), chosen


def with_mode_specials(names: Sequence[str], mode: str) -> list[str]:
    """`names` after the mode's own special tokens it lacks: those take the
    first ids after the merges, whatever else a tokenizer is trained or
    grown with, so that `<|endoftext|>` has the same id from the library as
    from the command line.

    >>> with_mode_specials(["<|pad|>"], "char")
    ['<unk>', '<|endoftext|>', '<|pad|>']
    """
    return [t for t in default_special_tokens(mode) if t not in names] + list(names)


def check_chosen_ids(chosen: Mapping[str, int], first_free: int, n_tokens: int) -> None:
    """Ids chosen for special tokens lie past the base tokens and merges (ids
    below `first_free`), and below `id_limit` of the `n_tokens` tokens: ids
    may be left unused between them, but not more than tokens."""
    for name, i in chosen.items():
        if i < first_free:
            raise TokenmillError(
                f"special_tokens: {name!r} has id {i}, which a base token or merge has "
                f"(ids 0 to {first_free - 1}): give ids from {first_free}"
            )
        if i >= id_limit(n_tokens):
            raise TokenmillError(
                f"special_tokens: {name!r} has id {i}, beyond the ids a vocabulary of "
                f"{n_tokens} tokens numbers (below {id_limit(n_tokens)}: ids may be left "
                "unused, but not more than tokens)"
            )


def lay_out_specials(
    names: Sequence[str], chosen: Mapping[str, int] | None, first_free: int
) -> tuple[list[str], list[int] | None]:
    """(special tokens in id order, their ids; None where they are the ids
    right after the merges, `first_free` on, as a list gives them). Tokens
    `chosen` has no id for take the lowest ids from `first_free` that no
    chosen one has.

    >>> lay_out_specials(["<|endoftext|>", "<|pad|>"], {"<|pad|>": 300}, 290)
    (['<|endoftext|>', '<|pad|>'], [290, 300])
    >>> lay_out_specials(["<|endoftext|>"], None, 290)
    (['<|endoftext|>'], None)
    """
    if chosen is None:
        return list(names), None
    ids = dict(chosen)
    free = first_free
    for name in names:
        if name not in ids:
            while free in ids.values():
                free += 1
            ids[name] = free
            free += 1
    order = sorted(ids, key=ids.__getitem__)
    special_ids = [ids[t] for t in order]
    if special_ids == list(range(first_free, first_free + len(order))):
        return order, None
    return order, special_ids


def check_superword(
    superword_at: object, max_words: object, mode: str = "byte"
) -> tuple[int | None, int | None]:
    """Superword training's transition point (a vocabulary size, as vocab_size
    counts it: stage 1's) and word limit, checked alone, as ints; the training
    checks them against the vocabulary size."""
    if superword_at is None:
        return None, None
    if mode != "byte":
        raise TokenmillError(
            f"superword_at={superword_at}: superword tokens are for byte mode, not {mode}"
        )
    at = whole_number(superword_at)
    if at is None or not 0 <= at <= MAX_VOCAB_SIZE:
        # From 257: the 256 byte tokens and <|endoftext|>, which every byte
        # tokenizer has, come before any merge.
        raise TokenmillError(
            f"superword_at={show(superword_at)}: want a whole number from 257 to "
            f"{MAX_VOCAB_SIZE}, a vocabulary size past the byte and special tokens"
        )
    if at < 256:
        raise TokenmillError(
            f"superword_at={superword_at}: the transition point is a vocabulary size, "
            "past the 256 byte tokens"
        )
    words = None if max_words is None else whole_number(max_words)
    if max_words is not None and (words is None or not 0 <= words < 2**32):
        raise TokenmillError(
            f"max_words={show(max_words)}: want a whole number from 1, or 0 or None for no limit"
        )
    # 0 is no limit, as the CLI's --superword-max-words 0.
    return at, words or None
