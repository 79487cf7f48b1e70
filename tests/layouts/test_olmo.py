"""--format olmo: Dolma-style .npy token arrays with their .csv.gz metadata,
read back by OLMo-core's own reading functions (documents found by eos, and
by the metadata) and compared with the token shards."""

from __future__ import annotations

import csv
import gzip
import io
import json
import sys

import numpy as np
import pytest
from conftest import assert_one_line_error, make_documents, write_shard
from layoutdata import (
    FRACTION,
    NAMES,
    assert_trainer_reads_all,
    encoded_fixture,
    expected,
    shard_rows,
)
from layoutdata import write as write_layout
from runs import kill_when_paused, output_files, temporaries, tokenmill_here
from trainers import olmo_core_data_utils

import tokenmill as tm
from tokenmill.errors import TokenmillError
from tokenmill.layouts import TrainerMissing
from tokenmill.layouts.olmo import LAYOUT
from tokenmill.stages.tokens import token_shards
from tokenmill.tokenizer import BOS, Tokenizer

MERGED = ["part-0-00000.npy", "part-0-00000.csv.gz"]
DTYPES = {"small": np.uint16, "wide": np.uint32}


encoded = encoded_fixture(seed=5)  # (tokenizer, token shards) by tokenizer name


def write(tmp_path, tok, shards, **options):
    return write_layout(LAYOUT, tmp_path, tok, shards, **options)


def olmo_read(array, dtype, eos: int, bos: int | None = None) -> list[list[int]]:
    """Every document of an array by OLMo-core: the boundaries it finds by eos
    (and bos) must be those of the metadata CSV; each document read by its
    `load_array_slice`."""
    utils = olmo_core_data_utils()
    path = str(array)
    by_ids = list(
        utils.iter_document_indices(path, eos_token_id=eos, bos_token_id=bos, dtype=dtype)
    )
    by_csv = list(utils.iter_document_indices(path, use_array_if_local=False, dtype=dtype))
    assert by_ids == by_csv
    return [utils.load_array_slice(path, int(s), int(e), dtype).tolist() for s, e in by_csv]


def metadata_rows(path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(gzip.decompress(path.read_bytes()).decode())))


@pytest.mark.parametrize(("name", "bos"), [("small", False), ("small", True), ("wide", True)])
def test_olmo_core_reads_every_document(encoded, tmp_path, name, bos):
    tok, shards = encoded(name)
    folder, result = write(tmp_path, tok, shards, bos=bos, workers=2)
    assert result.files == [*MERGED, "index.json"]
    want = expected(tok, shards, bos=bos)
    assert max(map(max, want)) > (65535 if name == "wide" else 0)
    index = json.loads((folder / "index.json").read_text())
    assert index["dtype"] == np.dtype(DTYPES[name]).name
    bos_id = tok.special_id(BOS) if bos else None
    assert (index["eos_token_id"], index["bos_token_id"]) == (tok.eos_id, bos_id)
    array = folder / MERGED[0]
    assert array.stat().st_size == sum(map(len, want)) * np.dtype(DTYPES[name]).itemsize
    assert olmo_read(array, DTYPES[name], tok.eos_id, bos_id) == want
    # id, src, loc: the document's input shard and row there.
    rows = [(s.source, row) for s in shards for row, _ in shard_rows(s)]
    assert [r[2:] for r in metadata_rows(folder / MERGED[1])] == [
        [f"{src}:{row}", src, str(row)] for src, row in rows
    ]
    docs = list(LAYOUT.read(folder, False))
    assert [(d.source, d.row, d.ids.tolist()) for d in docs] == [
        (*r, ids) for r, ids in zip(rows, want, strict=True)
    ]
    assert result.documents == len(want) and result.tokens == sum(map(len, want))


@pytest.mark.parametrize("name", ["small", "wide"])
def test_framework_read_is_olmo_cores_reading(encoded, tmp_path, name):
    tok, shards = encoded(name)
    folder, _ = write(tmp_path, tok, shards, bos=True, val_fraction=FRACTION, per_shard=True)
    olmo_core_data_utils()  # OLMo-core's module, imported under a torch stand-in
    assert_trainer_reads_all(LAYOUT, folder, tok, shards)
    assert LAYOUT.recorded(folder) == {
        "tokenizer_sha256": tok.sha256,
        "vocab_size": str(tok.vocab_size),
        "eos_id": str(tok.eos_id),
        "bos_id": str(tok.special_id(BOS)),
    }


def test_framework_read_says_why_without_olmo_core(encoded, tmp_path, monkeypatch):
    tok, shards = encoded("small")
    folder, _ = write(tmp_path, tok, shards)
    monkeypatch.setitem(sys.modules, "olmo_core.data.utils", None)
    with pytest.raises(
        TrainerMissing, match=f"^{LAYOUT.reader} does not import: .*olmo_core.data.utils"
    ):
        LAYOUT.framework_read(folder, False)
    assert LAYOUT.recorded(folder)["bos_id"] == "null"  # written without --bos


def test_one_array_per_split(encoded, tmp_path):
    tok, shards = encoded("small")
    folder, result = write(tmp_path, tok, shards, val_fraction=FRACTION, workers=2)
    assert result.files == [f"{s}/{f}" for s in ("train", "val") for f in MERGED] + ["index.json"]
    sides = {side: expected(tok, shards, side) for side in ("train", "val")}
    assert sides["train"] and sides["val"]
    for side, want in sides.items():
        assert olmo_read(folder / side / MERGED[0], np.uint16, tok.eos_id) == want
    assert [(d.split, d.ids.tolist()) for d in LAYOUT.read(folder, True)] == [
        (side, ids) for side, docs in sides.items() for ids in docs
    ]


def test_one_array_per_shard(encoded, tmp_path):
    tok, shards = encoded("wide")
    folder, result = write(tmp_path, tok, shards, per_shard=True, workers=2)
    assert sorted(result.files) == sorted(
        [f"{n}{ext}" for n in NAMES for ext in (".npy", ".csv.gz")] + ["index.json"]
    )
    for shard in shards:
        array = folder / (shard.name.removesuffix(".parquet") + ".npy")
        assert olmo_read(array, np.uint32, tok.eos_id) == expected(tok, [shard])


def test_one_array_per_shard_and_split(encoded, tmp_path):
    tok, shards = encoded("small")
    folder, result = write(
        tmp_path,
        tok,
        shards,
        per_shard=True,
        val_fraction=FRACTION,
        bos=True,
        workers=2,
        executor="processes",
    )
    assert len(result.files) == 2 * 2 * len(shards) + 1
    bos = tok.special_id(BOS)
    for shard in shards:
        stem = shard.name.removesuffix(".parquet") + ".npy"
        for side in ("train", "val"):
            got = olmo_read(folder / side / stem, np.uint16, tok.eos_id, bos)
            assert got == expected(tok, [shard], side, bos=True)
    read = [d.split for d in LAYOUT.read(folder, True)]
    assert read == sorted(read)


def test_no_eos_shards_get_one_and_an_empty_text_is_just_that(encoded, tmp_path):
    tok, shards = encoded("small-no-eos")
    assert [] in [ids for _, ids in shard_rows(shards[0])]  # a.jsonl's empty text
    folder, _ = write(tmp_path, tok, shards)
    want = expected(tok, shards, eos_added=True)
    assert [tok.eos_id] in want
    assert olmo_read(folder / MERGED[0], np.uint16, tok.eos_id) == want


def test_same_bytes_whatever_the_workers_and_no_time_in_the_gzip(encoded, tmp_path):
    tok, shards = encoded("small")
    one, _ = write(tmp_path / "1", tok, shards, val_fraction=FRACTION, workers=1)
    two, _ = write(tmp_path / "2", tok, shards, val_fraction=FRACTION, workers=2)
    for name in ("index.json", *(f"{s}/{f}" for s in ("train", "val") for f in MERGED)):
        assert (one / name).read_bytes() == (two / name).read_bytes()
    head = (one / "train" / MERGED[1]).read_bytes()[:10]
    assert head[:3] == b"\x1f\x8b\x08" and not head[3] & 0x08  # gzip, deflate, no file name
    assert head[4:8] == bytes(4)  # no time


def test_a_killed_run_leaves_no_array_and_a_rerun_writes_the_same(encoded, tmp_path):
    data = encoded.data
    args = ["run", data, tmp_path / "out", "--format", "olmo", "--vocab-size", "300", "--bos"]
    args += ["--val-fraction", FRACTION, "--workers", 2]
    kill_when_paused(args, "olmo-write", 1, tmp_path)
    olmo = tmp_path / "out" / "olmo"
    assert temporaries(olmo) and not list(olmo.rglob("part-*"))
    tokenmill_here(*args)
    clean = ["run", data, tmp_path / "clean", *args[3:]]
    tokenmill_here(*clean)
    assert output_files(tmp_path / "out") == output_files(tmp_path / "clean")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    listed = {f["path"] for f in manifest["files"] if f["path"].startswith("olmo/")}
    assert listed == {f"olmo/{s}/{f}" for s in ("train", "val") for f in MERGED} | {
        "olmo/index.json"
    }
    tok = tm.load(tmp_path / "out" / "tokenizer.json")
    shards = token_shards(tmp_path / "out" / "tokens")
    for side in ("train", "val"):
        got = olmo_read(olmo / side / MERGED[0], np.uint16, tok.eos_id, tok.special_id(BOS))
        assert got == expected(tok, shards, side, bos=True)


def test_bos_needs_the_token(encoded, tmp_path):
    tok, shards = encoded("small")
    plain = Tokenizer.train(make_documents(30), vocab_size=300)
    with pytest.raises(TokenmillError, match=r"--bos: the tokenizer has no <\|bos\|>"):
        write(tmp_path, plain, shards, bos=True)


def test_owns_its_arrays_metadata_and_index():
    assert LAYOUT.owns("part-0-00000.npy") and LAYOUT.owns("train/sub/b.txt.csv.gz")
    assert LAYOUT.owns("index.json")
    assert not LAYOUT.owns("notes.txt") and not LAYOUT.owns("a.bin")


@pytest.mark.parametrize("brk", ["\n", "\r"], ids=["lf", "cr"])
def test_an_input_name_with_a_line_break_is_refused_before_any_work(cli, tmp_path, brk):
    """The name is in each of its rows of the .csv.gz, quoted over two lines,
    and OLMo-core reads that file line by line (text mode: \\r ends a line too),
    so iter_document_indices failed on a row cut in two; check passed it."""
    data, out = tmp_path / "data", tmp_path / "out"
    write_shard(data / "a.txt", ["hello world"])
    write_shard(data / f"x{brk}y.txt", ["more text"])
    result = cli("run", data, out, "--vocab-size", "270", "--format", "megatron,olmo", ok=False)
    assert_one_line_error(result, "y.txt: its name holds a line break", "OLMo-core", "rename it")
    assert not out.exists()
    cli("run", data, out, "--vocab-size", "270", "--format", "megatron")  # only olmo's CSV
