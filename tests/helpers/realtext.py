"""Read the real-text sample in sample_data/ without using the pipeline's code.

The sample (see sample_data/README.md) holds one shard per input format:

* ``*.parquet``   -- column ``text`` (string); read row group by row group
* ``*.jsonl``     -- JSON Lines, one object per line with a ``text`` field
* ``*.jsonl.gz``  -- the same, gzip-compressed
* ``*.txt``       -- plain text, one document per line
* ``*.txt.gz``    -- the same, gzip-compressed

This reader uses only pyarrow, json and gzip, so tests can compare what the
pipeline reads against an independent reading of the same files.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLE_DIR = REPO / "sample_data"
# Public vocabularies shipped in the repository (vocabularies/README.md: source, sha256).
VOCAB_DIR = REPO / "vocabularies"
GPT2_FILE = VOCAB_DIR / "gpt2.tiktoken"
CL100K_FILE = VOCAB_DIR / "cl100k_base.tiktoken"
O200K_FILE = VOCAB_DIR / "o200k_base.tiktoken"

# Files in sample_data/ that are not data shards.
_NOT_DATA_SUFFIXES = (".md", ".py", ".pyc")


def sample_paths(sample_dir: Path = SAMPLE_DIR) -> list[Path]:
    """Data shards in sample_data/, in sorted path order."""
    paths = []
    for path in sorted(sample_dir.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        if path.name.endswith(_NOT_DATA_SUFFIXES):
            continue
        paths.append(path)
    return paths


def _read_lines(path: Path) -> Iterator[str]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        for line in f:
            # Only "\n" ends a record; strip it (and a "\r" before it).
            if line.endswith("\n"):
                line = line[:-1]
                if line.endswith("\r"):
                    line = line[:-1]
            yield line


def _read_parquet(path: Path) -> Iterator[str]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    for i in range(pf.num_row_groups):
        for text in pf.read_row_group(i, columns=["text"]).column("text").to_pylist():
            if text is None:
                raise ValueError(f"{path.name}: null text in row group {i}")
            yield text


def read_documents(path: Path) -> Iterator[str]:
    """Texts of the documents in one shard, in file order."""
    name = path.name
    if name.endswith(".parquet"):
        yield from _read_parquet(path)
    elif name.endswith((".jsonl", ".jsonl.gz")):
        for n, line in enumerate(_read_lines(path), 1):
            if not line.strip():
                continue
            text = json.loads(line)["text"]
            if not isinstance(text, str):
                raise ValueError(f"{name}:{n}: text is not a string")
            yield text
    elif name.endswith((".txt", ".txt.gz")):
        yield from _read_lines(path)
    else:
        raise ValueError(f"unknown sample shard format: {name}")


def iter_sample_documents(sample_dir: Path = SAMPLE_DIR) -> Iterator[tuple[str, str]]:
    """(shard file name, text) for every document, shards in sorted order."""
    for path in sample_paths(sample_dir):
        for text in read_documents(path):
            yield path.name, text


def load_sample_texts(sample_dir: Path = SAMPLE_DIR) -> list[str]:
    """All document texts of the sample, shards in sorted path order."""
    return [text for _, text in iter_sample_documents(sample_dir)]
