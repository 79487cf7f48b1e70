"""The documents of the token shards as one stream per split: their lengths
first, then each shard's ids written to its region.

What the megatron, datatrove and olmo layouts share. Each writes, per split
(train and val with --val-fraction, else one) and either per token shard or
merged for the corpus, one file of ids end to end, and beside it small files
made from the documents' lengths (and rows): Megatron's .idx, datatrove's
.ds.index and .ds.metadata, OLMo's .csv.gz. A layout module says how its
files are named and what those small files hold (a `Sink`); this module
frames the documents, places and writes the ids.

The end-of-document rule, the same in the three layouts (and in packed's
rows): a document is one row of a token shard, written as
``[<|bos|>] + ids + [<|endoftext|>]``. ``<|bos|>`` comes first with --bos
only. The ``<|endoftext|>`` is the one `encode` ended the row with; for
shards encoded with --no-eos it is added here (a row already ending in it
gets no second: `layouts.rows.document_stream`). Every document therefore
ends in ``<|endoftext|>``, an empty text being that id alone: the trainers
read windows across documents (Megatron's samples, nanotron's windows,
OLMo-core's documents found by their eos), and the id is how a model sees
where one document ends.

Merged, writing takes two passes. The first reads each shard's ``row`` and
``n_tokens`` columns only (its ids too when the shard does not record
whether `encode` ended its rows in ``<|endoftext|>``): the length and split
of every document, hence where each shard's ids go in each split's file.
Then threads read the shards' ids and `os.pwrite` each its own region of
one preallocated temporary (Parquet reading and pwrite release the GIL).
Per shard, one pass: a task per shard writes its files in order.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from tokenmill.errors import TokenmillError
from tokenmill.executors import run_tasks
from tokenmill.faults import checkpoint
from tokenmill.io.files import parquet_json_metadata
from tokenmill.io.metadata import STATE
from tokenmill.io.storage import AnyPath, location
from tokenmill.io.writers import atomic_path
from tokenmill.layouts import LayoutJob, LayoutResult
from tokenmill.layouts.rows import bos_id, document_stream
from tokenmill.stages.split import SPLITS, VAL, in_split, shard_is_val
from tokenmill.stages.tokens import TokenShard, list_ids
from tokenmill.tokenizer import ENDOFTEXT


@dataclass(frozen=True)
class Frame:
    """The ids documents are framed with, and the dtype the ids are written in."""

    eos: int
    bos: int | None
    dtype: np.dtype  # little-endian


def frame(job: LayoutJob, dtype: np.dtype) -> Frame:
    """The frame of `job`'s documents, once its tokenizer is known to have the ids."""
    tok = job.tokenizer
    if ENDOFTEXT not in tok.special_tokens:
        raise TokenmillError(f"the tokenizer has no {ENDOFTEXT} to end documents with")
    bos = bos_id(tok) if job.bos else None
    return Frame(tok.eos_id, bos, np.dtype(dtype).newbyteorder("<"))


def sides(fraction: float) -> tuple[str, ...]:
    """The splits written: ("",) when not split."""
    return SPLITS if fraction > 0 else ("",)


@dataclass(frozen=True)
class Docs:
    """Documents of one shard (or one batch): their rows, their lengths as
    written and, when split, which go to val."""

    rows: np.ndarray  # uint64
    lengths: np.ndarray  # int64
    val: np.ndarray | None

    def on(self, side: str) -> np.ndarray:
        """Which documents go to `side` ("" when not split)."""
        if self.val is None:
            return np.ones(len(self.rows), bool)
        return self.val if side == VAL else ~self.val

    def tokens(self, side: str) -> int:
        return int(self.lengths[self.on(side)].sum())

    def ids(self, stream: np.ndarray, side: str) -> np.ndarray:
        """Of `stream`, these documents' ids, those of the documents on `side`."""
        return stream if self.val is None else stream[np.repeat(self.on(side), self.lengths)]


def concat(docs: list[Docs], split: bool) -> Docs:
    if not docs:
        return Docs(
            np.empty(0, np.uint64), np.empty(0, np.int64), np.empty(0, bool) if split else None
        )
    val = np.concatenate([d.val for d in docs]) if split else None
    return Docs(
        np.concatenate([d.rows for d in docs]), np.concatenate([d.lengths for d in docs]), val
    )


def encoded_with_eos(shard: TokenShard) -> bool | None:
    """Whether encode ended each row of `shard` with <|endoftext|>, as its
    recorded options say (None: not recorded)."""
    state = parquet_json_metadata(shard.path, STATE)
    key = state.get("key") if isinstance(state, dict) else None
    eos = key.get("eos") if isinstance(key, dict) else None
    return eos if isinstance(eos, bool) else None


def framed_batches(
    shard: TokenShard, frame: Frame, fraction: float
) -> Iterator[tuple[Docs, np.ndarray]]:
    """`shard`'s documents batch by batch: (Docs, their framed ids end to end)."""
    for batch in shard.batches(columns=("row", "ids")):
        stream, lens = document_stream(*list_ids(batch.column("ids")), frame.eos, frame.bos)
        rows = batch.column("row").to_numpy()
        val = shard_is_val(shard, rows, fraction) if fraction > 0 else None
        yield Docs(rows, lens.astype(np.int64), val), stream.astype(frame.dtype, copy=False)


def measure(shard: TokenShard, frame: Frame, fraction: float) -> Docs:
    """`shard`'s documents, their ids unread where the recorded options tell
    whether rows end in <|endoftext|> already."""
    eos = encoded_with_eos(shard)
    if eos is None:  # then a row's last id tells
        return concat([docs for docs, _ in framed_batches(shard, frame, fraction)], fraction > 0)
    parts = []
    for batch in shard.batches(columns=("row", "n_tokens")):
        rows = batch.column("row").to_numpy()
        lens = batch.column("n_tokens").to_numpy().astype(np.int64)
        lens += (frame.bos is not None) + (not eos)
        val = shard_is_val(shard, rows, fraction) if fraction > 0 else None
        parts.append(Docs(rows, lens, val))
    return concat(parts, fraction > 0)


def pwrite_all(fd: int, data: np.ndarray, at: int) -> None:
    # One call may write less (Linux stops at 2 GiB).
    view = memoryview(data.data).cast("B")
    while view:
        n = os.pwrite(fd, view, at)
        view, at = view[n:], at + n


def fill(
    shard: TokenShard,
    plan: Docs,
    frame: Frame,
    fraction: float,
    regions: dict[str, tuple[int, int]],
) -> None:
    """Write `shard`'s documents, as `plan` measured them, into each side's
    file: {side: (descriptor, byte where the shard's ids start)}."""
    at = {side: start for side, (_, start) in regions.items()}
    done = 0
    for docs, stream in framed_batches(shard, frame, fraction):
        n = len(docs.rows)
        if not np.array_equal(docs.lengths, plan.lengths[done : done + n]):
            raise TokenmillError(f"{shard.path}: changed while being read; rerun")
        for side, (fd, _) in regions.items():
            data = docs.ids(stream, side)
            pwrite_all(fd, data, at[side])
            at[side] += data.nbytes
        done += n
    if done != len(plan.rows):
        raise TokenmillError(f"{shard.path}: changed while being read; rerun")


def open_preallocated(stack: contextlib.ExitStack, path: AnyPath, nbytes: int) -> int:
    """A descriptor on the temporary of `path`, made `nbytes` long; closed, then
    the temporary put in place, when `stack` closes."""
    tmp = stack.enter_context(atomic_path(path))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    stack.callback(os.close, fd)
    os.ftruncate(fd, nbytes)
    return fd


@dataclass(frozen=True)
class Part:
    """One shard's documents in a file of ids: their rows, lengths, and where
    the first starts (in ids from the file's start)."""

    shard: TokenShard
    rows: np.ndarray
    lengths: np.ndarray
    start: int


@dataclass
class Stream:
    """One file of ids: its name (relative to the layout's folder), split ("" when
    not split), its shards' documents in order, and every file written for it."""

    name: str
    split: str
    parts: list[Part]
    files: list[str] = field(default_factory=list)

    @property
    def lengths(self) -> np.ndarray:
        return (
            np.concatenate([p.lengths for p in self.parts]) if self.parts else np.empty(0, np.int64)
        )

    @property
    def documents(self) -> int:
        return sum(len(p.lengths) for p in self.parts)

    @property
    def tokens(self) -> int:
        return sum(int(p.lengths.sum()) for p in self.parts)


class Sink(Protocol):
    """What a layout adds to the streams: its name (progress, and the fault
    point "<name>-write", where tests kill a run with its temporaries open),
    its files' names and the files it writes beside each file of ids."""

    name: str

    def stream_name(self, split: str, stem: str | None) -> str:
        """The file of ids of `split` for the token shard `stem` (its name
        without .parquet), or merged for the corpus (None)."""
        ...

    def finish(self, stream: Stream, folder: AnyPath, frame: Frame, workers: int) -> list[str]:
        """Write the files that go with `stream`'s ids; their names, relative to `folder`."""
        ...


def write_streams(job: LayoutJob, frame: Frame, sink: Sink) -> list[Stream]:
    """Write the streams of `job.shards`, split by split, the shards in input order."""
    folder = location(job.folder)
    if not job.per_shard:
        return merged_streams(job, folder, frame, sink)
    tasks = [ShardTask(s, folder, frame, job.val_fraction, sink) for s in job.shards]
    done = run_tasks(
        shard_streams,
        tasks,
        workers=job.workers,
        executor=job.executor,
        ray_address=job.ray_address,
        desc=sink.name,
    )
    return [
        s
        for side in sides(job.val_fraction)
        for streams in done
        for s in streams
        if s.split == side
    ]


@dataclass(frozen=True)
class ShardTask:
    """A token shard's own files, one set per split, in one task (on any executor)."""

    shard: TokenShard
    folder: AnyPath
    frame: Frame
    fraction: float
    sink: Sink


def holding(shard: TokenShard, fraction: float) -> set[str]:
    """The splits of `shard` that hold a document: an empty input, or a small
    shard none of whose documents is held out, gets no file there, as a file
    of no ids is one trainers' readers cannot map (numpy's memmap refuses it)."""
    if not shard.documents:
        return set()
    if fraction <= 0:
        return {""}
    held = sum(
        int(shard_is_val(shard, batch.column("row").to_numpy(), fraction).sum())
        for batch in shard.batches(columns=("row",))
    )
    counts = {SPLITS[0]: shard.documents - held, SPLITS[1]: held}
    return {side for side, n in counts.items() if n}


def shard_streams(task: ShardTask) -> list[Stream]:
    shard, folder, fraction, sink = task.shard, task.folder, task.fraction, task.sink
    stem = shard.name.removesuffix(".parquet")
    held = holding(shard, fraction)
    mine = [side for side in sides(fraction) if in_split(shard, side) and side in held]
    names = {side: sink.stream_name(side, stem) for side in mine}
    parts = []
    with contextlib.ExitStack() as stack:
        files = {
            side: stack.enter_context(open(stack.enter_context(atomic_path(folder / name)), "wb"))
            for side, name in names.items()
        }
        for docs, stream in framed_batches(shard, task.frame, fraction):
            for side, f in files.items():
                f.write(docs.ids(stream, side).data)
            parts.append(docs)
        checkpoint(f"{sink.name}-write", 1)  # tests kill here, with this shard's temporaries open
        docs = concat(parts, fraction > 0)
        streams = []
        for side, name in names.items():
            on = docs.on(side)
            part = Part(shard, docs.rows[on], docs.lengths[on], 0)
            streams.append(finish(sink, Stream(name, side, [part]), folder, task.frame, 1))
    return streams


def merged_streams(job: LayoutJob, folder: AnyPath, frame: Frame, sink: Sink) -> list[Stream]:
    """One file of ids per split for all shards: their regions placed first, then
    written by threads into one temporary."""
    shards, fraction, size = job.shards, job.val_fraction, frame.dtype.itemsize
    plans = run_tasks(
        lambda s: measure(s, frame, fraction),
        shards,
        workers=job.workers,
        executor="threads",
        desc=sink.name,
    )
    names = {side: sink.stream_name(side, None) for side in sides(fraction)}
    with contextlib.ExitStack() as stack:
        starts, fds = {}, {}  # per side: each shard's first id; the file's descriptor
        for side, name in names.items():
            tokens = np.cumsum([p.tokens(side) for p in plans], dtype=np.int64)
            starts[side] = np.concatenate([[0], tokens]).tolist()
            fds[side] = open_preallocated(stack, folder / name, starts[side][-1] * size)

        def write(i: int) -> None:
            regions = {side: (fds[side], starts[side][i] * size) for side in names}
            fill(shards[i], plans[i], frame, fraction, regions)

        # Threads: they share the temporaries' descriptors.
        run_tasks(
            write, range(len(shards)), workers=job.workers, executor="threads", desc=sink.name
        )
        checkpoint(f"{sink.name}-write", 1)  # tests kill here, with the temporaries open
        streams = []
        for side, name in names.items():
            parts = []
            for i, (shard, plan) in enumerate(zip(shards, plans, strict=True)):
                on = plan.on(side)
                parts.append(Part(shard, plan.rows[on], plan.lengths[on], starts[side][i]))
            streams.append(finish(sink, Stream(name, side, parts), folder, frame, job.workers))
    return streams


def finish(sink: Sink, stream: Stream, folder: AnyPath, frame: Frame, workers: int) -> Stream:
    """`stream`, its ids written, with the files `sink` writes beside them."""
    stream.files = [stream.name, *sink.finish(stream, folder, frame, workers)]
    return stream


def result(
    name: str, folder: AnyPath, streams: list[Stream], noun: str, frame: Frame, start: float
) -> LayoutResult:
    """What a layout of `streams` reports: each stream's files, its documents."""
    n = len(streams)
    return LayoutResult(
        stage=name,
        dir=str(location(folder)),
        files=[f for s in streams for f in s.files],
        rows={s.name: s.documents for s in streams},
        documents=sum(s.documents for s in streams),
        tokens=sum(s.tokens for s in streams),
        summary=f"{n} {noun}{'s' * (n != 1)} of {frame.dtype.name}",
        redone=n,
        seconds=time.monotonic() - start,
    )


def split_of(name: str, split: bool) -> str:
    """The split of a file at `name` of a run that was `split` or not: its top
    folder when split (train/ or val/); "" when not, whatever its folders (a
    per-shard file's are the input's, and DATA may have train/ and val/)."""
    top, sep, _ = name.partition("/")
    return top if split and sep and top in SPLITS else ""
