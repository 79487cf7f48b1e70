"""Tokenizer files of other tools <-> Tokenizer objects.

| format         | file                                     | module               |
| -------------- | ---------------------------------------- | -------------------- |
| `tokenmill`    | tokenmill's own JSON                     | `tokenmill.tokenizer` |
| `hf`           | Hugging Face tokenizer.json              | `hf`                 |
| `tiktoken`     | .tiktoken ranks (+ `.tiktoken.json`)     | `tiktoken`           |
| `transformers` | a folder for AutoTokenizer (export only) | `transformers`       |

`load_any` tells the format from the file; `export` writes one. Both convert
between files and Tokenizer objects only: they read or write the paths they
are given (and a ranks file's JSON beside it, or a transformers folder's
files), nothing else. A transformers folder is not read back: its
tokenizer.json is, as `hf`.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import TYPE_CHECKING

from tokenmill.errors import OptionError, TokenmillError

if TYPE_CHECKING:
    from tokenmill.formats.hf import Parsed
    from tokenmill.formats.prefetch import FileRead
    from tokenmill.io.storage import AnyPath
    from tokenmill.tokenizer import Tokenizer

# The commands' options name FORMATS: importing this package loads nothing
# else (PyArrow, the native core), so that `tokenmill --help` need not wait.
FORMATS = ("hf", "tiktoken", "transformers")


def detect(path: AnyPath) -> tuple[str, dict | Parsed | FileRead | None, bytes]:
    """(format, parsed JSON or None, the file's bytes) of a tokenizer file. A
    tokenizer.json's is an `hf.Parsed`: its model's vocab and merges read by
    the native core, the rest by Python; a tokenmill file that `encode`
    began reading early is a `prefetch.FileRead`."""
    from tokenmill.formats import hf, prefetch
    from tokenmill.io.files import parse_json, read_bytes
    from tokenmill.io.storage import location
    from tokenmill.tokenizer import FORMAT

    path = location(path)
    if path.name.endswith(".tiktoken"):
        return "tiktoken", None, b""
    head = read_bytes(path, "tokenizer")
    if head.startswith(codecs.BOM_UTF8) and head[3:].lstrip()[:1] == b"{":
        raise TokenmillError(
            f"{path}: starts with a UTF-8 byte order mark, which Hugging Face tokenizers "
            "refuses ('expected value at line 1 column 1'): save the file without it"
        )
    if head.lstrip()[:1] == b"{":
        read = prefetch.take_file(head)
        if read is not None and read.rest.get("format") == FORMAT:
            return "tokenmill", read, head
        parsed = hf.parse(head, path)
        if parsed is not None:
            return "hf", parsed, head
        d = parse_json(head, path)
        if isinstance(d, dict):
            if d.get("format") == FORMAT:
                return "tokenmill", d, head
            if "model" in d:
                return "hf", d, head
            if "pat_str" in d:
                return "tiktoken-settings", d, head
        raise TokenmillError(
            f"{path}: not a tokenizer file (tokenmill JSON, Hugging Face tokenizer.json, "
            ".tiktoken ranks or their .tiktoken.json)"
        )
    first = head.split(b"\n", 1)[0].split()
    if len(first) == 2 and first[1].isdigit():
        return "tiktoken", None, head
    raise TokenmillError(
        f"{path}: not a tokenizer file (tokenmill JSON, Hugging Face tokenizer.json, "
        ".tiktoken ranks or their .tiktoken.json)"
    )


def load_any(
    path: AnyPath | str,
    *,
    pattern: str | None = None,
    special_tokens: dict[str, int] | None = None,
) -> Tokenizer:
    """Load a tokenizer file of any supported format.

    `pattern` and `special_tokens` apply to .tiktoken ranks files only (which
    hold neither); the other formats carry their own, and giving them is an
    error rather than silently ignored.
    """
    from tokenmill.io.storage import location
    from tokenmill.memory import gc_paused

    with gc_paused():
        return _load(location(path), pattern, special_tokens)


def _load(path: AnyPath, pattern: str | None, special_tokens: dict[str, int] | None) -> Tokenizer:
    from tokenmill.formats import hf, prefetch, tiktoken
    from tokenmill.tokenizer import Tokenizer

    kind, d, data = detect(path)
    if kind == "tiktoken-settings":
        path, kind = path.with_name(path.name.removesuffix(".json")), "tiktoken"
    if kind == "tiktoken":
        return tiktoken.load(path, pattern, special_tokens)
    given = [
        n for n, v in [("pattern", pattern), ("special_tokens", special_tokens)] if v is not None
    ]
    if given:
        # An argument this file would leave unread: the caller's mistake, not the file's.
        raise OptionError(
            f"{path}: {' and '.join(f'{n}=' for n in given)} "
            f"{'apply' if len(given) > 1 else 'applies'} to .tiktoken files only; "
            "this file has its own"
        )
    if kind == "hf":
        if isinstance(d, hf.Parsed):
            return hf.from_dict(d.rest, str(path), d)
        assert isinstance(d, dict)  # detect's "hf": Parsed or the whole JSON
        return hf.from_dict(d, str(path))
    if isinstance(d, prefetch.FileRead):
        return Tokenizer._from_file(d.rest, data, str(path), merges=d.merges, encoder=d.encoder)
    assert isinstance(d, dict)  # detect's "tokenmill": FileRead or the whole JSON
    return Tokenizer._from_file(d, data, str(path))


def export_targets(path: Path, fmt: str) -> list[Path]:
    """The files `export(..., path, fmt)` writes."""
    from tokenmill.formats import tiktoken, transformers

    path = Path(path)
    if fmt == "tiktoken":
        return [path, tiktoken.sidecar_path(path)]
    if fmt == "transformers":
        return [path / name for name in transformers.FILES]
    return [path]


def is_export(path: Path, fmt: str) -> bool:
    """Whether the existing file `path` is what an export as `fmt` writes
    there, so that exporting again may replace it."""
    if fmt == "transformers":
        return True  # a folder, whose own check (transformers.save) judges its files
    if not path.is_file():
        return False  # a FIFO (reading it to judge it would wait for a writer), a folder
    if fmt == "tiktoken" and not path.name.endswith(".json"):
        with path.open("rb") as f:
            first = f.readline(1 << 16).split()
        return len(first) == 2 and first[1].isdigit()
    try:
        kind = detect(path)[0]
    except TokenmillError:
        return False
    return kind == ("tiktoken-settings" if fmt == "tiktoken" else "hf")


def export(tok: Tokenizer, path: Path, fmt: str) -> list[Path]:
    """Write `tok` as `fmt` (hf, tiktoken, transformers: `path` is a folder);
    returns the files written."""
    from tokenmill.formats import hf, tiktoken, transformers

    if fmt == "hf":
        hf.save(tok, path)
        return [Path(path)]
    if fmt == "tiktoken":
        return tiktoken.save(tok, path)
    if fmt == "transformers":
        return transformers.save(tok, path)
    raise TokenmillError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
