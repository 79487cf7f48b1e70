"""tokenmill: corpus shards to token-ID Parquet shards with byte-pair encoding."""

import os

# Polars' jemalloc otherwise keeps freed pages for seconds, which adds its
# whole working set to the resident size of the stages that follow it in the
# same process. Must be set before polars is first imported.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")

__version__ = "0.1.0"
