"""The TOKENMILL_* variables tokenmill reads, each parsed here and nowhere
else, so that the command line can check every one before any work
(`check_all`): a bad value found only when its stage comes, after count,
train and encode ran, or silently replaced by the default, costs a run.
The test hook's variables (faults.py) are not settings and are not here.

Each owner reads its variable with `whole` or `seconds` and its own
default, which stands when the variable is unset or blank; any other value
is the variable's or a TokenmillError naming it and what it must be.
"""

from __future__ import annotations

import math
import os

from tokenmill.errors import TokenmillError

ROW_IDS = "TOKENMILL_ROW_IDS"
MIX_BUCKET_BYTES = "TOKENMILL_MIX_BUCKET_BYTES"
LOCK_STALE_S = "TOKENMILL_LOCK_STALE_S"
STORE_TIMEOUT_S = "TOKENMILL_STORE_TIMEOUT_S"


def _value(name: str) -> str:
    return os.environ.get(name, "").strip()


def _refused(name: str, value: str, what: str) -> TokenmillError:
    shown = value if value.isprintable() else repr(value)
    return TokenmillError(f"{name}={shown}: not {what}")


def whole(name: str, default: int, unit: str) -> int:
    """A count of `unit` (ids, bytes), at least 1."""
    value = _value(name)
    if not value:
        return default
    # isdigit alone takes "²" (int() refuses it) and "١٢" (int() reads 12).
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise _refused(name, value, f"a whole number of {unit}, at least 1")
    return int(value)


def seconds(name: str, default: float, zero: bool = False) -> float:
    """A finite number of seconds above 0 (or 0 too, with `zero`)."""
    value = _value(name)
    if not value:
        return default
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0 or (number == 0 and not zero):
        raise _refused(name, value, f"a number of seconds {'0 or more' if zero else 'above 0'}")
    return number


def check_all() -> None:
    """Every variable above read once, the first bad one raised (the
    defaults, which their owners hold, do not matter here)."""
    whole(ROW_IDS, 1, "ids")
    whole(MIX_BUCKET_BYTES, 1, "bytes")
    seconds(LOCK_STALE_S, 1.0, zero=True)
    seconds(STORE_TIMEOUT_S, 1.0)
