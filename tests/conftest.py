"""Shared fixtures: small corpora written in every input format, and a CLI runner."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import random
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import settings

from tokenmill.cli import main

# The shared helpers (runs, realtext, textbook, s3) are imported by name from every layer.
sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

# No test holds code to a wall-clock limit: Hypothesis's per-example deadline
# (200 ms) failed a test whose example met the machine busy with other tests.
settings.register_profile("tokenmill", deadline=None)
settings.load_profile("tokenmill")

WORDS = (
    "the cat sat on a mat while dog runs eats drinks barks meows wolf "
    "καλημέρα κόσμε привіт світ 東京 naïve café def return self.x = 42; "
    "print('hello') if x >= 10: 3.14159 don't we'll I'M"
).split()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """`make test` runs the suite on several workers (pytest-xdist, --dist
    loadgroup): a file's tests stay together, so its module fixtures are made
    once, and the Ray tests share one group, as two local Ray clusters on one
    machine would join each other."""
    for item in items:
        group = "ray" if item.path.name.startswith("test_ray") else item.path.stem
        item.add_marker(pytest.mark.xdist_group(group))


def zstd(data: bytes) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as f:
        f.write(data)
    return sink.getvalue().to_pybytes()


# Each compression suffix the readers know, with a function writing it.
COMPRESS = {
    "": lambda b: b,
    ".gz": lambda b: gzip.compress(b, mtime=0),
    ".zst": zstd,
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
}


def make_documents(n: int, seed: int = 0) -> list[str]:
    """Deterministic documents mixing scripts, code-like text, odd spacing."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        words = rng.choices(WORDS, k=rng.randint(0, 60))
        seps = rng.choices([" ", " ", " ", "  ", "\n", "\t", "\r\n", ""], k=len(words))
        docs.append("".join(w + s for w, s in zip(words, seps, strict=True)))
        if i % 17 == 0:
            docs[-1] += " " * 3
    return docs


def write_shard(path: Path, docs: list[str]) -> Path:
    """Write documents in the format the file name implies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    name = path.name
    if name.endswith(".parquet"):
        pq.write_table(
            pa.table({"text": docs, "source": ["test"] * len(docs)}),
            path,
            row_group_size=max(1, len(docs) // 3),
        )
    elif name.endswith(".jsonl") or name.endswith(".jsonl.gz"):
        lines = "".join(json.dumps({"text": d}) + "\n" for d in docs).encode()
        path.write_bytes(gzip.compress(lines, mtime=0) if name.endswith(".gz") else lines)
    elif name.endswith(".txt") or name.endswith(".txt.gz"):
        if any("\n" in d or "\r" in d for d in docs):
            raise ValueError("text shards hold one document per line")
        data = "".join(d + "\n" for d in docs).encode()
        path.write_bytes(gzip.compress(data, mtime=0) if name.endswith(".gz") else data)
    else:
        raise ValueError(name)
    return path


def one_line(docs: list[str]) -> list[str]:
    return [" ".join(d.split()) for d in docs]


def assert_one_line_error(result, *needles: str) -> None:
    assert result.exit_code != 0
    # Earlier lines may be summaries of stages that finished; the error is one line.
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith("Error: "), result.output
    assert sum(line.startswith("Error") for line in lines) == 1, result.output
    for needle in needles:
        assert needle in lines[-1], lines[-1]


def assert_usage_error(result, message: str, command: str, out: Path | None = None) -> None:
    """Refused in one line as a usage error, as click's own refusals (README,
    Exit status): status 2, the command's help named; nothing written in `out`."""
    assert_one_line_error(result, message)
    assert result.exit_code == 2 and f" {command} --help')" in result.output
    assert out is None or not out.exists()


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A folder with one shard in each input format."""
    data = tmp_path / "data"
    docs = make_documents(120)
    write_shard(data / "a.parquet", docs[:40])
    write_shard(data / "b.jsonl", docs[40:70])
    write_shard(data / "c.jsonl.gz", docs[70:90])
    write_shard(data / "sub" / "d.txt", one_line(docs[90:105]))
    write_shard(data / "sub" / "e.txt.gz", one_line(docs[105:]))
    return data


@pytest.fixture
def cli():
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True):
        result = runner.invoke(main, [str(a) for a in args], catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.output
        return result

    return invoke


@pytest.fixture(scope="session")
def s3():
    """A local S3 server for the whole session (tests/helpers/s3.py); each test takes
    its own prefix with `s3.url()`."""
    from s3 import s3_server

    with s3_server() as server:
        yield server
