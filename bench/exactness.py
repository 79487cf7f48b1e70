"""Do tokenmill's ids (read back from its token shards) equal the peers' on
every document? Shard by shard, so memory stays at one shard's worth."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
from corpus import parquet_shards, shard_texts
from vocab import duplicate_values, hf_tokenizer, tiktoken_encoding

SOURCE_KEY = b"tokenmill.source"


def token_shards(tokens_dir: Path) -> dict[str, Path]:
    """tokenmill's token shards by the relative name of their input shard."""
    shards = {}
    for path in Path(tokens_dir).glob("*.parquet"):
        meta = pq.read_schema(path).metadata or {}
        shards[meta[SOURCE_KEY].decode()] = path
    return shards


def tokenmill_ids(path: Path) -> list[list[int]]:
    table = pq.read_table(path, columns=["row", "ids"]).sort_by("row")
    return table.column("ids").to_pylist()


def first_difference(a: list[int], b: list[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def describe(shard: str, row: int, text: str, ours: list[int], theirs: list[int]) -> dict:
    at = first_difference(ours, theirs)
    return {
        "shard": shard,
        "row": row,
        "position": at,
        "tokenmill": ours[max(0, at - 3) : at + 5],
        "peer": theirs[max(0, at - 3) : at + 5],
        "text_start": text[:80],
    }


class Tally:
    def __init__(self) -> None:
        self.mismatches = 0
        self.first: dict | None = None

    def add(self, shard: str, texts: list[str], ours: list, theirs: list) -> None:
        for row, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            if a != b:
                self.mismatches += 1
                if self.first is None:
                    self.first = describe(shard, row, texts[row], a, b)

    def result(self) -> dict:
        return {"mismatched_documents": self.mismatches, "first_mismatch": self.first}


def compare(corpus: Path, tokens_dir: Path, tokenizer_file: Path) -> dict:
    from pipeline.tokenizer import Tokenizer

    enc = tiktoken_encoding(tokenizer_file)
    hf = hf_tokenizer(tokenizer_file)
    ours = token_shards(tokens_dir)
    tiktoken_tally, hf_tally = Tally(), Tally()
    documents = 0
    for path in parquet_shards(corpus):
        name = path.relative_to(corpus).as_posix()
        texts = shard_texts(path)
        ids = tokenmill_ids(ours[name])
        if len(ids) != len(texts):
            raise SystemExit(f"{name}: {len(ids)} token rows for {len(texts)} documents")
        tiktoken_ids = enc.encode_ordinary_batch(texts, num_threads=os.cpu_count())
        tiktoken_tally.add(name, texts, ids, tiktoken_ids)
        hf_ids = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
        hf_tally.add(name, texts, ids, hf_ids)
        documents += len(texts)
    return {
        "documents": documents,
        "duplicate_token_bytes": duplicate_values(Tokenizer.load(tokenizer_file)),
        "tiktoken": tiktoken_tally.result(),
        "tokenizers": hf_tally.result(),
    }
