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

import hashlib
import json

from tokenmill.config import Config
from tokenmill.io.files import file_sha256, fingerprint, known_sha256, parquet_json_metadata
from tokenmill.io.metadata import STATE
from tokenmill.io.storage import AnyPath, doing, location, size, store_errors
from tokenmill.io.writers import write_json

# Bumped when the readers change what a shard's documents are (2: blank .txt
# lines are no documents), so outputs made by an older reader are redone.
READER_VERSION = 2


def digest(value: object) -> str:
    """A key's value as one sha256 (its JSON, keys sorted): what an output
    records of what it was made from, when that is too long to hold whole."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def count_key(config: Config, pattern: str | None = None) -> dict:
    """The options a count table depends on (`pattern`: one other than config's)."""
    return {
        "stage": "count",
        "reader": READER_VERSION,
        "mode": config.mode,
        "pattern": pattern or config.pattern,
        "lowercase": config.lowercase,
        "text_column": config.text_column,
        "txt_unit": config.txt_unit,
    }


def encode_key(config: Config, tokenizer_sha256: str, row_ids: int | None = None) -> dict:
    """The options a token shard depends on. `row_ids`: how a long document's
    ids are cut into rows (stages/tokens.py), given when not the default, so
    that shards written before it counted are kept."""
    return {
        "stage": "encode",
        "reader": READER_VERSION,
        "text_column": config.text_column,
        "txt_unit": config.txt_unit,
        "eos": config.eos,
        "val_fraction": config.val_fraction,
        "tokenizer_sha256": tokenizer_sha256,
        # [mix] column: the shards carry each document's value in it
        **({"source_column": config.mix.column} if config.mix and config.mix.column else {}),
        **({"row_ids": row_ids} if row_ids is not None else {}),
    }


def shard_state(source: dict, key: dict, result: dict) -> bytes:
    """The metadata value recorded in a shard output."""
    return json.dumps(
        {"input": source, "key": key, "result": result}, sort_keys=True, ensure_ascii=False
    ).encode()


def reusable_shard(
    out: AnyPath, shard: AnyPath, name: str, key: dict, config: Config
) -> tuple[dict, str, dict] | None:
    """(the recorded result of `out`, its sha256, the fingerprint of input `shard`
    recorded as `name`) if `out` can be kept, else None. The input is hashed
    only when it has the size recorded: an output made anew hashes it as it
    reads it (files.hashed_read)."""
    if config.force:
        return None
    state = parquet_json_metadata(out, STATE)
    if not isinstance(state, dict) or state.get("key") != key:
        return None
    recorded = state.get("input")
    if not isinstance(recorded, dict) or recorded.get("bytes") != size(shard):
        return None
    source = fingerprint(shard, name)
    if recorded != source:
        return None
    result = state.get("result") or {}
    # A shard that had skipped documents is redone under --on-error fail, so it fails.
    if result.get("skipped") and config.on_error != "skip":
        return None
    sha256 = verified_sha256(out)
    return None if sha256 is None else (result, sha256, source)


def state_file(out: AnyPath) -> AnyPath:
    out = location(out)
    return out.with_name(f".{out.name}.state.json")


def record_output(out: AnyPath) -> str:
    """Record a shard output's sha256 once it is in place; returns it."""
    with doing("read back its upload"):  # on a store: the write is not done yet
        sha = known_sha256(out)[1]
    write_json({"sha256": sha}, state_file(out))
    return sha


def recorded_state(out: AnyPath) -> dict:
    """What the state file beside `out` holds ({} when missing or unreadable)."""
    path = state_file(out)
    try:
        with store_errors(path):  # a store that fails is no missing state file
            state = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return {}
    return state if isinstance(state, dict) else {}


def verified_sha256(out: AnyPath) -> str | None:
    """The sha256 of `out` if it is still the one recorded when it was written
    (an object is read through again: its ETag is no sha256)."""
    recorded = recorded_state(out).get("sha256")
    if recorded is None or not location(out).is_file():
        return None
    sha = file_sha256(out)
    return sha if sha == recorded else None


def reusable_file(out: AnyPath, key: dict, force: bool = False) -> bool:
    """Whether single-step output `out` was made from `key` and is unchanged since
    (never with `force`)."""
    if force or recorded_state(out).get("key") != key:
        return False
    return verified_sha256(out) is not None


def record_file(out: AnyPath, key: dict, **facts) -> None:
    """Record single-step output `out` as made from `key`; `facts` are what
    making it found out, for a rerun that keeps it to tell again."""
    with doing("read back its upload"):
        sha = known_sha256(out)[1]
    write_json({"key": key, "sha256": sha, **facts}, state_file(out))
