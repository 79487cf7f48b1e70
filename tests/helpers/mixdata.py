"""A corpus for the data-recipe tests (tokenmill.stages.mix): three sources of
very different document lengths, a tokenizer file to encode it with, and the
mixture read back from OUT/mix/."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
from conftest import WORDS, write_shard

from tokenmill.tokenizer import ENDOFTEXT, Tokenizer

# Sources and their inputs: short/ has 1-token documents (an empty text is its
# <|endoftext|> alone), long/ documents of about 500 tokens, books.jsonl (at
# DATA's top: source "books") some of 20 to 120.
INPUTS = ("books.jsonl", "long/a.jsonl", "long/b.parquet", "short/a.jsonl", "short/b.jsonl")


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(WORDS, k=words))


def write_corpus(data: Path, scale: int = 1) -> Path:
    rng = random.Random(5)
    write_shard(data / "short" / "a.jsonl", [""] * (150 * scale))
    write_shard(data / "short" / "b.jsonl", [""] * (100 * scale))
    write_shard(data / "long" / "a.jsonl", [text(rng, 110) for _ in range(12 * scale)])
    write_shard(data / "long" / "b.parquet", [text(rng, 110) for _ in range(8 * scale)])
    write_shard(data / "books.jsonl", [text(rng, rng.randint(5, 25)) for _ in range(40 * scale)])
    return data


def write_tokenizer(path: Path) -> Path:
    """A small byte-level tokenizer (few merges: a long document is ~500 ids)."""
    rng = random.Random(1)
    tok = Tokenizer.train([text(rng, 30) for _ in range(50)], vocab_size=300,
                          special_tokens=[ENDOFTEXT])  # fmt: skip
    tok.save(path)
    return path


def parts(out: Path) -> list[Path]:
    return sorted((out / "mix").glob("part-*.parquet"))


def mixture(out: Path) -> list[dict]:
    """Every row of the mixture's parts, in order (all columns but ids, and ids as a list)."""
    rows = []
    for path in parts(out):
        rows += pq.read_table(path).to_pylist()
    return rows


def appearances(out: Path) -> Counter:
    """How many times each document (input, row) is in the mixture."""
    return Counter((r["shard"], r["input_row"]) for r in mixture(out))


def order(out: Path) -> list[tuple[str, int, int]]:
    """The mixture as (input, row, epoch), in order."""
    return [(r["shard"], r["input_row"], r["epoch"]) for r in mixture(out)]
