"""--pack's first pass and its plan: where each token shard's rows go.

One task per shard reads the documents' lengths only (the ``n_tokens``
column when the shard records that `encode` ended every document with
``<|endoftext|>``: `ended_with_eos`); `plan` then places every shard in each
split's stream: where its first row starts, its sequence numbers, and the
tails of the shards before it (one or several, when they are short) that its
first row carries. The second pass, writing each shard's rows from its
place, is layouts/packed_write.py's; the format, layouts/packed.py's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tokenmill.errors import TokenmillError
from tokenmill.io.metadata import (
    BOS_ID,
    EOS_ID,
    SEQ_LEN,
    SOURCE,
    STATE,
    TOKENIZER_SHA256,
    VOCAB_SIZE,
)
from tokenmill.io.storage import AnyPath, location, parquet_file
from tokenmill.layouts.packed_shuffle import Order
from tokenmill.layouts.rows import PIECE, ends_in
from tokenmill.stages.split import SPLITS, TRAIN, VAL, in_split, shard_is_val
from tokenmill.stages.tokens import TokenShard, list_ids


@dataclass(frozen=True)
class Spec:
    """What every task of one packing shares."""

    seq_len: int
    eos: int
    bos: int | None
    wide: bool  # uint32 ids, else uint16
    sha256: str
    vocab_size: int
    names: list[str]  # every shard's source, in input order: Pieces.shard indexes it
    val_fraction: float
    folder: AnyPath
    shuffle: int | None = None  # --shuffle: the full rows in a seeded order

    @property
    def sides(self) -> list[str]:
        return list(SPLITS) if self.val_fraction > 0 else [""]

    @property
    def id_dtype(self) -> type:
        return np.uint32 if self.wide else np.uint16

    def schema(self, source: str) -> pa.Schema:
        return pa.schema(
            [
                ("sequence", pa.uint64()),
                ("ids", pa.large_list(pa.uint32() if self.wide else pa.uint16())),
                ("n_tokens", pa.uint32()),
                ("documents", pa.large_list(PIECE)),
                *([("unshuffled", pa.uint64())] if self.shuffle is not None else []),
            ],
            metadata={
                SOURCE: source,
                TOKENIZER_SHA256: self.sha256,
                VOCAB_SIZE: str(self.vocab_size),
                SEQ_LEN: str(self.seq_len),
                EOS_ID: str(self.eos),
                BOS_ID: "" if self.bos is None else str(self.bos),
            },
        )

    def file(self, side: str, shard: TokenShard) -> AnyPath:
        folder = location(self.folder)
        return (folder / side if side else folder) / shard.name


@dataclass(frozen=True)
class Lengths:
    """A shard's documents, as the first pass finds them: their rows, their
    lengths in the stream, and the documents starting in each Parquet row group."""

    rows: np.ndarray  # uint64, in file order
    lens: np.ndarray  # int64
    groups: np.ndarray  # int64 documents starting in each row group


def document_lengths(task: tuple[TokenShard, Spec]) -> Lengths:
    shard, spec = task
    rows, lens = [], []
    try:
        with parquet_file(shard.path) as pf:
            metadata = pf.metadata.metadata or {}
    except (OSError, pa.ArrowException) as e:
        raise TokenmillError(f"{shard.path}: cannot read token shard ({e})") from None
    # When `encode` ended every document with <|endoftext|>, the lengths are
    # in n_tokens, and the ids need not be read.
    ended = ended_with_eos(metadata)
    for batch in shard.batches(columns=["row", "n_tokens" if ended else "ids"]):
        rows.append(batch.column("row").to_numpy())
        if ended:
            lens.append(batch.column("n_tokens").to_numpy().astype(np.int64))
        else:
            flat, offsets = list_ids(batch.column("ids"))
            lens.append(np.diff(offsets).astype(np.int64) + ~ends_in(flat, offsets, spec.eos))
    groups = shard.group_documents()
    b = 0 if spec.bos is None else 1
    return Lengths(
        rows=np.concatenate(rows) if rows else np.empty(0, np.uint64),
        lens=(np.concatenate(lens) if lens else np.empty(0, np.int64)) + b,
        groups=groups,
    )


def ended_with_eos(metadata: dict[bytes, bytes]) -> bool:
    """Whether a token shard's metadata says `encode` ended each document with
    <|endoftext|> (encoded without --no-eos)."""
    try:
        key = json.loads(metadata[STATE]).get("key", {})
    except (KeyError, ValueError, AttributeError):
        return False
    return isinstance(key, dict) and key.get("eos") is True


@dataclass(frozen=True)
class Tail:
    """Documents at the end of an earlier shard that the first row of a later
    one carries: those at `positions` (in file order) of shard `index`, with
    their `rows`; the first starts at `base` from the start of that row (a
    negative base: its first ids are in the row before)."""

    index: int
    shard: TokenShard
    positions: np.ndarray
    rows: np.ndarray
    groups: np.ndarray  # the shard's documents starting in each row group
    base: int


@dataclass(frozen=True)
class Side:
    """Where one shard's documents of one split go in that split's stream."""

    start: int  # stream position of its first document
    end: int
    tails: list[Tail]  # what its first row carries, earliest first
    last: bool = False  # the split's last shard: it writes the stream's short last row


@dataclass(frozen=True)
class PackTask:
    index: int
    shard: TokenShard
    sides: dict[str, Side]  # the splits it has a file in (split.in_split)
    spec: Spec
    # --shuffle: each split's order, and the task's file of rows to sort
    orders: dict[str, Order] | None = None
    scratch: AnyPath | None = None


def plan(shards: list[TokenShard], lengths: list[Lengths], spec: Spec) -> list[PackTask]:
    """Each shard's place in each split's stream, and the tails it carries."""
    n = spec.seq_len
    per_side: dict[str, list[Side]] = {}
    for side in spec.sides:
        keep = [side_of(spec, s, L.rows, side) for s, L in zip(shards, lengths, strict=True)]
        side_lens = [L.lens[k] for L, k in zip(lengths, keep, strict=True)]
        ends = np.cumsum([int(x.sum()) for x in side_lens], dtype=np.int64)
        starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
        sides = []
        owners = [i for i, shard in enumerate(shards) if in_split(shard, side)] or [-1]
        for i in range(len(shards)):
            first_row = int(starts[i]) - int(starts[i]) % n
            tails = []
            for j in range(i - 1, -1, -1):
                if ends[j] <= first_row:
                    break
                if starts[j] == ends[j]:
                    continue  # none of its documents go to this split
                doc_ends = starts[j] + np.cumsum(side_lens[j])
                d = int(np.searchsorted(doc_ends, first_row, side="right"))
                positions = np.flatnonzero(keep[j])[d:]
                base = int(doc_ends[d] - side_lens[j][d]) - first_row
                rows = lengths[j].rows[positions]
                tails.append(Tail(j, shards[j], positions, rows, lengths[j].groups, base))
            tails.reverse()
            sides.append(Side(int(starts[i]), int(ends[i]), tails, i == owners[-1]))
        per_side[side] = sides
    return [
        PackTask(i, shard, {s: per_side[s][i] for s in spec.sides if in_split(shard, s)}, spec)
        for i, shard in enumerate(shards)
    ]


def side_of(spec: Spec, shard: TokenShard, rows: np.ndarray, side: str) -> np.ndarray:
    """Which documents (by their rows) of `shard` go to split `side`."""
    val = shard_is_val(shard, rows, spec.val_fraction)
    return {"": np.ones(len(rows), bool), TRAIN: ~val, VAL: val}[side]
