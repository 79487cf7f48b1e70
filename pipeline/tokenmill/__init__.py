"""tokenmill: corpus shards to token-ID Parquet shards with byte-pair encoding.

The Python API (docs/python-api.md): `load` a tokenizer file of any format,
or `Tokenizer.train` one; the errors it raises, all ValueErrors.

>>> import tokenmill
>>> enc = tokenmill.load("vocabularies/cl100k_base.tiktoken")
>>> enc.decode(enc.encode("hello world"))
'hello world'
"""

from __future__ import annotations

import importlib

# Not typing's: importing typing takes a few ms of the console script's start,
# before it can turn Ctrl-C into one line. Type checkers read the name alike.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from os import PathLike

    from tokenmill.errors import (
        DisallowedSpecialTokenError,
        InputChanged,
        NoSuchPath,
        OptionError,
        StoreError,
        TokenmillError,
        WorkerLost,
        WriteError,
    )
    from tokenmill.tokenizer import Tokenizer

    __version__: str  # made by __getattr__

__all__ = [
    "DisallowedSpecialTokenError",
    "InputChanged",
    "NoSuchPath",
    "OptionError",
    "StoreError",
    "TokenmillError",
    "Tokenizer",
    "WorkerLost",
    "WriteError",
    "__version__",
    "load",
]


def load(
    path: str | PathLike[str],
    pattern: str | None = None,
    special_tokens: dict[str, int] | None = None,
) -> Tokenizer:
    """A tokenizer file of any format the CLI reads: tokenmill's own JSON, a
    Hugging Face tokenizer.json, or tiktoken's .tiktoken ranks (a local path
    or a URL such as s3://bucket/tok.json).

    A .tiktoken file holds no pre-tokenization pattern nor special tokens:
    `pattern` (a preset, gpt2, cl100k or o200k, or a regex) and
    `special_tokens` ({token: id}) give them, else the JSON that export
    writes beside the file, else, for tiktoken's own files (named gpt2,
    r50k_base, cl100k_base or o200k_base), tiktoken's. The other formats hold
    their own, and giving either is an error.

    >>> enc = load("vocabularies/gpt2.tiktoken")
    >>> enc.encode("hello world"), enc.eos_id
    ([31373, 995], 50256)
    """
    # importlib, as in __getattr__: see there.
    importlib.import_module("tokenmill.io.storage").check_path_argument(path, "load")
    formats = importlib.import_module("tokenmill.formats")
    return formats.load_any(path, pattern=pattern, special_tokens=special_tokens)


def __getattr__(name: str) -> object:
    """`Tokenizer`, the errors and `__version__`, made on first use (PEP 562):
    a bare `import tokenmill` (the console script's first step, before it can
    turn Ctrl-C into one line) runs no import of its own."""
    if name == "__version__":
        # The installed distribution's (Cargo.toml's) version, read on use:
        # importlib.metadata is slow to import, and the console script imports
        # this module before it can turn Ctrl-C into one line.
        from importlib.metadata import version

        return version("tokenmill")
    errors = importlib.import_module("tokenmill.errors")
    if name in errors.__all__:
        return getattr(errors, name)
    if name == "Tokenizer":
        # importlib rather than an import statement: the package's own module
        # must not depend on a submodule that imports `tokenmill._native` from it.
        return importlib.import_module("tokenmill.tokenizer").Tokenizer
    raise AttributeError(f"module 'tokenmill' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
