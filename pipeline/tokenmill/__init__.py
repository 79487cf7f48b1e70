"""tokenmill: corpus shards to token-ID Parquet shards with byte-pair encoding."""

from importlib.metadata import version as _version

__version__ = _version("tokenmill")


def __getattr__(name: str) -> object:
    """`from tokenmill import Tokenizer`, loaded on first use (PEP 562): a bare
    `import tokenmill` (the CLI's entry point) stays cheap."""
    if name == "Tokenizer":
        import importlib

        # importlib rather than an import statement: the package's own module
        # must not depend on a submodule that imports `tokenmill._native` from it.
        return importlib.import_module("tokenmill.tokenizer").Tokenizer
    raise AttributeError(f"module 'tokenmill' has no attribute {name!r}")
