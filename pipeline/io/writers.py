"""Atomic writers: everything is written under a temporary name in the
destination folder and renamed into place, so a crash never leaves a
half-written file under a final name."""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import WriteError

TMP_MARK = ".tmp-"


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it to `path` on success.
    The temporary's name is unique to this call (pid and a random part), so two
    tasks never share one, and short enough for any output name we accept."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name[:200]}{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}")
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as e:
        # PyArrow's write errors name no file: name the output (disk full on
        # `tokens/a.parquet` says which disk).
        raise WriteError(f"{path}: cannot write ({os_reason(e)})") from None
    finally:
        tmp.unlink(missing_ok=True)


def os_reason(e: OSError) -> str:
    """What an OSError says, in a few words (`No space left on device`)."""
    number = e.errno
    if number is None and (m := re.search(r"\[errno (\d+)\]|os error (\d+)", str(e))):
        number = int(m.group(1) or m.group(2))
    if number:
        return os.strerror(number)
    return e.strerror or " ".join(str(e).split()) or type(e).__name__


def is_temporary(name: str) -> bool:
    return name.startswith(".") and TMP_MARK in name


def remove_temporaries(folder: Path) -> list[Path]:
    """Remove every temporary under `folder`, at any depth: left by killed runs.
    Only called under the folder's lock (io/lock.py), when no other run can
    be writing there."""
    removed = []
    for root, _, files in os.walk(folder):
        for name in files:
            if is_temporary(name):
                p = Path(root) / name
                p.unlink(missing_ok=True)
                removed.append(p)
    return removed


def write_parquet(table: pa.Table, path: Path) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def write_json(obj: object, path: Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
