"""Reading the token shards that `encode` writes: their order, their metadata,
and the tokenizer they were encoded with. Used by pack, binfmt, stats, report
and decode."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import TokenmillError
from pipeline.formats import load_any
from pipeline.tokenizer import Tokenizer

SOURCE = b"tokenmill.source"
SHA256 = b"tokenmill.tokenizer_sha256"
VOCAB_SIZE = b"tokenmill.vocab_size"
TOKENIZER_NAME = "tokenizer.json"  # beside tokens/ in a `run` output folder
BATCH_ROWS = 8192


@dataclass(frozen=True)
class TokenShard:
    path: Path
    source: str  # the input shard's name (its path relative to DATA)
    sha256: str  # of the tokenizer it was encoded with
    vocab_size: int
    documents: int
    id_dtype: np.dtype  # uint16 or uint32, as in the file

    def batches(self, columns=("row", "ids"), batch_rows: int = BATCH_ROWS):
        """The shard's rows as record batches, in row order."""
        try:
            yield from pq.ParquetFile(self.path).iter_batches(
                batch_size=batch_rows, columns=list(columns)
            )
        except (OSError, pa.ArrowException) as e:
            raise TokenmillError(f"{self.path}: cannot read token shard ({e})") from None


def open_token_shard(path: Path) -> TokenShard:
    path = Path(path)
    try:
        pf = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as e:
        raise TokenmillError(f"{path}: cannot read token shard ({e})") from None
    schema = pf.schema_arrow
    meta = schema.metadata or {}
    if SHA256 not in meta or "ids" not in schema.names:
        raise TokenmillError(f"{path}: not a token shard written by `tokenmill encode`")
    id_type = schema.field("ids").type.value_type
    return TokenShard(
        path=path,
        source=meta.get(SOURCE, path.stem.encode()).decode(),
        sha256=meta[SHA256].decode(),
        vocab_size=int(meta.get(VOCAB_SIZE, b"0")),
        documents=pf.metadata.num_rows,
        id_dtype=np.dtype(id_type.to_pandas_dtype()),
    )


def token_shards(tokens_dir: Path) -> list[TokenShard]:
    """The token shards of a folder in input order (sorted by input shard name, the
    order `encode` read them in), all encoded with the same tokenizer."""
    tokens_dir = Path(tokens_dir)
    if not tokens_dir.is_dir():
        raise TokenmillError(f"{tokens_dir}: no such folder of token shards")
    shards = [
        open_token_shard(p) for p in tokens_dir.glob("*.parquet") if not p.name.startswith(".")
    ]
    if not shards:
        raise TokenmillError(f"{tokens_dir}: no token shards (run `tokenmill encode` first)")
    shards.sort(key=lambda s: s.source)
    if len({s.sha256 for s in shards}) > 1:
        raise TokenmillError(f"{tokens_dir}: the shards were encoded with different tokenizers")
    return shards


def shard_tokenizer(
    shard: TokenShard, tokenizer_file: Path | None = None, **load_options
) -> Tokenizer:
    """The tokenizer `shard` was encoded with: `tokenizer_file` if given, else the
    tokenizer.json of the `run` output folder holding the shard; either way its
    sha256 must be the one recorded in the shard."""
    if tokenizer_file is None:
        tokenizer_file = shard.path.parent.parent / TOKENIZER_NAME
        if not tokenizer_file.is_file():
            raise TokenmillError(
                f"{shard.path}: no {TOKENIZER_NAME} beside its folder; give --tokenizer"
            )
    tok = load_any(Path(tokenizer_file), **load_options)
    if tok.sha256 != shard.sha256:
        raise TokenmillError(
            f"{tokenizer_file}: not the tokenizer {shard.path} was encoded with "
            f"(sha256 {tok.sha256[:12]}..., the shard says {shard.sha256[:12]}...)"
        )
    return tok


def list_ids(ids: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A list<uint16|uint32> array as (flat ids, int64 offsets from 0), without copying
    the ids when the array is not sliced."""
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    offsets = ids.offsets.to_numpy().astype(np.int64)
    flat = ids.values.to_numpy()[offsets[0] : offsets[-1]]
    return flat, offsets - offsets[0]


def read_row(shard: TokenShard, row: int) -> list[int]:
    """The ids of row `row` (0-based) of a token shard."""
    if not 0 <= row < shard.documents:
        raise TokenmillError(
            f"--row {row} is out of range: {shard.path} has {shard.documents} rows"
        )
    seen = 0
    for batch in shard.batches(columns=("ids",)):
        if row < seen + batch.num_rows:
            return batch.column(0)[row - seen].as_py()
        seen += batch.num_rows
    raise TokenmillError(f"{shard.path}: row {row} is missing")  # pragma: no cover
