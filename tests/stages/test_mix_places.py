"""Which recipe source an input is by its place under DATA (stages/sources.py):
a folder path names a source as a top folder does, the deepest named wins."""

from __future__ import annotations

import pytest
from conftest import write_shard
from mixdata import mixture, write_tokenizer
from runs import manifest


@pytest.fixture(scope="module")
def nested(tmp_path_factory):
    folder = tmp_path_factory.mktemp("places")
    data = folder / "data"
    write_shard(data / "web" / "sub" / "y.jsonl", ["deep one", "deep two", "deep three"])
    write_shard(data / "web" / "z.jsonl", ["top one", "top two"])
    write_shard(data / "books" / "b.jsonl", ["a book"])
    return data, write_tokenizer(folder / "tok.json")


def run(cli, nested, out, recipe: str):
    data, tok = nested
    path = out.parent / f"{out.name}.toml"
    path.write_text("[mix]\n" + recipe)
    cli("run", data, out, "--tokenizer", tok, "--mix", path, "--workers", "1")
    return {line["name"]: line for line in manifest(out)["mix"]["sources"]}


def test_a_folder_path_names_a_source(cli, nested, tmp_path):
    lines = run(cli, nested, tmp_path / "out", '"web/sub" = { epochs = 1.0 }\n')
    assert {r["shard"] for r in mixture(tmp_path / "out")} == {"web/sub/y.jsonl"}
    assert lines["web/sub"]["taken"]["documents"] == 3
    # the rest of web/ is in no recipe source: left out under its top folder
    assert lines["web"]["asked"] is None and lines["web"]["available"]["documents"] == 2


def test_the_deepest_folder_the_recipe_names_takes_an_input(cli, nested, tmp_path):
    recipe = '"web/sub" = { epochs = 1.0 }\nweb = { epochs = 2.0 }\n'
    lines = run(cli, nested, tmp_path / "out", recipe)
    assert lines["web/sub"]["taken"]["documents"] == 3
    assert lines["web"]["available"]["documents"] == 2
    assert lines["web"]["taken"]["documents"] == 4
