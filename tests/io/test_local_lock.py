"""The local output lock (io/lock.py) against copies of its descriptor held by
this process's children."""

from __future__ import annotations

import os
import time

import pytest

from tokenmill.errors import TokenmillError
from tokenmill.io import lock
from tokenmill.io.lock import output_lock


def forked_holding(seconds: float) -> int:
    """A child that holds a copy of every descriptor open now for `seconds`,
    as one forked by `subprocess` does until it execs."""
    pid = os.fork()
    if pid == 0:
        time.sleep(seconds)
        os._exit(0)
    return pid


def test_a_lock_released_while_a_child_still_holds_its_copy_is_taken_again(tmp_path):
    """A run that ends while a process forked by one of its threads has not
    yet exec'd leaves the flock held by that child for a moment: the next run
    of the same process waits for it instead of calling its own process
    another run."""
    with output_lock(tmp_path) as held:
        held.record(None, "run")
        child = forked_holding(0.3)
    try:
        started = time.monotonic()
        with output_lock(tmp_path):
            waited = time.monotonic() - started
        assert 0.1 < waited < lock.OWN_RELEASE_S
    finally:
        os.waitpid(child, 0)


def test_a_lock_this_process_holds_is_refused_at_once(tmp_path):
    with output_lock(tmp_path) as held:
        held.record(None, "run")
        started = time.monotonic()
        with pytest.raises(TokenmillError, match="in use by another tokenmill run"):
            with output_lock(tmp_path):
                pass
        assert time.monotonic() - started < 0.1


def test_a_child_holding_it_past_the_wait_is_another_run(tmp_path, monkeypatch):
    monkeypatch.setattr(lock, "OWN_RELEASE_S", 0.05)
    with output_lock(tmp_path) as held:
        held.record(None, "run")
        child = forked_holding(0.5)
    try:
        with pytest.raises(TokenmillError, match="in use by another tokenmill run"):
            with output_lock(tmp_path):
                pass
    finally:
        os.waitpid(child, 0)
