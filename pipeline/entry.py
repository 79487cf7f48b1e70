"""The `tokenmill` console script. It imports nothing heavy itself, so that
Ctrl-C while the CLI's modules load (a few hundred ms) still ends in one
line and exit status 130, never a traceback."""

from __future__ import annotations

import signal
import sys

_interrupted = False


def _on_sigint(signum, frame) -> None:
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def main() -> None:
    # Python's own handler, plus a note that Ctrl-C came: raised inside an
    # extension module's import, KeyboardInterrupt can surface as another
    # error (CPython builds an ImportError from it and fails: a TypeError).
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        from pipeline.memory import start_up

        with start_up():
            from pipeline.cli import main as cli
        cli()
    except KeyboardInterrupt:
        _exit_interrupted()
    except Exception:
        if _interrupted:
            _exit_interrupted()
        raise


def _exit_interrupted() -> None:
    sys.stderr.write("interrupted\n")
    sys.exit(130)


if __name__ == "__main__":
    main()
