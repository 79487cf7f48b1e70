"""The id space of a tokenizer: which id each base token, merge and special
token has, and the value (bytes or str) of every id.

Two numberings, behind one interface:

- `OwnNumbering`, tokenmill's: the base tokens, then one id per merge in rank
  order, then the special tokens. An extended tokenizer (`tokenizer/extend.py`)
  keeps its base's special ids among them: merges then take the ids the
  special tokens leave free, in order. Special ids chosen in training
  (`Tokenizer.train(special_tokens={...})`) lie past the merges, and may
  leave ids unused between them, as tiktoken's cl100k does.
- `ImportedNumbering`, a byte-level vocabulary read from another tool's file:
  an explicit table of each id's bytes (gaps allowed), special tokens at ids of
  their own, and a merge (a, b) yields the id whose bytes are a's then b's.

>>> from tokenmill.tokenizer.modes import BYTE
>>> own = OwnNumbering(base_size=256, merges=[(104, 105)], special_tokens=["<|endoftext|>"])
>>> own.size, own.merge_ids(own.index), own.special_id(0)
(258, [256], 257)
>>> own.values(BYTE.base_values([]), BYTE.special_value, {"<|endoftext|>": 257})[256:]
[b'hi', b'<|endoftext|>']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tokenmill import _native
from tokenmill.errors import TokenmillError
from tokenmill.tokenizer.bytelevel import to_byte_level
from tokenmill.tokenizer.ids import MAX_VOCAB_SIZE, check_id, id_limit, show
from tokenmill.tokenizer.modes import Mode, Tokenizer

# Gives bytes -> id of an explicit table: called only by the numberings that
# read it, as building it makes a dict entry per token.
Index = Callable[[], dict[bytes, int]]


class OwnNumbering:
    """tokenmill's numbering: base tokens, one per merge, then specials."""

    __slots__ = ("alphabet_ids", "base_size", "merges", "special_ids", "special_tokens")
    # Whether the native core made the merge ids with the table, so that
    # validating need not build them: here they follow from the merges.
    core_made_merge_ids = False

    def __init__(
        self,
        base_size: int,
        merges: Sequence[tuple[int, int]],
        special_tokens: Sequence[str],
        special_ids: Sequence[int] | None = None,
        alphabet_ids: Sequence[int] | None = None,
    ) -> None:
        self.base_size = base_size
        self.merges = merges
        self.special_tokens = special_tokens
        self.special_ids = special_ids
        # Char mode with an alphabet grown by extending: each base token's id.
        self.alphabet_ids = alphabet_ids

    @property
    def n_tokens(self) -> int:
        return self.base_size + len(self.merges) + len(self.special_tokens)

    @property
    def size(self) -> int:
        """The ids: the tokens, and any unused ids below a special token's."""
        ids = [i + 1 for i in self.special_ids or () if type(i) is int]
        return max([self.n_tokens, *ids])

    def special_id(self, k: int) -> int:
        """The id of the k-th special token (given ones: see `check`)."""
        if self.special_ids is not None:
            return self.special_ids[k]
        return self.base_size + len(self.merges) + k

    def _free_ids(self) -> list[int]:
        """The id of each merge: the ids from the base on that no special token has."""
        taken = set(self.special_ids or ())
        ids: list[int] = []
        i = self.base_size
        if self.alphabet_ids is not None:
            taken |= set(self.alphabet_ids)
            i = 0
        while len(ids) < len(self.merges):
            if i not in taken:
                ids.append(i)
            i += 1
        return ids

    def _laid_out(self) -> bool:
        """Whether special ids sit somewhere other than right after the merges."""
        n = self.base_size + len(self.merges)
        return self.alphabet_ids is not None or (
            self.special_ids is not None
            and list(self.special_ids) != list(range(n, n + len(self.special_tokens)))
        )

    def values(
        self, base: list, special_value: Callable[[str], object], specials: Mapping[str, int]
    ) -> list:
        """Every id's value: `base` (the mode's base values, extended in place),
        then merged pairs, then the special tokens (`specials`: token -> id)."""
        values = base
        if self._laid_out():
            if self.alphabet_ids is not None:
                values = [None] * self.size
                for v, i in zip(base, self.alphabet_ids, strict=True):
                    values[i] = v
            values += [None] * (self.size - len(values))
            for (a, b), i in zip(self.merges, self._free_ids(), strict=True):
                values[i] = values[a] + values[b]
            for token, i in specials.items():
                values[i] = special_value(token)
            return values
        for a, b in self.merges:
            values.append(values[a] + values[b])
        for token in specials:
            values.append(special_value(token))
        return values

    def non_special(self, values: Callable[[], list]) -> list:
        """The values of the ids that are no special tokens (`values`: all of them)."""
        if self._laid_out():
            table = list(values())
            for i in self.special_ids:  # type: ignore[union-attr]
                table[i] = None
            return table
        return values()[: self.base_size + len(self.merges)]

    def index(self) -> dict[bytes, int]:
        """Bytes -> id of an explicit table: none here (ids follow from merges)."""
        return {}

    def merge_ids(self, index: Index) -> list[int]:
        """The id each merge yields, in rank order."""
        if self._laid_out():
            return self._free_ids()
        return list(range(self.base_size, self.base_size + len(self.merges)))

    def byte_ids(self, index: Index) -> list[int] | None:
        """The id of each byte where it is not the byte's value: None here."""
        return None

    def native_tables(self) -> tuple[list[int], list[int]] | None:
        """(byte_ids, merge_ids) from the native core, for explicit tables: None here."""
        return None

    def encoder(self, tok: Tokenizer) -> _native.Encoder | None:
        """The native encoder, where the numbering builds it: not here (the mode does)."""
        return None

    def file_fields(self) -> dict:
        """The numbering's entries of a tokenizer file: none (ids follow from merges)."""
        return {}

    def file_tables(self) -> bytes | None:
        """The file's vocab and merges as JSON, written by the native core: not here."""
        return None

    def check_file_special_ids(self, ids: Mapping[str, int]) -> None:
        """A file's special-token ids: they follow the merges, in the order of their ids
        (or, in an extended tokenizer, are those given: `check` checks them)."""
        if self._laid_out():
            return
        n = self.base_size + len(self.merges)
        for k, name in enumerate(self.special_tokens):
            if ids[name] != n + k:
                raise TokenmillError(
                    f"special token {name!r} has id {ids[name]}, not "
                    f"{n + k}: without a vocab, special tokens are numbered from {n}, "
                    "right after the merges"
                )

    def check(self, mode: Mode, tok: Tokenizer) -> None:
        """The mode's base vocabulary, then: merge k makes id base + k from
        ids made before it, no merge twice, specials right after the merges."""
        mode.check_base(tok)
        base = self.base_size
        if self.n_tokens > MAX_VOCAB_SIZE:
            raise TokenmillError(f"more than {MAX_VOCAB_SIZE} tokens: ids are 32-bit")
        # Merge k makes its id (base + k, or the k-th id no special token has)
        # from ids made before it, none of them a special token.
        made_ids = self.merge_ids(self.index) if self._check_special_layout() else None
        specials = set(self.special_ids or ())
        # The native core checks 32k merges in a millisecond, merge_fault in
        # ten (a tenth of loading a tokenizer): it runs to name the fault.
        if not _native.merges_valid(self.merges, base, made_ids, list(specials)):
            fault = merge_fault(self.merges, base, made_ids, specials)
            if fault is not None:
                raise TokenmillError(fault)

    def _check_special_layout(self) -> bool:
        """Given special ids: distinct integers from the base on, below
        `id_limit` of the tokens (merges fill the ids free between them, from
        the base on). Whether they are laid out so."""
        if not self._laid_out():
            return False
        ids = list(self.special_ids or ())
        low = self.base_size
        if self.alphabet_ids is not None:
            chars = list(self.alphabet_ids)
            if len(chars) != self.base_size or any(
                type(i) is not int or not 0 <= i < self.size for i in chars
            ):
                raise TokenmillError("alphabet_ids: one id per alphabet entry, within the ids")
            ids += chars
            low = 0
        if any(type(i) is not int for i in ids) or len(set(ids)) != len(ids):
            raise TokenmillError("special token and alphabet ids must be distinct integers")
        limit = id_limit(self.n_tokens)
        if not all(low <= i < limit for i in ids):
            raise TokenmillError(
                f"special token ids must lie from {self.base_size} (after the base tokens) "
                f"to {limit - 1}, with the merges in the ids free between them (gaps are "
                "allowed, but not more unused ids than tokens)"
            )
        return True


class ImportedNumbering:
    """An explicit byte-level vocabulary: `vocab[i]` is the bytes of id i (None
    for a special token's id or a gap); `special_ids[k]` is the id of the k-th
    special token."""

    __slots__ = ("merges", "special_ids", "special_tokens", "vocab")
    core_made_merge_ids = False  # building them checks each merge makes a token

    def __init__(
        self,
        vocab: list[bytes | None],
        merges: Sequence[tuple[int, int]],
        special_tokens: Sequence[str],
        special_ids: Sequence[int] | None,
    ) -> None:
        self.vocab = vocab
        self.merges = merges
        self.special_tokens = special_tokens
        self.special_ids = special_ids

    @property
    def size(self) -> int:
        return max([len(self.vocab), *(i + 1 for i in self.special_ids or [])])

    def special_id(self, k: int) -> int:
        return self.special_ids[k]  # type: ignore[index]

    def values(
        self, base: list, special_value: Callable[[str], object], specials: Mapping[str, int]
    ) -> list:
        """Every id's value from the table (`base` is not used), specials at their ids."""
        values: list = list(self.vocab) + [None] * (self.size - len(self.vocab))
        for token, i in specials.items():
            values[i] = special_value(token)
        return values

    def non_special(self, values: Callable[[], list]) -> list:
        """The table itself: specials and gaps are None in it."""
        return list(self.vocab)

    def file_fields(self) -> dict:
        """The table, each token's bytes in GPT-2's byte-to-unicode alphabet, as
        in tokenizer.json files."""
        return {"vocab": [None if v is None else to_byte_level(v) for v in self.vocab]}

    def check_file_special_ids(self, ids: Mapping[str, int]) -> None:
        """A file's special-token ids: the table gives them (checked by `check`)."""

    def index(self) -> dict[bytes, int]:
        """Bytes -> id; TokenmillError when two ids have the same bytes."""
        index: dict[bytes, int] = {}
        for i, v in enumerate(self.vocab):
            if v is not None:
                if v in index:
                    raise TokenmillError(f"ids {index[v]} and {i} have the same bytes {v!r}")
                index[v] = i
        return index

    def merge_ids(self, index: Index) -> list[int]:
        vocab, n, id_of = self.vocab, len(self.vocab), index()
        ids = []
        for k, (a, b) in enumerate(self.merges):
            if type(a) is not int or type(b) is not int:
                raise TokenmillError(f"merge {k} ({show(a)}, {show(b)}): ids are integers")
            left = vocab[a] if 0 <= a < n else None
            right = vocab[b] if 0 <= b < n else None
            merged = id_of.get(left + right) if left and right else None
            if merged is None:
                raise TokenmillError(
                    f"merge {k} ({a}, {b}) does not join two tokens into a token of the vocabulary"
                )
            ids.append(merged)
        return ids

    def native_tables(self) -> tuple[list[int], list[int]] | None:
        """(byte_ids, merge_ids) as `byte_ids` and `merge_ids` give them, from
        the native core, which builds them for a 200k-token table in
        milliseconds where Python takes a second; None for a table it does not
        take (entries or ids of other types) or finds at fault, which the
        Python methods then check and name the fault of."""
        if not isinstance(self.vocab, list) or not isinstance(self.merges, list):
            return None
        try:
            return _native.table_ids(self.vocab, self.merges)
        except _native.NativeError:
            return None

    def encoder(self, tok: Tokenizer) -> _native.Encoder | None:
        """The native encoder, built from the table as it is (a 200k-token
        one in tens of milliseconds less than from tuples made in Python);
        None where the core does not take the table as it is (the mode then
        builds the encoder, or names what is wrong)."""
        if not isinstance(self.vocab, list) or not isinstance(self.merges, list):
            return None
        try:
            return _native.Encoder.byte_table(
                tok.pattern,
                self.vocab,
                self.merges,
                tok._merge_ids,
                tok._byte_ids,
                whole_words=tok.whole_words,
            )
        except _native.NativeError:
            return None

    def byte_ids(self, index: Index) -> list[int]:
        id_of = index()
        missing = [b for b in range(256) if bytes([b]) not in id_of]
        if missing:
            raise TokenmillError(
                f"the vocabulary has no token for byte 0x{missing[0]:02x} "
                f"({len(missing)} bytes missing)"
            )
        return [id_of[bytes([b])] for b in range(256)]

    def check(self, mode: Mode, tok: Tokenizer) -> None:
        """Byte mode, ids in proportion to the tokens, specials at ids of their
        own (the caller then builds byte_ids and merge_ids, which check that
        every byte is a token and each merge joins two tokens into one)."""
        if mode.name != "byte":
            raise TokenmillError("an explicit vocab needs byte mode")
        vocab = self.vocab
        # The types first, in C: the scan in Python is for a table that has others.
        if not set(map(type, vocab)) <= {bytes, type(None)} and any(
            v is not None and not isinstance(v, bytes) for v in vocab
        ):
            raise TokenmillError("vocab entries are bytes")
        n_vocab = len(vocab)
        _check_ids(self, n_vocab, lambda i: vocab[i] if i < n_vocab else None, vocab.count(None))

    def file_tables(self) -> bytes | None:
        """The file's vocab and merges as JSON, written by the native core: not here."""
        return None


class NativeNumbering:
    """An imported table that the native core holds (`_native.Vocabulary`,
    read there from a file's bytes): its size, checks and encoder read it
    there, and what needs each token as a Python object (decode, export)
    reads the same table as lists, an `ImportedNumbering` made on first use,
    so that loading a 200k-token vocabulary to encode makes none of them."""

    __slots__ = ("_listed", "lists", "special_ids", "special_tokens", "table")
    core_made_merge_ids = True

    def __init__(
        self,
        table: _native.Vocabulary,
        special_tokens: Sequence[str],
        special_ids: Sequence[int],
        lists: Callable[[], tuple[list[bytes | None], list[tuple[int, int]]]],
    ) -> None:
        self.table = table
        self.special_tokens = special_tokens
        self.special_ids = special_ids
        self.lists = lists  # (vocab, merges) as Python lists
        self._listed: ImportedNumbering | None = None

    @property
    def listed(self) -> ImportedNumbering:
        if self._listed is None:
            vocab, merges = self.lists()
            self._listed = ImportedNumbering(vocab, merges, self.special_tokens, self.special_ids)
        return self._listed

    @property
    def size(self) -> int:
        return max([self.table.size, *(i + 1 for i in self.special_ids)])

    def special_id(self, k: int) -> int:
        return self.special_ids[k]

    def values(
        self, base: list, special_value: Callable[[str], object], specials: Mapping[str, int]
    ) -> list:
        return self.listed.values(base, special_value, specials)

    def non_special(self, values: Callable[[], list]) -> list:
        return self.listed.non_special(values)

    def file_fields(self) -> dict:
        return self.listed.file_fields()

    def file_tables(self) -> bytes | None:
        """`"vocab":[...],"merges":[...]` of the tokenizer file, UTF-8, as
        json.dumps writes them, from the native core (Python would make a
        string and a list per token to write them)."""
        return self.table.file_tables()

    def check_file_special_ids(self, ids: Mapping[str, int]) -> None:
        """None to check: the table gives the ids."""

    def index(self) -> dict[bytes, int]:
        return self.listed.index()

    def merge_ids(self, index: Index) -> list[int]:
        return self.table.merge_ids()

    def byte_ids(self, index: Index) -> list[int]:
        ids = self.table.byte_ids()
        return self.listed.byte_ids(index) if ids is None else ids  # the first names the byte

    def native_tables(self) -> tuple[list[int], list[int]] | None:
        """None: `byte_ids` and `merge_ids` read the table, each when asked.
        A 200k-token table's merge ids as Python ints take ~5 ms, and neither
        checking nor encoding needs them (the core made them with the table)."""
        return None

    def encoder(self, tok: Tokenizer) -> _native.Encoder:
        return _native.Encoder.from_vocabulary(tok.pattern, self.table, whole_words=tok.whole_words)

    def check(self, mode: Mode, tok: Tokenizer) -> None:
        """As `ImportedNumbering.check`; the core made every entry bytes."""
        if mode.name != "byte":
            raise TokenmillError("an explicit vocab needs byte mode")
        table = self.table
        _check_ids(self, table.size, table.token, table.size - table.n_tokens)


def _check_ids(
    numbering: ImportedNumbering | NativeNumbering,
    n_vocab: int,
    token: Callable[[int], bytes | None],
    n_gaps: int,
) -> None:
    """Specials at ids of their own, all ids in proportion to the tokens, of
    a table of `n_vocab` ids (`token(i)`: the bytes of id i, None for none)
    of which `n_gaps` hold no token."""
    ids = numbering.special_ids if numbering.special_ids is not None else []
    if len(ids) != len(numbering.special_tokens):
        raise TokenmillError("special_ids and special_tokens differ in length")
    owner: dict[int, str] = {}
    for name, i in zip(numbering.special_tokens, ids, strict=True):
        check_id(i, f"special token {name!r}")
        taken = token(i) if i < n_vocab else None
        if taken is not None:
            raise TokenmillError(f"special token {name!r} has id {i}, taken by the token {taken!r}")
        if i in owner:
            raise TokenmillError(f"special tokens {owner[i]!r} and {name!r} have the same id {i}")
        owner[i] = name
    n_tokens = n_vocab - n_gaps + len(ids)
    top = max([n_vocab - 1, *ids])
    if top >= id_limit(n_tokens):
        what = f"special token {owner[top]!r} has id {top}" if top in owner else f"id {top}"
        raise TokenmillError(
            f"{what}: a vocabulary of {n_tokens} tokens numbers them below "
            f"{id_limit(n_tokens)} (gaps are allowed, but not more unused ids than tokens)"
        )


def merge_fault(
    merges: Sequence, base: int, made_ids: list[int] | None, specials: set
) -> str | None:
    """What is wrong with the merges, or None: merge k joins two ids below
    its own (`made_ids[k]`, or base + k when None), neither of them special,
    and no merge repeats another. The reference `_native.merges_valid` keeps."""
    for k, (a, b) in enumerate(merges):
        made = base + k if made_ids is None else made_ids[k]
        if a in specials or b in specials:
            return f"merge {k} ({a}, {b}) joins a special token"
        if type(a) is not int or type(b) is not int:
            return f"merge {k} ({show(a)}, {show(b)}): ids are integers"
        if not (0 <= a < made and 0 <= b < made):
            return (
                f"merge {k} ({show(a)}, {show(b)}) refers to an id not yet made "
                f"(a merge joins ids below its own, {made})"
            )
    if len(set(merges)) != len(merges):
        first: dict[tuple, int] = {}
        k, m = next((k, m) for k, m in enumerate(merges) if first.setdefault(m, k) != k)
        return f"merge {k} {tuple(m)} repeats merge {first[m]}: two ids would have the same bytes"
    return None
