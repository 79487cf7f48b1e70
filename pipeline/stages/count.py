"""count: one word-frequency table per input shard."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.config import Config
from pipeline.executors import run_tasks
from pipeline.io.readers import list_shards, read_documents, shard_name
from pipeline.io.writers import atomic_path
from pipeline.tokenizer import word_table

SOURCE_KEY = b"tokenmill.source"


def output_name(name: str) -> str:
    """A flat file name for a shard's relative path."""
    return name.replace("/", "__") + ".parquet"


@dataclass(frozen=True)
class CountTask:
    shard: Path
    name: str
    out: Path
    config: Config


def count_shard(task: CountTask) -> dict:
    stats = {"documents": 0, "bytes": 0}

    def documents():
        for docs in read_documents(task.shard, task.config.text_column):
            stats["documents"] += len(docs)
            stats["bytes"] += pc.sum(pc.binary_length(docs)).as_py() or 0
            yield docs

    c = task.config
    table = word_table(documents(), c.mode, c.pattern, c.lowercase)
    table = table.replace_schema_metadata({SOURCE_KEY: task.name.encode()})
    with atomic_path(task.out) as tmp:
        pq.write_table(table, tmp)
    return {"shard": task.name, "words": table.num_rows, **stats}


def run_count(data: Path, counts_dir: Path, config: Config) -> dict:
    start = time.monotonic()
    shards = list_shards(data, config.glob)
    tasks = [
        CountTask(
            p, shard_name(p, data), Path(counts_dir) / output_name(shard_name(p, data)), config
        )
        for p in shards
    ]
    results = run_tasks(
        count_shard, tasks, workers=config.n_workers, executor=config.executor, desc="count"
    )
    return {
        "stage": "count",
        "shards": results,
        "documents": sum(r["documents"] for r in results),
        "bytes": sum(r["bytes"] for r in results),
        "seconds": time.monotonic() - start,
    }


def shard_source(counts_file: Path) -> str:
    meta = pq.read_schema(counts_file).metadata or {}
    return meta.get(SOURCE_KEY, Path(counts_file).stem.encode()).decode()
