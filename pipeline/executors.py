"""Running independent per-shard tasks. Results come back in task order,
whatever the timing, so outputs never depend on scheduling.

`threads` (the default) runs tasks on threads of this process: the native
core releases the GIL and PyArrow does its I/O without it, so shards overlap
their reading, encoding and writing, and the encoder's word cache is shared.
`--workers` is also the size of the native thread pool, so `--workers 1`
uses one core and `--workers N` about N. `processes` runs each task in a
worker process (spawned, so no thread state is forked).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import TypeVar

from tqdm import tqdm

from pipeline import _native

T = TypeVar("T")
R = TypeVar("R")
EXECUTORS = ("threads", "processes")


def default_workers() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _init_process(threads: int) -> None:
    _native.set_threads(threads)


def run_tasks(
    fn: Callable[[T], R],
    tasks: Sequence[T],
    *,
    workers: int,
    desc: str,
    executor: str = "threads",
) -> list[R]:
    """Apply `fn` to every task with `workers` cores, showing progress."""
    _native.set_threads(workers)
    parallel = max(1, min(workers, len(tasks)))
    bar = tqdm(total=len(tasks), desc=desc, unit="shard", disable=None, leave=False)
    try:
        if parallel == 1:
            results = []
            for task in tasks:
                results.append(fn(task))
                bar.update()
            return results
        with _pool(executor, parallel, workers) as pool:
            futures = [pool.submit(fn, task) for task in tasks]
            for f in futures:
                f.add_done_callback(lambda _: bar.update())
            return [f.result() for f in futures]
    finally:
        bar.close()


def _pool(executor: str, parallel: int, workers: int) -> Executor:
    if executor == "threads":
        return ThreadPoolExecutor(parallel, thread_name_prefix="tokenmill-task")
    if executor == "processes":
        return ProcessPoolExecutor(
            parallel,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_process,
            initargs=(max(1, workers // parallel),),
        )
    raise ValueError(f"unknown executor {executor!r}")
