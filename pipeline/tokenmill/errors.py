"""tokenmill's errors: every problem a user can fix raises a TokenmillError,
whose message is one line naming the file, row or argument at fault.

    ValueError
    └── TokenmillError               a bad input, file, argument or option
        ├── DisallowedSpecialTokenError  encode met a special token's text it may not encode
        ├── WriteError               an output could not be written
        ├── StoreError               an object store failed while an input was read
        ├── InputChanged             an input changed while a run read it
        ├── OptionError              a wrong, missing or conflicting argument (CLI: exit 2)
        └── WorkerLost               a worker process died under a stage

TokenmillError derives from ValueError, as tiktoken's and rustbpe's errors
are ValueErrors: code written for them catches tokenmill's too.
"""

from __future__ import annotations

import os
import re
import sys
from typing import NoReturn

__all__ = [
    "DisallowedSpecialTokenError",
    "InputChanged",
    "NoSuchPath",
    "OptionError",
    "StoreError",
    "TokenmillError",
    "WorkerLost",
    "WriteError",
]


def one_line(e: BaseException) -> str:
    """What an exception says, on one line (its type when it says nothing)."""
    return " ".join(str(e).split()) or type(e).__name__


# Control characters as Python writes them in a string's repr: a file name
# may hold a line break, and an error is one line.
_CONTROLS: dict[int, str] = {c: repr(chr(c))[1:-1] for c in [*range(32), 127]}
# A byte of a name that is not UTF-8, as Python hands it over (a lone
# surrogate, which no output can print): shown as the byte, \xff.
_CONTROLS.update({0xDC00 + b: f"\\x{b:02x}" for b in range(128, 256)})


def escaped(text: str) -> str:
    r"""`text` with its control characters escaped, so that it prints as one line.

    >>> escaped("data/bad\nname.jsonl: row 0")
    'data/bad\\nname.jsonl: row 0'
    >>> escaped("t\udcff.json")
    't\\xff.json'
    """
    return text.translate(_CONTROLS)


class TokenmillError(ValueError):
    """A problem the user can fix; the message names the file, row or argument."""


class DisallowedSpecialTokenError(TokenmillError):
    """`encode` met the text of a special token that `disallowed_special`
    forbids (by default, every special token not in `allowed_special`), as
    tiktoken refuses it."""


class WriteError(TokenmillError):
    """An output could not be written (disk full, read-only folder): never a
    bad input, so --on-error skip does not skip it."""


class StoreError(TokenmillError):
    """The object store holding an input failed while it was read (unreachable,
    no credentials, a connection dropped after retries): never a bad input, so
    --on-error skip does not skip it; a rerun resumes."""


class NoSuchPath(TokenmillError):
    """A URL that names nothing a file can be in (a store's root, no bucket): a
    missing path, as a local one that does not exist, not a usage error."""


class InputChanged(TokenmillError):
    """An input changed while a run read it, or between two stages' reads of it
    (count's and encode's): never a bad input, so --on-error skip does not skip
    it; a rerun redoes what was made from its old content."""


class OptionError(TokenmillError):
    """A value given on the command line is wrong (an unknown --format, a
    --val-fraction of nan), an argument is missing, or options do not go
    together (--pattern for a file that has its own): a usage error, which
    the CLI ends with status 2 and where help is, as for click's own."""


class WorkerLost(TokenmillError):
    """A worker process died under a stage (killed by the system, most often
    for memory), or, under Ray, a node or worker Ray ran it on: nothing it was
    writing is kept, and a rerun resumes. The CLI exits with status 137, as
    for a run killed whole."""


# The library names an argument as Python spells it (`vocab_size=300`,
# `give pattern=`); the CLI names the option that sets it instead.
_CLI_OPTIONS = {
    "mode": "--mode",
    "pattern": "--pattern",
    "special_tokens": "--special-token",
    "superword_at": "--superword-at",
    "vocab_size": "--vocab-size",
}
_ARGUMENT = re.compile(r"(?<![\w/.\\-])(" + "|".join(_CLI_OPTIONS) + r")=(\S?)")


def cli_message(message: str) -> str:
    """A library message as the CLI says it: `vocab_size=10 is below ...`
    becomes `--vocab-size 10 is below ...`.

    >>> cli_message("give pattern= (a preset or a regex)")
    'give --pattern (a preset or a regex)'
    >>> cli_message("vocab_size=10 is below 257")
    '--vocab-size 10 is below 257'
    """

    def option(m: re.Match[str]) -> str:
        value = m.group(2)
        spaced = value and value not in ",;:)."
        return _CLI_OPTIONS[m.group(1)] + (" " + value if spaced else value)

    return _ARGUMENT.sub(option, message)


# The status of a command whose reader closed standard output early: what a
# shell reports for a process that SIGPIPE killed, 128 + 13.
PIPE_CLOSED = 141


def exit_pipe_closed() -> NoReturn:
    """Standard output's reader is gone (`| head -1`): it wants no more, so the
    command ends without a word, as Unix tools do. What Python still flushes
    at exit goes to /dev/null, not into an "Exception ignored" line."""
    silence(1)
    sys.exit(PIPE_CLOSED)


def silence(fd: int) -> None:
    """What is still written to `fd`, whose reader or disk is gone, goes to
    /dev/null instead of failing again."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        if null != fd:  # a closed fd is the one os.open reuses
            os.dup2(null, fd)
            os.close(null)
    except OSError:
        pass
