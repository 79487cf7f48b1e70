"""tokenmill: corpus shards to token-ID Parquet shards with byte-pair encoding."""

import os

# Polars' jemalloc otherwise keeps freed pages for seconds, which adds its
# whole working set to the resident size of the stages that follow it in the
# same process. Must be set before polars is first imported.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
# PyArrow's default pool, mimalloc, gives freed pages back to the kernel and
# faults them in again, each time (with transparent huge pages) zeroing a
# 2 MB page: up to a fifth of a short encode's CPU. The system allocator
# (glibc, the native core's too, trimmed by memory.release_memory) does not,
# and holds less (peak RSS of `run` on the bench corpus 345 -> 298 MB). Read
# when PyArrow makes its first buffer.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
# NumPy (imported by PyArrow) would start an OpenBLAS thread per core that
# spins beside the native core's threads; tokenmill does no linear algebra.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """`from pipeline import Tokenizer`, loaded on first use (PEP 562): a bare
    `import pipeline` (the CLI's entry point) stays cheap, and the environment
    above is set before anything imports PyArrow or Polars."""
    if name == "Tokenizer":
        import importlib

        # importlib rather than an import statement: the package's own module
        # must not depend on a submodule that imports `pipeline._native` from it.
        return importlib.import_module("pipeline.tokenizer").Tokenizer
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
