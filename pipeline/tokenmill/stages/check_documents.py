"""check, its first part: a layout's documents against the token shards' rows.

Both sides are streamed a few thousand documents at a time, each batch as
its ids end to end and its lengths: equal lengths and equal ids, compared
with numpy, are equal documents, so a sound layout costs no Python step per
document beyond its reader's own. Only a batch that differs is looked into,
to count the documents that differ and name the first.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from tokenmill.errors import one_line
from tokenmill.layouts import Document
from tokenmill.layouts.bin import with_bos
from tokenmill.layouts.rows import document_stream
from tokenmill.stages.split import SPLITS, VAL, shard_is_val
from tokenmill.stages.tokens import TokenShard, list_ids
from tokenmill.tokenizer import BOS, ENDOFTEXT

CHUNK = 4096  # documents read from a layout at a time


@dataclass(frozen=True)
class Frame:
    """How a layout frames each token shard's row as a document."""

    eos: int | None  # <|endoftext|>: the id a framed document ends in
    bos: int | None  # --bos: the id put first
    ends_in_eos: bool  # the layout adds <|endoftext|> to rows without it
    fraction: float  # --val-fraction: documents go to train and val


@dataclass(frozen=True)
class Docs:
    """Documents end to end: their ids and lengths and, on the token shards'
    side, each one's shard (an index into the list of shards) and row."""

    ids: np.ndarray
    lens: np.ndarray  # int64
    shard: np.ndarray | None = None
    rows: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.lens)

    def starts(self) -> np.ndarray:
        return np.cumsum(self.lens) - self.lens

    def doc(self, i: int, start: int) -> np.ndarray:
        return self.ids[start : start + int(self.lens[i])]


def concat(parts: list[Docs]) -> Docs:
    fields = [(p.ids, p.lens, p.shard, p.rows) for p in parts]
    return Docs(*(np.concatenate(column) for column in zip(*fields, strict=True)))


NO_DOCS = Docs(*(np.empty(0, t) for t in (np.int64, np.int64, np.int32, np.uint64)))


def framed(shards: list[TokenShard], order: list[int], split: str, frame: Frame) -> Iterator[Docs]:
    """The documents of one split of a layout (all: ""), as the token shards
    taken in `order` make them, a Parquet batch at a time."""
    for k in order:
        shard = shards[k]
        for batch in shard.batches(columns=("row", "ids")):
            flat, offsets = list_ids(batch.column("ids"))
            rows = batch.column("row").to_numpy()
            if frame.ends_in_eos and frame.eos is not None:
                ids, lens = document_stream(flat, offsets, frame.eos, frame.bos)
            else:
                ids, lens = with_bos(flat, offsets, frame.bos)
            if split:
                keep = shard_is_val(shard, rows, frame.fraction)
                keep = keep if split == VAL else ~keep
                ids, lens, rows = ids[np.repeat(keep, lens)], lens[keep], rows[keep]
            yield Docs(ids, lens.astype(np.int64), np.full(len(lens), k, np.int32), rows)


class Expected:
    """One split's documents from the token shards, taken as many at a time
    as the layout gives."""

    def __init__(self, batches: Iterator[Docs]):
        self.batches = batches
        self.held = NO_DOCS

    def take(self, n: int) -> Docs:
        """The next `n` documents (fewer at the end)."""
        parts, have = [self.held], len(self.held)
        while have < n and (batch := next(self.batches, None)) is not None:
            parts.append(batch)
            have += len(batch)
        docs = parts[0] if len(parts) == 1 else concat(parts)
        k = int(docs.lens[:n].sum())
        assert docs.shard is not None and docs.rows is not None
        self.held = Docs(docs.ids[k:], docs.lens[n:], docs.shard[n:], docs.rows[n:])
        return Docs(docs.ids[:k], docs.lens[:n], docs.shard[:n], docs.rows[:n])

    def rest(self) -> int:
        """How many documents are left."""
        return len(self.held) + sum(len(b) for b in self.batches)


class Unreadable(Exception):
    """A layout's reader failed on its files."""


def chunks(read: Callable[[], Iterator[Document]]) -> Iterator[tuple[str, Docs]]:
    """The documents `read` gives, a few thousand at a time, each run of
    documents of one split as one Docs."""
    try:
        documents = read()
        while chunk := list(itertools.islice(documents, CHUNK)):
            splits = list(map(attrgetter("split"), chunk))
            ids = list(map(attrgetter("ids"), chunk))
            ends = [len(chunk)]
            if splits.count(splits[0]) != len(splits):  # where train's documents end
                ends = [i for i in range(1, len(chunk)) if splits[i] != splits[i - 1]] + ends
            for start, end in zip([0, *ends[:-1]], ends, strict=True):
                part = ids[start:end]
                lens = np.fromiter(map(len, part), np.int64, len(part))
                yield splits[start], Docs(np.concatenate(part), lens)
    except Exception as e:  # the trainers' readers raise anything on a damaged file
        raise Unreadable(one_line(e)) from e


def differing(got: Docs, want: Docs) -> np.ndarray:
    """The indices of the documents of `want` that differ in `got` (as long or longer)."""
    n = len(want)
    if np.array_equal(got.lens[:n], want.lens):
        k = int(want.lens.sum())
        if np.array_equal(got.ids[:k], want.ids):
            return np.empty(0, np.int64)
        wrong = np.concatenate([[0], np.cumsum(got.ids[:k] != want.ids)])
        ends = np.cumsum(want.lens)
        return np.flatnonzero(wrong[ends] > wrong[ends - want.lens])
    # Lengths differ: document by document (a damaged layout only).
    g, w = got.starts(), want.starts()
    return np.array(
        [i for i in range(n) if not np.array_equal(got.doc(i, g[i]), want.doc(i, w[i]))], np.int64
    )


def why(got: np.ndarray, want: np.ndarray, frame: Frame) -> str:
    if frame.bos is not None and (len(got) == 0 or got[0] != frame.bos):
        return f"does not start with {BOS} (the run had --bos)"
    if frame.ends_in_eos and frame.eos is not None and (len(got) == 0 or got[-1] != frame.eos):
        return f"does not end in {ENDOFTEXT}"
    if len(got) != len(want):
        return f"{len(got)} ids, the token shard's row makes {len(want)}"
    at = int(np.flatnonzero(got != want)[0])
    return f"id {at} is {got[at]}, the token shard's row has {want[at]}"


@dataclass
class Side:
    """The comparison of one split of a layout so far."""

    expected: Expected
    documents: int = 0  # read from the layout
    compared: int = 0  # of them, those the token shards have a document for
    differ: int = 0
    first: str = ""  # the first that differs, and how


@dataclass
class Compared:
    documents: int  # read from the layout
    problems: list[str]
    dtypes: set[np.dtype]  # of the ids it gave
    readable: bool = True  # False: a file of it could not be read (its problem says which)


def compare(
    where: str,
    read: Callable[[], Iterator[Document]],
    shards: list[TokenShard],
    order: list[int],
    frame: Frame,
    folder: str = "tokens",
) -> Compared:
    """The documents `read` gives of the layout in folder `where` against the
    token shards taken in `order`, which are in OUT's `folder` (tokens, or
    mix for a mixture's parts)."""
    wanted = SPLITS if frame.fraction > 0 else ("",)
    sides: dict[str, Side] = {}
    dtypes: set[np.dtype] = set()
    try:
        for split, got in chunks(read):
            if split not in wanted:
                names = ", ".join(map(repr, wanted))
                return Compared(
                    0, [f"{where}: documents of split {split!r}; the run's: {names}"], dtypes
                )
            if split not in sides:
                sides[split] = Side(Expected(framed(shards, order, split, frame)))
            side = sides[split]
            dtypes.add(got.ids.dtype)
            want = side.expected.take(len(got))
            differ = differing(got, want)
            if len(differ) and not side.first:
                i = int(differ[0])
                assert want.shard is not None and want.rows is not None
                shard = shards[int(want.shard[i])]
                how = why(got.doc(i, got.starts()[i]), want.doc(i, want.starts()[i]), frame)
                at = f"{folder}/{shard.name} row {want.rows[i]}"
                side.first = f"document {side.documents + i} ({at}): {how}"
            side.differ += len(differ)
            side.documents += len(got)
            side.compared += len(want)
    except Unreadable as e:
        return Compared(0, [f"{where}: cannot be read ({e})"], dtypes, readable=False)
    problems = []
    for split in wanted:
        side = sides.get(split) or Side(Expected(framed(shards, order, split, frame)))
        label = f" ({split})" if split else ""
        expected = side.compared + side.expected.rest()
        if side.documents != expected:
            problems.append(
                f"{where}{label}: {side.documents} documents, the token shards make {expected}"
            )
        if side.differ:
            problems.append(
                f"{where}{label}: {side.differ} of {side.documents} documents differ from the "
                f"token shards'; the first: {side.first}"
            )
    return Compared(sum(s.documents for s in sides.values()), problems, dtypes)
