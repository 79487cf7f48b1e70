"""A tokenizer file's native tables and encoder, built while the command's
modules import.

A `tokenmill encode` process spends its first ~0.1 s importing PyArrow and
numpy, on one core. Reading its tokenizer file needs neither, and most of
it runs in the native core without the GIL:

- a `.tiktoken` ranks file: parsing it and deriving its merges
  (`_native.Vocabulary.from_tiktoken`, ~0.06 s for 200k tokens), then
  building the encoder (`_native.Encoder.from_vocabulary`, ~0.02 s) and,
  beside it, writing the tables the tokenizer's sha256 is taken of
  (`file_tables`);
- a tokenmill JSON file: reading its merges (`_native.FileMerges.split`,
  ~1 ms for 32k where json.loads takes ~6) and, for a byte-mode file,
  building the encoder from them (`_native.Encoder.file_merges`, ~4 ms).

`start(path, pattern)`, called as soon as a command knows its tokenizer
file, reads the file and begins that work on a thread. `tiktoken.load`
then `take`s the table and `formats.detect` `take_file`s the merges, each
only when the bytes it read itself are the very bytes they were built
from; the encoder is used only for the same pattern (and, for a JSON file,
by a tokenizer it fits: `Tokenizer._from_file`). Any other case (no start, a
remote path or another kind of file, an unreadable file or one the core
does not take, a file changed in between, another pattern) gives None and
the loader does the work as before, so the result never depends on
whether this ran.

Imports nothing but json, the native core and the pattern presets' names,
so that starting costs ~2 ms.
"""

from __future__ import annotations

import json
import os
import threading

from tokenmill import _native
from tokenmill.formats import regex


class _Pending:
    """A build on its own thread from a file's bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.thread = threading.Thread(target=self.build, name="tokenmill-tokenizer", daemon=True)

    def build(self) -> None:
        raise NotImplementedError


class _Ranks(_Pending):
    def __init__(self, data: bytes, pattern: str | None) -> None:
        super().__init__(data)
        self.pattern = pattern
        self.table: _native.Vocabulary | None = None
        self.encoder: _native.Encoder | None = None

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


class FileRead:
    """A tokenmill JSON file as the core read it: the file with `[]` for its
    merges, parsed (`rest`); the merges as (left, right) tuples; and, for a
    byte-mode file, an encoder of those merges for the file's pattern,
    merge k making id 256 + k, bytes their own ids and no whole-word lookup
    (`Tokenizer._from_file` uses it only for a tokenizer numbered so)."""

    __slots__ = ("encoder", "merges", "rest")

    def __init__(
        self, rest: dict, merges: list[tuple[int, int]], encoder: _native.Encoder | None
    ) -> None:
        self.rest = rest
        self.merges = merges
        self.encoder = encoder


class _File(_Pending):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.read: FileRead | None = None

    def build(self) -> None:
        try:
            merges, rest = _native.FileMerges.split(self.data)
            d = json.loads(rest)  # without the merges: small
        except (_native.NativeError, ValueError, RecursionError):
            return  # not a tokenmill file the core takes: the loader reads it
        if not isinstance(d, dict):
            return
        encoder, pattern = None, d.get("pattern")
        plain = d.get("mode") == "byte" and not d.get("whole_words") and d.get("vocab") is None
        if plain and isinstance(pattern, str) and pattern:
            try:
                encoder = _native.Encoder.file_merges(pattern, merges, 256)
            except _native.NativeError:
                pass  # a pattern the core refuses: the loader says why
        self.read = FileRead(d, merges.pairs(), encoder)


# A file tokenmill saves names its format first: a JSON file without it in
# its first bytes is not read early (a tokenmill file written otherwise
# loads as before, only without the head start).
_HEAD = 64

_pending: _Pending | None = None
_lock = threading.Lock()


def start(path: str | os.PathLike, pattern: str | None = None) -> None:
    """Begin reading the local tokenizer file `path`, if it is a .tiktoken or
    .json file: a ranks file's table and its encoder (with whole-word lookup,
    as `tiktoken.load` makes it) for `pattern` (a preset name or a regex) if
    given; a tokenmill file's merges and encoder."""
    global _pending
    if not isinstance(path, str | os.PathLike):
        return  # a remote UPath (no os.PathLike): its loader reads it
    name = os.fspath(path)
    if "://" in name or not name.endswith((".tiktoken", ".json")):
        return
    try:
        with open(name, "rb") as f:
            data = f.read()
    except OSError:
        return  # the loader reads it again, and names the fault
    if name.endswith(".tiktoken"):
        preset = None if pattern is None else regex.preset_name(pattern) or pattern
        pending: _Pending = _Ranks(data, preset)
    elif b'"tokenmill"' in data[:_HEAD]:
        pending = _File(data)
    else:
        return  # another tool's JSON (a tokenizer.json: its loader reads it in the core)
    pending.thread.start()
    with _lock:
        _pending = pending


def _taken() -> _Pending | None:
    """The build that `start` began, done, and no longer pending."""
    global _pending
    with _lock:
        pending, _pending = _pending, None
    if pending is not None:
        pending.thread.join()
    return pending


def discard() -> None:
    """Wait for a build that nothing took (the command failed before loading):
    a thread still in the native core when the interpreter exits would be
    stopped mid-call."""
    _taken()


def take(data: bytes, pattern: str) -> tuple[_native.Vocabulary | None, _native.Encoder | None]:
    """(the table `start` built from a ranks file, if from exactly `data`;
    its encoder, if also for `pattern`, a preset name or regex as
    `tiktoken.load` resolves it); once."""
    pending = _taken()
    if not isinstance(pending, _Ranks) or pending.table is None or pending.data != data:
        return None, None
    return pending.table, pending.encoder if pending.pattern == pattern else None


def take_file(data: bytes) -> FileRead | None:
    """The tokenmill file `start` read, if it read exactly `data`; once."""
    pending = _taken()
    if not isinstance(pending, _File) or pending.data != data:
        return None
    return pending.read
