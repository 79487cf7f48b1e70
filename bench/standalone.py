"""A peer encoding a corpus as one whole process, as a user would run it.

    python bench/standalone.py fastokens|tiktoken|read RANKS PATTERN CORPUS [THREADS]

Loads the .tiktoken RANKS with the regex PATTERN, reads the `text` column of
every Parquet shard under CORPUS with PyArrow and encodes the documents on
THREADS threads (default: one per core): fastokens in one encode_batch_flat
over all of them (its rayon pool: the parent sets RAYON_NUM_THREADS),
tiktoken in one encode_ordinary_batch(num_threads=THREADS) per shard (its
ids are Python lists, ~36 bytes a token: a batch of 500 MB would need
gigabytes). Prints {"tokens": N}. The parent times this process from start
to exit, so it imports nothing it does not need (not even tokenmill), and
writes no ids: the exactness check encodes again, untimed. `read` encodes
nothing and makes no Python strings: the start-up floor of any Python
encoder of Parquet text (the interpreter, PyArrow, reading the text as
Arrow), with 0 tokens.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def shards(corpus: Path) -> list[Path]:
    return sorted(corpus.rglob("*.parquet"))


def shard_texts(shard: Path) -> list[str]:
    import pyarrow.parquet as pq

    # ParquetFile, not read_table: read_table imports pyarrow.dataset, which
    # would add about 0.4 s of start-up to a peer's whole process.
    return pq.ParquetFile(shard).read(columns=["text"])[0].to_pylist()


def fastokens_count(ranks: str, pattern: str, corpus: Path, threads: int) -> int:
    import fastokens

    tok = fastokens.Tokenizer.from_tiktoken(ranks, pattern=pattern, special_tokens={})
    ids, _ = tok.encode_batch_flat([t for s in shards(corpus) for t in shard_texts(s)])
    return len(ids) // 4  # little-endian uint32


def tiktoken_count(ranks: str, pattern: str, corpus: Path, threads: int) -> int:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    enc = tiktoken.Encoding(
        name="bench", pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(ranks), special_tokens={}
    )
    return sum(
        sum(map(len, enc.encode_ordinary_batch(shard_texts(s), num_threads=threads)))
        for s in shards(corpus)
    )


def read_only(ranks: str, pattern: str, corpus: Path, threads: int) -> int:
    import pyarrow.parquet as pq

    for shard in shards(corpus):
        pq.ParquetFile(shard).read(columns=["text"])
    return 0


PEERS = {"fastokens": fastokens_count, "tiktoken": tiktoken_count, "read": read_only}


def main() -> None:
    peer, ranks, pattern, corpus, *threads = sys.argv[1:]
    count = PEERS[peer](
        ranks, pattern, Path(corpus), int(threads[0]) if threads else os.cpu_count()
    )
    print(json.dumps({"tokens": count}))


if __name__ == "__main__":
    main()
