"""--pack N with --shuffle SEED: the packed rows in a seeded permutation over
the whole stream (layouts/packed_shuffle.py), the same bytes whatever the
workers or executor, read back as documents in the stream's order."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import make_documents, write_shard
from mixdata import write_corpus, write_tokenizer
from runs import output_files, paused, temporaries, tokenmill

from tokenmill.config import Config
from tokenmill.errors import TokenmillError
from tokenmill.layouts import LayoutJob, packed_shuffle
from tokenmill.layouts.packed import LAYOUT
from tokenmill.stages.encode import run_encode
from tokenmill.stages.tokens import token_shards
from tokenmill.tokenizer import BOS, ENDOFTEXT, Tokenizer

SEQ_LEN = 24


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Token shards of documents of various lengths; a stream of ~150 rows."""
    data = tmp_path_factory.mktemp("data")
    docs = make_documents(90, seed=4)
    write_shard(data / "a.parquet", docs[:40])
    write_shard(data / "b.jsonl", docs[40:41])  # shorter than a row
    write_shard(data / "c.jsonl", docs[41:])
    tok = Tokenizer.train(make_documents(30), vocab_size=300, special_tokens=[ENDOFTEXT, BOS])
    tokens = tmp_path_factory.mktemp("tokens")
    run_encode(data, tokens, tok, Config(workers=1))
    return tok, token_shards(tokens)


def write(shards, folder, shuffle=None, fraction=0.0, workers=1, executor="threads"):
    tok, found = shards
    LAYOUT.write(LayoutJob(found, folder, tok, seq_len=SEQ_LEN, shuffle=shuffle,
                           val_fraction=fraction, workers=workers, executor=executor))  # fmt: skip
    return folder


def table(folder):
    """The packed rows of one stream, in the order of its files and rows."""
    files = sorted(folder.glob("*.parquet"), key=lambda p: p.name)
    return [r for f in files for r in pq.read_table(f).to_pylist()]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 64, 1000, 4097])
def test_permute_is_a_seeded_bijection(n):
    rows = np.arange(n, dtype=np.uint64)
    placed = packed_shuffle.permute(7, n, rows)
    assert sorted(placed.tolist()) == list(range(n))
    assert np.array_equal(placed, packed_shuffle.permute(7, n, rows))
    if n >= 64:
        assert not np.array_equal(placed, rows)
        assert not np.array_equal(placed, packed_shuffle.permute(8, n, rows))


@pytest.mark.parametrize("seed", [0, 2**64 - 1])
def test_the_extreme_seeds_are_seeds_like_any(seed):
    placed = packed_shuffle.permute(seed, 100, np.arange(100, dtype=np.uint64))
    assert sorted(placed.tolist()) == list(range(100))
    assert not np.array_equal(placed, packed_shuffle.permute(1, 100, np.arange(100)))


def test_the_rows_are_the_packed_rows_in_a_seeded_order(shards, tmp_path, monkeypatch):
    plain = table(write(shards, tmp_path / "plain"))
    folder = write(shards, tmp_path / "shuffled", shuffle=7)
    rows = table(folder)
    n = len(rows)
    assert n == len(plain) > 100 and len(plain[-1]["ids"]) < SEQ_LEN
    # Places in file order; the stream's row of each is a seeded permutation.
    assert [r["sequence"] for r in rows] == list(range(n))
    unshuffled = np.array([r["unshuffled"] for r in rows], np.uint64)
    assert np.array_equal(packed_shuffle.permute(7, n - 1, unshuffled[:-1]), np.arange(n - 1))
    assert unshuffled[-1] == n - 1  # the short last row stays last
    shifts = np.abs(np.diff(unshuffled[:-1].astype(np.int64)))
    assert np.median(shifts) > n // 10  # rows from all over the stream, not shard by shard
    # Each row is the row of the unshuffled packing it says, files of as many rows.
    for r in rows:
        want = plain[r["unshuffled"]]
        assert (r["ids"], r["documents"]) == (want["ids"], want["documents"])
    for name in ("a.parquet", "b.jsonl.parquet", "c.jsonl.parquet"):
        counts = [pq.read_metadata(tmp_path / f / name).num_rows for f in ("plain", "shuffled")]
        assert counts[0] == counts[1]
    # Read back as documents in the stream's order, a few rows at a time.
    monkeypatch.setattr(packed_shuffle, "READ_BYTES", 4 * SEQ_LEN * 10)
    got = [(d.source, d.row, d.ids.tolist()) for d in LAYOUT.read(folder, False)]
    want = [(d.source, d.row, d.ids.tolist()) for d in LAYOUT.read(tmp_path / "plain", False)]
    assert got == want


def test_the_bytes_depend_on_neither_workers_nor_executor(shards, tmp_path):
    one = write(shards, tmp_path / "one", shuffle=3, fraction=0.3)
    three = write(shards, tmp_path / "three", shuffle=3, fraction=0.3, workers=3)
    procs = write(shards, tmp_path / "p", shuffle=3, fraction=0.3, workers=2, executor="processes")
    assert output_files(one) == output_files(three) == output_files(procs)
    for side in ("train", "val"):  # each split's rows permuted on their own
        rows = table(one / side)
        assert [r["sequence"] for r in rows] == list(range(len(rows)))
        assert sorted(r["unshuffled"] for r in rows) == list(range(len(rows)))
    assert not (one / ".buckets").exists()


def test_a_run_killed_while_ordering_rows_reruns_to_the_same_bytes(tmp_path):
    data, tok = write_corpus(tmp_path / "data"), write_tokenizer(tmp_path / "tok.json")
    recipe = tmp_path / "recipe.toml"
    recipe.write_text("[mix]\nshort = 120\nlong = { epochs = 1.5 }\n")
    args = ["run", data, None, "--tokenizer", tok, "--mix", recipe, "--shuffle", "7",
            "--pack", "64", "--workers", "1"]  # fmt: skip
    env = {"TOKENMILL_MIX_BUCKET_BYTES": "2000"}  # several parts: several files to order
    tokenmill(*[a if a is not None else tmp_path / "whole" for a in args], env=env)
    out = tmp_path / "out"
    with paused([a if a is not None else out for a in args], "packed-gather", 2, tmp_path,
                env=env):  # fmt: skip
        pass  # SIGKILLed with a packed file half written
    tokenmill(*[a if a is not None else out for a in args], env=env)
    assert output_files(out) == output_files(tmp_path / "whole")
    assert temporaries(out) == [] and not (out / "packed" / ".buckets").exists()
    assert len(list((out / "packed").glob("part-*.parquet"))) > 2
    tokenmill("check", out)


def test_a_killed_packings_files_are_its_own():
    """A run without --shuffle after a killed shuffled one removes them as stale."""
    assert LAYOUT.owns(".buckets/000003.arrow") and not LAYOUT.owns("notes.arrow")


def test_a_file_with_other_rows_than_planned_fails_naming_it(tmp_path):
    schema = pa.schema([("sequence", pa.uint64()), ("n_tokens", pa.uint32())])
    task = packed_shuffle.GatherTask(0, tmp_path / "part-00000.parquet", (), schema, rows=3)
    with pytest.raises(
        TokenmillError, match=r"part-00000.parquet: 0 rows, 3 planned: .* pack again$"
    ):
        packed_shuffle.gather(task)
    assert not (tmp_path / "part-00000.parquet").exists()
