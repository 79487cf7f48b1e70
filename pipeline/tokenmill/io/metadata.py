"""The keys tokenmill writes into the Parquet metadata of its outputs, spelled
once, and reading them back.

- count tables (stages/count.py): SOURCE, STATE;
- token shards (stages/encode.py): SOURCE, TOKENIZER_SHA256, VOCAB_SIZE, STATE,
  and CONTINUED when a document is written over several rows (stages/tokens.py);
- packed shards (stages/pack.py): those of token shards (but STATE) and
  SEQ_LEN, EOS_ID, BOS_ID.

SOURCE is the input shard's name (its path relative to DATA); STATE is what
makes a shard output reusable (stages/state.py).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from tokenmill.errors import TokenmillError
from tokenmill.io.storage import AnyPath, location, parquet_file

SOURCE = b"tokenmill.source"
TOKENIZER_SHA256 = b"tokenmill.tokenizer_sha256"
VOCAB_SIZE = b"tokenmill.vocab_size"
STATE = b"tokenmill.state"
SEQ_LEN = b"tokenmill.seq_len"
EOS_ID = b"tokenmill.eos_id"
BOS_ID = b"tokenmill.bos_id"
# A token shard's documents written over several rows: JSON [[row, rows, ids], ...].
CONTINUED = b"tokenmill.continued"
# A mixture's part (stages/mix.py) with --val-fraction: "train" or "val", all its rows.
SPLIT = b"tokenmill.split"


def recorded_source(meta: dict[bytes, bytes], path: AnyPath) -> str:
    """The input shard name recorded in an output's metadata (else the file's stem)."""
    return meta.get(SOURCE, PurePosixPath(location(path).name).stem.encode()).decode()


# What a count table's words were split with: the options of count's key
# (stages/state.py) that training must be given alike.
SPLIT_OPTIONS = ("mode", "pattern", "lowercase")


def count_table_split(meta: dict[bytes, bytes]) -> dict | None:
    """The split options a count table records in its STATE (None: a table
    not written by `count`, which says nothing)."""
    import json

    try:
        key = json.loads(meta[STATE])["key"]
        return {k: key[k] for k in SPLIT_OPTIONS}
    except (KeyError, TypeError, ValueError):
        return None


def count_table_source(counts_file: AnyPath) -> tuple[str, dict | None]:
    """The input shard a count table was made from, and the options its words
    were split with (count_table_split); TokenmillError naming the file when
    it has no word and count columns (a merge of it would fail naming only
    the table it writes)."""
    import pyarrow.types as pat  # not at the top: see io.storage.parquet_file

    counts_file = location(counts_file)
    try:
        with parquet_file(counts_file) as pf:
            schema = pf.schema_arrow
    except TokenmillError:  # a store's failure (a ValueError too): said already
        raise
    except (OSError, ValueError) as e:
        raise TokenmillError(f"{counts_file}: cannot read count table ({e})") from None
    types = {field.name: field.type for field in schema}
    word, count = types.get("word"), types.get("count")
    if not (
        word is not None
        and (pat.is_string(word) or pat.is_large_string(word))
        and count is not None
        and pat.is_integer(count)
    ):
        columns = ", ".join(schema.names) or "none"
        raise TokenmillError(
            f"{counts_file}: not a count table (columns {columns}): "
            "want the tables `tokenmill count` writes (word, count)"
        )
    meta = schema.metadata or {}
    return recorded_source(meta, counts_file), count_table_split(meta)
