"""--executor processes with a worker process killed (as the OOM killer does):
one line and the status of a killed run (137), nothing half-written, and a
rerun gives the outputs of an uninterrupted run."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_documents, write_shard
from runs import HANG_GUARD_S, output_files, paused, temporaries, tokenmill

from tokenmill.executors import run_tasks
from tokenmill.faults import checkpoint
from tokenmill.io import storage
from tokenmill.io.lock import LockLost, output_lock
from tokenmill.io.writers import write_json

RUN = ("--vocab-size", "300", "--workers", "2", "--executor", "processes")


def worker_processes(pid: int) -> list[int]:
    """The pool's worker processes under `pid` (spawned: `spawn_main` in their
    command line; the resource tracker is not one)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"spawn_main" in cmdline:
            found.append(int(entry.name))
    return found


def test_a_killed_worker_process_is_one_line_and_a_rerun_resumes(tmp_path):
    data = tmp_path / "data"
    for i in range(4):
        write_shard(data / f"s{i}.jsonl", make_documents(40, seed=i))
    clean = tmp_path / "clean"
    tokenmill("run", data, clean, *RUN)

    out = tmp_path / "out"
    with paused(["run", data, out, *RUN], "encode-task", 1, tmp_path) as proc:
        for pid in worker_processes(proc.pid):
            # The pool may end its other workers once the first is killed.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=HANG_GUARD_S)
    lines = err.strip().splitlines()
    assert "Traceback" not in err, err
    assert proc.returncode == 137, err
    assert lines[-1].startswith("Error: encode: a worker process died"), err
    assert sum(line.startswith("Error") for line in lines) == 1, err
    assert temporaries(out) == []

    tokenmill("run", data, out, *RUN)
    assert output_files(out) == output_files(clean)


def test_a_worker_whose_driver_is_gone_writes_nothing_into_out(tmp_path):
    """A killed driver's flock is gone with it, and a rerun may hold OUT while
    its worker processes finish their tasks (with its tokenizer): what they
    write under OUT passes the fence the driver carried to them, and is
    refused once it is gone (here a driver that is not this process)."""
    out = tmp_path / "out"
    out.mkdir()
    with output_lock(out) as lock:
        ours = lock.carried()
    fence = dataclasses.replace(ours, driver={**ours.driver, "process_start": "gone"})
    with storage.carrying([(storage.same_file_key(out), fence)]):
        with pytest.raises(LockLost, match=r"tokens/a.parquet: not written: .* has ended"):
            write_json({}, out / "tokens" / "a.parquet")
    assert not (out / "tokens" / "a.parquet").exists()
    assert temporaries(out) == []
    with output_lock(out) as lock, storage.carrying([(storage.same_file_key(out), lock.carried())]):
        write_json({}, out / "tokens" / "a.parquet")  # its driver (this process) runs


def sigint_blocked(_task: int) -> bool:
    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())


def test_worker_processes_ignore_ctrl_c_from_their_start():
    """Ctrl-C reaches the terminal's whole process group: a worker that took
    it while still importing printed a traceback of its own. They start with
    SIGINT blocked (inherited, so before any import); the driver stops them."""
    got = run_tasks(sigint_blocked, [0, 1], workers=2, desc="t", executor="processes")
    assert got == [True, True]
    assert not sigint_blocked(0)


def test_ctrl_c_ends_a_processes_run_in_one_line_and_stops_its_workers(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    for i in range(4):
        write_shard(data / f"s{i}.jsonl", make_documents(40, seed=i))
    marker = tmp_path / "paused"
    env = {**os.environ, "TOKENMILL_PAUSE_AT": "count-task:1", "TOKENMILL_PAUSE_FILE": str(marker)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenmill", "run", data, out, *RUN],
        env=env, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + HANG_GUARD_S
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = worker_processes(proc.pid)
        assert workers
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        _, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert (proc.returncode, err) == (130, "interrupted\n")
    deadline = time.monotonic() + HANG_GUARD_S
    while any(Path(f"/proc/{pid}").exists() for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)
    assert temporaries(out) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_schedulers_sigterm_or_sighup_stops_a_processes_run_as_ctrl_c_does(tmp_path, signum):
    """Killed by the signal's default, the driver left its pool's semaphores
    to Python's tracker, whose warning of leaked ones ended the job's log."""
    data, out = tmp_path / "data", tmp_path / "out"
    for i in range(4):
        write_shard(data / f"s{i}.jsonl", make_documents(40, seed=i))
    with paused(["run", data, out, *RUN], "count-task", 1, tmp_path) as proc:
        workers = worker_processes(proc.pid)
        assert workers
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=HANG_GUARD_S)
    assert (proc.returncode, err) == (128 + signum, f"terminated ({signum.name})\n")
    deadline = time.monotonic() + HANG_GUARD_S
    while any(Path(f"/proc/{pid}").exists() for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)
    assert temporaries(out) == []


def test_the_workers_of_a_killed_driver_end_too(tmp_path):
    """SIGKILL of the driver alone (the OOM killer's choice): nothing stops its
    pool, and its workers held their memory and cores until their tasks ended
    (one held here for ever); they end once their driver is gone."""
    data = tmp_path / "data"
    for i in range(4):
        write_shard(data / f"s{i}.jsonl", make_documents(40, seed=i))
    with paused(["run", data, tmp_path / "out", *RUN], "count-task", 1, tmp_path) as proc:
        workers = worker_processes(proc.pid)
        assert workers
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + HANG_GUARD_S
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in workers)


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_pause_is_taken_once_by_a_runs_worker_processes(tmp_path, monkeypatch):
    """Worker processes pause at their own N-th task (tokenmill.faults): one
    reaching it after the test removed the file (to let the first go on)
    wrote the file anew and waited for ever, and so did the run, its driver
    waiting for that task (a stalled holder in io/test_lease.py never ended).
    A worker reaching it while the pause lasts waits with it; after, it goes on."""
    import multiprocessing

    marker = tmp_path / "paused"
    monkeypatch.setenv("TOKENMILL_PAUSE_AT", "encode-task:2")
    monkeypatch.setenv("TOKENMILL_PAUSE_FILE", str(marker))
    spawn = multiprocessing.get_context("spawn")  # as the processes executor's workers
    workers = [spawn.Process(target=checkpoint, args=("encode-task", 2)) for _ in range(3)]
    try:
        workers[0].start()
        deadline = time.monotonic() + HANG_GUARD_S
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        workers[1].start()  # reaches it while it lasts, or after: either way it ends
        marker.unlink()
        for worker in workers[:2]:
            worker.join(HANG_GUARD_S)
        workers[2].start()  # reaches it after: goes on
        workers[2].join(HANG_GUARD_S)
        assert [w.exitcode for w in workers] == [0, 0, 0]
        assert not marker.exists()
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
