"""bin (--format bin): every token shard as a flat array of ids, nanoGPT style.

For each token shard ``<name>.parquet``, OUT/bin/ gets:

- ``<name>.bin``: the ids of all its rows end to end, as the token shard
  holds them (each row ends with the ``<|endoftext|>`` that `encode` put
  there, none with --no-eos), raw little-endian uint16 when the vocabulary
  has at most 65536 ids, else uint32; no header;
- ``<name>.idx.npy``: uint64 document offsets, one more than there are rows:
  row i of the Parquet shard is ``ids[idx[i]:idx[i + 1]]``;

and OUT/bin/index.json lists the shards in input order with their dtype,
documents and tokens, and the tokenizer's sha256 and vocabulary size. With
--bos each document starts with ``<|bos|>`` (index.json's ``bos_id``).

bin is always one pair per token shard (--per-shard or not), except with
--val-fraction F: then OUT/bin/ gets nanoGPT's two files, ``train.bin`` and
``val.bin`` (the documents of every shard in input order, each to the side
stages/split.py puts it on), with ``train.idx.npy`` and ``val.idx.npy``; the
index lists per shard the documents and tokens that went to each.

No pair holds no ids: numpy's memmap, nanoGPT's reader, refuses an empty
file. An empty input gets no entry in index.json; a shard (or a side of the
split) whose documents hold no ids (empty texts encoded with --no-eos) gets
no files, its entry in index.json its documents with ``"tokens": 0`` and
``"bin"`` and ``"index"`` null (with a split: no ``<side>.bin``, the side's
``tokens`` 0), and `read` gives its documents back empty.

    ids = np.memmap("out/bin/prose-en.bin", dtype=np.uint16, mode="r")
    idx = np.load("out/bin/prose-en.idx.npy")
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
from tqdm import tqdm

from tokenmill.errors import TokenmillError
from tokenmill.executors import run_tasks
from tokenmill.faults import checkpoint
from tokenmill.io.files import parse_json
from tokenmill.io.storage import AnyPath, is_remote, location
from tokenmill.io.writers import atomic_path, write_json
from tokenmill.layouts import Document, LayoutJob, LayoutResult
from tokenmill.layouts.rows import bos_id
from tokenmill.stages.results import plural
from tokenmill.stages.split import (
    SPLITS,
    TRAIN,
    VAL,
    add_counts,
    shard_is_val,
    split_counts,
    split_token_shards,
)
from tokenmill.stages.tokens import TokenShard, list_ids, shard_tokenizer
from tokenmill.tokenizer import Tokenizer

INDEX = "index.json"
FORMAT = "tokenmill-bin"
SUFFIXES = (".bin", ".idx.npy")


class Bin:
    name = "bin"
    folder = "bin"
    reader = "numpy"
    local_only = True
    ends_in_eos = False

    def owns(self, name: str) -> bool:
        return name == INDEX or name.endswith(SUFFIXES)

    def write(self, job: LayoutJob) -> LayoutResult:
        bos = bos_id(job.tokenizer) if job.bos else None
        return write_bin(
            job.shards,
            job.folder,
            workers=job.workers,
            executor=job.executor,
            ray_address=job.ray_address,
            val_fraction=job.val_fraction,
            bos=bos,
        )

    def read(self, folder: AnyPath, split: bool) -> Iterator[Document]:
        # index.json records whether the arrays are split: `split` is not needed.
        folder = location(folder)
        dtype, pairs = array_pairs(folder)
        for pair in pairs:
            if pair.bin is None or pair.index is None:
                yield from pair.without_ids(dtype)
                continue
            ids = ids_of((folder / pair.bin).read_bytes(), dtype, folder / pair.bin)
            idx = read_offsets(folder / pair.index)
            check_offsets(folder / pair.index, idx, len(ids))
            for i in range(len(idx) - 1):
                yield Document(pair.split, ids[idx[i] : idx[i + 1]], pair.source)

    def framework_read(self, folder: AnyPath, split: bool) -> Iterator[Document]:
        """As nanoGPT's train.py reads its arrays: numpy's memmap (a local
        folder only), documents cut by the .idx.npy offsets."""
        folder = location(folder)
        if is_remote(folder):
            raise TokenmillError(f"{folder}: numpy maps local files only")
        return memmapped(folder)

    def recorded(self, folder: AnyPath) -> dict[str, str]:
        index = read_index(location(folder))
        keys = ("tokenizer_sha256", "vocab_size", "bos_id")
        return {k: "null" if index.get(k) is None else str(index[k]) for k in keys if k in index}


LAYOUT = Bin()


@dataclass(frozen=True)
class Pair:
    """One pair of arrays index.json lists: its split ("" when not split), its
    token shard's source (None for train's and val's), its files' names (None
    when its documents hold no ids: no files), and its documents."""

    split: str
    source: str | None
    bin: str | None
    index: str | None
    documents: int

    def without_ids(self, dtype: np.dtype) -> Iterator[Document]:
        """The documents of a pair written without files: each empty."""
        for _ in range(self.documents):
            yield Document(self.split, np.empty(0, dtype), self.source)


def read_index(folder: AnyPath) -> dict:
    """index.json, refused in one line naming it when it is no index --format bin writes."""
    path = folder / INDEX
    index = parse_json(path.read_bytes(), path)
    if not isinstance(index, dict) or "dtype" not in index:
        raise TokenmillError(f"{path}: not an index.json as --format bin writes it")
    return index


def array_pairs(folder: AnyPath) -> tuple[np.dtype, list[Pair]]:
    """index.json's little-endian dtype, and each pair of arrays it lists, in
    order: train's and val's, or each shard's."""
    path = folder / INDEX
    index = read_index(folder)
    try:
        dtype = np.dtype(index["dtype"]).newbyteorder("<")
        if "split" in index:
            pairs = []
            for side in SPLITS:
                counts = index["split"][side]
                ids = bool(counts["tokens"])  # else no files
                bin_name, idx_name = (f"{side}.bin", f"{side}.idx.npy") if ids else (None, None)
                pairs.append(Pair(side, None, bin_name, idx_name, counts["documents"]))
            return dtype, pairs
        pairs = [
            Pair("", s["source"], s["bin"], s["index"], s["documents"]) for s in index["shards"]
        ]
        for s, pair in zip(index["shards"], pairs, strict=True):
            if pair.bin is None and s["tokens"]:
                raise TokenmillError(
                    f"{path}: shard {pair.source} records {s['tokens']} ids, no .bin"
                )
    except (KeyError, TypeError) as e:
        raise TokenmillError(
            f"{path}: not an index.json as --format bin writes it ({e!r})"
        ) from None
    return dtype, pairs


def memmapped(folder: Path) -> Iterator[Document]:
    dtype, pairs = array_pairs(folder)
    for pair in pairs:
        if pair.bin is None or pair.index is None:
            yield from pair.without_ids(dtype)
            continue
        idx = read_offsets(folder / pair.index)
        if len(idx) and idx[-1] == 0:
            ids = np.empty(0, dtype)  # numpy cannot map an empty file (an older version's)
        else:
            ids = ids_of(folder / pair.bin, dtype, folder / pair.bin)
        held = (folder / pair.bin).stat().st_size // dtype.itemsize
        check_offsets(folder / pair.index, idx, held)
        for i in range(len(idx) - 1):
            yield Document(pair.split, np.array(ids[idx[i] : idx[i + 1]]), pair.source)


def read_offsets(path: AnyPath) -> np.ndarray:
    """The document offsets of an .idx.npy, and nothing after them: np.load
    reads the array and ignores what follows, which no run writes."""
    data = path.read_bytes()
    f = io.BytesIO(data)
    try:
        idx = np.load(f, allow_pickle=False)
    except ValueError as e:
        raise TokenmillError(f"{path}: not a .npy array of offsets ({e})") from None
    if f.tell() != len(data):
        raise TokenmillError(f"{path}: {len(data) - f.tell()} bytes after its array")
    return idx


def ids_of(source: bytes | Path, dtype: np.dtype, path: AnyPath) -> np.ndarray:
    """A .bin's ids (its bytes, or a memory map of the file), refused in one
    line naming it when its size is not a whole number of `dtype`."""
    try:
        if isinstance(source, bytes):
            return np.frombuffer(source, dtype=dtype)
        return np.memmap(source, dtype=dtype, mode="r")
    except ValueError:
        raise TokenmillError(
            f"{path}: its size is not a whole number of {dtype.name} ids (index.json's dtype)"
        ) from None


def check_offsets(path: AnyPath, idx: np.ndarray, ids: int) -> None:
    """The document offsets `idx` (the .idx.npy at `path`) cover the `ids` ids of
    its .bin end to end: nanoGPT samples the whole array, so an id outside every
    document is still trained on."""
    if len(idx) == 0 or idx[0] != 0 or idx[-1] != ids or np.any(np.diff(idx) < 0):
        raise TokenmillError(f"{path}: its offsets do not cover the {ids} ids of its .bin")


def bin_names(shard: TokenShard) -> tuple[str, str]:
    stem = shard.name.removesuffix(".parquet")
    return f"{stem}.bin", f"{stem}.idx.npy"


@dataclass(frozen=True)
class BinTask:
    shard: TokenShard
    out_dir: AnyPath
    bos: int | None


def with_bos(flat: np.ndarray, offsets: np.ndarray, bos: int | None):
    """A batch's documents as (ids, lengths), each document after `bos` when given."""
    lens = np.diff(offsets)
    if bos is None:
        return flat, lens
    starts = offsets[:-1] + np.arange(len(lens))
    ids = np.empty(len(flat) + len(lens), flat.dtype)
    ids[starts] = bos
    ids[np.arange(len(flat)) + np.repeat(np.arange(1, len(lens) + 1), lens)] = flat
    return ids, lens + 1


def write_offsets(lengths: list[np.ndarray], path: AnyPath) -> np.ndarray:
    """Write the uint64 document offsets of documents of these lengths (one
    more than there are documents) as .npy at `path`; returns them."""
    idx = np.zeros(sum(len(x) for x in lengths) + 1, np.uint64)
    if lengths:
        np.cumsum(np.concatenate(lengths), out=idx[1:])
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.save(f, idx)
    return idx


class Arrays:
    """The .bin files being written, each opened (its temporary) at its first
    id: one that gets none is not written, as numpy cannot map an empty file."""

    def __init__(self, stack: contextlib.ExitStack, folder: AnyPath, dtype: np.dtype):
        self.stack, self.folder, self.dtype = stack, folder, dtype
        self.files: dict[str, BinaryIO] = {}

    def write(self, name: str, ids: np.ndarray) -> None:
        if not len(ids):
            return
        if name not in self.files:
            tmp = self.stack.enter_context(atomic_path(self.folder / name))
            self.files[name] = self.stack.enter_context(open(tmp, "wb"))
        self.files[name].write(ids.astype(self.dtype, copy=False).tobytes())


def bin_shard(task: BinTask) -> dict:
    shard = task.shard
    bin_name, idx_name = bin_names(shard)
    lengths = []
    with contextlib.ExitStack() as stack:
        arrays = Arrays(stack, task.out_dir, shard.id_dtype.newbyteorder("<"))
        for batch in shard.batches(columns=("ids",)):
            ids, lens = with_bos(*list_ids(batch.column(0)), task.bos)
            arrays.write(bin_name, ids)
            lengths.append(lens)
        checkpoint("bin-write", 1)  # tests kill here, with this shard's temporary open
    entry = {"source": shard.source, "bin": None, "index": None,
             "documents": shard.documents, "tokens": 0}  # fmt: skip
    if bin_name in arrays.files:  # else its documents hold no ids: no files
        idx = write_offsets(lengths, task.out_dir / idx_name)
        entry.update(bin=bin_name, index=idx_name, tokens=int(idx[-1]))
    return entry


def split_bins(
    shards: list[TokenShard], bin_dir: AnyPath, fraction: float, bos: int | None
) -> list[dict]:
    """train.bin / val.bin (and their .idx.npy) of all `shards` in order; one pass,
    memory bounded by a batch. Returns per shard the documents and tokens of each split."""
    lengths: dict[str, list[np.ndarray]] = {s: [] for s in SPLITS}
    results = []
    with contextlib.ExitStack() as stack:
        arrays = Arrays(stack, bin_dir, shards[0].id_dtype.newbyteorder("<"))
        for shard in tqdm(shards, desc="bin", unit="shard", disable=None, leave=False):
            counts: dict = {}
            for batch in shard.batches(columns=("row", "ids")):
                flat, lens = with_bos(*list_ids(batch.column("ids")), bos)
                rows = batch.column("row").to_numpy()
                val = shard_is_val(shard, rows, fraction)
                counts = add_counts(counts, split_counts(val, lens))
                in_val = np.repeat(val, lens)
                for side, docs, ids in ((TRAIN, ~val, ~in_val), (VAL, val, in_val)):
                    arrays.write(f"{side}.bin", flat[ids])
                    lengths[side].append(lens[docs])
            checkpoint("bin-write", 1)  # tests kill here, with the temporaries open
            results.append({"source": shard.source, **counts})
    for side in SPLITS:
        if f"{side}.bin" in arrays.files:  # else its documents hold no ids: no files
            write_offsets(lengths[side], bin_dir / f"{side}.idx.npy")
    return results


def write_bin(
    shards: list[TokenShard],
    bin_dir: AnyPath,
    *,
    workers: int = 1,
    executor: str = "threads",
    ray_address: str | None = None,
    val_fraction: float = 0.0,
    bos: int | None = None,
) -> LayoutResult:
    """`shards` as flat arrays in `bin_dir`, at their relative paths; with
    `val_fraction`, as train.bin and val.bin. `bos`: the id put before each document."""
    start = time.monotonic()
    bin_dir = location(bin_dir)
    index = {
        "format": FORMAT,
        "version": 1,
        "dtype": shards[0].id_dtype.name,
        "byte_order": "little",
        "vocab_size": shards[0].vocab_size,
        "tokenizer_sha256": shards[0].sha256,
        "bos_id": bos,
    }
    if val_fraction > 0:
        results = split_bins(shards, bin_dir, val_fraction, bos)
        split: dict = {}
        for r in results:
            split = add_counts(split, r)
        index["split"] = {"val_fraction": val_fraction, **split}
        held = [s for s in SPLITS if split[s]["tokens"]]
        files = [f"{s}{suffix}" for s in held for suffix in SUFFIXES]
        documents = sum(c["documents"] for c in split.values())
        tokens = sum(c["tokens"] for c in split.values())
        summary = "; ".join(
            f"{s}.bin {plural(split[s]['documents'], 'document')}, {split[s]['tokens']} ids"
            if s in held
            else f"no {s}.bin: {plural(split[s]['documents'], 'document')} of no ids"
            for s in SPLITS
        )
    else:
        results = run_tasks(
            bin_shard,
            # An empty input gets no files: an empty .bin cannot be mapped.
            [BinTask(s, bin_dir, bos) for s in shards if s.documents],
            workers=workers,
            executor=executor,
            ray_address=ray_address,
            desc="bin",
        )
        files = [r[kind] for r in results if r["bin"] is not None for kind in ("bin", "index")]
        documents = sum(r["documents"] for r in results)
        tokens = sum(r["tokens"] for r in results)
        summary = plural(len(results), "shard")
        if none := sum(r["bin"] is None for r in results):
            summary += f"; {plural(none, 'shard')} of no ids, without files"
    write_json({**index, "shards": results}, bin_dir / INDEX)
    return LayoutResult(
        stage="bin",
        dir=str(bin_dir),
        files=[*files, INDEX],
        documents=documents,
        tokens=tokens,
        summary=f"{index['dtype']}, {summary}",
        redone=len(results),
        seconds=time.monotonic() - start,
    )


def bin_tokenizer(shards: list[TokenShard], tokenizer: AnyPath | Tokenizer | None) -> Tokenizer:
    """The shards' tokenizer: `tokenizer` (a file, or one bin_tokenizer
    returned) if given, else the run's; another than the shards' is refused."""
    if not isinstance(tokenizer, Tokenizer):
        return shard_tokenizer(shards[0], tokenizer)
    if tokenizer.sha256 != shards[0].sha256:
        raise TokenmillError(f"not the tokenizer {shards[0].path} was encoded with")
    return tokenizer


def run_bin(
    tokens_dir: AnyPath,
    bin_dir: AnyPath,
    *,
    workers: int = 1,
    val_fraction: float = 0.0,
    bos: bool = False,
    tokenizer: AnyPath | Tokenizer | None = None,
    shards: list[TokenShard] | None = None,
) -> LayoutResult:
    """`tokenmill bin`: every token shard of `tokens_dir` as flat arrays in `bin_dir`,
    split by `val_fraction` as encode split them (else refused).
    `bos`: <|bos|> before each document, as `run --bos` puts it, its id from
    `tokenizer` (default: tokenizer.json beside `tokens_dir`; one given must
    be the shards', --bos or not). `shards`: those
    of `split_token_shards(tokens_dir, val_fraction)`, already opened."""
    if shards is None:
        shards = split_token_shards(tokens_dir, val_fraction)
    # A tokenizer given is checked even when --bos does not use it.
    tok = bin_tokenizer(shards, tokenizer) if bos or tokenizer is not None else None
    bos_token = bos_id(tok) if bos and tok is not None else None
    return write_bin(shards, bin_dir, workers=workers, val_fraction=val_fraction, bos=bos_token)
