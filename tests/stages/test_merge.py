"""merge: exact for any input name, and bounded by the data, not by the number of tables.

A name with glob characters (`a*.txt`, `q?.txt`, `[x].txt`, `{a,b}.txt`) is a
file name, never a pattern: counts.parquet is byte for byte that of a run
whose inputs have plain names in the same order, locally and on S3. Many
tables are merged in batches of at most merge.FAN_IN, to the same bytes as
one merge of them all, which are the counts summed in first-occurrence order.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import make_documents, one_line, write_shard

from tokenmill.io.metadata import SOURCE
from tokenmill.io.writers import is_temporary
from tokenmill.stages import merge
from tokenmill.stages.merge import run_merge

# Sorted: `a*.txt.parquet` as a pattern matches a, ab and ac; `q?` matches qa;
# `[x]` matches only `x`, never itself; `{a,b}` is a pattern to some globbers.
STARRED = ["a*.txt", "a.txt", "ab.txt", "ac.txt"]
GLOBBY = ["[x].txt", *STARRED, "b.txt", "q?.txt", "qa.txt", "x.txt", "{a,b}.txt"]


def write_inputs(data: Path, names: list[str]) -> Path:
    """One small text shard per name, each with words of its own, so that a
    table summed twice changes the counts."""
    docs = one_line(make_documents(10 * len(names), seed=7))
    for i, name in enumerate(names):
        write_shard(data / name, [f"only{i} shard{i}", *docs[10 * i : 10 * i + 10]])
    return data


def count_and_merge(cli, data: str | Path, counts: str | Path, table: Path) -> bytes:
    cli("count", data, counts, "--workers", "1")
    cli("merge", counts, table)
    return table.read_bytes()


def clean_run(cli, folder: Path, names: list[str]) -> bytes:
    """counts.parquet of the same inputs under plain names in the same order."""
    assert names == sorted(names)
    data = write_inputs(folder / "data", [f"{i:02d}.txt" for i in range(len(names))])
    return count_and_merge(cli, data, folder / "counts", folder / "counts.parquet")


@pytest.mark.parametrize(
    "names, out", [(STARRED, "out"), (GLOBBY, "out[1]*?")], ids=["star", "all-and-out"]
)
def test_glob_characters_in_names_are_plain_names(cli, tmp_path, names, out):
    data = write_inputs(tmp_path / "data", names)
    out = tmp_path / out  # the output folder's own name too
    out.mkdir()
    got = count_and_merge(cli, data, out / "counts", out / "counts.parquet")
    assert got == clean_run(cli, tmp_path / "clean", names)


@pytest.mark.parametrize("reader", ["polars", "fsspec"])
def test_glob_characters_in_names_on_s3(s3, cli, tmp_path, monkeypatch, reader):
    """Count tables and counts.parquet on S3, read by Polars (object_store) or
    through fsspec as any other filesystem is, summed in partial merges."""
    import s3fs

    if reader == "fsspec":
        monkeypatch.setattr(merge, "POLARS_PROTOCOLS", set())
    monkeypatch.setattr(merge, "FAN_IN", 4)
    counts = tmp_path / "counts"
    cli("count", write_inputs(tmp_path / "data", GLOBBY), counts, "--workers", "1")
    url, table = s3.url("counts"), s3.url("counts.parquet")
    fs = s3fs.S3FileSystem()
    for p in sorted(counts.iterdir()):
        fs.put_file(str(p), f"{url}/{p.name}")
    fs.invalidate_cache()
    cli("merge", url, table)
    fs.invalidate_cache()
    assert fs.cat_file(table) == clean_run(cli, tmp_path / "clean", GLOBBY)


# --- many tables --------------------------------------------------------------

TABLES = 2000
VOCABULARY = [f" w{i}" for i in range(300)]


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> list[Path]:
    """TABLES tiny count tables as `count` writes them (word, count, first,
    the source's name), words drawn from a small vocabulary: each recurs across
    tables, 12 to 66 times in all, but a few times at most in 16 tables."""
    rng = random.Random(3)
    counts = tmp_path_factory.mktemp("counts")
    paths = []
    for i in range(TABLES):
        words = list(dict.fromkeys(rng.choices(VOCABULARY, k=rng.randint(0, 6))))
        table = pa.table(
            {
                "word": pa.array(words, pa.large_string()),
                "count": pa.array([rng.randint(1, 3) for _ in words], pa.uint64()),
                "first": pa.array(range(len(words)), pa.uint64()),
            }
        ).replace_schema_metadata({SOURCE: f"{i:05d}.txt".encode()})
        path = counts / f"{i:05d}.txt.parquet"
        pq.write_table(table, path)
        paths.append(path)
    return paths


def by_definition(paths: list[Path], min_count: int) -> list[tuple[str, int]]:
    """The merge by definition: counts summed, words in order of first occurrence."""
    total: dict[str, int] = {}
    for path in paths:
        for row in pq.read_table(path).to_pylist():
            total[row["word"]] = total.get(row["word"], 0) + row["count"]
    return [(w, c) for w, c in total.items() if c >= min_count]


@pytest.mark.parametrize("min_count", [1, 30])
def test_many_tables_merge_in_bounded_batches_to_the_one_shot_bytes(
    tables, tmp_path, monkeypatch, min_count
):
    counts = tables[0].parent
    once = tmp_path / "once.parquet"
    monkeypatch.setattr(merge, "FAN_IN", TABLES)
    run_merge(counts, once, min_count)

    batches = []
    scan_tables = merge.scan_tables

    def spy(files):
        batches.append(len(files))
        return scan_tables(files)

    monkeypatch.setattr(merge, "scan_tables", spy)
    monkeypatch.setattr(merge, "FAN_IN", 16)
    out = tmp_path / "out"
    out.mkdir()
    result = run_merge(counts, out / "counts.parquet", min_count)

    assert (out / "counts.parquet").read_bytes() == once.read_bytes()
    table = pq.read_table(once)
    expected = by_definition(tables, min_count)
    assert list(zip(table["word"].to_pylist(), table["count"].to_pylist(), strict=True)) == expected
    assert result.words == len(expected)
    # 2000 tables: 125 partial sums, 8 of those, the last sum, the result read
    # back; none over 16 tables.
    assert len(batches) == 125 + 8 + 1 + 1
    assert max(batches) <= 16
    # The partial tables are gone.
    assert not [p.name for p in out.iterdir() if is_temporary(p.name)]


@pytest.mark.parametrize("fan_in", [TABLES, 16])
def test_a_table_kept_in_memory_is_the_one_written(tables, tmp_path, monkeypatch, fan_in):
    """run_merge(keep=True), as superword training's stage-2 table is merged:
    the table comes back, as read from the file, which is the same bytes as
    a merge that does not keep it; a table kept from before is not returned."""
    counts = tables[0].parent
    monkeypatch.setattr(merge, "FAN_IN", fan_in)
    plain, kept = tmp_path / "plain.parquet", tmp_path / "kept.parquet"
    run_merge(counts, plain, 2)
    result = run_merge(counts, kept, 2, keep=True)
    assert kept.read_bytes() == plain.read_bytes()
    assert result.table is not None and result.table.equals(pq.read_table(plain))
    assert result.table.schema.field("word").type == pa.large_string()
    assert (result.words, result.occurrences) == (
        len(result.table),
        sum(result.table["count"].to_pylist()),
    )
    again = run_merge(counts, kept, 2, keep=True)
    assert again.reused and again.table is None and again.words == result.words


def test_a_merged_table_is_the_same_bytes_every_time(tmp_path):
    """Polars' streaming engine hands the writer morsels whose sizes follow
    its threads' timing; the row groups must not, or a rerun's table (and the
    tokenizer's key, its hash) would differ from the first run's."""
    rng = random.Random(0)
    counts = tmp_path / "counts"
    counts.mkdir()
    for t in range(4):
        # Sentence-long words, as stage 2 of superword training counts: enough
        # bytes that the engine cuts the table into many morsels.
        words = list(
            dict.fromkeys(
                f"w{rng.randrange(10**7)} {'x' * rng.randrange(80)}" for _ in range(150_000)
            )
        )
        table = {
            "word": pa.array(words, pa.large_string()),
            "count": pa.array([rng.randrange(1, 9) for _ in words], pa.uint64()),
            "first": pa.array(range(len(words)), pa.uint64()),
        }
        pq.write_table(pa.table(table), counts / f"{t}.parquet")
    merged = []
    for i in range(3):
        out = tmp_path / f"counts-{i}.parquet"
        run_merge(counts, out, 1)
        merged.append(out.read_bytes())
    assert merged[1] == merged[0] and merged[2] == merged[0]
