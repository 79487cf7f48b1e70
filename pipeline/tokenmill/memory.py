"""Keeping a long run's resident memory near what its current step needs, and
the cyclic garbage collector out of the way of big acyclic builds."""

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# Nothing heavy at the top: the console script (entry.py) uses `start_up`
# before any of tokenmill's modules load.

# A batch of more text than this is a long document's (text blocks are 16 MB).
# Reading it left freed buffers that the allocators keep for a while (a JSON
# line parsed, a Parquet page decoded and its dictionary copied): a stage
# gives them back (`release_memory`) before it works on the text.
RELEASE_BYTES = 32 << 20


def release_memory() -> None:
    """Return memory freed by the native core (glibc arenas) and by PyArrow's
    pool to the operating system; call after a step that allocated a lot."""
    import pyarrow as pa

    from tokenmill import _native

    _native.release_memory()
    pa.default_memory_pool().release_unused()


def bound_retained_memory() -> None:
    """For tokenmill's own processes (the CLI, its worker processes), which run
    stage after stage: glibc returns freed memory as it goes instead of
    keeping tens of MB under the next stage's peak (pool.rs says how much).
    A program that only imports tokenmill, or a Ray worker that may run other
    work, keeps its own allocator settings."""
    from tokenmill import _native

    _native.bound_retained_memory()


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


@contextmanager
def start_up() -> Iterator[None]:
    """A command loading its modules and files: the cyclic collector is
    paused, then what was made is frozen (`gc.freeze`: never walked by a
    collection again). Modules, classes, functions and a vocabulary's tables
    stay alive, so the collector, set off by every 700 new objects, would
    walk them over and over for nothing: ~15 ms of a command's start-up."""
    with gc_paused():
        try:
            yield
        finally:
            gc.freeze()
