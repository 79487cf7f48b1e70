"""The two kinds of base vocabulary, behind one interface (as Hugging Face's
Model trait or tiktoken's Encoding put BPE variants behind one): everything
that differs between byte mode and char mode lives here, so the Tokenizer
asks its mode instead of branching on it.

| mode   | words                      | base tokens                    | decode                  |
| ------ | -------------------------- | ------------------------------ | ----------------------- |
| `byte` | a regex (preset or custom) | the 256 bytes                  | bytes, joined, as UTF-8 |
| `char` | split at whitespace        | the characters seen, and `</w>` | `</w>` becomes a space  |

>>> mode_of("char").base_values(["a", "b", END_OF_WORD])
['a', 'b', '</w>']
>>> mode_of("byte").join([b"h", b"i"])
'hi'
>>> mode_of("char").join(mode_of("char").text_base(["h", "i", END_OF_WORD]))
'hi'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

from tokenmill import _native
from tokenmill.errors import TokenmillError
from tokenmill.tokenizer.ids import END_OF_WORD, MODES, PATTERNS, UNK, show
from tokenmill.tokenizer.options import REQUIRED_SPECIALS
from tokenmill.tokenizer.pattern_errors import pattern_message

if TYPE_CHECKING:
    import pyarrow as pa


class Tokenizer(Protocol):
    """What a mode reads of a tokenizer (`tokenmill.tokenizer.core.Tokenizer`)."""

    pattern: str
    lowercase: bool
    alphabet: list[str]
    special_tokens: list[str]
    whole_words: bool
    alphabet_ids: list[int] | None

    @property
    def _byte_vocab(self) -> list[bytes | None]: ...

    @property
    def _custom_byte_ids(self) -> list[int] | None: ...

    @property
    def _byte_ids(self) -> list[int]: ...

    @property
    def _merge_ids(self) -> list[int]: ...

    def special_id(self, token: str) -> int: ...


class Mode:
    """How text becomes base tokens and base tokens become text again."""

    name: ClassVar[str]
    # The special tokens every tokenizer of the mode has (training adds them).
    required_specials: ClassVar[tuple[str, ...]]

    def counter(self, pattern: str, lowercase: bool) -> _native.Counter:
        """The native word counter of this mode's pre-tokenizer."""
        raise NotImplementedError

    def train_alphabet(self, words: pa.Array) -> tuple[list[str] | None, int]:
        """(alphabet to train with, None for bytes; number of base tokens)."""
        raise NotImplementedError

    def trained_options(self, pattern: str, lowercase: bool) -> tuple[str, bool]:
        """(pattern, lowercase) as a tokenizer trained in this mode records them."""
        raise NotImplementedError

    def base_size(self, alphabet: Sequence[str]) -> int:
        raise NotImplementedError

    def base_values(self, alphabet: Sequence[str]) -> list:
        """The value (bytes or str) of each base id."""
        raise NotImplementedError

    def special_value(self, token: str) -> bytes | str:
        raise NotImplementedError

    def text_base(self, alphabet: Sequence[str]) -> list | None:
        """The base values as `join` takes them, or None where they are `base_values`."""
        return None

    def join(self, parts: list) -> str:
        """The text of a sequence of token values (made from `text_base`)."""
        raise NotImplementedError

    def check_fields(self, tok: Tokenizer) -> None:
        """Checks of the mode's own fields, before the vocabulary's."""

    def check_base(self, tok: Tokenizer) -> None:
        """Checks of tokenmill's own base vocabulary (not an imported one)."""

    def check_pattern(self, tok: Tokenizer) -> None:
        """Compile a custom pattern, no more (errors as TokenmillError)."""

    def encoder(self, tok: Tokenizer, merges: list, merge_ids: list[int]) -> _native.Encoder:
        """The native encoder of `tok`; `merges` (left, right) pairs making `merge_ids`."""
        raise NotImplementedError

    def file_fields(self, tok: Tokenizer) -> dict:
        """The mode's entries of a tokenizer file, in file order."""
        raise NotImplementedError


class ByteMode(Mode):
    name = "byte"
    required_specials = REQUIRED_SPECIALS["byte"]
    _BASE = tuple(bytes([b]) for b in range(256))

    def counter(self, pattern: str, lowercase: bool) -> _native.Counter:
        try:
            return _native.Counter.byte(pattern)
        except _native.NativeError as e:
            raise TokenmillError(pattern_message(str(e))) from None

    def train_alphabet(self, words: pa.Array) -> tuple[list[str] | None, int]:
        return None, 256

    def trained_options(self, pattern: str, lowercase: bool) -> tuple[str, bool]:
        return pattern, False

    def base_size(self, alphabet: Sequence[str]) -> int:
        return 256

    def base_values(self, alphabet: Sequence[str]) -> list:
        return list(self._BASE)

    def special_value(self, token: str) -> bytes:
        return token.encode()

    def join(self, parts: list) -> str:
        return b"".join(parts).decode("utf-8", errors="replace")

    def check_fields(self, tok: Tokenizer) -> None:
        if not isinstance(tok.pattern, str) or not tok.pattern:
            raise TokenmillError(f"pattern {show(tok.pattern)}: byte mode needs a pattern")
        if tok.alphabet_ids is not None:
            raise TokenmillError("alphabet_ids belong to char mode")

    def check_pattern(self, tok: Tokenizer) -> None:
        if tok.pattern not in PATTERNS:
            try:
                _native.Counter.byte(tok.pattern)  # compiles it, no more
            except _native.NativeError as e:
                raise TokenmillError(f"malformed tokenizer ({pattern_message(str(e))})") from None

    def encoder(self, tok: Tokenizer, merges: list, merge_ids: list[int]) -> _native.Encoder:
        whole_words = None
        if tok.whole_words:
            whole_words = [(v, i) for i, v in enumerate(tok._byte_vocab) if v is not None]
        try:
            return _native.Encoder.byte(
                tok.pattern,
                merges,
                merge_ids,
                byte_ids=tok._custom_byte_ids,
                whole_words=whole_words,
            )
        except _native.NativeError as e:
            raise TokenmillError(pattern_message(str(e))) from None

    def file_fields(self, tok: Tokenizer) -> dict:
        return {
            "pattern": tok.pattern,
            "pattern_regex": _native.preset_regex(tok.pattern) or tok.pattern,
        }


class CharMode(Mode):
    name = "char"
    required_specials = REQUIRED_SPECIALS["char"]

    def counter(self, pattern: str, lowercase: bool) -> _native.Counter:
        return _native.Counter.char(lowercase)

    def train_alphabet(self, words: pa.Array) -> tuple[list[str] | None, int]:
        from tokenmill.io.arrow import arrow_buffers  # PyArrow: not for loading (core.py)

        alphabet = _native.char_alphabet(*arrow_buffers(words)) if len(words) else []
        return alphabet, len(alphabet)

    def trained_options(self, pattern: str, lowercase: bool) -> tuple[str, bool]:
        return "", bool(lowercase)  # NumPy's True too, which JSON cannot hold

    def base_size(self, alphabet: Sequence[str]) -> int:
        return len(alphabet)

    def base_values(self, alphabet: Sequence[str]) -> list:
        return list(alphabet)

    def special_value(self, token: str) -> str:
        return token

    def text_base(self, alphabet: Sequence[str]) -> list:
        # A word may hold the characters "</w>" itself: only the end-of-word
        # symbol is a space, so decoding swaps it per id, never in the joined
        # text. Words hold no whitespace, so the space marks nothing else.
        return [" " if c == END_OF_WORD else c for c in alphabet]

    def join(self, parts: list) -> str:
        return "".join(parts).rstrip(" ")

    def check_base(self, tok: Tokenizer) -> None:
        alphabet = tok.alphabet

        def symbol(c: object) -> bool:
            return isinstance(c, str) and (len(c) == 1 or c == END_OF_WORD)

        if not all(map(symbol, alphabet)):
            bad = next(c for c in alphabet if not symbol(c))
            raise TokenmillError(
                f"char mode's alphabet holds {show(bad)}: want single characters and {END_OF_WORD}"
            )
        if len(set(alphabet)) != len(alphabet):
            seen: set[str] = set()
            for c in alphabet:
                if c in seen:
                    raise TokenmillError(f"char mode's alphabet lists {c!r} twice")
                seen.add(c)
        if END_OF_WORD not in alphabet:
            raise TokenmillError(f"char mode's alphabet lacks {END_OF_WORD}")
        if UNK not in tok.special_tokens:
            raise TokenmillError(f"char mode needs the special token {UNK}")

    def encoder(self, tok: Tokenizer, merges: list, merge_ids: list[int]) -> _native.Encoder:
        alphabet, ids = tok.alphabet, tok.alphabet_ids
        if ids is not None:
            # The core takes the alphabet by id; "" (no character) at the other ids.
            alphabet = [""] * (max(ids, default=-1) + 1)
            for c, i in zip(tok.alphabet, ids, strict=True):
                alphabet[i] = c
        return _native.Encoder.char(
            merges,
            merge_ids,
            alphabet,
            end_of_word=alphabet.index(END_OF_WORD),
            unk=tok.special_id(UNK),
            lowercase=tok.lowercase,
        )

    def file_fields(self, tok: Tokenizer) -> dict:
        fields = {"lowercase": tok.lowercase, "alphabet": tok.alphabet}
        if tok.alphabet_ids is not None:
            fields["alphabet_ids"] = tok.alphabet_ids
        return fields


BYTE = ByteMode()
CHAR = CharMode()
_BY_NAME: dict[str, Mode] = {BYTE.name: BYTE, CHAR.name: CHAR}
assert tuple(_BY_NAME) == MODES


def mode_of(name: object) -> Mode:
    """The Mode called `name`; TokenmillError for any other value."""
    mode = _BY_NAME.get(name) if isinstance(name, str) else None
    if mode is None:
        raise TokenmillError(f"unknown mode {show(name)}")
    return mode
