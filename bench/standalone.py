"""A peer encoding a corpus as one whole process, as a user would run it.

    python bench/standalone.py fastokens|tiktoken|read RANKS PATTERN CORPUS

Loads the .tiktoken RANKS with the regex PATTERN, reads the `text` column of
every Parquet shard under CORPUS with PyArrow and encodes all documents in
one batch call on every core; prints {"tokens": N}. The parent times this
process from start to exit, so it imports nothing it does not need (not even
tokenmill), and writes no ids: the exactness check encodes again, untimed.
`read` encodes nothing and makes no Python strings: the start-up floor of
any Python encoder of Parquet text (the interpreter, PyArrow, reading the
text as Arrow), with 0 tokens.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def texts(corpus: Path) -> list[str]:
    import pyarrow.parquet as pq

    # ParquetFile, not read_table: read_table imports pyarrow.dataset, which
    # would add about 0.4 s of start-up to a peer's whole process.
    shards = sorted(corpus.rglob("*.parquet"))
    return [t for s in shards for t in pq.ParquetFile(s).read(columns=["text"])[0].to_pylist()]


def fastokens_count(ranks: str, pattern: str, docs: list[str]) -> int:
    import fastokens

    tok = fastokens.Tokenizer.from_tiktoken(ranks, pattern=pattern, special_tokens={})
    ids, _ = tok.encode_batch_flat(docs)
    return len(ids) // 4  # little-endian uint32


def tiktoken_count(ranks: str, pattern: str, docs: list[str]) -> int:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    enc = tiktoken.Encoding(
        name="bench", pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(ranks), special_tokens={}
    )
    return sum(map(len, enc.encode_ordinary_batch(docs, num_threads=os.cpu_count())))


PEERS = {"fastokens": fastokens_count, "tiktoken": tiktoken_count}


def read_only(corpus: Path) -> int:
    import pyarrow.parquet as pq

    for shard in sorted(corpus.rglob("*.parquet")):
        pq.ParquetFile(shard).read(columns=["text"])
    return 0


def main() -> None:
    peer, ranks, pattern, corpus = sys.argv[1:]
    if peer == "read":
        tokens = read_only(Path(corpus))
    else:
        tokens = PEERS[peer](ranks, pattern, texts(Path(corpus)))
    print(json.dumps({"tokens": tokens}))


if __name__ == "__main__":
    main()
