"""tokenmill: corpus shards to token-ID Parquet shards with byte-pair encoding."""

__version__ = "0.1.0"
