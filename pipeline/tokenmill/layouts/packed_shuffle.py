"""--pack N with --shuffle SEED: the packed sequences in a seeded order.

The documents are packed in the mixture's order (already shuffled, document
by document: stages/mix.py), then the full rows of each split's stream are
permuted: the row the stream numbers s goes to place `permute(seed, n, s)`
of that split's n full rows, a bijection of [0, n) computed from (seed, n)
alone, so each task places its own rows without a global sort, and the order
depends on neither the workers nor the executor. The short last row, if
any, stays last.

The permutation: a balanced Feistel network of ROUNDS rounds over the
smallest even number of bits holding n - 1, its round function the
splitmix64 hash of stages/split.py keyed by (seed, n, round), walked
(applied again) until the value falls in [0, n).

The files: each packed file holds the same number of rows as without the
shuffle (its places are the stream's range of its token shard's rows); its
`sequence` column is each row's place, `unshuffled` its place in the stream
of documents (where its pieces continue: `read_rows` puts rows back in that
order to read documents).

Writing, an external sort by place (as the mix's: stages/shuffle.py): each
packing task appends its rows to one Arrow IPC file under
OUT/packed/.buckets/, a record batch per output file each time its buffer
passes shuffle.BUFFER_BYTES; then one task per output file reads its record
batches, sorts them by place and writes the file. Memory: a task holds
BUFFER_BYTES of rows, or one output file's rows (as many as its token
shard's ids: a mixture's part, ~64 MB). Disk: the packed rows once more,
until written.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.errors import TokenmillError
from tokenmill.executors import run_tasks
from tokenmill.faults import checkpoint
from tokenmill.io.arrow import from_numpy, numbers
from tokenmill.io.metadata import SEQ_LEN
from tokenmill.io.storage import AnyPath, location, parquet_file
from tokenmill.io.writers import atomic_path
from tokenmill.stages.shuffle import BUFFER_BYTES, by_bucket, flush, open_ipc
from tokenmill.stages.split import document_hashes

ROUNDS = 6
BUCKETS = ".buckets"  # the packing tasks' files, under the packed folder
# Reading rows back in stream order: rows of about this many bytes of ids at a time.
READ_BYTES = 64 << 20
WRITE_BYTES = 16 << 20  # of ids per row group of a shuffled packed file


def permute(seed: int, n: int, s: np.ndarray) -> np.ndarray:
    """The place of each row `s` (of [0, n)) among n rows shuffled with `seed`."""
    s = np.asarray(s, np.uint64)
    if n <= 1:
        return s.copy()
    bits = max(2, (n - 1).bit_length())
    half = (bits + bits % 2) // 2
    mask = np.uint64((1 << half) - 1)
    keys = [f"packed-order:{seed}:{n}:{r}" for r in range(ROUNDS)]

    def feistel(x: np.ndarray) -> np.ndarray:
        left, right = x >> np.uint64(half), x & mask
        for key in keys:
            left, right = right, left ^ (document_hashes(key, right) & mask)
        return (left << np.uint64(half)) | right

    out = s.copy()
    todo = np.arange(len(s))
    while len(todo):  # cycle walking: each value lands in [0, n) in a few steps
        out[todo] = feistel(out[todo])
        todo = todo[out[todo] >= np.uint64(n)]
    return out


@dataclass(frozen=True)
class Order:
    """One split's shuffle: `full` rows permuted with `seed`; `bounds[k]` the
    first place of output file k (and the number of rows last); `first` the
    bucket number of file 0 (the splits' files are numbered in turn)."""

    seed: int
    full: int
    bounds: np.ndarray
    first: int

    def place(self, sequence: np.ndarray) -> np.ndarray:
        sequence = np.asarray(sequence, np.uint64)
        full = sequence < np.uint64(self.full)
        out = sequence.copy()
        out[full] = permute(self.seed, self.full, sequence[full])
        return out

    def bucket(self, places: np.ndarray) -> np.ndarray:
        k = np.searchsorted(self.bounds, places.astype(np.int64), side="right") - 1
        return self.first + k


class Scatter:
    """A packing task's rows, appended to its IPC file (local: an atomic_path's
    temporary) a record batch per output file, BUFFER_BYTES at a time."""

    def __init__(self, path: Path, schema: pa.Schema):
        self.schema = schema  # of the packed files (with `unshuffled`)
        self.sink = pa.OSFile(str(path), "wb")
        self.writer = pa.ipc.new_file(self.sink, schema)
        self.held: dict[int, list[pa.RecordBatch]] = {}
        self.held_bytes = 0
        self.buckets: list[int] = []  # the output file of each record batch written

    def add(self, table: pa.Table, order: Order) -> None:
        """Rows as the packer numbers them (`sequence`: place in the stream)."""
        if not table.num_rows:
            return
        sequence = numbers(table["sequence"])
        places = order.place(sequence)
        buckets = order.bucket(places)
        sort = np.argsort(buckets, kind="stable")
        table = table.set_column(0, "sequence", from_numpy(places))
        table = table.append_column("unshuffled", from_numpy(sequence.copy()))
        table = table.take(from_numpy(sort)).cast(self.schema)
        add_sorted(self.held, table, buckets[sort])
        self.held_bytes += table.nbytes
        if self.held_bytes > BUFFER_BYTES:
            self.buckets += flush(self.writer, self.held)
            self.held_bytes = 0

    def close(self) -> list[int]:
        self.buckets += flush(self.writer, self.held)
        self.writer.close()
        self.sink.close()
        return self.buckets


def add_sorted(held: dict[int, list[pa.RecordBatch]], table: pa.Table, buckets: np.ndarray):
    """Rows sorted by bucket, to `held`'s lists by bucket."""
    ends = np.flatnonzero(np.diff(buckets)) + 1
    for start, end in zip([0, *ends], [*ends, len(buckets)], strict=True):
        held.setdefault(int(buckets[start]), []).extend(
            table.slice(start, end - start).to_batches()
        )


@dataclass(frozen=True)
class GatherTask:
    bucket: int  # the output file's number over all splits
    out: AnyPath
    pieces: tuple[tuple[AnyPath, tuple[int, ...]], ...]  # per IPC file: its batches
    schema: pa.Schema
    rows: int  # the file's rows, known from the plan


def gather(task: GatherTask) -> dict:
    """One shuffled packed file: its rows from the tasks' files, by place."""
    batches = [open_ipc(path).get_batch(n) for path, wanted in task.pieces for n in wanted]
    table = pa.Table.from_batches(batches, task.schema)
    order = np.argsort(numbers(table["sequence"]), kind="stable")
    if len(order) != task.rows:
        raise TokenmillError(
            f"{task.out}: {len(order)} rows, {task.rows} planned: a token shard changed "
            "while being packed; pack again"
        )
    seq_len = max(1, int(numbers(table["n_tokens"]).max(initial=1)))
    per_group = max(1, WRITE_BYTES // (seq_len * 4))
    tokens = int(numbers(table["n_tokens"]).sum(dtype=np.int64))
    with atomic_path(task.out) as tmp:
        with pq.ParquetWriter(tmp, task.schema, use_dictionary=False, compression="zstd") as w:
            for start in range(0, max(1, len(order)), per_group):
                w.write_table(table.take(from_numpy(order[start : start + per_group])))
        checkpoint("packed-gather", task.bucket + 1)  # tests kill here
    return {"sequences": len(order), "tokens": tokens}


def with_orders(tasks: list, spec, scratch: AnyPath) -> list:
    """The packing tasks (layouts/packed_plan.PackTask) of a shuffled packing with
    each split's Order and each task's file of rows to sort. A split's files
    are those of the tasks with a file in it, numbered in turn; each one's
    places are the stream's rows its shard ends, the last one's the short row."""
    assert spec.shuffle is not None
    n, orders, first = spec.seq_len, {}, 0
    for side in spec.sides:
        mine = [t.sides[side] for t in tasks if side in t.sides]
        bounds = np.array([s.start // n for s in mine] + [-(-mine[-1].end // n)])
        orders[side] = Order(spec.shuffle, mine[-1].end // n, bounds, first)
        first += len(mine)
    return [
        dataclasses.replace(t, orders=orders, scratch=location(scratch) / f"{t.index:06d}.arrow")
        for t in tasks
    ]


def write_files(tasks: list, done: list[list[dict]], spec, workers, executor, ray_address):
    """The shuffled packed files, one task each, from the rows the packing
    tasks (`with_orders`) put in their files; `done`: their results."""
    held = [by_bucket(results[0].pop("buckets")) for results in done]
    gathers = []
    for side in spec.sides:
        order = tasks[0].orders[side]
        for k, task in enumerate(t for t in tasks if side in t.sides):
            b = order.first + k
            pieces = tuple((t.scratch, tuple(h[b])) for t, h in zip(tasks, held, strict=True)
                           if b in h)  # fmt: skip
            rows = int(order.bounds[k + 1] - order.bounds[k])
            schema = spec.schema(task.shard.source)
            gathers.append(GatherTask(b, spec.file(side, task.shard), pieces, schema, rows))
    run_tasks(gather, gathers, workers=workers, desc="pack-order", executor=executor,
              ray_address=ray_address)  # fmt: skip


def read_rows(files: list[AnyPath]) -> Iterator[pa.RecordBatch]:
    """The rows of shuffled packed `files` (ids, documents) in stream order: an
    external sort by `unshuffled` through a temporary file, READ_BYTES of ids
    (at 4 bytes an id) at a time in memory."""
    columns = ["unshuffled", "ids", "documents"]
    with tempfile.TemporaryDirectory(prefix="tokenmill-unshuffle-") as tmp:
        sink = pa.OSFile(str(Path(tmp) / "rows.arrow"), "wb")
        writer = None
        held: dict[int, list[pa.RecordBatch]] = {}
        held_bytes, written = 0, []
        for path in files:
            with parquet_file(location(path)) as pf:
                seq_len = int((pf.schema_arrow.metadata or {}).get(SEQ_LEN, b"1"))
                per = np.uint64(max(1, READ_BYTES // (4 * seq_len)))  # rows a bucket
                for batch in pf.iter_batches(columns=columns):
                    writer = writer or pa.ipc.new_file(sink, batch.schema)
                    buckets = numbers(batch.column("unshuffled")) // per
                    sort = np.argsort(buckets, kind="stable")
                    table = pa.Table.from_batches([batch]).take(from_numpy(sort))
                    add_sorted(held, table, buckets[sort])
                    held_bytes += table.nbytes
                    if held_bytes > BUFFER_BYTES:
                        written += flush(writer, held)
                        held_bytes = 0
        if writer is None:
            return
        written += flush(writer, held)
        writer.close()
        sink.close()
        reader = open_ipc(Path(tmp) / "rows.arrow")
        where = by_bucket(written)
        for b in sorted(where):
            table = pa.Table.from_batches([reader.get_batch(n) for n in where[b]])
            order = np.argsort(numbers(table["unshuffled"]), kind="stable")
            yield from table.take(from_numpy(order)).to_batches()
