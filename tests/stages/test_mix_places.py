"""Which recipe source an input is by its place under DATA (stages/sources.py):
a folder path names a source as a top folder does, the deepest named wins."""

from __future__ import annotations

import json

import pytest
from conftest import assert_one_line_error, write_shard
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


def test_an_input_whose_documents_all_name_a_source_is_no_source_itself(cli, tmp_path):
    """With a column, the input's place is the source of its documents without
    a value only: none without, no source by place (no `all` left out)."""
    data = tmp_path / "data"
    data.mkdir()
    records = [{"text": f"document {k} " * 3, "src": "ab"[k % 2]} for k in range(20)]
    (data / "all.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('[mix]\ncolumn = "src"\na = { epochs = 1.0 }\n')
    out = tmp_path / "out"
    tok = write_tokenizer(tmp_path / "tok.json")
    cli("run", data, out, "--tokenizer", tok, "--mix", recipe, "--workers", "1")
    lines = {x["name"]: x for x in manifest(out)["mix"]["sources"]}
    assert list(lines) == ["a", "b"]
    assert lines["b"]["asked"] is None and lines["b"]["available"]["documents"] == 10
    mixed = cli("stats", out).output.split("per shard:")[0].splitlines()
    assert not [line for line in mixed if line.split()[:1] == ["all"]]


def test_a_source_whose_inputs_another_sources_glob_takes_is_refused_before_work(
    cli, nested, tmp_path
):
    data, tok = nested
    recipe = tmp_path / "r.toml"
    recipe.write_text('[mix]\nbooks = "10"\nextra = { tokens = 10, files = "books/*" }\n')
    result = cli("run", data, tmp_path / "out", "--tokenizer", tok, "--mix", recipe, ok=False)
    assert_one_line_error(
        result,
        f"{recipe}: mix.books: every input under books/ or named books.* is taken by extra's "
        "files glob (sources here: web)",
    )
    assert not (tmp_path / "out" / "tokens").exists()


def test_a_recipe_whose_globs_take_every_input_says_none_is_left(cli, nested, tmp_path):
    data, tok = nested
    recipe = tmp_path / "r.toml"
    recipe.write_text('[mix]\nbooks = "10"\nall = { tokens = 10, files = "**" }\n')
    result = cli("run", data, tmp_path / "out", "--tokenizer", tok, "--mix", recipe, ok=False)
    assert_one_line_error(result, "(sources here: none: the recipe's files globs take every input)")
