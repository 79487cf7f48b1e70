"""The Tokenizer: a trained BPE vocabulary with encode, decode, save and load.

Ids: byte mode has the 256 byte values as base tokens; char mode has the
characters seen in training plus `</w>`, sorted. Merge k gets id
base + k. Special tokens follow the merges.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from pipeline import _native
from pipeline.errors import TokenmillError
from pipeline.io.writers import arrow_buffers, atomic_path, byte_view

ENDOFTEXT = "<|endoftext|>"
UNK = "<unk>"
END_OF_WORD = "</w>"
MODES = ("byte", "char")
PATTERNS = ("gpt2", "cl100k", "o200k")
FORMAT = "tokenmill"


def default_special_tokens(mode: str) -> list[str]:
    return [UNK, ENDOFTEXT] if mode == "char" else [ENDOFTEXT]


@dataclass
class Tokenizer:
    mode: str = "byte"
    pattern: str = "cl100k"
    lowercase: bool = False
    alphabet: list[str] = field(default_factory=list)  # char mode's base vocabulary
    merges: list[tuple[int, int]] = field(default_factory=list)
    special_tokens: list[str] = field(default_factory=list)

    # ---- construction -------------------------------------------------

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        *,
        mode: str = "byte",
        pattern: str = "cl100k",
        lowercase: bool = False,
        vocab_size: int | None = None,
        num_merges: int | None = None,
        special_tokens: Sequence[str] | None = None,
    ) -> Tokenizer:
        """Train on in-memory texts (the whole pipeline in one process)."""
        table = word_table([pa.array(list(texts), pa.large_string())], mode, pattern, lowercase)
        return cls.train_from_word_arrays(
            table["word"],
            table["count"],
            mode=mode,
            pattern=pattern,
            lowercase=lowercase,
            vocab_size=vocab_size,
            num_merges=num_merges,
            special_tokens=special_tokens,
        )

    @classmethod
    def train_from_word_counts(
        cls, words: Sequence[str], counts: Sequence[int], **options
    ) -> Tokenizer:
        """Train on a word table whose words are in first-occurrence order."""
        return cls.train_from_word_arrays(
            pa.array(words, pa.large_string()), pa.array(counts, pa.uint64()), **options
        )

    @classmethod
    def train_from_word_arrays(
        cls,
        words: pa.Array,
        counts: pa.Array,
        *,
        mode: str = "byte",
        pattern: str = "cl100k",
        lowercase: bool = False,
        vocab_size: int | None = None,
        num_merges: int | None = None,
        special_tokens: Sequence[str] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> Tokenizer:
        """Train on Arrow arrays (large_string words, uint64 counts)."""
        check_options(mode, pattern)
        specials = list(special_tokens) if special_tokens is not None else []
        for required in default_special_tokens(mode):
            if required not in specials:
                specials.append(required)
        words = words.cast(pa.large_string())
        counts = counts.cast(pa.uint64())
        if mode == "char":
            alphabet = _native.char_alphabet(*arrow_buffers(words)) if len(words) else []
            base = len(alphabet)
        else:
            alphabet, base = None, 256
        if num_merges is None:
            if vocab_size is None:
                raise TokenmillError("give --vocab-size (or num_merges)")
            num_merges = vocab_size - base - len(specials)
            if num_merges < 0:
                raise TokenmillError(
                    f"--vocab-size {vocab_size} is below the base vocabulary: {base} base "
                    f"tokens + {len(specials)} special tokens = {base + len(specials)}"
                )
        if len(words):
            merges = _native.train_merges(
                *arrow_buffers(words),
                _fixed_width_buffer(counts),
                alphabet,
                num_merges,
                progress,
            )
        else:
            merges = []
        return cls(
            mode=mode,
            pattern=pattern if mode == "byte" else "",
            lowercase=lowercase if mode == "char" else False,
            alphabet=alphabet or [],
            merges=[tuple(m) for m in merges],
            special_tokens=specials,
        )

    # ---- vocabulary -------------------------------------------------

    @property
    def base_size(self) -> int:
        return len(self.alphabet) if self.mode == "char" else 256

    @property
    def vocab_size(self) -> int:
        return self.base_size + len(self.merges) + len(self.special_tokens)

    def special_id(self, token: str) -> int:
        try:
            return self.base_size + len(self.merges) + self.special_tokens.index(token)
        except ValueError:
            raise TokenmillError(f"tokenizer has no special token {token!r}") from None

    @property
    def eos_id(self) -> int:
        return self.special_id(ENDOFTEXT)

    @cached_property
    def token_values(self) -> list[bytes] | list[str]:
        """Each id's bytes (byte mode) or string (char mode), specials as their text."""
        if self.mode == "char":
            values: list = list(self.alphabet)
        else:
            values = [bytes([b]) for b in range(256)]
        for a, b in self.merges:
            values.append(values[a] + values[b])
        for token in self.special_tokens:
            values.append(token if self.mode == "char" else token.encode())
        return values

    def merge_pairs(self) -> list[tuple]:
        """Merges as pairs of token values, in rank order."""
        v = self.token_values
        return [(v[a], v[b]) for a, b in self.merges]

    # ---- encoding ---------------------------------------------------

    @cached_property
    def _encoder(self) -> _native.Encoder:
        base = self.base_size
        merges = [(a, b, base + k) for k, (a, b) in enumerate(self.merges)]
        if self.mode == "char":
            return _native.Encoder(
                "char",
                "",
                self.lowercase,
                merges,
                self.alphabet,
                self.alphabet.index(END_OF_WORD),
                self.special_id(UNK),
            )
        return _native.Encoder("byte", self.pattern, False, merges)

    @property
    def wide_ids(self) -> bool:
        """Whether ids need 32 bits (else they fit uint16)."""
        return self.vocab_size > 1 << 16

    def encode(self, text: str, *, eos: bool = False) -> list[int]:
        return self._encoder.encode(text, self.eos_id if eos else None)

    def encode_arrow(self, docs: pa.Array, *, eos: bool = True) -> tuple[pa.Array, pa.Array]:
        """Encode a large_string array: (ids as list<uint16|uint32>, n_tokens uint32)."""
        n = len(docs)
        id_type = pa.uint32() if self.wide_ids else pa.uint16()
        if n == 0:
            return pa.array([], pa.list_(id_type)), pa.array([], pa.uint32())
        ids, lens = self._encoder.encode_batch(
            *arrow_buffers(docs), self.eos_id if eos else None, self.wide_ids
        )
        n_tokens = pa.Array.from_buffers(pa.uint32(), n, [None, pa.py_buffer(lens)])
        flat = pa.Array.from_buffers(
            id_type, len(ids) // id_type.byte_width, [None, pa.py_buffer(ids)]
        )
        offsets = pa.concat_arrays([pa.array([0], pa.int64()), _cumsum(n_tokens)])
        return pa.LargeListArray.from_arrays(offsets, flat), n_tokens

    def tokens(self, text: str) -> list[str]:
        """The text's segmentation as token strings (bytes shown decoded)."""
        values = self.token_values
        return [
            v if isinstance(v, str) else v.decode("utf-8", errors="replace")
            for v in (values[i] for i in self.encode(text))
        ]

    def decode(self, ids: Iterable[int]) -> str:
        values = self.token_values
        try:
            parts = [values[i] for i in ids]
        except IndexError:
            raise TokenmillError(f"id out of range for a vocabulary of {self.vocab_size}") from None
        if self.mode == "char":
            return "".join(parts).replace(END_OF_WORD, " ").rstrip(" ")
        return b"".join(parts).decode("utf-8", errors="replace")

    # ---- persistence ------------------------------------------------

    def to_dict(self) -> dict:
        d = {
            "format": FORMAT,
            "version": 1,
            "mode": self.mode,
            "vocab_size": self.vocab_size,
            "special_tokens": {t: self.special_id(t) for t in self.special_tokens},
        }
        if self.mode == "byte":
            d["pattern"] = self.pattern
            d["pattern_regex"] = _native.preset_regex(self.pattern)
        else:
            d["lowercase"] = self.lowercase
            d["alphabet"] = self.alphabet
        d["merges"] = [list(m) for m in self.merges]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def save(self, path: Path) -> None:
        with atomic_path(Path(path)) as tmp:
            tmp.write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def from_dict(cls, d: dict, source: str = "tokenizer") -> Tokenizer:
        if d.get("format") != FORMAT:
            raise TokenmillError(f"{source}: not a tokenmill tokenizer file")
        try:
            specials = sorted(d["special_tokens"], key=d["special_tokens"].get)
            tok = cls(
                mode=d["mode"],
                pattern=d.get("pattern", ""),
                lowercase=bool(d.get("lowercase", False)),
                alphabet=list(d.get("alphabet", [])),
                merges=[(int(a), int(b)) for a, b in d["merges"]],
                special_tokens=specials,
            )
        except (KeyError, TypeError, ValueError) as e:
            raise TokenmillError(f"{source}: malformed tokenizer file ({e!r})") from None
        if tok.mode not in MODES:
            raise TokenmillError(f"{source}: unknown mode {tok.mode!r}")
        return tok

    @classmethod
    def load(cls, path: Path) -> Tokenizer:
        path = Path(path)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise TokenmillError(f"{path}: cannot read tokenizer ({e.strerror})") from None
        except (ValueError, UnicodeDecodeError) as e:
            raise TokenmillError(f"{path}: not valid JSON ({e})") from None
        return cls.from_dict(d, str(path))


def word_table(batches: Iterable[pa.Array], mode: str, pattern: str, lowercase: bool) -> pa.Table:
    """Count the words of documents given as large_string batches.

    Columns: word, count, first (``row << 32 | position``: where the word was
    first seen), sorted by first occurrence.
    """
    check_options(mode, pattern)
    counter = _native.Counter(mode, pattern, lowercase)
    row = 0
    for docs in batches:
        if len(docs):
            counter.add(*arrow_buffers(docs), row)
        row += len(docs)
    offsets, data, counts, firsts, n = counter.finish()
    words = pa.Array.from_buffers(
        pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    return pa.table(
        {
            "word": words,
            "count": pa.Array.from_buffers(pa.uint64(), n, [None, pa.py_buffer(counts)]),
            "first": pa.Array.from_buffers(pa.uint64(), n, [None, pa.py_buffer(firsts)]),
        }
    )


def check_options(mode: str, pattern: str) -> None:
    if mode not in MODES:
        raise TokenmillError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "byte" and pattern not in PATTERNS:
        raise TokenmillError(f"--pattern must be one of {', '.join(PATTERNS)}, not {pattern!r}")


def _fixed_width_buffer(arr: pa.Array) -> memoryview:
    """The values buffer of a primitive array, sliced to the array's extent."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    width = arr.type.byte_width
    return byte_view(arr.buffers()[1][arr.offset * width : (arr.offset + len(arr)) * width])


def _cumsum(lengths: pa.Array) -> pa.Array:
    return pc.cumulative_sum(lengths.cast(pa.int64()))
