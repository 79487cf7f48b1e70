r"""olmo (--format olmo): the token arrays OLMo-core trains on, as the Dolma
toolkit's `dolma tokens` writes them.

Each array is a headerless ``.npy`` file, the ids of its documents end to
end (little-endian, to open with ``np.memmap(path, dtype, mode="r")``, not
``np.load``), beside a gzipped CSV of the same name, ``.npy`` replaced by
``.csv.gz`` (where OLMo-core looks), with one row per document, no header:
``start,end,id,src,loc``, the document's ids being ``array[start:end]``;
``src`` is its input shard (its path relative to DATA), ``loc`` its row there
(from 0, as `tokenmill decode` takes it) and ``id`` is ``src:loc``.

OUT/olmo/ holds:

- ``part-0-00000.npy`` (+ ``.csv.gz``): every document of every token shard, in
  input order (dolma's name for its first writer's first file);
- with --val-fraction, ``train/part-0-00000.npy`` and ``val/part-0-00000.npy``
  instead (stages/split.py decides each document's side);
- with one array per token shard, ``<name>.npy`` for the token shard
  ``<name>.parquet`` (subfolders kept), under ``train/`` and ``val/`` with
  --val-fraction;
- ``index.json``: the arrays in the order written, with their split,
  documents and tokens, and what OLMo-core's config needs: ``dtype``,
  ``vocab_size``, ``eos_token_id``, ``bos_token_id``.

Documents follow the rule of layouts/stream.py (``[<|bos|>] + ids +
<|endoftext|>``), so OLMo-core finds them by their ``eos_token_id`` alone
(its default for local arrays), or, given ``bos_token_id``, by an
``<|endoftext|>`` followed by ``<|bos|>``, and by the CSV's start and end
otherwise.

The ids are uint16 when the vocabulary has at most 65536 ids, else uint32:
set OLMo-core's ``NumpyDatasetConfig.dtype`` to ``NumpyDatasetDType.uint16``
(or ``uint32``), index.json's ``dtype``. Without it OLMo-core picks the
smallest dtype holding ``TokenizerConfig.vocab_size`` ids, the same one except
for a vocabulary of at most 256 ids, for which it would read uint8.

The CSV of a merged array is one gzip member per token shard, end to end (as
``cat a.gz b.gz`` makes; every gzip reader reads them as one stream), so
threads compress their shard's rows side by side; no member records a time
or a file name, so a rerun writes the same bytes.

OLMo-core reads the CSV line by line (``iter_document_indices``: text mode,
where ``\n``, ``\r`` and ``\r\n`` each end a line; start and end the first
two fields): a quoted field holding a line break would split its row. The
only text in a row is the input's name, so `run` refuses, before any work,
an input whose name holds ``\n`` or ``\r`` (`refuse_line_breaks`), and
`read_metadata` reads each CSV line by line as OLMo-core does too.
"""

from __future__ import annotations

import gzip
import io
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from tokenmill.errors import TokenmillError, one_line
from tokenmill.io.files import parse_json
from tokenmill.io.storage import AnyPath, location, size
from tokenmill.io.writers import atomic_path, write_json
from tokenmill.layouts import Document, LayoutJob, LayoutResult, TrainerMissing
from tokenmill.layouts.stream import Frame, Part, Stream, frame, result, write_streams

INDEX = "index.json"
FORMAT = "tokenmill-olmo"
MERGED = "part-0-00000"
METADATA = pa.schema(  # the CSV's columns
    [
        ("start", pa.int64()),
        ("end", pa.int64()),
        ("id", pa.string()),
        ("src", pa.string()),
        ("loc", pa.uint64()),
    ]
)
# The CSV is a few percent of the ids' bytes: compressing it faster matters more
# than compressing it smaller.
GZIP_LEVEL = 1


def metadata_name(array: str) -> str:
    """The CSV beside the array `array` (a relative path): OLMo-core's
    ``basename.replace(".npy", ".csv.gz")``."""
    folder, _, base = array.rpartition("/")
    return f"{folder}/" * bool(folder) + base.replace(".npy", ".csv.gz")


def metadata_member(part: Part) -> bytes:
    """The CSV rows of `part`'s documents as one gzip member (no time, no file name in it)."""
    ends = part.start + np.cumsum(part.lengths)
    src = pa.repeat(pa.scalar(part.shard.source), len(part.rows))
    loc = pa.array(part.rows, pa.uint64())
    id_ = pc.binary_join_element_wise(src, loc.cast(pa.string()), ":")
    table = pa.table([ends - part.lengths, ends, id_, src, loc], schema=METADATA)
    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=False))
    # wbits 31: a gzip member whose header zlib writes with a zero time and no name.
    z = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    return z.compress(sink.getvalue()) + z.flush()


def entry(stream: Stream) -> dict:
    """index.json's record of the array of `stream`."""
    return {
        "path": stream.name,
        "metadata": metadata_name(stream.name),
        "split": stream.split,
        "documents": stream.documents,
        "tokens": stream.tokens,
    }


class Olmo:
    name = "olmo"
    folder = "olmo"
    reader = "ai2-olmo-core"
    local_only = True
    ends_in_eos = True

    def owns(self, name: str) -> bool:
        return name == INDEX or name.endswith((".npy", ".csv.gz"))

    def stream_name(self, split: str, stem: str | None) -> str:
        base = f"{stem or MERGED}.npy"
        return f"{split}/{base}" if split else base

    def finish(self, stream: Stream, folder: AnyPath, frame: Frame, workers: int) -> list[str]:
        name = metadata_name(stream.name)
        with ThreadPoolExecutor(max(1, workers)) as pool:
            members = list(pool.map(metadata_member, stream.parts))
        with atomic_path(folder / name) as tmp, open(tmp, "wb") as f:
            f.writelines(members)
        return [name]

    def write(self, job: LayoutJob) -> LayoutResult:
        start = time.monotonic()
        framing = frame(job, job.shards[0].id_dtype)
        streams = write_streams(job, framing, self)
        folder = location(job.folder)
        write_json(
            {
                "format": FORMAT,
                "version": 1,
                "dtype": framing.dtype.name,
                "vocab_size": job.tokenizer.vocab_size,
                "eos_token_id": framing.eos,
                "bos_token_id": framing.bos,
                "tokenizer_sha256": job.shards[0].sha256,
                "val_fraction": job.val_fraction,
                "arrays": [entry(s) for s in streams],
            },
            folder / INDEX,
        )
        done = result(self.name, folder, streams, ".npy array", framing, start)
        done.files.append(INDEX)
        return done

    def read(self, folder: AnyPath, split: bool) -> Iterator[Document]:
        # index.json records each array's split: `split` is not needed.
        folder = location(folder)
        index = read_index(folder)
        dtype = np.dtype(index["dtype"]).newbyteorder("<")
        for array in index["arrays"]:
            path = folder / array["path"]
            data = path.read_bytes()
            whole_ids(path, len(data), dtype)
            ids = np.frombuffer(data, dtype)
            meta = read_metadata(folder / array["metadata"])
            check_tiled(folder / array["metadata"], meta, len(ids))
            for start, end, src, loc in zip(
                *(meta[c].to_pylist() for c in ("start", "end", "src", "loc")), strict=True
            ):
                if not 0 <= start <= end <= len(ids):
                    raise TokenmillError(
                        f"{folder / array['metadata']}: document {start}:{end} is outside its "
                        f"array of {len(ids)} ids"
                    )
                yield Document(array["split"], ids[start:end], src, loc)

    def framework_read(self, folder: AnyPath, split: bool) -> Iterator[Document]:
        """By OLMo-core's own functions: each array's documents where its CSV says
        (`iter_document_indices`), each read by `load_array_slice`. A local
        folder only (OLMo-core would need its own credentials)."""
        try:
            from olmo_core.data.utils import iter_document_indices, load_array_slice
        except Exception as e:  # not installed, or its imports fail (no torch)
            raise TrainerMissing(self.reader, e) from None
        return olmo_core_documents(location(folder), iter_document_indices, load_array_slice)

    def recorded(self, folder: AnyPath) -> dict[str, str]:
        index = read_index(location(folder))
        mine = ("tokenizer_sha256", "vocab_size", "eos_id", "bos_id")
        theirs = ("tokenizer_sha256", "vocab_size", "eos_token_id", "bos_token_id")
        # bos_token_id is null when written without --bos: no <|bos|> in the arrays.
        pairs = zip(mine, theirs, strict=True)
        return {k: "null" if index[t] is None else str(index[t]) for k, t in pairs}


LAYOUT = Olmo()


def olmo_core_documents(
    folder: AnyPath, iter_document_indices: Callable, load_array_slice: Callable
) -> Iterator[Document]:
    """The documents of every array of index.json, by OLMo-core's functions."""
    index = read_index(folder)
    dtype = np.dtype(index["dtype"]).type
    for array in index["arrays"]:
        path = str(folder / array["path"])
        held = whole_ids(folder / array["path"], size(folder / array["path"]), np.dtype(dtype))
        check_tiled(folder / array["metadata"], read_metadata(folder / array["metadata"]), held)
        for start, end in iter_document_indices(path, use_array_if_local=False, dtype=dtype):
            yield Document(array["split"], load_array_slice(path, start, end, dtype))


def check_tiled(path: AnyPath, meta: pa.Table, ids: int) -> None:
    """The documents of `meta` (an array's CSV at `path`) cover its `ids` end to
    end: OLMo-core's FSL datasets read the array whole, as one stream, so an id
    outside every document is still trained on."""
    starts, ends = (meta[c].to_numpy().astype(np.int64) for c in ("start", "end"))
    bounds = np.concatenate([[0], ends])
    if not (np.array_equal(starts, bounds[:-1]) and bounds[-1] == ids):
        raise TokenmillError(f"{path}: its documents do not cover the {ids} ids of its array")


def whole_ids(path: AnyPath, nbytes: int, dtype: np.dtype) -> int:
    """The ids in an array of `nbytes`, refused in one line naming it when that
    is not a whole number of them (a file cut short, or of another dtype)."""
    if nbytes % dtype.itemsize:
        raise TokenmillError(
            f"{path}: {nbytes} bytes, not a whole number of {dtype.name} ids (index.json's dtype)"
        )
    return nbytes // dtype.itemsize


def read_index(folder: AnyPath) -> dict:
    path = folder / INDEX
    if not path.is_file():
        raise TokenmillError(f"{folder}: no {INDEX}; not written by --format olmo")
    index = parse_json(path.read_bytes(), path)
    arrays = index.get("arrays") if isinstance(index, dict) else None
    if not isinstance(arrays, list) or not all(
        isinstance(a, dict) and {"path", "metadata", "split"} <= a.keys() for a in arrays
    ):
        raise TokenmillError(f"{path}: not an index.json as --format olmo writes it (its arrays)")
    try:
        np.dtype(index["dtype"])
    except (KeyError, TypeError):
        raise TokenmillError(f"{path}: no dtype of ids ({index.get('dtype')!r})") from None
    return index


def refuse_line_breaks(name: str, path: AnyPath) -> None:
    """Refuse, before any work, an input (`name` under DATA, at `path`) whose
    name would split its rows of the CSV where OLMo-core reads it line by line
    (see the module's docstring)."""
    if "\n" in name or "\r" in name:
        raise TokenmillError(
            f"{path}: its name holds a line break, which would split its rows of the .csv.gz "
            "--format olmo writes, and OLMo-core reads that line by line; rename it"
        )


def read_metadata(path: AnyPath) -> pa.Table:
    """A CSV of `start,end,id,src,loc` rows, gzipped (any number of members),
    whose start and end are also those OLMo-core reads line by line."""
    raw = location(path).read_bytes()
    try:
        data = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:  # cut short, or bytes after its members
        raise TokenmillError(f"{path}: not gzip end to end ({one_line(e)})") from None
    if not data:  # an array of no documents
        return METADATA.empty_table()
    try:
        table = pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(column_names=METADATA.names),
            convert_options=pacsv.ConvertOptions(column_types=METADATA),
        )
    except pa.ArrowInvalid as e:
        raise TokenmillError(f"{path}: not an OLMo metadata CSV ({one_line(e)})") from None
    starts, ends = (table[c].to_pylist() for c in ("start", "end"))
    n = 0
    # As iter_document_indices reads it: gzip.open(path, "rt"), each line split at ",".
    for n, line in enumerate(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"), 1):
        try:
            start, end, *_ = line.split(",")
            bounds = int(start), int(end)
        except ValueError:
            bounds = None
        if n > len(starts) or bounds != (starts[n - 1], ends[n - 1]):
            raise TokenmillError(
                f"{path}: line {n} is not row {n}'s start and end as OLMo-core reads them, "
                "line by line (a field holding a line break splits its row)"
            )
    if n != len(starts):
        raise TokenmillError(f"{path}: {n} lines for {len(starts)} rows, as OLMo-core reads it")
    return table
