"""A hook for tests of interrupted runs: stop at a known point, deterministically.

With TOKENMILL_PAUSE_AT="STAGE:N" in the environment, the process creates the
file named by TOKENMILL_PAUSE_FILE and sleeps for good when STAGE reaches step
N (the N-th finished shard of count or encode, the N-th merge of train), so a
test can wait for the file and SIGKILL the process in the middle of STAGE.
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


def checkpoint(stage: str, step: int) -> None:
    at = os.environ.get("TOKENMILL_PAUSE_AT")
    if not at:
        return
    name, _, n = at.partition(":")
    if name != stage or not n.isdigit() or step < int(n):
        return
    marker = os.environ.get("TOKENMILL_PAUSE_FILE")
    if marker:
        Path(marker).write_text(f"{stage}:{step}\n")
    while True:
        time.sleep(60)
