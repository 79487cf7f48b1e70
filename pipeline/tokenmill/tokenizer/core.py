"""The Tokenizer: a BPE vocabulary with encode, decode, save and load.

Ids of a tokenizer trained by tokenmill: byte mode has the 256 byte values as
base tokens; char mode has the characters seen in training plus `</w>`,
sorted. Merge k gets id base + k. Special tokens follow the merges.

Byte-level vocabularies imported from other tools (see `tokenmill.formats`)
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

import numpy as np
import pyarrow as pa

from tokenmill import _native
from tokenmill.errors import TokenmillError
from tokenmill.io.arrow import arrow_buffers, byte_view, is_text, large_text
from tokenmill.io.files import parse_json, read_bytes
from tokenmill.io.writers import atomic_path
from tokenmill.memory import gc_paused, release_memory
from tokenmill.tokenizer.bytelevel import from_byte_level
from tokenmill.tokenizer.ids import (
    ENDOFTEXT,
    FORMAT,
    MODES,
    NORMALIZATIONS,
    check_special_ids,
    show,
)
from tokenmill.tokenizer.modes import Mode, mode_of
from tokenmill.tokenizer.options import (
    check_count,
    check_options,
    default_special_tokens,
    merges_to_learn,
)
from tokenmill.tokenizer.vocab import ImportedNumbering, NativeNumbering, OwnNumbering


@dataclass
class Tokenizer:
    """A byte-pair-encoding tokenizer: train it, encode and decode with it,
    save it and load it again.

    >>> from tokenmill import Tokenizer
    >>> corpus = ["the cat sat on the mat", "the dog sat on the log"] * 50
    >>> tok = Tokenizer.train(corpus, vocab_size=300)
    >>> tok.encode("the cat sat")
    [257, 266, 260]
    >>> tok.tokens("the cat sat")
    ['the', ' cat', ' sat']
    >>> tok.decode([257, 266, 260])
    'the cat sat'

    Training stops early when no pair is left to merge: this corpus makes 17
    merges, so 256 bytes + 17 merges + `<|endoftext|>` = 274 tokens.

    >>> tok.vocab_size, tok.eos_id
    (274, 273)

    `mode="char"` splits at whitespace and builds on the characters seen:

    >>> chars = Tokenizer.train(corpus, mode="char", vocab_size=40)
    >>> chars.tokens("the cat")
    ['the</w>', 'cat</w>']
    >>> chars.decode(chars.encode("the cat"))
    'the cat'
    """

    mode: str = "byte"
    pattern: str = "cl100k"  # byte mode: a preset name or a regex (fancy-regex syntax)
    lowercase: bool = False
    alphabet: list[str] = field(default_factory=list)  # char mode's base vocabulary
    merges: list[tuple[int, int]] = field(default_factory=list)  # (left, right) ids, rank order
    special_tokens: list[str] = field(default_factory=list)
    # Imported byte-level vocabularies only (None for tokenmill's own numbering):
    # vocab[i] is the bytes of id i (None where the id is a special token or unused);
    # special_ids[k] is the id of special_tokens[k]. (A factory, not a class-level
    # default: a tokenizer of a native table has no `vocab` until __getattr__
    # makes it, see `imported`.)
    vocab: list[bytes | None] | None = field(default_factory=lambda: None)
    special_ids: list[int] | None = None
    # A pre-token that is itself a token maps straight to its id (Hugging Face's
    # ignore_merges; tiktoken always does this).
    whole_words: bool = False
    # Unicode normalization applied to the text before splitting ("" or "NFC").
    normalization: str = ""
    # Char mode, an extended tokenizer whose alphabet grew (--extend-alphabet):
    # the id of each alphabet entry (None: its index).
    alphabet_ids: list[int] | None = None

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
        """Train on in-memory texts (the whole pipeline in one process):
        count their words, then learn merges until the vocabulary holds
        `vocab_size` tokens (or exactly `num_merges` merges are made, or no
        pair is left). `special_tokens` are added after the merges, with the
        mode's own (`<|endoftext|>`; char mode also `<unk>`).

        >>> tok = Tokenizer.train(["low lower lowest"] * 10, vocab_size=262)
        >>> tok.merge_pairs()[:2]
        [(b'l', b'o'), (b'lo', b'w')]
        >>> Tokenizer.train(["x"], vocab_size=10)
        Traceback (most recent call last):
        ...
        tokenmill.errors.TokenmillError: --vocab-size 10 is below the base vocabulary: ...
        """
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
        check_count(vocab_size, "--vocab-size")
        check_count(num_merges, "num_merges")
        specials = list(special_tokens) if special_tokens is not None else []
        for required in default_special_tokens(mode):
            if required not in specials:
                specials.append(required)
        words = words.cast(pa.large_string())
        counts = counts.cast(pa.uint64())
        model = mode_of(mode)
        alphabet, base = model.train_alphabet(words)
        fixed = base + len(specials)
        num_merges = merges_to_learn(
            vocab_size,
            num_merges,
            fixed,
            f"the base vocabulary: {base} base tokens + {len(specials)} special tokens = {fixed}",
        )
        pattern, lowercase = model.trained_options(pattern, lowercase)
        # The merges come back as tens of thousands of new tuples: gc_paused.
        with gc_paused():
            merges = []
            if len(words):
                try:
                    merges = _native.train_merges(
                        *arrow_buffers(words),
                        _fixed_width_buffer(counts),
                        alphabet,
                        num_merges,
                        progress,
                    )
                except _native.NativeError as e:  # a word table beyond what training can hold
                    raise TokenmillError(f"train: {e}") from None
                release_memory()
            return cls(
                mode=mode,
                pattern=pattern,
                lowercase=lowercase,
                alphabet=alphabet or [],
                merges=merges,
                special_tokens=specials,
            )

    @classmethod
    def imported(
        cls,
        table: _native.Vocabulary,
        *,
        pattern: str,
        special_tokens: dict[str, int],
        whole_words: bool,
        normalization: str = "",
        encoder: _native.Encoder | None = None,
    ) -> Tokenizer:
        """A byte-mode tokenizer of a vocabulary that the native core read from
        another tool's file (`tokenmill.formats`), not yet checked (`checked`).
        The encoder is built from the table where it is (`encoder`: one the
        caller already built from `table`, `pattern` and `whole_words`);
        `vocab` and `merges` become Python lists (400k objects for 200k
        tokens) only when first read."""
        order = sorted(special_tokens, key=special_tokens.get)
        tok = cls(
            mode="byte",
            pattern=pattern,
            special_tokens=order,
            special_ids=[special_tokens[t] for t in order],
            whole_words=whole_words,
            normalization=normalization,
        )
        del tok.__dict__["vocab"], tok.__dict__["merges"]
        tok.__dict__["_table"] = table
        if encoder is not None:
            tok.__dict__["_encoder"] = encoder
        return tok

    def __getattr__(self, name: str) -> object:
        # Reached only for an attribute that is not set: `vocab` and `merges`
        # of a tokenizer made by `imported`, until first read.
        table = self.__dict__.get("_table")
        if table is None or name not in ("vocab", "merges"):
            raise AttributeError(f"'Tokenizer' object has no attribute {name!r}")
        self.__dict__["vocab"], self.__dict__["merges"] = table.tokens(), table.merges()
        return self.__dict__[name]

    @property
    def normalizer(self) -> str | None:
        """The Unicode normalization applied to text before splitting ("NFC"),
        or None: what a run's output names, since it changes the ids."""
        return self.normalization or None

    # ---- vocabulary: the mode's base tokens, numbered ----------------

    # A tokenizer's tables are not changed after creation: its mode and
    # numbering, like the tables derived from them, are made once.

    @cached_property
    def _mode(self) -> Mode:
        """Byte or char mode: the base vocabulary, pre-tokenizer and decoding."""
        return mode_of(self.mode)

    @cached_property
    def _numbering(self) -> OwnNumbering | ImportedNumbering | NativeNumbering:
        """Which id each token has: tokenmill's numbering, or an imported table
        (held by the native core, or as Python lists)."""
        table = self.__dict__.get("_table")
        if table is not None:
            return NativeNumbering(
                table, self.special_tokens, self.special_ids, lambda: (self.vocab, self.merges)
            )
        if self.vocab is None:
            return OwnNumbering(
                self.base_size, self.merges, self.special_tokens, self.special_ids,
                self.alphabet_ids,
            )  # fmt: skip
        return ImportedNumbering(self.vocab, self.merges, self.special_tokens, self.special_ids)

    @property
    def base_size(self) -> int:
        return self._mode.base_size(self.alphabet)

    @property
    def vocab_size(self) -> int:
        return self._numbering.size

    def special_id(self, token: str) -> int:
        try:
            k = self.special_tokens.index(token)
        except ValueError:
            raise TokenmillError(f"tokenizer has no special token {token!r}") from None
        return self._numbering.special_id(k)

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
        mode = self._mode
        return self._numbering.values(
            mode.base_values(self.alphabet), mode.special_value, self.special_map
        )

    @cached_property
    def byte_vocab(self) -> list[bytes | None]:
        """Byte mode: the bytes of every non-special id (None for gaps)."""
        return self._numbering.non_special(lambda: self.token_values)

    @cached_property
    def merge_ids(self) -> list[int]:
        """The id each merge yields, in rank order."""
        tables = self._native_tables
        if tables is not None:
            return tables[1]
        return self._numbering.merge_ids(self._index)

    @cached_property
    def _vocab_index(self) -> dict[bytes, int]:
        return self._numbering.index()

    def _index(self) -> dict[bytes, int]:
        """The numbering's bytes -> id, built on first use (see vocab.Index)."""
        return self._vocab_index

    @cached_property
    def _native_tables(self) -> tuple[list[int], list[int]] | None:
        """(byte ids, merge ids) of an explicit table built by the native core,
        or None: tokenmill's own numbering, or a table at fault, whose fault the
        Python methods name."""
        return self._numbering.native_tables()

    def given_tables(self, byte_ids: list[int], merge_ids: list[int]) -> None:
        """Take the id of each byte and the id each merge yields from the code
        that made the merges (deriving a ranks file's merges yields both), so
        that validation does not build them again: they must be what
        `custom_byte_ids` and `merge_ids` would give."""
        self.__dict__["_native_tables"] = (byte_ids, merge_ids)

    @cached_property
    def custom_byte_ids(self) -> list[int] | None:
        """The id of each of the 256 bytes where they are not the byte values
        (imported vocabularies), else None."""
        tables = self._native_tables
        if tables is not None:
            return tables[0]
        return self._numbering.byte_ids(self._index)

    @property
    def byte_ids(self) -> list[int]:
        """Byte mode: the id of each of the 256 bytes."""
        ids = self.custom_byte_ids
        return list(range(256)) if ids is None else ids

    def checked(self, source: str, *, compile_pattern: bool = True) -> Tokenizer:
        """`validate`, and build the encoder (compiling a custom pattern), with
        errors naming `source`, the file the tokenizer came from."""
        try:
            self.validate()
            if compile_pattern:
                self._encoder  # noqa: B018
            else:
                self._mode.check_pattern(self)
        except TokenmillError as e:
            raise TokenmillError(f"{source}: {e}") from None
        except _native.NativeError as e:  # tables the encoder cannot be built from
            raise TokenmillError(f"{source}: {e}") from None
        except (TypeError, OverflowError, IndexError) as e:
            # A value of the wrong type that slipped past validate: still one line.
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
        self._mode.check_fields(self)
        self._numbering.check(self._mode, self)
        self.custom_byte_ids  # noqa: B018  (raises when a byte is missing)
        if not self._numbering.core_made_merge_ids:
            self.merge_ids  # noqa: B018  (raises when a merge yields no token)
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
        encoder = self._numbering.encoder(self)
        if encoder is not None:
            return encoder
        if len(self.merges) != len(self.merge_ids):
            raise ValueError("merges and merge_ids differ in length")
        # The core pairs merges with their ids: zipping 32k triples here took
        # ~4 ms. It takes merges as a list (a Tokenizer may hold a tuple).
        return self._mode.encoder(self, list(self.merges), self.merge_ids)

    def _normalize(self, docs: pa.Array) -> pa.Array:
        if self.normalization:
            import pyarrow.compute as pc  # not at the top: see io/readers.py

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
        """The token ids of `text`, then `<|endoftext|>`'s when `eos`.

        >>> tok = Tokenizer.train(["hello world"] * 10, vocab_size=270)
        >>> tok.encode("hello")
        [259]
        >>> tok.encode("hello", eos=True) == [259, tok.eos_id]
        True
        """
        if self.normalization:
            text = self._normalize(pa.array([text], pa.large_string()))[0].as_py()
        try:
            return self._encoder.encode(text, self.eos_id if eos else None)
        except _native.NativeError as e:  # a custom pattern hit the regex engine's limits
            raise TokenmillError(str(e)) from None

    def encode_batch(
        self, texts: Iterable[str], *, eos: bool = False, parallel: bool = True
    ) -> list[list[int]]:
        """The token ids of each text, encoded on the native thread pool (or
        on the calling thread alone when not `parallel`): as `encode` on each.

        >>> tok = Tokenizer.train(["hello world"] * 10, vocab_size=270)
        >>> tok.encode_batch(["hello", " world", ""])
        [[259], [264], []]
        >>> tok.encode_batch(["hello"]) == [tok.encode("hello")]
        True
        """
        ids, _ = self.encode_arrow(
            pa.array(list(texts), pa.large_string()), eos=eos, parallel=parallel
        )
        return ids.to_pylist()

    def encode_arrow(
        self, docs: pa.Array, *, eos: bool = True, parallel: bool = True
    ) -> tuple[pa.Array, pa.Array]:
        """Encode an array of strings (string, large_string or string_view;
        chunked or not): (ids as list<uint16|uint32>, n_tokens uint32), on the
        native thread pool (`parallel`) or on the calling thread."""
        docs = _text_array(docs)
        n = len(docs)
        id_type, list_type = self.id_type, self.ids_type
        try:
            ids, lens = self._encoder.encode_batch(
                *arrow_buffers(self._normalize(docs)),
                self.eos_id if eos else None,
                self.wide_ids,
                parallel,
            )
        except _native.NativeError as e:
            raise TokenmillError(str(e)) from None
        n_tokens = pa.Array.from_buffers(pa.uint32(), n, [None, pa.py_buffer(lens)])
        flat = pa.Array.from_buffers(
            id_type, len(ids) // id_type.byte_width, [None, pa.py_buffer(ids)]
        )
        # From buffers, as every array here: pa.array imports pandas.
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(np.frombuffer(lens, np.uint32), out=offsets[1:])
        offsets = pa.Array.from_buffers(pa.int64(), n + 1, [None, pa.py_buffer(offsets)])
        return pa.LargeListArray.from_arrays(offsets, flat, type=list_type), n_tokens

    def tokens(self, text: str) -> list[str]:
        """The text's segmentation as token strings (bytes shown decoded)."""
        values = self.token_values
        return [
            v if isinstance(v, str) else v.decode("utf-8", errors="replace")
            for v in (values[i] for i in self.encode(text))
        ]

    def decode(self, ids: Iterable[int]) -> str:
        """The text of token ids (invalid UTF-8 replaced by U+FFFD).

        >>> tok = Tokenizer.train(["hello world"] * 10, vocab_size=270)
        >>> tok.decode(tok.encode("hello world, hi"))
        'hello world, hi'
        >>> tok.decode([999])
        Traceback (most recent call last):
        ...
        tokenmill.errors.TokenmillError: id 999 is not in the vocabulary (ids 0 to 265, ...)
        """
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
        return self._mode.join(parts)

    # ---- persistence ------------------------------------------------

    def to_dict(self) -> dict:
        d = self._file_head()
        d.update(self._numbering.file_fields())
        d["merges"] = [list(m) for m in self.merges]
        return d

    def _file_head(self) -> dict:
        """The tokenizer file's entries before its tables (vocab, merges)."""
        d = {
            "format": FORMAT,
            "version": 1,
            "mode": self.mode,
            "vocab_size": self.vocab_size,
            "special_tokens": self.special_map,
        }
        d.update(self._mode.file_fields(self))
        if self.normalization:
            d["normalization"] = self.normalization
        if self.whole_words:
            d["whole_words"] = True
        return d

    def to_json(self) -> str:
        return self._file_bytes.decode()

    @cached_property
    def _file_bytes(self) -> bytes:
        """The tokenizer file, UTF-8. Computed once: save() and sha256 both
        need it, and a tokenizer is not changed after creation. A table the
        native core holds writes its vocab and merges there, and the core
        writes the merges of any other, as json.dumps would
        (tests/test_vocab_load.py compares)."""
        head = self._file_head()
        tables = self._numbering.file_tables()
        if tables is None:
            head |= self._numbering.file_fields()
            try:  # 32k merges: 1 ms in the core, 15 through json.dumps
                tables = b'"merges":' + _native.merges_json(self.merges)
            except (_native.NativeError, TypeError):  # not pairs of ids: json says why
                with gc_paused():  # a list per merge
                    return _dumps(self.to_dict()).encode() + b"\n"
        return _dumps(head)[:-1].encode() + b"," + tables + b"}\n"

    @cached_property
    def sha256(self) -> str:
        """Of the saved file's bytes: the file save() writes, or the one load() read."""
        return hashlib.sha256(self._file_bytes).hexdigest()

    def save(self, path: Path) -> None:
        """Write the tokenizer as tokenmill JSON (atomically: a reader sees
        the old file or the new one). `load` reads it back.

        >>> import tempfile, pathlib
        >>> tok = Tokenizer.train(["hello world"] * 10, vocab_size=270)
        >>> with tempfile.TemporaryDirectory() as d:
        ...     path = pathlib.Path(d) / "tok.json"
        ...     tok.save(path)
        ...     again = Tokenizer.load(path)
        >>> again == tok, again.sha256 == tok.sha256
        (True, True)
        """
        with atomic_path(path) as tmp:  # a local path, or a URL (io/storage.py)
            tmp.write_bytes(self._file_bytes)

    @classmethod
    def from_dict(
        cls, d: dict, source: str = "tokenizer", merges: list[tuple[int, int]] | None = None
    ) -> Tokenizer:
        """A Tokenizer from a parsed tokenmill tokenizer file, checked: every
        field of the expected type, ids integers that uint32 holds, merges that
        join tokens made before them, special-token ids where the numbering puts
        them. TokenmillError naming `source` otherwise. `merges`: the file's
        merges as (left, right) pairs of ints, read by the native core, whose
        place `d` holds empty."""
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
        check_special_ids(raw_specials, source)
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
        # Types and lengths in C first; the loop finds the bad merge to name.
        if not (set(map(type, raw_merges)) <= {list} and set(map(len, raw_merges)) <= {2}):
            for k, m in enumerate(raw_merges):
                if not isinstance(m, list) or len(m) != 2:
                    raise malformed(f"merge {k} is {show(m)}, not a [left, right] pair of ids")
        if merges is None:
            merges = list(map(tuple, raw_merges))
        alphabet = field_of("alphabet", list, [])
        vocab = None
        if d.get("vocab") is not None:
            raw_vocab = field_of("vocab", list, None)
            try:
                vocab = _byte_level_vocab(raw_vocab)
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
            special_ids=[raw_specials[t] for t in specials]
            if vocab is not None
            else _own_special_ids(
                mode,
                alphabet,
                len(merges),
                [raw_specials[t] for t in specials],
                d.get("alphabet_ids") is not None,
            ),
            whole_words=field_of("whole_words", bool, False),
            normalization=field_of("normalization", str, ""),
            alphabet_ids=field_of("alphabet_ids", (list, type(None)), None),
        )
        tok.checked(source, compile_pattern=False)
        try:
            tok._numbering.check_file_special_ids(raw_specials)
        except TokenmillError as e:
            raise TokenmillError(f"{source}: {e}") from None
        size = d.get("vocab_size", tok.vocab_size)
        if type(size) is not int or size != tok.vocab_size:
            raise TokenmillError(
                f"{source}: vocab_size is {show(size)} but the file's tokens number "
                f"{tok.vocab_size}"
            )
        return tok

    @classmethod
    def load(cls, path: Path) -> Tokenizer:
        """A tokenizer file that `save` wrote, checked (TokenmillError naming
        the file when it is malformed). Other tools' files (Hugging Face
        tokenizer.json, .tiktoken): `tokenmill.formats.load_any`.
        """
        data = read_bytes(path, "tokenizer")
        with gc_paused():
            return cls.from_file(parse_json(data, path), data, str(path))

    @classmethod
    def from_file(
        cls,
        d: dict,
        data: bytes,
        source: str,
        *,
        merges: list[tuple[int, int]] | None = None,
        encoder: _native.Encoder | None = None,
    ) -> Tokenizer:
        """From a tokenizer file's parsed JSON `d` and its bytes `data`. Or
        from the file as the native core read it (`formats/prefetch.py`):
        `merges` its merges, whose place `d` holds empty, and `encoder` one
        the core built from them for `d`'s pattern (merge k making id
        256 + k, bytes their own ids, no whole-word lookup), taken when the
        tokenizer is so."""
        tok = cls.from_dict(d, source, merges=merges)
        if (
            encoder is not None
            and merges is not None
            and tok.mode == "byte"
            and not tok.whole_words
            and tok.custom_byte_ids is None
            and tok.merge_ids == list(range(256, 256 + len(tok.merges)))
        ):
            tok.__dict__["_encoder"] = encoder
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
    counter = mode_of(mode).counter(pattern, lowercase)
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


def _own_special_ids(
    mode: str, alphabet: list, merges: int, ids: list, grown_alphabet: bool = False
) -> list[int] | None:
    """A file in tokenmill's numbering: its special ids where they are not right
    after the merges but among them, as an extended tokenizer keeps its base's
    (`tokenizer/extend.py`); else None (the numbering puts them, and a file
    that puts them elsewhere is refused, naming where they belong)."""
    base = 256 if mode == "byte" else len(alphabet)
    size = base + merges + len(ids)
    default = list(range(base + merges, size))
    low = 0 if grown_alphabet else base  # added characters have ids after the specials
    if ids == default or not all(type(i) is int and low <= i < size for i in ids):
        return None
    return ids


def _dumps(d: dict) -> str:
    return json.dumps(d, ensure_ascii=False, separators=(",", ":"))


def _byte_level_vocab(raw_vocab: list) -> list[bytes | None]:
    """The bytes of each entry (None stays None); ValueError, TypeError or
    AttributeError for an entry that is not a byte-level string. The native
    core decodes a 200k-token table in a few milliseconds; a table it does
    not take is decoded entry by entry, which raises at the bad one."""
    ids = [i for i, v in enumerate(raw_vocab) if v is not None]
    texts = [raw_vocab[i] for i in ids]
    try:
        vocab = _native.byte_level_tables(texts, ids, [], [])[0]
    except _native.NativeError:
        return [None if v is None else from_byte_level(v) for v in raw_vocab]
    return vocab + [None] * (len(raw_vocab) - len(vocab))


def _byte_level(v: object) -> bool:
    try:
        from_byte_level(v)  # type: ignore[arg-type]
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def _fixed_width_buffer(arr: pa.Array) -> memoryview:
    """The values buffer of a primitive array, sliced to the array's extent."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    width = arr.type.byte_width
    return byte_view(arr.buffers()[1][arr.offset * width : (arr.offset + len(arr)) * width])


def _text_array(docs: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Documents as one large_string array, the form the native core reads;
    an array of anything but strings is refused rather than cast."""
    if isinstance(docs, pa.ChunkedArray):
        docs = docs.combine_chunks()
    if not is_text(docs.type):
        raise TokenmillError(f"encode_arrow takes an array of strings, not of {docs.type}")
    return large_text(docs)
