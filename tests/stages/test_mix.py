"""Data recipes ([mix], --mix FILE): token budgets, weights of a total and
epochs per source, what the mixture takes of each, and the manifest's
accounting of it, checked against the parts written (OUT/mix/)."""

from __future__ import annotations

import shutil
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import assert_one_line_error
from mixdata import appearances, mixture, write_corpus, write_tokenizer
from runs import manifest, tokenmill_here

from tokenmill.errors import TokenmillError
from tokenmill.recipe import Recipe, Share, parse_recipe, parse_tokens

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mix")
    return write_corpus(folder / "data"), write_tokenizer(folder / "tok.json")


def run_recipe(cli, corpus, out, recipe: str, *args, ok: bool = True):
    data, tok = corpus
    path = out.parent / f"{out.name}.toml"
    path.write_text("[mix]\n" + recipe)
    return cli("run", data, out, "--tokenizer", tok, "--mix", path, "--workers", "1", *args, ok=ok)


def by_name(out) -> dict[str, dict]:
    return {line["name"]: line for line in manifest(out)["mix"]["sources"]}


def longest(out) -> dict[str, int]:
    """The longest document of each source, in tokens (from the token shards)."""
    most: dict[str, int] = defaultdict(int)
    for path in (out / "tokens").rglob("*.parquet"):
        name = path.relative_to(out / "tokens").as_posix()
        source = name.split("/")[0] if "/" in name else name.split(".")[0]
        lengths = pq.read_table(path, columns=["n_tokens"])["n_tokens"].to_pylist()
        most[source] = max(most[source], *lengths)
    return most


def written(out) -> Counter:
    """Tokens of each source in the parts."""
    tokens: Counter = Counter()
    for row in mixture(out):
        tokens[row["source"]] += row["n_tokens"]
        assert len(row["ids"]) == row["n_tokens"]
    return tokens


def test_budgets_are_met_within_one_document(cli, corpus, tmp_path):
    out = tmp_path / "out"
    run_recipe(cli, corpus, out, 'short = 123\nlong = "2K"\nbooks = "300"\n')
    lines, tokens, most = by_name(out), written(out), longest(out)
    assert most["short"] == 1 and most["long"] > 400  # documents of very different lengths
    for name, budget in {"short": 123, "long": 2000, "books": 300}.items():
        assert lines[name]["budget"] == budget
        assert lines[name]["taken"]["tokens"] == tokens[name]
        assert budget <= tokens[name] < budget + most[name], name
    assert tokens["short"] == 123  # 1-token documents: exactly
    assert lines["long"]["taken"]["documents"] < lines["long"]["available"]["documents"]
    total = sum(tokens.values())
    assert manifest(out)["mix"]["tokens"] == total
    assert lines["long"]["share"] == round(tokens["long"] / total, 6)
    assert lines["long"]["asked_share"] == round(2000 / 2423, 6)


def test_two_epochs_take_every_document_exactly_twice(cli, corpus, tmp_path):
    out = tmp_path / "out"
    run_recipe(cli, corpus, out, "books = { epochs = 2.0 }\n")
    seen = appearances(out)
    assert set(seen) == {("books.jsonl", row) for row in range(40)}
    assert set(seen.values()) == {2}
    epochs = Counter((r["shard"], r["input_row"], r["epoch"]) for r in mixture(out))
    assert set(epochs.values()) == {1} and {e for _, _, e in epochs} == {0, 1}
    lines = by_name(out)
    books = lines["books"]
    assert books["taken"]["documents"] == 80 and books["repeated"]["documents"] == 40
    assert books["taken"]["tokens"] == 2 * books["available"]["tokens"]
    assert books["epochs"] == 2.0 and books["share"] == 1.0
    # The sources of no recipe line are left out, and listed.
    for name in ("long", "short"):
        assert lines[name]["asked"] is None and lines[name]["taken"]["documents"] == 0


def test_a_fractional_epoch_repeats_a_part_of_the_source(cli, corpus, tmp_path):
    out = tmp_path / "out"
    run_recipe(cli, corpus, out, "long = { epochs = 1.5 }\n")
    seen = appearances(out)
    assert len(seen) == 20 and set(seen.values()) == {1, 2}
    rows = mixture(out)
    once = sum(r["n_tokens"] for r in rows if r["epoch"] == 0)
    again = sum(r["n_tokens"] for r in rows if r["epoch"] == 1)
    line = by_name(out)["long"]
    assert line["available"]["tokens"] == once
    assert round(0.5 * once) <= again < round(0.5 * once) + longest(out)["long"]
    assert line["repeated"] == {
        "documents": sum(n == 2 for n in seen.values()),
        "tokens": again,
    }


def test_a_budget_beyond_the_source_takes_whole_epochs_then_a_part(cli, corpus, tmp_path):
    out = tmp_path / "out"
    run_recipe(cli, corpus, out, "short = 620\n")  # 250 documents of 1 token: 2 epochs + 120
    counts = Counter(appearances(out).values())
    assert counts == {2: 130, 3: 120}
    assert written(out)["short"] == 620


def test_weights_are_shares_of_the_total(cli, corpus, tmp_path):
    out = tmp_path / "out"
    run_recipe(cli, corpus, out, 'total = "1K"\nshort = 0.1\nbooks = 0.9\n')
    lines, tokens = by_name(out), written(out)
    assert lines["short"]["budget"] == 100 and tokens["short"] == 100
    assert 900 <= tokens["books"] < 900 + longest(out)["books"]
    assert lines["books"]["asked"] == {"weight": 0.9}


def test_a_files_glob_makes_a_source(cli, corpus, tmp_path):
    out = tmp_path / "out"
    run_recipe(cli, corpus, out, 'picked = { tokens = 700, files = "long/b*" }\nbooks = 50\n')
    assert {r["shard"] for r in mixture(out) if r["source"] == "picked"} == {"long/b.parquet"}
    lines = by_name(out)
    assert lines["picked"]["available"]["documents"] == 8
    assert lines["long"]["asked"] is None  # long/a.jsonl: in no recipe source
    assert lines["long"]["available"]["documents"] == 12


def test_the_same_recipe_writes_the_same_bytes(cli, corpus, tmp_path):
    recipe = 'short = 50\nlong = "3K"\nbooks = { epochs = 1.25 }\n'
    for name in ("a", "b"):
        run_recipe(cli, corpus, tmp_path / name, recipe, "--force")
    first, second = (tmp_path / n / "mix" for n in ("a", "b"))
    assert [p.read_bytes() for p in sorted(first.iterdir())] == [
        p.read_bytes() for p in sorted(second.iterdir())
    ]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"books": 2.0}, "mix.books: 2.0 is a weight, a share of total (0 to 1); for epochs"),
        ({"code": 0.3}, 'mix.code: 0.3 is a weight of total: give total = "50B"'),
        ({"code": "12Q"}, "mix.code: '12Q' is not a number of tokens"),
        ({"books": "1.5"}, "mix.books: '1.5' is not a whole number of tokens (for epochs"),
        ({"code": True}, "mix.code: give a token budget"),
        ({"x": {"tokens": 1, "epochs": 1}}, "mix.x: give exactly one of tokens, weight, epochs"),
        ({"x": {"epochs": -1}}, "mix.x.epochs: a number of epochs"),
        ({"x": {"epochs": 1e308}}, "mix.x.epochs: a number of epochs (2.0, 0.5; at most"),
        # Rounded, as many epochs as a budget in tokens may come to (stages/budgets.py).
        (
            {"x": {"epochs": 9999.99999}},
            "mix.x.epochs: a number of epochs (2.0, 0.5; at most 9,999)",
        ),
        ({"x": {"tokens": 1, "glob": "a/*"}}, "mix.x: unknown key 'glob'"),
        ({"x": {"tokens": 1, "files": 3}}, "mix.x.files: a glob of input names"),
        ({"total": "1M", "x": "5"}, "mix.total: no source is a weight of it"),
        ({"total": "1M", "a": 0.7, "b": 0.6}, "mix: the weights add up to more than 1"),
        ({"total": "1M"}, "mix: no source"),
        ({"column": 3, "x": 1}, "mix.column: the name of a column or field (a string)"),
        ({"": 5}, "mix: a source named '' names no folder or file under DATA"),
        ({".": {"epochs": 1.0}}, "mix: a source named '.' names no folder or file under DATA"),
    ],
)
def test_a_recipe_that_can_be_read_two_ways_is_refused(table, message):
    with pytest.raises(TokenmillError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        parse_recipe(table)


def test_a_source_named_by_its_files_may_have_any_name():
    assert parse_recipe({" ": {"tokens": 5, "files": "*"}}).sources[0].files == "*"


def test_the_three_forms():
    recipe = parse_recipe(
        {"total": "2.5B", "web": 0.5, "code": "20M", "n": 7_000, "books": {"epochs": 2}}
    )
    assert recipe == Recipe(
        (Share("web", weight=0.5), Share("code", tokens=20_000_000), Share("n", tokens=7000),
         Share("books", epochs=2.0)),
        total=2_500_000_000,
    )  # fmt: skip
    assert parse_tokens("1_500k", "x") == 1_500_000


def test_a_source_without_inputs_fails_naming_it(cli, corpus, tmp_path):
    result = run_recipe(cli, corpus, tmp_path / "out", "nope = 10\n", ok=False)
    assert_one_line_error(
        result,
        f"{tmp_path / 'out.toml'}: mix.nope: no input is under nope/",
        "sources here: books,",
    )
    # Known from the inputs' places alone: said before any work.
    assert "encode:" not in result.output
    assert not (tmp_path / "out" / "tokens").exists()


def test_a_job_file_holds_the_recipe_and_the_seed(cli, corpus, tmp_path):
    data, tok = corpus
    job = tmp_path / "job.toml"
    job.write_text(
        f'inputs = "{data}"\noutput = "out"\ntokenizer = "{tok}"\nshuffle = 3\n'
        "[mix]\nbooks = { epochs = 2.0 }\n"
    )
    cli("run", "--job", job, "--shuffle", "4")  # the command line overrides the job
    config = manifest(tmp_path / "out")["config"]
    assert config["mix"] == {"books": {"epochs": 2.0}} and config["shuffle"] == 4
    assert manifest(tmp_path / "out")["mix"]["shuffle"] == 4


def test_a_mix_needs_token_shards_of_a_whole_corpus(cli, corpus, tmp_path):
    data, tok = corpus
    count_only = cli("run", data, tmp_path / "a", "--count-only", "--shuffle", "1", ok=False)
    assert_one_line_error(count_only, "not with --count-only")
    no_table = tmp_path / "empty.toml"
    no_table.write_text("shuffle = 1\n")
    missing = cli("run", data, tmp_path / "c", "--tokenizer", tok, "--mix", no_table, ok=False)
    assert_one_line_error(missing, "empty.toml: no [mix] table")


def test_the_readme_shows_what_jobs_recipe_toml_writes(tmp_path):
    """README, "Data recipes": the job file's [mix] and its stats, as a run gives them."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Data recipes", 1)[1].split("\n### ", 1)[0]
    toml, console = (block.split("\n", 1)[1] for block in section.split("```")[1:4:2])
    job_text = (ROOT / "jobs" / "recipe.toml").read_text()
    mix_table = job_text.split("[mix]", 1)[1]
    for line in toml.split("[mix]", 1)[1].strip().splitlines():
        assert line.split("#")[0].strip() in mix_table
    assert "shuffle = 1234" in job_text
    (tmp_path / "jobs").mkdir()
    shutil.copy(ROOT / "jobs" / "recipe.toml", tmp_path / "jobs")
    (tmp_path / "sample_data").symlink_to(ROOT / "sample_data")
    tokenmill_here("run", "--job", tmp_path / "jobs" / "recipe.toml")
    stats = tokenmill_here("stats", tmp_path / "out-recipe-job").stdout.splitlines()
    shown = console.strip().splitlines()
    assert shown[1:] == stats[2 : 2 + len(shown) - 1]


def test_a_budget_of_absurdly_many_epochs_is_refused_in_one_line(cli, corpus, tmp_path):
    """A budget far above its source ("1T" of a few thousand tokens: a mistyped
    unit) is refused before anything is written, not repeated for days, naming
    the recipe's file as a parse error does."""
    result = run_recipe(cli, corpus, tmp_path / "out", 'books = "1T"\n', ok=False)
    assert_one_line_error(
        result, f"{tmp_path / 'out.toml'}: mix.books: 1000000000000 tokens of a source of", "epochs"
    )
    assert not (tmp_path / "out" / "mix").exists() or not any((tmp_path / "out" / "mix").iterdir())


@pytest.mark.parametrize(
    "recipe, message",
    [
        ('books = "1T"\n', "mix.books: 1000000000000 tokens of a source of"),
        ("books = 0\n", "the recipe takes no tokens"),
    ],
)
def test_a_refused_recipe_keeps_the_manifest_of_the_outputs_it_left_unchanged(
    cli, corpus, tmp_path, recipe, message
):
    """A recipe found impossible once the documents are read, on a rerun that
    kept every output, left OUT without its manifest: the last good run's
    folder no longer verified. The manifest stays, byte for byte; a rerun whose
    outputs changed (an input added) still drops it."""
    data, tok = tmp_path / "data", corpus[1]
    shutil.copytree(corpus[0], data)
    out = tmp_path / "out"
    run_recipe(cli, (data, tok), out, "books = 1000\n")
    before = (out / "manifest.json").read_bytes()
    refused = run_recipe(cli, (data, tok), out, recipe, ok=False)
    assert_one_line_error(refused, f"{tmp_path / 'out.toml'}: ", message)
    assert (out / "manifest.json").read_bytes() == before
    cli("verify", out)
    # Outputs changed before the refusal: the old manifest would describe others.
    (data / "books2.jsonl").write_text('{"text": "one more"}\n')
    again = run_recipe(cli, (data, tok), out, recipe, ok=False)
    assert_one_line_error(again, message)
    assert not (out / "manifest.json").exists()


def test_a_budget_of_ten_thousand_epochs_of_its_source_is_refused(cli, corpus, tmp_path):
    # Said once the source's tokens are known: "1T" meant as "1M".
    result = run_recipe(cli, corpus, tmp_path / "out", 'short = "1T"\n', ok=False)
    assert_one_line_error(result, f"{tmp_path / 'out.toml'}: mix.short: 1000000000000 tokens")
    assert "epochs, 10,000 or more: a typo in its budget or unit?" in result.output
