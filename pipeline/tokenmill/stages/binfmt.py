"""bin: every token shard as a flat array of ids, nanoGPT style.

For each token shard ``<name>.parquet`` of TOKENS_DIR, BIN_DIR gets:

- ``<name>.bin``: the ids of all its rows end to end (each row ends with the
  ``<|endoftext|>`` that `encode` put there), raw little-endian uint16 when the
  vocabulary has at most 65536 ids, else uint32; no header;
- ``<name>.idx.npy``: uint64 document offsets, one more than there are rows:
  row i of the Parquet shard is ``ids[idx[i]:idx[i + 1]]``;

and BIN_DIR/index.json lists the shards in input order with their dtype,
documents and tokens, and the tokenizer's sha256 and vocabulary size.

With --val-fraction F, BIN_DIR instead gets nanoGPT's two files, ``train.bin``
and ``val.bin`` (the documents of every shard in input order, each to the side
stages/split.py puts it on), with ``train.idx.npy`` and ``val.idx.npy``; the
index lists per shard the documents and tokens that went to each.

    ids = np.memmap("out/bin/prose-en.parquet.bin", dtype=np.uint16, mode="r")
    idx = np.load("out/bin/prose-en.parquet.idx.npy")
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from tokenmill.executors import run_tasks
from tokenmill.faults import checkpoint
from tokenmill.io.storage import AnyPath, location
from tokenmill.io.writers import atomic_path, write_json
from tokenmill.stages.results import BinResult
from tokenmill.stages.split import SPLITS, TRAIN, VAL, add_counts, is_val, split_counts
from tokenmill.stages.tokens import TokenShard, list_ids, token_shards

INDEX = "index.json"
FORMAT = "tokenmill-bin"


def bin_names(shard: TokenShard) -> tuple[str, str]:
    stem = shard.name.removesuffix(".parquet")
    return f"{stem}.bin", f"{stem}.idx.npy"


@dataclass(frozen=True)
class BinTask:
    shard: TokenShard
    out_dir: AnyPath


def write_offsets(lengths: list[np.ndarray], path: AnyPath) -> np.ndarray:
    """Write the uint64 document offsets of documents of these lengths (one
    more than there are documents) as .npy at `path`; returns them."""
    idx = np.zeros(sum(len(x) for x in lengths) + 1, np.uint64)
    if lengths:
        np.cumsum(np.concatenate(lengths), out=idx[1:])
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.save(f, idx)
    return idx


def bin_shard(task: BinTask) -> dict:
    shard = task.shard
    bin_name, idx_name = bin_names(shard)
    dtype = shard.id_dtype.newbyteorder("<")
    lengths = []
    with atomic_path(task.out_dir / bin_name) as tmp, open(tmp, "wb") as f:
        for batch in shard.batches(columns=("ids",)):
            flat, offsets = list_ids(batch.column(0))
            f.write(flat.astype(dtype, copy=False).tobytes())
            lengths.append(np.diff(offsets))
        checkpoint("bin-write", 1)  # tests kill here, with this shard's temporary open
    idx = write_offsets(lengths, task.out_dir / idx_name)
    return {
        "source": shard.source,
        "bin": bin_name,
        "index": idx_name,
        "documents": shard.documents,
        "tokens": int(idx[-1]),
        "reused": False,  # redone every time (a copy of the token shard's ids)
    }


def split_bins(shards: list[TokenShard], bin_dir: AnyPath, fraction: float) -> list[dict]:
    """train.bin / val.bin (and their .idx.npy) of all `shards` in order; one pass,
    memory bounded by a batch. Returns per shard the documents and tokens of each split."""
    dtype = shards[0].id_dtype.newbyteorder("<")
    lengths: dict[str, list[np.ndarray]] = {s: [] for s in SPLITS}
    results = []
    with contextlib.ExitStack() as stack:
        files = {
            s: stack.enter_context(
                open(stack.enter_context(atomic_path(bin_dir / f"{s}.bin")), "wb")
            )
            for s in SPLITS
        }
        for shard in tqdm(shards, desc="bin", unit="shard", disable=None, leave=False):
            counts: dict = {}
            for batch in shard.batches(columns=("row", "ids")):
                flat, offsets = list_ids(batch.column("ids"))
                rows = batch.column("row").to_numpy()
                lens = np.diff(offsets)
                val = is_val(shard.source, rows, fraction)
                counts = add_counts(counts, split_counts(val, lens))
                in_val = np.repeat(val, lens)
                for side, docs, ids in ((TRAIN, ~val, ~in_val), (VAL, val, in_val)):
                    files[side].write(flat[ids].astype(dtype, copy=False).tobytes())
                    lengths[side].append(lens[docs])
            checkpoint("bin-write", 1)  # tests kill here, with the temporaries open
            results.append({"source": shard.source, **counts, "reused": False})
    for side in SPLITS:
        write_offsets(lengths[side], bin_dir / f"{side}.idx.npy")
    return results


def run_bin(
    tokens_dir: AnyPath,
    bin_dir: AnyPath,
    *,
    workers: int = 1,
    executor: str = "threads",
    ray_address: str | None = None,
    names: list[str] | None = None,
    val_fraction: float = 0.0,
) -> BinResult:
    """Every token shard of `tokens_dir` (or those `names`, relative to it) as
    flat arrays in `bin_dir`, at the same relative paths; with `val_fraction`,
    as train.bin and val.bin."""
    start = time.monotonic()
    shards = token_shards(tokens_dir, names)
    bin_dir = location(bin_dir)
    index = {
        "format": FORMAT,
        "version": 1,
        "dtype": shards[0].id_dtype.name,
        "byte_order": "little",
        "vocab_size": shards[0].vocab_size,
        "tokenizer_sha256": shards[0].sha256,
    }
    split: dict | None
    if val_fraction > 0:
        results = split_bins(shards, bin_dir, val_fraction)
        split = {}
        for r in results:
            split = add_counts(split, r)
        index["split"] = {"val_fraction": val_fraction, **split}
        files = [f"{s}{suffix}" for s in SPLITS for suffix in (".bin", ".idx.npy")]
        documents = sum(c["documents"] for c in split.values())
        tokens = sum(c["tokens"] for c in split.values())
    else:
        results = run_tasks(
            bin_shard,
            [BinTask(s, bin_dir) for s in shards],
            workers=workers,
            executor=executor,
            ray_address=ray_address,
            desc="bin",
        )
        split = None
        files = [r[kind] for r in results for kind in ("bin", "index")]
        documents = sum(r["documents"] for r in results)
        tokens = sum(r["tokens"] for r in results)
    listed = [{k: v for k, v in r.items() if k != "reused"} for r in results]
    write_json({**index, "shards": listed}, bin_dir / INDEX)
    return BinResult(
        dir=str(bin_dir),
        shards=results,
        files=[*files, INDEX],
        dtype=shards[0].id_dtype.name,
        documents=documents,
        tokens=tokens,
        split=split,
        reused=0,
        redone=len(results),
        seconds=time.monotonic() - start,
    )
