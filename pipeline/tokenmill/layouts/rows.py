"""Documents as a stream of ids, and its cutting into rows of SEQ_LEN: the
framing every layout shares (`document_stream`: ``[<|bos|>] + ids +
<|endoftext|>``, a row already ending in it gets no second) and pack's
cutting (`Packer`, `cut_pieces`), kept apart from the packed files' writing
(layouts/packed_write.py) and reading (layouts/packed_read.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from tokenmill.errors import TokenmillError
from tokenmill.tokenizer.ids import BOS

if TYPE_CHECKING:
    from tokenmill.tokenizer import Tokenizer

# A packed row's pieces of documents (layouts/packed.py's `documents` column).
PIECE = pa.struct(
    [
        ("shard", pa.string()),
        ("row", pa.uint64()),
        ("offset", pa.uint64()),
        ("start", pa.uint32()),
        ("length", pa.uint32()),
    ]
)


def bos_id(tok: Tokenizer) -> int:
    """The id --bos puts before each document, in every layout and command
    alike; refused in one line naming the option when the tokenizer lacks it."""
    if BOS not in tok.special_tokens:
        raise TokenmillError(
            f"--bos: the tokenizer has no {BOS} special token "
            f"(train it with --bos or --special-token '{BOS}')"
        )
    return tok.special_id(BOS)


def document_stream(
    flat: np.ndarray, offsets: np.ndarray, eos: int, bos: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """The documents of one batch as packed ids: ([bos] + ids + [eos]) each, where a
    document whose ids already end in `eos` gets no second one. Returns (ids, lengths)."""
    lens = np.diff(offsets)
    add_eos = ~ends_in(flat, offsets, eos)
    b = 0 if bos is None else 1
    new_lens = lens + b + add_eos
    if b == 0 and not add_eos.any():
        return flat, new_lens
    new_starts = (np.cumsum(new_lens) - new_lens).astype(np.int64)
    out = np.empty(int(new_lens.sum()), flat.dtype)
    if b:
        out[new_starts] = bos
    out[np.arange(len(flat)) + np.repeat(new_starts + b - offsets[:-1], lens)] = flat
    out[(new_starts + new_lens - 1)[add_eos]] = eos
    return out, new_lens


def ends_in(flat: np.ndarray, offsets: np.ndarray, eos: int) -> np.ndarray:
    """Whether each document's ids end in `eos` (an empty one does not)."""
    lens = np.diff(offsets)
    ends = np.zeros(len(lens), bool)
    nonempty = lens > 0
    ends[nonempty] = flat[offsets[1:][nonempty] - 1] == eos
    return ends


@dataclass
class Pieces:
    """Pieces of documents in row-major order: row `seq` of the current stream holds,
    from position `start`, `length` ids of document (`shard`, `row`) from `offset`."""

    seq: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    shard: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    row: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint64))
    offset: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    start: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    length: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    def __add__(self, other: Pieces) -> Pieces:
        return Pieces(**{k: np.concatenate([getattr(self, k), getattr(other, k)]) for k in FIELDS})

    def select(self, mask: np.ndarray) -> Pieces:
        return Pieces(**{k: getattr(self, k)[mask] for k in FIELDS})


FIELDS = ("seq", "shard", "row", "offset", "start", "length")


def select_documents(
    rows: np.ndarray, flat: np.ndarray, offsets: np.ndarray, keep: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The documents of a batch where `keep` (all if None), as (rows, ids, offsets)."""
    if keep is None or keep.all():
        return rows, flat, offsets
    lens = np.diff(offsets)
    kept = lens[keep]
    new_offsets = np.zeros(len(kept) + 1, offsets.dtype)
    np.cumsum(kept, out=new_offsets[1:])
    return rows[keep], flat[np.repeat(keep, lens)], new_offsets


def cut_pieces(
    doc_lens: np.ndarray, rows: np.ndarray, shard: int, base: int, seq_len: int
) -> Pieces:
    """The pieces of documents of lengths `doc_lens` laid end to end from stream
    position `base`, cut at every multiple of `seq_len`."""
    starts = base + np.concatenate([[0], np.cumsum(doc_lens)[:-1]]).astype(np.int64)
    ends = starts + doc_lens
    first = starts // seq_len
    count = (ends - 1) // seq_len - first + 1
    doc = np.repeat(np.arange(len(doc_lens)), count)
    k = np.arange(len(doc)) - np.repeat(np.cumsum(count) - count, count)
    seq = first[doc] + k
    lo = np.maximum(starts[doc], seq * seq_len)
    hi = np.minimum(ends[doc], (seq + 1) * seq_len)
    return Pieces(
        seq=seq,
        shard=np.full(len(doc), shard, np.int64),
        row=rows[doc],
        offset=lo - starts[doc],
        start=lo - seq * seq_len,
        length=hi - lo,
    )


class Packer:
    """Cuts a stream of documents into rows of `seq_len` ids, carrying what is left.
    It starts at row `sequences` of the stream, with `carry` (ids, and the
    pieces of documents they are, all in that row) ahead of what `add` gets."""

    def __init__(
        self,
        seq_len: int,
        eos: int,
        bos: int | None,
        id_dtype,
        names: list[str],
        *,
        carry: tuple[np.ndarray, Pieces] | None = None,
        sequences: int = 0,
    ):
        self.seq_len, self.eos, self.bos, self.names = seq_len, eos, bos, names
        self.carry: np.ndarray
        self.pieces: Pieces
        self.carry, self.pieces = carry or (np.empty(0, id_dtype), Pieces())
        self.sequences = sequences

    def add(self, shard: int, rows: np.ndarray, flat: np.ndarray, offsets: np.ndarray):
        """Add one batch of documents; return the full rows as (ids, pieces)."""
        ids, lens = document_stream(flat, offsets, self.eos, self.bos)
        n = self.seq_len
        self.pieces = self.pieces + cut_pieces(lens, rows, shard, len(self.carry), n)
        stream = np.concatenate([self.carry, ids])
        full = len(stream) // n
        done = self.pieces.select(self.pieces.seq < full)
        self.pieces = self.pieces.select(self.pieces.seq >= full)
        self.pieces.seq -= full
        self.carry = stream[full * n :]
        return stream[: full * n], done, full

    def finish(self):
        """The short last row, if any ids are left."""
        rest, pieces = self.carry, self.pieces
        self.carry, self.pieces = self.carry[:0], Pieces()
        return rest, pieces, 1 if len(rest) else 0

    def table(self, schema: pa.Schema, ids: np.ndarray, pieces: Pieces, nrows: int) -> pa.Table:
        n = self.seq_len
        row_offsets = np.minimum(np.arange(nrows + 1, dtype=np.int64) * n, len(ids))
        id_type = schema.field("ids").type.value_type
        id_lists = pa.LargeListArray.from_arrays(row_offsets, pa.array(ids, id_type))
        names = pa.array(self.names, pa.string()).take(pa.array(pieces.shard))
        structs = pa.StructArray.from_arrays(
            [
                names,
                pa.array(pieces.row, pa.uint64()),
                pa.array(pieces.offset, pa.uint64()),
                pa.array(pieces.start, pa.uint32()),
                pa.array(pieces.length, pa.uint32()),
            ],
            fields=list(PIECE),
        )
        piece_offsets = np.searchsorted(pieces.seq, np.arange(nrows + 1)).astype(np.int64)
        table = pa.Table.from_arrays(
            [
                pa.array(np.arange(self.sequences, self.sequences + nrows), pa.uint64()),
                id_lists,
                pa.array(np.diff(row_offsets), pa.uint32()),
                pa.LargeListArray.from_arrays(piece_offsets, structs),
            ],
            schema=schema,
        )
        self.sequences += nrows
        return table
