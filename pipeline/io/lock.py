"""One run per output folder: an exclusive flock on FOLDER/.tokenmill.lock.

The lock is the kernel's, so it goes with the process: a killed run leaves
the file but not the lock, and the next run takes it at once. The file holds
who took it last (pid, host, command, start time, DATA), which names the
holder when a second run is refused and, after a killed first run that wrote
no manifest, which DATA the folder's outputs came from.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import TokenmillError

LOCK = ".tokenmill.lock"


def last_holder(folder: Path) -> dict:
    """What the lock file says of the run that took it last ({} if nothing)."""
    try:
        holder = json.loads((Path(folder) / LOCK).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return holder if isinstance(holder, dict) else {}


@dataclass
class HeldLock:
    fd: int
    folder: Path
    previous: dict  # what the lock file said of the run that took it last

    def record(self, data: Path | None) -> None:
        """Name this run in the lock file, once it is sure to write to the folder
        (a refused run leaves the previous holder's record)."""
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": sys.argv,
            "data": str(Path(data).resolve()) if data is not None else None,
        }
        try:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, (json.dumps(record) + "\n").encode(), 0)
        except OSError as e:
            raise TokenmillError(f"{self.folder / LOCK}: cannot write ({e.strerror})") from None


@contextmanager
def output_lock(folder: Path) -> Iterator[HeldLock]:
    """Hold FOLDER's lock for the block; refuse at once, naming the holder, if
    another process holds it."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise TokenmillError(f"{folder}: exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise TokenmillError(f"{folder}: cannot create the output folder ({e.strerror})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = last_holder(folder)
            who = f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}"
            if holder.get("started"):
                who += f", started {holder['started']}"
            raise TokenmillError(
                f"{folder}: in use by another tokenmill run ({who}); wait for it to end"
            ) from None
        yield HeldLock(fd, folder, last_holder(folder))
    finally:
        os.close(fd)  # releases the flock
