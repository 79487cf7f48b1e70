"""Token shards (and packed shards) load with Hugging Face datasets'
`load_dataset("parquet", data_files=...)` as they are written: the same rows,
the same ids (read back with pyarrow, and encoded again from the documents),
the id type kept (uint16, uint32 above 65536 ids)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from realtext import GPT2_FILE, SAMPLE_DIR, iter_sample_documents

from tokenmill.cli import main
from tokenmill.io.inputs import output_name
from tokenmill.tokenizer import BOS, Tokenizer

# Everything is local; offline mode makes sure nothing is looked up.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def load(data_files, cache: Path, **options):
    """The README's call; the cache under the test's folder, not ~/.cache."""
    import datasets

    datasets.disable_progress_bars()
    return datasets.load_dataset(
        "parquet", data_files=data_files, split="train", cache_dir=str(cache), **options
    )


def read_rows(paths: list[Path]) -> list[dict]:
    """The rows of the files, in order, read with pyarrow alone."""
    return [row for p in paths for row in pq.read_table(p).to_pylist()]


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "out"
    invoke(
        "run", SAMPLE_DIR, out, "--vocab-size", 2000, "--bos", "--pack", 512, "--workers", 2,
    )  # fmt: skip
    return Tokenizer.load(out / "tokenizer.json"), out


def test_token_shards_load_with_the_same_rows_and_ids(sample_run, tmp_path):
    tok, out = sample_run
    shards = sorted((out / "tokens").glob("*.parquet"))
    ds = load(str(out / "tokens" / "**" / "*.parquet"), tmp_path / "cache")  # the README's glob
    assert ds.column_names == ["row", "ids", "n_tokens"]
    assert ds.features["ids"].feature.dtype == "uint16"
    manifest = json.loads((out / "manifest.json").read_text())
    assert ds.num_rows == manifest["documents"] > 2000
    written = read_rows(shards)
    assert ds.to_list() == written
    # and they are the ids of the documents, shard by shard in file order
    by_shard: dict[str, list[str]] = {}
    for name, text in iter_sample_documents():
        by_shard.setdefault(name, []).append(text)
    texts = {output_name(name): docs for name, docs in by_shard.items()}
    documents = [text for p in shards for text in texts[p.name]]
    assert ds["ids"] == [tok.encode(text, eos=True) for text in documents]
    assert ds["n_tokens"] == [len(ids) for ids in ds["ids"]]


def test_one_split_per_shard_and_streaming(sample_run, tmp_path):
    _, out = sample_run
    shards = sorted((out / "tokens").glob("*.parquet"))
    import datasets

    # split names are word characters only: one per shard, by position
    splits = datasets.load_dataset(
        "parquet",
        data_files={f"shard{i}": str(p) for i, p in enumerate(shards)},
        cache_dir=str(tmp_path / "cache"),
    )
    assert sorted(splits) == sorted(f"shard{i}" for i in range(len(shards)))
    for i, p in enumerate(shards):
        assert splits[f"shard{i}"].to_list() == read_rows([p])
    stream = load([str(p) for p in shards], tmp_path / "cache", streaming=True)
    assert [row["ids"] for row in stream] == [row["ids"] for row in read_rows(shards)]


def test_packed_shards_load_with_the_same_sequences(sample_run, tmp_path):
    tok, out = sample_run
    packed = sorted((out / "packed").glob("*.parquet"))
    ds = load([str(p) for p in packed], tmp_path / "cache")
    assert ds.to_list() == read_rows(packed)
    assert set(ds["n_tokens"][:-1]) == {512}
    assert ds[0]["ids"][0] == tok.special_id(BOS)


def test_wide_ids_load_as_uint32(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("Hello world\nsecond line\n", encoding="utf-8")
    invoke(
        "encode", data, tmp_path / "tokens", "--tokenizer", GPT2_FILE, "--pattern", "gpt2",
        "--special-token", "<|endoftext|>=50256", "--special-token", "<|wide|>=70000",
    )  # fmt: skip
    path = tmp_path / "tokens" / "a.txt.parquet"
    assert pq.read_schema(path).field("ids").type.value_type.bit_width == 32
    ds = load(str(path), tmp_path / "cache")
    assert ds.features["ids"].feature.dtype == "uint32"
    assert ds["ids"] == [[15496, 995, 50256], [12227, 1627, 50256]]
    assert ds.to_list() == read_rows([path])
