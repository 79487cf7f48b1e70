"""The part of a per-shard task that count and encode share: keep a finished
output whose input and options are unchanged, else write it again, hashing
the input as it is read, and under --on-error skip turn bad documents and
unreadable files into listed skips. An input that changes while it is read,
or between count's read and encode's, fails the run (InputChanged)."""

from __future__ import annotations

from collections.abc import Callable, Sized
from pathlib import Path

import pyarrow as pa

from tokenmill.config import Config
from tokenmill.errors import InputChanged, StoreError, TokenmillError, WriteError, one_line
from tokenmill.io.files import hashed_read
from tokenmill.io.readers import OnSkip, skipped_file_documents
from tokenmill.io.storage import AnyPath, delete, location, parquet_file, size
from tokenmill.io.writers import atomic_path, check_target
from tokenmill.stages.state import record_output, reusable_shard, shard_state, state_file

# write(tmp, on_skip, stats, state) -> result: reads the shard (passing on_skip
# and stats to the reader), writes the output to tmp with `state(result)` in
# its Parquet metadata under io.metadata.STATE, and returns result (without skips).
# `state(result, key)`: the state of another output made from the same read.
Writer = Callable[[Path, OnSkip | None, dict, Callable[..., bytes]], dict]


def output_record(out: AnyPath, sha256: str) -> dict:
    try:
        with parquet_file(out) as pf:
            rows = pf.metadata.num_rows
    except pa.ArrowException as e:
        # What was just written does not read back as it was written: a store
        # that reports another size (or a disk that lost it) is no bad input.
        raise WriteError(f"{out}: cannot read back what was written ({one_line(e)})") from None
    return {"file": str(out), "rows": rows, "bytes": size(out), "sha256": sha256}


def shard_task(
    shard: AnyPath,
    name: str,
    out: AnyPath,
    config: Config,
    key: dict,
    write: Writer,
    counted: dict | None = None,
) -> dict:
    """Run (or keep) one shard's output. The summary: the writer's result,
    "skipped" (a list), "shard", "input" (fingerprint of what was read), "output"
    (file, rows, sha256; None when the whole file was skipped) and "reused".
    `counted`: the fingerprint count read of this shard earlier in the run; an
    input read otherwise now is InputChanged, and no output is kept of it."""
    out = location(out)
    stage = key["stage"]
    kept = reusable_shard(out, shard, name, key, config)
    if kept is not None:
        result, sha256, source = kept
        check_counted(shard, counted, source, stage)
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

    with hashed_read(shard, name, stage) as read:

        def state(result: dict, other: dict | None = None) -> bytes:
            # Called once the writer has read the shard, before its output is in place.
            source = check_counted(shard, counted, read.fingerprint(), stage)
            return shard_state(source, other or key, {**result, "skipped": skipped})

        stats = {"rows": 0}
        try:
            with atomic_path(out) as tmp:
                result = write(tmp, on_skip if config.on_error == "skip" else None, stats, state)
        except TokenmillError as e:
            if isinstance(e, WriteError | StoreError | InputChanged):
                raise  # never the file's fault: never a skip
            if read.changed():  # the likely cause of a file that reads as broken
                raise InputChanged(f"{shard}: changed while {stage} read it; rerun") from e
            if config.on_error != "skip":
                raise
            delete(out)  # an output of an earlier version of the file
            source = check_counted(shard, counted, read.fingerprint(), stage)
            # The documents it is known to hold: exact from a Parquet footer, else those
            # read before it broke ("lower_bound": True).
            known = skipped_file_documents(shard, stats["rows"])
            # The skip names the file: its reason says what is wrong, as a row's does.
            reason = str(e).removeprefix(f"{shard}: ")
            skip = {"shard": name, "row": None, "reason": reason, **known}
            return {
                "shard": name,
                "input": source,
                "output": None,
                "reused": False,
                "skipped": [skip],
            }
        source = read.fingerprint()
    return {
        **result,
        "skipped": skipped,
        "shard": name,
        "input": source,
        "output": output_record(out, record_output(out)),
        "reused": False,
    }


def check_counted(shard: AnyPath, counted: dict | None, source: dict, stage: str) -> dict:
    """`source`, the fingerprint `stage` read, if count read the same earlier in
    the run; else InputChanged: outputs of one content and of another never mix."""
    if counted is not None and counted["sha256"] != source["sha256"]:
        raise InputChanged(
            f"{shard}: changed during the run (read by count as sha256 {counted['sha256']}, "
            f"by {stage} as {source['sha256']}); rerun"
        )
    return source


def check_outputs(outputs: list[AnyPath]) -> None:
    """Refuse, before any shard is read, a folder, FIFO or device where a
    shard's output or its state file goes: found when written, it ended the
    stage after the other shards."""
    for out in outputs:
        check_target(out)
        check_target(state_file(out))


def split_shards(shards: Sized, config: Config) -> bool:
    """Whether each task should split its shard's batches over the native
    thread pool: only when shards are fewer than workers. Otherwise the shards
    keep every core busy, and a task working on its own thread is less work."""
    return len(shards) < config.n_workers


def shard_size(task) -> int:
    """A per-shard task's expected work, for `run_tasks(size=...)`."""
    return size(task.shard)
