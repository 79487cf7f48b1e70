"""A task that splits its shard's batches over the native pool (fewer shards
than workers) makes them on a thread of its own while it writes the one before
(stages/encode.made_ahead): the same token shard, byte for byte, and nothing
left running when the items fail or the writer stops."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tokenmill.stages.encode as encode
from tokenmill.config import Config
from tokenmill.stages.encode import made_ahead, run_encode
from tokenmill.tokenizer import Tokenizer


def makers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "tokenmill-encode-ahead"]


def test_items_come_in_their_order_and_the_maker_ends():
    assert list(made_ahead(iter(range(1000)))) == list(range(1000))
    assert makers() == []


def test_a_failure_while_making_is_raised_where_the_items_are_taken():
    def items():
        yield 1
        raise ValueError("bad batch")

    got = []
    with pytest.raises(ValueError, match="bad batch"):
        for item in made_ahead(items()):
            got.append(item)
    assert got == [1]
    assert makers() == []


def test_a_writer_that_stops_stops_the_maker_and_closes_its_items():
    closed = threading.Event()

    def items():
        try:
            yield from range(10**9)
        finally:
            closed.set()

    for item in made_ahead(items()):
        if item == 3:
            break
    assert closed.is_set()
    assert makers() == []


def test_one_shard_on_two_workers_is_the_same_bytes_as_on_one(tmp_path: Path, monkeypatch):
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", " delta", "ε", "中文", "\n", "42"]
    docs = ["".join(rng.choice(words) for _ in range(rng.randrange(1, 400))) for _ in range(3000)]
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table({"text": docs}), data / "a.parquet", row_group_size=256)
    tok = Tokenizer.train(docs[:300], vocab_size=300)
    ahead = []
    monkeypatch.setattr(encode, "made_ahead", lambda items: ahead.append(1) or made_ahead(items))
    out = {}
    for workers in (1, 2):
        config = Config(workers=workers, eos=False)
        result = run_encode(data, tmp_path / f"w{workers}", tok, config)
        assert result.documents == len(docs)
        out[workers] = (tmp_path / f"w{workers}" / "a.parquet").read_bytes()
        assert len(ahead) == workers - 1  # only the task that splits its batches
    assert out[1] == out[2]
    assert pq.ParquetFile(data / "a.parquet").metadata.num_row_groups > 1
