"""Atomic writers: a crash never leaves a half-written file under a final name.

Locally everything is written under a temporary name in the destination
folder and renamed into place. Object stores have no rename: an output for a
URL is written to a local scratch file and then uploaded under its final key
in one PUT (a multipart upload for large files), which the store makes
visible only once complete, so no temporary object ever exists there
(io/storage.py)."""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from tokenmill.errors import TokenmillError, WriteError, one_line
from tokenmill.io import storage
from tokenmill.io.storage import TMP_MARK, AnyPath, is_remote, location

if TYPE_CHECKING:
    from upath import UPath


@contextmanager
def atomic_path(path: AnyPath) -> Iterator[Path]:
    """Yield a local temporary path to write `path` into; on success rename it
    to `path`, or upload it when `path` is remote. The temporary's name is
    unique to this call (pid and a random part), so two tasks never share one,
    and short enough for any output name we accept."""
    path = location(path)
    if is_remote(path):
        with _remote_atomic_path(path) as tmp:
            yield tmp
        return
    check_target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name[:200]}{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}")
    try:
        yield tmp
        # Only a worker's may fail: its driver, holding OUT's lock, is gone.
        storage.fence(path, "written")
        os.replace(tmp, path)
    except OSError as e:
        # PyArrow's write errors name no file: name the output (disk full on
        # `tokens/a.parquet` says which disk).
        raise WriteError(f"{path}: cannot write ({os_reason(e)})") from None
    finally:
        # On a read-only folder even the unlink of a file never made fails (not
        # with ENOENT), which would hide the error that names the output.
        with suppress(OSError):
            tmp.unlink(missing_ok=True)


def check_target(path: AnyPath) -> None:
    """Refuse, in one line naming it, a local path where a file is to be
    written that holds something else (a folder, a FIFO, a device) or lies
    under a file: a write would replace it or fail after the work, and a
    rerun that reads it first to reuse it could block. A link is checked
    by what it points to (reuse reads through it); a write replaces the
    link, never its target."""
    if is_remote(path):
        return  # an object store holds objects only
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return  # new, or a dangling link
    except NotADirectoryError:
        above = next(p for p in path.parents if os.path.exists(p))
        raise WriteError(
            f"{above}: a file where tokenmill writes a folder (for {path}); move it away"
        ) from None
    if not stat.S_ISREG(mode):
        raise not_a_file(path)


def check_folder(path: AnyPath) -> None:
    """Refuse, in one line naming it, a local file where tokenmill makes the
    folder `path` (or a file above it): its writes there would fail after the
    work. For a folder whose files' names depend on the options (a layout's)."""
    if is_remote(path):
        return
    path = Path(path)
    above = next((p for p in (path, *path.parents) if os.path.exists(p)), None)
    if above is not None and not os.path.isdir(above):
        wanted = "" if above == path else f" (for {path})"
        raise WriteError(f"{above}: a file where tokenmill writes a folder{wanted}; move it away")


def not_a_file(path: AnyPath) -> WriteError:
    """The one line for a FIFO, socket, device or folder where tokenmill writes a file."""
    kind = "a folder" if not is_remote(path) and os.path.isdir(path) else "not a regular file"
    return WriteError(f"{path}: {kind}, where tokenmill writes a file; move it away")


@contextmanager
def _remote_atomic_path(path: UPath) -> Iterator[Path]:
    tmp = storage.scratch_file(path)
    try:
        try:
            yield tmp
        except OSError as e:
            raise WriteError(f"{path}: cannot write ({os_reason(e)})") from None
        try:
            storage.upload(tmp, path)
        except TokenmillError:
            raise
        except Exception as e:  # noqa: BLE001 (the store's client raises its own kinds)
            # The store's own words ("Access Denied", "NoSuchBucket") say more
            # than the errno s3fs maps them to.
            raise WriteError(f"{path}: cannot upload ({one_line(e)})") from None
    finally:
        tmp.unlink(missing_ok=True)


def os_reason(e: OSError) -> str:
    """What an OSError says, in a few words (`No space left on device`)."""
    number = e.errno
    if number is None and (m := re.search(r"\[errno (\d+)\]|os error (\d+)", str(e))):
        number = int(m.group(1) or m.group(2))
    if number:
        return os.strerror(number)
    return e.strerror or one_line(e)


def is_temporary(name: str) -> bool:
    """Named as atomic_path names its temporaries: `.NAME.tmp-*`, NAME not empty."""
    return name.startswith(".") and name.find(TMP_MARK, 2) > 0


def remove_leftovers(path: Path) -> list[Path]:
    """Remove the temporaries a killed write of the single file `path` left
    beside it (atomic_path's `.NAME.tmp-PID-HEX`), unless their process still
    runs; the removed, for the command to name. No lock covers a single-file
    output's folder, so only this exact name is touched."""
    pattern = re.compile(rf"\.{re.escape(path.name[:200])}{re.escape(TMP_MARK)}[^-]+-[0-9a-f]{{8}}")
    removed = []
    with suppress(OSError):
        for p in path.parent.iterdir():
            pid = storage.temporary_pid(p.name) if pattern.fullmatch(p.name) else None
            if pid is not None and not storage.process_runs(pid) and p.is_file():
                p.unlink(missing_ok=True)
                removed.append(p)
    return removed


def remove_temporaries(
    folder: AnyPath, where: Callable[[str], bool] | None = None
) -> list[AnyPath]:
    """Remove every temporary under `folder`, at any depth: left by killed runs.
    Only called under the folder's lock (io/lock.py), when no other run can
    be writing there. tokenmill writes no temporary into a remote folder, but
    another tool (or a local copy synced up) may have; there, `where` (of a
    key's name relative to `folder`) says which are in tokenmill's places."""
    removed = []
    if is_remote(folder):
        # A killed run's leftovers are elsewhere: its scratch files on this
        # machine and its unfinished multipart uploads.
        storage.remove_dead_scratch()
        storage.abort_uploads(folder)
        for name, p in storage.walk_files(folder):
            if is_temporary(p.name) and (where is None or where(name)):
                storage.delete(p)
                removed.append(p)
        return removed
    for root, _, files in os.walk(folder):
        for name in files:
            if is_temporary(name):
                p = Path(root) / name
                p.unlink(missing_ok=True)
                removed.append(p)
    return removed


def write_json(obj: object, path: AnyPath) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
