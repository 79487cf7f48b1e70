"""The Tokenizer: a BPE vocabulary with encode, decode, save and load.

Ids of a tokenizer trained by tokenmill: byte mode has the 256 byte values as
base tokens; char mode has the characters seen in training plus `</w>`,
sorted. Merge k gets id base + k. Special tokens follow the merges, or sit at
ids chosen in training past them.

Byte-level vocabularies imported from other tools (see `tokenmill.formats`)
number their tokens otherwise, so a byte-mode Tokenizer may carry an explicit
`vocab` (the bytes of every id) and `special_ids`; a merge (a, b) then yields
the id whose bytes are those of a followed by those of b.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence, Set
from dataclasses import FrozenInstanceError, dataclass, field, fields
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any, Literal

from tokenmill import _native
from tokenmill.errors import DisallowedSpecialTokenError, TokenmillError, one_line
from tokenmill.io.files import parse_json, read_bytes
from tokenmill.io.storage import AnyPath, check_path_argument
from tokenmill.io.writers import atomic_path
from tokenmill.memory import gc_paused, release_memory
from tokenmill.tokenizer.bytelevel import from_byte_level
from tokenmill.tokenizer.ids import (
    ENDOFTEXT,
    FORMAT,
    MODES,
    NORMALIZATIONS,
    PATTERNS,
    check_special_ids,
    id_limit,
    show,
    whole_number,
)
from tokenmill.tokenizer.modes import Mode, mode_of
from tokenmill.tokenizer.options import (
    DEFAULT_PATTERN,
    check_chosen_ids,
    check_count,
    check_flag,
    check_options,
    check_special_names,
    check_utf8,
    lay_out_specials,
    merges_to_learn,
    refuse_bare_name,
    refuse_ranks_name,
    special_names,
)
from tokenmill.tokenizer.pattern_errors import pattern_message
from tokenmill.tokenizer.vocab import ImportedNumbering, NativeNumbering, OwnNumbering

# PyArrow and NumPy (and tokenmill.io.arrow, which needs both) are imported
# where they are used: loading a tokenizer and encoding strings needs neither,
# and importing them is a third of the start-up of `tokenmill.load`.
if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class Tokenizer:
    """A byte-pair-encoding tokenizer: train it (or `tokenmill.load` any
    tokenizer file), encode and decode with it as with tiktoken's Encoding,
    save it and load it again (docs/python-api.md).

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
    # vocab[i] is the bytes of id i (None where the id is a special token or unused).
    # (A factory, not a class-level default: a tokenizer of a native table has no
    # `vocab` until __getattr__ makes it, see `_imported`.)
    # special_ids[k] is the id of special_tokens[k], where the numbering does not
    # put them right after the merges (imported tables; ids chosen in training;
    # an extended tokenizer's base's).
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
        pattern: str | None = DEFAULT_PATTERN,
        lowercase: bool = False,
        vocab_size: int | None = None,
        num_merges: int | None = None,
        special_tokens: Sequence[str] | Mapping[str, int] | None = None,
    ) -> Tokenizer:
        """Train on in-memory texts: count their words, then learn merges
        until the vocabulary holds `vocab_size` tokens (or exactly `num_merges`
        merges are made, or no pair is left).

        `pattern` splits byte mode's text into words before merging: a preset
        (`"gpt2"`, `"cl100k"`, `"o200k"`: tiktoken's regexes), any regex in
        fancy-regex syntax (tiktoken's `pat_str`), or None: no split, each
        text one word, as minbpe's BasicTokenizer (recorded as the regex
        `[\\s\\S]+`). Char mode splits at whitespace and takes no pattern.
        A lone surrogate is read as U+FFFD, as `encode` reads it.

        `special_tokens`: a list of names, whose ids follow the merges in
        order; or a dict choosing each one's id (past the merges; ids left
        unused between them make `vocab_size` the highest id + 1, as
        tiktoken's `n_vocab`). The mode's own (`<|endoftext|>`; char mode
        also `<unk>`) are added when missing, at the first ids after the
        merges (as `tokenmill train` gives them).

        >>> tok = Tokenizer.train(["low lower lowest"] * 10, vocab_size=262)
        >>> tok.merge_pairs()[:2]
        [(b'l', b'o'), (b'lo', b'w')]
        >>> words = Tokenizer.train(["hi there"] * 5, pattern=r"\\S+|\\s+", num_merges=2)
        >>> words.tokens("hi there")
        ['hi', ' ', 'th', 'e', 'r', 'e']
        >>> nosplit = Tokenizer.train(["hi there"] * 5, pattern=None, num_merges=4)
        >>> nosplit.tokens("hi there")
        ['hi th', 'e', 'r', 'e']
        >>> eot = Tokenizer.train(["aaab"], num_merges=2, special_tokens={"<|endoftext|>": 300})
        >>> eot.eos_id, eot.vocab_size
        (300, 301)
        >>> Tokenizer.train(["x"], vocab_size=10)
        Traceback (most recent call last):
        ...
        tokenmill.errors.TokenmillError: vocab_size=10 is below the base vocabulary: ...
        """
        pattern = _training_pattern(mode, pattern, lowercase)
        texts = text_batch(texts, "train", "")
        table = word_table([arrow_texts(texts)], mode, pattern, lowercase)
        return cls._train_from_word_arrays(
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
        cls,
        words: Sequence[str],
        counts: Sequence[int],
        *,
        mode: str = "byte",
        pattern: str | None = DEFAULT_PATTERN,
        lowercase: bool = False,
        vocab_size: int | None = None,
        num_merges: int | None = None,
        special_tokens: Sequence[str] | Mapping[str, int] | None = None,
    ) -> Tokenizer:
        """Train on words already counted (in first-occurrence order: ties
        between pairs go to the pair seen first), as `train` does on the
        words it splits texts into; `pattern` is the one that split them,
        which encoding splits text with.

        >>> tok = Tokenizer.train_from_word_counts(["low", " lower"], [5, 3], num_merges=2)
        >>> tok.merge_pairs()
        [(b'l', b'o'), (b'lo', b'w')]
        """
        import pyarrow as pa

        pattern = _training_pattern(mode, pattern, lowercase)
        words = text_batch(words, "train_from_word_counts", "", "words")
        try:
            return cls._train_from_word_arrays(
                arrow_texts(words),
                pa.array(_counts(counts, len(words)), pa.uint64()),
                mode=mode,
                pattern=pattern,
                lowercase=lowercase,
                vocab_size=vocab_size,
                num_merges=num_merges,
                special_tokens=special_tokens,
            )
        except TokenmillError as e:
            # The core blames a count in the table, as a count table read from a
            # file may hold one gone wrong; here each count was checked in range.
            found = _TOO_MANY_PAIRS.search(str(e))
            if found is None:
                raise
            raise TokenmillError(
                f"train_from_word_counts: each count is in range, but together they make "
                f"{found[1]} pairs (each count times the adjacent pairs in its word), more "
                f"than the {found[2]} (2**63-1) that training counts"
            ) from None

    @classmethod
    def _train_from_word_arrays(
        cls,
        words: pa.Array,
        counts: pa.Array,
        *,
        mode: str = "byte",
        pattern: str = "cl100k",
        lowercase: bool = False,
        vocab_size: int | None = None,
        num_merges: int | None = None,
        special_tokens: Sequence[str] | Mapping[str, int] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> Tokenizer:
        """Train on Arrow arrays (large_string words, uint64 counts); `pattern`
        as `_training_pattern` resolves it."""
        import pyarrow as pa

        from tokenmill.io.arrow import arrow_buffers, large_text, one_array

        check_options(mode, pattern)
        # Cast only what needs it: any cast, even to the type an array has,
        # imports pyarrow.compute, a tenth of a training run's start-up.
        words = large_text(one_array(words))
        counts = one_array(counts)
        if counts.type != pa.uint64():
            counts = counts.cast(pa.uint64())
        model = mode_of(mode)
        alphabet, base = model.train_alphabet(words)
        pattern, lowercase = model.trained_options(pattern, lowercase)

        def learn(num_merges: int, _fixed: int) -> list[tuple[int, int]]:
            if not len(words):
                return []
            try:
                merges = _native.train_merges(
                    *arrow_buffers(words),
                    fixed_width_buffer(counts),
                    alphabet,
                    num_merges,
                    progress,
                )
            except _native.NativeError as e:  # a word table beyond what training can hold
                raise TokenmillError(f"train: {e}") from None
            release_memory()
            return merges

        return trained(
            learn,
            mode=mode,
            base=base,
            vocab_size=vocab_size,
            num_merges=num_merges,
            special_tokens=special_tokens,
            pattern=pattern,
            lowercase=lowercase,
            alphabet=alphabet or [],
        )

    @classmethod
    def _imported(
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
        another tool's file (`tokenmill.formats`), not yet checked (`_checked`).
        The encoder is built from the table where it is (`encoder`: one the
        caller already built from `table`, `pattern` and `whole_words`);
        `vocab` and `merges` become Python lists (400k objects for 200k
        tokens) only when first read."""
        order = sorted(special_tokens, key=special_tokens.__getitem__)
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

    def __setattr__(self, name: str, value: object) -> None:
        # Fixed once made: the encoder, the file's bytes and sha256 are each
        # built from the fields once, and a field changed after them would
        # encode with one table and save (or hash, or pickle) another.
        # __init__ sets each field once, on an object without it; a table's
        # tokenizer (`_imported`) holds its vocab and merges there.
        if name in _FIELD_NAMES and (name in self.__dict__ or "_table" in self.__dict__):
            raise _fixed(name)
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if name in _FIELD_NAMES:
            raise _fixed(name)
        super().__delattr__(name)

    def __getattr__(self, name: str) -> object:
        # Reached only for an attribute that is not set: `vocab` and `merges`
        # of a tokenizer made by `_imported`, until first read.
        table = self.__dict__.get("_table")
        if table is None or name not in ("vocab", "merges"):
            raise AttributeError(f"'Tokenizer' object has no attribute {name!r}")
        self.__dict__["vocab"], self.__dict__["merges"] = table.tokens(), table.merges()
        return self.__dict__[name]

    @property
    def _normalizer(self) -> str | None:
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
            assert self.special_ids is not None  # `_imported` gives them with the table

            def lists() -> tuple[list[bytes | None], list[tuple[int, int]]]:
                assert self.vocab is not None  # __getattr__ makes it from the table
                return self.vocab, self.merges

            return NativeNumbering(table, self.special_tokens, self.special_ids, lists)
        if self.vocab is None:
            return OwnNumbering(
                self._base_size, self.merges, self.special_tokens, self.special_ids,
                self.alphabet_ids,
            )  # fmt: skip
        return ImportedNumbering(self.vocab, self.merges, self.special_tokens, self.special_ids)

    @property
    def _base_size(self) -> int:
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
    def token_values(self) -> list[bytes | None] | list[str | None]:
        """Each id's bytes (byte mode) or string (char mode), specials as their text.

        An id that is no token (a gap in an imported vocabulary) has None.
        """
        mode = self._mode
        return self._numbering.values(
            mode.base_values(self.alphabet), mode.special_value, self.special_map
        )

    @cached_property
    def text_values(self) -> list[bytes | None] | list[str | None]:
        """`token_values` as `decode` joins them: char mode's end-of-word symbol
        as a space, the characters `</w>` of a word as themselves."""
        base = self._mode.text_base(self.alphabet)
        if base is None:
            return self.token_values
        return self._numbering.values(base, self._mode.special_value, self.special_map)

    @cached_property
    def _byte_vocab(self) -> list[bytes | None]:
        """Byte mode: the bytes of every non-special id (None for gaps)."""
        return self._numbering.non_special(lambda: self.token_values)

    @cached_property
    def _merge_ids(self) -> list[int]:
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

    def _given_tables(self, byte_ids: list[int], merge_ids: list[int]) -> None:
        """Take the id of each byte and the id each merge yields from the code
        that made the merges (deriving a ranks file's merges yields both), so
        that validation does not build them again: they must be what
        `_custom_byte_ids` and `_merge_ids` would give."""
        self.__dict__["_native_tables"] = (byte_ids, merge_ids)

    @cached_property
    def _custom_byte_ids(self) -> list[int] | None:
        """The id of each of the 256 bytes where they are not the byte values
        (imported vocabularies), else None."""
        tables = self._native_tables
        if tables is not None:
            return tables[0]
        return self._numbering.byte_ids(self._index)

    @property
    def _byte_ids(self) -> list[int]:
        """Byte mode: the id of each of the 256 bytes."""
        ids = self._custom_byte_ids
        return list(range(256)) if ids is None else ids

    def _checked(self, source: str, *, compile_pattern: bool = True) -> Tokenizer:
        """`_validate`, and build the encoder (compiling a custom pattern), with
        errors naming `source`, the file the tokenizer came from."""
        try:
            self._validate()
            if compile_pattern:
                self._encoder  # noqa: B018
            else:
                self._mode.check_pattern(self)
        except TokenmillError as e:
            raise TokenmillError(f"{source}: {e}") from None
        except _native.NativeError as e:  # tables or a pattern the encoder cannot take
            raise TokenmillError(f"{source}: {pattern_message(str(e))}") from None
        except (TypeError, OverflowError, IndexError) as e:
            # A value of the wrong type that slipped past _validate: still one line.
            raise TokenmillError(f"{source}: malformed tokenizer ({e})") from None
        return self

    def _validate(self) -> Tokenizer:
        """Check that the tables are consistent; raise TokenmillError if not.

        Linear in the size of the tables: the checks are what keeps a bad file
        from loading and then failing (or silently mis-encoding) later."""
        if self.mode not in MODES:
            raise TokenmillError(f"unknown mode {show(self.mode)}")
        if self.special_ids is not None and len(self.special_ids) != len(self.special_tokens):
            raise TokenmillError("special_ids and special_tokens differ in length")
        self._check_names()
        if self.normalization not in NORMALIZATIONS:
            raise TokenmillError(
                f"normalizer {show(self.normalization)} is not supported (tokenmill applies "
                "NFC or none, as byte-level BPE files do)"
            )
        self._mode.check_fields(self)
        self._numbering.check(self._mode, self)
        self._custom_byte_ids  # noqa: B018  (raises when a byte is missing)
        if not self._numbering.core_made_merge_ids:
            self._merge_ids  # noqa: B018  (raises when a merge yields no token)
        return self

    def _check_names(self) -> None:
        """The special tokens' names and the pattern: each a str UTF-8 holds."""
        check_special_names(self.special_tokens, "special_tokens")
        if isinstance(self.pattern, str):
            check_utf8(self.pattern, "pattern")

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
        if len(self.merges) != len(self._merge_ids):
            raise ValueError("merges and merge_ids differ in length")
        # The core pairs merges with their ids: zipping 32k triples here took
        # ~4 ms. It takes merges as a list (a Tokenizer may hold a tuple).
        return self._mode.encoder(self, list(self.merges), self._merge_ids)

    def _normalize(self, docs: pa.Array) -> pa.Array:
        """`docs` (large_string) under the tokenizer's normalization: NFC as
        Hugging Face tokenizers computes it, by its tables (the native core's)."""
        if self.normalization:
            import pyarrow as pa

            from tokenmill.io.arrow import arrow_buffers

            offsets, data = _native.nfc(*arrow_buffers(docs))
            return pa.LargeStringArray.from_buffers(
                len(docs), pa.py_buffer(offsets), pa.py_buffer(data)
            )
        return docs

    @property
    def _wide_ids(self) -> bool:
        """Whether ids need 32 bits (else they fit uint16)."""
        return self.vocab_size > 1 << 16

    @property
    def _id_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.uint32() if self._wide_ids else pa.uint16()

    @property
    def _ids_type(self) -> pa.DataType:
        """A document's token ids: never null, which also makes Parquet's level
        encoding of the column cheaper."""
        import pyarrow as pa

        return pa.large_list(pa.field("item", self._id_type, nullable=False))

    @property
    def special_tokens_set(self) -> frozenset[str]:
        """The special tokens, as a set (tiktoken's `special_tokens_set`)."""
        return frozenset(self.special_tokens)

    def encode(
        self,
        text: str,
        *,
        allowed_special: Set[str] | Literal["all"] = frozenset(),
        disallowed_special: Collection[str] | Literal["all"] = "all",
        eos: bool = False,
    ) -> list[int]:
        """The token ids of `text` (then `<|endoftext|>`'s when `eos`), as
        tiktoken's `Encoding.encode`: the text of a special token in
        `allowed_special` (a set, or "all") becomes that token's id; the text
        of one in `disallowed_special` (by default every special token not
        allowed) raises DisallowedSpecialTokenError, a ValueError; any other
        text is encoded as text. Lone surrogates become U+FFFD, as in tiktoken.

        >>> tok = Tokenizer.train(["hello world"] * 10, vocab_size=270)
        >>> tok.encode("hello")
        [259]
        >>> tok.encode("hello", eos=True) == [259, tok.eos_id]
        True
        >>> tok.encode("hello<|endoftext|>", allowed_special="all") == [259, tok.eos_id]
        True
        >>> tok.encode("hello<|endoftext|>")
        Traceback (most recent call last):
        ...
        tokenmill.errors.DisallowedSpecialTokenError: Encountered text corresponding to ...
        >>> text = "hello<|endoftext|>"
        >>> tok.encode(text, disallowed_special=()) == tok.encode_ordinary(text)
        True
        """
        check_flag("eos", eos)
        _check_text(text, "encode")
        allowed = self._allowed_specials([text], allowed_special, disallowed_special)
        if allowed:
            ids: list[int] = []
            for part in self._split_specials(text, allowed):
                if isinstance(part, str):
                    ids += self.encode_ordinary(part)
                else:
                    ids.append(part)
        else:
            ids = self.encode_ordinary(text)
        if eos:
            ids.append(self.eos_id)
        return ids

    def encode_ordinary(self, text: str) -> list[int]:
        """The token ids of `text`, the text of special tokens encoded as any
        other text (tiktoken's `encode_ordinary`).

        >>> tok = Tokenizer.train(["hello world"] * 10, vocab_size=270)
        >>> tok.encode_ordinary("hello") == tok.encode("hello")
        True
        """
        _check_text(text, "encode_ordinary")
        try:
            return self._encode_native(text)
        except UnicodeEncodeError:  # lone surrogates, which UTF-8 cannot hold
            return self._encode_native(_valid_unicode(text))

    def _encode_native(self, text: str) -> list[int]:
        if self.normalization:
            import pyarrow as pa

            text = self._normalize(pa.array([text], pa.large_string()))[0].as_py()
        try:
            return self._encoder.encode(text, None)
        except _native.NativeError as e:  # a custom pattern hit the regex engine's limits
            raise TokenmillError(pattern_message(str(e))) from None

    def encode_batch(
        self,
        texts: Iterable[str],
        *,
        allowed_special: Set[str] | Literal["all"] = frozenset(),
        disallowed_special: Collection[str] | Literal["all"] = "all",
        eos: bool = False,
        parallel: bool = True,
    ) -> list[list[int]]:
        """The token ids of each text, as `encode` gives them, encoded on the
        native thread pool (or on the calling thread alone when not
        `parallel`).

        >>> tok = Tokenizer.train(["hello world"] * 10, vocab_size=270)
        >>> tok.encode_batch(["hello", " world", ""])
        [[259], [264], []]
        >>> tok.encode_batch(["hello"]) == [tok.encode("hello")]
        True
        >>> tok.encode_batch(["hi<|endoftext|>"], allowed_special="all")[0][-1] == tok.eos_id
        True
        """
        check_flag("eos", eos)
        texts = text_batch(texts, "encode_batch")
        allowed = self._allowed_specials(texts, allowed_special, disallowed_special)
        if not allowed:
            return self._encode_texts(texts, eos, parallel)
        # Every text's ordinary parts in one batch, then each text put together.
        split = [self._split_specials(text, allowed) for text in texts]
        ordinary = [part for parts in split for part in parts if isinstance(part, str)]
        encoded = iter(self._encode_texts(ordinary, False, parallel))
        out = []
        for parts in split:
            ids: list[int] = []
            for part in parts:
                if isinstance(part, str):
                    ids += next(encoded)
                else:
                    ids.append(part)
            if eos:
                ids.append(self.eos_id)
            out.append(ids)
        return out

    def encode_ordinary_batch(
        self, texts: Iterable[str], *, parallel: bool = True
    ) -> list[list[int]]:
        """`encode_ordinary` of each text, on the native thread pool (or on the
        calling thread alone when not `parallel`).

        >>> tok = Tokenizer.train(["hello world"] * 10, vocab_size=270)
        >>> tok.encode_ordinary_batch(["hello", "<|endoftext|>"])[0]
        [259]
        """
        texts = text_batch(texts, "encode_ordinary_batch", ": use encode_ordinary")
        return self._encode_texts(texts, False, parallel)

    def _encode_texts(self, texts: list[str], eos: bool, parallel: bool) -> list[list[int]]:
        ids, _ = self.encode_arrow(arrow_texts(texts), eos=eos, parallel=parallel)
        return ids.to_pylist()

    def _allowed_specials(
        self,
        texts: list[str],
        allowed_special: Set[str] | Literal["all"],
        disallowed_special: Collection[str] | Literal["all"],
    ) -> frozenset[str]:
        """The special tokens whose text `encode` makes their ids, after refusing
        a text that holds a disallowed one, as tiktoken does."""
        for name, value in (
            ("allowed_special", allowed_special),
            ("disallowed_special", disallowed_special),
        ):
            # A str other than "all" is no set either: as a Collection, its characters.
            if value != "all" if isinstance(value, str) else not isinstance(value, Collection):
                raise TypeError(f"{name}={show(value)}: want a set of special tokens, or 'all'")
        specials = self.special_tokens_set
        allowed = specials if allowed_special == "all" else frozenset(allowed_special)
        if disallowed_special == "all":
            disallowed = specials - allowed
        else:
            disallowed = frozenset(disallowed_special)
        if disallowed:
            search = _special_regex(disallowed).search
            for k, text in enumerate(texts):
                found = search(text)
                if found:
                    token = found.group()
                    where = f" (text {k} of the batch)" if len(texts) > 1 else ""
                    # A token disallowed by name is refused even when allowed, as
                    # tiktoken refuses it: allowing it is no way out then.
                    fix = (
                        f"pass allowed_special={{{token!r}}} (or 'all') to encode it as the "
                        "special token, or disallowed_special=() to encode it as text"
                        if disallowed_special == "all"
                        else "it is in disallowed_special=: leave it out to encode it as "
                        + (
                            "text or, allowed, as the special token"
                            if token in specials
                            else "text"
                        )
                    )
                    raise DisallowedSpecialTokenError(
                        "Encountered text corresponding to disallowed special token "
                        f"{token!r}{where}: {fix}"
                    )
        return allowed & specials

    def _split_specials(self, text: str, allowed: frozenset[str]) -> list[str | int]:
        """`text` as its ordinary parts (str, never empty) and the ids of the
        `allowed` special tokens between them, in order."""
        parts = _special_regex(allowed).split(text)
        ids = self.special_map
        # split() with one group: the special tokens at the odd places.
        return [ids[p] if k % 2 else p for k, p in enumerate(parts) if p]

    def encode_arrow(
        self, docs: pa.Array, *, eos: bool = True, parallel: bool = True
    ) -> tuple[pa.Array, pa.Array]:
        """Encode an array of strings (string, large_string or string_view;
        chunked or not) as ordinary text, as the pipeline encodes documents:
        (ids as list<uint16|uint32>, n_tokens uint32), on the native thread
        pool (`parallel`) or on the calling thread.

        >>> import pyarrow as pa
        >>> tok = Tokenizer.train(["hello world"] * 10, vocab_size=270)
        >>> ids, n_tokens = tok.encode_arrow(pa.array(["hello", "hello world"]))
        >>> ids.to_pylist() == [tok.encode(t, eos=True) for t in ["hello", "hello world"]]
        True
        >>> n_tokens.to_pylist()
        [2, 3]
        """
        import numpy as np
        import pyarrow as pa

        from tokenmill.io.arrow import arrow_buffers

        check_flag("eos", eos)
        check_flag("parallel", parallel)
        docs = _text_array(docs)
        n = len(docs)
        id_type, list_type = self._id_type, self._ids_type
        try:
            ids, lens = self._encoder.encode_batch(
                *arrow_buffers(self._normalize(docs)),
                self.eos_id if eos else None,
                self._wide_ids,
                parallel,
            )
        except (_native.NativeError, pa.ArrowInvalid) as e:  # normalizing: invalid UTF-8
            raise TokenmillError(_invalid_document(docs) or pattern_message(one_line(e))) from None
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
        """The text's segmentation as token strings (bytes shown decoded), as
        `encode_ordinary` makes it.

        >>> Tokenizer.train(["hello world"] * 10, vocab_size=270).tokens("hello world!")
        ['hello', ' world', '!']
        """
        values = self.token_values
        texts = []
        for i in self.encode_ordinary(text):
            v = values[i]
            assert v is not None  # encoding yields tokens, never a gap's id
            texts.append(v if isinstance(v, str) else v.decode("utf-8", errors="replace"))
        return texts

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
        if isinstance(ids, str | Mapping) or not isinstance(ids, Iterable):
            raise TypeError(f"decode: ids= is {type(ids).__name__}, not a sequence of ids")
        ndim = getattr(ids, "ndim", 1)  # NumPy's arrays, and tensors
        if ndim != 1:
            # Iterated, a 2-D array's rows met NumPy's "truth value ... is ambiguous",
            # and a 0-D array cannot be iterated.
            raise TokenmillError(
                f"decode: ids= is a {ndim}-D array; give one document's ids (a 1-D array)"
            )
        values = self.text_values
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
            k, odd = next((k, i) for k, i in enumerate(ids) if type(i) is not int)
            raise TokenmillError(f"ids[{k}]={show(odd)} is not an integer") from None
        if None in parts:
            raise TokenmillError(
                f"id {ids[parts.index(None)]} is no token (a gap in a vocabulary of {n})"
            )
        return self._mode.join(parts)

    # ---- persistence ------------------------------------------------

    def to_dict(self) -> dict:
        """The tokenizer file as a dict (`from_dict` reads it back)."""
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
        """The tokenizer file that `save` writes, as text."""
        return self._file_bytes.decode()

    @cached_property
    def _file_bytes(self) -> bytes:
        """The tokenizer file, UTF-8. Computed once: save() and sha256 both
        need it, and a tokenizer is not changed after creation. A table the
        native core holds writes its vocab and merges there, and the core
        writes the merges of any other, as json.dumps would
        (tests/test_vocab_load.py compares)."""
        # Given by dataclasses.replace or the bare constructor, which check
        # nothing: said in one line, not as the UnicodeEncodeError below.
        self._check_names()
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
        """Of its tokenmill JSON: the bytes of the tokenmill file it was loaded
        from, else (trained, or of a .tiktoken or Hugging Face file) those
        save() writes, not the other tool's file's."""
        return hashlib.sha256(self._file_bytes).hexdigest()

    def save(self, path: AnyPath) -> None:
        """Write the tokenizer as tokenmill JSON (atomically: a reader sees
        the old file or the new one). `load` reads it back, under any name
        but a .tiktoken one (tiktoken's ranks), which is refused.

        >>> import tempfile, pathlib
        >>> tok = Tokenizer.train(["hello world"] * 10, vocab_size=270)
        >>> with tempfile.TemporaryDirectory() as d:
        ...     path = pathlib.Path(d) / "tok.json"
        ...     tok.save(path)
        ...     again = Tokenizer.load(path)
        >>> again == tok, again.sha256 == tok.sha256
        (True, True)
        """
        check_path_argument(path, "save")
        refuse_ranks_name(path, "save")
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

        def field_of(key: str, kind: type | tuple[type, ...], default: object) -> Any:
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
        specials = sorted(raw_specials, key=raw_specials.__getitem__)
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
            pattern=_file_pattern(field_of("pattern", str, ""), d, malformed),
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
        tok._checked(source, compile_pattern=False)
        try:
            tok._numbering.check_file_special_ids(raw_specials)
        except TokenmillError as e:
            raise TokenmillError(f"{source}: {e}") from None
        size = d.get("vocab_size", tok.vocab_size)
        if type(size) is not int or size != tok.vocab_size:
            raise TokenmillError(
                f"{source}: vocab_size is {show(size)} but the file's tokens have "
                f"{tok.vocab_size} ids (0 to {tok.vocab_size - 1})"
            )
        return tok

    @classmethod
    def load(cls, path: AnyPath) -> Tokenizer:
        """A tokenizer file that `save` wrote, checked (TokenmillError naming
        the file when it is malformed). `tokenmill.load` reads it too, and
        other tools' files (Hugging Face tokenizer.json, .tiktoken ranks).

        >>> Tokenizer.load("vocabularies/gpt2.tiktoken")
        Traceback (most recent call last):
        ...
        tokenmill.errors.TokenmillError: vocabularies/gpt2.tiktoken: not a tokenmill ...
        """
        check_path_argument(path, "Tokenizer.load")
        data = read_bytes(path, "tokenizer")
        other = TokenmillError(
            f"{path}: not a tokenmill tokenizer file: tokenmill.load(path) reads it if it is "
            "a Hugging Face tokenizer.json or .tiktoken ranks"
        )
        if data.lstrip()[:1] != b"{":
            raise other
        with gc_paused():
            d = parse_json(data, path)
            if not isinstance(d, dict) or d.get("format") != FORMAT:
                raise other
            return cls._from_file(d, data, str(path))

    @classmethod
    def _from_file(
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
            and tok._custom_byte_ids is None
            and tok._merge_ids == list(range(256, 256 + len(tok.merges)))
        ):
            tok.__dict__["_encoder"] = encoder
        # The file's own hash: re-serializing 32k merges just to hash them
        # would hold up every encode run (a file save() wrote hashes the same).
        tok.__dict__["sha256"] = hashlib.sha256(data).hexdigest()
        return tok

    # ---- pickling (to worker processes): tables only, no native state --

    def __getstate__(self) -> dict:
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        if "sha256" in self.__dict__:
            # The hash of the file it was loaded from, which may be laid out
            # otherwise than save() writes (indented by hand): made again from
            # the fields, a worker's shards would name another tokenizer.
            state["sha256"] = self.__dict__["sha256"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


_FIELD_NAMES = frozenset(f.name for f in fields(Tokenizer))


def _fixed(name: str) -> FrozenInstanceError:
    return FrozenInstanceError(
        f"a Tokenizer's {name} is fixed once it is made: make another, e.g. "
        f"dataclasses.replace(tok, pattern=...) (with {name}=...)"
    )


def trained(
    learn: Callable[[int, int], list[tuple[int, int]]],
    *,
    mode: str,
    base: int,
    vocab_size: int | None,
    num_merges: int | None,
    special_tokens: Sequence[str] | Mapping[str, int] | None,
    check_range: Callable[[int, int], None] | None = None,
    **fields: Any,
) -> Tokenizer:
    """The frame of every training: the merges to learn from `vocab_size` or
    `num_merges` and the special tokens (as `Tokenizer.train` takes them) over
    `base` base tokens; `learn(merges, fixed)` learns up to that many merges
    (`fixed`: the ids of no merge, base and special tokens), and the special
    tokens get their ids after the merges it learned. `check_range(fixed,
    merges)` checks an option against those numbers first; `fields` are the
    Tokenizer's other fields."""
    vocab_size = check_count(vocab_size, "vocab_size")
    num_merges = check_count(num_merges, "num_merges")
    names, chosen = special_names(special_tokens, mode)
    fixed = base + len(names)
    total = merges_to_learn(
        vocab_size,
        num_merges,
        fixed,
        f"the base vocabulary: {base} base tokens + {len(names)} special tokens = {fixed}",
    )
    if check_range is not None:
        check_range(fixed, total)
    if chosen:
        check_chosen_ids(chosen, base + total, fixed + total)
    # The merges come back as tens of thousands of new tuples: gc_paused.
    with gc_paused():
        merges = learn(total, fixed)
        if chosen and len(merges) < total:
            try:  # fewer tokens than planned number fewer ids
                check_chosen_ids(chosen, base + len(merges), fixed + len(merges))
            except TokenmillError as e:
                raise TokenmillError(
                    f"training stopped at {len(merges)} merges (no pair left): {e}"
                ) from None
        specials, special_ids = lay_out_specials(names, chosen, base + len(merges))
        return Tokenizer(
            mode=mode,
            merges=merges,
            special_tokens=specials,
            special_ids=special_ids,
            **fields,
        )


def word_table(
    batches: Iterable[pa.Array], mode: str, pattern: str, lowercase: bool, *, parallel: bool = True
) -> pa.Table:
    """Count the words of documents given as large_string batches, on the
    native thread pool (`parallel`) or on the calling thread alone.

    Columns: word, count, first (``row << 32 | position``: where the word was
    first seen), sorted by first occurrence.
    """
    return word_tables(batches, mode, [pattern], lowercase, parallel=parallel)[0]


def word_tables(
    batches: Iterable[pa.Array],
    mode: str,
    patterns: Sequence[str],
    lowercase: bool,
    *,
    parallel: bool = True,
) -> list[pa.Table]:
    """`word_table` of each of `patterns`, from one pass over the batches."""
    from tokenmill.io.arrow import arrow_buffers

    for pattern in patterns:
        check_options(mode, pattern)
    counters = [mode_of(mode).counter(pattern, lowercase) for pattern in patterns]
    row = 0
    for docs in batches:
        if len(docs):
            buffers = arrow_buffers(docs)
            try:
                for counter in counters:
                    counter.add(*buffers, row, parallel)
            except _native.NativeError as e:  # a custom pattern that misses text
                raise TokenmillError(pattern_message(str(e))) from None
        row += len(docs)
    return [_counted(counter) for counter in counters]


def _counted(counter: _native.Counter) -> pa.Table:
    import pyarrow as pa

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
    (`tokenizer/extend.py`), or past them, as training may choose them; else
    None (the numbering puts them, and a file that puts them elsewhere is
    refused, naming where they belong)."""
    base = 256 if mode == "byte" else len(alphabet)
    size = base + merges + len(ids)
    default = list(range(base + merges, size))
    low = 0 if grown_alphabet else base  # added characters have ids after the specials
    if ids == default or not all(type(i) is int and low <= i < id_limit(size) for i in ids):
        return None
    return ids


@cache
def _special_regex(tokens: frozenset[str]) -> re.Pattern[str]:
    """One group matching any of `tokens`; the longest first, so that a token
    that begins another does not cut it short."""
    alternation = "|".join(map(re.escape, sorted(tokens, key=lambda t: (-len(t), t))))
    return re.compile(f"({alternation})")


def _valid_unicode(text: str) -> str:
    """`text` as UTF-8 can hold it, as tiktoken makes it: a surrogate pair
    written as two code points joined, a lone surrogate U+FFFD."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def arrow_texts(texts: list[str]) -> pa.Array:
    """`texts` as a large_string array, a lone surrogate as U+FFFD (`_valid_unicode`),
    as encode_ordinary makes it: UTF-8 cannot hold one, and pyarrow refuses it.
    Only a batch that holds one is gone over in Python."""
    import pyarrow as pa

    try:
        return pa.array(texts, pa.large_string())
    except UnicodeEncodeError:
        return pa.array([_valid_unicode(t) for t in texts], pa.large_string())


# No split: each text is one word (minbpe's BasicTokenizer). A regex, not a
# flag, so that every file format records it as any pattern, and one that
# Hugging Face's engine reads the same (no inline flags).
NO_SPLIT = r"[\s\S]+"


def _training_pattern(mode: str, pattern: str | None, lowercase: bool) -> str:
    """Train's `pattern` as a tokenizer records it: a preset by its name (its
    regex written out too), None as NO_SPLIT, any other regex compiled here,
    so that a bad one fails before any counting. An option the mode does not
    use is refused: ignored, it would train another tokenizer than the one
    asked for."""
    check_flag("lowercase", lowercase)
    check_options(mode, pattern)
    if mode != "byte":
        if pattern not in (None, DEFAULT_PATTERN):
            raise TokenmillError(
                f"pattern={show(pattern)}: char mode splits at whitespace and takes no pattern"
            )
        return ""
    if lowercase:
        raise TokenmillError("lowercase=True is char mode's: byte mode keeps every byte")
    if pattern is None:
        return NO_SPLIT
    if pattern in PATTERNS:
        return pattern
    preset = next((p for p in PATTERNS if _native.preset_regex(p) == pattern), None)
    if preset is not None:
        return preset
    refuse_bare_name(pattern)
    try:
        _native.Counter.byte(pattern)  # compiles it, no more
    except _native.NativeError as e:
        raise TokenmillError(pattern_message(str(e))) from None
    return pattern


def _file_pattern(pattern: str, d: dict, malformed) -> str:
    """A tokenizer file's `pattern`, checked against its `pattern_regex`: save
    writes the regex there (the preset's, or `pattern` itself) for other
    tools to read. A file where they differ says two things, and whichever
    were taken, the other's reader would split text another way."""
    try:
        check_utf8(pattern, "pattern")
    except TokenmillError as e:
        raise malformed(str(e)) from None
    if "pattern_regex" not in d:
        return pattern
    written = d["pattern_regex"]
    expected = _native.preset_regex(pattern) or pattern
    if written != expected:
        raise malformed(
            f"pattern {pattern!r} and pattern_regex {show(written)} disagree: pattern is a "
            "preset name (gpt2, cl100k, o200k) with that preset's regex, or the regex itself"
        )
    return pattern


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
        from_byte_level(v)  # type: ignore[arg-type]  # anything: its errors say no
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def fixed_width_buffer(arr: pa.Array) -> memoryview:
    """The values buffer of a primitive array, sliced to the array's extent."""
    import pyarrow as pa

    from tokenmill.io.arrow import byte_view

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    width = arr.type.byte_width
    return byte_view(arr.buffers()[1][arr.offset * width : (arr.offset + len(arr)) * width])


def _text_array(docs: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Documents as one large_string array, the form the native core reads;
    an array of anything but strings is refused rather than cast."""
    import pyarrow as pa

    from tokenmill.io.arrow import is_text, large_text

    if isinstance(docs, pa.ChunkedArray):
        docs = docs.combine_chunks()
    if not isinstance(docs, pa.Array):
        raise TypeError(
            f"encode_arrow takes a pyarrow array of strings, not {type(docs).__name__}: "
            "use encode_batch for a list"
        )
    if pa.types.is_dictionary(docs.type) and is_text(docs.type.value_type):
        docs = docs.dictionary_decode()
    if not is_text(docs.type):
        raise TokenmillError(f"encode_arrow takes an array of strings, not of {docs.type}")
    if docs.null_count:  # the native core would read a null as an empty document
        first = docs.is_null().to_numpy(zero_copy_only=False).argmax()
        raise TokenmillError(f"encode_arrow: document {first} is null, not a string")
    return large_text(docs)


def _invalid_document(docs: pa.Array) -> str | None:
    """Which document of `docs` is not UTF-8, or None when all are. The native
    core checks a batch's text at once, and says where in the batch's bytes
    the fault is: not which document, and a character cut between two
    documents it finds only as an offset off a character boundary."""
    import pyarrow as pa

    try:
        docs.validate(full=True)  # every string, each on its own
    except pa.ArrowInvalid as e:
        found = re.search(r"string index (\d+)", str(e))
        if found:
            return f"encode_arrow: document {found.group(1)} is not valid UTF-8"
    return None


# The native core's refusal of a word table whose pairs outnumber its counters.
_TOO_MANY_PAIRS = re.compile(r"the word counts make (\d+) pairs, more than the (\d+) that")


def _check_text(text: object, method: str) -> None:
    # Else bytes met the regex engine's own error and None Python's, naming neither.
    if not isinstance(text, str):
        raise TypeError(f"{method}: text= is {type(text).__name__}, not str")


def _counts(counts: Sequence[int], n_words: int) -> list[int]:
    """train_from_word_counts' `counts`, one whole number in 0..2**63-1 per
    word (training adds them up in 64-bit signed integers): pyarrow would
    truncate a float and overflow on a negative one."""
    out = []
    for k, given in enumerate(_listed(counts, "train_from_word_counts", "counts")):
        count = whole_number(given)
        if count is None or not 0 <= count < 2**63:
            raise TokenmillError(
                f"train_from_word_counts: counts[{k}]={show(given)} is not a count "
                "(a whole number from 0 to 2**63-1)"
            )
        out.append(count)
    if len(out) != n_words:
        raise TokenmillError(
            f"train_from_word_counts: counts= has {len(out)} entries for {n_words} words"
        )
    return out


def _listed(values: Iterable, method: str, name: str) -> list:
    """`values` as a list; a TypeError naming `method`'s argument `name` when
    it is no iterable (Python's own message names neither: "'NoneType' object
    is not iterable")."""
    if not isinstance(values, Iterable) or getattr(values, "ndim", 1) == 0:
        raise TypeError(f"{method}: {name}= is {type(values).__name__}, not a list of {name}")
    return list(values)


def text_batch(
    texts: Iterable[str], method: str, hint: str = ": use encode", name: str = "texts"
) -> list[str]:
    """`texts` as a list of str. A string is an iterable of texts too (its
    characters', silently), and pyarrow takes None for an empty document and
    bytes for text: each is a TypeError naming its place, as `encode(None)` is."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(
            f"{method} takes a list of {name}, not one text ({name}={show(texts)}){hint}"
        )
    texts = _listed(texts, method, name)
    if not all(type(text) is str for text in texts):  # the fast check; then which one
        for k, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"{method}: {name}[{k}] is {type(text).__name__}, not str")
    return texts
