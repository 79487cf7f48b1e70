"""Arrow IPC inputs (issue 16): `.arrow` and `.feather` in the file format
(footer) and the stream format (as Hugging Face `datasets` writes), and
folders saved by `datasets` read as the dataset: its .arrow files in
state.json's order, its JSON files listed as metadata, never read. Documents
decode back exactly; a corrupt or truncated file (a stream without its
end-of-stream marker, a file without its footer) is one line, or a skip
counting the documents it is known to hold."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from conftest import make_documents
from runs import manifest, temporaries, tokenmill_here

from tokenmill.errors import TokenmillError
from tokenmill.io.columns import has_column, read_column
from tokenmill.io.inputs import DATASETS_METADATA, find_inputs
from tokenmill.io.readers import read_batches, shard_format, skipped_file_documents
from tokenmill.tokenizer import Tokenizer

RUN = ("--vocab-size", "300", "--workers", "1")
DOCS = make_documents(500, seed=16)

datasets.disable_progress_bars()


def write_ipc(path: Path, table: pa.Table, layout: str, batch: int = 100) -> Path:
    """`table` as Arrow IPC in the file layout (footer) or the stream layout."""
    new = pa.ipc.new_file if layout == "file" else pa.ipc.new_stream
    with pa.OSFile(str(path), "wb") as f, new(f, table.schema) as w:
        for b in table.to_batches(max_chunksize=batch):
            w.write_batch(b)
    return path


def read_docs(path: Path, **kw) -> tuple[list[int], list[str]]:
    rows, docs = [], []
    for r, d in read_batches(path, **kw):
        rows += r.to_pylist()
        docs += d.to_pylist()
    return rows, docs


def decoded(out: Path) -> dict[str, list[str]]:
    """Each input's documents decoded from its token shard, in row order."""
    tok = Tokenizer.load(out / "tokenizer.json")
    texts = {}
    for entry in manifest(out)["outputs"]:
        table = pq.read_table(out / entry["path"]).sort_by("row")
        rows = table["ids"].to_pylist()
        assert all(ids[-1] == tok.eos_id for ids in rows)
        texts[entry["shard"]] = [tok.decode(ids[:-1]) for ids in rows]
    return texts


@pytest.mark.parametrize(
    ("name", "layout"),
    [("a.feather", "file"), ("b.arrow", "stream"), ("c.arrow", "file"), ("D.FEATHER", "stream")],
)
def test_both_layouts_under_both_suffixes_read_in_slices_of_batch_rows(tmp_path, name, layout):
    table = pa.table({"n": range(len(DOCS)), "text": DOCS})
    path = write_ipc(tmp_path / name, table, layout, batch=100)
    assert shard_format(path) == "ipc"
    sizes = [len(d) for _, d in read_batches(path, batch_rows=32)]
    assert max(sizes) == 32 and sum(sizes) == len(DOCS)  # 100-row record batches, sliced
    assert read_docs(path, batch_rows=32) == (list(range(len(DOCS))), DOCS)
    assert has_column(path, "n") and not has_column(path, "source")
    ns = [v for a in read_column(path, "n", batch_rows=32) for v in a.to_pylist()]
    assert ns == [str(i) for i in range(len(DOCS))]


def test_every_kind_decodes_back_exactly_after_a_run(tmp_path, cli):
    data = tmp_path / "data"
    data.mkdir()
    parts = np.array_split(np.arange(len(DOCS)), 4)
    docs = [[DOCS[i] for i in p] for p in parts]
    write_ipc(data / "stream.arrow", pa.table({"text": docs[0]}), "stream")
    write_ipc(data / "file.arrow", pa.table({"text": docs[1]}), "file")
    feather.write_feather(pa.table({"text": docs[2]}), data / "lz4.feather")  # compressed
    datasets.Dataset.from_dict({"text": docs[3]}).save_to_disk(data / "saved", num_shards=2)
    cli("run", data, tmp_path / "out", *RUN)
    got = decoded(tmp_path / "out")
    assert got["stream.arrow"] == docs[0] and got["file.arrow"] == docs[1]
    assert got["lz4.feather"] == docs[2]
    saved = got["saved/data-00000-of-00002.arrow"] + got["saved/data-00001-of-00002.arrow"]
    assert saved == docs[3]


def test_a_dataset_folder_is_read_in_state_json_order(tmp_path):
    folder = tmp_path / "saved"
    datasets.Dataset.from_dict({"text": DOCS}).save_to_disk(folder, num_shards=3)
    # Listed order against sorted names: c, a, b.
    names = ["c.arrow", "a.arrow", "b.arrow"]
    state = json.loads((folder / "state.json").read_text())
    for entry, new in zip(state["_data_files"], names, strict=True):
        (folder / entry["filename"]).rename(folder / new)
        entry["filename"] = new
    (folder / "state.json").write_text(json.dumps(state))
    (folder / "cache-0123.arrow").write_bytes(b"a map() cache, not the dataset")
    (folder / "notes.txt").write_text("not the dataset either\n")
    inputs = find_inputs(tmp_path)
    assert [s.name for s in inputs.shards] == [f"saved/{n}" for n in names]
    assert sorted(inputs.not_read, key=lambda e: e["path"]) == [
        {"path": "saved/cache-0123.arrow", "reason": "not in the dataset's state.json"},
        {"path": "saved/dataset_info.json", "reason": DATASETS_METADATA},
        {"path": "saved/notes.txt", "reason": "not in the dataset's state.json"},
        {"path": "saved/state.json", "reason": DATASETS_METADATA},
    ]
    docs = [d for s in inputs.shards for d in read_docs(s.path)[1]]
    assert docs == DOCS
    (folder / "b.arrow").unlink()
    with pytest.raises(TokenmillError, match=r"b\.arrow: listed in .*state\.json but missing"):
        find_inputs(tmp_path)


def test_a_dataset_dict_folder_reads_its_splits_never_its_metadata(tmp_path, cli):
    train, test = DOCS[:400], DOCS[400:]
    source = [f"src{i % 3}" for i in range(len(train))]
    dd = datasets.DatasetDict(
        train=datasets.Dataset.from_dict({"text": train, "source": source}),
        test=datasets.Dataset.from_dict({"text": test, "source": ["t"] * len(test)}),
    )
    dd.save_to_disk(tmp_path / "dd", num_shards={"train": 2, "test": 1})
    out = tmp_path / "out"
    cli("run", tmp_path / "dd", out, *RUN)
    m = manifest(out)
    assert m["documents"] == len(DOCS)
    metadata = {e["path"] for e in m["not_read"] if e["reason"] == DATASETS_METADATA}
    assert metadata == {
        "dataset_dict.json",
        *(f"{s}/{f}" for s in ("test", "train") for f in ("dataset_info.json", "state.json")),
    }
    assert {e["path"] for e in m["outputs"]} == {
        "tokens/test/data-00000-of-00001.arrow.parquet",
        "tokens/train/data-00000-of-00002.arrow.parquet",
        "tokens/train/data-00001-of-00002.arrow.parquet",
    }
    got = decoded(out)
    assert got["test/data-00000-of-00001.arrow"] == test
    assert got["train/data-00000-of-00002.arrow"] + got["train/data-00001-of-00002.arrow"] == train
    shard = out / "tokens/train/data-00001-of-00002.arrow.parquet"
    assert cli("decode", "--shard", shard, "--row", 5).stdout_bytes == train[205].encode()
    # The source column reaches stats through the same reader.
    assert "src2" in cli("stats", out).output


def test_a_missing_or_nested_text_column(tmp_path):
    meta = pa.array([{"content": d} for d in DOCS[:50]])
    path = write_ipc(tmp_path / "n.arrow", pa.table({"id": range(50), "meta": meta}), "stream")
    assert read_docs(path, text_column="meta.content")[1] == DOCS[:50]
    with pytest.raises(TokenmillError) as e:
        read_docs(path)
    assert str(e.value) == (
        f"{path}: no column 'text' (columns: id, meta.content); use --text-column"
    )


# What ends an IPC stream: a continuation marker and a message length of 0;
# before Arrow 0.15, only the zero length.
END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"


@pytest.mark.filterwarnings("ignore:Feather V1 files are deprecated")
def test_a_file_of_another_format_under_an_ipc_name_says_which(tmp_path):
    """Parquet named .arrow and Feather version 1 are named as what they are,
    not as a message length PyArrow read from their first bytes."""
    table = pa.table({"text": ["a document", "another"]})
    pq.write_table(table, tmp_path / "parquet.arrow")
    feather.write_feather(table, tmp_path / "old.feather", version=1)
    with pytest.raises(TokenmillError) as e:
        read_docs(tmp_path / "parquet.arrow")
    why = "a Parquet file, not Arrow IPC: name it .parquet"
    assert str(e.value) == f"{tmp_path / 'parquet.arrow'}: cannot read ({why})"
    with pytest.raises(TokenmillError, match=r"old\.feather: cannot read \(Feather version 1 "):
        read_docs(tmp_path / "old.feather")


def test_a_stream_in_the_legacy_format_ends_at_its_older_marker(tmp_path):
    table = pa.table({"text": DOCS})
    options = pa.ipc.IpcWriteOptions(use_legacy_format=True)
    path = tmp_path / "legacy.arrow"
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, table.schema, options=options) as w:
        for b in table.to_batches(max_chunksize=100):
            w.write_batch(b)
    assert path.read_bytes().endswith(bytes(4)) and not path.read_bytes().endswith(END_OF_STREAM)
    assert read_docs(path)[1] == DOCS
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(TokenmillError, match=r"legacy\.arrow: cannot read \(.*end-of-stream"):
        read_docs(path)


def bad_offsets_batch() -> pa.RecordBatch:
    """Three strings whose offsets run past their data: written as is, PyArrow reads it back
    without a word."""
    offsets = pa.py_buffer(np.array([0, 3, 100_000, 6], np.int32).tobytes())
    text = pa.Array.from_buffers(pa.string(), 3, [None, offsets, pa.py_buffer(b"abcdef")])
    return pa.record_batch([text], names=["text"])


def corrupt(path: Path, how: str) -> dict:
    """Write a bad .arrow file; returns the skip record `--on-error skip` must give."""
    table = pa.table({"text": DOCS})
    if how == "truncated stream":  # five 100-row batches, cut inside the fourth
        three, four = (write_ipc(path, table[: k * 100], "stream").stat().st_size for k in (3, 4))
        whole = write_ipc(path, table, "stream").read_bytes()
        path.write_bytes(whole[: (three + four) // 2])
        return {"documents": 300, "lower_bound": True}
    if how == "stream cut at a batch end":  # three whole batches, no end-of-stream marker
        three = write_ipc(path, table[:300], "stream").read_bytes()
        whole = write_ipc(path, table, "stream").read_bytes()
        assert whole.startswith(three[:-8]) and three.endswith(END_OF_STREAM)
        path.write_bytes(whole[: len(three) - 8])
        return {"documents": 300, "lower_bound": True}
    if how == "streams joined":  # `cat a.arrow b.arrow`: the second went unread
        whole = write_ipc(path, table[:300], "stream").read_bytes()
        path.write_bytes(whole + whole)
        return {"documents": 300, "lower_bound": True}
    if how == "truncated file":  # the footer gone: nothing known
        whole = write_ipc(path, table, "file").read_bytes()
        path.write_bytes(whole[: len(whole) // 2])
        return {"documents": 0, "lower_bound": True}
    if how == "bad offsets":  # the footer reads: its count is exact
        with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, table.schema) as w:
            w.write_batch(table.to_batches()[0].slice(0, 10))
            w.write_batch(bad_offsets_batch())
        return {"documents": 13}
    path.write_bytes(b"not Arrow at all\n" * 10)
    return {"documents": 0, "lower_bound": True}


@pytest.mark.parametrize(
    "how",
    [
        "truncated stream",
        "stream cut at a batch end",
        "streams joined",
        "truncated file",
        "bad offsets",
        "garbage",
    ],
)
def test_a_corrupt_arrow_file_is_one_line_or_an_accounted_skip(tmp_path, how):
    data = tmp_path / "data"
    data.mkdir()
    write_ipc(data / "good.arrow", pa.table({"text": DOCS[:20]}), "stream")
    known = corrupt(data / "bad.arrow", how)
    assert skipped_file_documents(data / "bad.arrow", known["documents"]) == known
    out = tmp_path / "out"
    result = tokenmill_here("run", data, out, *RUN, check=False)
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: {data / 'bad.arrow'}: cannot read (")
    assert "Traceback" not in result.stderr
    assert not (out / "tokens/bad.arrow.parquet").exists() and not temporaries(out)
    tokenmill_here("run", data, out, *RUN, "--on-error", "skip")
    m = manifest(out)
    (skip,) = m["skipped"]
    assert skip["shard"] == "bad.arrow" and skip["row"] is None
    assert {k: v for k, v in skip.items() if k in ("documents", "lower_bound")} == known
    assert m["documents"] == 20
