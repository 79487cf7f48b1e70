"""tokenmill: corpus shards to token-ID Parquet shards with byte-pair encoding."""

import os

# Polars' jemalloc otherwise keeps freed pages for seconds, which adds its
# whole working set to the resident size of the stages that follow it in the
# same process. Returning them at once (a decay of 0) made merge fault the
# same pages in again and again: 0.14 s instead of 0.11 on the bench corpus.
# So pages wait 100 ms, and a background thread returns them even once Polars
# is idle: ~200 ms after merge the process is back to its size before merge.
# Must be set before polars is first imported.
os.environ.setdefault(
    "_RJEM_MALLOC_CONF", "dirty_decay_ms:100,muzzy_decay_ms:0,background_thread:true"
)
# PyArrow keeps its default pool, mimalloc: the system allocator saved CPU
# on short encodes (mimalloc zeroes 2 MB pages it faults in again) but kept
# 50-70 MB of freed, fragmented memory between the stages of one `run`,
# whose peak on 500 MB of C rose from about 570 to 615 MB.
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
