"""A hook for tests of interrupted runs: stop at a known point, deterministically.

With TOKENMILL_PAUSE_AT="STAGE:N" in the environment, the process creates the
file named by TOKENMILL_PAUSE_FILE and sleeps when STAGE reaches step N (the
N-th finished shard of count or encode, the N-th merge of train), so a test
can wait for the file and SIGKILL the process in the middle of STAGE, or
SIGSTOP it there and remove the file: once resumed, the run goes on (a
stalled run, whose lock another run took over meanwhile).
Under --executor ray or processes, "count-task:N" and "encode-task:N" pause a
worker process as it starts its N-th task of that stage: set in one Ray node's
environment, they hold a task on that node, to lose the node; a test may also
kill the paused worker process.
Without the variable it does nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_done: set[str] = set()  # the pauses this process left (their file was removed)


def checkpoint(stage: str, step: int) -> None:
    at = os.environ.get("TOKENMILL_PAUSE_AT")
    if not at:
        return
    name, _, n = at.partition(":")
    if name != stage or not n.isdigit() or step < int(n) or at in _done:
        return
    marker = os.environ.get("TOKENMILL_PAUSE_FILE")
    if not marker:
        while True:
            time.sleep(60)
    Path(marker).write_text(f"{stage}:{step}\n")
    while Path(marker).exists():
        time.sleep(0.05)
    _done.add(at)  # once: a later step of STAGE goes on
