"""count: one word-frequency table per input shard."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.config import Config
from tokenmill.executors import run_tasks
from tokenmill.io.inputs import Inputs, find_inputs, output_name
from tokenmill.io.metadata import SOURCE, STATE
from tokenmill.io.readers import OnSkip, read_documents
from tokenmill.io.storage import AnyPath, location
from tokenmill.stages.results import ShardStageResult
from tokenmill.stages.shards import shard_size, shard_task, split_shards
from tokenmill.stages.state import count_key
from tokenmill.tokenizer import word_table


@dataclass(frozen=True)
class CountTask:
    shard: AnyPath
    name: str
    out: AnyPath
    config: Config
    split: bool = True  # see split_shards
    pattern: str | None = None  # another than config.pattern: superword tokens' stage 2
    counted: dict | None = None  # what a count earlier in the run read of the shard


def text_bytes(docs: pa.LargeStringArray) -> int:
    """The UTF-8 bytes of documents without nulls, read off their offsets
    (pyarrow.compute would cost its import, a tenth of a small run)."""
    if not len(docs):
        return 0
    offsets = np.frombuffer(docs.buffers()[1], np.int64, len(docs) + 1, docs.offset * 8)
    return int(offsets[-1] - offsets[0])


def count_shard(task: CountTask) -> dict:
    c = task.config

    def write(tmp: Path, on_skip: OnSkip | None, stats: dict, state: Callable) -> dict:
        result = {"documents": 0, "bytes": 0}

        def documents():
            for docs in read_documents(
                task.shard, c.text_column, on_skip=on_skip, stats=stats, txt_unit=c.txt_unit
            ):
                result["documents"] += len(docs)
                result["bytes"] += text_bytes(docs)
                yield docs

        pattern = task.pattern or c.pattern
        table = word_table(documents(), c.mode, pattern, c.lowercase, parallel=task.split)
        result["words"] = table.num_rows
        table = table.replace_schema_metadata({SOURCE: task.name.encode(), STATE: state(result)})
        # Every word is distinct: dictionary pages would only cost time. Delta
        # encoding packs the sorted first keys and the small counts about as
        # tightly as LZ4 does, at a fraction of the cost of compressing. No
        # reader filters on statistics, and a word's min and max are copies
        # of the longest words: 1.2 GB to write one word of 200 MB.
        pq.write_table(
            table,
            tmp,
            use_dictionary=False,
            compression="none",
            write_statistics=False,
            column_encoding={"count": "DELTA_BINARY_PACKED", "first": "DELTA_BINARY_PACKED"},
        )
        return result

    return shard_task(
        task.shard, task.name, task.out, c, count_key(c, task.pattern), write, task.counted
    )


def run_count(
    data: AnyPath | Inputs,
    counts_dir: AnyPath,
    config: Config,
    pattern: str | None = None,
    counted: dict[str, dict] | None = None,
) -> ShardStageResult:
    """Count every input of `data` (a folder or file, or the Inputs found in it),
    split by config.pattern, or by `pattern` (superword tokens' stage 2).
    `counted`: the fingerprint of each input (by name) an earlier count of the
    run read; an input read otherwise now is InputChanged."""
    start = time.monotonic()
    if not isinstance(data, Inputs):
        data = find_inputs(data, config.glob, exclude=(location(counts_dir),))
    split = split_shards(data.shards, config)
    tasks = [
        CountTask(
            s.path,
            s.name,
            location(counts_dir) / output_name(s.name),
            config,
            split,
            pattern,
            (counted or {}).get(s.name),
        )
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
    return ShardStageResult.of("count", results, time.monotonic() - start, not_read=data.not_read)
