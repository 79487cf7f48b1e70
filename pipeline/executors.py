"""Running independent per-shard tasks. Results come back in task order,
whatever the timing, so outputs never depend on scheduling.

`threads` (the default) runs tasks on threads of this process: the native
core releases the GIL and PyArrow does its I/O without it, so shards overlap
their reading, encoding and writing. With at least as many shards as
workers, each task counts or encodes on its own thread; with fewer, a
shard's batches are split over the native thread pool, whose size is also
`--workers`. Either way `--workers 1` uses one core and `--workers N` about
N. Given task sizes, the largest tasks start first. `processes` runs each task in a
worker process (spawned, so no thread state is forked). `ray` runs each task
as a Ray task (one CPU each) on an existing cluster (`ray_address`) or on a
local Ray started with `workers` CPUs; the tasks' inputs and outputs must be
on storage every node sees.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import TypeVar

from tqdm import tqdm

from pipeline import _native
from pipeline.errors import TokenmillError
from pipeline.faults import checkpoint
from pipeline.memory import release_memory

T = TypeVar("T")
R = TypeVar("R")


def _init_process(threads: int) -> None:
    _native.set_threads(threads)


def run_tasks(
    fn: Callable[[T], R],
    tasks: Sequence[T],
    *,
    workers: int,
    desc: str,
    executor: str = "threads",
    ray_address: str | None = None,
    size: Callable[[T], int] | None = None,
) -> list[R]:
    """Apply `fn` to every task with `workers` cores, showing progress.
    Given `size` (a task's expected work), the largest tasks start first, so
    the run does not end waiting on one big task while other cores idle."""
    _native.set_threads(workers)
    parallel = max(1, min(workers, len(tasks)))
    bar = tqdm(total=len(tasks), desc=desc, unit="shard", disable=None, leave=False)

    def done(n: int) -> None:
        bar.update()
        checkpoint(desc, n)

    try:
        if executor == "ray":
            return _run_ray(fn, tasks, workers, ray_address, done)
        if parallel == 1:
            results = []
            for task in tasks:
                results.append(fn(task))
                done(len(results))
            return results
        order = list(range(len(tasks)))
        if size is not None:
            order.sort(key=lambda i: -size(tasks[i]))
        with _pool(executor, parallel, workers) as pool:
            futures = {i: pool.submit(fn, tasks[i]) for i in order}
            # Collected in task order: the error raised is the first task's.
            results = []
            for i in range(len(tasks)):
                results.append(futures[i].result())
                done(len(results))
            return results
    finally:
        bar.close()
        release_memory()


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


def _ray_call(fn: Callable[[T], R], task: T) -> tuple[bool, object]:
    """Run one task on a Ray worker (tasks are idempotent: Ray may retry one whose
    node died). A task's exception comes back as a value,
    so the driver re-raises it as it was (one line, not a remote traceback)."""
    _native.set_threads(1)
    try:
        return True, fn(task)
    except Exception as e:  # noqa: BLE001 - re-raised on the driver
        return False, e


def _run_ray(
    fn: Callable[[T], R],
    tasks: Sequence[T],
    workers: int,
    address: str | None,
    done: Callable[[int], None],
) -> list[R]:
    try:
        import ray
    except ImportError:
        raise TokenmillError("--executor ray needs Ray: pip install 'tokenmill[ray]'") from None
    if not ray.is_initialized():
        options = {"include_dashboard": False, "log_to_driver": False}
        if address:
            ray.init(address=address, **options)
        else:
            ray.init(num_cpus=workers, **options)
    remote = ray.remote(num_cpus=1, max_retries=3)(_ray_call)
    refs = [remote.remote(fn, task) for task in tasks]
    results = []
    for ref in refs:
        ok, value = ray.get(ref)
        if not ok:
            for other in refs[len(results) + 1 :]:
                ray.cancel(other)
            raise value
        results.append(value)
        done(len(results))
    return results
