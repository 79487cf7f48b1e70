"""A reader that closes standard output early (`tokenmill stats OUT | head -1`)
took all it wanted: the command ends without a word, in status 141 as a
process killed by SIGPIPE reports in a shell, while a full disk stays an
error (test_tokenize_command.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from realtext import GPT2_FILE
from runs import tokenmill_here

PIPE_CLOSED = 141


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("pipe")
    (base / "data").mkdir()
    (base / "data" / "a.txt").write_text("".join(f"line {i} of the corpus\n" for i in range(50)))
    tokenmill_here("run", base / "data", base / "out", "--vocab-size", "300", "--workers", "1")
    return base / "out"


def into_a_closed_pipe(*args, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """`tokenmill ARGS` with standard output a pipe whose reader has gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "tokenmill", *map(str, args)],
            input=stdin,
            stdout=write,
            stderr=subprocess.PIPE,
        )
    finally:
        os.close(write)


COMMANDS = {
    "help": ["--help"],
    "version": ["--version"],
    "command help": ["tokenize", "--help"],
    "tokenize": ["tokenize", "--tokenizer", GPT2_FILE, "hi"],
    "pieces": ["tokenize", "--tokenizer", GPT2_FILE, "--pieces", "-"],
    "stats": ["stats", "{out}"],
    "decode": ["decode", "--shard", "{out}/tokens/a.txt.parquet", "--row", "0"],
}


@pytest.mark.parametrize("name", COMMANDS)
def test_a_closed_pipe_ends_the_command_quietly(out, name):
    args = [str(a).format(out=out) for a in COMMANDS[name]]
    result = into_a_closed_pipe(*args, stdin=b"word " * 100_000)
    # no "Error: cannot write to standard output", nor Python's "Exception ignored"
    assert result.stderr == b""
    assert result.returncode == PIPE_CLOSED
