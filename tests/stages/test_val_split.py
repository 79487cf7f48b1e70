"""--val-fraction: a document-level train/validation split decided by a hash of
shard and row, the same whatever the workers, executor or other shards, in the
token shards' split column, in train.bin / val.bin and in packed/train, packed/val."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import make_documents, write_shard
from runs import tokenmill_here

from tokenmill.stages.split import document_hashes, is_val

F = 0.1
SHARDS = ("a/one.parquet", "b.jsonl", "c.jsonl.gz", "d.parquet")
PER_SHARD = 10_000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """40k documents in four shards: enough that the val share is F within 0.5
    percentage points by a wide margin (its standard deviation is 0.15)."""
    data = tmp_path_factory.mktemp("split") / "data"
    for k, name in enumerate(SHARDS):
        docs = [d or "x" for d in make_documents(PER_SHARD, seed=k)]
        write_shard(data / name, [" ".join(d.split()[:6]) or "x" for d in docs])
    return data


def run(data: Path, out: Path, *args) -> Path:
    tokenmill_here("run", data, out, "--vocab-size", 400, "--val-fraction", F, *args)
    return out


@pytest.fixture(scope="module")
def one_worker(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("w1") / "out"
    return run(corpus, out, "--workers", 1, "--format", "bin", "--pack", 64)


def token_rows(out: Path) -> dict[tuple[str, int], tuple[str, list[int]]]:
    """(input shard, row) -> (split, ids) of every document in OUT's token shards."""
    manifest = json.loads((out / "manifest.json").read_text())
    docs = {}
    for entry in manifest["outputs"]:
        table = pq.read_table(out / entry["path"])
        source = pq.read_schema(out / entry["path"]).metadata[b"tokenmill.source"].decode()
        for row, split, ids in zip(
            table["row"].to_pylist(),
            table["split"].to_pylist(),
            table["ids"].to_pylist(),
            strict=True,
        ):
            docs[source, row] = (split, ids)
    return docs


def test_the_hash_is_fixed_and_depends_only_on_shard_and_row():
    rows = np.arange(1000, dtype=np.uint64)
    whole = document_hashes("a/one.parquet", rows)
    pieces = np.concatenate(
        [document_hashes("a/one.parquet", rows[i : i + 7]) for i in range(0, 1000, 7)]
    )
    assert (whole == pieces).all()
    assert len(set(whole.tolist())) == 1000
    assert not (whole == document_hashes("a/two.parquet", rows)).all()
    # splitmix64's finalizer, computed here with Python integers.
    key = int.from_bytes(hashlib.sha256(b"a/one.parquet").digest()[:8], "little")
    m = (1 << 64) - 1
    for row in (0, 1, 999):
        x = ((row ^ key) + 0x9E3779B97F4A7C15) & m
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
        assert int(whole[row]) == x ^ (x >> 31)


@pytest.mark.parametrize("fraction", [0.001, 0.01, 0.1, 0.25, 0.5, 0.9])
def test_val_share_is_the_fraction(fraction):
    rows = np.arange(1_000_000, dtype=np.uint64)
    share = np.mean([is_val(name, rows, fraction).mean() for name in ("x.parquet", "y/z.txt")])
    assert abs(share - fraction) < 0.005
    # A larger fraction only adds documents to val.
    assert (is_val("x.parquet", rows, fraction) <= is_val("x.parquet", rows, fraction + 0.05)).all()


def test_train_and_val_partition_the_documents(one_worker, corpus):
    docs = token_rows(one_worker)
    assert len(docs) == len(SHARDS) * PER_SHARD
    splits = [split for split, _ in docs.values()]
    assert set(splits) == {"train", "val"}
    val = sum(s == "val" for s in splits)
    assert abs(val / len(docs) - F) < 0.005
    for (source, row), (split, _) in docs.items():
        assert (split == "val") == is_val(source, np.array([row], np.uint64), F)[0]
    manifest = json.loads((one_worker / "manifest.json").read_text())
    tokens = {
        s: sum(len(ids) for split, ids in docs.values() if split == s) for s in ("train", "val")
    }
    assert manifest["split"] == {
        "val_fraction": F,
        "train": {"documents": len(docs) - val, "tokens": tokens["train"]},
        "val": {"documents": val, "tokens": tokens["val"]},
    }
    assert manifest["config"]["val_fraction"] == F


def test_train_bin_and_val_bin_hold_each_side_in_order(one_worker):
    docs = token_rows(one_worker)
    manifest = json.loads((one_worker / "manifest.json").read_text())
    order = [e["path"] for e in manifest["outputs"]]
    sources = {}
    for path in order:
        sources[path] = pq.read_schema(one_worker / path).metadata[b"tokenmill.source"].decode()
    bins = one_worker / "bin"
    assert sorted(p.name for p in bins.iterdir()) == [
        "index.json",
        "train.bin",
        "train.idx.npy",
        "val.bin",
        "val.idx.npy",
    ]
    for side in ("train", "val"):
        ids = np.fromfile(bins / f"{side}.bin", dtype="<u2")
        idx = np.load(bins / f"{side}.idx.npy")
        expected = [
            ids_
            for path in order
            for (source, row), (split, ids_) in sorted(docs.items())
            if source == sources[path] and split == side
        ]
        assert len(idx) == len(expected) + 1
        assert ids.tolist() == [i for doc in expected for i in doc]
        assert [ids[idx[k] : idx[k + 1]].tolist() for k in range(3)] == expected[:3]
    index = json.loads((bins / "index.json").read_text())
    assert index["split"] == manifest["split"]


def test_packed_rows_never_mix_train_and_val(one_worker):
    docs = token_rows(one_worker)
    for side in ("train", "val"):
        files = sorted((one_worker / "packed" / side).rglob("*.parquet"))
        assert files
        seen = set()
        for f in files:
            for pieces in pq.read_table(f, columns=["documents"])["documents"].to_pylist():
                for piece in pieces:
                    assert docs[piece["shard"], piece["row"]][0] == side
                    seen.add((piece["shard"], piece["row"]))
        assert seen == {k for k, (split, _) in docs.items() if split == side}


def test_same_split_whatever_the_workers_executor_and_other_shards(one_worker, corpus, tmp_path):
    expected = token_rows(one_worker)
    two = run(corpus, tmp_path / "w2", "--workers", 2, "--format", "bin")
    for side in ("train", "val"):
        assert (two / "bin" / f"{side}.bin").read_bytes() == (
            one_worker / "bin" / f"{side}.bin"
        ).read_bytes()
    processes = run(corpus, tmp_path / "p", "--workers", 2, "--executor", "processes")
    assert token_rows(processes) == expected == token_rows(two)
    # DATA elsewhere, with a shard more: every old document keeps its side
    # (the new shard changes the tokenizer, so only the sides are compared).
    moved = tmp_path / "elsewhere" / "data"
    shutil.copytree(corpus, moved)
    write_shard(moved / "e.parquet", ["one more shard"] * 500)
    grown = token_rows(run(moved, tmp_path / "grown"))
    assert {k: s for k, (s, _) in grown.items() if k[0] != "e.parquet"} == {
        k: s for k, (s, _) in expected.items()
    }


def test_bin_command_splits_token_shards_like_run(one_worker, tmp_path):
    out = tmp_path / "bins"
    tokenmill_here("bin", one_worker / "tokens", out, "--val-fraction", F)
    for name in ("train.bin", "val.bin", "train.idx.npy", "val.idx.npy"):
        assert (out / name).read_bytes() == (one_worker / "bin" / name).read_bytes()


def test_val_fraction_out_of_range_is_one_line(corpus, tmp_path):
    result = tokenmill_here("run", corpus, tmp_path / "o", "--val-fraction", 1, check=False)
    assert result.returncode != 0
    assert "--val-fraction" in result.stderr
    assert "Traceback" not in result.stderr


def test_without_a_split_outputs_are_unchanged(corpus, tmp_path):
    out = tmp_path / "plain"
    tokenmill_here("run", corpus, out, "--vocab-size", 400, "--format", "bin")
    assert "split" not in pq.read_schema(next((out / "tokens").rglob("*.parquet"))).names
    assert "split" not in json.loads((out / "manifest.json").read_text())
    assert (out / "bin" / "b.jsonl.bin").exists()


def test_the_pack_line_gives_each_splits_last_row(one_worker, cli, tmp_path):
    """Each split is a stream of its own: one "last" figure, the val split's,
    was wrong for train."""
    out = cli("pack", one_worker / "tokens", tmp_path / "p", "--seq-len", 64, "--val-fraction", F)
    last = {}
    for side in ("train", "val"):
        files = sorted((tmp_path / "p" / side).rglob("*.parquet"))
        short = [
            r["n_tokens"]
            for f in files
            for r in pq.read_table(f, columns=["n_tokens"]).to_pylist()
            if r["n_tokens"] < 64
        ]
        assert len(short) <= 1  # only a split's very last row may be short
        last[side] = short[0] if short else 64
    assert last["train"] != last["val"]  # this corpus tells them apart
    assert f"(last: train {last['train']}, val {last['val']})" in out.output
