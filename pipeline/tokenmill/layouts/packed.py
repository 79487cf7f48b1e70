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

With --shuffle SEED, the full rows of each stream are then put in a seeded
order (layouts/packed_shuffle.py): ``sequence`` is each row's place, and
``unshuffled`` (uint64) its place in the stream, where its pieces are.

With --val-fraction, the documents stages/split.py puts in validation form a
stream of their own: PACKED_DIR/train/<shard> and PACKED_DIR/val/<shard>, each
packed by the rules above, so no row mixes train and val documents. A
mixture's part is of one split (stages/split.in_split): it has a file in that
split only, and the last part of a split holds its stream's short last row.

Written in two passes, each one task per shard on `workers` cores: the
first reads the documents' lengths and places every shard in the stream
(layouts/packed_plan.py), the second writes each packed shard on its own
from its place (layouts/packed_write.py); read back by
layouts/packed_read.py.
"""

from __future__ import annotations

from collections.abc import Iterator

from tokenmill.io.metadata import BOS_ID, EOS_ID, TOKENIZER_SHA256, VOCAB_SIZE
from tokenmill.io.storage import AnyPath, location, parquet_file
from tokenmill.layouts import Document, LayoutJob, LayoutResult
from tokenmill.layouts.packed_read import in_stream_order, parquet_files, read_side
from tokenmill.layouts.packed_shuffle import BUCKETS
from tokenmill.layouts.packed_write import pack_shards
from tokenmill.stages.results import plural
from tokenmill.stages.split import SPLITS, in_split


class Packed:
    name = "packed"
    folder = "packed"
    reader = "pyarrow"
    local_only = False
    ends_in_eos = True

    def owns(self, name: str) -> bool:
        # .buckets/: a killed shuffled packing's rows to sort (layouts/packed_shuffle.py)
        return name.endswith(".parquet") or name.startswith(f"{BUCKETS}/")

    def write(self, job: LayoutJob) -> LayoutResult:
        result = pack_shards(
            job.shards,
            job.tokenizer,
            job.folder,
            job.seq_len,
            bos=job.bos,
            val_fraction=job.val_fraction,
            shuffle=job.shuffle,
            workers=job.workers,
            executor=job.executor,
            ray_address=job.ray_address,
        )
        sides = list(SPLITS) if job.val_fraction > 0 else [""]
        # pack_shards lists its files shard by shard, each split in turn.
        files = [f"{side}/{s.name}" if side else s.name
                 for s in job.shards for side in sides if in_split(s, side)]  # fmt: skip
        return LayoutResult(
            stage="pack",
            dir=str(location(job.folder)),
            files=files,
            rows={f: r["sequences"] for f, r in zip(files, result.shards, strict=True)},
            documents=result.documents,
            tokens=result.tokens,
            summary=f"{plural(result.sequences, 'sequence')} of {result.seq_len} ({result.last()})",
            seconds=result.seconds,
            redone=len(files),
        )

    def read(self, folder: AnyPath, split: bool) -> Iterator[Document]:
        folder = location(folder)
        # Unsplit, the packed shards are one stream, in train/ and val/ too
        # when DATA has such folders (the shards' names are the inputs').
        sides = [s for s in SPLITS if (folder / s).is_dir()] if split else [""]
        for side in sides:
            yield from read_side(folder / side if side else folder, side)

    def framework_read(self, folder: AnyPath, split: bool) -> Iterator[Document]:
        """Packed rows are Parquet, read with pyarrow as a trainer's loader reads
        them (Hugging Face datasets, a torch Dataset over pyarrow): `read`."""
        return self.read(folder, split)

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
