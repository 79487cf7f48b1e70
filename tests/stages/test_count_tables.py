"""`run_counts`: several word tables of each input (superword tokens' two) from
one read of it, each the table `run_count` makes alone, each kept by a rerun
on its own; a file skipped whole is skipped in every table."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import make_documents, write_shard

from tokenmill.config import Config
from tokenmill.stages import count
from tokenmill.stages.count import run_count, run_counts
from tokenmill.tokenizer.superword import PATTERN

NAMES = ("a.parquet", "b.jsonl.parquet")


@pytest.fixture
def data(tmp_path) -> Path:
    docs = make_documents(60, seed=5)
    write_shard(tmp_path / "data" / "a.parquet", docs[:40])
    write_shard(tmp_path / "data" / "b.jsonl", docs[40:])
    return tmp_path / "data"


def rows(folder: Path, name: str) -> dict:
    return pq.read_table(folder / name).to_pydict()


def tables(tmp_path: Path) -> list[tuple[Path, str | None]]:
    return [(tmp_path / "c1", None), (tmp_path / "c2", PATTERN)]


def test_both_tables_from_one_read(data, tmp_path, monkeypatch):
    reads = []
    real = count.read_documents
    monkeypatch.setattr(
        count, "read_documents", lambda *a, **k: reads.append(a[0]) or real(*a, **k)
    )
    first, second = run_counts(data, tables(tmp_path), Config(workers=1))
    assert sorted(Path(r).name for r in reads) == ["a.parquet", "b.jsonl"]
    assert (first.stage, second.stage, second.read_with, second.seconds) == (
        "count",
        "count",
        "count",
        0,
    )
    assert "from count's read" in second.describe()
    assert second.documents == first.documents == 60
    assert [r["input"] for r in second.shards] == [r["input"] for r in first.shards]
    monkeypatch.undo()
    run_count(data, tmp_path / "alone1", Config(workers=1))
    run_count(data, tmp_path / "alone2", Config(workers=1), PATTERN)
    for name in NAMES:
        assert rows(tmp_path / "c1", name) == rows(tmp_path / "alone1", name)
        assert rows(tmp_path / "c2", name) == rows(tmp_path / "alone2", name)
        assert rows(tmp_path / "c1", name) != rows(tmp_path / "c2", name)


def test_a_rerun_keeps_each_table_on_its_own(data, tmp_path):
    run_counts(data, tables(tmp_path), Config(workers=1))
    before = rows(tmp_path / "c2", "a.parquet")
    (tmp_path / "c2" / "a.parquet").unlink()
    first, second = run_counts(data, tables(tmp_path), Config(workers=1))
    assert (first.reused, first.redone) == (2, 0)
    assert (second.reused, second.redone) == (1, 1)
    assert rows(tmp_path / "c2", "a.parquet") == before
    # The first table missing: both counted again from one read.
    (tmp_path / "c1" / "b.jsonl.parquet").unlink()
    first, second = run_counts(data, tables(tmp_path), Config(workers=1))
    assert (first.redone, second.redone) == (1, 1)


def test_a_file_skipped_whole_is_skipped_in_every_table(data, tmp_path):
    run_counts(data, tables(tmp_path), Config(workers=1))
    (data / "a.parquet").write_bytes(b"PAR1 not parquet at all PAR1")
    first, second = run_counts(data, tables(tmp_path), Config(workers=1, on_error="skip"))
    for result in (first, second):
        skipped = [r for r in result.shards if r["output"] is None]
        assert [r["shard"] for r in skipped] == ["a.parquet"]
    assert not (tmp_path / "c2" / "a.parquet").exists()  # the old content's table
    assert (tmp_path / "c2" / "b.jsonl.parquet").exists()
