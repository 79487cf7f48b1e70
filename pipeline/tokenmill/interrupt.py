"""How a run stopped by a signal ends: Ctrl-C, or a scheduler's SIGTERM or
SIGHUP, all raised as KeyboardInterrupt (entry.py) so that the run stops its
workers as Ctrl-C does. Nothing heavy is imported: the console script uses
it before the CLI's modules load."""

from __future__ import annotations

import signal
import sys

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
    sys.exit(128 + stopped_by)
