"""The pid in a temporary's name (atomic_path's `.NAME.tmp-PID-HEX` beside an
output, scratch_file's `.NAME.tmp-PID-RANDOM` in the scratch folder), read by
one helper for both cleanups: a name holding no pid a process could have is
never removed, and never stops the cleanup."""

from __future__ import annotations

import os
import tempfile

import pytest

from tokenmill.io.storage import remove_dead_scratch, scratch_folder, temporary_pid
from tokenmill.io.writers import remove_leftovers

HUGE = "9" * 30


@pytest.mark.parametrize(
    ("name", "pid"),
    [
        (".a.json.tmp-123-abcd1234", 123),
        (".counts.parquet.tmp-77-x1y2z3", 77),
        (".a.tmp-5.tmp-42-abcd1234", 42),  # a name that itself holds the mark
        (".a.json.tmp--abcd1234", None),
        (".a.json.tmp-x12-abcd1234", None),
        (".a.json", None),
        ("123-abcd1234", None),  # digits, but no mark before them
        (".a.json.tmp-٣-abcd1234", None),  # Arabic-Indic digit: int() reads it
        (".a.json.tmp-²-abcd1234", None),  # a digit to str.isdigit, not to int()
        (f".a.json.tmp-{HUGE}-abcd1234", None),  # beyond what os.kill takes
        (f".a.json.tmp-{2**31}-abcd1234", None),
        (".a.json.tmp-0-abcd1234", None),  # os.kill(0) is the process group
    ],
)
def test_the_pid_of_a_temporarys_name(name, pid):
    assert temporary_pid(name) == pid


def dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_leftovers_beside_an_output_with_odd_pids_are_left(tmp_path):
    dead = tmp_path / f".o.json.tmp-{dead_pid()}-abcd1234"
    odd = [tmp_path / f".o.json.tmp-{pid}-abcd1234" for pid in (HUGE, "²", "٣")]
    for p in (dead, *odd):
        p.write_text("half")
    assert remove_leftovers(tmp_path / "o.json") == [dead]
    assert all(p.exists() for p in odd)


def test_dead_scratch_with_odd_pids_is_left(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = scratch_folder()
    dead = folder / f".o.json.tmp-{dead_pid()}-k2j4_x"
    live = folder / f".o.json.tmp-{os.getpid()}-k2j4_x"
    odd = [folder / f".o.json.tmp-{pid}-k2j4_x" for pid in (HUGE, "²", "٣")]
    for p in (dead, live, *odd):
        p.write_text("half")
    assert remove_dead_scratch() == [dead]
    assert live.exists() and all(p.exists() for p in odd)
