"""--executor processes with a worker process killed (as the OOM killer does):
one line and the status of a killed run (137), nothing half-written, and a
rerun gives the outputs of an uninterrupted run."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from conftest import make_documents, write_shard
from runs import HANG_GUARD_S, output_files, paused, temporaries, tokenmill

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
