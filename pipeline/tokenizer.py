"""The Tokenizer: a BPE vocabulary with encode, decode, save and load.

Ids of a tokenizer trained by tokenmill: byte mode has the 256 byte values as
base tokens; char mode has the characters seen in training plus `</w>`,
sorted. Merge k gets id base + k. Special tokens follow the merges.

Byte-level vocabularies imported from other tools (see `pipeline.formats`)
number their tokens otherwise, so a byte-mode Tokenizer may carry an explicit
`vocab` (the bytes of every id) and `special_ids`; a merge (a, b) then yields
the id whose bytes are those of a followed by those of b.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from pipeline import _native
from pipeline.errors import TokenmillError
from pipeline.io.files import parse_json, read_bytes
from pipeline.io.writers import arrow_buffers, atomic_path, byte_view
from pipeline.memory import gc_paused, release_memory

ENDOFTEXT = "<|endoftext|>"
BOS = "<|bos|>"  # the token `--bos` puts before each document of packed sequences
UNK = "<unk>"
END_OF_WORD = "</w>"
MODES = ("byte", "char")
PATTERNS = ("gpt2", "cl100k", "o200k")
FORMAT = "tokenmill"
NORMALIZATIONS = ("", "NFC")


def default_special_tokens(mode: str) -> list[str]:
    return [UNK, ENDOFTEXT] if mode == "char" else [ENDOFTEXT]


def training_special_tokens(mode: str, extra: Sequence[str] = ()) -> list[str]:
    """The special tokens of a tokenizer trained with `extra` (train's --special-token),
    in id order: the mode's required tokens not listed in `extra` first, then `extra`
    as given. Their ids follow the merges."""
    extra = list(extra)
    for name in extra:
        if not name or name.strip() != name:
            raise TokenmillError(f"--special-token {name!r}: a special token needs a name")
        if extra.count(name) > 1:
            raise TokenmillError(f"--special-token {name!r} is given twice")
    return [t for t in default_special_tokens(mode) if t not in extra] + extra


@dataclass
class Tokenizer:
    mode: str = "byte"
    pattern: str = "cl100k"  # byte mode: a preset name or a regex (fancy-regex syntax)
    lowercase: bool = False
    alphabet: list[str] = field(default_factory=list)  # char mode's base vocabulary
    merges: list[tuple[int, int]] = field(default_factory=list)  # (left, right) ids, rank order
    special_tokens: list[str] = field(default_factory=list)
    # Imported byte-level vocabularies only (None for tokenmill's own numbering):
    # vocab[i] is the bytes of id i (None where the id is a special token or unused);
    # special_ids[k] is the id of special_tokens[k].
    vocab: list[bytes | None] | None = None
    special_ids: list[int] | None = None
    # A pre-token that is itself a token maps straight to its id (Hugging Face's
    # ignore_merges; tiktoken always does this).
    whole_words: bool = False
    # Unicode normalization applied to the text before splitting ("" or "NFC").
    normalization: str = ""

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
            release_memory()
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
        if self.vocab is None:
            return self.base_size + len(self.merges) + len(self.special_tokens)
        return max([len(self.vocab), *(i + 1 for i in self.special_ids or [])])

    def special_id(self, token: str) -> int:
        try:
            k = self.special_tokens.index(token)
        except ValueError:
            raise TokenmillError(f"tokenizer has no special token {token!r}") from None
        if self.special_ids is not None:
            return self.special_ids[k]
        return self.base_size + len(self.merges) + k

    @property
    def special_map(self) -> dict[str, int]:
        """Special token -> id."""
        return {t: self.special_id(t) for t in self.special_tokens}

    @property
    def eos_id(self) -> int:
        return self.special_id(ENDOFTEXT)

    @cached_property
    def token_values(self) -> list[bytes] | list[str]:
        """Each id's bytes (byte mode) or string (char mode), specials as their text.

        An id that is no token (a gap in an imported vocabulary) has None.
        """
        if self.vocab is not None:
            values: list = list(self.vocab) + [None] * (self.vocab_size - len(self.vocab))
            for token, i in self.special_map.items():
                values[i] = token.encode()
            return values
        if self.mode == "char":
            values = list(self.alphabet)
        else:
            values = [bytes([b]) for b in range(256)]
        for a, b in self.merges:
            values.append(values[a] + values[b])
        for token in self.special_tokens:
            values.append(token if self.mode == "char" else token.encode())
        return values

    @cached_property
    def byte_vocab(self) -> list[bytes | None]:
        """Byte mode: the bytes of every non-special id (None for gaps)."""
        if self.vocab is not None:
            return list(self.vocab)
        return self.token_values[: self.base_size + len(self.merges)]

    @cached_property
    def merge_ids(self) -> list[int]:
        """The id each merge yields, in rank order."""
        if self.vocab is None:
            return list(range(self.base_size, self.base_size + len(self.merges)))
        index, vocab, n = self._vocab_index, self.vocab, len(self.vocab)
        ids = []
        for k, (a, b) in enumerate(self.merges):
            left = vocab[a] if 0 <= a < n else None
            right = vocab[b] if 0 <= b < n else None
            merged = index.get(left + right) if left and right else None
            if merged is None:
                raise TokenmillError(
                    f"merge {k} ({a}, {b}) does not join two tokens into a token of the vocabulary"
                )
            ids.append(merged)
        return ids

    @cached_property
    def _vocab_index(self) -> dict[bytes, int]:
        index: dict[bytes, int] = {}
        for i, v in enumerate(self.vocab or []):
            if v is not None:
                if v in index:
                    raise TokenmillError(f"ids {index[v]} and {i} have the same bytes {v!r}")
                index[v] = i
        return index

    @cached_property
    def byte_ids(self) -> list[int]:
        """Byte mode: the id of each of the 256 bytes."""
        if self.vocab is None:
            return list(range(256))
        index = self._vocab_index
        missing = [b for b in range(256) if bytes([b]) not in index]
        if missing:
            raise TokenmillError(
                f"the vocabulary has no token for byte 0x{missing[0]:02x} "
                f"({len(missing)} bytes missing)"
            )
        return [index[bytes([b])] for b in range(256)]

    def checked(self, source: str, *, compile_pattern: bool = True) -> Tokenizer:
        """`validate`, and build the encoder (compiling a custom pattern), with
        errors naming `source`, the file the tokenizer came from."""
        try:
            self.validate()
            if compile_pattern:
                self._encoder  # noqa: B018
        except TokenmillError as e:
            raise TokenmillError(f"{source}: {e}") from None
        return self

    def validate(self) -> Tokenizer:
        """Check that the tables are consistent; raise TokenmillError if not."""
        if self.mode not in MODES:
            raise TokenmillError(f"unknown mode {self.mode!r}")
        if self.special_ids is not None and len(self.special_ids) != len(self.special_tokens):
            raise TokenmillError("special_ids and special_tokens differ in length")
        if len(set(self.special_tokens)) != len(self.special_tokens):
            raise TokenmillError("a special token is listed twice")
        if self.normalization not in NORMALIZATIONS:
            raise TokenmillError(f"unknown normalization {self.normalization!r}")
        if self.vocab is not None:
            if self.mode != "byte":
                raise TokenmillError("an explicit vocab needs byte mode")
            self.byte_ids  # noqa: B018  (raises when a byte is missing)
            self.merge_ids  # noqa: B018  (raises when a merge yields no token)
            taken = {i for i, v in enumerate(self.vocab) if v is not None}
            ids = self.special_ids or []
            clash = [i for i in ids if i in taken or i < 0]
            if clash or len(set(ids)) != len(ids):
                raise TokenmillError(f"special token id {(clash or ids)[0]} is taken")
        else:
            n = self.base_size + len(self.merges)
            for k, (a, b) in enumerate(self.merges):
                if not (0 <= a < self.base_size + k and 0 <= b < self.base_size + k):
                    raise TokenmillError(f"merge {k} ({a}, {b}) refers to an id not yet made")
            if self.special_ids is not None and self.special_ids != list(
                range(n, n + len(self.special_tokens))
            ):
                raise TokenmillError("special token ids must follow the merges")
            if self.mode == "char" and END_OF_WORD not in self.alphabet:
                raise TokenmillError(f"char mode's alphabet lacks {END_OF_WORD}")
        return self

    def merge_pairs(self) -> list[tuple]:
        """Merges as pairs of token values, in rank order."""
        v = self.token_values
        return [(v[a], v[b]) for a, b in self.merges]

    # ---- encoding ---------------------------------------------------

    @cached_property
    def _encoder(self) -> _native.Encoder:
        with gc_paused():
            return self._build_encoder()

    def _build_encoder(self) -> _native.Encoder:
        merges = [(a, b, i) for (a, b), i in zip(self.merges, self.merge_ids, strict=True)]
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
        whole_words = None
        if self.whole_words:
            whole_words = [(v, i) for i, v in enumerate(self.byte_vocab) if v is not None]
        try:
            return _native.Encoder(
                "byte",
                self.pattern,
                False,
                merges,
                byte_ids=None if self.vocab is None else self.byte_ids,
                whole_words=whole_words,
            )
        except ValueError as e:
            raise TokenmillError(str(e)) from None

    def _normalize(self, docs: pa.Array) -> pa.Array:
        if self.normalization:
            return pc.utf8_normalize(docs, self.normalization).cast(pa.large_string())
        return docs

    @property
    def wide_ids(self) -> bool:
        """Whether ids need 32 bits (else they fit uint16)."""
        return self.vocab_size > 1 << 16

    @property
    def id_type(self) -> pa.DataType:
        return pa.uint32() if self.wide_ids else pa.uint16()

    @property
    def ids_type(self) -> pa.DataType:
        """A document's token ids: never null, which also makes Parquet's level
        encoding of the column cheaper."""
        return pa.large_list(pa.field("item", self.id_type, nullable=False))

    def encode(self, text: str, *, eos: bool = False) -> list[int]:
        if self.normalization:
            text = self._normalize(pa.array([text], pa.large_string()))[0].as_py()
        try:
            return self._encoder.encode(text, self.eos_id if eos else None)
        except ValueError as e:  # a custom pattern hit the regex engine's limits
            raise TokenmillError(str(e)) from None

    def encode_arrow(
        self, docs: pa.Array, *, eos: bool = True, parallel: bool = True
    ) -> tuple[pa.Array, pa.Array]:
        """Encode a large_string array: (ids as list<uint16|uint32>, n_tokens
        uint32), on the native thread pool (`parallel`) or on the calling thread."""
        n = len(docs)
        id_type, list_type = self.id_type, self.ids_type
        if n == 0:
            return pa.array([], list_type), pa.array([], pa.uint32())
        try:
            ids, lens = self._encoder.encode_batch(
                *arrow_buffers(self._normalize(docs)),
                self.eos_id if eos else None,
                self.wide_ids,
                parallel,
            )
        except ValueError as e:
            raise TokenmillError(str(e)) from None
        n_tokens = pa.Array.from_buffers(pa.uint32(), n, [None, pa.py_buffer(lens)])
        flat = pa.Array.from_buffers(
            id_type, len(ids) // id_type.byte_width, [None, pa.py_buffer(ids)]
        )
        offsets = pa.concat_arrays([pa.array([0], pa.int64()), _cumsum(n_tokens)])
        return pa.LargeListArray.from_arrays(offsets, flat, type=list_type), n_tokens

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
        if self.vocab is not None and None in parts:
            raise TokenmillError(f"id {list(ids)[parts.index(None)]} is no token")
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
            "special_tokens": self.special_map,
        }
        if self.mode == "byte":
            d["pattern"] = self.pattern
            d["pattern_regex"] = _native.preset_regex(self.pattern) or self.pattern
        else:
            d["lowercase"] = self.lowercase
            d["alphabet"] = self.alphabet
        if self.normalization:
            d["normalization"] = self.normalization
        if self.whole_words:
            d["whole_words"] = True
        if self.vocab is not None:
            from pipeline.formats.bytelevel import to_byte_level

            # Token bytes in GPT-2's byte-to-unicode alphabet, as in tokenizer.json files.
            d["vocab"] = [None if v is None else to_byte_level(v) for v in self.vocab]
        d["merges"] = [list(m) for m in self.merges]
        return d

    def to_json(self) -> str:
        return self._json

    @cached_property
    def _json(self) -> str:
        # Computed once: save() and sha256 both need it, and a tokenizer is
        # not changed after creation.
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"

    @cached_property
    def sha256(self) -> str:
        """Of the saved file's bytes: the file save() writes, or the one load() read."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def save(self, path: Path) -> None:
        with atomic_path(Path(path)) as tmp:
            tmp.write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def from_dict(cls, d: dict, source: str = "tokenizer") -> Tokenizer:
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise TokenmillError(f"{source}: not a tokenmill tokenizer file")
        try:
            specials = sorted(d["special_tokens"], key=d["special_tokens"].get)
            vocab = None
            if d.get("vocab") is not None:
                from pipeline.formats.bytelevel import from_byte_level

                vocab = [None if v is None else from_byte_level(v) for v in d["vocab"]]
            tok = cls(
                mode=d["mode"],
                pattern=d.get("pattern", ""),
                lowercase=bool(d.get("lowercase", False)),
                alphabet=list(d.get("alphabet", [])),
                merges=[(int(a), int(b)) for a, b in d["merges"]],
                special_tokens=specials,
                vocab=vocab,
                special_ids=[int(d["special_tokens"][t]) for t in specials] if vocab else None,
                whole_words=bool(d.get("whole_words", False)),
                normalization=d.get("normalization", ""),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise TokenmillError(f"{source}: malformed tokenizer file ({e!r})") from None
        if tok.mode not in MODES:
            raise TokenmillError(f"{source}: unknown mode {tok.mode!r}")
        return tok.checked(source, compile_pattern=False) if vocab is not None else tok

    @classmethod
    def load(cls, path: Path) -> Tokenizer:
        data = read_bytes(path, "tokenizer")
        with gc_paused():
            return cls.from_file(parse_json(data, path), data, str(path))

    @classmethod
    def from_file(cls, d: dict, data: bytes, source: str) -> Tokenizer:
        """From a tokenizer file's parsed JSON `d` and its bytes `data`."""
        tok = cls.from_dict(d, source)
        # The file's own hash: re-serializing 32k merges just to hash them
        # would hold up every encode run (a file save() wrote hashes the same).
        tok.__dict__["sha256"] = hashlib.sha256(data).hexdigest()
        return tok

    # ---- pickling (to worker processes): tables only, no native state --

    def __getstate__(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


def word_table(
    batches: Iterable[pa.Array], mode: str, pattern: str, lowercase: bool, *, parallel: bool = True
) -> pa.Table:
    """Count the words of documents given as large_string batches, on the
    native thread pool (`parallel`) or on the calling thread alone.

    Columns: word, count, first (``row << 32 | position``: where the word was
    first seen), sorted by first occurrence.
    """
    check_options(mode, pattern)
    counter = _native.Counter(mode, pattern, lowercase)
    row = 0
    for docs in batches:
        if len(docs):
            counter.add(*arrow_buffers(docs), row, parallel)
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
