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


def test_verify_catches_a_view_edited_by_hand(tmp_path, cli):
    """A number changed in sweep.json (or report.html) passed verify: views are
    not in the manifest, but their state files hold what was written."""
    data = tmp_path / "data"
    write_shard(data / "a.jsonl", make_documents(40, seed=1))
    out = tmp_path / "out"
    cli("run", data, out, *RUN)
    cli("sweep", out, "--vocab-sizes", "280,300")
    cli("report", out)
    for name in VIEWS:
        before = (out / name).read_bytes()
        (out / name).write_bytes(before.replace(b"1", b"2", 1))
        result = cli("verify", out, ok=False)
        assert result.exit_code == 3 and f"view {name}: changed since it was written" in (
            result.output
        )
        (out / name).write_bytes(before)
        assert "files match the manifest" in cli("verify", out).output
    # A report.html of the user's own (no state file) is theirs, not a changed view.
    (out / ".report.html.state.json").unlink()
    (out / "report.html").write_text("<p>mine</p>")
    assert "files match the manifest" in cli("verify", out).output
