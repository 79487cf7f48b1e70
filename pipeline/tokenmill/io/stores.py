"""How long a call to an object store may take before it fails.

A store that accepts connections and never answers (a hung proxy, a
gateway that lost its backend) would otherwise hold a run without a word
for as long as the client's defaults allow: for S3, botocore waits 60 s for
each read and tries five times, under s3fs's own five tries, which is 25
minutes for each call. So every S3 filesystem tokenmill makes waits
`read_timeout()` for a reply (TOKENMILL_STORE_TIMEOUT_S, 20 s unless set)
and botocore tries three times (its "standard" mode, the AWS SDKs'
default), under s3fs's five: a run on a store that stopped answering fails
in one line naming the object, an upload or listing within about five
minutes (a read, which s3fs retries at two levels, later), saying each
retry as it goes (`for_the_command_line`); Ctrl-C stops it at once.

The options travel with each path (a UPath's storage options), so worker
processes and Ray tasks bound their calls the same way. What the user set
keeps priority: their fsspec configuration's `config_kwargs`, and
AWS_MAX_ATTEMPTS / AWS_RETRY_MODE for botocore's tries.
"""

from __future__ import annotations

import logging
import os
import sys

from tokenmill.environment import STORE_TIMEOUT_S, seconds
from tokenmill.errors import one_line

DEFAULT_TIMEOUT_S = 20.0
CONNECT_TIMEOUT_S = 10.0
CLIENT_TRIES = 3  # botocore's tries of one request, under s3fs's five


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
