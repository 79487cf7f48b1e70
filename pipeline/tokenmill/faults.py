"""A hook for tests of interrupted runs: stop at a known point, deterministically.

With TOKENMILL_PAUSE_AT="STAGE:N" in the environment, the process creates the
file named by TOKENMILL_PAUSE_FILE and sleeps when STAGE reaches step N (the
N-th finished shard of count or encode; train's N-th merge, at the first
progress report, every 50 ms, that reaches it), so a test can wait for the
file and SIGKILL the process in the middle of STAGE, or SIGSTOP it there and
remove the file: once resumed, the run goes on (a stalled run, whose lock
another run took over meanwhile).
Under --executor ray or processes, "count-task:N" and "encode-task:N" pause a
worker process as it starts its N-th task of that stage: set in one Ray node's
environment, they hold a task on that node, to lose the node; a test may also
kill the paused worker process.
A pause is taken once in a run, by the first of its driver and the worker
processes it spawned (`processes`) to reach it: another that reaches it while
the pause lasts waits with it; one that reaches it once the file was removed
goes on, never writing the file anew (which nothing would remove: the run
waited for ever). Ray's worker processes, not started by the driver, pause
each once.
Without the variable it does nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def checkpoint(stage: str, step: int) -> None:
    at = os.environ.get("TOKENMILL_PAUSE_AT")
    if not at:
        return
    name, _, n = at.partition(":")
    if name != stage or not n.isdigit() or step < int(n):
        return
    marker = os.environ.get("TOKENMILL_PAUSE_FILE")
    if not marker:
        while True:
            time.sleep(60)
    pause = Path(marker)
    begun = pause.with_name(f".{pause.name}.begun-{_run()}")
    try:
        # Created before the marker, atomically: whoever finds it finds the
        # pause begun, the marker written or about to be.
        os.close(os.open(begun, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        # Begun by this run: join it while it lasts (until `over` exists),
        # go on once it is over (a later step of STAGE too).
        over = begun.with_name(f"{begun.name}.over")
        while not over.exists():
            time.sleep(0.05)
        return
    pause.write_text(f"{stage}:{step}\n")
    while pause.exists():
        time.sleep(0.05)
    begun.with_name(f"{begun.name}.over").touch()


def _run() -> int:
    """The run this process belongs to: its driver's pid (a worker process
    spawned by the driver: multiprocessing's child), else its own."""
    import multiprocessing  # only once a pause is reached: no start-up cost

    parent = multiprocessing.parent_process()
    return parent.pid if parent is not None and parent.pid is not None else os.getpid()
