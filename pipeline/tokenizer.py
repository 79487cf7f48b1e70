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
# Ids are uint32 (in the encoder and in token shards), and so is the vocabulary
# size: at most 2**32 - 1 tokens, ids 0 to 2**32 - 2 (as `--vocab-size` allows).
MAX_VOCAB_SIZE = (1 << 32) - 1


def id_limit(n_tokens: int) -> int:
    """Ids of a vocabulary of `n_tokens` tokens (special ones included) must lie
    below this. Gaps are allowed (tiktoken's cl100k leaves 15 ids unused before
    `<|endofprompt|>`), but not more unused ids than tokens (plus 1024): tables
    are allocated for the whole id space, which must stay in proportion to the
    file that describes it."""
    return min(2 * n_tokens + 1024, MAX_VOCAB_SIZE)


def show(value: object) -> str:
    """A value of a file for a one-line message: repr, shortened."""
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        return f"an integer of {value.bit_length()} bits"  # type: ignore[attr-defined]
    return text if len(text) <= 40 else text[:37] + "..."


def is_id(value: object) -> bool:
    """An id: an int (not a bool, float or string) that uint32 holds. (How far
    ids may reach beyond the tokens is `id_limit`'s to say.)"""
    return type(value) is int and 0 <= value < 1 << 32


def check_id(value: object, what: str) -> int:
    """`value` if it is an id, else a TokenmillError naming `what`."""
    if not is_id(value):
        raise TokenmillError(f"{what} has id {show(value)}: ids are integers from 0 to 2**32-1")
    return value  # type: ignore[return-value]


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
        _check_count(vocab_size, "--vocab-size", MAX_VOCAB_SIZE)
        _check_count(num_merges, "num_merges", MAX_VOCAB_SIZE)
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
        if base + num_merges + len(specials) > MAX_VOCAB_SIZE:
            raise TokenmillError(
                f"{base} base tokens + {num_merges} merges + {len(specials)} special tokens "
                f"is more than the {MAX_VOCAB_SIZE} tokens a vocabulary of 32-bit ids holds"
            )
        if len(words):
            try:
                merges = _native.train_merges(
                    *arrow_buffers(words),
                    _fixed_width_buffer(counts),
                    alphabet,
                    num_merges,
                    progress,
                )
            except ValueError as e:  # the word table is beyond what training can hold
                raise TokenmillError(f"train: {e}") from None
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

    @property
    def normalizer(self) -> str | None:
        """The Unicode normalization applied to text before splitting ("NFC"),
        or None: what a run's output names, since it changes the ids."""
        return self.normalization or None

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
            if type(a) is not int or type(b) is not int:
                raise TokenmillError(f"merge {k} ({show(a)}, {show(b)}): ids are integers")
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
            elif self.mode == "byte" and self.pattern not in PATTERNS:
                _native.pretokenize("", "byte", self.pattern)  # compiles it, no more
        except TokenmillError as e:
            raise TokenmillError(f"{source}: {e}") from None
        except (TypeError, ValueError, OverflowError, IndexError) as e:
            raise TokenmillError(f"{source}: malformed tokenizer ({e})") from None
        return self

    def validate(self) -> Tokenizer:
        """Check that the tables are consistent; raise TokenmillError if not.

        Linear in the size of the tables: the checks are what keeps a bad file
        from loading and then failing (or silently mis-encoding) later."""
        if self.mode not in MODES:
            raise TokenmillError(f"unknown mode {show(self.mode)}")
        if self.special_ids is not None and len(self.special_ids) != len(self.special_tokens):
            raise TokenmillError("special_ids and special_tokens differ in length")
        seen: set[str] = set()
        for name in self.special_tokens:
            if not isinstance(name, str) or not name:
                raise TokenmillError(f"special token {show(name)}: a special token needs a name")
            if name in seen:
                raise TokenmillError(f"special token {name!r} is listed twice")
            seen.add(name)
        if self.normalization not in NORMALIZATIONS:
            raise TokenmillError(
                f"normalizer {show(self.normalization)} is not supported (tokenmill applies "
                "NFC or none, as byte-level BPE files do)"
            )
        if self.mode == "byte" and (not isinstance(self.pattern, str) or not self.pattern):
            raise TokenmillError(f"pattern {show(self.pattern)}: byte mode needs a pattern")
        if self.vocab is not None:
            self._validate_vocab()
        else:
            self._validate_numbering()
        return self

    def _validate_numbering(self) -> None:
        """tokenmill's own numbering: base tokens, then one per merge, then specials."""
        if self.mode == "char":
            alphabet = self.alphabet

            def symbol(c: object) -> bool:
                return isinstance(c, str) and (len(c) == 1 or c == END_OF_WORD)

            if not all(map(symbol, alphabet)):
                bad = next(c for c in alphabet if not symbol(c))
                raise TokenmillError(
                    f"char mode's alphabet holds {show(bad)}: want single characters and "
                    f"{END_OF_WORD}"
                )
            if len(set(alphabet)) != len(alphabet):
                seen: set[str] = set()
                twice = next(c for c in alphabet if c in seen or seen.add(c))
                raise TokenmillError(f"char mode's alphabet lists {twice!r} twice")
            if END_OF_WORD not in alphabet:
                raise TokenmillError(f"char mode's alphabet lacks {END_OF_WORD}")
            if UNK not in self.special_tokens:
                raise TokenmillError(f"char mode needs the special token {UNK}")
        base = self.base_size
        if base + len(self.merges) + len(self.special_tokens) > MAX_VOCAB_SIZE:
            raise TokenmillError(f"more than {MAX_VOCAB_SIZE} tokens: ids are 32-bit")
        # Merge k makes id base + k from ids made before it.
        for k, (a, b) in enumerate(self.merges):
            made = base + k
            if type(a) is not int or type(b) is not int:
                raise TokenmillError(f"merge {k} ({show(a)}, {show(b)}): ids are integers")
            if not (0 <= a < made and 0 <= b < made):
                raise TokenmillError(
                    f"merge {k} ({show(a)}, {show(b)}) refers to an id not yet made "
                    f"(a merge joins ids below its own, {made})"
                )
        if len(set(self.merges)) != len(self.merges):
            first: dict[tuple, int] = {}
            k, m = next((k, m) for k, m in enumerate(self.merges) if first.setdefault(m, k) != k)
            raise TokenmillError(
                f"merge {k} {tuple(m)} repeats merge {first[m]}: two ids would have the same bytes"
            )
        n = base + len(self.merges)
        if self.special_ids is not None and self.special_ids != list(
            range(n, n + len(self.special_tokens))
        ):
            raise TokenmillError("special token ids must follow the merges")

    def _validate_vocab(self) -> None:
        """An explicit vocabulary (imported): byte mode, every byte a token, ids
        in proportion to the tokens, each merge joining two tokens into one."""
        if self.mode != "byte":
            raise TokenmillError("an explicit vocab needs byte mode")
        vocab = self.vocab
        n_vocab = len(vocab)
        if any(v is not None and not isinstance(v, bytes) for v in vocab):
            raise TokenmillError("vocab entries are bytes")
        ids = self.special_ids if self.special_ids is not None else []
        if len(ids) != len(self.special_tokens):
            raise TokenmillError("special_ids and special_tokens differ in length")
        owner: dict[int, str] = {}
        for name, i in zip(self.special_tokens, ids, strict=True):
            check_id(i, f"special token {name!r}")
            if i < n_vocab and vocab[i] is not None:
                raise TokenmillError(
                    f"special token {name!r} has id {i}, taken by the token {vocab[i]!r}"
                )
            if i in owner:
                raise TokenmillError(
                    f"special tokens {owner[i]!r} and {name!r} have the same id {i}"
                )
            owner[i] = name
        n_tokens = n_vocab - vocab.count(None) + len(ids)
        top = max([n_vocab - 1, *ids])
        if top >= id_limit(n_tokens):
            what = f"special token {owner[top]!r} has id {top}" if top in owner else f"id {top}"
            raise TokenmillError(
                f"{what}: a vocabulary of {n_tokens} tokens numbers them below "
                f"{id_limit(n_tokens)} (gaps are allowed, but not more unused ids than tokens)"
            )
        self.byte_ids  # noqa: B018  (raises when a byte is missing)
        self.merge_ids  # noqa: B018  (raises when a merge yields no token)

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
        ids = list(ids)
        n = len(values)
        try:
            # min and max run in C; only a bad id costs the search for it.
            if ids and (min(ids) < 0 or max(ids) >= n):
                bad = next(i for i in ids if not 0 <= i < n)
                raise TokenmillError(
                    f"id {show(bad)} is not in the vocabulary (ids 0 to {n - 1}, "
                    f"vocabulary size {n})"
                )
            parts = [values[i] for i in ids]
        except TypeError:
            bad = next((i for i in ids if type(i) is not int), None)
            raise TokenmillError(f"id {show(bad)} is not an integer") from None
        if None in parts:
            raise TokenmillError(
                f"id {ids[parts.index(None)]} is no token (a gap in a vocabulary of {n})"
            )
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
        """A Tokenizer from a parsed tokenmill tokenizer file, checked: every
        field of the expected type, ids integers that uint32 holds, merges that
        join tokens made before them, special-token ids where the numbering puts
        them. TokenmillError naming `source` otherwise."""
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise TokenmillError(f"{source}: not a tokenmill tokenizer file")

        def malformed(what: str) -> TokenmillError:
            return TokenmillError(f"{source}: malformed tokenizer file ({what})")

        def field_of(key: str, kind: type | tuple[type, ...], default: object) -> object:
            value = d.get(key, default)
            if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
                raise malformed(f"{key} is {show(value)}")
            return value

        version = d.get("version", 1)
        if type(version) is not int or version != 1:
            raise TokenmillError(
                f"{source}: tokenizer file version {show(version)} (this tokenmill reads version 1)"
            )
        mode = d.get("mode")
        if mode not in MODES:
            raise TokenmillError(f"{source}: unknown mode {show(mode)}")
        raw_specials = d.get("special_tokens")
        if not isinstance(raw_specials, dict):
            raise malformed("special_tokens must map each special token to its id")
        try:
            for name, i in raw_specials.items():
                check_id(i, f"special token {name!r}")
        except TokenmillError as e:
            raise TokenmillError(f"{source}: {e}") from None
        specials = sorted(raw_specials, key=raw_specials.get)
        by_id: dict[int, str] = {}
        for name in specials:
            i = raw_specials[name]
            if i in by_id:
                raise TokenmillError(
                    f"{source}: special tokens {by_id[i]!r} and {name!r} have the same id {i}"
                )
            by_id[i] = name
        raw_merges = d.get("merges")
        if not isinstance(raw_merges, list):
            raise malformed("merges must be a list of [left, right] id pairs")
        for k, m in enumerate(raw_merges):
            if not isinstance(m, list) or len(m) != 2:
                raise malformed(f"merge {k} is {show(m)}, not a [left, right] pair of ids")
        merges = [(a, b) for a, b in raw_merges]
        alphabet = field_of("alphabet", list, [])
        vocab = None
        if d.get("vocab") is not None:
            from pipeline.formats.bytelevel import from_byte_level

            raw_vocab = field_of("vocab", list, None)
            try:
                vocab = [None if v is None else from_byte_level(v) for v in raw_vocab]
            except (ValueError, TypeError, AttributeError):
                bad = next(
                    (k, v) for k, v in enumerate(raw_vocab) if v is not None and not _byte_level(v)
                )
                raise malformed(
                    f"vocab entry {bad[0]} is {show(bad[1])}, not a token in the byte-level "
                    "alphabet"
                ) from None
        tok = cls(
            mode=mode,
            pattern=field_of("pattern", str, ""),
            lowercase=field_of("lowercase", bool, False),
            alphabet=alphabet,
            merges=merges,
            special_tokens=specials,
            vocab=vocab,
            special_ids=[raw_specials[t] for t in specials] if vocab is not None else None,
            whole_words=field_of("whole_words", bool, False),
            normalization=field_of("normalization", str, ""),
        )
        tok.checked(source, compile_pattern=False)
        if vocab is None:
            # Special tokens follow the merges, in the order of their ids.
            n = tok.base_size + len(merges)
            for k, name in enumerate(specials):
                if raw_specials[name] != n + k:
                    raise TokenmillError(
                        f"{source}: special token {name!r} has id {raw_specials[name]}, not "
                        f"{n + k}: without a vocab, special tokens are numbered from {n}, "
                        "right after the merges"
                    )
        size = d.get("vocab_size", tok.vocab_size)
        if type(size) is not int or size != tok.vocab_size:
            raise TokenmillError(
                f"{source}: vocab_size is {show(size)} but the file's tokens number "
                f"{tok.vocab_size}"
            )
        return tok

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


def _byte_level(v: object) -> bool:
    from pipeline.formats.bytelevel import from_byte_level

    try:
        from_byte_level(v)  # type: ignore[arg-type]
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def _check_count(value: object, what: str, most: int) -> None:
    """A count given to training: None, or an int from 0 to `most`."""
    if value is None:
        return
    if type(value) is bool or not isinstance(value, int) or not 0 <= value <= most:
        raise TokenmillError(
            f"{what} {show(value)}: want a whole number from 0 to {most} "
            "(ids are 32-bit: a vocabulary holds at most 2**32-1 tokens)"
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
