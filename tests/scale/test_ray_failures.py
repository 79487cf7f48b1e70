"""--executor ray when Ray itself fails under a task (its node's raylet or a
worker killed, as the OOM killer does): the status and line of a dead worker
under `processes` (137, "rerun to resume"), not a task Ray could not run
after retries it did not make. No Ray is started: its answers are stood in."""

from __future__ import annotations

import pytest

from tokenmill.errors import WorkerLost
from tokenmill.executors import ray_failure

ray = pytest.importorskip("ray")
lost = ray.exceptions


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (lost.LocalRayletDiedError(), "Ray's node died under the task (LocalRayletDiedError)"),
        (lost.NodeDiedError("gone"), "Ray's node died under the task (NodeDiedError)"),
        (lost.WorkerCrashedError(), "Ray's worker process died under the task"),
        (lost.OutOfMemoryError("over"), "Ray killed the task's worker for memory"),
        (lost.OwnerDiedError("ab", None, ""), "Ray lost the task's result (OwnerDiedError)"),
        (lost.RaySystemError("broken"), "Ray failed under the task (RaySystemError)"),
    ],
)
def test_rays_own_failures_are_a_lost_worker(error, said):
    got = ray_failure(ray, error, "count: a.jsonl")
    assert isinstance(got, WorkerLost)
    assert str(got).startswith(f"count: a.jsonl: {said}")
    assert str(got).endswith("; rerun to resume") and "retried" not in str(got)


def test_any_other_ray_error_is_a_task_ray_could_not_run():
    got = ray_failure(ray, lost.TaskUnschedulableError("no node fits"), "count: a.jsonl")
    assert not isinstance(got, WorkerLost)
    assert "Ray could not run the task (retried up to 3 times)" in str(got)


class Remote:
    def remote(self, *args):
        return object()


def test_a_raylet_dying_under_a_run_exits_137_in_one_line(cli, tmp_path, monkeypatch):
    (tmp_path / "a.jsonl").write_text('{"text": "hello there"}\n')

    def died(ref):
        raise lost.LocalRayletDiedError()

    running = [True]
    monkeypatch.setattr(ray, "is_initialized", lambda: bool(running))
    monkeypatch.setattr(ray, "shutdown", running.clear)
    monkeypatch.setattr(ray, "remote", lambda **options: lambda fn: Remote())
    monkeypatch.setattr(ray, "put", lambda value: value)
    monkeypatch.setattr(ray, "get", died)
    monkeypatch.setattr(ray, "cancel", lambda ref: pytest.fail("cancelled after shutdown"))
    result = cli("count", tmp_path / "a.jsonl", tmp_path / "out", "--executor", "ray", ok=False)
    assert result.exit_code == 137, result.output
    # Shut down before the line: at exit, Ray without its raylet logged after
    # it and ended the process in status 1.
    assert not running
    assert result.output.strip().splitlines()[-1] == (
        "Error: count: a.jsonl: Ray's node died under the task (LocalRayletDiedError): "
        "killed by the system, often for memory; rerun to resume"
    )
