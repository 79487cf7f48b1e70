"""--executor ray: count and encode as Ray tasks (a local Ray with 2 CPUs),
with the same outputs as the local executors."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from runs import HANG_GUARD_S, copy_sample, manifest, output_files, tokenmill

pytest.importorskip("ray")

RUN = ("--vocab-size", "1000")


def test_ray_and_local_executors_give_identical_outputs(tmp_path):
    data = copy_sample(tmp_path / "data")
    local = tmp_path / "local"
    here = tokenmill("run", data, local, *RUN, "--workers", "2", "--executor", "threads")
    on_ray = tmp_path / "ray"
    result = tokenmill("run", data, on_ray, *RUN, "--workers", "2", "--executor", "ray")
    assert output_files(on_ray) == output_files(local)
    assert manifest(on_ray)["config"]["executor"] == "ray"
    assert manifest(on_ray)["outputs"] == manifest(local)["outputs"]
    assert "encode: 5 shards (0 kept, 5 done)" in result.stderr
    # The stage lines alone: none of Ray's own log (its INFO and token warning).
    assert stages(result.stderr) == stages(here.stderr), result.stderr


def stages(log: str) -> list[str]:
    return [line.split(":")[0] for line in log.splitlines()]


def test_ray_address_and_errors_come_back_as_one_line(tmp_path):
    data = copy_sample(tmp_path / "data", ["lines.txt", "multilingual.jsonl"])
    (data / "z-bad.jsonl").write_bytes(b'{"text": "ok"}\nnot json\n')
    out = tmp_path / "out"
    # "local": ray.init(address="local") starts a Ray of its own, as a cluster address would join
    args = ("run", data, out, *RUN, "--executor", "ray", "--ray-address", "local")
    failed = tokenmill(*args, check=False)
    assert failed.returncode == 1
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: ") and "z-bad.jsonl: row 1 (line 2): not JSON" in last
    skipped = tokenmill(*args, "--on-error", "skip")
    assert "skipped: z-bad.jsonl: row 1 (line 2)" in skipped.stderr
    assert manifest(out)["config"]["ray_address"] == "local"
    local = tmp_path / "local"
    tokenmill("run", data, local, *RUN, "--on-error", "skip")
    assert output_files(out) == output_files(local)


def test_an_address_where_no_ray_answers_is_one_line(tmp_path):
    """Refused at once: Ray's own join waits about 30 s on an address where
    nothing listens (and, with its default retries, over ten minutes)."""
    data = copy_sample(tmp_path / "data", ["lines.txt"])
    args = ("run", data, tmp_path / "out", *RUN, "--executor", "ray")
    for address, why in [
        ("127.0.0.1:1", "nothing listens there (connection refused)"),
        ("ray://127.0.0.1:1", "nothing listens there (connection refused)"),
        ("no-such-host.invalid:6379", "no such host"),
    ]:
        failed = subprocess.run(
            [sys.executable, "-m", "tokenmill", *map(str, args), "--ray-address", address],
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
        )
        assert failed.returncode == 1, failed.stderr
        last = failed.stderr.strip().splitlines()[-1]
        assert last.startswith(f"Error: cannot start or join Ray at {address}: {why}"), last
        assert not (tmp_path / "out" / "tokens").exists()


def test_a_run_with_no_address_starts_its_own_ray_beside_a_stale_cluster_record(tmp_path):
    """`ray start` records its cluster in RAY_TMPDIR/ray/ray_current_cluster,
    and a cluster that stops without cleaning up leaves the record behind: a
    run given no address must start a local Ray, not join (or fail on) that."""
    data = copy_sample(tmp_path / "data", ["lines.txt"])
    # Ray's sockets live under RAY_TMPDIR: a short path keeps them in AF_UNIX's limit.
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="tm-ray-") as ray_tmp:
        (Path(ray_tmp) / "ray").mkdir()
        (Path(ray_tmp) / "ray" / "ray_current_cluster").write_text("127.0.0.1:9\n")
        env = {"RAY_TMPDIR": ray_tmp, "RAY_ADDRESS": ""}
        tokenmill("run", data, tmp_path / "ray", *RUN, "--executor", "ray", env=env)
    tokenmill("run", data, tmp_path / "local", *RUN)
    assert output_files(tmp_path / "ray") == output_files(tmp_path / "local")
    assert manifest(tmp_path / "ray")["config"]["ray_address"] is None


def test_sigterm_stops_a_ray_run_as_ctrl_c_does(tmp_path):
    """Ray's core installs a SIGTERM handler of its own (a stack dump, exit 15
    or 134): a scheduler's SIGTERM gave neither the line nor the status of
    the README's table."""
    import signal

    from runs import paused

    data = copy_sample(tmp_path / "data", ["lines.txt", "multilingual.jsonl"])
    args = ["run", data, tmp_path / "out", *RUN, "--executor", "ray", "--workers", "2"]
    with paused(args, "encode", 1, tmp_path) as proc:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "terminated (SIGTERM)", err
