"""Helpers for tests of whole runs: the CLI in a subprocess (to kill it, or where
the process is the point) or in this process (tokenmill_here: cheaper), and
comparing output folders."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from realtext import sample_paths

from tokenmill.io.lock import LOCK

HANG_GUARD_S = 300  # only to end a test that would otherwise hang; never a timing assertion


def copy_sample(dest: Path, names: list[str] | None = None) -> Path:
    """sample_data/'s shards (or those named) copied into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    for p in sample_paths():
        if names is None or p.name in names:
            shutil.copy(p, dest / p.name)
    return dest


def tokenmill(*args, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "tokenmill", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def tokenmill_here(*args, check: bool = True) -> subprocess.CompletedProcess:
    """`tokenmill ARGS` in this process (click's CliRunner), answering as `tokenmill`
    does: for tests whose point is not the process, it saves the Python start-up
    and the imports, most of a small run's time."""
    from click.testing import CliRunner

    from tokenmill.cli import main

    argv = [str(a) for a in args]
    result = CliRunner().invoke(main, argv, catch_exceptions=False)
    done = subprocess.CompletedProcess(argv, result.exit_code, result.stdout, result.stderr)
    if check:
        assert done.returncode == 0, done.stderr
    return done


@contextmanager
def paused(args: list, stage: str, step: int, tmp_path: Path, env: dict | None = None):
    """`tokenmill ARGS` running, held at STAGE:STEP (see tokenmill.faults), for the
    block; SIGKILLed after it, with the worker processes it started (its own
    process group)."""
    marker = tmp_path / f"paused-at-{stage}-{step}"
    env = {
        **os.environ,
        **(env or {}),
        "TOKENMILL_PAUSE_AT": f"{stage}:{step}",
        "TOKENMILL_PAUSE_FILE": str(marker),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenmill", *map(str, args)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + HANG_GUARD_S
        while not marker.exists():
            if proc.poll() is not None:
                why = proc.stderr.read()
                raise AssertionError(f"exited ({proc.returncode}) before pausing: {why}")
            if time.monotonic() > deadline:
                raise AssertionError(f"never reached {stage}:{step}")
            time.sleep(0.05)
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()


def kill_when_paused(args: list, stage: str, step: int, tmp_path: Path) -> None:
    """Run `tokenmill ARGS` until STAGE reaches STEP (see tokenmill.faults), then SIGKILL it."""
    with paused(args, stage, step, tmp_path) as proc:
        pass
    assert proc.returncode == -signal.SIGKILL


def output_files(out: Path) -> dict[str, bytes]:
    """Every file of an output folder but the manifest (which holds timings) and
    the lock file (which names the last run's process)."""
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name not in ("manifest.json", LOCK)
    }


def temporaries(out: Path) -> list[str]:
    return sorted(p.name for p in out.rglob(".*.tmp-*"))


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())
