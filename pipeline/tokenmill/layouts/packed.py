"""packed (--pack N): the token shards as fixed-length training sequences.

The documents of all token shards, in input order, each as
``[<|bos|>] + ids + [<|endoftext|>]`` (``<|bos|>`` with --bos only; the
``<|endoftext|>`` is the one `encode` put there, added here only for shards
encoded with --no-eos), are concatenated into one stream and cut into rows of
exactly SEQ_LEN ids.

Remainder policy: one packed shard per token shard, same file name. A shard's
rows are the full rows that *end* within its documents; the ids left over
after its last full row are carried, unchanged, to the front of the next
shard's first row. Only the very last row of the last shard may be shorter
than SEQ_LEN (1 to SEQ_LEN - 1 ids), so no id is dropped, duplicated or
padded, and the result does not depend on batch sizes or worker counts. A
shard too small to end a row gets a packed shard with no rows.

Columns of a packed shard:

- ``sequence`` (uint64): the row's index across all packed shards;
- ``ids`` (list<uint16|uint32>) and ``n_tokens`` (uint32, SEQ_LEN except in the
  very last row);
- ``documents``: the pieces of documents the row holds, in order, each a struct
  of ``shard`` (input shard name), ``row`` (the document's row in it),
  ``offset`` (where the piece starts in the document's ids, counting the
  ``<|bos|>``), ``start`` (where it starts in this row) and ``length``.

With --val-fraction, the documents stages/split.py puts in validation form a
stream of their own: PACKED_DIR/train/<shard> and PACKED_DIR/val/<shard>, each
packed by the rules above, so no row mixes train and val documents.

Two passes, each one task per shard on `workers` cores. The first reads the
documents' lengths only (the ``n_tokens`` column when the shard records that
`encode` ended every document with ``<|endoftext|>``), which places every
shard in the stream: where its first row starts and its sequence numbers.
The second writes each packed shard on its own: it reads the ids its first
row carries over from the tails of the shards before it (one or several,
when they are short), then its own documents, batch by batch, one row group
per batch as a single sequential pass would write them, so the bytes do
not depend on the number of workers.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.errors import TokenmillError
from tokenmill.executors import run_tasks
from tokenmill.faults import checkpoint
from tokenmill.io.metadata import (
    BOS_ID,
    EOS_ID,
    SEQ_LEN,
    SOURCE,
    STATE,
    TOKENIZER_SHA256,
    VOCAB_SIZE,
)
from tokenmill.io.storage import AnyPath, is_remote, location, parquet_file, walk_files
from tokenmill.io.writers import atomic_path
from tokenmill.layouts import Document, LayoutJob, LayoutResult
from tokenmill.layouts.rows import (
    PIECE,
    Packer,
    Pieces,
    cut_pieces,
    document_stream,
    ends_in,
    select_documents,
)
from tokenmill.stages.results import PackResult
from tokenmill.stages.split import SPLITS, TRAIN, VAL, is_val
from tokenmill.stages.tokens import BATCH_ROWS, TokenShard, list_ids
from tokenmill.tokenizer import BOS, ENDOFTEXT, Tokenizer


class Packed:
    name = "packed"
    folder = "packed"
    reader = "pyarrow"
    ends_in_eos = True

    def owns(self, name: str) -> bool:
        return name.endswith(".parquet")

    def write(self, job: LayoutJob) -> LayoutResult:
        result = pack_shards(
            job.shards,
            job.tokenizer,
            job.folder,
            job.seq_len,
            bos=job.bos,
            val_fraction=job.val_fraction,
            workers=job.workers,
            executor=job.executor,
            ray_address=job.ray_address,
        )
        sides = list(SPLITS) if job.val_fraction > 0 else [""]
        # pack_shards lists its files shard by shard, each split in turn.
        files = [f"{side}/{s.name}" if side else s.name for s in job.shards for side in sides]
        return LayoutResult(
            stage="pack",
            dir=str(location(job.folder)),
            files=files,
            rows={f: r["sequences"] for f, r in zip(files, result.shards, strict=True)},
            documents=result.documents,
            tokens=result.tokens,
            summary=f"{result.sequences} sequences of {result.seq_len} (last: {result.last_row})",
            seconds=result.seconds,
            redone=len(files),
        )

    def read(self, folder: AnyPath) -> Iterator[Document]:
        folder = location(folder)
        sides = [s for s in SPLITS if (folder / s).is_dir()] or [""]
        for side in sides:
            yield from read_side(folder / side if side else folder, side)

    def framework_read(self, folder: AnyPath) -> Iterator[Document]:
        """Packed rows are Parquet, read with pyarrow as a trainer's loader reads
        them (Hugging Face datasets, a torch Dataset over pyarrow): `read`."""
        return self.read(folder)

    def recorded(self, folder: AnyPath) -> dict[str, str]:
        """The metadata of the first packed shard (every shard records the same)."""
        files = in_stream_order(parquet_files(location(folder)))
        if not files:
            return {}
        with parquet_file(files[0]) as pf:
            meta = pf.schema_arrow.metadata or {}
        keys = {TOKENIZER_SHA256: "tokenizer_sha256", VOCAB_SIZE: "vocab_size"}
        keys |= {EOS_ID: "eos_id", BOS_ID: "bos_id"}
        return {mine: meta[k].decode() for k, mine in keys.items() if k in meta}


LAYOUT = Packed()


# ---- writing: the plan, then one task per shard ---------------------------


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
    lengths in the stream, and the rows each Parquet row group holds."""

    rows: np.ndarray  # uint64, in file order
    lens: np.ndarray  # int64
    groups: np.ndarray  # int64 rows per row group


def document_lengths(task: tuple[TokenShard, Spec]) -> Lengths:
    shard, spec = task
    rows, lens = [], []
    try:
        with parquet_file(shard.path) as pf:
            meta = pf.metadata
            groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
            # When `encode` ended every document with <|endoftext|>, the
            # lengths are in n_tokens, and the ids need not be read.
            ended = ended_with_eos(meta.metadata or {})
            columns = ["row", "n_tokens" if ended else "ids"]
            for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=columns):
                rows.append(batch.column("row").to_numpy())
                if ended:
                    lens.append(batch.column("n_tokens").to_numpy().astype(np.int64))
                else:
                    flat, offsets = list_ids(batch.column("ids"))
                    lens.append(
                        np.diff(offsets).astype(np.int64) + ~ends_in(flat, offsets, spec.eos)
                    )
    except (OSError, pa.ArrowException) as e:
        raise TokenmillError(f"{shard.path}: cannot read token shard ({e})") from None
    b = 0 if spec.bos is None else 1
    return Lengths(
        rows=np.concatenate(rows) if rows else np.empty(0, np.uint64),
        lens=(np.concatenate(lens) if lens else np.empty(0, np.int64)) + b,
        groups=np.array(groups, np.int64),
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
    groups: np.ndarray  # the shard's rows per row group
    base: int


@dataclass(frozen=True)
class Side:
    """Where one shard's documents of one split go in that split's stream."""

    start: int  # stream position of its first document
    end: int
    tails: list[Tail]  # what its first row carries, earliest first


@dataclass(frozen=True)
class PackTask:
    index: int
    shard: TokenShard
    last: bool
    sides: dict[str, Side]
    spec: Spec


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
            sides.append(Side(int(starts[i]), int(ends[i]), tails))
        per_side[side] = sides
    return [
        PackTask(i, shard, i == len(shards) - 1, {s: per_side[s][i] for s in spec.sides}, spec)
        for i, shard in enumerate(shards)
    ]


def side_of(spec: Spec, shard: TokenShard, rows: np.ndarray, side: str) -> np.ndarray:
    """Which documents (by their rows) of `shard` go to split `side`."""
    val = is_val(shard.source, rows, spec.val_fraction)
    return {"": np.ones(len(rows), bool), TRAIN: ~val, VAL: val}[side]


def read_tails(tails: list[Tail]) -> list[pa.Array]:
    """The ids of each tail's documents, reading only the row groups holding
    them, each earlier shard's once (both splits' tails are often in the same)."""
    found: list[pa.Array] = []
    read: dict[int, tuple[int, pa.ChunkedArray]] = {}
    for tail in tails:
        bounds = np.concatenate([[0], np.cumsum(tail.groups)])
        if tail.index not in read:
            ours = [t.positions for t in tails if t.index == tail.index]
            lo, hi = min(p[0] for p in ours), max(p[-1] for p in ours)
            first = int(np.searchsorted(bounds, lo, side="right")) - 1
            last = int(np.searchsorted(bounds, hi, side="right")) - 1
            try:
                with parquet_file(tail.shard.path) as pf:
                    table = pf.read_row_groups(range(first, last + 1), columns=["ids"])
            except (OSError, pa.ArrowException) as e:
                raise TokenmillError(f"{tail.shard.path}: cannot read token shard ({e})") from None
            read[tail.index] = (first, table.column("ids"))
        first, ids = read[tail.index]
        found.append(ids.take(pa.array(tail.positions - bounds[first])).combine_chunks())
    return found


def carried(task: PackTask) -> dict[str, tuple[np.ndarray, Pieces]]:
    """For each split, the ids (and their pieces) that the first row of the
    task's shard starts with: the tails of the shards before it."""
    spec = task.spec
    tails = [tail for side in task.sides.values() for tail in side.tails]
    found = iter(read_tails(tails))
    carries = {}
    for name, side in task.sides.items():
        ids: list[np.ndarray] = [np.empty(0, spec.id_dtype)]
        pieces = Pieces()
        for tail in side.tails:
            stream, lens = document_stream(*list_ids(next(found)), spec.eos, spec.bos)
            cut = cut_pieces(lens, tail.rows, tail.index, tail.base, spec.seq_len)
            pieces = pieces + cut.select(cut.seq >= 0)
            ids.append(stream[-tail.base if tail.base < 0 else 0 :].astype(spec.id_dtype))
        carries[name] = np.concatenate(ids), pieces
    return carries


def pack_shard(task: PackTask) -> list[dict]:
    """Write the task's packed shard (one per split): from its place in the
    stream, the ids carried in, then its documents batch by batch, as one
    sequential pass would have; its counts per split."""
    spec, shard = task.spec, task.shard
    n = spec.seq_len
    carries = carried(task)
    packers = {
        name: Packer(
            n,
            spec.eos,
            spec.bos,
            spec.id_dtype,
            spec.names,
            carry=carries[name],
            sequences=side.start // n,
        )
        for name, side in task.sides.items()
    }
    first = {name: p.sequences for name, p in packers.items()}
    tokens = dict.fromkeys(packers, 0)
    documents = dict.fromkeys(packers, 0)
    schema = spec.schema(shard.source)
    with contextlib.ExitStack() as stack:
        writers = {
            side: stack.enter_context(
                pq.ParquetWriter(
                    stack.enter_context(atomic_path(spec.file(side, shard))),
                    schema,
                    use_dictionary=False,
                    compression="zstd",
                )
            )
            for side in packers
        }

        def write(side: str, ids: np.ndarray, pieces: Pieces, nrows: int) -> None:
            tokens[side] += len(ids)
            if nrows:
                writers[side].write_table(packers[side].table(schema, ids, pieces, nrows))

        for batch in shard.batches():
            flat, offsets = list_ids(batch.column("ids"))
            flat = flat.astype(spec.id_dtype, copy=False)
            rows = batch.column("row").to_numpy()
            val = is_val(shard.source, rows, spec.val_fraction)
            for side, packer in packers.items():
                keep = {"": None, TRAIN: ~val, VAL: val}[side]
                s_rows, s_flat, s_offsets = select_documents(rows, flat, offsets, keep)
                documents[side] += len(s_rows)
                write(side, *packer.add(task.index, s_rows, s_flat, s_offsets))
        # Tests kill here, with this shard's temporary open.
        checkpoint("packed-write", task.index + 1)
        for side, packer in packers.items():
            end = task.sides[side].end
            if packer.sequences != end // n or len(packer.carry) != end % n:
                raise TokenmillError(f"{shard.path}: changed while being packed; pack again")
            if task.last:
                write(side, *packer.finish())
    return [
        {
            "shard": shard.source,
            **({"split": side} if side else {}),
            "file": str(spec.file(side, shard)),
            "documents": documents[side],
            "sequences": packers[side].sequences - first[side],
            "tokens": tokens[side],
            "reused": False,  # packing is redone every time (cheap)
        }
        for side in packers
    ]


def pack_shards(
    shards: list[TokenShard],
    tok: Tokenizer,
    packed_dir: AnyPath,
    seq_len: int,
    *,
    bos: bool = False,
    val_fraction: float = 0.0,
    workers: int = 1,
    executor: str = "threads",
    ray_address: str | None = None,
) -> PackResult:
    """Pack `shards` (in input order, encoded with `tok`) into `packed_dir`,
    each to its `name` there (under train/ and val/ with `val_fraction`)."""
    start = time.monotonic()
    if seq_len < 1:
        raise TokenmillError(f"--pack/--seq-len must be at least 1, not {seq_len}")
    if ENDOFTEXT not in tok.special_tokens:
        raise TokenmillError(f"the tokenizer has no {ENDOFTEXT} to separate documents with")
    if bos and BOS not in tok.special_tokens:
        raise TokenmillError(
            f"--bos: the tokenizer has no {BOS} special token "
            f"(train it with --bos or --special-token '{BOS}')"
        )
    spec = Spec(
        seq_len=seq_len,
        eos=tok.eos_id,
        bos=tok.special_id(BOS) if bos else None,
        wide=tok._wide_ids,
        sha256=tok.sha256,
        vocab_size=tok.vocab_size,
        names=[s.source for s in shards],
        val_fraction=val_fraction,
        folder=packed_dir,
    )
    lengths = run_tasks(
        document_lengths,
        [(s, spec) for s in shards],
        workers=workers,
        desc="pack-plan",
        executor=executor,
        ray_address=ray_address,
    )
    tasks = plan(shards, lengths, spec)
    done = run_tasks(
        pack_shard,
        tasks,
        workers=workers,
        desc="pack",
        executor=executor,
        ray_address=ray_address,
        size=lambda t: t.shard.documents,
    )
    results = [r for shard_results in done for r in shard_results]
    sequences = sum(r["sequences"] for r in results)
    # The length of the run's very last row (of the last split's stream); seq_len if full.
    last = tasks[-1].sides[spec.sides[-1]].end % seq_len
    return PackResult(
        shards=results,
        seq_len=seq_len,
        sequences=sequences,
        last_row=(last or seq_len) if sequences else 0,
        documents=sum(r["documents"] for r in results),
        tokens=sum(r["tokens"] for r in results),
        reused=0,
        redone=len(results),
        seconds=time.monotonic() - start,
    )


# ---- reading --------------------------------------------------------------


def parquet_files(folder: AnyPath) -> list[AnyPath]:
    """The packed shards under `folder` (not its temporaries, hidden)."""
    if is_remote(folder):
        names = [name for name, _ in walk_files(folder)]
    else:
        names = [p.relative_to(folder).as_posix() for p in folder.rglob("*.parquet")]
    return [
        folder / n
        for n in names
        if n.endswith(".parquet") and not any(part.startswith(".") for part in n.split("/"))
    ]


def in_stream_order(paths: list[AnyPath]) -> list[AnyPath]:
    """The packed shards that have rows, by their first row's sequence number."""
    first = []
    for path in paths:
        with parquet_file(path) as pf:
            if pf.metadata.num_rows:
                sequence = pf.read_row_group(0, columns=["sequence"]).column(0)[0].as_py()
                first.append((sequence, path))
    return [path for _, path in sorted(first, key=lambda sp: sp[0])]


def read_side(folder: AnyPath, split: str) -> Iterator[Document]:
    """The documents of one stream of packed shards, put back together from
    the pieces the rows record (a document may span rows and files)."""
    pending: tuple[str, int, list[np.ndarray]] | None = None
    for path in in_stream_order(parquet_files(folder)):
        with parquet_file(path) as pf:
            for batch in pf.iter_batches(columns=["ids", "documents"]):
                # The pieces tile the rows in order: piece k is flat[at[k]:at[k + 1]],
                # and a document starts where a piece's offset is 0.
                flat, _ = list_ids(batch.column("ids"))
                pieces = batch.column("documents").flatten()
                at = np.concatenate(
                    [[0], np.cumsum(pieces.field("length").to_numpy(), dtype=np.int64)]
                )
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
