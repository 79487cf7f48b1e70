"""The part of a per-shard task that count and encode share: keep a finished
output whose input and options are unchanged, else write it again, and under
--on-error skip turn bad documents and unreadable files into listed skips."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tokenmill.config import Config
from tokenmill.errors import StoreError, TokenmillError, WriteError
from tokenmill.io.files import fingerprint
from tokenmill.io.readers import OnSkip, skipped_file_documents
from tokenmill.io.storage import AnyPath, delete, location, parquet_file, size
from tokenmill.io.writers import atomic_path
from tokenmill.stages.state import record_output, reusable_shard, shard_state

# write(tmp, on_skip, stats, state) -> result: reads the shard (passing on_skip
# and stats to the reader), writes the output to tmp with `state(result)` in
# its Parquet metadata under io.metadata.STATE, and returns result (without skips).
Writer = Callable[[Path, OnSkip | None, dict, Callable[[dict], bytes]], dict]


def output_record(out: AnyPath, sha256: str) -> dict:
    with parquet_file(out) as pf:
        rows = pf.metadata.num_rows
    return {"file": str(out), "rows": rows, "bytes": size(out), "sha256": sha256}


def shard_task(shard: Path, name: str, out: Path, config: Config, key: dict, write: Writer) -> dict:
    """Run (or keep) one shard's output. The summary: the writer's result,
    "skipped" (a list), "shard", "input" (fingerprint), "output" (file, rows,
    sha256; None when the whole file was skipped) and "reused"."""
    out = location(out)
    source = fingerprint(shard, name)
    kept = reusable_shard(out, source, key, config)
    if kept is not None:
        result, sha256 = kept
        return {
            **result,
            "shard": name,
            "input": source,
            "output": output_record(out, sha256),
            "reused": True,
        }
    skipped: list[dict] = []

    def on_skip(skip: dict) -> None:
        skipped.append({"shard": name, **skip})

    def state(result: dict) -> bytes:
        return shard_state(source, key, {**result, "skipped": skipped})

    stats = {"rows": 0}
    try:
        with atomic_path(out) as tmp:
            result = write(tmp, on_skip if config.on_error == "skip" else None, stats, state)
    except TokenmillError as e:
        if config.on_error != "skip" or isinstance(e, WriteError | StoreError):
            raise
        delete(out)  # an output of an earlier version of the file
        # The documents it is known to hold: exact from a Parquet footer, else those
        # read before it broke ("lower_bound": True).
        known = skipped_file_documents(shard, stats["rows"])
        skip = {"shard": name, "row": None, "reason": str(e), **known}
        return {"shard": name, "input": source, "output": None, "reused": False, "skipped": [skip]}
    return {
        **result,
        "skipped": skipped,
        "shard": name,
        "input": source,
        "output": output_record(out, record_output(out)),
        "reused": False,
    }


def split_shards(shards: list[Path], config: Config) -> bool:
    """Whether each task should split its shard's batches over the native
    thread pool: only when shards are fewer than workers. Otherwise the shards
    keep every core busy, and a task working on its own thread is less work."""
    return len(shards) < config.n_workers


def shard_size(task) -> int:
    """A per-shard task's expected work, for `run_tasks(size=...)`."""
    return size(task.shard)
