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
on storage every node sees (object storage, s3://..., or a shared
filesystem): each task reads its shard and writes its output itself, and
only its small summary comes back to the driver. A task whose node is lost
is run again elsewhere (RAY_RETRIES), which is safe because outputs appear
whole or not at all and the results are collected in task order.
Only the driver holds OUT's lock: worker processes and Ray tasks get its
fence (storage.carried_fences), so their I/O under OUT stops when the
driver's lock is lost or the driver is gone (io/lock.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import CancelledError, Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from tokenmill import _native, interrupt
from tokenmill.errors import TokenmillError, WorkerLost
from tokenmill.faults import checkpoint
from tokenmill.io import storage
from tokenmill.memory import bound_retained_memory, release_memory

T = TypeVar("T")
R = TypeVar("R")


# How often a worker process looks whether its driver still runs.
DRIVER_WATCH_S = 0.5
# How long Ctrl-C waits for the tasks running on threads to end (_stop).
INTERRUPT_GRACE_S = 5.0


def _init_process(threads: int, driver: int) -> None:
    bound_retained_memory()
    _native.set_threads(threads)
    threading.Thread(
        target=_exit_without_driver, args=(driver,), name="tokenmill-driver-watch", daemon=True
    ).start()


def _exit_without_driver(driver: int) -> None:
    """End this worker once its driver is gone (killed: nothing stops the pool).
    Its writes under OUT are refused then anyway (io/lock.py RunFence), but it
    would hold its memory and cores until its task ended; an output is written
    whole or not at all, so ending it mid-task loses nothing."""
    while os.getppid() == driver:
        time.sleep(DRIVER_WATCH_S)
    os._exit(1)


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
    bar = progress_bar(len(tasks), desc)

    def done(n: int) -> None:
        bar.update()
        checkpoint(desc, n)

    def largest_first() -> list[int]:
        order = list(range(len(tasks)))
        if size is not None:
            order.sort(key=lambda i: -size(tasks[i]))
        return order

    try:
        if executor == "ray":
            return _run_ray(fn, tasks, largest_first(), workers, ray_address, done, desc)
        if parallel == 1:
            results = []
            for task in tasks:
                results.append(fn(task))
                done(len(results))
            return results
        pool = _pool(executor, parallel, workers)
        futures: dict[int, Future] = {}
        try:
            if executor == "processes":
                fences = storage.carried_fences()
                with _sigint_blocked():  # the workers start at the first submit
                    futures = {
                        i: pool.submit(_process_call, fn, tasks[i], desc, fences)
                        for i in largest_first()
                    }
            else:
                futures = {i: pool.submit(fn, tasks[i]) for i in largest_first()}
            # Collected in task order: the error raised is the first task's.
            results = []
            for i in range(len(tasks)):
                results.append(_result(futures[i], desc))
                done(len(results))
        except KeyboardInterrupt:
            _stop(pool)
            raise
        except BaseException:
            # The run ends with this error: the queued tasks would only be
            # work thrown away, and outputs written after the error line. The
            # running ones are waited for in slices, as results are: one held
            # by a store that stopped answering must not hold Ctrl-C too.
            pool.shutdown(wait=False, cancel_futures=True)
            try:
                for future in futures.values():
                    _settled(future)
            except KeyboardInterrupt:
                _stop(pool)
                raise
            pool.shutdown(wait=True)
            raise
        pool.shutdown(wait=True)
        return results
    finally:
        bar.close()
        release_memory()
        if executor != "threads":
            storage.forget_listings()


class _NoBar:
    def update(self) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: int, desc: str):
    """tqdm's bar of `total` shards, which tqdm (disable=None) shows only when
    stderr is a terminal. Decided here first, so that a run without a terminal
    (a script, a job, the benchmark) does not import tqdm: ~15 ms of start-up."""
    isatty = getattr(sys.stderr, "isatty", None)
    if isatty is not None and not isatty():
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="shard", disable=None, leave=False)


WAIT_SLICE_S = 0.2


def _result(future: Future[R], desc: str) -> R:
    from concurrent.futures.process import BrokenProcessPool

    try:
        while True:
            # Waited on in slices: Ctrl-C may reach one of the process's other
            # threads (the native core's, Polars'), whose handler only flags it,
            # and a wait without end would never let the main thread act on it.
            with contextlib.suppress(TimeoutError):
                return future.result(timeout=WAIT_SLICE_S)
    except BrokenProcessPool:
        raise WorkerLost(
            f"{desc}: a worker process died (killed by the system, often for memory); "
            "rerun to resume"
        ) from None


def _settled(future: Future) -> None:
    """Return once `future` has ended, however (waited on in slices, as in _result)."""
    while not future.done():
        with contextlib.suppress(TimeoutError, CancelledError):
            future.exception(timeout=WAIT_SLICE_S)


# Tasks each worker process (of `processes`, or of a Ray node) has started, per
# stage: tests pause the N-th (tokenmill.faults, stage "count-task" or
# "encode-task"), to kill that worker or, under Ray, to lose that node only
# (TOKENMILL_PAUSE_AT set in that node's environment).
_started: dict[str, int] = {}


def _task_started(stage: str) -> None:
    _started[stage] = _started.get(stage, 0) + 1
    checkpoint(f"{stage}-task", _started[stage])


def _process_call(fn: Callable[[T], R], task: T, stage: str, fences: list) -> R:
    """Run one task in a worker process, its I/O under OUT fenced by the
    driver's lock (`fences`: storage.carried_fences)."""
    _task_started(stage)
    with storage.carrying(fences):
        return fn(task)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Processes started inside inherit SIGINT blocked (the signal mask
    survives exec, and Python leaves it so): Ctrl-C reaches the terminal's
    whole process group, and a worker still importing printed a traceback of
    its own. The driver takes the interrupt (another of its threads, or this
    one once unblocked: never lost) and stops them (_stop)."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _stop(pool: Executor) -> None:
    """On Ctrl-C: no queued task starts, and worker processes end now, not
    after the tasks they hold. A thread cannot be stopped: the run waits
    INTERRUPT_GRACE_S for the tasks running on them, then ends without them
    (interrupt.exit_interrupted), since a task waiting on a store or a file
    system that stopped answering would hold Ctrl-C for minutes. What such a
    task leaves under OUT is a temporary file, which the next run removes."""
    # Taken first: shutdown forgets them.
    processes = list((getattr(pool, "_processes", None) or {}).values())
    threads = list(getattr(pool, "_threads", ()))
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    deadline = time.monotonic() + INTERRUPT_GRACE_S
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))


def _pool(executor: str, parallel: int, workers: int) -> Executor:
    if executor == "threads":
        return ThreadPoolExecutor(parallel, thread_name_prefix=interrupt.TASK_THREADS)
    if executor == "processes":
        # Imported here: only this executor needs them (a few ms of start-up).
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        return ProcessPoolExecutor(
            parallel,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_process,
            initargs=(max(1, workers // parallel), os.getpid()),
        )
    raise ValueError(f"unknown executor {executor!r}")


# Retries of a task whose worker process or node died (a system failure);
# an exception raised by the task itself is never retried: reading or
# writing the same objects again fails the same way.
RAY_RETRIES = 3
# With "0", Ray's servers listen on 127.0.0.1 only (see _init_ray).
RAY_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def _ray_call(
    fn: Callable[[T], R], task: T, stage: str, shared: dict, fences: list
) -> tuple[bool, object]:
    """Run one task on a Ray worker. Tasks are idempotent (an output is
    written whole or not at all, and a finished one is kept), so Ray may run
    one again after its node died. A task's exception comes back as a value,
    so the driver re-raises it as it was (one line, not a remote traceback).
    `shared`: the task's fields held in Ray's object store (`shared_fields`);
    `fences`: the driver's lock, which the task's I/O under OUT passes
    (storage.carried_fences)."""
    import ray

    if shared:
        task = _with_fields(task, {k: ray.get(ref) for k, ref in shared.items()})
    _native.set_threads(1)
    _task_started(stage)
    try:
        with storage.carrying(fences):
            return True, fn(task)
    except Exception as e:  # noqa: BLE001 - re-raised on the driver
        return False, e


def _init_ray(ray, workers: int, address: str | None) -> None:
    """Join the cluster at `address` (`auto`, `ray://head:10001`, `host:port`,
    or `local`; by default RAY_ADDRESS), or start a local Ray with `workers` CPUs.

    Nothing is forwarded to the workers through a runtime_env: each node
    reads its object store endpoint and credentials from its own environment
    (AWS_* variables, ~/.aws, an instance role), as tokenmill does, so no
    secret travels through the cluster's metadata (a runtime_env is stored in
    the GCS and shown by the dashboard). To pass some anyway, give them to
    `ray job submit --runtime-env-json`, whose env_vars every task inherits.

    A local Ray listens on loopback only (it serves no other machine, and
    Ray's ports run any code sent to them). The setting is read when Ray is
    imported, so it holds when tokenmill is the first to import Ray, as the
    CLI is; RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=1 in the environment opts out."""
    import logging

    # Ray's driver log would interleave with the stage lines: its INFO lines
    # ("Started a local Ray instance", "Connected to Ray cluster") always,
    # and, for a Ray of our own on loopback, the warning that it made an
    # authentication token. A joined cluster's warnings are kept.
    quiet = logging.WARNING if address else logging.ERROR
    options = {"include_dashboard": False, "log_to_driver": False, "logging_level": quiet}
    unreachable = _unreachable(address) if address else None
    if unreachable:
        raise TokenmillError(f"cannot start or join Ray at {address}: {unreachable}")
    # Ray's core installs its own SIGTERM handler (a stack dump, exit 15):
    # the run's own handlers are put back, so SIGTERM stops it as Ctrl-C does.
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        _join_or_start(ray, workers, address, options)
    finally:
        if threading.current_thread() is threading.main_thread():
            for signum, handler in handlers.items():
                if handler is not None:
                    signal.signal(signum, handler)


def _join_or_start(ray, workers: int, address: str | None, options: dict) -> None:
    try:
        if address:
            with _one_gcs_attempt():
                ray.init(address=address, **options)
        else:
            # "local", not None: with None, Ray joins the last cluster
            # `ray start` recorded on this machine (its ray_current_cluster
            # file, left behind when that cluster stops without cleaning up),
            # and then refuses num_cpus.
            ray.init(address="local", num_cpus=workers, **options)
    except Exception as e:  # noqa: BLE001 - a node timing out at start is a bare Exception
        where = f"Ray at {address}" if address else "a local Ray"
        raise TokenmillError(f"cannot start or join {where}: {_first_line(e)}") from None


def _unreachable(address: str) -> str | None:
    """Why nothing can answer at a `host:port` or `ray://host:port` address
    (the connection refused, or no such host), from one connect: Ray's join
    waits about 30 s on an address where nothing listens. None when something
    answers, when the connect only times out (Ray's own wait decides), or for
    another kind of address (`auto`)."""
    import socket

    host, colon, port = address.removeprefix("ray://").rpartition(":")
    host = host.strip("[]")
    if not (colon and host and port.isdigit() and int(port) <= 65535):
        return None
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            return None
    except ConnectionRefusedError:
        return "nothing listens there (connection refused)"
    except socket.gaierror as e:
        return f"no such host ({e.strerror})"
    except OSError:
        return None


# Ray tries to reach a cluster's GCS this many times (each attempt waits
# about 40 s: its connect, then its cluster id), 20 by default: an address
# where no GCS answers hung a run for over ten minutes. Read at each join.
RAY_GCS_ATTEMPTS_ENV = "RAY_gcs_server_port_wait_time_s"


@contextlib.contextmanager
def _one_gcs_attempt() -> Iterator[None]:
    """Join with one attempt at the GCS, unless the environment sets the
    number: a cluster that is up answers the first; a wrong address then
    fails in under a minute instead of hanging."""
    if RAY_GCS_ATTEMPTS_ENV in os.environ:
        yield
        return
    os.environ[RAY_GCS_ATTEMPTS_ENV] = "1"
    try:
        yield
    finally:
        os.environ.pop(RAY_GCS_ATTEMPTS_ENV, None)


def shared_fields(tasks: Sequence[T]) -> dict[str, object]:
    """The fields that hold one and the same object in every task (encode's
    tokenizer, the config): Ray gets each once, through its object store, not
    once per task through the driver (a 200k vocabulary is megabytes)."""
    if len(tasks) < 2 or not dataclasses.is_dataclass(tasks[0]):
        return {}
    first = tasks[0]
    shared = {}
    for f in dataclasses.fields(first):
        value = getattr(first, f.name)
        if isinstance(value, str | int | float | bool | Path | None):
            continue  # small, and often equal without being the same object
        if all(getattr(t, f.name) is value for t in tasks):
            shared[f.name] = value
    return shared


def _with_fields(task: T, values: dict[str, object]) -> T:
    """`task` with `values` for some of its fields: a dataclass (shared_fields
    finds shared fields in no other tasks)."""
    assert dataclasses.is_dataclass(task) and not isinstance(task, type)
    return dataclasses.replace(task, **values)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


# Ray's own failures under a task, not the task's: a node or worker gone
# (killed by the system, most often for memory), or what it held lost.
# Named so that a Ray without one of them still imports.
_KILLED = ": killed by the system, often for memory"
_RAY_LOST = {
    "LocalRayletDiedError": ("Ray's node died under the task", _KILLED),
    "NodeDiedError": ("Ray's node died under the task", _KILLED),
    "WorkerCrashedError": ("Ray's worker process died under the task", _KILLED),
    "OutOfMemoryError": ("Ray killed the task's worker for memory", ""),
    "ObjectLostError": ("Ray lost the task's result", ""),  # OwnerDiedError too, its kind
    "RaySystemError": ("Ray failed under the task", ""),
}


def ray_failure(ray, e: BaseException, what: str) -> TokenmillError:
    """The error for `e`, which Ray raised for the task `what`: WorkerLost
    (exit 137, as a dead worker under `processes`) when Ray's system failed
    under it; else the task could not be run."""
    for kind, (said, why) in _RAY_LOST.items():
        cls = getattr(ray.exceptions, kind, None)
        if cls is not None and isinstance(e, cls):
            return WorkerLost(f"{what}: {said} ({type(e).__name__}){why}; rerun to resume")
    return TokenmillError(
        f"{what}: Ray could not run the task (retried up to {RAY_RETRIES} times): {_first_line(e)}"
    )


def _run_ray(
    fn: Callable[[T], R],
    tasks: Sequence[T],
    order: list[int],
    workers: int,
    address: str | None,
    done: Callable[[int], None],
    stage: str,
) -> list[R]:
    # As ray.init() itself does: a job's driver (`ray job submit`) is told
    # its cluster by RAY_ADDRESS, and must join it, not start a Ray of its own.
    address = address or os.environ.get("RAY_ADDRESS") or None
    if not address and "ray" not in sys.modules:
        os.environ.setdefault(RAY_LOOPBACK_ENV, "0")
    try:
        import ray
    except ImportError:
        raise TokenmillError("--executor ray needs Ray: pip install 'tokenmill[ray]'") from None
    if not ray.is_initialized():
        _init_ray(ray, workers, address)
    # One CPU a task: a task's native core runs on one thread (_ray_call).
    # Any: Ray's types do not follow _ray_call's type variables.
    remote: Any = ray.remote(num_cpus=1, max_retries=RAY_RETRIES, retry_exceptions=False)(_ray_call)
    # A task is sent paths and options (the tokenizer and config once, through
    # the object store) and sends back a summary: the shard's data is read and
    # written by the task itself, on whichever node runs it. Submitted largest
    # first (Ray starts them about in that order), collected in task order.
    shared = shared_fields(tasks)
    in_store = {k: ray.put(v) for k, v in shared.items()}
    light = [_with_fields(t, dict.fromkeys(shared)) if shared else t for t in tasks]
    fences = storage.carried_fences()
    submitted = {i: remote.remote(fn, light[i], stage, in_store, fences) for i in order}
    refs = [submitted[i] for i in range(len(tasks))]
    results: list[R] = []
    try:
        for task, ref in zip(tasks, refs, strict=True):
            try:
                ok, value = ray.get(ref)
            except ray.exceptions.RayError as e:
                name = getattr(task, "name", None) or f"task {len(results) + 1}"
                error = ray_failure(ray, e, f"{stage}: {name}")
                if isinstance(e, ray.exceptions.LocalRayletDiedError):
                    # This process's Ray is gone with its raylet. Shut down at
                    # exit, it logged after the error line and ended the
                    # process in status 1, not the error's.
                    ray.shutdown()
                raise error from None
            if not ok:
                raise value
            results.append(value)
            done(len(results))
        return results
    except BaseException:
        if ray.is_initialized():
            for ref in refs[len(results) + 1 :]:
                ray.cancel(ref)
        raise
