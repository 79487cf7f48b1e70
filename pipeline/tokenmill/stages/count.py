"""count: one word-frequency table per input shard."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.config import Config
from tokenmill.executors import run_tasks
from tokenmill.io.arrow import text_bytes
from tokenmill.io.inputs import Inputs, find_inputs, output_name
from tokenmill.io.metadata import SOURCE, STATE
from tokenmill.io.readers import OnSkip, read_documents
from tokenmill.io.storage import AnyPath, delete, location
from tokenmill.io.writers import atomic_path
from tokenmill.stages.results import ShardStageResult
from tokenmill.stages.shards import (
    check_outputs,
    output_record,
    shard_size,
    shard_task,
    split_shards,
)
from tokenmill.stages.state import count_key, record_output
from tokenmill.tokenizer.core import word_tables


@dataclass(frozen=True)
class CountTask:
    shard: AnyPath
    name: str
    out: AnyPath
    config: Config
    split: bool = True  # see split_shards
    pattern: str | None = None  # another than config.pattern: superword tokens' stage 2
    counted: dict | None = None  # what a count earlier in the run read of the shard
    # (pattern, out) of more tables of the shard, counted from the same read
    also: tuple[tuple[str, AnyPath], ...] = ()


def write_count_table(table: pa.Table, path: Path, name: str, state: bytes) -> None:
    table = table.replace_schema_metadata({SOURCE: name.encode(), STATE: state})
    # Every word is distinct: dictionary pages would only cost time. Delta
    # encoding packs the sorted first keys and the small counts about as
    # tightly as LZ4 does, at a fraction of the cost of compressing. No
    # reader filters on statistics, and a word's min and max are copies
    # of the longest words: 1.2 GB to write one word of 200 MB.
    pq.write_table(
        table,
        path,
        use_dictionary=False,
        compression="none",
        write_statistics=False,
        column_encoding={"count": "DELTA_BINARY_PACKED", "first": "DELTA_BINARY_PACKED"},
    )


def count_shard(task: CountTask) -> dict:
    """The shard's count table, and with `task.also` each further table under
    "also" (a list of records like the first's)."""
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

        patterns = [task.pattern or c.pattern, *(pattern for pattern, _ in task.also)]
        tables = word_tables(documents(), c.mode, patterns, c.lowercase, parallel=task.split)
        also = []
        for (pattern, out), table in zip(task.also, tables[1:], strict=True):
            # In place before the first table is: a run killed between them
            # counts both again, as the first is then missing.
            mine = {**result, "words": table.num_rows}
            out = location(out)
            with atomic_path(out) as other:
                write_count_table(table, other, task.name, state(mine, count_key(c, pattern)))
            also.append({**mine, "output": output_record(out, record_output(out))})
        result["words"] = tables[0].num_rows
        write_count_table(tables[0], tmp, task.name, state(result))
        return {**result, "also": also} if also else result

    key = count_key(c, task.pattern)
    record = shard_task(task.shard, task.name, task.out, c, key, write, task.counted)
    if not task.also:
        return record
    also = record.pop("also", None)
    if also is not None:  # counted from the same read
        shared = {k: record[k] for k in ("skipped", "shard", "input", "reused")}
        return {**record, "also": [{**r, **shared} for r in also]}
    if record["output"] is None:  # the whole file skipped
        for _, out in task.also:
            delete(out)  # an output of an earlier version of the file
        return {**record, "also": [dict(record) for _ in task.also]}
    # The first table was kept: each other one is kept too, or counted alone.
    counted = record["input"]
    return {
        **record,
        "also": [
            count_shard(CountTask(task.shard, task.name, out, c, task.split, pattern, counted))
            for pattern, out in task.also
        ],
    }


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
    return run_counts(data, [(counts_dir, pattern)], config, counted)[0]


def run_counts(
    data: AnyPath | Inputs,
    tables: Sequence[tuple[AnyPath, str | None]],
    config: Config,
    counted: dict[str, dict] | None = None,
) -> list[ShardStageResult]:
    """`run_count` into each (folder, pattern) of `tables`, from one read of
    each input: a result per folder, in order, the first with the time of
    it all (the others' is 0, and their `read_with` "count")."""
    start = time.monotonic()
    if not isinstance(data, Inputs):
        exclude = tuple(location(folder) for folder, _ in tables)
        data = find_inputs(data, config.glob, exclude=exclude)
    split = split_shards(data.shards, config)
    (folder, pattern), *more = tables
    tasks = [
        CountTask(
            s.path,
            s.name,
            location(folder) / output_name(s.name),
            config,
            split,
            pattern,
            (counted or {}).get(s.name),
            tuple(
                (other or config.pattern, location(other_folder) / output_name(s.name))
                for other_folder, other in more
            ),
        )
        for s in data.shards
    ]
    check_outputs([out for t in tasks for out in (t.out, *(o for _, o in t.also))])
    results = run_tasks(
        count_shard,
        tasks,
        workers=config.n_workers,
        executor=config.executor,
        ray_address=config.ray_address,
        desc="count",
        size=shard_size,
    )
    seconds = time.monotonic() - start
    others = [[r.pop("also")[i] for r in results] for i in range(len(more))] if more else []
    first_result = ShardStageResult.of("count", results, seconds, not_read=data.not_read)
    return [first_result] + [
        ShardStageResult.of("count", r, 0.0, not_read=data.not_read, read_with="count")
        for r in others
    ]
