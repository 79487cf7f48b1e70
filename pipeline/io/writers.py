"""Atomic writers: everything is written under a temporary name in the
destination folder and renamed into place, so a crash never leaves a
half-written file under a final name."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it to `path` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove temporaries left in `folder` by processes that no longer run (a
    killed run); those of live processes are left alone."""
    folder = Path(folder)
    removed = []
    if not folder.is_dir():
        return removed
    for tmp in folder.glob(".*.tmp-*"):
        pid = tmp.name.rpartition(".tmp-")[2]
        if pid.isdigit() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_parquet(table: pa.Table, path: Path) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def write_json(obj: object, path: Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def arrow_buffers(arr: pa.Array) -> tuple[memoryview, memoryview, int, int]:
    """(offsets, data, start, length) of a large_string/large_binary array,
    the form in which the native core takes documents without copying."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    _, offsets, data = arr.buffers()
    return byte_view(offsets or bytes(8)), byte_view(data or b""), arr.offset, len(arr)


def byte_view(buf: pa.Buffer | bytes) -> memoryview:
    """An unsigned-byte view without a copy (Arrow buffers export signed bytes)."""
    return memoryview(buf).cast("B")
