"""Fingerprints of files (size, sha256) and the key-value metadata of Parquet
files: what resumable stages and `verify` compare."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tokenmill.errors import TokenmillError, one_line
from tokenmill.io.storage import (
    AnyPath,
    identity,
    location,
    open_read,
    parquet_file,
    store_errors,
)

HASH_BLOCK = 4 << 20
# sha256 by storage.identity (local: path, size, mtime, inode; an object: URL,
# size, ETag): count and encode of one run hash each input once.
_known: dict[tuple, str] = {}


def read_json(path: AnyPath, what: str) -> Any:
    """Parse a JSON file; a one-line TokenmillError names the file otherwise."""
    return parse_json(read_bytes(path, what), path)


def read_bytes(path: AnyPath, what: str) -> bytes:
    path = location(path)
    try:
        return path.read_bytes()
    except OSError as e:
        # An object store's errors carry no strerror: their message says why.
        raise TokenmillError(f"{path}: cannot read {what} ({e.strerror or one_line(e)})") from None


def parse_json(data: bytes, path: AnyPath | str) -> Any:
    """JSON from a file's UTF-8 bytes; a one-line TokenmillError names the file otherwise."""
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise TokenmillError(f"{path}: not valid JSON ({e})") from None
    except RecursionError:
        raise TokenmillError(f"{path}: not valid JSON (nested too deeply)") from None


def file_sha256(path: AnyPath) -> str:
    h = hashlib.sha256()
    with store_errors(path), open_read(path) as f:
        while block := f.read(HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def known_sha256(path: AnyPath) -> tuple[tuple, str]:
    """(storage.identity, sha256) of a file, hashed once per identity: a file
    one stage writes and records is not read again to key the next stage.
    Not for checking a file against its record (that must read it again)."""
    path = location(path)
    key = identity(path)
    if key not in _known:
        _known[key] = file_sha256(path)
    return key, _known[key]


def fingerprint(path: AnyPath, name: str | None = None) -> dict:
    """{"path", "bytes", "sha256"} of a file; `name` is the path recorded."""
    path = location(path)
    key, sha256 = known_sha256(path)
    return {
        "path": name if name is not None else str(path),
        "bytes": key[1],
        "sha256": sha256,
    }


def parquet_json_metadata(path: AnyPath, key: bytes) -> object | None:
    """The JSON value stored under `key` in a Parquet file's metadata, or None
    when the file is missing, unreadable or has no such key."""
    try:
        with parquet_file(location(path)) as pf:
            meta = pf.metadata.metadata or {}
        return json.loads(meta[key]) if key in meta else None
    except (OSError, ValueError):
        return None
