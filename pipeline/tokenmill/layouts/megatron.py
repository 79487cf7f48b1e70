"""megatron (--format megatron): Megatron-LM's indexed dataset, the .bin/.idx
pair its `tools/preprocess_data.py` writes and megatron-core's
`IndexedDataset` reads.

OUT/megatron/ holds one pair per prefix, the path Megatron's --data-path
(or --train-data-path / --valid-data-path) takes:

- ``corpus_text_document``: every document of every token shard, in input order;
- with --val-fraction, ``train_text_document`` and ``val_text_document`` instead
  (stages/split.py decides each document's side);
- with one pair per token shard, ``<name>_text_document`` for the shard
  ``<name>.parquet`` of OUT/tokens/ (subfolders kept), under ``train/`` and
  ``val/`` with --val-fraction.

The bytes are those of megatron-core's ``_IndexWriter`` (little-endian):

- ``.bin``: every document's ids end to end, of the dtype Megatron's
  ``DType.optimal_dtype(vocab_size)`` picks: uint16 when the vocabulary has
  fewer than 65500 ids, else int32 (so from 65500 to 65536 ids, where the
  token shards are still uint16, this is int32);
- ``.idx``: ``MMIDIDX\\0\\0``, uint64 version 1, uint8 dtype code (8 uint16,
  4 int32), uint64 sequence count N, uint64 document count N + 1, then int32
  sequence lengths [N], int64 byte pointers into the .bin [N] and int64
  document indices 0, 1, ..., N (one document, one sequence).

Documents follow the rule of layouts/stream.py (``[<|bos|>] + ids +
<|endoftext|>``): the ``<|endoftext|>`` is what preprocess_data.py's
--append-eod adds, and no sequence is empty (preprocess_data.py would record
an empty text as a document of no sequence). The pair records nothing of the
tokenizer but the dtype: `recorded` is empty.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import numpy as np

from tokenmill.errors import TokenmillError
from tokenmill.io.storage import AnyPath, listed, location, open_file
from tokenmill.io.storage import size as file_size
from tokenmill.io.writers import atomic_path
from tokenmill.layouts import Document, LayoutJob, LayoutResult, TrainerMissing
from tokenmill.layouts.stream import Frame, Stream, frame, result, write_streams
from tokenmill.stages.split import SPLITS

SUFFIX = "_text_document"  # preprocess_data.py's, for the default --json-keys text
MERGED = "corpus"
HEADER = b"MMIDIDX\x00\x00"
VERSION = 1
# megatron-core's DType codes of the two dtypes optimal_dtype picks.
CODES: dict[np.dtype, int] = {np.dtype("<u2"): 8, np.dtype("<i4"): 4}
SMALL_VOCAB = 65500  # optimal_dtype: uint16 below this many ids
HEAD_BYTES = len(HEADER) + 8 + 1 + 8 + 8  # header, version, dtype code, the two counts


def megatron_dtype(vocab_size: int) -> np.dtype:
    return np.dtype("<u2") if vocab_size < SMALL_VOCAB else np.dtype("<i4")


def index_bytes(lengths: np.ndarray, dtype: np.dtype) -> bytes:
    """The .idx of documents of these lengths, one sequence each."""
    n = len(lengths)
    pointers = np.zeros(n, "<i8")
    if n:
        np.cumsum(lengths[:-1] * dtype.itemsize, out=pointers[1:])
    head = np.array([VERSION], "<u8").tobytes() + bytes([CODES[dtype]])
    return b"".join(
        [
            HEADER,
            head,
            np.array([n, n + 1], "<u8").tobytes(),
            lengths.astype("<i4").tobytes(),
            pointers.tobytes(),
            np.arange(n + 1, dtype="<i8").tobytes(),
        ]
    )


class Megatron:
    name = "megatron"
    folder = "megatron"
    reader = "megatron-core"
    local_only = True
    ends_in_eos = True

    def owns(self, name: str) -> bool:
        return name.endswith((f"{SUFFIX}.bin", f"{SUFFIX}.idx"))

    def stream_name(self, split: str, stem: str | None) -> str:
        if stem is None:
            return f"{split or MERGED}{SUFFIX}.bin"
        return f"{split}/{stem}{SUFFIX}.bin" if split else f"{stem}{SUFFIX}.bin"

    def finish(self, stream: Stream, folder: AnyPath, frame: Frame, workers: int) -> list[str]:
        name = stream.name.removesuffix(".bin") + ".idx"
        with atomic_path(folder / name) as tmp:
            tmp.write_bytes(index_bytes(stream.lengths, frame.dtype))
        return [name]

    def write(self, job: LayoutJob) -> LayoutResult:
        start = time.monotonic()
        framing = frame(job, megatron_dtype(job.tokenizer.vocab_size))
        streams = write_streams(job, framing, self)
        return result(self.name, job.folder, streams, ".bin/.idx pair", framing, start)

    def read(self, folder: AnyPath, split: bool) -> Iterator[Document]:
        folder = location(folder)
        for side, prefix in pairs(folder, split):
            for ids in read_pair(folder / prefix):
                yield Document(side, ids)

    def framework_read(self, folder: AnyPath, split: bool) -> Iterator[Document]:
        """By megatron-core's IndexedDataset, as its GPTDataset reads (memory-mapped:
        a local folder only)."""
        folder = location(folder)
        try:
            from megatron.core.datasets.indexed_dataset import IndexedDataset
        except Exception as e:  # not installed, or its imports fail (no torch)
            raise TrainerMissing(self.reader, e) from None
        return indexed_datasets(folder, split, IndexedDataset)

    def recorded(self, folder: AnyPath) -> dict[str, str]:
        return {}  # the .idx holds the dtype of the ids, nothing of the tokenizer


LAYOUT = Megatron()


def pairs(folder: AnyPath, split: bool) -> list[tuple[str, str]]:
    """(split, prefix) of the pairs under `folder`, of a run `split` or not:
    train's, then val's (the pairs under train/ and val/ per shard, else the
    two merged ones); unsplit, every pair's split is "" (a per-shard pair's
    folders are its input's, and DATA may have train/ and val/)."""
    prefixes = [n.removesuffix(".idx") for n in listed(folder, f"{SUFFIX}.idx")]
    # A .bin without its .idx is a pair half gone: Megatron cannot read it, and
    # leaving it out would only say that documents are missing.
    alone = sorted(
        set(n.removesuffix(".bin") for n in listed(folder, f"{SUFFIX}.bin")) - set(prefixes)
    )
    if alone:
        raise TokenmillError(f"{folder / alone[0]}.bin: no .idx beside it")

    def side_of(prefix: str) -> str:
        if not split:
            return ""
        return prefix.split("/")[0] if "/" in prefix else prefix.removesuffix(SUFFIX)

    order = {side: i for i, side in enumerate(SPLITS)}
    found = [(side_of(p), p) for p in prefixes]
    return sorted(found, key=lambda sp: (order.get(sp[0], 0), sp[1]))


def indexed_datasets(folder: AnyPath, split: bool, indexed_dataset: Callable) -> Iterator[Document]:
    """The documents of every pair under `folder` by `indexed_dataset` (megatron-core's)."""
    for side, prefix in pairs(folder, split):
        index = read_index(folder / f"{prefix}.idx")
        if bin_size(folder / prefix, *index[:2]) == 0:
            continue  # no sequence, and numpy cannot map an empty file
        dataset = indexed_dataset(str(folder / prefix))
        # A copy: megatron-core closes its memory map when the dataset goes, and a
        # view into it would then point at unmapped memory.
        for i in range(len(dataset)):
            yield Document(side, np.array(dataset[i]))


def read_index(path: AnyPath) -> tuple[np.dtype, np.ndarray, np.ndarray]:
    """An .idx's dtype, sequence lengths and byte pointers."""
    with open_file(path) as f:
        data = f.read()
    if data[: len(HEADER)] != HEADER or len(data) < HEAD_BYTES:
        raise TokenmillError(f"{path}: not a Megatron index (no MMIDIDX header)")
    codes = {code: dtype for dtype, code in CODES.items()}
    version = int(np.frombuffer(data, "<u8", 1, len(HEADER))[0])
    code = data[len(HEADER) + 8]
    if version != VERSION or code not in codes:
        raise TokenmillError(f"{path}: Megatron index version {version}, dtype code {code}")
    n, documents = (int(c) for c in np.frombuffer(data, "<u8", 2, HEAD_BYTES - 16))
    # GPTDataset takes its documents from the document indices: one sequence
    # each, as written, or Megatron trains on other documents than the shards'.
    if documents != n + 1 or len(data) != HEAD_BYTES + 12 * n + 8 * documents:
        raise TokenmillError(
            f"{path}: {len(data)} bytes for {n} sequences and {documents} document indices "
            "(not an index as --format megatron writes it)"
        )
    lengths = np.frombuffer(data, "<i4", n, HEAD_BYTES).astype(np.int64)
    pointers = np.frombuffer(data, "<i8", n, HEAD_BYTES + 4 * n)
    if not np.array_equal(
        np.frombuffer(data, "<i8", documents, HEAD_BYTES + 12 * n), np.arange(documents)
    ):
        raise TokenmillError(f"{path}: its documents are not one sequence each")
    return codes[code], lengths, pointers


def bin_size(prefix: AnyPath, dtype: np.dtype, lengths: np.ndarray) -> int:
    """The size of the pair's .bin, which must be that of the sequences its
    .idx lists: Megatron reads each by its pointer, and bytes beyond the last
    are no document's (a file appended to, or another run's)."""
    path = prefix.with_name(prefix.name + ".bin")
    size = file_size(path)
    listed = int(lengths.sum()) * dtype.itemsize
    if size != listed:
        raise TokenmillError(f"{path}: {size} bytes, where its .idx lists {listed}")
    return size


def read_pair(prefix: AnyPath, chunk: int = 8192) -> Iterator[np.ndarray]:
    """The sequences of one .bin/.idx pair, in order, read `chunk` at a time."""
    idx = prefix.with_name(prefix.name + ".idx")
    dtype, lengths, pointers = read_index(idx)
    bin_size(prefix, dtype, lengths)
    with open_file(prefix.with_name(prefix.name + ".bin")) as f:
        for i in range(0, len(lengths), chunk):
            lens = lengths[i : i + chunk]
            ends = np.cumsum(lens)
            starts = pointers[i] + (ends - lens) * dtype.itemsize
            if not np.array_equal(starts, pointers[i : i + chunk]):
                raise TokenmillError(f"{idx}: its sequences do not lie end to end in the .bin")
            f.seek(int(pointers[i]))
            nbytes = int(ends[-1]) * dtype.itemsize
            data = f.read(nbytes)
            if len(data) != nbytes:
                raise TokenmillError(f"{idx}: points past the end of its .bin")
            yield from np.split(np.frombuffer(data, dtype), ends[:-1])
