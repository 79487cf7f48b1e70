"""Writing a mixture (stages/mix.py) in its order: an external sort of the
chosen documents' copies by key, reading each token shard once.

The keys. A copy is a document (input name, row) and its epoch (0 for its
first copy). With --shuffle SEED its key is a 64-bit hash of (seed, epoch,
input name, row); without, its place in the stream of the token shards in
input order, epoch after epoch. The mixture is the copies sorted by key,
ties (equal hashes; an empty document's place) by epoch, input and row: an
order that depends on the seed, the input names and rows and the recipe only.

The sort. The key range is cut into K buckets of about BUCKET_BYTES of ids
each, bucket k the keys below those of bucket k + 1, so the parts written
one per bucket, in bucket order, are the whole mixture in order; K follows
from the mixture's size alone.

- Pass 1, `scatter`, one task per token shard: reads the shard's rows and
  ids once, keys every copy of a chosen document, and appends the copies to
  one Arrow IPC file, OUT/mix/.buckets/NNNNNN.arrow, a record batch per
  bucket each time its buffers pass BUFFER_BYTES; it returns which bucket
  each record batch holds.
- Pass 2, `gather`, one task per bucket: reads that bucket's record batches
  of every pass-1 file, sorts them by key and writes part-NNNNN.parquet.

With --val-fraction the validation split is a second sequence of buckets,
numbered after train's and written as val-NNNNN.parquet. A copy carries its
group (its recipe source: stages/sources.py) to pass 2, which names it.

A task holds a batch of its shard and BUFFER_BYTES (pass 1), or one
bucket's ids once and a slice of them sorted (pass 2); the files of pass 1
are removed once the parts are written.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokenmill.io.arrow import from_numpy, numbers, take_lists
from tokenmill.io.metadata import STATE
from tokenmill.io.storage import (
    AnyPath,
    delete,
    is_remote,
    location,
    open_read,
    parquet_file,
    size,
    walk_files,
)
from tokenmill.io.writers import atomic_path
from tokenmill.stages.encode import DATA_PAGE_VERSION
from tokenmill.stages.sources import NONE, Membership
from tokenmill.stages.split import document_hashes, is_val
from tokenmill.stages.state import record_output
from tokenmill.stages.tokens import RowWriter, TokenShard

BUCKETS = ".buckets"  # pass 1's files, under the mix folder
BUCKET_BYTES = 64 << 20  # ids per bucket, hence per part, at most
# A mixture of more than MIN_PARTS * MIN_PART_BYTES of ids is cut into at least
# MIN_PARTS parts: pass 2 writes one part per task, and a mixture of one or two
# buckets would leave all but one worker idle while its one part is written.
MIN_PARTS = 16
MIN_PART_BYTES = 4 << 20
BUFFER_BYTES = 64 << 20  # pass 1: ids held before they are appended to the file
# Pass 2: documents taken in order and written at a time (a row group), at most.
WRITE_ROWS = 8192
WRITE_BYTES = 16 << 20
# A bucket's ids are one Arrow list array: its offsets are int32.
MAX_BUCKET_TOKENS = 1 << 30


def strings(values: list[str]) -> pa.Array:
    """Python strings as an Arrow string array (built from buffers, as `arrow`)."""
    data = [v.encode() for v in values]
    offsets = np.zeros(len(data) + 1, np.int32)
    np.cumsum([len(d) for d in data], out=offsets[1:])
    return pa.Array.from_buffers(
        pa.string(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))]
    )


def hashes(kind: str, seed: int, name: str, rows: np.ndarray, epoch: int = 0) -> np.ndarray:
    """The uint64 hash of each row of input `name` for `kind` ("select": which
    documents a part of an epoch takes; "order": where a copy goes), seeded."""
    return document_hashes(json.dumps([f"mix-{kind}", seed, epoch, name]), rows)


@dataclass(frozen=True)
class Rule:
    """How many copies of each document of a source the mixture takes: `epochs`,
    plus one for the documents up to `cut` (hash, input index, row) in the
    order of their "select" hashes (None: none)."""

    epochs: int
    cut: tuple[int, int, int] | None = None

    def copies(self, seed: int, index: int, name: str, rows: np.ndarray) -> np.ndarray:
        """The copies of each row of input `name` (the `index`-th in input order)."""
        n = np.full(len(rows), self.epochs, np.int64)
        if self.cut is not None:
            h = hashes("select", seed, name, rows)
            ch, ci, cr = (np.uint64(self.cut[0]), self.cut[1], np.uint64(self.cut[2]))
            below = (h < ch) | ((h == ch) & ((index < ci) | ((index == ci) & (rows <= cr))))
            n += below
        return n


@dataclass(frozen=True)
class Order:
    """How copies are keyed and bucketed: shuffled with `seed`, else by place
    in the stream; `buckets` of `bucket_tokens` ids."""

    seed: int | None
    buckets: int
    bucket_tokens: int

    @classmethod
    def sized(cls, seed: int | None, tokens: int, itemsize: int, most: int) -> Order:
        """The order of a split of `tokens` ids of `itemsize` bytes, in parts of
        at most `most` bytes of ids, and MIN_PARTS of them when each would hold
        MIN_PART_BYTES: the number of parts follows from the size alone."""
        least = max(MIN_PART_BYTES // itemsize, math.ceil(tokens / MIN_PARTS))
        cap = max(1, min(most // itemsize, least, MAX_BUCKET_TOKENS))
        buckets = max(1, math.ceil(tokens / cap))
        return cls(seed, buckets, max(1, math.ceil(tokens / buckets)))

    @cached_property
    def bounds(self) -> np.ndarray:
        """Shuffled: the first key of each bucket but the first (equal ranges of 2^64)."""
        return np.array([(j << 64) // self.buckets for j in range(1, self.buckets)], np.uint64)

    def bucket_of(self, keys: np.ndarray) -> np.ndarray:
        if self.seed is None:
            return np.minimum(keys // np.uint64(self.bucket_tokens), self.buckets - 1)
        return np.searchsorted(self.bounds, keys, side="right")


@dataclass(frozen=True)
class ScatterTask:
    shard: TokenShard
    index: int  # the shard's place in input order
    member: Membership  # the group of each of its documents
    rules: tuple[Rule, ...]  # by class: group * len(orders) + split (0 train, 1 val)
    fraction: float  # --val-fraction: which split each document is in
    seed: int  # of the "select" hashes (0 without --shuffle)
    orders: tuple[Order, ...]  # by split
    first: tuple[int, ...]  # by split: the bucket number of its first bucket
    # unshuffled: by split, where each epoch's copies of the shard start in its stream
    starts: tuple[tuple[int, ...], ...]
    out: AnyPath  # its pass-1 file


def classes(task: ScatterTask, rows: np.ndarray, labels: pa.Array | None) -> np.ndarray:
    """The class (a Rule's index; -1: none) of each document of a batch."""
    group = task.member.of(labels, len(rows))
    splits = len(task.orders)
    val = is_val(task.shard.source, rows, task.fraction) if splits > 1 else 0
    return np.where(group == NONE, -1, group * splits + val)


def scatter(task: ScatterTask) -> dict:
    """Pass 1 for one token shard: {"batches": the bucket of each record batch
    written, "documents": copies, "tokens": their ids}."""
    shard = task.shard
    with parquet_file(shard.path) as pf:
        ids_type = pf.schema_arrow.field("ids").type
    schema = pa.schema([("key", pa.uint64()), ("row", pa.uint64()), ("epoch", pa.uint32()),
                        ("group", pa.int32()), ("ids", ids_type)])  # fmt: skip
    held: dict[int, list[pa.RecordBatch]] = {}
    held_bytes = 0
    written: list[int] = []
    next_start = [list(s) for s in task.starts]
    documents = tokens = 0
    splits = len(task.orders)
    labels = task.member.fixed is None  # by the shard's source column (stages/sources.py)
    columns = ("row", "ids", "source") if labels else ("row", "ids")
    with atomic_path(task.out) as tmp, pa.OSFile(str(tmp), "wb") as sink:
        writer = pa.ipc.new_file(sink, schema)
        for batch in shard.batches(columns=columns):
            rows = numbers(batch.column("row"))
            lengths = np.diff(numbers(batch.column("ids").offsets))
            cls = classes(task, rows, batch.column("source") if labels else None)
            copies = np.zeros(len(rows), np.int64)
            for c in np.unique(cls[cls >= 0]):
                at = cls == c
                copies[at] = task.rules[c].copies(task.seed, task.index, shard.source, rows[at])
            for epoch in range(int(copies.max(initial=0))):
                for split, order in enumerate(task.orders):
                    pick = np.flatnonzero((copies > epoch) & (cls % splits == split))
                    if not len(pick):
                        continue
                    if order.seed is None:
                        ends = np.cumsum(lengths[pick])
                        at_start = next_start[split][epoch]
                        keys = (at_start + ends - lengths[pick]).astype(np.uint64)
                        next_start[split][epoch] += int(ends[-1])
                    else:
                        keys = hashes("order", order.seed, shard.source, rows[pick], epoch)
                    buckets = task.first[split] + order.bucket_of(keys)
                    sort = np.argsort(buckets, kind="stable")
                    taken = pick[sort]
                    piece = pa.record_batch(
                        [
                            from_numpy(keys[sort]),
                            from_numpy(rows[taken]),
                            from_numpy(np.full(len(taken), epoch, np.uint32)),
                            from_numpy((cls[taken] // splits).astype(np.int32)),
                            take_lists(batch.column("ids"), taken),
                        ],
                        schema=schema,
                    )
                    cuts = np.flatnonzero(np.diff(buckets[sort])) + 1
                    for start, end in zip([0, *cuts], [*cuts, len(taken)], strict=True):
                        held.setdefault(int(buckets[sort][start]), []).append(
                            piece.slice(start, end - start)
                        )
                    n_ids = int(lengths[pick].sum())
                    documents += len(pick)
                    tokens += n_ids
                    held_bytes += n_ids * shard.id_dtype.itemsize + 24 * len(pick)
                    if held_bytes > BUFFER_BYTES:
                        written += flush(writer, held)
                        held_bytes = 0
        written += flush(writer, held)
        writer.close()
    return {"batches": written, "documents": documents, "tokens": tokens}


def flush(writer: pa.ipc.RecordBatchFileWriter, held: dict[int, list[pa.RecordBatch]]) -> list[int]:
    """Append what `held` holds, bucket by bucket; the bucket of each record batch."""
    buckets = []
    for b in sorted(held):
        for batch in pa.Table.from_batches(held.pop(b)).combine_chunks().to_batches():
            writer.write_batch(batch)
            buckets.append(b)
    return buckets


def by_bucket(buckets: list[int]) -> dict[int, list[int]]:
    """The record batches of a file `flush` wrote (their buckets, in order),
    by bucket: bucket -> the batches' numbers."""
    found: dict[int, list[int]] = {}
    for n, b in enumerate(buckets):
        found.setdefault(b, []).append(n)
    return found


@dataclass(frozen=True)
class GatherTask:
    bucket: int
    # per pass-1 file with copies in the bucket: (input index, file, its record batches)
    pieces: tuple[tuple[int, AnyPath, tuple[int, ...]], ...]
    inputs: pa.Array  # input names by input index (the same object in every task)
    sources: pa.Array  # the mixture's sources by group
    schema: pa.Schema  # of the part, but its state (`state`)
    state: bytes
    out: AnyPath


def open_ipc(path: AnyPath) -> pa.ipc.RecordBatchFileReader:
    if is_remote(path):
        return pa.ipc.open_file(open_read(path, cache="none"))
    return pa.ipc.open_file(pa.memory_map(str(path)))


def gather(task: GatherTask) -> dict:
    """Pass 2 for one bucket: its part written in key order; the part's record
    for the manifest (rows, documents, tokens, bytes, sha256)."""
    batches, inputs = [], []
    for at, path, wanted in task.pieces:
        reader = open_ipc(path)
        for n in wanted:
            batches.append(reader.get_batch(n))
            inputs.append(np.full(batches[-1].num_rows, at, np.uint32))
    if batches:
        table = pa.Table.from_batches(batches)
        keys, rows = numbers(table["key"]), numbers(table["row"])
        epochs, index = numbers(table["epoch"]), np.concatenate(inputs)
        groups = numbers(table["group"])
        ids = table["ids"].combine_chunks()
        del table, batches
    else:
        keys = rows = np.empty(0, np.uint64)
        epochs, index = np.empty(0, np.uint32), np.empty(0, np.uint32)
        groups = np.empty(0, np.int32)
        ids = pa.array([], task.schema.field("ids").type)
    sort = np.lexsort((rows, index, epochs, keys))
    lengths = np.diff(numbers(ids.offsets))
    itemsize = np.dtype(str(ids.type.value_type)).itemsize
    schema = task.schema.with_metadata({**task.schema.metadata, STATE: task.state})
    tokens = 0
    with atomic_path(task.out) as tmp:
        with pq.ParquetWriter(
            tmp,
            schema,
            use_dictionary=["source", "shard"],
            compression="zstd",
            write_statistics=["row", "n_tokens"],
            data_page_version=DATA_PAGE_VERSION,
        ) as writer:
            parts = RowWriter(writer)  # a long document over several rows, as encode writes it
            for start, end in slices(lengths[sort], WRITE_BYTES // itemsize):
                take = sort[start:end]
                at = from_numpy(index[take])
                part_ids = take_lists(ids, take)
                n_tokens = np.diff(numbers(part_ids.offsets)).astype(np.uint32)
                tokens += int(n_tokens.sum())
                columns = [
                    from_numpy(np.arange(start, end, dtype=np.uint64)),
                    part_ids,
                    from_numpy(n_tokens),
                    pc.take(task.sources, from_numpy(groups[take])),
                    pc.take(task.inputs, at),
                    from_numpy(rows[take]),
                    from_numpy(epochs[take]),
                ]
                parts.write_table(pa.Table.from_arrays(columns, schema=schema))
            if parts.continued:
                writer.add_key_value_metadata(parts.metadata())
    sha256 = record_output(task.out)
    written = len(sort) + sum(n - 1 for _, n, _ in parts.continued)
    return {"rows": written, "documents": len(sort), "tokens": tokens, "bytes": size(task.out),
            "sha256": sha256}  # fmt: skip


def slices(lengths: np.ndarray, tokens: int) -> list[tuple[int, int]]:
    """(start, end) of consecutive runs of documents of at most WRITE_ROWS
    documents and `tokens` ids (but a longer document alone); one empty run
    when there are none, so that a part always has its schema."""
    if not len(lengths):
        return [(0, 0)]
    ends = np.cumsum(lengths)
    runs, start = [], 0
    while start < len(lengths):
        before = ends[start - 1] if start else 0
        end = int(np.searchsorted(ends, before + tokens, side="right"))
        end = min(max(end, start + 1), start + WRITE_ROWS)
        runs.append((start, end))
        start = end
    return runs


def part_schema(ids_type: pa.DataType, metadata: dict[bytes, bytes]) -> pa.Schema:
    """A part's columns: those of a token shard (row: its place in the part),
    then where each document comes from: the mixture's source, the input and
    its row there, and the epoch of this copy."""
    return pa.schema(
        [
            pa.field("row", pa.uint64(), nullable=False),
            pa.field("ids", ids_type, nullable=False),
            pa.field("n_tokens", pa.uint32(), nullable=False),
            pa.field("source", pa.string(), nullable=False),
            pa.field("shard", pa.string(), nullable=False),
            pa.field("input_row", pa.uint64(), nullable=False),
            pa.field("epoch", pa.uint32(), nullable=False),
        ],
        metadata=metadata,
    )


def remove_buckets(folder: AnyPath) -> None:
    """Pass 1's files (a killed run's too: under OUT's lock, none is in use)."""
    folder = location(folder)
    if is_remote(folder):
        for _, path in walk_files(folder):
            delete(path)
    elif os.path.islink(folder):  # the link goes, never what it points to
        os.unlink(folder)
    else:
        shutil.rmtree(folder, ignore_errors=True)


def bucket_file(folder: AnyPath, index: int) -> AnyPath:
    return location(folder) / f"{index:06d}.arrow"
