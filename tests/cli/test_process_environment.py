"""The process a scheduled job starts `tokenmill` in: closed standard
streams, a locale that is not UTF-8, an output encoding that cannot hold the
text, Polars' thread variable. Each run goes on to the outputs a plain run
makes, or ends in one line; never a traceback, never a silent exit."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from runs import copy_sample, output_files, tokenmill

RUN = ("--vocab-size", "300", "--workers", "1")
NOT_UTF8 = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


def test_a_run_with_stderr_closed_makes_what_a_logged_run_makes(tmp_path):
    """`2>&-`: tqdm's bar and the status lines had nowhere to go, and the run
    ended with status 1, nothing written and nothing said."""
    data = copy_sample(tmp_path / "data", ["lines.txt"])
    tokenmill("run", data, tmp_path / "logged", *RUN)
    closed = subprocess.run(
        [sys.executable, "-m", "tokenmill", "run", data, tmp_path / "closed", *RUN],
        stdout=subprocess.DEVNULL,
        preexec_fn=lambda: os.close(2),
    )
    assert closed.returncode == 0
    logged, quiet = output_files(tmp_path / "logged"), output_files(tmp_path / "closed")
    assert {k: v for k, v in logged.items() if k != "manifest.json"} == {
        k: v for k, v in quiet.items() if k != "manifest.json"
    }


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args", [["--vocab-size", "5"], ["--bogus"], ["--mode", "char", "--pattern", "gpt2"]]
)
def test_a_usage_error_keeps_its_status_when_stderr_cannot_be_written(tmp_path, args):
    """`2>/dev/full`: the line could not be written, and the failed write
    turned status 2 into 1, which a job's wrapper reads as a bad input."""
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "tokenmill", "run", tmp_path, tmp_path / "out", *args],
            stdout=subprocess.PIPE,
            stderr=full,
        )
    assert result.returncode == 2 and result.stdout == b""
    assert not (tmp_path / "out").exists()


def test_stats_on_an_output_encoding_that_cannot_hold_the_text(tmp_path):
    """PYTHONIOENCODING=latin-1 and Cyrillic tokens: the whole report had been
    printed as an error 'not UTF-8'. Now escaped, as JSON escapes them."""
    data = copy_sample(tmp_path / "data", ["multilingual.jsonl"])
    tokenmill("run", data, tmp_path / "out", *RUN)
    result = tokenmill("stats", tmp_path / "out", "--json", env={"PYTHONIOENCODING": "latin-1"})
    assert json.loads(result.stdout)["documents"] > 0
    assert tokenmill("stats", tmp_path / "out", env={"PYTHONIOENCODING": "latin-1"}).stdout


def test_a_utf8_file_name_under_a_locale_that_is_not_utf8(tmp_path):
    """LC_ALL=C without Python's coercion: the name's bytes are UTF-8, so it is
    read and its outputs named after it, as under a UTF-8 locale."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "café 日本.txt").write_text("a document\nanother one\n", encoding="utf-8")
    result = tokenmill("run", data, tmp_path / "out", *RUN, env=NOT_UTF8)
    assert result.returncode == 0
    assert (tmp_path / "out" / "tokens" / "café 日本.txt.parquet").is_file()
    shard = tmp_path / "out" / "tokens" / "café 日本.txt.parquet"
    assert tokenmill("decode", "--shard", shard, "--row", "1", env=NOT_UTF8).stdout == "another one"


def test_polars_told_to_use_no_threads_is_one_line(tmp_path):
    result = tokenmill(
        "run", tmp_path, tmp_path / "out", env={"POLARS_MAX_THREADS": "0"}, check=False
    )
    assert result.returncode == 2
    assert result.stderr == (
        "Error: POLARS_MAX_THREADS=0: Polars needs at least one thread; unset it "
        "or give a number of threads\n"
    )
    assert not Path(tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("variable", "value", "must"),
    [
        ("TOKENMILL_ROW_IDS", "0", "a whole number of ids, at least 1"),
        ("TOKENMILL_ROW_IDS", "abc", "a whole number of ids, at least 1"),
        ("TOKENMILL_ROW_IDS", "²", "a whole number of ids, at least 1"),
        ("TOKENMILL_MIX_BUCKET_BYTES", "١٢", "a whole number of bytes, at least 1"),
        ("TOKENMILL_MIX_BUCKET_BYTES", "abc", "a whole number of bytes, at least 1"),
        ("TOKENMILL_LOCK_STALE_S", "abc", "a number of seconds 0 or more"),
        ("TOKENMILL_STORE_TIMEOUT_S", "abc", "a number of seconds above 0"),
    ],
)
def test_a_bad_tokenmill_variable_is_refused_before_any_work(tmp_path, variable, value, must):
    """Each had its own fate: a traceback, the default silently, a refusal
    only once count, train and encode had run, exit 1 where Polars' is 2."""
    data = copy_sample(tmp_path / "data", ["lines.txt"])
    result = tokenmill("run", data, tmp_path / "out", *RUN, env={variable: value}, check=False)
    assert result.returncode == 2
    assert result.stderr == f"Error: {variable}={value}: not {must}\n"
    assert not (tmp_path / "out").exists()


def test_a_line_break_in_a_name_stays_inside_its_line(tmp_path):
    """Errors and skip lines escaped it already; the run's last line and the
    stats table printed it raw, breaking both."""
    data, out = tmp_path / "da\nta", tmp_path / "o\nut"
    data.mkdir()
    (data / "x\ny.txt").write_text("a b\nc d\n", encoding="utf-8")
    run = tokenmill("run", data, out, "--vocab-size", "260")
    last = re.escape(f"-> {tmp_path}/o\\nut/manifest.json in ")
    assert re.search(rf"\nrun: [^\n]*{last}[\d.]+ s\n$", run.stderr), run.stderr
    stats = tokenmill("stats", out).stdout
    assert "  x\\ny.txt  " in stats and "\ny.txt" not in stats
