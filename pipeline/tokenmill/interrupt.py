"""How a run stopped by a signal ends: Ctrl-C, or a scheduler's SIGTERM or
SIGHUP, all raised as KeyboardInterrupt (entry.py) so that the run stops its
workers as Ctrl-C does. Nothing heavy is imported: the console script uses
it before the CLI's modules load."""

from __future__ import annotations

import os
import signal
import sys
import threading

# The names of the threads the threads executor runs tasks on.
TASK_THREADS = "tokenmill-task"
# The signal that stopped the run (entry.py sets it).
stopped_by: int = signal.SIGINT


def exit_interrupted() -> None:
    """One line and the status of the signal (130, 143, 129). A SIGTERM or
    SIGHUP stops the run as Ctrl-C does, not by the signal's default: the
    worker processes are stopped and their semaphores given back, where a
    run killed outright left Python's warning of leaked ones in the log."""
    if stopped_by == signal.SIGINT:
        line = "interrupted"
    else:
        line = f"terminated ({signal.Signals(stopped_by).name})"
    try:
        sys.stderr.write(line + "\n")
    except OSError:
        pass
    process = sys.modules.get("concurrent.futures.process")
    if process is not None:
        # The run's process pools are shut down by now. Python's exit hook
        # would still wake their manager threads through pipes those may have
        # closed (EBADF), printing "Exception ignored in ... _python_exit" and
        # a traceback after the one line, now and then.
        getattr(process, "_threads_wakeups", {}).clear()
    status = 128 + stopped_by
    # Store calls still in flight on fsspec's event loop are dropped at exit:
    # asyncio's "Task was destroyed but it is pending!" and their coroutines'
    # "Exception ignored" tracebacks would follow the one line.
    sys.unraisablehook = lambda _: None
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.getLogger("asyncio").disabled = True
    if any(t.is_alive() and t.name.startswith(TASK_THREADS) for t in threading.enumerate()):
        # A task thread still waits on a store or file system that stopped
        # answering (executors._stop gave it its grace): Python's exit would
        # join it, holding Ctrl-C for as long. What it may still write is a
        # temporary file, never an output the manifest names.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)
    sys.exit(status)
