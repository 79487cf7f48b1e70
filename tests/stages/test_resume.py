"""Interrupted runs resume: a rerun keeps every finished shard output whose
input and options are unchanged, redoes the rest, and ends with outputs
byte-identical to those of an uninterrupted run. The process is killed with
SIGKILL at a known point (tokenmill.faults), never after a wall-clock delay."""

from __future__ import annotations

import os

import pytest
from runs import copy_sample, kill_when_paused, manifest, output_files, temporaries, tokenmill_here

from tokenmill.io.lock import LOCK

RUN = ("--vocab-size", "1000", "--workers", "1")
SHARDS = [
    "code-python.jsonl.gz",
    "lines.txt",
    "lines.txt.gz",
    "multilingual.jsonl",
    "prose-en.parquet",
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run on a copy of sample_data/."""
    root = tmp_path_factory.mktemp("reference")
    data = copy_sample(root / "data")
    tokenmill_here("run", data, root / "out", *RUN)
    return data, root / "out"


def stages(out):
    return manifest(out)["stages"]


@pytest.mark.parametrize(
    ("stage", "step", "kept"),
    [
        # killed after 2 of 5 count tables: those 2 are kept, the rest redone
        ("count", 2, {"count": 2, "merge": 0, "train": 0, "encode": 0}),
        # killed once 256 of 743 merges are made: counts and merged table kept, train redone
        ("train", 256, {"count": 5, "merge": 1, "train": 0, "encode": 0}),
        # killed after 3 of 5 token shards: everything before kept, 2 shards encoded
        ("encode", 3, {"count": 5, "merge": 1, "train": 1, "encode": 3}),
    ],
)
def test_killed_run_resumes_to_identical_outputs(reference, tmp_path, stage, step, kept):
    data, ref_out = reference
    out = tmp_path / "out"
    kill_when_paused(["run", data, out, *RUN], stage, step, tmp_path)
    assert not (out / "manifest.json").exists()
    finished = {
        "count": len(list((out / "counts").glob("*.parquet"))),
        "encode": len(list((out / "tokens").glob("*.parquet"))),
    }
    assert finished["count"] == (step if stage == "count" else 5)
    assert finished["encode"] == (step if stage == "encode" else 0)
    assert (out / "tokenizer.json").exists() == (stage == "encode")

    result = tokenmill_here("run", data, out, *RUN)
    assert output_files(out) == output_files(ref_out)
    assert temporaries(out) == []
    for name, n in kept.items():
        assert stages(out)[name]["reused"] == n, (name, stages(out))
    total = {"count": 5, "merge": 1, "train": 1, "encode": 5}
    for name in kept:
        assert stages(out)[name]["redone"] == total[name] - kept[name]
    if stage in ("count", "encode"):
        assert stages(out)[stage]["reused_shards"] == SHARDS[:step]
        assert f"{stage}: 5 shards ({step} kept, {5 - step} done)" in result.stderr
    ref = manifest(ref_out)
    again = manifest(out)
    for key in ("inputs", "outputs", "counts", "files", "tokenizer", "documents", "tokens"):
        assert again[key] == ref[key], key


def test_rerun_of_a_finished_run_redoes_nothing_and_force_redoes_everything(reference, tmp_path):
    data, ref_out = reference
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN)
    tokenmill_here("run", data, out, *RUN)
    assert {k: v["redone"] for k, v in stages(out).items()} == {
        "count": 0,
        "merge": 0,
        "train": 0,
        "encode": 0,
    }
    tokenmill_here("run", data, out, *RUN, "--force")
    assert {k: v["reused"] for k, v in stages(out).items()} == {
        "count": 0,
        "merge": 0,
        "train": 0,
        "encode": 0,
    }
    assert output_files(out) == output_files(ref_out)


def test_changed_input_is_redone(reference, tmp_path):
    data, _ = reference
    changed = copy_sample(tmp_path / "data")
    out = tmp_path / "out"
    tokenmill_here("run", changed, out, *RUN)
    with open(changed / "lines.txt", "a", encoding="utf-8") as f:
        f.write("one more line of text, appended after the first run\n")
    tokenmill_here("run", changed, out, *RUN)
    count = stages(out)["count"]
    assert (count["reused"], count["redone"]) == (4, 1)
    assert "lines.txt" not in count["reused_shards"]
    fresh = tmp_path / "fresh"
    tokenmill_here("run", changed, fresh, *RUN)
    assert output_files(out) == output_files(fresh)


def test_changed_option_is_redone(reference, tmp_path):
    data, _ = reference
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN)
    tokenmill_here("run", data, out, *RUN, "--pattern", "gpt2")
    assert stages(out)["count"]["reused"] == 0
    fresh = tmp_path / "fresh"
    tokenmill_here("run", data, fresh, *RUN, "--pattern", "gpt2")
    assert output_files(out) == output_files(fresh)


def test_new_shards_arriving_are_counted_and_merged_with_the_old_counts(tmp_path):
    data = copy_sample(tmp_path / "data", SHARDS[:3])
    out = tmp_path / "out"
    tokenmill_here("run", data, out, "--count-only", "--workers", "1")
    assert "tokenizer.json" not in output_files(out)
    copy_sample(data, SHARDS[3:])
    result = tokenmill_here("run", data, out, "--count-only", "--workers", "1")
    assert stages(out)["count"]["reused_shards"] == SHARDS[:3]
    assert stages(out)["count"]["redone"] == 2
    assert stages(out)["merge"]["redone"] == 1
    assert "count: 5 shards (3 kept, 2 done)" in result.stderr
    fresh = tmp_path / "fresh"
    tokenmill_here("run", data, fresh, "--count-only")
    assert output_files(out) == output_files(fresh)


def test_encode_only_with_an_existing_tokenizer(reference, tmp_path):
    data, ref_out = reference
    out = tmp_path / "out"
    tokenmill_here("run", data, out, "--tokenizer", ref_out / "tokenizer.json", "--workers", "1")
    # The token shards, and the tokenizer copied into OUT as it is.
    wanted = [f for f in output_files(ref_out) if "tokens/" in f or f == "tokenizer.json"]
    assert sorted(output_files(out)) == sorted(wanted)
    for name, content in output_files(out).items():
        assert content == output_files(ref_out)[name]
    m = manifest(out)
    assert m["steps"] == "encode"
    assert m["tokenizer"]["path"] == str((ref_out / "tokenizer.json").resolve())
    assert m["tokenizer_sha256"] == manifest(ref_out)["tokenizer_sha256"]


def test_removed_input_shard_drops_its_outputs(tmp_path):
    data = copy_sample(tmp_path / "data")
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN)
    (data / "lines.txt").unlink()
    tokenmill_here("run", data, out, *RUN)
    fresh = tmp_path / "fresh"
    tokenmill_here("run", data, fresh, *RUN)
    assert output_files(out) == output_files(fresh)


@pytest.mark.parametrize("stage", ["count", "encode"])
def test_killed_stage_command_resumes(reference, tmp_path, stage):
    data, ref_out = reference
    folder = "counts" if stage == "count" else "tokens"
    out = tmp_path / folder
    args = [stage, data, out, "--workers", "1"]
    if stage == "encode":
        args += ["--tokenizer", ref_out / "tokenizer.json"]
    kill_when_paused(args, stage, 2, tmp_path)
    assert len(list(out.glob("*.parquet"))) == 2
    result = tokenmill_here(*args)
    assert f"{stage}: 5 shards (2 kept, 3 done)" in result.stderr
    assert output_files(out) == output_files(ref_out / folder)
    assert temporaries(out) == []


def test_temporaries_of_killed_runs_are_removed_at_any_depth(reference, tmp_path):
    # A command holds its folder's lock (a second run is refused at once: see
    # test_integrity), so every temporary it finds there is a killed run's.
    data, _ = reference
    counts = tmp_path / "counts"
    (counts / "deep" / "er").mkdir(parents=True)
    left = [
        counts / f".lines.txt.parquet.tmp-{os.getpid()}",
        counts / "deep" / "er" / ".x.parquet.tmp-1-abcd",
    ]
    for p in left:
        p.write_bytes(b"half a file")
    (counts / LOCK).write_bytes(b"")  # what the killed run left beside them
    result = tokenmill_here("count", data, counts, "--workers", "1")
    assert not any(p.exists() for p in left)
    # Each named, as run names them: a file of yours may be named so.
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("removed 2 temporary files")]
    assert all(str(p.relative_to(counts)) in line for p in left), line
    assert temporaries(counts) == []


PRETRAINING = ("--pack", "64", "--format", "bin")


@pytest.fixture(scope="module")
def pretraining_reference(tmp_path_factory):
    """An uninterrupted run with packed sequences and flat .bin arrays."""
    root = tmp_path_factory.mktemp("pretraining")
    data = copy_sample(root / "data")
    tokenmill_here("run", data, root / "out", *RUN, *PRETRAINING)
    return data, root / "out"


@pytest.mark.parametrize(("stage", "step"), [("packed-write", 2), ("bin-write", 1)])
def test_killed_pack_or_bin_resumes_to_identical_outputs(
    pretraining_reference, tmp_path, stage, step
):
    data, ref_out = pretraining_reference
    out = tmp_path / "out"
    # Killed while a packed shard or a .bin file is half-written under its temporary name.
    kill_when_paused(["run", data, out, *RUN, *PRETRAINING], stage, step, tmp_path)
    assert temporaries(out), "the kill should leave a temporary to clean up"
    tokenmill_here("run", data, out, *RUN, *PRETRAINING)
    assert temporaries(out) == []
    assert output_files(out) == output_files(ref_out)
    assert tokenmill_here("verify", out).returncode == 0
    # Dropping --pack and --format bin removes what they wrote.
    tokenmill_here("run", data, out, *RUN)
    assert not (out / "packed").exists() and not (out / "bin").exists()
    assert temporaries(out) == []


def test_a_rerun_that_fails_or_is_stopped_before_any_output_changed_keeps_the_manifest(tmp_path):
    """A rerun removed OUT's manifest as it started: one failing on tonight's
    new bad input, or stopped while it kept everything, left the last good
    run's outputs without it (verify, check and stats refused the folder).
    While no output changed the manifest is put back, byte for byte; once
    one did (here, a tokenizer trained anew), it stays removed."""
    import signal

    from runs import paused

    data = copy_sample(tmp_path / "data")
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN)
    before = (out / "manifest.json").read_bytes()
    files = output_files(out)

    (data / "z.jsonl").write_text("not json\n")
    failed = tokenmill_here("run", data, out, *RUN, check=False)
    assert failed.returncode == 1 and "z.jsonl" in failed.stderr.strip().splitlines()[-1]
    assert (out / "manifest.json").read_bytes() == before
    assert output_files(out) == files
    assert tokenmill_here("stats", out).returncode == 0
    (data / "z.jsonl").unlink()

    for stage, options in (("count", RUN), ("encode", ("--vocab-size", "900", "--workers", "1"))):
        with paused(["run", data, out, *options], stage, 1, tmp_path) as proc:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate()
        assert proc.returncode == 143, err
        if stage == "count":  # nothing changed yet
            assert (out / "manifest.json").read_bytes() == before
            tokenmill_here("verify", out)
        else:  # tokenizer.json and a token shard written anew
            assert not (out / "manifest.json").exists()


def test_commands_reading_out_while_a_run_writes_it_say_so(tmp_path):
    """While a run writes OUT its manifest is gone and its old and new token
    shards lie side by side: verify and check said "cannot read manifest",
    stats and bin "the shards were encoded with different tokenizers". Each
    now names the run at work (the lock file's process, still running here)."""
    from runs import paused

    data = copy_sample(tmp_path / "data")
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN)
    retrain = ("--vocab-size", "900", "--workers", "1")
    with paused(["run", data, out, *retrain], "encode", 2, tmp_path) as proc:
        for args in (
            ("verify", out),
            ("check", out),
            ("stats", out),
            ("bin", out / "tokens", tmp_path / "b"),
        ):
            result = tokenmill_here(*args, check=False)
            line = result.stderr.strip().splitlines()[-1]
            assert result.returncode == 1 and "a tokenmill run is writing it now" in line, line
            assert f"pid {proc.pid} on " in line
    # Once that run is gone, the lock file's record is only a record.
    result = tokenmill_here("verify", out, check=False)
    assert "writing it now" not in result.stderr and "manifest" in result.stderr
    # Shards of one tokenizer, some with <|endoftext|> and some without: bin
    # and pack of OUT/tokens made a mixture of both, exit 0.
    tokenmill_here("run", data, out, *RUN)
    (tmp_path / "paused-at-encode-2").unlink()  # the first pause's
    with paused(["run", data, out, *RUN, "--no-eos"], "encode", 2, tmp_path):
        for args in (
            ("bin", out / "tokens", tmp_path / "b2"),
            ("pack", out / "tokens", tmp_path / "p2", "--seq-len", "64"),
        ):
            result = tokenmill_here(*args, check=False)
            assert "a tokenmill run is writing it now" in result.stderr, result.stderr


def test_a_stopped_rerun_that_rewrote_a_linked_tokens_folder_leaves_no_manifest(tmp_path):
    """OUT/tokens a link to another disk: the fingerprint of OUT's files did
    not enter it (the sweep never does, to delete), so a rerun stopped after
    writing shards there put back a manifest of the shards it replaced."""
    import signal

    from runs import paused

    data = copy_sample(tmp_path / "data")
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN)
    (out / "tokens").rename(tmp_path / "elsewhere")
    (out / "tokens").symlink_to(tmp_path / "elsewhere")
    tokenmill_here("run", data, out, *RUN)  # kept: the manifest stays
    with paused(["run", data, out, *RUN, "--no-eos"], "encode", 2, tmp_path) as proc:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate()
    assert proc.returncode == 143, err
    assert not (out / "manifest.json").exists()
