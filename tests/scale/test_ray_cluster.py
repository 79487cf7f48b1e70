"""--executor ray on a real multi-node Ray cluster (ray.cluster_utils.Cluster:
a head node and worker nodes, each with its own raylet, object store and
worker processes, on this machine and listening on loopback only), joined
with --ray-address. A worker node is lost in the middle of count, with a
task of it unfinished; the run goes on with a retry on the node that
replaces it, and its outputs are those of a local run.

DATA and OUT are on the local S3 server (tests/helpers/s3.py), as on a cluster
whose nodes share no filesystem, or local folders, as on one with a shared
filesystem. The nodes find the server and credentials in their own
environment (copied from this process's when they start), never from the
driver."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from runs import HANG_GUARD_S, copy_sample, manifest, output_files, tokenmill

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from tokenmill.executors import RAY_LOOPBACK_ENV  # noqa: E402
from tokenmill.io.lock import LOCK  # noqa: E402

RUN = ("--vocab-size", "1000")
LOOPBACK = "127.0.0.1"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head node with no CPUs (as on a production cluster: it holds the
    GCS and the driver, and tasks go to worker nodes), for the module's
    tests, which add and remove worker nodes; stopped at the end.
    Ray picks the machine's interface address unless told it is on one
    machine only; its constants are read at import, which pytest has done
    already, hence the patch for this process beside the variable for the
    processes it starts (nodes, the tokenmill driver)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(RAY_LOOPBACK_ENV, "0")
        mp.setattr(ray._private.ray_constants, "ENABLE_RAY_CLUSTER", False)
        # shutdown_at_exit: Ray also stops the nodes when pytest exits, and a
        # reaper process does when it dies, should the shutdown below not run.
        head = Cluster(shutdown_at_exit=True)
        try:
            head.add_node(num_cpus=0, node_ip_address=LOOPBACK, include_dashboard=False)
            yield head
        finally:
            head.shutdown()
            ray.shutdown()


def add_worker(cluster: Cluster, env: dict[str, str] | None = None):
    """A worker node with one CPU: one task at a time. `env`: variables for
    its raylet and so for every worker process it starts, nowhere else."""
    return cluster.add_node(num_cpus=1, node_ip_address=LOOPBACK, env_vars=env or {})


# Loopback in /proc/net/tcp{,6}: 127.0.0.1, ::1 and ::ffff:127.0.0.1.
LOOPBACK_HEX = ("0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F")


def descendants(pid: int) -> set[int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def listening_beyond_loopback() -> list[str]:
    """Sockets that processes this test started (the cluster's) listen on
    at an address other than loopback, as "address:port" in hex."""
    inodes = set()
    for pid in descendants(os.getpid()):
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, state, inode = fields[1], fields[3], fields[9]
            listening = state == "0A"
            if listening and inode in inodes and address.split(":")[0] not in LOOPBACK_HEX:
                found.append(address)
    return found


def run_held_on_a_node(cluster, pause_at: str, marker: Path, data, out):
    """A new worker node whose tasks pause at `pause_at` (tokenmill.faults),
    and `tokenmill run DATA OUT` on the cluster started: (node, process)."""
    pause = {"TOKENMILL_PAUSE_AT": pause_at, "TOKENMILL_PAUSE_FILE": str(marker)}
    node = add_worker(cluster, pause)
    args = ["run", data, out, *RUN, "--executor", "ray", "--ray-address", cluster.address]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenmill", *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    return node, proc


def wait_for(marker: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"exited ({proc.returncode}) before pausing: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no task paused on the worker node: {marker}")
        time.sleep(0.05)


def s3_objects(url: str) -> dict[str, bytes]:
    """As runs.output_files, for OUT on S3: every object but the manifest and
    the lock, by its name under `url`."""
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)
    base = url.removeprefix("s3://")
    names = sorted(fs.find(base))
    found = {name[len(base) + 1 :]: fs.cat_file(name) for name in names}
    return {k: v for k, v in found.items() if k not in ("manifest.json", LOCK)}


def s3_manifest(url: str) -> dict:
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)
    return json.loads(fs.cat_file(f"{url.removeprefix('s3://')}/manifest.json"))


@pytest.mark.parametrize("storage", ["s3", "local"])
def test_a_worker_node_lost_mid_run_costs_only_a_retry(storage, cluster, tmp_path, request):
    data = copy_sample(tmp_path / "data")
    local = tmp_path / "local"
    tokenmill("run", data, local, *RUN)
    if storage == "s3":
        s3 = request.getfixturevalue("s3")
        import s3fs

        inputs, out = s3.url("data"), s3.url("out")
        s3fs.S3FileSystem().put(f"{data}/", f"{inputs}/", recursive=True)
    else:
        inputs, out = data, tmp_path / "out"

    marker = tmp_path / "paused"
    # The worker finishes its first count task and holds its second.
    doomed, proc = run_held_on_a_node(cluster, "count-task:2", marker, inputs, out)
    replacement = None
    try:
        wait_for(marker, proc)
        assert listening_beyond_loopback() == []
        cluster.remove_node(doomed)
        replacement = add_worker(cluster)
        _, stderr = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for node in (doomed, replacement):
            if node in cluster.worker_nodes:
                cluster.remove_node(node)
    assert proc.returncode == 0, stderr
    assert marker.read_text() == "count-task:2\n"
    assert "count: 5 shards (0 kept, 5 done)" in stderr
    if storage == "s3":
        assert s3_objects(out) == output_files(local)
        m = s3_manifest(out)
    else:
        assert output_files(out) == output_files(local)
        m = manifest(out)
    assert m["outputs"] == manifest(local)["outputs"]
    assert m["config"]["executor"] == "ray"
    # Every output the nodes wrote hashes to what the manifest records.
    tokenmill("verify", out)


def test_tasks_exchange_summaries_never_shard_data(tmp_path, monkeypatch, cli):
    """What goes to a Ray task and comes back (pickled, as Ray sends it) is
    paths, options and a summary, far smaller than a shard: the data is
    read and written on the node that runs the task, never by the driver."""
    from tokenmill import executors
    from tokenmill.stages import count, encode

    sent: dict[str, list[tuple[int, int]]] = {"count": [], "encode": []}

    def spy(fn, tasks, *, desc, **options):
        results = executors.run_tasks(fn, tasks, desc=desc, **{**options, "executor": "threads"})
        # As _run_ray sends them: what every task shares goes once to the object store.
        shared = executors.shared_fields(tasks)
        if desc == "encode":
            assert "tokenizer" in shared
        for task, result in zip(tasks, results, strict=True):
            light = dataclasses.replace(task, **dict.fromkeys(shared))
            sent[desc].append((len(pickle.dumps(light)), len(pickle.dumps(result))))
        return results

    monkeypatch.setattr(count, "run_tasks", spy)
    monkeypatch.setattr(encode, "run_tasks", spy)
    data = copy_sample(tmp_path / "data")
    out = tmp_path / "out"
    cli("run", data, out, *RUN, "--executor", "ray")
    smallest_shard = min(i["bytes"] for i in manifest(out)["inputs"])
    assert len(sent["count"]) == len(sent["encode"]) == 5
    for stage, sizes in sent.items():
        for task, result in sizes:
            assert task < 4096 and result < 4096, (stage, task, result)
    assert smallest_shard > 16 * 4096


def test_a_ray_task_of_a_stalled_holder_writes_nothing_after_a_takeover(
    s3, cluster, tmp_path, monkeypatch, cli
):
    """As with worker processes (io/test_lease.py): a Ray task carries its
    driver's lock (storage.carried_fences). The driver stalls (SIGSTOP) while
    its task is held on the worker node; another run takes the stale lock
    over and finishes; the task, let go, and the driver, resumed, write,
    rewrite and remove nothing under OUT, and the driver ends in one line."""
    from s3 import take_over

    from tokenmill.io.storage import forget_listings

    def here(*args, ok: bool = True):
        forget_listings()  # what the stalled run wrote, seen
        return cli(*args, ok=ok)

    monkeypatch.setenv("TOKENMILL_LOCK_STALE_S", "4")  # a task needs a lock dated < 1 s
    data = copy_sample(tmp_path / "data")
    out = s3.url("out")
    marker = tmp_path / "paused"
    node, holder = run_held_on_a_node(cluster, "encode-task:2", marker, data, out)
    try:
        wait_for(marker, holder)
        holder.send_signal(signal.SIGSTOP)
        take_over(here, "run", data, out, "--vocab-size", "900")
        before = s3_objects(out), s3_manifest(out)
        marker.unlink()
        holder.send_signal(signal.SIGCONT)
        _, err = holder.communicate(timeout=HANG_GUARD_S)
    finally:
        if holder.poll() is None:
            holder.send_signal(signal.SIGCONT)
            holder.kill()
            holder.communicate()
        cluster.remove_node(node)
    assert (s3_objects(out), s3_manifest(out)) == before
    assert holder.returncode == 1, err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"Error: {out}/") and "taken over by another tokenmill run" in line, err
