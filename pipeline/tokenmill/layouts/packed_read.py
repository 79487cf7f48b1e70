"""Reading packed shards back: the documents of each stream, put back
together from the pieces its rows record (layouts/packed.py's `read`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pyarrow as pa

from tokenmill.errors import TokenmillError, one_line
from tokenmill.io.storage import AnyPath, listed, parquet_file
from tokenmill.layouts import Document
from tokenmill.layouts.packed_shuffle import read_rows
from tokenmill.stages.tokens import list_ids


@contextmanager
def packed_file(path: AnyPath) -> Iterator:
    """`parquet_file`, with a damaged file's error naming it (PyArrow's
    "magic bytes not found in footer" does not)."""
    try:
        with parquet_file(path) as pf:
            yield pf
    except (OSError, pa.ArrowException) as e:
        raise TokenmillError(f"{path}: cannot be read ({one_line(e)})") from None


def parquet_files(folder: AnyPath) -> list[AnyPath]:
    """The packed shards under `folder` (not its temporaries, hidden)."""
    return [folder / name for name in listed(folder, ".parquet")]


def in_stream_order(paths: list[AnyPath]) -> list[AnyPath]:
    """The packed shards that have rows, by their first row's sequence number."""
    first = []
    for path in paths:
        with packed_file(path) as pf:
            if pf.metadata.num_rows:
                sequence = pf.read_row_group(0, columns=["sequence"]).column(0)[0].as_py()
                first.append((sequence, path))
    return [path for _, path in sorted(first, key=lambda sp: sp[0])]


def sequence_problems(folder: AnyPath, where: str) -> list[str]:
    """Whether the rows' `sequence` numbers in one stream of packed shards are
    0 to n - 1, each once: a loader that indexes rows by it (or sorts by it)
    would otherwise read a row twice, or never."""
    found = []
    for path in parquet_files(folder):
        with packed_file(path) as pf:
            found.append(pf.read(columns=["sequence"]).column(0).to_numpy())
    numbers = np.sort(np.concatenate(found)) if found else np.empty(0, np.uint64)
    wrong = np.flatnonzero(numbers != np.arange(len(numbers), dtype=numbers.dtype))
    if not len(wrong):
        return []
    return [
        f"{where}: the rows' sequence numbers are not 0 to {len(numbers) - 1}, each once "
        f"(the first not in place: {numbers[wrong[0]]})"
    ]


def stream_batches(folder: AnyPath) -> Iterator[pa.RecordBatch]:
    """The rows (ids, documents) of one stream of packed shards in stream order."""
    files = in_stream_order(parquet_files(folder))
    if files:
        with packed_file(files[0]) as pf:
            if "unshuffled" in pf.schema_arrow.names:
                yield from read_rows(files)
                return
    for path in files:
        with packed_file(path) as pf:
            yield from pf.iter_batches(columns=["ids", "documents"])


def read_side(folder: AnyPath, split: str) -> Iterator[Document]:
    """The documents of one stream of packed shards, put back together from
    the pieces the rows record (a document may span rows and files)."""
    pending: tuple[str, int, list[np.ndarray]] | None = None
    for batch in stream_batches(folder):
        # The pieces tile the rows in order: piece k is flat[at[k]:at[k + 1]],
        # and a document starts where a piece's offset is 0.
        flat, _ = list_ids(batch.column("ids"))
        pieces = batch.column("documents").flatten()
        at = np.concatenate([[0], np.cumsum(pieces.field("length").to_numpy(), dtype=np.int64)])
        first = np.flatnonzero(pieces.field("offset").to_numpy() == 0)
        cuts = np.append(at[first], at[-1])
        if pending is not None:
            pending[2].append(flat[: cuts[0]])
        sources = pieces.field("shard").to_numpy(zero_copy_only=False)
        rows = pieces.field("row").to_numpy()
        for k, p in enumerate(first):
            if pending is not None:
                yield Document(split, np.concatenate(pending[2]), pending[0], pending[1])
            pending = (str(sources[p]), int(rows[p]), [flat[cuts[k] : cuts[k + 1]]])
    if pending is not None:
        yield Document(split, np.concatenate(pending[2]), pending[0], pending[1])
