"""The `tokenmill` console script. It imports nothing heavy itself, so that
Ctrl-C while the CLI's modules load (a few hundred ms) still ends in one
line and exit status 130, never a traceback."""

from __future__ import annotations

import os
import signal
import sys


def _while_starting(signum, frame) -> None:
    """A signal before main() installs its handler (the rest of this module's
    imports, a few ms on a loaded machine): nothing is done yet, so the
    process ends at once, in the one line and status main's handler gives.
    KeyboardInterrupt here would surface as a traceback out of an import."""
    if signum == signal.SIGINT:
        line = "interrupted"
    else:
        line = f"terminated ({signal.Signals(signum).name})"
    try:
        os.write(2, f"{line}\n".encode())
    except OSError:
        pass
    os._exit(128 + signum)


def _is_the_command() -> bool:
    """Whether this process is `tokenmill` (the console script or `python -m
    tokenmill`), not a program importing this module (bench/), whose
    signals stay its own."""
    started = sys.modules.get("__main__")
    spec = getattr(started, "__spec__", None)
    if spec is not None and spec.name == "tokenmill.__main__":
        return True
    return os.path.basename(getattr(started, "__file__", None) or "") == "tokenmill"


if _is_the_command():
    for _signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(_signum, _while_starting)

from tokenmill import interrupt  # noqa: E402 (after the handler above)

_interrupted = False


def _on_sigint(signum, frame) -> None:
    global _interrupted
    _interrupted = True
    interrupt.stopped_by = signum
    raise KeyboardInterrupt


def process_environment() -> dict[str, str]:
    """The variables tokenmill's own processes run with, unless already set
    (`bench/` runs its in-process children with them too, as `tokenmill`
    would)."""
    return {
        # Polars' jemalloc otherwise keeps freed pages for seconds, which adds
        # its whole working set to the resident size of the stages that follow
        # it in the same process. Returning them at once (a decay of 0) made
        # merge fault the same pages in again and again. So pages wait 100 ms,
        # and a background thread returns them even once Polars is idle. Must
        # be set before polars is first imported.
        "_RJEM_MALLOC_CONF": "dirty_decay_ms:100,muzzy_decay_ms:0,background_thread:true",
        # NumPy (imported by PyArrow) would start an OpenBLAS thread per core
        # that spins beside the native core's threads (0.1 s of a core at each
        # start); tokenmill does no linear algebra.
        "OPENBLAS_NUM_THREADS": "1",
        # PyArrow's allocator (mimalloc) returns freed pages to the system
        # after 10 ms, less than a batch takes: every batch's buffers, read
        # and written, were faulted in and zeroed again (huge pages), a tenth
        # of encoding a shard. Pages unused for a second are returned, and
        # release_memory returns the rest at once. Must be set before pyarrow
        # is first imported.
        "MIMALLOC_PURGE_DELAY": "1000",
    }


def _set_process_environment() -> None:
    """Settings for tokenmill's own processes only: a program that imports
    tokenmill keeps its environment. Child processes inherit them."""
    for name, value in process_environment().items():
        os.environ.setdefault(name, value)


def _utf8_mode() -> None:
    """Names, options and text are UTF-8 whatever the locale: under a locale
    that is not (LC_ALL=C without Python's coercion, Latin-1), Python would
    decode a UTF-8 file name as undecodable bytes, and tokenmill refuse it.
    So the process starts again in Python's UTF-8 mode, before any work."""
    if sys.getfilesystemencoding() == "utf-8":  # a UTF-8 locale, or UTF-8 mode
        return
    os.environ["PYTHONUTF8"] = "1"
    try:
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    except OSError:
        pass  # no interpreter to start again: go on in the locale's encoding


def _standard_streams() -> None:
    """A closed stdin, stdout or stderr (`2>&-` in a job) leaves its descriptor
    free: the next file opened would take it, and a write meant for the log
    land in an output. Each gets /dev/null; stdout's read-only, so that a
    command whose output is its product still fails in one line, never a
    success that printed nothing. Status lines on a closed stderr go nowhere,
    as on a log that went away. Text an output's encoding cannot hold
    (PYTHONIOENCODING=latin-1) is written escaped, not a traceback."""
    for fd, mode in ((0, os.O_RDONLY), (1, os.O_RDONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            if os.open(os.devnull, mode) != fd:  # the lowest free descriptor
                raise OSError(f"descriptor {fd} not free") from None
            if fd == 2:
                sys.stderr = open(2, "w", encoding="utf-8", closefd=False)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def _check_environment() -> None:
    """Values Polars panics on (a Rust traceback), said in one line."""
    threads = os.environ.get("POLARS_MAX_THREADS", "").strip()
    if threads.lstrip("+").isdigit() and int(threads) == 0:
        sys.stderr.write(
            "Error: POLARS_MAX_THREADS=0: Polars needs at least one thread; unset it "
            "or give a number of threads\n"
        )
        sys.exit(2)


def main() -> None:
    _utf8_mode()
    _standard_streams()
    _check_environment()
    _set_process_environment()
    # Python's own handler, plus a note that Ctrl-C came: raised inside an
    # extension module's import, KeyboardInterrupt can surface as another
    # error (CPython builds an ImportError from it and fails: a TypeError).
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _on_sigint)
    try:
        from tokenmill.memory import start_up

        with start_up():
            from tokenmill.cli import main as cli
        cli()
    except KeyboardInterrupt:
        interrupt.exit_interrupted()
    except OSError as e:
        # Only click's own writes (help, version, a usage error) get here: every
        # command turns its OSErrors into one line. A full disk under
        # `tokenmill --help > FILE` is said, not a traceback; a closed pipe
        # ends quietly, as a command's output does.
        if _interrupted:
            interrupt.exit_interrupted()
        _exit_unwritten(e)
    except Exception:
        if _interrupted:
            interrupt.exit_interrupted()
        raise


def _exit_unwritten(e: OSError) -> None:
    from tokenmill.errors import exit_pipe_closed, silence

    if isinstance(e, BrokenPipeError):
        exit_pipe_closed()
    try:
        sys.stderr.write(f"Error: cannot write to standard output: {e.strerror or e}\n")
    except OSError:
        pass  # stderr is gone too
    # Python would flush stdout again at exit, and fail again: nothing more goes there.
    try:
        silence(sys.stdout.fileno())
    except (AttributeError, ValueError):
        pass
    sys.exit(1)


if __name__ == "__main__":
    main()
