"""Run a contender in a fresh child process and measure it from outside.

Peak RSS comes two ways:
- `peak_rss`: ru_maxrss from wait4() on the child, the largest resident set of
  any single process in its tree (the child or a worker it waited for);
- `tree_rss`: the largest sum of resident sets over the child and all its
  descendants, sampled from /proc every SAMPLE_SECONDS (what a process pool
  costs together; pages shared between processes count once per process).

`other_cores` says how busy the machine was with anything else meanwhile: the
machine's busy CPU time (from /proc/stat) minus the child tree's own, per
second of wall time. Near 0 means the contender had the machine to itself.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

CHILD = Path(__file__).with_name("child.py")
SAMPLE_SECONDS = 0.05
PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Measurement:
    result: dict  # what the contender returned (its own `seconds` included)
    process_seconds: float  # the child's whole life: start-up and imports too
    peak_rss: int  # bytes
    tree_rss: int  # bytes
    cpu_seconds: float  # user + system time of the child's whole tree
    other_cores: float  # CPU used by other processes meanwhile, in cores


def busy_seconds() -> float:
    """CPU time the machine has spent busy since boot (all cores), less this
    process's own (the RSS sampler is ours, not someone else's load)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    own = resource.getrusage(resource.RUSAGE_SELF)
    return (sum(fields[:8]) - idle) / TICK - own.ru_utime - own.ru_stime


def wait_for_quiet(max_seconds: float, cores: float = 0.15, window: float = 2.0) -> float:
    """Wait (up to `max_seconds`) for a `window` in which other processes used
    less than `cores`; return the load of the last window, in cores."""
    deadline = time.monotonic() + max_seconds
    while True:
        busy = busy_seconds()
        time.sleep(window)
        load = (busy_seconds() - busy) / window
        if load < cores or time.monotonic() >= deadline:
            return load


class TreeSampler(threading.Thread):
    """Samples the summed RSS of `root` and its descendants until `done`.

    A sample must cost little: on a 2-core machine it runs beside a contender
    that keeps both cores busy, and reading /proc/PID/stat of every process
    each time took about 4 ms, 8% of a core at one sample per 50 ms, taken
    from multi-core contenders only. So each process's parent is read once,
    and each sample reads the sizes of the tree's processes alone."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root, self.peak = root, 0
        self.done = threading.Event()
        self._parents: dict[int, int] = {}  # pid -> parent pid, read once

    def run(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, self.tree_rss())
            self.done.wait(SAMPLE_SECONDS)

    def tree_rss(self) -> int:
        pids = {int(e.name) for e in os.scandir("/proc") if e.name.isdigit()}
        # A pid that is gone may come back as another process: forget it.
        for pid in self._parents.keys() - pids:
            del self._parents[pid]
        for pid in pids - self._parents.keys():
            self._parents[pid] = _parent(pid)
        children: dict[int, list[int]] = {}
        for pid, ppid in self._parents.items():
            children.setdefault(ppid, []).append(pid)
        total, stack = 0, [self.root]
        while stack:
            pid = stack.pop()
            total += _resident(pid)
            stack.extend(children.get(pid, []))
        return total


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _resident(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def run_child(name: str, params: dict, workdir: Path, env: dict | None = None) -> Measurement:
    """Run contender `name` in `python bench/child.py`; raise if it fails."""
    result_path = workdir / f"{name}.result.json"
    log_path = workdir / f"{name}.log"
    cmd = [sys.executable, str(CHILD), name, json.dumps(params), str(result_path)]
    # Write back what earlier runs wrote now, not during this run.
    os.sync()
    start, busy = time.perf_counter(), busy_seconds()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    cpu = usage.ru_utime + usage.ru_stime
    other = max(0.0, busy_seconds() - busy - cpu)
    sampler.done.set()
    sampler.join()
    if proc.returncode != 0:
        tail = log_path.read_text()[-3000:]
        raise SystemExit(f"{name} failed (exit {proc.returncode}); log {log_path}:\n{tail}")
    return Measurement(
        result=json.loads(result_path.read_text()),
        process_seconds=seconds,
        peak_rss=usage.ru_maxrss * 1024,
        tree_rss=max(sampler.peak, usage.ru_maxrss * 1024),
        cpu_seconds=cpu,
        other_cores=other / seconds,
    )
