"""A peer encoding a corpus as one whole process, as a user would run it.

    python bench/standalone.py fastokens|tiktoken RANKS PATTERN CORPUS

Loads the .tiktoken RANKS with the regex PATTERN, reads the `text` column of
every Parquet shard under CORPUS with PyArrow and encodes all documents in
one batch call on every core; prints {"tokens": N}. The parent times this
process from start to exit, so it imports nothing it does not need (not even
tokenmill), and writes no ids: the exactness check encodes again, untimed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def texts(corpus: Path) -> list[str]:
    import pyarrow.parquet as pq

    shards = sorted(corpus.rglob("*.parquet"))
    return [t for s in shards for t in pq.read_table(s, columns=["text"])["text"].to_pylist()]


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


def main() -> None:
    peer, ranks, pattern, corpus = sys.argv[1:]
    print(json.dumps({"tokens": PEERS[peer](ranks, pattern, texts(Path(corpus)))}))


if __name__ == "__main__":
    main()
