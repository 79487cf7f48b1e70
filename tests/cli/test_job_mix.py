"""A job's recipe: a `[mix]` table, or `mix = "FILE"` (a recipe file, relative
to the job file as its other paths), and how --mix on the command line and a
--mix file's other keys go with it."""

from __future__ import annotations

import pytest
from conftest import assert_one_line_error
from mixdata import write_corpus, write_tokenizer
from runs import manifest

from tokenmill.jobs import load_job


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jobmix")
    return write_corpus(folder / "data"), write_tokenizer(folder / "tok.json")


def job_file(tmp_path, corpus, more: str):
    data, tok = corpus
    job = tmp_path / "jobs" / "job.toml"
    job.parent.mkdir(exist_ok=True)
    job.write_text(f'inputs = "{data}"\noutput = "../out"\ntokenizer = "{tok}"\n{more}')
    return job


def test_a_jobs_mix_may_name_a_recipe_file_relative_to_the_job(cli, corpus, tmp_path):
    job = job_file(tmp_path, corpus, 'mix = "recipe.toml"\n')
    (tmp_path / "jobs" / "recipe.toml").write_text("[mix]\nbooks = { epochs = 2.0 }\n")
    assert load_job(job)["mix"].sources[0].name == "books"
    cli("run", "--job", job)  # from another folder than the job's
    assert manifest(tmp_path / "out")["config"]["mix"] == {"books": {"epochs": 2.0}}


def test_a_jobs_missing_recipe_file_is_named(cli, corpus, tmp_path):
    job = job_file(tmp_path, corpus, 'mix = "nowhere.toml"\n')
    result = cli("run", "--job", job, ok=False)
    assert_one_line_error(result, f"{tmp_path / 'jobs' / 'nowhere.toml'}: cannot read recipe")


def test_mix_on_the_command_line_replaces_a_broken_one_of_the_job(cli, corpus, tmp_path):
    """The command line wins: the job's recipe, not used, is not checked either."""
    job = job_file(tmp_path, corpus, "[mix]\nbooks = 10\nextra = 2.0\n")
    good = tmp_path / "good.toml"
    good.write_text("[mix]\nlong = 700\n")
    cli("run", "--job", job, "--mix", good)
    assert manifest(tmp_path / "out")["config"]["mix"] == {"long": {"tokens": 700}}
    assert_one_line_error(cli("run", "--job", job, ok=False), "mix.extra: 2.0 is a weight")


def test_a_mix_files_other_keys_are_named_as_not_used(cli, corpus, tmp_path):
    """--mix reads only the file's [mix]: its shuffle, say, would otherwise be
    dropped without a word (the mixture in input order)."""
    data, tok = corpus
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('output = "o"\nshuffle = 1234\n[mix]\nbooks = 50\n')
    result = cli("run", data, tmp_path / "out", "--tokenizer", tok, "--mix", recipe)
    notes = [line for line in result.output.splitlines() if line.startswith("note:")]
    assert notes == [
        f"note: {recipe}: only its [mix] is read, not output, shuffle (give them as options, "
        "such as --shuffle, or run the file with --job)"
    ]
    assert manifest(tmp_path / "out")["mix"]["shuffle"] is None
    recipe.write_text("[mix]\nbooks = 50\n")
    result = cli("run", data, tmp_path / "out", "--tokenizer", tok, "--mix", recipe)
    assert "note:" not in result.output


def test_a_jobs_recipe_files_other_keys_are_named_as_not_used(cli, corpus, tmp_path):
    """A job's `mix = "FILE"` reads only FILE's [mix]; a shuffle there would
    otherwise be dropped without a word."""
    job = job_file(tmp_path, corpus, 'mix = "recipe.toml"\n')
    recipe = tmp_path / "jobs" / "recipe.toml"
    recipe.write_text("shuffle = 1234\n[mix]\nbooks = 50\n")
    result = cli("run", "--job", job)
    notes = [line for line in result.output.splitlines() if line.startswith("note:")]
    assert notes == [
        f"note: {recipe}: only its [mix] is read, not shuffle (set them in {job} itself)"
    ]
    assert manifest(tmp_path / "out")["mix"]["shuffle"] is None
