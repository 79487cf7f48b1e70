"""`tokenmill check` on a run with a mixture: the layouts are written from
its parts (OUT/mix/), so their problems name the part, and each part's row
is held to the token shard row it was copied from."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from mixdata import write_corpus, write_tokenizer
from runs import tokenmill_here

from tokenmill.stages.check_mix import digests

FRACTION = "0.25"
SPLIT = ("train.bin", "val.bin", "train.idx.npy", "val.idx.npy")


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkmix")
    data, tok = write_corpus(root / "data"), write_tokenizer(root / "tok.json")
    recipe = root / "recipe.toml"
    recipe.write_text("[mix]\nshort = 120\nlong = { epochs = 1.5 }\nbooks = { epochs = 2.0 }\n")
    out = root / "out"
    tokenmill_here("run", data, out, "--tokenizer", tok, "--mix", recipe, "--shuffle", "3",
                   "--val-fraction", FRACTION, "--workers", "1", "--format", "bin")  # fmt: skip
    return out


@pytest.fixture
def out(clean, tmp_path):
    return shutil.copytree(clean, tmp_path / "out")


def replace_row(part) -> int:
    """The part's longest row given another document's ids; that row."""
    table = pq.read_table(part)
    ids, lens = table["ids"].to_pylist(), table["n_tokens"].to_pylist()
    row = lens.index(max(lens))
    by = next(i for i, other in enumerate(ids) if other != ids[row])
    ids[row], lens[row] = ids[by], lens[by]
    table = table.set_column(1, "ids", pa.array(ids, table.schema.field("ids").type))
    pq.write_table(table.set_column(2, "n_tokens", pa.array(lens, pa.uint32())), part)
    return row


def problems(out, ok: bool) -> list[str]:
    result = tokenmill_here("check", out, check=False)
    assert result.returncode == (0 if ok else 1), result.stdout + result.stderr
    return [line for line in result.stdout.splitlines() if line.startswith("problem: ")]


def test_a_clean_mixture_passes(clean):
    assert problems(clean, ok=True) == []


def test_a_layout_that_differs_from_a_part_names_the_part(out):
    row = replace_row(out / "mix" / "part-00000.parquet")
    found = [p for p in problems(out, ok=False) if p.startswith("problem: bin/")]
    assert len(found) == 1 and f"(mix/part-00000.parquet row {row})" in found[0], found


def test_a_part_row_that_is_not_its_token_shard_row_is_named(out, tmp_path):
    """Another document's ids in a part's row, and the layouts written again
    from the part (so they match it): only the token shards tell."""
    part = out / "mix" / "part-00000.parquet"
    row = replace_row(part)
    tokenmill_here("bin", out / "mix", tmp_path / "b", "--val-fraction", FRACTION)
    for name in SPLIT:
        shutil.copy(tmp_path / "b" / name, out / "bin" / name)
    (line,) = problems(out, ok=False)
    assert line.startswith("problem: mix/part-00000.parquet: 1 of "), line
    assert "rows are not the token shard rows they name (shard, input_row)" in line
    assert f"the first: row {row} (tokens/" in line


def test_a_digest_tells_documents_apart_by_their_ids_order_and_length():
    docs = [[], [5], [5, 7], [7, 5], [5, 7, 0], [0, 5, 7], [5, 7]]
    offsets = np.cumsum([0, *map(len, docs)])
    flat = np.array([i for d in docs for i in d], np.uint16)
    found = digests(flat, offsets).tolist()
    assert found[2] == found[6] and len(set(found)) == len(docs) - 1


def test_the_summary_names_the_source_documents_and_the_mixtures(clean):
    # The layouts hold the mixture (repeats and all), not the token shards'
    # documents the summary alone counted.
    import json

    sources = sum(
        e["documents"] for e in json.loads((clean / "manifest.json").read_text())["outputs"]
    )
    mixture = sum(pq.read_metadata(p).num_rows for p in (clean / "mix").glob("*.parquet"))
    assert sources != mixture
    result = tokenmill_here("check", clean)
    assert f"bin: {mixture} documents equal the mixture's (read with" in result.stdout
    summary = f"check: 1 layout, {sources} source documents, {mixture} in the mixture, "
    assert summary in result.stderr
