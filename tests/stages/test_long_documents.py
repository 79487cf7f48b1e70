"""A document of more than ROW_IDS ids is written over several rows of its
token shard (stages/tokens.py), and every reader joins them back: the
layouts, the mixture, decode, stats, verify and check give what they give
when it is one row. TOKENMILL_ROW_IDS makes the bound tiny here."""

from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from runs import manifest, output_files, tokenmill, tokenmill_here

from tokenmill.errors import TokenmillError
from tokenmill.io.metadata import CONTINUED
from tokenmill.stages import tokens
from tokenmill.stages.tokens import RowWriter, open_token_shard, read_row

BOUND = {"TOKENMILL_ROW_IDS": "300"}
LAYOUTS = ["--pack", "256", *("--format", "bin", "--format", "megatron")]
LAYOUTS += ["--format", "datatrove", "--format", "olmo", "--workers", "1"]
WORDS = ["alpha", "beta", "gamma", "delta", "καλημέρα", "東京", "x1", "y22"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Documents of a few to over two thousand ids, long ones first, last and
    next to each other, and an input of short documents only."""
    data = tmp_path_factory.mktemp("data")
    rng = random.Random(0)
    sizes = [2500, 4, 900, 1300, 3, 40, 700, 2, 1600]
    lines = [json.dumps({"text": " ".join(rng.choices(WORDS, k=k))}) for k in sizes]
    (data / "long.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (data / "book.txt").write_text(" ".join(rng.choices(WORDS, k=3000)), encoding="utf-8")
    short = [json.dumps({"text": " ".join(rng.choices(WORDS, k=20))}) for _ in range(30)]
    (data / "short.jsonl").write_text("\n".join(short) + "\n", encoding="utf-8")
    return data


def run(data, out, *args, env=None):
    tokenmill("run", data, out, "--txt-unit", "file", "--vocab-size", "300", *args, env=env)
    return out


def packed_equal(one, other) -> None:
    """Packed files hold the same rows; a long document's rows are written in
    row groups of their own (layouts/packed_write.py), so the bytes differ."""
    for path in sorted(one.rglob("*.parquet")):
        assert pq.read_table(path).equals(pq.read_table(other / path.relative_to(one)))


def test_every_layout_reads_a_document_written_over_rows_whole(data, tmp_path):
    whole = run(data, tmp_path / "whole", *LAYOUTS)
    split = run(data, tmp_path / "split", *LAYOUTS, env=BOUND)
    long = open_token_shard(split / "tokens" / "long.jsonl.parquet")
    rows = pq.ParquetFile(long.path).metadata.num_rows
    assert long.documents == 9 and rows > 9
    assert sorted(long.continued) == [0, 2, 3, 6, 8]
    for name in ("long.jsonl", "book.txt"):
        n_tokens = pq.read_table(split / "tokens" / f"{name}.parquet")["n_tokens"].to_numpy()
        assert n_tokens.max() <= 300
    # An input of short documents is written as it always was (its key, in
    # its metadata, records the bound).
    short = "tokens/short.jsonl.parquet"
    assert pq.read_table(whole / short).equals(pq.read_table(split / short))
    assert pq.ParquetFile(split / short).metadata.metadata.get(CONTINUED) is None
    files, expected = output_files(split), output_files(whole)
    differ = [name for name in expected if files[name] != expected[name]]
    assert all(name.startswith(("tokens/", "packed/")) for name in differ), differ
    packed_equal(whole / "packed", split / "packed")
    for key in ("documents", "split"):
        assert manifest(split).get(key) == manifest(whole).get(key)
    # decode, stats, verify and check see one document per row of the input.
    for row in (0, 3, 8):
        shards = [out / "tokens" / "long.jsonl.parquet" for out in (whole, split)]
        texts = [tokenmill_here("decode", "--shard", p, "--row", row).stdout for p in shards]
        assert texts[0] == texts[1] and len(texts[0]) > 300
    stats = [tokenmill_here("stats", out).stdout for out in (whole, split)]
    assert stats[0] == stats[1] and "40 documents" in stats[0]
    assert "match the manifest" in tokenmill_here("verify", split).stderr
    result = tokenmill_here("check", split)
    check = result.stdout + result.stderr
    assert "packed: 40 documents equal the token shards'" in check
    assert "check: 5 layouts, 40 documents, 40 decoded: 0 problems" in check


def test_a_mixture_of_documents_written_over_rows(data, tmp_path):
    recipe = tmp_path / "mix.toml"
    recipe.write_text("[mix]\nlong = { epochs = 2.0 }\nbook = { epochs = 1.0 }\n")
    args = ["--mix", recipe, "--shuffle", "5", "--pack", "256", "--format", "bin"]
    args += ["--format", "olmo", "--workers", "1"]
    whole = run(data, tmp_path / "whole", *args)
    split = run(data, tmp_path / "split", *args, env=BOUND)
    files, expected = output_files(split), output_files(whole)
    differ = [name for name in expected if files[name] != expected[name]]
    assert all(name.startswith(("tokens/", "packed/", "mix/")) for name in differ), differ
    packed_equal(whole / "packed", split / "packed")
    # The mixture's parts are written as encode writes, and read back whole.
    parts = sorted((whole / "mix").glob("*.parquet"))
    assert any(open_token_shard(split / "mix" / p.name).continued for p in parts)
    for part in parts:
        table = pq.read_table(part)
        joined = open_token_shard(split / "mix" / part.name).batches(table.column_names)
        assert pa.Table.from_batches(list(joined)).equals(table)
    assert manifest(split)["mix"] == manifest(whole)["mix"]
    assert "0 problems" in tokenmill_here("check", split).stderr
    # The manifest lists each part's rows as verify counts them, on the run
    # that wrote the parts and on a rerun that keeps them alike.
    tokenmill_here("verify", split)
    written = manifest(split)["files"]
    run(data, split, *args, env=BOUND)
    assert manifest(split)["files"] == written


def write_shard(path, table, bound, monkeypatch) -> None:
    monkeypatch.setattr(tokens, "ROW_IDS", bound)
    schema = table.schema.with_metadata({b"tokenmill.tokenizer_sha256": b"0" * 64})
    with pq.ParquetWriter(path, schema) as writer:
        rows = RowWriter(writer)
        rows.write_table(table.slice(0, 3))
        rows.write_table(table.slice(3))
        writer.add_key_value_metadata(rows.metadata())


def documents(lengths: list[int]) -> pa.Table:
    ids = [list(range(n)) for n in lengths]
    ids_type = pa.large_list(pa.field("item", pa.uint16(), nullable=False))
    return pa.table(
        {
            "row": pa.array(range(0, 2 * len(ids), 2), pa.uint64()),
            "ids": pa.array(ids, ids_type),
            "n_tokens": pa.array(lengths, pa.uint32()),
            "split": [f"s{i}" for i in range(len(ids))],
        }
    )


@pytest.mark.parametrize("batch_rows", [1, 2, 3, 100])
def test_batches_join_each_document_in_row_order(tmp_path, monkeypatch, batch_rows):
    """Batches of `batch_rows` documents, whichever rows they span, from any
    row group on; the rows each document starts in counted per row group."""
    table = documents([5, 23, 0, 10, 11, 3, 30, 1])
    path = tmp_path / "shard.parquet"
    write_shard(path, table, 10, monkeypatch)
    shard = open_token_shard(path)
    assert shard.documents == 8 and pq.ParquetFile(path).metadata.num_rows == 13
    assert shard.continued == {2: (3, 23), 8: (2, 11), 12: (3, 30)}
    batches = list(shard.batches(("row", "ids", "n_tokens", "split"), batch_rows))
    assert [b.num_rows for b in batches] == [
        min(batch_rows, 8 - i) for i in range(0, 8, batch_rows)
    ]
    assert pa.Table.from_batches(batches).equals(table)
    (only_ids,) = {tuple(b.schema.names) for b in shard.batches(("ids",), batch_rows)}
    assert only_ids == ("ids",)
    groups = shard.group_documents()
    assert groups.sum() == 8
    bounds = np.concatenate([[0], np.cumsum(groups)])
    for group in range(len(groups)):
        rest = pa.Table.from_batches(list(shard.batches(("row",), batch_rows, group)))
        assert rest["row"].to_pylist() == table["row"].to_pylist()[bounds[group] :]
    for row in table["row"].to_pylist():
        assert read_row(shard, row) == table["ids"][row // 2].as_py()


def test_a_shard_whose_rows_are_not_its_listed_documents(tmp_path, monkeypatch):
    path = tmp_path / "shard.parquet"
    write_shard(path, documents([5, 23, 4]), 10, monkeypatch)
    table = pq.read_table(path)
    meta = {**table.schema.metadata, CONTINUED: json.dumps([[2, 2, 23]]).encode()}
    pq.write_table(table.replace_schema_metadata(meta), path)
    with pytest.raises(TokenmillError, match="not those its metadata lists"):
        list(open_token_shard(path).batches())


def test_a_rerun_under_another_row_bound_writes_what_a_fresh_run_writes(data, tmp_path):
    """TOKENMILL_ROW_IDS was no part of a token shard's key: a rerun under
    another bound kept shards cut by the old one (and layouts from them)."""
    out = run(data, tmp_path / "out", "--pack", "256")
    run(data, out, "--pack", "256", env=BOUND)
    fresh = run(data, tmp_path / "fresh", "--pack", "256", env=BOUND)
    assert output_files(out) == output_files(fresh)
