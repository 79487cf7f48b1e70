"""A command given the wrong kind of file says so in one line naming the file
and what it wanted, never with a traceback (the runner re-raises any
exception)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import assert_one_line_error, assert_usage_error, write_shard

from tokenmill.tokenizer import Tokenizer

NOT_TOKENIZER = "not a tokenizer file"
NOT_WORD_TABLE = "word table `tokenmill merge` writes"
NOT_OUT = "not an output folder of `tokenmill run`"


@pytest.fixture
def files(tmp_path):
    """notes.txt (text), docs.parquet (documents), counts.parquet (a word
    table), plain/ (a folder of documents, not an OUT), tokens/ (of a token shard)."""
    (tmp_path / "notes.txt").write_text("just some notes\n", encoding="utf-8")
    pq.write_table(pa.table({"text": ["a document"]}), tmp_path / "docs.parquet")
    words = pa.table({"word": ["a", " document"], "count": pa.array([3, 2], pa.uint64())})
    pq.write_table(words, tmp_path / "counts.parquet")
    write_shard(tmp_path / "plain" / "docs.jsonl", ["a document", "another one"])
    (tmp_path / "tokens").mkdir()
    pq.write_table(pa.table({"row": [0], "ids": [[5, 6]]}), tmp_path / "tokens" / "a.parquet")
    return tmp_path


CASES = [
    (["decode", "--tokenizer", "docs.parquet", "1", "2"], "docs.parquet", NOT_TOKENIZER),
    (["decode", "--tokenizer", "notes.txt", "1"], "notes.txt", NOT_TOKENIZER),
    (["tokenize", "--tokenizer", "counts.parquet", "hi"], "counts.parquet", NOT_TOKENIZER),
    (["encode", "plain", "out", "--tokenizer", "counts.parquet"], "counts.parquet", NOT_TOKENIZER),
    (["export", "counts.parquet", "tok.json", "--format", "hf"], "counts.parquet", NOT_TOKENIZER),
    (["run", "plain", "out", "--extend", "docs.parquet"], "docs.parquet", NOT_TOKENIZER),
    (["train", "notes.txt", "tok.json"], "notes.txt", NOT_WORD_TABLE),
    (["train", "docs.parquet", "tok.json"], "docs.parquet", NOT_WORD_TABLE),
    (["train", "plain", "tok.json"], "plain", NOT_WORD_TABLE),
    # Read back as tiktoken's ranks, which it is not.
    (["train", "counts.parquet", "tok.tiktoken"], "tok.tiktoken", "name it .json"),
    (["stats", "plain"], "plain", NOT_OUT),
    (["stats", "notes.txt"], "notes.txt", NOT_OUT),
    (["report", "plain"], "plain", NOT_OUT),
    (["bin", "notes.txt", "bins"], "notes.txt", "a file, not a folder of token shards"),
    (["merge", "notes.txt", "merged.parquet"], "notes.txt", "a file, not a folder of count tables"),
    # The table of the wrong kind is named, not the one merge would write.
    (["merge", "tokens", "merged.parquet"], "tokens/a.parquet", "not a count table"),
]


@pytest.mark.parametrize(("args", "named", "wanted"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_file_of_the_wrong_kind_is_a_one_line_error(cli, files, monkeypatch, args, named, wanted):
    monkeypatch.chdir(files)
    assert_one_line_error(cli(*args, ok=False), f"{named}:", wanted)


def test_a_fifo_or_device_as_tokenizer_or_job_is_refused_not_read_forever(cli, files):
    import os

    fifo = files / "fifo"
    os.mkfifo(fifo)
    for args, option in (
        (["encode", "plain", "out", "--tokenizer", fifo], "--tokenizer"),
        (["tokenize", "--tokenizer", "/dev/null", "x"], "--tokenizer"),
        (["run", "--job", fifo], "--job"),
    ):
        result = cli(*args, ok=False)
        assert result.exit_code == 1
        assert_one_line_error(result, f"{option} is not a regular file")
    result = cli("run", "/dev/null", files / "out", ok=False)
    assert_one_line_error(result, "/dev/null: not a regular file or folder")


@pytest.mark.parametrize(
    ("args", "wanted", "command"),
    [
        (["nosuch"], "No such command 'nosuch'.", ""),
        (["count"], "Missing argument 'DATA'.", " count"),
        (
            ["run", "a", "b", "--vocab-size", "x"],
            "Invalid value for '--vocab-size': 'x' is not a valid integer range.",
            " run",
        ),
        # click's parser said these without naming the command, so no help was named;
        # and it listed a missing option's choices a line each.
        (["run", "--vocab-size"], "Option '--vocab-size' requires an argument.", " run"),
        (["stats", "o", "--json=1"], "Option '--json' does not take a value.", " stats"),
        (["--version=1"], "Option '--version' does not take a value.", ""),
        (
            ["export", "a.json", "b.json"],
            "Missing option '--format'. Choose from: hf, tiktoken, transformers",
            " export",
        ),
    ],
)
def test_a_usage_error_is_one_line_with_exit_status_2(cli, args, wanted, command):
    result = cli(*args, ok=False)
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    # The program's name is how it was started (CliRunner: the function's, main).
    assert line == f"Error: {wanted} (see 'main{command} --help')"


NOT_TIKTOKEN = "applies to .tiktoken files only; this file has its own"
USAGE_CASES = [
    (["tokenize", "hello"], "missing --tokenizer FILE"),
    (["encode", "plain", "out"], "missing --tokenizer FILE"),
    (["run", "plain"], "give DATA and OUT"),
    (["run"], "give DATA and OUT"),
    (["decode"], "give --tokenizer (or --shard and --row)"),
    (["decode", "--shard", "tokens/a.parquet"], "--shard needs --row"),
    (["decode", "--shard", "tokens/a.parquet", "--row", "0", "5"], "give IDS or --shard and"),
    (
        ["export", "tok.json", "x.json", "--format", "hf", "--pattern", "gpt2"],
        "--pattern " + NOT_TIKTOKEN,
    ),
    (
        ["tokenize", "--tokenizer", "tok.json", "--special-token", "<|x|>=5", "hi"],
        "tok.json: --special-token " + NOT_TIKTOKEN,
    ),
    (
        ["run", "plain", "out", "--tokenizer", "tok.json", "--pattern", "gpt2"],
        "--pattern " + NOT_TIKTOKEN,
    ),
]


@pytest.mark.parametrize(("args", "wanted"), USAGE_CASES, ids=[" ".join(c[0]) for c in USAGE_CASES])
def test_a_missing_argument_or_an_option_that_does_not_apply_is_a_usage_error(
    cli, files, monkeypatch, args, wanted
):
    """Said as click's own usage errors are (exit 2, where help is), not as a bad file."""
    Tokenizer.train(["a document, and another"], vocab_size=300).save(files / "tok.json")
    monkeypatch.chdir(files)
    assert_usage_error(cli(*args, ok=False), wanted, args[0], files / "out")


def test_a_fifo_or_device_wherever_a_file_is_read_is_refused_not_read_forever(files):
    """A FIFO's open waits for a writer for ever (Ctrl-C and SIGTERM could not
    end it inside the open), /dev/zero is read until memory runs out: every
    file a command reads is refused in one line naming it before it opens."""
    import os
    import subprocess
    import sys

    from runs import tokenmill

    data = files / "plain"
    tokenmill("run", data, files / "R", "--vocab-size", "300")
    os.mkfifo(files / "fifo")
    for folder, source in (("counts", "R/counts"), ("tokens", "R/tokens")):
        (files / f"{folder}-with-fifo").mkdir()
        for table in (files / source).glob("*.parquet"):
            (files / f"{folder}-with-fifo" / table.name).write_bytes(table.read_bytes())
        os.mkfifo(files / f"{folder}-with-fifo" / "z.parquet")
    cases = [
        (["train", "fifo", "t.json"], "fifo"),
        (["train", "R/counts.parquet", "t.json", "--extend", "fifo"], "fifo"),
        (["run", "plain", "o1", "--mix", "fifo"], "fifo"),
        (["run", "plain", "o2", "--mix", "/dev/zero"], "/dev/zero"),
        (["export", "/dev/zero", "x.json", "--format", "hf"], "/dev/zero"),
        (["decode", "--shard", "fifo", "--row", "0"], "fifo"),
        (["merge", "counts-with-fifo", "m.parquet"], "counts-with-fifo/z.parquet"),
        (
            ["bin", "tokens-with-fifo", "b", "--tokenizer", "R/tokenizer.json"],
            "tokens-with-fifo/z.parquet",
        ),
    ]
    for args, named in cases:
        result = subprocess.run(
            [sys.executable, "-m", "tokenmill", *args],
            cwd=files, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert (result.returncode, result.stderr) == (
            1,
            f"Error: {named}: not a regular file, where a file is read\n",
        ), args


TOKENIZER_ARGS = ("--tokenizer", "tok.json")
MISSING_INPUT = [
    ("count", "missing", "out"),
    ("encode", "missing", "out", *TOKENIZER_ARGS),
    ("pack", "missing", "out", "--seq-len", "8"),
    ("bin", "missing", "out"),
    ("run", "missing", "out"),
]


@pytest.mark.parametrize("args", MISSING_INPUT, ids=[a[0] for a in MISSING_INPUT])
def test_a_missing_input_leaves_no_output_folder(cli, tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    Tokenizer.train(["some text"], vocab_size=260).save(tmp_path / "tok.json")
    assert_one_line_error(cli(*args, ok=False), "missing:", "no such")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["count", "encode"])
def test_a_folder_where_a_shard_output_goes_is_refused_before_any_shard(
    cli, tmp_path, monkeypatch, command
):
    monkeypatch.chdir(tmp_path)
    write_shard(tmp_path / "d" / "a.jsonl", ["one document"])
    write_shard(tmp_path / "d" / "b.jsonl", ["another document"])
    Tokenizer.train(["some text"], vocab_size=260).save(tmp_path / "tok.json")
    (tmp_path / "out" / "b.jsonl.parquet").mkdir(parents=True)
    options = TOKENIZER_ARGS if command == "encode" else ()
    result = cli(command, "d", "out", *options, ok=False)
    assert_one_line_error(result, "out/b.jsonl.parquet: a folder, where tokenmill writes a file")
    assert not (tmp_path / "out" / "a.jsonl.parquet").exists()


@pytest.mark.parametrize("fmt", ["tiktoken", "hf"])
def test_an_export_onto_a_fifo_is_refused_not_opened(files, fmt):
    """Judging whether the file at OUT is an earlier export read it: a FIFO's
    open waited for a writer for ever (tiktoken)."""
    import os
    import subprocess
    import sys

    Tokenizer.train(["a document, and another"], vocab_size=300).save(files / "tok.json")
    os.mkfifo(files / "out")
    (files / "link").symlink_to(files / "out")
    for target in ("out", "link"):
        result = subprocess.run(
            [sys.executable, "-m", "tokenmill", "export", "tok.json", target, "--format", fmt],
            cwd=files, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 1, result.stderr
        assert result.stderr.startswith(f"Error: {target}: OUT exists and is not what"), (
            result.stderr
        )
        assert (files / "out").is_fifo()


@pytest.mark.parametrize("fmt", ["tiktoken", "hf"])
def test_an_export_onto_a_folder_or_a_dangling_link_is_refused(cli, files, monkeypatch, fmt):
    """`export TOK . --format tiktoken` was a traceback (a path with no name);
    a link to nothing was replaced by the export, the link lost."""
    monkeypatch.chdir(files)
    Tokenizer.train(["a document, and another"], vocab_size=300).save(files / "tok.json")
    (files / "adir").mkdir()
    for target in (".", "adir"):
        result = cli("export", "tok.json", target, "--format", fmt, ok=False)
        assert result.exit_code == 1
        assert result.output.strip() == (
            f"Error: {target}: a folder, where export --format {fmt} writes a file"
        )
    (files / "dangling").symlink_to(files / "nowhere" / "x")
    result = cli("export", "tok.json", "dangling", "--format", fmt, ok=False)
    assert result.exit_code == 1
    assert result.output.strip().startswith("Error: dangling: OUT is a link to nothing")
    assert (files / "dangling").is_symlink() and not (files / "nowhere").exists()


def test_a_killed_exports_temporary_is_removed_and_named_by_the_next(cli, files, monkeypatch):
    """A killed export left `.NAME.tmp-PID-HEX` beside its file, which no
    later export removed; a live process's, and other names, are left."""
    import os
    import subprocess
    import sys

    monkeypatch.chdir(files)
    Tokenizer.train(["a document, and another"], vocab_size=300).save(files / "tok.json")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    left = files / f".o.json.tmp-{dead}-abcd1234"
    live = files / f".o.json.tmp-{os.getpid()}-abcd1234"
    other = files / ".tmp-1"
    for p in (left, live, other):
        p.write_text("half")
    result = cli("export", "tok.json", "o.json", "--format", "hf")
    assert result.exit_code == 0, result.output
    assert not left.exists() and live.exists() and other.exists()
    assert "removed 1 temporary file from . by its name alone" in result.output
    assert left.name in result.output


@pytest.mark.parametrize("command", ["run", "count"])
def test_a_runs_output_folder_as_data_is_named_as_such(cli, files, monkeypatch, command):
    """Its count table was read as documents: the line named a missing
    column 'text' (columns: word, count, first)."""
    monkeypatch.chdir(files)
    (files / "ran").mkdir()
    (files / "ran" / "counts.parquet").write_bytes((files / "counts.parquet").read_bytes())
    (files / "ran" / "manifest.json").write_text('{"tokenmill_version": "0"}')
    result = cli(command, "ran", "out", ok=False)
    assert_one_line_error(result, "ran: DATA is a tokenmill output folder (its manifest.json)")
    assert not (files / "out").exists()


@pytest.mark.parametrize("command", ["run", "count"])
def test_a_runs_output_folder_inside_data_is_refused_before_any_work(
    cli, files, monkeypatch, command
):
    """Another run's OUT kept under DATA: its tables and shards were read as
    inputs (its index.json failed as JSON Lines), after the inputs before it
    had been counted, and the next run into that OUT was then refused."""
    monkeypatch.chdir(files)
    data = files / "data"
    (data / "prev" / "counts").mkdir(parents=True)
    (data / "a.jsonl").write_text('{"text": "hello"}\n')
    (data / "prev" / ".tokenmill.lock").write_text("{}\n")
    (data / "prev" / "counts" / "a.jsonl.parquet").write_bytes(
        (files / "counts.parquet").read_bytes()
    )
    result = cli(command, "data", "out", ok=False)
    assert_one_line_error(result, "data/prev: a tokenmill output folder inside DATA", "--glob")
    assert not (files / "out").exists()
    cli(command, "data", "out", "--glob", "*.jsonl")
    # DATA itself, left holding only the lock file by a run that failed there.
    (data / ".tokenmill.lock").write_text("{}\n")
    result = cli(command, "data", "out2", "--glob", "*.jsonl", ok=False)
    assert_one_line_error(result, "data: DATA is a tokenmill output folder (it holds")
