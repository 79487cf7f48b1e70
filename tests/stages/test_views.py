"""report.html and sweep.json: views of a run's outputs that `report` and `sweep`
write into OUT afterwards. `verify` passes with them there, and a rerun keeps
them while they describe its outputs; once those change, it removes them."""

from __future__ import annotations

from conftest import make_documents, write_shard

VIEWS = ("report.html", "sweep.json")
RUN = ("--vocab-size", "300", "--workers", "1")


def views(out):
    return {name: (out / name).read_bytes() for name in VIEWS if (out / name).exists()}


def test_views_pass_verify_and_a_rerun_keeps_them_until_the_outputs_change(tmp_path, cli):
    data = tmp_path / "data"
    write_shard(data / "a.jsonl", make_documents(40, seed=1))
    write_shard(data / "b.jsonl", make_documents(40, seed=2))
    out = tmp_path / "out"
    cli("run", data, out, *RUN)
    cli("sweep", out, "--vocab-sizes", "280,300")
    cli("report", out)
    made = views(out)
    assert set(made) == set(VIEWS)
    assert "files match the manifest" in cli("verify", out).output

    rerun = cli("run", data, out, *RUN)
    assert "stale" not in rerun.output
    assert views(out) == made
    assert "files match the manifest" in cli("verify", out).output

    # Another input: the views describe outputs no longer there.
    write_shard(data / "c.jsonl", make_documents(10, seed=3))
    rerun = cli("run", data, out, *RUN)
    [note] = [line for line in rerun.output.splitlines() if "stale" in line]
    assert "report.html" in note and "sweep.json" in note
    assert views(out) == {}
    assert "files match the manifest" in cli("verify", out).output
