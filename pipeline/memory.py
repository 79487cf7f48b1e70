"""Keeping a long run's resident memory near what its current step needs."""

import pyarrow as pa

from pipeline import _native


def release_memory() -> None:
    """Return memory freed by the native core (glibc arenas) and by PyArrow's
    pool to the operating system; call after a step that allocated a lot."""
    _native.release_memory()
    pa.default_memory_pool().release_unused()
