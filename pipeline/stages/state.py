"""What makes a finished output reusable by a rerun.

A shard output (count table, token shard) records in its Parquet metadata
the fingerprint of its input shard, the options it depends on and its own
result (documents, tokens, skips); once it is in place, a state file beside
it records its sha256. A rerun keeps it when it exists under its final name
(writes are atomic, so it is complete), the recorded input and options equal
the current ones and the file still has the recorded sha256 (a file changed
or damaged since is redone, never certified); otherwise, or with --force, it
is redone.

Single-step outputs (counts.parquet, tokenizer.json) have a small state file
beside them, written after the output: the key they were made from and the
output's own sha256.
"""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.config import Config
from pipeline.io.files import file_sha256, parquet_json_metadata
from pipeline.io.metadata import STATE
from pipeline.io.writers import write_json

# Bumped when the readers change what a shard's documents are (2: blank .txt
# lines are no documents), so outputs made by an older reader are redone.
READER_VERSION = 2


def count_key(config: Config) -> dict:
    """The options a count table depends on."""
    return {
        "stage": "count",
        "reader": READER_VERSION,
        "mode": config.mode,
        "pattern": config.pattern,
        "lowercase": config.lowercase,
        "text_column": config.text_column,
    }


def encode_key(config: Config, tokenizer_sha256: str) -> dict:
    """The options a token shard depends on."""
    return {
        "stage": "encode",
        "reader": READER_VERSION,
        "text_column": config.text_column,
        "eos": config.eos,
        "tokenizer_sha256": tokenizer_sha256,
    }


def shard_state(source: dict, key: dict, result: dict) -> bytes:
    """The metadata value recorded in a shard output."""
    return json.dumps(
        {"input": source, "key": key, "result": result}, sort_keys=True, ensure_ascii=False
    ).encode()


def reusable_shard(out: Path, source: dict, key: dict, config: Config) -> dict | None:
    """The recorded result of `out` if it can be kept, else None."""
    if config.force or not unchanged_since_written(out):
        return None
    state = parquet_json_metadata(out, STATE)
    if not isinstance(state, dict) or state.get("input") != source or state.get("key") != key:
        return None
    result = state.get("result") or {}
    # A shard that had skipped documents is redone under --on-error fail, so it fails.
    if result.get("skipped") and config.on_error != "skip":
        return None
    return result


def state_file(out: Path) -> Path:
    out = Path(out)
    return out.with_name(f".{out.name}.state.json")


def record_output(out: Path) -> str:
    """Record a shard output's sha256 once it is in place; returns it."""
    sha = file_sha256(out)
    write_json({"sha256": sha}, state_file(out))
    return sha


def unchanged_since_written(out: Path) -> bool:
    """Whether `out` still has the sha256 recorded when it was written."""
    try:
        recorded = json.loads(state_file(out).read_text(encoding="utf-8"))
        return isinstance(recorded, dict) and recorded.get("sha256") == file_sha256(out)
    except (OSError, ValueError, RecursionError):
        return False


def reusable_file(out: Path, key: dict, force: bool = False) -> bool:
    """Whether single-step output `out` was made from `key` and is unchanged since
    (never with `force`)."""
    out = Path(out)
    if force or not out.is_file():
        return False
    try:
        state = json.loads(state_file(out).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    if not isinstance(state, dict):
        return False
    return state.get("key") == key and state.get("sha256") == file_sha256(out)


def record_file(out: Path, key: dict) -> None:
    write_json({"key": key, "sha256": file_sha256(out)}, state_file(out))
