"""encode: every input shard to a token-ID Parquet shard.

Columns: row (the document's index in its input shard), ids
(list<uint16> when the vocabulary fits 16 bits, else list<uint32>), n_tokens.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.config import Config
from pipeline.errors import TokenmillError
from pipeline.executors import run_tasks
from pipeline.formats import load_any
from pipeline.io.readers import list_shards, read_documents, shard_name
from pipeline.io.writers import atomic_path
from pipeline.stages.count import output_name
from pipeline.tokenizer import ENDOFTEXT, Tokenizer


def token_schema(tok: Tokenizer, source: str) -> pa.Schema:
    id_type = pa.uint32() if tok.wide_ids else pa.uint16()
    return pa.schema(
        [("row", pa.uint64()), ("ids", pa.large_list(id_type)), ("n_tokens", pa.uint32())],
        metadata={
            "tokenmill.source": source,
            "tokenmill.tokenizer_sha256": tok.sha256,
            "tokenmill.vocab_size": str(tok.vocab_size),
        },
    )


@dataclass(frozen=True)
class EncodeTask:
    shard: Path
    name: str
    out: Path
    tokenizer: Tokenizer
    config: Config


def encode_shard(task: EncodeTask) -> dict:
    tok = task.tokenizer
    schema = token_schema(tok, task.name)
    documents = tokens = n_bytes = 0
    # Token ids gain nothing from dictionary pages; zstd shrinks them by a third.
    with (
        atomic_path(task.out) as tmp,
        pq.ParquetWriter(tmp, schema, use_dictionary=False, compression="zstd") as writer,
    ):
        for docs in read_documents(task.shard, task.config.text_column):
            ids, n_tokens = tok.encode_arrow(docs, eos=task.config.eos)
            rows = pa.array(range(documents, documents + len(docs)), pa.uint64())
            writer.write_table(pa.Table.from_arrays([rows, ids, n_tokens], schema=schema))
            documents += len(docs)
            tokens += len(ids.values)
            n_bytes += pc.sum(pc.binary_length(docs)).as_py() or 0
    return {"shard": task.name, "documents": documents, "tokens": tokens, "bytes": n_bytes}


def run_encode(data: Path, tokens_dir: Path, tokenizer: Path | Tokenizer, config: Config) -> dict:
    """`tokenizer`: a Tokenizer, or a tokenizer file of any format `load_any` reads."""
    start = time.monotonic()
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else load_any(tokenizer)
    if config.eos and ENDOFTEXT not in tok.special_tokens:
        raise TokenmillError(
            f"{tokenizer if isinstance(tokenizer, Path) else 'the tokenizer'} has no "
            f"{ENDOFTEXT} special token to end each document with (use --no-eos)"
        )
    tasks = [
        EncodeTask(
            p,
            shard_name(p, data),
            Path(tokens_dir) / output_name(shard_name(p, data)),
            tok,
            config,
        )
        for p in list_shards(data, config.glob)
    ]
    results = run_tasks(
        encode_shard, tasks, workers=config.n_workers, executor=config.executor, desc="encode"
    )
    return {
        "stage": "encode",
        "shards": results,
        "documents": sum(r["documents"] for r in results),
        "tokens": sum(r["tokens"] for r in results),
        "bytes": sum(r["bytes"] for r in results),
        "seconds": time.monotonic() - start,
    }
