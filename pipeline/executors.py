"""Running independent per-shard tasks: in this process, or in a pool of
worker processes. Results come back in task order, whatever the timing."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")
R = TypeVar("R")


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _init_worker(threads: int) -> None:
    # Each worker gets its share of the cores for the native core's threads.
    os.environ["RAYON_NUM_THREADS"] = str(threads)


def run_tasks(fn: Callable[[T], R], tasks: Sequence[T], *, workers: int, desc: str) -> list[R]:
    """Apply `fn` to every task with up to `workers` processes, showing progress."""
    workers = max(1, min(workers, len(tasks)))
    bar = tqdm(total=len(tasks), desc=desc, unit="shard", disable=None, leave=False)
    try:
        if workers == 1:
            results = []
            for task in tasks:
                results.append(fn(task))
                bar.update()
            return results
        threads = max(1, default_workers() // workers)
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(
            workers, mp_context=ctx, initializer=_init_worker, initargs=(threads,)
        ) as pool:
            futures = [pool.submit(fn, task) for task in tasks]
            for f in futures:
                f.add_done_callback(lambda _: bar.update())
            return [f.result() for f in futures]
    finally:
        bar.close()
