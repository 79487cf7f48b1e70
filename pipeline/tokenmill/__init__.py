"""tokenmill: corpus shards to token-ID Parquet shards with byte-pair encoding."""

def __getattr__(name: str) -> object:
    """`from tokenmill import Tokenizer`, loaded on first use (PEP 562): a bare
    `import tokenmill` (the CLI's entry point) stays cheap."""
    if name == "__version__":
        # The installed distribution's (Cargo.toml's) version, read on use:
        # importlib.metadata is slow to import, and the console script imports
        # this module before it can turn Ctrl-C into one line.
        from importlib.metadata import version

        return version("tokenmill")
    if name == "Tokenizer":
        import importlib

        # importlib rather than an import statement: the package's own module
        # must not depend on a submodule that imports `tokenmill._native` from it.
        return importlib.import_module("tokenmill.tokenizer").Tokenizer
    raise AttributeError(f"module 'tokenmill' has no attribute {name!r}")
