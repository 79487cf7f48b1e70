"""--format bin behind the layout interface: --bos, and its `read`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import make_documents, write_shard
from runs import tokenmill_here

from tokenmill.config import Config
from tokenmill.errors import TokenmillError
from tokenmill.layouts import LayoutJob
from tokenmill.layouts.bin import LAYOUT, run_bin
from tokenmill.stages.encode import run_encode
from tokenmill.stages.pack import run_pack
from tokenmill.stages.tokens import list_ids, token_shards
from tokenmill.tokenizer import BOS, ENDOFTEXT, Tokenizer


@pytest.fixture(scope="module")
def encoded(tmp_path_factory):
    """(token shards, their rows by source, tokenizer) of a small corpus of two shards."""
    root = tmp_path_factory.mktemp("bin")
    docs = make_documents(50, seed=5)
    write_shard(root / "data" / "a.jsonl", docs[:30])
    write_shard(root / "data" / "sub" / "b.jsonl", docs[30:])
    tok = Tokenizer.train(docs, vocab_size=300, special_tokens=[ENDOFTEXT, BOS])
    run_encode(root / "data", root / "tokens", tok, Config(workers=1))
    shards = token_shards(root / "tokens")
    rows = {}
    for shard in shards:
        flat, offsets = list_ids(next(shard.batches(columns=("ids",))).column(0))
        rows[shard.source] = [
            flat[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)
        ]
    return shards, rows, tok


@pytest.mark.parametrize("bos", [False, True])
def test_bin_puts_bos_before_each_document_and_reads_back(encoded, tmp_path, bos):
    shards, rows, tok = encoded
    result = LAYOUT.write(LayoutJob(shards, tmp_path, tok, bos=bos))
    pairs = ["a.jsonl.bin", "a.jsonl.idx.npy", "sub/b.jsonl.bin", "sub/b.jsonl.idx.npy"]
    assert result.files == [*pairs, "index.json"]
    first = [tok.special_id(BOS)] if bos else []
    expected = [(s, first + ids) for s in ("a.jsonl", "sub/b.jsonl") for ids in rows[s]]
    assert [(d.source, d.ids.tolist()) for d in LAYOUT.read(tmp_path, False)] == expected
    # As nanoGPT reads it: the flat array, cut by the offsets.
    ids = np.memmap(tmp_path / "a.jsonl.bin", dtype=np.uint16, mode="r")
    idx = np.load(tmp_path / "a.jsonl.idx.npy")
    assert ids[idx[0] : idx[1]].tolist() == first + rows["a.jsonl"][0]
    index = json.loads((tmp_path / "index.json").read_text())
    assert index["bos_id"] == (tok.special_id(BOS) if bos else None)
    assert result.tokens == len(ids) + len(np.memmap(tmp_path / "sub/b.jsonl.bin", np.uint16))


def test_bin_with_a_split_reads_back_train_then_val(encoded, tmp_path):
    shards, rows, tok = encoded
    LAYOUT.write(LayoutJob(shards, tmp_path, tok, val_fraction=0.4))
    read = list(LAYOUT.read(tmp_path, True))
    assert {d.split for d in read} == {"train", "val"}
    assert [d.split for d in read] == sorted(d.split for d in read)  # train first
    every = sorted(ids for docs in rows.values() for ids in docs)
    assert sorted(d.ids.tolist() for d in read) == every


def test_standalone_pack_and_bin_split_as_encode_did_or_refuse(tmp_path):
    """Shards encoded with --val-fraction record each document's split: bin and
    pack without it, or with another fraction, would train on validation
    documents or split anew; with the same fraction they write what run does."""
    data = tmp_path / "data"
    write_shard(data / "a.jsonl", make_documents(60, seed=7))
    out = tmp_path / "out"
    tokenmill_here("run", data, out, "--vocab-size", "300", "--val-fraction", "0.2",
                   "--format", "bin")  # fmt: skip
    tokens = out / "tokens"
    for args in (
        ("bin", tokens, tmp_path / "b"),
        ("pack", tokens, tmp_path / "p", "--seq-len", "8"),
    ):
        for fraction in ((), ("--val-fraction", "0.3")):
            result = tokenmill_here(*args, *fraction, check=False)
            assert result.returncode == 1, result.stderr
            last = result.stderr.strip().splitlines()[-1]
            assert last.startswith(
                f"Error: {tokens}/a.jsonl.parquet: encode split its documents by"
            )
            assert not args[2].exists()
    tokenmill_here("bin", tokens, tmp_path / "b", "--val-fraction", "0.2")
    for name in ("train.bin", "val.bin", "train.idx.npy", "val.idx.npy", "index.json"):
        assert (tmp_path / "b" / name).read_bytes() == (out / "bin" / name).read_bytes(), name
    # The library's run_bin and run_pack hold to it as the commands do.
    for write in (
        lambda: run_bin(tokens, tmp_path / "lib-b"),
        lambda: run_pack(tokens, tmp_path / "lib-p", 8, val_fraction=0.3),
    ):
        with pytest.raises(TokenmillError, match="encode split its documents by"):
            write()
    assert not (tmp_path / "lib-b").exists() and not (tmp_path / "lib-p").exists()


def test_standalone_bin_with_bos_writes_what_run_does(tmp_path):
    data = tmp_path / "data"
    write_shard(data / "a.jsonl", make_documents(40, seed=3))
    out = tmp_path / "out"
    tokenmill_here("run", data, out, "--vocab-size", "300", "--bos", "--format", "bin")
    tokenmill_here("bin", out / "tokens", tmp_path / "b", "--bos")
    names = sorted(p.name for p in (out / "bin").iterdir() if not p.name.startswith("."))
    assert "index.json" in names
    for name in names:
        assert (tmp_path / "b" / name).read_bytes() == (out / "bin" / name).read_bytes(), name
    assert json.loads((tmp_path / "b" / "index.json").read_text())["bos_id"] is not None


def test_bin_given_another_tokenizer_is_refused_with_or_without_bos(tmp_path):
    """`bin --tokenizer OTHER` without --bos was accepted (the tokenizer unused):
    one given is the shards' or refused, as `pack` and `bin --bos` refuse it."""
    from tokenmill import Tokenizer

    data = tmp_path / "data"
    write_shard(data / "a.jsonl", make_documents(20, seed=3))
    out = tmp_path / "out"
    tokenmill_here("run", data, out, "--vocab-size", "300")
    Tokenizer.train(["other text"], vocab_size=300).save(tmp_path / "other.json")
    for bos in ([], ["--bos"]):
        refused = tokenmill_here("bin", out / "tokens", tmp_path / "b", "--tokenizer",
                                 tmp_path / "other.json", *bos, check=False)  # fmt: skip
        assert refused.returncode == 1 and "not the tokenizer" in refused.stderr
        assert not (tmp_path / "b").exists()
    tokenmill_here("bin", out / "tokens", tmp_path / "b", "--tokenizer", out / "tokenizer.json")
    assert (tmp_path / "b" / "index.json").is_file()


def test_numpys_reading_of_a_folder_on_object_storage_is_one_line():
    """numpy's memmap, as nanoGPT reads, maps local files only: `check` reads
    such a folder with tokenmill's reader (Bin.local_only), and a direct call
    is refused naming it, by storage.is_remote as everywhere else."""
    with pytest.raises(TokenmillError, match=r"^s3://bucket/out/bin: numpy maps local files only$"):
        LAYOUT.framework_read("s3://bucket/out/bin", False)
    assert LAYOUT.local_only


def test_bos_with_a_tokenizer_lacking_it_is_the_same_line_in_every_command(tmp_path):
    """bin said "tokenizer has no special token '<|bos|>'", naming no option."""
    data = tmp_path / "data"
    write_shard(data / "a.jsonl", make_documents(20, seed=3))
    out = tmp_path / "out"
    tokenmill_here("run", data, out, "--vocab-size", "300")
    wanted = (
        f"Error: --bos: the tokenizer has no {BOS} special token (train it with --bos or "
        f"--special-token '{BOS}')\n"
    )
    for args in (
        ["bin", out / "tokens", tmp_path / "b", "--bos"],
        ["pack", out / "tokens", tmp_path / "p", "--seq-len", "64", "--bos"],
        *(
            ["run", data, tmp_path / "r", "--tokenizer", out / "tokenizer.json", "--bos", *layout]
            for layout in (["--pack", "64"], ["--format", "bin"])
        ),
    ):
        refused = tokenmill_here(*args, check=False)
        assert (refused.returncode, refused.stderr) == (1, wanted), args
    assert not [p for p in tmp_path.iterdir() if p.name in ("b", "p", "r")]
