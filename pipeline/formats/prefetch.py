"""A .tiktoken file's native table and encoder, built while the command's
modules import.

A `tokenmill encode` process spends its first ~0.15 s importing PyArrow and
numpy, on one core; parsing a 200k-token ranks file and deriving its merges
(`_native.Vocabulary.from_tiktoken`, ~0.1 s), then building the encoder
(`_native.Encoder.from_vocabulary`, ~0.04 s) and writing the tables the
tokenizer's sha256 is taken of (`file_tables`), need neither, and run
without the GIL. `start(path, pattern)`, called as soon as a command knows its
tokenizer file, reads the file and begins that work on a thread;
`tiktoken.load` then `take`s the table, which it uses only when the bytes it
read itself are the very bytes the table was built from, and the encoder
only for the same pattern. Any other case (no start, a remote or
non-.tiktoken path, an unreadable or non-canonical file, a file changed in
between, another pattern) gives None and the loader does the work as
before, so the result never depends on whether this ran.

Imports nothing but the native core and the pattern presets' names, so that
starting costs ~2 ms.
"""

from __future__ import annotations

import os
import threading

from pipeline import _native
from pipeline.formats import regex


class _Pending:
    def __init__(self, data: bytes, pattern: str | None) -> None:
        self.data = data
        self.pattern = pattern
        self.table: _native.Vocabulary | None = None
        self.encoder: _native.Encoder | None = None
        self.thread = threading.Thread(target=self.build, name="tokenmill-vocabulary", daemon=True)

    def build(self) -> None:
        try:
            self.table = _native.Vocabulary.from_tiktoken(self.data)
        except _native.NativeError:
            return  # not canonical: the loader says why
        # The tokenizer's sha256 needs the file's tables as JSON (~15 ms for
        # 200k tokens), which the table keeps once written: written beside
        # the encoder build, on the core the imports leave free at the end.
        tables = threading.Thread(target=self.table.file_tables, name="tokenmill-file-tables")
        tables.start()
        try:
            if self.pattern is not None:
                self.encoder = _native.Encoder.from_vocabulary(
                    self.pattern, self.table, whole_words=True
                )
        except _native.NativeError:
            pass  # a pattern the core refuses: the loader says why
        finally:
            tables.join()


_pending: _Pending | None = None
_lock = threading.Lock()


def start(path: str | os.PathLike, pattern: str | None = None) -> None:
    """Begin building the table of the local .tiktoken file `path`, if it is
    one, and its encoder (with whole-word lookup, as `tiktoken.load` makes
    it) for `pattern` (a preset name or a regex) if given."""
    global _pending
    name = os.fspath(path)
    if not name.endswith(".tiktoken") or "://" in name:
        return
    try:
        with open(name, "rb") as f:
            data = f.read()
    except OSError:
        return  # the loader reads it again, and names the fault
    pending = _Pending(data, None if pattern is None else regex.preset_name(pattern) or pattern)
    pending.thread.start()
    with _lock:
        _pending = pending


def discard() -> None:
    """Wait for a build that nothing took (the command failed before loading):
    a thread still in the native core when the interpreter exits would be
    stopped mid-call."""
    global _pending
    with _lock:
        pending, _pending = _pending, None
    if pending is not None:
        pending.thread.join()


def take(data: bytes, pattern: str) -> tuple[_native.Vocabulary | None, _native.Encoder | None]:
    """(the table `start` built, if from exactly `data`; its encoder, if also
    for `pattern`, a preset name or regex as `tiktoken.load` resolves it); once."""
    global _pending
    with _lock:
        pending, _pending = _pending, None
    if pending is None:
        return None, None
    pending.thread.join()
    if pending.table is None or pending.data != data:
        return None, None
    return pending.table, pending.encoder if pending.pattern == pattern else None
