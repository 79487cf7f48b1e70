"""--format datatrove: the .ds, .ds.index and .ds.metadata files that
datatrove's DocumentTokenizer writes, read back by datatrove's own code (the
`datatrove` package: the merger's `load_doc_ends` and `get_data_reader` for
documents, `DatatroveFolderDataset`, nanotron's reader, for its windows), each
document equal to its token shard's row (after <|bos|> with --bos)."""

from __future__ import annotations

import sys
import types

import humanize
import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import make_documents
from layoutdata import framework_documents, write_nested_corpus
from realtext import GPT2_FILE
from runs import kill_when_paused, manifest, output_files, temporaries, tokenmill_here
from trainers import torch_stand_in

from tokenmill import Tokenizer, load
from tokenmill.cli import main
from tokenmill.layouts import LayoutJob, TrainerMissing
from tokenmill.layouts.datatrove import LAYOUT, short_count
from tokenmill.stages.split import is_val
from tokenmill.stages.tokens import shard_tokenizer, token_shards
from tokenmill.tokenizer import BOS


@pytest.fixture(scope="module")
def datatrove():
    """datatrove's readers, imported with torch stood in for."""
    with torch_stand_in():
        from datatrove.pipeline.tokens import merger
        from datatrove.utils import dataset
    return types.SimpleNamespace(
        load_doc_ends=merger.load_doc_ends,
        get_data_reader=merger.get_data_reader,
        DocumentTokenizerMerger=merger.DocumentTokenizerMerger,
        DatatroveFolderDataset=dataset.DatatroveFolderDataset,
    )


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """Token shards of a 300-id vocabulary with <|bos|>, its tokenizer.json beside them."""
    out = tmp_path_factory.mktemp("small")
    data = write_nested_corpus(out / "data")
    Tokenizer.train(make_documents(90, seed=3), vocab_size=300, special_tokens=[BOS]).save(
        out / "tokenizer.json"
    )
    invoke("encode", data, out / "tokens", "--tokenizer", out / "tokenizer.json")
    return out


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """GPT-2's ranks with <|bos|> at 70000: a vocabulary above 65536 ids; --no-eos."""
    out = tmp_path_factory.mktemp("wide")
    specials = {"<|endoftext|>": 50256, BOS: 70000}
    load(GPT2_FILE, pattern="gpt2", special_tokens=specials).save(out / "tokenizer.json")
    data = write_nested_corpus(out / "data")
    invoke("encode", data, out / "tokens", "--tokenizer", out / "tokenizer.json", "--no-eos")
    return out


def write(out, folder, names=None, **options):
    shards = token_shards(out / "tokens", names)
    job = LayoutJob(shards, folder, shard_tokenizer(shards[0]), **options)
    return LAYOUT.write(job)


def shard_rows(out, split=None, bos=None, eos=None):
    """Every token shard's rows in input order (those stages/split.py sends to
    `split`, at 0.3), [bos] first and [eos] last when given."""
    rows = []
    for shard in token_shards(out / "tokens"):
        table = pq.read_table(shard.path)
        val = is_val(shard.source, table["row"].to_numpy(), 0.3)
        keep = [None] * len(table) if split is None else np.where(val, "val", "train")
        rows += [
            [bos] * (bos is not None) + ids + [eos] * (eos is not None)
            for ids, side in zip(table["ids"].to_pylist(), keep, strict=True)
            if side == split
        ]
    return rows


def datatrove_documents(datatrove, ds):
    """The documents of `ds` as datatrove's merger reads them: the token size from
    .ds.metadata's first line, the ends from .ds.index, the bytes of each document."""
    tokenizer, size = (ds.parent / f"{ds.name}.metadata").read_text().splitlines()[0].split("|")
    assert tokenizer == "tokenizer.json"
    ends = datatrove.load_doc_ends(open(ds.parent / f"{ds.name}.index", "rb"))
    reader = datatrove.get_data_reader(open(ds, "rb"), ends, nb_bytes=int(size))
    dtype = "<u4" if size == "4" else "<u2"
    return [np.frombuffer(doc, dtype).tolist() for doc in reader]


def windows(datatrove, folder, seq_len, token_size):
    """Every window of DatatroveFolderDataset (what nanotron trains on), in order."""
    dataset = datatrove.DatatroveFolderDataset(str(folder), seq_len=seq_len, token_size=token_size)
    return [dataset[i]["input_ids"].tolist() for i in range(len(dataset))]


def cut(stream, size):
    """`stream` in pieces of `size`, the rest dropped."""
    return [stream[i : i + size] for i in range(0, len(stream) - size + 1, size)]


def test_merged_uint16_read_by_datatrove(datatrove, small, tmp_path):
    result = write(small, tmp_path)
    assert result.files == ["000_corpus.ds", "000_corpus.ds.index", "000_corpus.ds.metadata"]
    assert sorted(p.name for p in tmp_path.iterdir()) == result.files
    rows = shard_rows(small)
    ds = tmp_path / "000_corpus.ds"
    assert datatrove_documents(datatrove, ds) == rows
    stream = [i for row in rows for i in row]
    assert ds.stat().st_size == 2 * len(stream)
    assert (result.documents, result.tokens, result.rows) == (
        len(rows), len(stream), {"000_corpus.ds": len(rows)}
    )  # fmt: skip
    lines = (tmp_path / "000_corpus.ds.metadata").read_text().split("\n")
    assert lines == ["tokenizer.json|2", str(len(stream)), humanize.metric(len(stream), "T")]
    # nanotron's windows of seq_len + 1 ids: the stream cut from the start, the rest dropped.
    assert windows(datatrove, tmp_path, 15, 2) == cut(stream, 16)
    assert [d.ids.tolist() for d in LAYOUT.read(tmp_path, False)] == rows
    assert {d.split for d in LAYOUT.read(tmp_path, False)} == {""}


def test_bos_before_each_document(datatrove, small, tmp_path):
    bos = shard_tokenizer(token_shards(small / "tokens")[0]).special_id(BOS)
    write(small, tmp_path, bos=True)
    assert datatrove_documents(datatrove, tmp_path / "000_corpus.ds") == shard_rows(small, bos=bos)


def test_wide_vocabulary_is_uint32(datatrove, wide, tmp_path):
    """Above 65536 ids, 4 bytes per id (ids above 65535 kept); the shards, encoded
    with --no-eos, get an <|endoftext|> after each document (nanotron's windows
    run across documents): an empty one is <|bos|><|endoftext|>."""
    result = write(wide, tmp_path, bos=True)
    rows = shard_rows(wide, bos=70000, eos=50256)
    assert [70000, 50256] in rows and all(50256 not in row[:-1] for row in rows)
    assert datatrove_documents(datatrove, tmp_path / "000_corpus.ds") == rows
    assert result.summary.endswith("uint32")
    assert (tmp_path / "000_corpus.ds.metadata").read_text().startswith("tokenizer.json|4\n")
    stream = [i for row in rows for i in row]
    assert windows(datatrove, tmp_path, 7, 4) == cut(stream, 8)
    assert [d.ids.tolist() for d in LAYOUT.read(tmp_path, False)] == rows


@pytest.mark.parametrize("name", ["small", "wide"])
def test_framework_read_is_datatroves_reading(datatrove, small, wide, tmp_path, name):
    out = {"small": small, "wide": wide}[name]
    write(out, tmp_path, bos=True, val_fraction=0.3)
    with torch_stand_in():
        got = framework_documents(LAYOUT, tmp_path, split=True)
    tok = shard_tokenizer(token_shards(out / "tokens")[0])
    eos = tok.eos_id if name == "wide" else None  # wide: encoded with --no-eos
    assert got == [
        (side, row)
        for side in ("train", "val")
        for row in shard_rows(out, side, tok.special_id(BOS), eos)
    ]
    size = "4" if name == "wide" else "2"
    assert LAYOUT.recorded(tmp_path) == {"tokenizer": "tokenizer.json", "token_size": size}


def test_framework_read_says_why_without_datatrove(small, tmp_path, monkeypatch):
    write(small, tmp_path)
    monkeypatch.setitem(sys.modules, "datatrove.pipeline.tokens.merger", None)
    with pytest.raises(
        TrainerMissing,
        match=f"^{LAYOUT.reader} does not import: .*datatrove.pipeline.tokens.merger",
    ):
        LAYOUT.framework_read(tmp_path, False)


def test_split_writes_a_folder_per_side(datatrove, small, tmp_path):
    result = write(small, tmp_path, val_fraction=0.3)
    assert result.files == [
        f"{side}/000_corpus.ds{suffix}"
        for side in ("train", "val")
        for suffix in ("", ".index", ".metadata")
    ]
    for side in ("train", "val"):
        rows = shard_rows(small, split=side)
        assert rows
        assert datatrove_documents(datatrove, tmp_path / side / "000_corpus.ds") == rows
        stream = [i for row in rows for i in row]
        assert windows(datatrove, tmp_path / side, 3, 2) == cut(stream, 4)
        assert [d.ids.tolist() for d in LAYOUT.read(tmp_path, True) if d.split == side] == rows
    assert result.documents == len(shard_rows(small))


def test_per_shard_files_merge_as_datatrove_merges_them(datatrove, small, tmp_path):
    """One set per token shard, named after it (DATA's subfolders kept); datatrove's
    own merger, not shuffling, makes of a folder's sets the bytes of the merged layout."""
    result = write(small, tmp_path / "per", per_shard=True)
    assert [f for f in result.files if f.endswith(".ds")] == [
        "a.jsonl.ds", "c.txt.ds", "code/b.jsonl.ds"
    ]  # fmt: skip
    for shard in token_shards(small / "tokens"):
        ds = tmp_path / "per" / (shard.name.removesuffix(".parquet") + ".ds")
        assert datatrove_documents(datatrove, ds) == pq.read_table(shard.path)["ids"].to_pylist()
    # The merger, as DatatroveFolderDataset, lists one folder's *.ds, not its subfolders'.
    write(small, tmp_path / "merged", names=["a.jsonl.parquet", "c.txt.parquet"])
    datatrove.DocumentTokenizerMerger(
        str(tmp_path / "per"), str(tmp_path / "again"), "corpus", shuffle=False, progress=False
    ).run()
    for suffix in ("", ".index", ".metadata"):
        name = f"000_corpus.ds{suffix}"
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "merged" / name).read_bytes()


def test_per_shard_split(datatrove, small, tmp_path):
    result = write(small, tmp_path, per_shard=True, val_fraction=0.3)
    assert "val/code/b.jsonl.ds" in result.files and "train/a.jsonl.ds.index" in result.files
    for shard in token_shards(small / "tokens"):
        table = pq.read_table(shard.path)
        val = is_val(shard.source, table["row"].to_numpy(), 0.3)
        rows = table["ids"].to_pylist()
        for side, keep in (("train", ~val), ("val", val)):
            ds = tmp_path / side / (shard.name.removesuffix(".parquet") + ".ds")
            assert datatrove_documents(datatrove, ds) == [
                ids for ids, k in zip(rows, keep, strict=True) if k
            ]


def test_same_bytes_on_any_worker_count(small, tmp_path):
    for workers in (1, 3):
        write(small, tmp_path / str(workers), workers=workers, val_fraction=0.3, bos=True)
    for path in (tmp_path / "1").rglob("*"):
        if path.is_file():
            assert (
                path.read_bytes()
                == (tmp_path / "3" / path.relative_to(tmp_path / "1")).read_bytes()
            )


def test_owns_only_its_files():
    assert all(map(LAYOUT.owns, ["000_corpus.ds", "val/x.ds.index", "code/b.jsonl.ds.metadata"]))
    assert not any(map(LAYOUT.owns, ["000_corpus.dsx", "notes.txt", "x.ds.loss"]))


@pytest.mark.parametrize("n", [0, 7, 999, 1000, 99_950, 999_499, 999_999, 123_456_789, 2**40])
def test_short_count_is_humanize_metric(n):
    assert short_count(n) == humanize.metric(n, "T")


RUN = ("--vocab-size", 300, "--workers", 2, "--format", "datatrove", "--bos", "--val-fraction", 0.3)


def test_run_killed_while_writing_resumes_to_the_same_files(datatrove, tmp_path):
    """`run --format datatrove`, SIGKILLed with its .ds temporaries open, leaves no
    .ds under its name; the rerun writes what an uninterrupted run writes, which
    datatrove reads back as the token shards' rows, and the manifest lists."""
    data = write_nested_corpus(tmp_path / "data")
    tokenmill_here("run", data, tmp_path / "clean", *RUN)
    out = tmp_path / "out"
    kill_when_paused(["run", data, out, *RUN], "datatrove-write", 1, tmp_path)
    assert temporaries(out / "datatrove") and not list((out / "datatrove").rglob("*.ds"))
    tokenmill_here("run", data, out, *RUN)
    assert temporaries(out) == []
    assert output_files(out) == output_files(tmp_path / "clean")
    assert tokenmill_here("verify", out).returncode == 0
    listed = {f["path"] for f in manifest(out)["files"] if f["path"].startswith("datatrove/")}
    assert listed == {
        f"datatrove/{side}/000_corpus.ds{suffix}"
        for side in ("train", "val")
        for suffix in ("", ".index", ".metadata")
    }
    bos = Tokenizer.load(out / "tokenizer.json").special_id(BOS)
    for side in ("train", "val"):
        expected = shard_rows(out, split=side, bos=bos)
        assert (
            datatrove_documents(datatrove, out / "datatrove" / side / "000_corpus.ds") == expected
        )
