"""An option's value is refused alike by every command that takes it: in one
line, before any work, as a usage error (status 2, where help is) when the
value itself is wrong, whatever input it would have met."""

from __future__ import annotations

import pytest
from conftest import assert_one_line_error, assert_usage_error, make_documents, write_shard


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A small run's output folder, for the commands that read one."""
    from runs import tokenmill

    root = tmp_path_factory.mktemp("made")
    write_shard(root / "data" / "a.jsonl", make_documents(40, seed=3))
    tokenmill("run", root / "data", root / "out", "--vocab-size", "300")
    return root


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-0.5", "1"])
@pytest.mark.parametrize("command", ["pack", "bin", "run"])
def test_a_val_fraction_out_of_range_nan_too_is_a_usage_error(cli, made, command, value):
    """pack failed with a traceback on nan, and bin split nothing and ended 0."""
    target = made / f"{command}-target"
    if command == "run":
        args = ["run", made / "data", target]
    else:
        args = [command, made / "out" / "tokens", target]
        args += ["--seq-len", "64"] if command == "pack" else []
    result = cli(*args, "--val-fraction", value, ok=False)
    assert_usage_error(result, "is out of range: 0 (no split) to below 1", command, target)
    assert "--val-fraction" in result.output and value in result.output


@pytest.mark.parametrize("value", ["0", "-5", str(2**63), str(2**64)])
@pytest.mark.parametrize("command", ["merge", "run"])
def test_a_min_count_out_of_range_is_a_usage_error_naming_the_bounds(cli, made, command, value):
    """merge took 2**64 and wrote an empty table, and refused 0 as a bad
    input (status 1); run said 2**64 "must be at least 1"."""
    source = made / ("out/counts" if command == "merge" else "data")
    target = made / f"{command}-target"
    result = cli(command, source, target, "--min-count", value, ok=False)
    assert_usage_error(result, f"{value} is not in the range 1<=x<={2**63 - 1}", command, target)


def test_a_min_count_that_drops_every_word_says_so(cli, made, tmp_path):
    """Not "the word table is empty (empty corpus?)" once count and merge had
    run, nor an empty table written by merge and status 0."""
    import pyarrow.parquet as pq

    most = max(pq.read_table(made / "out" / "counts.parquet").column("count").to_pylist())
    said = f"--min-count {2**63 - 1} dropped every word: the most frequent one is seen {most} times"
    for args in (
        ["merge", made / "out" / "counts", tmp_path / "m.parquet"],
        ["run", made / "data", tmp_path / "out", "--vocab-size", "300"],
    ):
        result = cli(*args, "--min-count", str(2**63 - 1), ok=False)
        assert result.exit_code == 1
        assert_one_line_error(result, said)
    assert not (tmp_path / "m.parquet").exists()
    assert not (tmp_path / "out" / "counts.parquet").exists()


@pytest.mark.parametrize("command", ["count", "encode", "run"])
def test_an_empty_text_column_is_refused_before_any_work(cli, made, command):
    """It ran, then failed at the first row: "no '' field; use --text-column"."""
    target = made / f"{command}-target"
    tokenizer = ["--tokenizer", made / "out" / "tokenizer.json"] if command == "encode" else []
    result = cli(command, made / "data", target, *tokenizer, "--text-column", "", ok=False)
    assert_usage_error(result, "--text-column is empty: give the column or JSON field", command)
    assert not target.exists()


def test_a_jobs_empty_text_column_names_its_key(cli, made, tmp_path):
    job = tmp_path / "job.toml"
    job.write_text(f'inputs = "{made / "data"}"\noutput = "out"\ntext_column = ""\n')
    result = cli("run", "--job", job, ok=False)
    assert result.exit_code == 1
    assert_one_line_error(result, f"{job}: text_column is empty: give the column")
    assert not (tmp_path / "out").exists()


def test_a_text_column_that_is_no_path_still_reads_a_key_so_named(cli, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_text('{".": "a dot named it", "a..b": "x"}\n{".": "again"}\n')
    cli("run", data, tmp_path / "out", "--vocab-size", "270", "--text-column", ".")
    result = cli("decode", "--shard", tmp_path / "out" / "tokens" / "a.jsonl.parquet", "--row", "1")
    assert result.output == "again"


EMPTY_PATHS = [
    (["run", "", "{o}"], "'[DATA]'"),
    (["run", "{d}", ""], "'[OUT]'"),
    (["count", "", "{o}"], "'DATA'"),
    (["encode", "{d}", "{o}", "--tokenizer", ""], "'--tokenizer'"),
    (["run", "{d}", "{o}", "--extend", ""], "'--extend'"),
    (["run", "--job", ""], "'--job'"),
    (["run", "{d}", "{o}", "--mix", ""], "'--mix'"),
    (["sweep", "{r}", "--held-out", " "], "'--held-out'"),
    (["stats", "{r}", "--data", ""], "'--data'"),
]


@pytest.mark.parametrize(("args", "named"), EMPTY_PATHS, ids=[" ".join(a) for a, _ in EMPTY_PATHS])
def test_an_empty_path_is_a_usage_error_not_the_current_folder(cli, made, tmp_path, args, named):
    """`run "$DATA" OUT` from a cron line with DATA unset read the folder it was
    started in; --tokenizer '' named '.'."""
    places = {"d": made / "data", "o": tmp_path / "out", "r": made / "out"}
    result = cli(*[a.format(**places) for a in args], ok=False)
    assert_usage_error(result, f"Invalid value for {named}: ", args[0], tmp_path / "out")
    assert "is no path: give one ('.' names this folder)" in result.output


@pytest.mark.parametrize("key", ["inputs", "extend", "mix"])
def test_a_jobs_empty_path_names_its_key(cli, made, tmp_path, key):
    job = tmp_path / "job.toml"
    settings = {"inputs": str(made / "data"), "output": "out", key: ""}
    job.write_text("".join(f'{k} = "{v}"\n' for k, v in settings.items()))
    result = cli("run", "--job", job, ok=False)
    assert result.exit_code == 1
    assert_one_line_error(result, f"{job}: {key} is empty (give a path)")
    assert not (tmp_path / "out").exists()


MISSING = [
    (["run", "{x}", "{o}"], "{x}: no such file or directory"),
    (["run", "--job", "{x}"], "{x}: cannot read job (No such file or directory)"),
    (["run", "{d}", "{o}", "--mix", "{x}"], "{x}: cannot read recipe (No such file or directory)"),
    (["encode", "{d}", "{o}", "--tokenizer", "{x}"], "{x}: cannot read tokenizer (No such file"),
    (["run", "{d}", "{o}", "--extend", "{x}"], "{x}: cannot read tokenizer (No such file"),
    (["sweep", "{r}", "--held-out", "{x}"], "{x}: no such file or directory"),
]


@pytest.mark.parametrize(
    ("args", "said"), MISSING, ids=[" ".join(a[:1] + a[-2:-1]) for a, _ in MISSING]
)
def test_a_path_that_does_not_exist_is_status_1_whichever_names_it(cli, made, tmp_path, args, said):
    """--job and --mix were click's usage errors (status 2), every other path a
    missing input (1): the README's table counts a path that is not there as 1."""
    places = {
        "d": made / "data",
        "o": tmp_path / "out",
        "r": made / "out",
        "x": tmp_path / "nofile",
    }
    result = cli(*[a.format(**places) for a in args], ok=False)
    assert result.exit_code == 1
    assert_one_line_error(result, said.format(**places))
    assert not (tmp_path / "out").exists()


BAD = "x\udcff"  # the byte 0xff of an argument, as Python hands it over
NOT_UTF8 = [
    (["run", "{d}", "{o}", "--text-column", BAD], "--text-column x\\xff"),
    (["count", "{d}", "{o}", f"--glob={BAD}"], "--glob x\\xff"),
    (["run", "{d}", "{o}", "--format", BAD], "--format x\\xff"),
    (["run", "{d}", "{o}", "--special-token", BAD], "--special-token x\\xff"),
    (["count", "{d}", "{o}", "--pattern", BAD], "--pattern x\\xff"),
    (["tokenize", "--tokenizer", "{t}", "--pattern", BAD, "hi"], "--pattern x\\xff"),
    (["tokenize", "--tokenizer", "{t}", "--special-token", BAD, "hi"], "--special-token x\\xff"),
    (["encode", "{d}", BAD, "--tokenizer", "{t}"], "TOKENS_DIR x\\xff"),
    (["run", "{d}", "{o}", "--", BAD], "x\\xff"),
]


@pytest.mark.parametrize(
    ("args", "named"), NOT_UTF8, ids=[" ".join(a[:1] + a[-2:-1]) for a, _ in NOT_UTF8]
)
def test_a_value_that_is_not_utf8_is_a_usage_error_naming_its_option(
    cli, made, tmp_path, args, named
):
    """It was status 1, naming the bytes alone ("\\xff: argument is not UTF-8"),
    and tokenize said it otherwise ("not UTF-8, where UTF-8 is needed")."""
    places = {"d": made / "data", "o": tmp_path / "out", "t": made / "out" / "tokenizer.json"}
    result = cli(*[a.format(**places) for a in args], ok=False)
    line = f"{named}: not UTF-8; names, options and patterns must be UTF-8"
    assert_usage_error(result, line, args[0], tmp_path / "out")
    assert f"Error: {line} (see" in result.output


def test_tokenizes_text_that_is_not_utf8_is_said_as_text(cli, made):
    result = cli("tokenize", "--tokenizer", made / "out" / "tokenizer.json", BAD, ok=False)
    assert result.exit_code == 1
    assert_one_line_error(result, "TEXT is not UTF-8 text: byte 0xff at offset 1")


def test_an_empty_pattern_for_a_tiktoken_file_is_said_empty(cli):
    from realtext import GPT2_FILE

    result = cli("tokenize", "--tokenizer", GPT2_FILE, "--pattern", "", "hi", ok=False)
    assert_usage_error(result, "--pattern '' is empty: give a preset (gpt2, cl100k", "tokenize")
    assert "want a str" not in result.output


@pytest.mark.parametrize("command", ["count", "run"])
def test_a_pattern_training_does_not_take_is_shown_as_given(cli, made, tmp_path, command):
    """repr showed '\\\\w+', a pattern other than the one given."""
    out = tmp_path / "out"
    result = cli(command, made / "data", out, "--pattern", r"\w+", ok=False)
    assert_usage_error(result, r"--pattern must be one of gpt2, cl100k, o200k, not '\w+'", command)


TIKTOKEN_READS = [
    ["tokenize", "--tokenizer", "{g}", "x"],
    ["encode", "{d}", "{o}", "--tokenizer", "{g}"],
    ["run", "{d}", "{o}", "--tokenizer", "{g}"],
    ["export", "{g}", "{o}", "--format", "hf"],
]


@pytest.mark.parametrize("args", TIKTOKEN_READS, ids=[a[0] for a in TIKTOKEN_READS])
@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        (r"(\d", r"invalid pre-tokenization pattern '(\d': Parsing error"),
        (r"\w+", r"pre-tokenization pattern '\w+' leaves text such as"),
        ("gpt4", "--pattern 'gpt4' is not a preset"),
    ],
)
def test_a_pattern_a_tiktoken_file_cannot_be_read_with_is_a_usage_error(
    cli, made, tmp_path, args, pattern, said
):
    """Status 1, as a bad file, where other refused --pattern values are 2."""
    from realtext import GPT2_FILE

    places = {"d": made / "data", "o": tmp_path / "out", "g": GPT2_FILE}
    result = cli(*[a.format(**places) for a in args], "--pattern", pattern, ok=False)
    assert_usage_error(result, said, args[0], tmp_path / "out")
    assert f"Error: {GPT2_FILE}: " in result.output


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        (r"(\\d", r"pattern: invalid pre-tokenization pattern '(\d': Parsing error"),
        ("", "pattern '' is empty: give a preset"),
    ],
)
def test_a_jobs_pattern_for_its_tiktoken_file_names_its_key(cli, made, tmp_path, pattern, said):
    from realtext import GPT2_FILE

    job = tmp_path / "job.toml"
    job.write_text(
        f'inputs = "{made / "data"}"\noutput = "out"\ntokenizer = "{GPT2_FILE}"\n'
        f'pattern = "{pattern}"\n'
    )
    result = cli("run", "--job", job, ok=False)
    assert result.exit_code == 1
    assert_one_line_error(result, f"{job}: {said}")
    assert not (tmp_path / "out").exists()
