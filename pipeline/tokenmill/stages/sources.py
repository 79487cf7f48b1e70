"""Which source of a data recipe each document is (stages/mix.py).

In this order:

1. an input a source's `files` glob matches is that source, whole;
2. with the recipe's `column`, a document is the source its value there
   names (encode carried each document's value into the token shards:
   stages/encode.py);
3. otherwise (no `column`, or a document without a value: null, missing, not
   a string, or an input with no columns, such as text) it is its input's
   source by place: the deepest of its folders, or its path up to its name's
   first dot, that the recipe names (`web/sub` takes web/sub/y.jsonl from
   `web`); else its top folder, or for an input at DATA's top its name
   before the first dot.

A name that is a recipe source with a `files` glob takes only what the glob
matches: a document so named otherwise is left out, as are the documents of
names no recipe source has. Left-out sources are listed by name, the first
MAX_LEFT_OUT of them (in input order); the rest as one line, OTHERS.

Memory: each input's index (row, tokens: 12 bytes a document) and, with a
`column`, 4 bytes a document more for its value (a code into the shard's
few distinct values).
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.errors import TokenmillError
from tokenmill.io.arrow import numbers
from tokenmill.io.inputs import matches_glob
from tokenmill.io.storage import parquet_file
from tokenmill.recipe import Recipe, Share
from tokenmill.stages.tokens import TokenShard

MAX_LEFT_OUT = 100
OTHERS = "(other sources)"
NONE = -1  # the group of a document no recipe source takes, in the tasks


def default_source(name: str) -> str:
    """The source of input `name` by its place: its top folder, or for an
    input at DATA's top its name before the first dot."""
    top, sep, _ = name.partition("/")
    return top if sep else name.split(".", 1)[0]


def placed_source(name: str, named: Container[str]) -> str:
    """The source of input `name` by its place under a recipe naming `named`:
    the deepest of its folders, or its path up to its name's first dot, that
    is one of them (a folder path is as much a place as a top folder); else
    default_source's."""
    *folders, file = name.split("/")
    deepest_first = ["/".join([*folders, file.split(".", 1)[0]])]
    deepest_first += ["/".join(folders[:k]) for k in range(len(folders), 0, -1)]
    return next((n for n in deepest_first if n in named), default_source(name))


def label_codes(labels: pa.Array | pa.ChunkedArray, code: dict[str, int]) -> np.ndarray:
    """Each document's value of the source column (dictionary-encoded, as encode
    writes it) as `code[value]`, adding values not yet in `code`; -1 where none."""
    if isinstance(labels, pa.ChunkedArray):
        labels = labels.combine_chunks()
    if not pa.types.is_dictionary(labels.type):
        labels = labels.dictionary_encode()
    values = labels.dictionary.to_pylist()
    remap = np.array([code.setdefault(v, len(code)) for v in values] + [-1], np.int64)
    indices = numbers(labels.indices).astype(np.int64)
    if labels.null_count:
        indices = np.where(pc.is_null(labels).to_numpy(zero_copy_only=False), -1, indices)
    return remap[indices]  # -1 picks the last entry: -1


@dataclass(frozen=True)
class Membership:
    """Which group (an index into the recipe's sources; NONE: left out) each
    document of one input is in, as the tasks of the mix find it."""

    fixed: int | None  # every document's: a files glob took the input, or no column
    default: int = NONE  # a document's without a value in the column
    by_label: tuple[tuple[str, int], ...] = ()  # the values a recipe source takes

    def of(self, labels: pa.Array | None, n: int) -> np.ndarray:
        if self.fixed is not None or labels is None:
            return np.full(n, self.default if self.fixed is None else self.fixed, np.int64)
        code: dict[str, int] = {}
        codes = label_codes(labels, code)
        taken = dict(self.by_label)
        group = np.array([taken.get(v, NONE) for v in code] + [self.default], np.int64)
        return group[codes]


@dataclass
class Index:
    """One token shard's documents in row order: rows, token counts and, with
    a recipe's column, each one's value as a code into `labels` (-1: none)."""

    rows: np.ndarray  # uint64
    tokens: np.ndarray  # uint32
    labels: list[str] | None = None
    codes: np.ndarray | None = None  # int32


def read_index(shard: TokenShard, column: bool) -> Index:
    """The shard's index; `column`: with each document's value of the recipe's
    column (encode's `source` column; none when the shard has no such column)."""
    with parquet_file(shard.path) as pf:
        column = column and "source" in pf.schema_arrow.names
    names = ("row", "n_tokens", "source") if column else ("row", "n_tokens")
    rows, tokens, codes = [], [], []
    code: dict[str, int] = {}
    for batch in shard.batches(columns=names):
        rows.append(numbers(batch.column("row")))
        tokens.append(numbers(batch.column("n_tokens")))
        if column:
            codes.append(label_codes(batch.column("source"), code).astype(np.int32))
    return Index(
        np.concatenate(rows) if rows else np.empty(0, np.uint64),
        np.concatenate(tokens) if tokens else np.empty(0, np.uint32),
        list(code) if column else None,
        (np.concatenate(codes) if codes else np.empty(0, np.int32)) if column else None,
    )


@dataclass
class Group:
    """A source of the mixture: its recipe entry (None: left out)."""

    name: str
    share: Share | None


@dataclass
class Sources:
    """The groups a corpus makes under a recipe (the recipe's sources in its
    order, then those left out) and where each document is."""

    groups: list[Group]
    members: list[Membership]  # per input, for the tasks (recipe sources only)
    group_of: list[np.ndarray]  # per input, per document: its group (left out ones too)


def assign(shards: list[TokenShard], recipe: Recipe, index: list[Index]):
    """The Sources of `shards` under `recipe`; a recipe source that no document
    is in fails, naming it."""
    where = recipe.where
    groups = [Group(s.name, s) for s in recipe.sources]
    taken = {s.name: k for k, s in enumerate(recipe.sources)}
    left: dict[str, int] = {}

    def resolve(name: str) -> int:
        share = recipe.sources[taken[name]] if name in taken else None
        if share is not None and not share.files:
            return taken[name]
        name = f"{name} (left out)" if share is not None else name
        if name not in left:
            if len(left) >= MAX_LEFT_OUT:
                name = OTHERS
            if name not in left:
                left[name] = len(groups)
                groups.append(Group(name, None))
        return left[name]

    globbed = [s for s in recipe.sources if s.files]
    seen = np.zeros(len(recipe.sources), bool)
    members, group_of = [], []
    for shard, ix in zip(shards, index, strict=True):
        matched = [s.name for s in globbed if matches_glob(shard.source, s.files or "")]
        if len(matched) > 1:
            raise TokenmillError(
                f"{where}: sources {matched[0]!r} and {matched[1]!r} both take {shard.source} "
                "(their files globs overlap)"
            )
        n = len(ix.rows)
        if matched:
            g = taken[matched[0]]
            members.append(Membership(g))
            group_of.append(np.full(n, g, np.int32))
            seen[g] = True
            continue
        # Only an input with a document of no value in the column is its place's
        # source: one whose documents all name theirs lists no such source.
        unnamed = ix.codes is None or bool((ix.codes < 0).any())
        default = resolve(placed_source(shard.source, taken)) if unnamed else NONE
        own = default if 0 <= default < len(taken) else NONE
        if ix.labels is None or ix.codes is None:
            members.append(Membership(own))
            group_of.append(np.full(n, default, np.int32))
            if own != NONE:
                seen[own] = True
            continue
        by_value = [resolve(v) for v in ix.labels]
        member = np.array([*by_value, default], np.int32)[ix.codes]
        takes = tuple((v, g) for v, g in zip(ix.labels, by_value, strict=True) if g < len(taken))
        members.append(Membership(None, own, takes))
        group_of.append(member)
        present = np.unique(member)
        seen[present[(present >= 0) & (present < len(taken))]] = True
    for k, share in enumerate(recipe.sources):
        if not seen[k]:
            names = [s.source for s in shards]
            placed = any(placed_source(n, taken) == share.name for n in names)
            why = why_empty(share, recipe.column, placed, glob_taker(share, recipe, names))
            raise TokenmillError(f"{where}.{share.name}: {why} "
                                 f"(sources here: {known(shards, index)})")  # fmt: skip
    return Sources(groups, members, group_of)


def check_placed(recipe: Recipe, names: list[str]) -> None:
    """Before any work: a recipe that takes its sources by place (no column, no
    files glob) names only sources some input of `names` is in."""
    where = recipe.where
    if recipe.column is not None:
        return  # a document's column may name any source: known once encoded
    named = {share.name for share in recipe.sources}
    globs = [share.files for share in recipe.sources if share.files]
    unglobbed = [n for n in names if not any(matches_glob(n, g) for g in globs)]
    present = {placed_source(n, named) for n in unglobbed}
    for share in recipe.sources:
        if share.files is None and share.name not in present:
            taker = glob_taker(share, recipe, names)
            raise TokenmillError(
                f"{where}.{share.name}: {why_empty(share, None, False, taker)} "
                f"(sources here: {first_names(present)})"
            )


def glob_taker(share: Share, recipe: Recipe, names: list[str]) -> str | None:
    """The source whose files glob takes an input that is `share`'s by place,
    which then has none of its own; None when no input is its by place."""
    named = {s.name for s in recipe.sources}
    for name in names:
        if placed_source(name, named) == share.name:
            taker = next((s.name for s in recipe.sources if s.files and
                          matches_glob(name, s.files)), None)  # fmt: skip
            if taker is not None:
                return taker
    return None


def why_empty(share: Share, column: str | None, placed: bool, taker: str | None = None) -> str:
    """Why no document is in `share`; `placed`: some input is its by place;
    `taker`: the source whose files glob takes such inputs."""
    if share.files:
        return f"its files glob {share.files!r} matches no input"
    places = f"under {share.name}/ or named {share.name}.*"
    if taker is not None and column is None:
        return f"every input {places} is taken by {taker}'s files glob"
    by_place = f"no input is {places} at DATA's top"
    if column is None:
        return by_place
    if placed:  # each document of its inputs names another source
        by_place = f"every document of its inputs names another source in {column}"
    return f"no document has {column} = {share.name!r}, and {by_place}"


def known(shards: list[TokenShard], index: list[Index]) -> str:
    names = {
        default_source(s.source)
        for s, ix in zip(shards, index, strict=True)
        if ix.codes is None or (ix.codes < 0).any()
    }
    names |= {v for ix in index for v in ix.labels or ()}
    return first_names(names)


def first_names(names: set[str], most: int = 20) -> str:
    """The first `most` of `names` in order, for an error line."""
    shown = sorted(names)
    if not shown:
        return "none: the recipe's files globs take every input"
    return ", ".join(shown[:most]) + (", ..." if len(shown) > most else "")
