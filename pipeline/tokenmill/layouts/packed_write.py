"""--pack's second pass: each token shard's packed rows, one task per shard.

A task writes its shard's packed file (one per split) on its own, from the
place layouts/packed_plan.py gives it in the stream: it reads the ids its
first row carries over from the tails of the shards before it, then its own
documents, batch by batch, one row group per batch as a single sequential
pass would write them, so the bytes do not depend on the number of workers.
`pack_shards` runs both passes (and, with --shuffle, the sort of
layouts/packed_shuffle.py); the format is layouts/packed.py's.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.errors import TokenmillError
from tokenmill.executors import run_tasks
from tokenmill.faults import checkpoint
from tokenmill.io.storage import AnyPath, location
from tokenmill.io.writers import atomic_path
from tokenmill.layouts.packed_plan import PackTask, Spec, Tail, document_lengths, plan
from tokenmill.layouts.packed_shuffle import BUCKETS, Scatter, with_orders, write_files
from tokenmill.layouts.rows import (
    Packer,
    Pieces,
    bos_id,
    cut_pieces,
    document_stream,
    select_documents,
)
from tokenmill.stages.results import PackResult
from tokenmill.stages.shuffle import remove_buckets
from tokenmill.stages.split import TRAIN, VAL, shard_is_val
from tokenmill.stages.tokens import ROW_IDS, TokenShard, list_ids
from tokenmill.tokenizer import ENDOFTEXT, Tokenizer


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
            wanted, batches = hi - bounds[first] + 1, []
            for batch in tail.shard.batches(columns=("ids",), first_group=first):
                batches.append(batch)
                wanted -= batch.num_rows
                if wanted <= 0:
                    break
            read[tail.index] = (first, pa.Table.from_batches(batches).column("ids"))
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
        if task.orders is None:
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
        else:  # rows to their places: a file of them to sort (layouts/packed_shuffle.py)
            assert task.scratch is not None
            scatter = Scatter(stack.enter_context(atomic_path(task.scratch)), schema)
            rows_schema = schema.remove(schema.get_field_index("unshuffled"))

        def write(side: str, ids: np.ndarray, pieces: Pieces, nrows: int, long=False) -> None:
            tokens[side] += len(ids)
            if not nrows:
                return
            if task.orders is None:
                table = packers[side].table(schema, ids, pieces, nrows)
                # Parquet's writer holds ~10 bytes an id of a row group while
                # it writes it: a long document's rows go in groups of ROW_IDS.
                group = max(1, ROW_IDS // n) if long else None
                writers[side].write_table(table, row_group_size=group)
            else:
                table = packers[side].table(rows_schema, ids, pieces, nrows)
                scatter.add(table, task.orders[side])

        for batch in shard.batches():
            flat, offsets = list_ids(batch.column("ids"))
            flat = flat.astype(spec.id_dtype, copy=False)
            rows = batch.column("row").to_numpy()
            val = shard_is_val(shard, rows, spec.val_fraction)
            for side, packer in packers.items():
                keep = {"": None, TRAIN: ~val, VAL: val}[side]
                s_rows, s_flat, s_offsets = select_documents(rows, flat, offsets, keep)
                documents[side] += len(s_rows)
                long = bool((np.diff(s_offsets) > ROW_IDS).any())
                ids, pieces, nrows = packer.add(task.index, s_rows, s_flat, s_offsets)
                write(side, ids, pieces, nrows, long=long)
        # Tests kill here, with this shard's temporary open.
        checkpoint("packed-write", task.index + 1)
        for side, packer in packers.items():
            end = task.sides[side].end
            if packer.sequences != end // n or len(packer.carry) != end % n:
                raise TokenmillError(f"{shard.path}: changed while being packed; pack again")
            if task.sides[side].last:
                write(side, *packer.finish())
        buckets = scatter.close() if task.orders is not None else []
    return [
        {
            "shard": shard.source,
            **({"split": side} if side else {}),
            "file": str(spec.file(side, shard)),
            "documents": documents[side],
            "sequences": packers[side].sequences - first[side],
            "tokens": tokens[side],
            "reused": False,  # packing is redone every time (cheap)
            **({"buckets": buckets} if k == 0 and task.orders else {}),
        }
        for k, side in enumerate(packers)
    ]


def pack_shards(
    shards: list[TokenShard],
    tok: Tokenizer,
    packed_dir: AnyPath,
    seq_len: int,
    *,
    bos: bool = False,
    val_fraction: float = 0.0,
    shuffle: int | None = None,
    workers: int = 1,
    executor: str = "threads",
    ray_address: str | None = None,
) -> PackResult:
    """Pack `shards` (in input order, encoded with `tok`) into `packed_dir`,
    each to its `name` there (under train/ and val/ with `val_fraction`);
    `shuffle`: the full rows in the order that seed gives."""
    start = time.monotonic()
    if seq_len < 1:
        raise TokenmillError(f"--pack/--seq-len must be at least 1, not {seq_len}")
    if ENDOFTEXT not in tok.special_tokens:
        raise TokenmillError(f"the tokenizer has no {ENDOFTEXT} to separate documents with")
    spec = Spec(
        seq_len=seq_len,
        eos=tok.eos_id,
        bos=bos_id(tok) if bos else None,
        wide=tok._wide_ids,
        sha256=tok.sha256,
        vocab_size=tok.vocab_size,
        names=[s.source for s in shards],
        val_fraction=val_fraction,
        folder=packed_dir,
        shuffle=shuffle,
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
    scratch = location(packed_dir) / BUCKETS
    if shuffle is not None:
        remove_buckets(scratch)
        tasks = with_orders(tasks, spec, scratch)
    done = run_tasks(
        pack_shard,
        tasks,
        workers=workers,
        desc="pack",
        executor=executor,
        ray_address=ray_address,
        # Its ids, not its documents: a shard of long documents is the longer task.
        size=lambda t: sum(side.end - side.start for side in t.sides.values()),
    )
    if shuffle is not None:
        write_files(tasks, done, spec, workers, executor, ray_address)
        remove_buckets(scratch)
    results = [r for shard_results in done for r in shard_results]
    sequences = sum(r["sequences"] for r in results)
    # The length of each split's very last row (each split is a stream of its
    # own); seq_len if full, 0 for a split of no ids.
    ends = {side: max((t.sides[side].end for t in tasks if side in t.sides), default=0)
            for side in spec.sides}  # fmt: skip
    return PackResult(
        shards=results,
        token_shards=len(shards),
        seq_len=seq_len,
        sequences=sequences,
        last_rows={side: (end % seq_len or seq_len) if end else 0 for side, end in ends.items()},
        documents=sum(r["documents"] for r in results),
        tokens=sum(r["tokens"] for r in results),
        reused=0,
        redone=len(results),
        seconds=time.monotonic() - start,
    )
