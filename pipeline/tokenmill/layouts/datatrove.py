"""datatrove (--format datatrove): the documents as datatrove's tokenized
files, which nanotron (and datatrove's own DatatroveFolderDataset) load.

Each set of files is what datatrove's `DocumentTokenizer` writes:

- ``X.ds``: the ids of every document end to end, raw little-endian uint16
  when the vocabulary has at most 65536 ids, else uint32 (datatrove's rule:
  a token size of 2 or 4 bytes); no header;
- ``X.ds.index``: little-endian uint64, the end of each document in tokens
  (cumulative, no leading 0), which datatrove's `load_doc_ends` reads;
- ``X.ds.metadata``: three lines of text, ``tokenizer.json|<token size>``
  (the tokenizer, OUT/tokenizer.json, and the token size, which datatrove's
  merger reads back), the token count, and the count in short
  (``1.23 MT``, as datatrove writes it).

No ``.ds.loss``: datatrove writes one only for loss masks, and every token
here counts.

Documents follow the rule of layouts/stream.py (``[<|bos|>] + ids +
<|endoftext|>``): nanotron's windows run across documents, and the
``<|endoftext|>`` is what separates them. Documents are in input order, not
shuffled as datatrove shuffles them: nanotron shuffles its windows, and this
layout's bytes depend on the token shards only.

Names under OUT/datatrove/ (datatrove's readers, and nanotron's, take the
``*.ds`` files of one folder, not of its subfolders: a folder is a dataset):

- one merged set, ``000_corpus.ds`` (what datatrove's merger calls its
  first file, given the name "corpus");
- with --val-fraction, ``train/000_corpus.ds`` and ``val/000_corpus.ds``;
- with --per-shard, ``<shard>.ds`` per token shard (its name without
  ``.parquet``: input ``code/a.jsonl`` gives ``code/a.jsonl.ds``, so each
  folder of DATA is a folder, a dataset, here), under ``train/`` and
  ``val/`` with --val-fraction.

    from datatrove.utils.dataset import DatatroveFolderDataset
    ds = DatatroveFolderDataset("out/datatrove/train", seq_len=2048, token_size=2)
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator

import numpy as np

from tokenmill.errors import TokenmillError
from tokenmill.io.storage import AnyPath, is_remote, listed, location, open_read
from tokenmill.io.storage import size as file_size
from tokenmill.io.writers import atomic_path
from tokenmill.layouts import Document, LayoutJob, LayoutResult, TrainerMissing
from tokenmill.layouts.stream import Frame, Stream, frame, result, split_of, write_streams
from tokenmill.stages.layout import TOKENIZER
from tokenmill.stages.results import plural

CORPUS = "000_corpus"  # DocumentTokenizerMerger's f"{file:03d}_{save_filename}"
SUFFIXES = (".ds", ".ds.index", ".ds.metadata")


def token_size(vocab_size: int) -> int:
    """Bytes per id, by datatrove's rule (PipelineStepWithTokenizer.token_size)."""
    return 4 if vocab_size > 2**16 else 2


def short_count(n: int) -> str:
    """`n` tokens as datatrove's .ds.metadata says it: humanize.metric(n, "T"),
    three significant digits and an SI prefix."""
    exponent = len(str(n)) - 1 if n else 0
    if round(n / 10 ** (exponent // 3 * 3), 2 - exponent % 3) >= 10 ** (exponent % 3 + 1):
        exponent += 1  # rounding carried into a new digit: 999_999 is 1.00 MT, not 1000 kT
    value = n / 10 ** (exponent // 3 * 3)
    return f"{value:.{2 - exponent % 3}f} {' kMGTPEZYRQ'[exponent // 3].strip()}T"


class Datatrove:
    name = "datatrove"
    folder = "datatrove"
    reader = "datatrove"
    local_only = False
    ends_in_eos = True

    def owns(self, name: str) -> bool:
        return name.endswith(SUFFIXES)

    def stream_name(self, split: str, stem: str | None) -> str:
        base = f"{stem or CORPUS}.ds"
        return f"{split}/{base}" if split else base

    def finish(self, stream: Stream, folder: AnyPath, frame: Frame, workers: int) -> list[str]:
        ends = np.cumsum(stream.lengths, dtype=np.int64)
        tokens = int(ends[-1]) if len(ends) else 0
        with atomic_path(folder / f"{stream.name}.index") as tmp:
            tmp.write_bytes(ends.astype("<u8").tobytes())
        metadata = f"{TOKENIZER}|{frame.dtype.itemsize}\n{tokens}\n{short_count(tokens)}"
        with atomic_path(folder / f"{stream.name}.metadata") as tmp:
            tmp.write_text(metadata, encoding="utf-8")
        return [f"{stream.name}.index", f"{stream.name}.metadata"]

    def write(self, job: LayoutJob) -> LayoutResult:
        start = time.monotonic()
        size = token_size(job.tokenizer.vocab_size)
        framing = frame(job, np.dtype("<u4" if size == 4 else "<u2"))
        streams = write_streams(job, framing, self)
        return result(self.name, job.folder, streams, ".ds file", framing, start)

    def read(self, folder: AnyPath, split: bool) -> Iterator[Document]:
        """Every .ds file under `folder` in path order (DatatroveFolderDataset's),
        document by document; its split its top folder (train/ or val/) when `split`."""
        folder = location(folder)
        for name in listed(folder, ".ds"):
            path = folder / name
            size = read_token_size(folder / f"{name}.metadata")
            ids = read_ids(path, np.dtype("<u4" if size == 4 else "<u2"))
            ends = doc_ends(folder / f"{name}.index")
            if (ends[-1] if len(ends) else 0) != len(ids):
                raise TokenmillError(f"{path}: holds {len(ids)} ids, its .index ends elsewhere")
            starts = np.concatenate([[0], ends[:-1]])
            for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
                yield Document(split_of(name, split), ids[start:end])

    def framework_read(self, folder: AnyPath, split: bool) -> Iterator[Document]:
        """By datatrove's merger's `load_doc_ends` and `get_data_reader`, the
        reading of the files that its DatatroveFolderDataset (nanotron's) relies on."""
        try:
            from datatrove.pipeline.tokens.merger import get_data_reader, load_doc_ends
        except Exception as e:  # not installed, or its imports fail (no torch)
            raise TrainerMissing(self.reader, e) from None
        folder = location(folder)

        def documents() -> Iterator[Document]:
            for name in listed(folder, ".ds"):
                size = read_token_size(folder / f"{name}.metadata")
                index = folder / f"{name}.index"
                data = read_bytes(index)
                doc_ends(index, data)  # its faults named, before datatrove's
                ends = load_doc_ends(io.BytesIO(data))
                dtype = np.dtype("<u4" if size == 4 else "<u2")
                # nanotron reads the .ds whole, as one stream: ids after the
                # last document's end are trained on, though no document holds them.
                held = file_size(folder / name) // size
                if (int(ends[-1]) if len(ends) else 0) != held:
                    raise TokenmillError(
                        f"{folder / name}: holds {held} ids, its .index ends elsewhere"
                    )
                for doc in get_data_reader(open_read(folder / name), ends, nb_bytes=size):
                    yield Document(split_of(name, split), np.frombuffer(doc, dtype))

        return documents()

    def recorded(self, folder: AnyPath) -> dict[str, str]:
        """The first line of the first .ds.metadata: the tokenizer's name and the
        token size (no vocabulary, no special ids: datatrove has no place for them)."""
        folder = location(folder)
        names = listed(folder, ".ds")
        if not names:
            return {}
        first = read_bytes(folder / f"{names[0]}.metadata").decode("utf-8", "replace")
        tokenizer, _, size = first.partition("\n")[0].rpartition("|")
        return {"tokenizer": tokenizer, "token_size": size}


LAYOUT = Datatrove()


def doc_ends(path: AnyPath, data: bytes | None = None) -> np.ndarray:
    """A .ds.index's document ends, refused in one line naming it when they
    are no list of rising 8-byte offsets (datatrove's reader then fails on a
    negative read length, naming nothing); `data` its bytes when already read."""
    if data is None:
        data = read_bytes(path)
    if len(data) % 8:
        raise TokenmillError(f"{path}: {len(data)} bytes, not a whole number of 8-byte ends")
    ends = np.frombuffer(data, "<u8")
    if len(ends) and (np.any(ends[1:] < ends[:-1]) or ends[-1] >= 2**62):
        raise TokenmillError(f"{path}: its document ends do not rise through the .ds")
    return ends.astype(np.int64)


def read_bytes(path: AnyPath) -> bytes:
    try:
        with open_read(path) as f:
            return f.read()
    except FileNotFoundError:
        raise TokenmillError(
            f"{path}: missing (datatrove writes .ds, .ds.index and .ds.metadata)"
        ) from None


def read_ids(path: AnyPath, dtype: np.dtype) -> np.ndarray:
    if is_remote(path) or not path.is_file() or path.stat().st_size == 0:
        return np.frombuffer(read_bytes(path), dtype)
    return np.memmap(path, dtype, mode="r")


def metadata_problems(folder: AnyPath, where: str) -> list[str]:
    """Each .ds.metadata under `folder` (`where`, as problems name it) against
    its .ds, one line naming it per problem: three lines, as DocumentTokenizer
    writes them (its merger reads the first, ``<tokenizer>|<token size>``,
    split at '|'), the tokenizer the run's (OUT's tokenizer.json), and the
    count and its short form the .ds's."""
    folder = location(folder)
    problems = []
    for name in listed(folder, ".ds"):
        path, said = folder / f"{name}.metadata", f"{where}{name}.metadata"
        lines = read_bytes(path).decode("utf-8", "replace").splitlines()
        if len(lines) != 3:
            problems.append(
                f"{said}: {plural(len(lines), 'line')}, where datatrove writes three: "
                "<tokenizer>|<token size>, the token count, the count in short"
            )
            continue
        tokenizer, _, size = lines[0].rpartition("|")
        if tokenizer != TOKENIZER:
            problems.append(
                f"{said}: names the tokenizer {tokenizer!r}, the run's is {TOKENIZER!r} "
                "(datatrove's merger reads the first line as <tokenizer>|<token size>)"
            )
        held = file_size(folder / name) // read_token_size(path)
        if lines[1] != str(held):
            problems.append(f"{said}: records {lines[1]!r} tokens, {name} holds {held}")
        elif lines[2] != short_count(held):
            problems.append(
                f"{said}: says {lines[2]!r} for {held} tokens, datatrove's {short_count(held)!r}"
            )
    return problems


def read_token_size(path: AnyPath) -> int:
    first = read_bytes(path).decode("utf-8", "replace").partition("\n")[0]
    size = first.rpartition("|")[2]
    if size not in ("2", "4"):
        raise TokenmillError(f"{path}: no token size (2 or 4) after '|' on its first line")
    return int(size)
