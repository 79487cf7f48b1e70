"""Fingerprints of files (size, sha256) and the key-value metadata of Parquet
files: what resumable stages and `verify` compare; and `hashed_read`, a
stage's read of an input that hashes the bytes as the reader reads them."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, cast

from tokenmill.errors import InputChanged, StoreError, TokenmillError, one_line
from tokenmill.io.storage import (
    AnyPath,
    fence,
    identity,
    location,
    open_file,
    open_read,
    parquet_file,
    regular_file,
    store_errors,
    tapped,
    unreachable,
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
    fence(path, "read")  # under a remote OUT this run holds: io/lock.py
    regular_file(path)
    try:
        return path.read_bytes()
    except OSError as e:
        if (cause := unreachable(path, e)) is not None:
            raise StoreError(f"{path}: cannot read {what} ({one_line(cause)})") from None
        # An object store's errors carry no strerror: their message says why,
        # but a missing object's is its own name.
        missing = isinstance(e, FileNotFoundError) and os.strerror(errno.ENOENT)
        why = e.strerror or missing or one_line(e)
        raise TokenmillError(f"{path}: cannot read {what} ({why})") from None


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
    except TokenmillError:  # a store's failure (a ValueError too) is no missing file
        raise
    except (OSError, ValueError):
        return None


def parquet_footer(path: AnyPath) -> tuple[int, dict[bytes, bytes]] | None:
    """(rows, key-value metadata) of a Parquet file's footer, or None when the
    file is missing, unreadable or no Parquet."""
    try:
        with parquet_file(location(path)) as pf:
            return pf.metadata.num_rows, pf.metadata.metadata or {}
    except TokenmillError:  # a store's failure (a ValueError too) is no missing file
        raise
    except (OSError, ValueError):
        return None


# A reader that jumps ahead by more than this beyond what it asks for (Parquet
# and Arrow IPC read their footer first) leaves the bytes between to the end
# of the read; smaller gaps (another column's chunk) are hashed on the way.
SKIP_BYTES = 1 << 20


@contextmanager
def hashed_read(path: AnyPath, name: str, stage: str) -> Iterator[HashedRead]:
    """A stage's read of input `path` (recorded as `name`): every open of it in
    the block, in this thread, reads one open file whose bytes are hashed as the
    reader reads them, so the sha256 is of the bytes the stage's outputs were
    made from and costs no read of its own (but of what the reader skips).
    `HashedRead.fingerprint()` ends it; InputChanged if the file changed while
    it was read."""
    read = HashedRead(location(path), name, stage)
    try:
        with tapped(read.path, read):
            yield read
    finally:
        read.close()


class HashedRead:
    """The first `hashed` bytes of a file, hashed in order: a read that starts
    at or before that point adds what it brings past it; one that jumps ahead a
    little hashes the gap first; the rest is hashed at the end."""

    def __init__(self, path: AnyPath, name: str, stage: str):
        self.path, self.name, self.stage = path, name, stage
        try:
            self.before = identity(path)
        except FileNotFoundError:
            # find_inputs listed it: it was removed (or renamed away) since.
            raise InputChanged(f"{path}: removed during the run; rerun") from None
        self.hashed = 0
        self._sha = hashlib.sha256()
        self._files: dict[str, IO[bytes]] = {}  # open file by storage cache type
        self._fingerprint: dict | None = None

    def open(self, cache: str) -> IO[bytes]:
        """A file object of its own position over the shared open file (storage.Tap)."""
        if cache not in self._files:
            self._files[cache] = open_file(self.path, cache)
        # A _View is the reading part of IO[bytes], all that its readers use.
        return cast("IO[bytes]", _View(self, self._files[cache]))

    def saw(self, offset: int, data: bytes) -> None:
        """`data`, read at `offset` by a reader."""
        end = offset + len(data)
        if end <= self.hashed or offset - self.hashed > len(data) + SKIP_BYTES:
            return
        if offset > self.hashed:
            self._hash_to(offset)
        self._sha.update(memoryview(data)[self.hashed - offset :])
        self.hashed = end

    def _hash_to(self, end: int | None) -> None:
        """Hash on up to `end` (None: the end of the file)."""
        if not self._files:
            self.open("readahead")
        f = next(iter(self._files.values()))
        while end is None or self.hashed < end:
            f.seek(self.hashed)
            block = f.read(HASH_BLOCK if end is None else min(HASH_BLOCK, end - self.hashed))
            if not block:
                break
            self._sha.update(block)
            self.hashed += len(block)

    def fingerprint(self) -> dict:
        """{"path": name, "bytes", "sha256"} of the file as it was read (the rest
        of it hashed now); InputChanged if it changed while it was read."""
        if self._fingerprint is None:
            with store_errors(self.path):
                self._hash_to(None)
            after = self._identity()
            if after is None or after != self.before or after[1] != self.hashed:
                raise InputChanged(f"{self.path}: changed while {self.stage} read it; rerun")
            sha256 = self._sha.hexdigest()
            _known[after] = sha256
            self._fingerprint = {"path": self.name, "bytes": self.hashed, "sha256": sha256}
        return self._fingerprint

    def changed(self) -> bool:
        """Whether the file's size, mtime or inode (an object's ETag) changed since
        the read began."""
        return self._identity() != self.before

    def _identity(self) -> tuple | None:
        try:
            return identity(self.path)
        except FileNotFoundError:
            return None  # removed (or renamed away) since

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


class _View(io.RawIOBase):
    """One open of a hashed read: reads at its own position, shown to the read."""

    def __init__(self, read: HashedRead, file: IO[bytes]):
        self.read_, self.file, self.pos = read, file, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_END:
            offset += self.file.seek(0, io.SEEK_END)
        elif whence == io.SEEK_CUR:
            offset += self.pos
        self.pos = offset
        return offset

    def tell(self) -> int:
        return self.pos

    def read(self, size: int | None = -1) -> bytes:
        self.file.seek(self.pos)
        data = self.file.read() if size is None or size < 0 else self.file.read(size)
        self.read_.saw(self.pos, data)
        self.pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read()

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
