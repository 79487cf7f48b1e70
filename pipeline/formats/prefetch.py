"""A .tiktoken file's native table, built while the command's modules import.

A `tokenmill encode` process spends its first ~0.15 s importing PyArrow and
numpy, on one core; parsing a 200k-token ranks file and deriving its merges
(`_native.Vocabulary.from_tiktoken`, ~0.1 s) needs neither, and runs without
the GIL. `start(path)`, called as soon as a command knows its tokenizer
file, reads the file and begins that work on a thread; `tiktoken.load`
then `take`s the table, which it uses only when the bytes it read itself
are the very bytes the table was built from. Any other case (no start, a
remote or non-.tiktoken path, an unreadable or non-canonical file, a file
changed in between) returns None and the loader does the work as before,
so the result never depends on whether this ran.

Imports nothing but the native core, so that starting costs ~2 ms.
"""

from __future__ import annotations

import os
import threading

from pipeline import _native

# (the bytes read, the thread building the table, where it puts the table)
_pending: tuple[bytes, threading.Thread, list] | None = None
_lock = threading.Lock()


def start(path: str | os.PathLike) -> None:
    """Begin building the table of the local .tiktoken file `path`, if it is one."""
    global _pending
    name = os.fspath(path)
    if not name.endswith(".tiktoken") or "://" in name:
        return
    try:
        with open(name, "rb") as f:
            data = f.read()
    except OSError:
        return  # the loader reads it again, and names the fault
    built: list = []

    def build() -> None:
        try:
            built.append(_native.Vocabulary.from_tiktoken(data))
        except _native.NativeError:
            pass  # not canonical: the loader's reference reader takes it

    thread = threading.Thread(target=build, name="tokenmill-vocabulary", daemon=True)
    thread.start()
    with _lock:
        _pending = (data, thread, built)


def take(data: bytes) -> _native.Vocabulary | None:
    """The table `start` built, if it was built from exactly `data`; once."""
    global _pending
    with _lock:
        pending, _pending = _pending, None
    if pending is None:
        return None
    read, thread, built = pending
    thread.join()
    return built[0] if built and read == data else None
