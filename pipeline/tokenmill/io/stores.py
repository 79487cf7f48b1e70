"""How long a call to an object store may take before it fails.

A store that accepts connections and never answers (a hung proxy, a
gateway that lost its backend) would otherwise hold a run without a word
for as long as the client's defaults allow: for S3, botocore waits 60 s for
each read and tries five times, under s3fs's own five tries, and a read
nests two such loops of s3fs: 125 waits, two hours. So every S3 filesystem
tokenmill makes waits `read_timeout()` for a reply
(TOKENMILL_STORE_TIMEOUT_S, 20 s unless set), botocore tries three times
(its "standard" mode, the AWS SDKs' default, which also retries a 500 or
503) and s3fs twice (`bounded`): an upload or a listing fails after at most
6 waits (2 min at the defaults), a read after at most 12 (4 min), in one
line naming the object, saying each retry of s3fs as it goes
(`for_the_command_line`); Ctrl-C stops it at once.

The options travel with each path (a UPath's storage options), and
s3fs's tries are set on each process's filesystem at its first call made
through io/storage.py, so worker processes and Ray tasks bound their calls
the same way. What the user set
keeps priority: their fsspec configuration's `config_kwargs`, and
AWS_MAX_ATTEMPTS / AWS_RETRY_MODE for botocore's tries.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TypeVar

from tokenmill.environment import STORE_TIMEOUT_S, seconds
from tokenmill.errors import one_line

DEFAULT_TIMEOUT_S = 20.0
CONNECT_TIMEOUT_S = 10.0
CLIENT_TRIES = 3  # botocore's tries of one request
# s3fs's tries of a call, over botocore's; a read nests two such loops. Two,
# not s3fs's five: a 500 or 503 is botocore's to retry (s3fs gives those up
# at once), so these only try a call that timed out or lost its connection
# again, and each retry is said (`for_the_command_line`).
FILESYSTEM_TRIES = 2

FS = TypeVar("FS")


def read_timeout() -> float:
    """Seconds a store call waits for the reply's next bytes."""
    return seconds(STORE_TIMEOUT_S, DEFAULT_TIMEOUT_S)


def storage_options(protocol: str) -> dict:
    """The filesystem options tokenmill gives a URL of `protocol`: bounded
    waits for S3, nothing for the others (their libraries' own)."""
    if protocol not in ("s3", "s3a"):
        return {}
    from fsspec.config import conf

    configured = {**conf.get("s3a", {}), **conf.get(protocol, {})}
    seconds = read_timeout()
    client = {
        "connect_timeout": min(CONNECT_TIMEOUT_S, seconds),
        "read_timeout": seconds,
        **configured.get("config_kwargs", {}),
    }
    if "retries" not in client and not (
        os.environ.get("AWS_MAX_ATTEMPTS") or os.environ.get("AWS_RETRY_MODE")
    ):
        client["retries"] = {"mode": "standard", "max_attempts": CLIENT_TRIES}
    return {"config_kwargs": client}


def bounded(fs: FS) -> FS:
    """`fs` with s3fs's tries bounded (FILESYSTEM_TRIES), if an S3 one. s3fs
    takes no option for them, only its class attribute, read as
    `self.retries`: so they are set on the instance, which fsspec's cache
    shares with every path of the same options in this process (a path sent
    to a worker process finds that process's own)."""
    if "s3" in getattr(fs, "protocol", ()) and hasattr(fs, "retries"):
        vars(fs).setdefault("retries", FILESYSTEM_TRIES)
    return fs


class _RetryNotes(logging.Handler):
    """s3fs's record of a call it tries again, as one line on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg != "Retryable error: %s" or not record.args:
            return
        error = record.args[0] if isinstance(record.args, tuple) else record.args
        said = one_line(error) if isinstance(error, BaseException) else str(error)
        try:
            sys.stderr.write(f"note: the store: {said}; trying again\n")
        except (OSError, ValueError):
            pass


def for_the_command_line() -> None:
    """The command line's way: each call s3fs tries again is said on stderr
    as it happens, so a stalled store is seen within a minute, not only when
    the run fails.
    s3fs's logger passes its debug records on then: the command line's root
    logger has no handler to print them."""
    logger = logging.getLogger("s3fs")
    if any(isinstance(h, _RetryNotes) for h in logger.handlers):
        return
    handler = _RetryNotes(logging.DEBUG)
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.DEBUG:
        logger.setLevel(logging.DEBUG)
