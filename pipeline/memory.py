"""Keeping a long run's resident memory near what its current step needs, and
the cyclic garbage collector out of the way of big acyclic builds."""

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa

from pipeline import _native


def release_memory() -> None:
    """Return memory freed by the native core (glibc arenas) and by PyArrow's
    pool to the operating system; call after a step that allocated a lot."""
    _native.release_memory()
    pa.default_memory_pool().release_unused()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Build many objects that form no cycles (a parsed tokenizer file, its
    tables) without the cyclic collector: tens of thousands of new lists and
    tuples set off a full collection, which holds the GIL for tens of
    milliseconds while encode workers wait, and can find nothing to free."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
