"""--format megatron: Megatron's indexed dataset (.bin + .idx), read back by
megatron-core's own IndexedDataset and compared with the token shards."""

from __future__ import annotations

import json
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import make_documents
from layoutdata import FRACTION, NAMES, assert_trainer_reads_all, encoded_fixture, expected
from layoutdata import write as write_layout
from trainers import megatron_indexed_dataset

from tokenmill.errors import TokenmillError
from tokenmill.layouts import TrainerMissing
from tokenmill.layouts.megatron import LAYOUT
from tokenmill.stages.tokens import token_shards
from tokenmill.tokenizer import BOS, Tokenizer

DTYPES = {"small": np.uint16, "edge": np.int32, "wide": np.int32}


encoded = encoded_fixture(seed=3)  # (tokenizer, token shards) by tokenizer name


def write(tmp_path, tok, shards, **options):
    return write_layout(LAYOUT, tmp_path, tok, shards, **options)


def megatron_read(prefix, dtype=None) -> list[list[int]]:
    """Every document of a pair, by megatron-core's IndexedDataset: one sequence each."""
    indexed = megatron_indexed_dataset()
    dataset = indexed.IndexedDataset(str(prefix))
    if dtype is not None:
        assert dataset.index.dtype == dtype
    n = len(dataset)
    assert dataset.document_indices.tolist() == list(range(n + 1))
    return [dataset[i].tolist() for i in range(n)]


@pytest.mark.parametrize(
    ("name", "bos"), [("small", False), ("small", True), ("edge", True), ("wide", True)]
)
def test_megatron_core_reads_every_document(encoded, tmp_path, name, bos):
    tok, shards = encoded(name)
    folder, result = write(tmp_path, tok, shards, bos=bos, workers=2)
    assert result.files == ["corpus_text_document.bin", "corpus_text_document.idx"]
    want = expected(tok, shards, bos=bos)
    assert max(map(max, want)) > (65535 if name == "wide" else 0)
    assert megatron_read(folder / "corpus_text_document", DTYPES[name]) == want
    assert [d.ids.tolist() for d in LAYOUT.read(folder, False)] == want
    assert result.documents == len(want) and result.tokens == sum(map(len, want))


@pytest.mark.parametrize("name", ["small", "edge", "wide"])
def test_framework_read_is_megatron_cores_reading(encoded, tmp_path, name):
    tok, shards = encoded(name)
    folder, _ = write(tmp_path, tok, shards, bos=True, val_fraction=FRACTION)
    megatron_indexed_dataset()  # megatron-core's module, imported under a torch stand-in
    assert_trainer_reads_all(LAYOUT, folder, tok, shards)
    assert LAYOUT.recorded(folder) == {}  # a pair has no place for the tokenizer


def test_framework_read_says_why_without_megatron_core(encoded, tmp_path, monkeypatch):
    tok, shards = encoded("small")
    folder, _ = write(tmp_path, tok, shards)
    monkeypatch.setitem(sys.modules, "megatron.core.datasets.indexed_dataset", None)
    with pytest.raises(
        TrainerMissing,
        match=f"^{LAYOUT.reader} does not import: .*megatron.core.datasets.indexed_dataset",
    ):
        LAYOUT.framework_read(folder, False)


@pytest.mark.parametrize("name", ["small", "wide"])
def test_same_bytes_as_megatron_cores_builder(encoded, tmp_path, name):
    tok, shards = encoded(name)
    folder, _ = write(tmp_path, tok, shards, bos=True, workers=2)
    indexed = megatron_indexed_dataset()
    dtype = indexed.DType.optimal_dtype(tok.vocab_size)  # as preprocess_data.py picks it
    builder = indexed.IndexedDatasetBuilder(str(tmp_path / "ref.bin"), dtype=dtype)
    for doc in expected(tok, shards, bos=True):
        builder.add_document(np.array(doc), [len(doc)])
    builder.finalize(str(tmp_path / "ref.idx"))
    for ext in (".bin", ".idx"):
        ours = (folder / f"corpus_text_document{ext}").read_bytes()
        assert ours == (tmp_path / f"ref{ext}").read_bytes()


def test_one_pair_per_split(encoded, tmp_path):
    tok, shards = encoded("small")
    folder, result = write(tmp_path, tok, shards, val_fraction=FRACTION, workers=2)
    prefixes = ["train_text_document", "val_text_document"]
    assert result.files == [f"{p}{ext}" for p in prefixes for ext in (".bin", ".idx")]
    sides = {side: expected(tok, shards, side) for side in ("train", "val")}
    assert sides["train"] and sides["val"]
    for side, want in sides.items():
        assert megatron_read(folder / f"{side}_text_document") == want
    assert [(d.split, d.ids.tolist()) for d in LAYOUT.read(folder, True)] == [
        (side, ids) for side, docs in sides.items() for ids in docs
    ]


@pytest.mark.parametrize("executor", ["threads", "processes"])
def test_one_pair_per_shard(encoded, tmp_path, executor):
    tok, shards = encoded("small")
    folder, result = write(tmp_path, tok, shards, per_shard=True, workers=2, executor=executor)
    assert sorted(result.files) == [
        f"{n}_text_document{ext}" for n in NAMES for ext in (".bin", ".idx")
    ]
    for shard in shards:
        prefix = folder / (shard.name.removesuffix(".parquet") + "_text_document")
        assert megatron_read(prefix) == expected(tok, [shard])


def test_one_pair_per_shard_and_split(encoded, tmp_path):
    tok, shards = encoded("small")
    folder, result = write(tmp_path, tok, shards, per_shard=True, val_fraction=FRACTION)
    assert len(result.files) == 2 * 2 * len(shards)
    for shard in shards:
        stem = shard.name.removesuffix(".parquet") + "_text_document"
        for side in ("train", "val"):
            assert megatron_read(folder / side / stem) == expected(tok, [shard], side)
    assert {d.split for d in LAYOUT.read(folder, True)} == {"train", "val"}


def test_no_eos_shards_get_one_and_an_empty_text_is_just_that(encoded, tmp_path):
    tok, shards = encoded("small-no-eos")
    assert [] in expected(tok, shards[:1])  # a.jsonl's empty text, an empty row
    folder, _ = write(tmp_path, tok, shards, bos=True)
    want = expected(tok, shards, bos=True, eos_added=True)
    assert [tok.special_id(BOS), tok.eos_id] in want
    assert megatron_read(folder / "corpus_text_document") == want


def test_shards_without_recorded_options_are_read_for_their_ends(encoded, tmp_path):
    """A token shard whose encode options are unknown: a row ending in
    <|endoftext|> keeps it, one not gets one."""
    tok, shards = encoded("small")
    eos = tok.eos_id
    table = pq.read_table(shards[0].path).slice(0, 3)
    rows = [[5, 6, eos], [], [7]]
    table = table.set_column(1, "ids", pa.array(rows, table.schema.field("ids").type))
    table = table.set_column(2, "n_tokens", pa.array([3, 0, 1], pa.uint32()))
    meta = {k: v for k, v in table.schema.metadata.items() if k != b"tokenmill.state"}
    table = table.replace_schema_metadata(meta)
    (tmp_path / "tokens").mkdir()
    pq.write_table(table, tmp_path / "tokens" / "x.parquet")
    folder, _ = write(tmp_path, tok, token_shards(tmp_path / "tokens"))
    assert megatron_read(folder / "corpus_text_document") == [[5, 6, eos], [eos], [7, eos]]


def test_workers_do_not_change_the_bytes(encoded, tmp_path):
    tok, shards = encoded("small")
    one, _ = write(tmp_path / "1", tok, shards, val_fraction=FRACTION, workers=1)
    two, _ = write(tmp_path / "2", tok, shards, val_fraction=FRACTION, workers=2)
    for name in ("train_text_document.bin", "train_text_document.idx", "val_text_document.bin"):
        assert (one / name).read_bytes() == (two / name).read_bytes()


def test_bos_needs_the_token(encoded, tmp_path):
    tok, shards = encoded("small")
    plain = Tokenizer.train(make_documents(30), vocab_size=300)
    assert plain.sha256 != tok.sha256
    with pytest.raises(TokenmillError, match=r"--bos: the tokenizer has no <\|bos\|>"):
        write(tmp_path, plain, shards, bos=True)


def test_owns_its_pairs_only():
    assert LAYOUT.owns("corpus_text_document.bin")
    assert LAYOUT.owns("train/sub/b.txt_text_document.idx")
    assert not LAYOUT.owns("index.json")
    assert not LAYOUT.owns("corpus.bin")


@pytest.mark.parametrize("per_shard", [False, True])
def test_run_format_megatron(encoded, cli, tmp_path, per_shard):
    out = tmp_path / "out"
    args = ["--vocab-size", "300", "--bos", "--val-fraction", FRACTION, "--format", "megatron"]
    cli("run", encoded.data, out, *args, *(["--per-shard"] if per_shard else []))
    tok = Tokenizer.load(out / "tokenizer.json")
    shards = token_shards(out / "tokens")
    stems = [n + "_text_document" for n in NAMES] if per_shard else ["_text_document"]
    want = {
        f"megatron/{side}{'/' if per_shard else ''}{stem}{ext}"
        for side in ("train", "val")
        for stem in stems
        for ext in (".bin", ".idx")
    }
    manifest = json.loads((out / "manifest.json").read_text())
    assert {e["path"] for e in manifest["files"] if e["path"].startswith("megatron/")} == want
    for side in ("train", "val"):
        if per_shard:
            got = [megatron_read(out / "megatron" / side / stem) for stem in stems]
            assert got == [expected(tok, [s], side, bos=True) for s in shards]
        else:
            prefix = out / "megatron" / f"{side}_text_document"
            assert megatron_read(prefix) == expected(tok, shards, side, bos=True)
