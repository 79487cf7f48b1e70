"""count: one word-frequency table per input shard."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.config import Config
from pipeline.errors import TokenmillError
from pipeline.executors import run_tasks
from pipeline.io.inputs import Inputs, find_inputs, output_name
from pipeline.io.readers import OnSkip, read_documents
from pipeline.stages.shards import shard_size, shard_task, split_shards, stage_summary
from pipeline.stages.state import STATE_KEY, count_key
from pipeline.tokenizer import word_table

SOURCE_KEY = b"tokenmill.source"


@dataclass(frozen=True)
class CountTask:
    shard: Path
    name: str
    out: Path
    config: Config
    split: bool = True  # see split_shards


def count_shard(task: CountTask) -> dict:
    c = task.config

    def write(tmp: Path, on_skip: OnSkip | None, stats: dict, state: Callable) -> dict:
        result = {"documents": 0, "bytes": 0}

        def documents():
            for docs in read_documents(task.shard, c.text_column, on_skip=on_skip, stats=stats):
                result["documents"] += len(docs)
                result["bytes"] += pc.sum(pc.binary_length(docs)).as_py() or 0
                yield docs

        table = word_table(documents(), c.mode, c.pattern, c.lowercase, parallel=task.split)
        result["words"] = table.num_rows
        table = table.replace_schema_metadata(
            {SOURCE_KEY: task.name.encode(), STATE_KEY: state(result)}
        )
        # Every word is distinct: dictionary pages would only cost time. Delta
        # encoding packs the sorted first keys and the small counts about as
        # tightly as LZ4 does, at a fraction of the cost of compressing.
        pq.write_table(
            table,
            tmp,
            use_dictionary=False,
            compression="none",
            column_encoding={"count": "DELTA_BINARY_PACKED", "first": "DELTA_BINARY_PACKED"},
        )
        return result

    return shard_task(task.shard, task.name, task.out, c, count_key(c), write)


def run_count(data: Path | Inputs, counts_dir: Path, config: Config) -> dict:
    """Count every input of `data` (a folder or file, or the Inputs found in it)."""
    start = time.monotonic()
    if not isinstance(data, Inputs):
        data = find_inputs(data, config.glob, exclude=(Path(counts_dir),))
    split = split_shards(data.shards, config)
    tasks = [
        CountTask(s.path, s.name, Path(counts_dir) / output_name(s.name), config, split)
        for s in data.shards
    ]
    results = run_tasks(
        count_shard,
        tasks,
        workers=config.n_workers,
        executor=config.executor,
        ray_address=config.ray_address,
        desc="count",
        size=shard_size,
    )
    return stage_summary("count", results, time.monotonic() - start, not_read=data.not_read)


def shard_source(counts_file: Path) -> str:
    try:
        meta = pq.read_schema(counts_file).metadata or {}
    except (OSError, ValueError) as e:
        raise TokenmillError(f"{counts_file}: cannot read count table ({e})") from None
    return meta.get(SOURCE_KEY, Path(counts_file).stem.encode()).decode()
