"""pack: the token shards as fixed-length training sequences.

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

One pass over the token shards, batch by batch: memory holds one batch and
less than one row of carried ids (per split).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from tokenmill.errors import TokenmillError
from tokenmill.faults import checkpoint
from tokenmill.io.metadata import BOS_ID, EOS_ID, SEQ_LEN, SOURCE, TOKENIZER_SHA256, VOCAB_SIZE
from tokenmill.io.storage import AnyPath, location
from tokenmill.io.writers import atomic_path
from tokenmill.stages.results import PackResult
from tokenmill.stages.split import SPLITS, TRAIN, VAL, is_val
from tokenmill.stages.tokens import TokenShard, list_ids, shard_tokenizer, token_shards
from tokenmill.tokenizer import BOS, ENDOFTEXT, Tokenizer

PIECE = pa.struct(
    [
        ("shard", pa.string()),
        ("row", pa.uint64()),
        ("offset", pa.uint64()),
        ("start", pa.uint32()),
        ("length", pa.uint32()),
    ]
)


def packed_schema(tok: Tokenizer, shard: TokenShard, seq_len: int, bos: int | None) -> pa.Schema:
    return pa.schema(
        [
            ("sequence", pa.uint64()),
            ("ids", pa.large_list(tok._id_type)),
            ("n_tokens", pa.uint32()),
            ("documents", pa.large_list(PIECE)),
        ],
        metadata={
            SOURCE: shard.source,
            TOKENIZER_SHA256: tok.sha256,
            VOCAB_SIZE: str(tok.vocab_size),
            SEQ_LEN: str(seq_len),
            EOS_ID: str(tok.eos_id),
            BOS_ID: "" if bos is None else str(bos),
        },
    )


def document_stream(
    flat: np.ndarray, offsets: np.ndarray, eos: int, bos: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """The documents of one batch as packed ids: ([bos] + ids + [eos]) each, where a
    document whose ids already end in `eos` gets no second one. Returns (ids, lengths)."""
    lens = np.diff(offsets)
    ends_in_eos = np.zeros(len(lens), bool)
    nonempty = lens > 0
    ends_in_eos[nonempty] = flat[offsets[1:][nonempty] - 1] == eos
    add_eos = ~ends_in_eos
    b = 0 if bos is None else 1
    new_lens = lens + b + add_eos
    if b == 0 and not add_eos.any():
        return flat, new_lens
    new_starts = np.concatenate([[0], np.cumsum(new_lens)[:-1]]).astype(np.int64)
    out = np.empty(int(new_lens.sum()), flat.dtype)
    if b:
        out[new_starts] = bos
    out[np.arange(len(flat)) + np.repeat(new_starts + b - offsets[:-1], lens)] = flat
    out[(new_starts + new_lens - 1)[add_eos]] = eos
    return out, new_lens


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
    """Cuts a stream of documents into rows of `seq_len` ids, carrying what is left."""

    def __init__(self, seq_len: int, eos: int, bos: int | None, id_dtype, names: list[str]):
        self.seq_len, self.eos, self.bos, self.names = seq_len, eos, bos, names
        self.carry = np.empty(0, id_dtype)
        self.pieces = Pieces()
        self.sequences = 0

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


def run_pack(
    tokens_dir: AnyPath,
    packed_dir: AnyPath,
    seq_len: int,
    *,
    bos: bool = False,
    tokenizer: AnyPath | Tokenizer | None = None,
    names: list[str] | None = None,
    val_fraction: float = 0.0,
) -> PackResult:
    """Pack every token shard of `tokens_dir` (or those `names`, relative to it)
    into `packed_dir` (same relative paths).

    `tokenizer`: the one the shards were encoded with (a Tokenizer or a file);
    default: tokenizer.json beside `tokens_dir`.
    """
    start = time.monotonic()
    if seq_len < 1:
        raise TokenmillError(f"--pack/--seq-len must be at least 1, not {seq_len}")
    shards = token_shards(tokens_dir, names)
    if isinstance(tokenizer, Tokenizer):
        tok = tokenizer
        if tok.sha256 != shards[0].sha256:
            raise TokenmillError(f"{tokens_dir}: encoded with another tokenizer")
    else:
        tok = shard_tokenizer(shards[0], tokenizer)
    if ENDOFTEXT not in tok.special_tokens:
        raise TokenmillError(f"the tokenizer has no {ENDOFTEXT} to separate documents with")
    if bos and BOS not in tok.special_tokens:
        raise TokenmillError(
            f"--bos: the tokenizer has no {BOS} special token "
            f"(train it with --bos or --special-token '{BOS}')"
        )
    bos_id = tok.special_id(BOS) if bos else None
    id_dtype = np.uint32 if tok._wide_ids else np.uint16
    # With a split, each side is its own stream of documents, packed on its own.
    packed_dir = location(packed_dir)
    sides = {"": packed_dir}
    if val_fraction > 0:
        sides = {side: packed_dir / side for side in SPLITS}
    names = [s.source for s in shards]
    packers = {side: Packer(seq_len, tok.eos_id, bos_id, id_dtype, names) for side in sides}
    results = []
    for i, shard in enumerate(tqdm(shards, desc="pack", unit="shard", disable=None, leave=False)):
        schema = packed_schema(tok, shard, seq_len, bos_id)
        first = {side: p.sequences for side, p in packers.items()}
        tokens = dict.fromkeys(sides, 0)
        documents = dict.fromkeys(sides, 0)
        last = i == len(shards) - 1
        with contextlib.ExitStack() as stack:
            writers = {
                side: stack.enter_context(
                    pq.ParquetWriter(
                        stack.enter_context(atomic_path(folder / shard.name)),
                        schema,
                        use_dictionary=False,
                        compression="zstd",
                    )
                )
                for side, folder in sides.items()
            }
            for batch in shard.batches():
                flat, offsets = list_ids(batch.column("ids"))
                rows = batch.column("row").to_numpy()
                val = is_val(shard.source, rows, val_fraction)
                for side, packer in packers.items():
                    docs = {"": None, TRAIN: ~val, VAL: val}[side]
                    s_rows, s_flat, s_offsets = select_documents(rows, flat, offsets, docs)
                    documents[side] += len(s_rows)
                    ids, pieces, nrows = packer.add(i, s_rows, s_flat.astype(id_dtype), s_offsets)
                    tokens[side] += len(ids)
                    if nrows:
                        writers[side].write_table(packer.table(schema, ids, pieces, nrows))
            checkpoint("pack", i + 1)  # tests kill here, with this shard's temporary open
            for side, packer in packers.items():
                if last:
                    ids, pieces, nrows = packer.finish()
                    tokens[side] += len(ids)
                    if nrows:
                        writers[side].write_table(packer.table(schema, ids, pieces, nrows))
        for side, folder in sides.items():
            results.append(
                {
                    "shard": shard.source,
                    **({"split": side} if side else {}),
                    "file": str(folder / shard.name),
                    "documents": documents[side],
                    "sequences": packers[side].sequences - first[side],
                    "tokens": tokens[side],
                    "reused": False,  # packing is redone every time (one pass, cheap)
                }
            )
    sequences = sum(p.sequences for p in packers.values())
    # The length of the run's very last row (of the last split's stream); seq_len if full.
    last_row = len(ids) if nrows else seq_len
    return PackResult(
        shards=results,
        seq_len=seq_len,
        sequences=sequences,
        last_row=last_row if sequences else 0,
        documents=sum(r["documents"] for r in results),
        tokens=sum(r["tokens"] for r in results),
        reused=0,
        redone=len(results),
        seconds=time.monotonic() - start,
    )
