"""OUT/manifest.json records inputs, config, tokenizer, outputs and timings
with hashes; `tokenmill verify OUT` checks a folder against it."""

from __future__ import annotations

import hashlib
import json
import re

import pyarrow.parquet as pq
import pytest
from runs import copy_sample, manifest, tokenmill_here

from tokenmill import __version__

RUN = ("--vocab-size", "1000", "--workers", "2")


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def finished(tmp_path):
    data = copy_sample(tmp_path / "data")
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN)
    return data, out


def test_manifest_records_inputs_config_tokenizer_outputs_and_timings(finished):
    data, out = finished
    m = manifest(out)
    assert m["tokenmill_version"] == __version__
    assert m["git_revision"] is None or re.fullmatch(r"[0-9a-f]{40}(-dirty)?", m["git_revision"])
    assert m["data"] == str(data.resolve())
    assert m["config"]["vocab_size"] == 1000 and m["config"]["workers"] == 2
    assert set(m["config"]) >= {"mode", "pattern", "executor", "on_error", "special_tokens"}
    shards = sorted(p for p in data.iterdir())
    # Each input as count and encode read it: the counts and the tokens were made from it.
    assert m["inputs"] == [
        {
            "path": p.name,
            "bytes": p.stat().st_size,
            "sha256": sha(p),
            "read_by": {"count": sha(p), "encode": sha(p)},
        }
        for p in shards
    ]
    assert m["tokenizer"] == {
        "path": "tokenizer.json",
        "bytes": (out / "tokenizer.json").stat().st_size,
        "sha256": sha(out / "tokenizer.json"),
    }
    assert m["tokenizer_sha256"] == sha(out / "tokenizer.json")
    for entry in m["outputs"]:
        table = pq.read_table(out / entry["path"])
        assert entry["rows"] == entry["documents"] == table.num_rows
        assert entry["tokens"] == sum(table["n_tokens"].to_pylist())
        assert entry["sha256"] == sha(out / entry["path"])
        assert entry["bytes"] == (out / entry["path"]).stat().st_size
    assert sum(e["documents"] for e in m["outputs"]) == m["documents"] == m["documents_in"]
    assert [e["path"] for e in m["files"]] == ["counts.parquet"]
    assert len(m["counts"]) == len(shards)
    assert set(m["stages"]) == {"count", "merge", "train", "encode"}
    assert all(s["seconds"] >= 0 for s in m["stages"].values())
    assert m["skipped"] == [] and m["documents_skipped"] == 0


def test_verify_passes_on_an_untouched_run(finished):
    _, out = finished
    result = tokenmill_here("verify", out)
    assert re.search(r"verify: \d+ files match the manifest", result.stderr)


def test_verify_catches_a_changed_input(finished):
    data, out = finished
    with open(data / "lines.txt", "ab") as f:
        f.write(b"appended\n")
    result = tokenmill_here("verify", out, check=False)
    assert result.returncode == 3
    assert "verify: input lines.txt: changed" in result.stderr


def test_verify_catches_a_changed_input_of_the_same_size(finished):
    data, out = finished
    text = (data / "lines.txt").read_bytes()
    (data / "lines.txt").write_bytes(text[:10] + bytes([text[10] ^ 1]) + text[11:])
    result = tokenmill_here("verify", out, check=False)
    assert result.returncode == 3
    assert "input lines.txt: changed, sha256" in result.stderr


def test_verify_catches_a_changed_output(finished):
    _, out = finished
    shard = out / "tokens" / "multilingual.jsonl.parquet"
    table = pq.read_table(shard)
    pq.write_table(table.slice(1), shard)
    result = tokenmill_here("verify", out, check=False)
    assert result.returncode == 3
    assert "output tokens/multilingual.jsonl.parquet: changed" in result.stderr
    assert "verify: 1 difference from the manifest (" in result.stderr


def test_verify_catches_a_missing_output(finished):
    _, out = finished
    (out / "tokens" / "prose-en.parquet").unlink()
    (out / "tokenizer.json").unlink()
    result = tokenmill_here("verify", out, check=False)
    assert result.returncode == 3
    assert "output tokens/prose-en.parquet: missing" in result.stderr
    assert "output tokenizer.json: missing" in result.stderr
    assert "verify: 2 differences from the manifest (" in result.stderr


@pytest.mark.parametrize(
    "edit, said",
    [
        # One digit of the accounting changed: every file still hashes as listed.
        (lambda m: m.update(documents=m["documents"] + 1), "manifest documents: "),
        (lambda m: m["outputs"][0].update(tokens=1), "1 tokens in the manifest, "),
        (lambda m: m["counts"][0].update(documents=0), "0 documents in the manifest, "),
        (lambda m: m.update(documents_skipped=1), "not documents + documents_skipped"),
        # An input dropped from the list: its tokens no longer follow from the inputs listed.
        (lambda m: m["inputs"].pop(0), "which the manifest does not list as it was read"),
        # Rows and the tokenizer's sha256, against what each file's footer says.
        (lambda m: m["outputs"][0].update(rows=7), "7 rows in the manifest, "),
        (lambda m: m["files"][0].update(rows=1), "counts.parquet: 1 rows in the manifest, "),
        (lambda m: m.update(tokenizer_sha256="0" * 64), "but 5 outputs were encoded with"),
    ],
)
def test_verify_holds_the_manifests_numbers_to_its_outputs(finished, edit, said):
    _, out = finished
    m = manifest(out)
    edit(m)
    (out / "manifest.json").write_text(json.dumps(m))
    result = tokenmill_here("verify", out, check=False)
    assert result.returncode == 3
    assert said in result.stderr


def test_verify_without_manifest_is_a_one_line_error(tmp_path):
    result = tokenmill_here("verify", tmp_path, check=False)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("Error: ")
    assert "manifest.json" in result.stderr


def test_git_is_asked_before_out_is_locked(tmp_path, monkeypatch):
    # A child forked while OUT's lock is open holds the lock until it execs: a
    # rerun right after a failed run would find OUT in use. So git, which runs
    # beside the stages, must be started before the lock is taken.
    import fcntl

    from tokenmill.config import Config
    from tokenmill.stages import run as run_module

    data = copy_sample(tmp_path / "data")
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN)  # OUT/.tokenmill.lock now exists
    held = []

    def revision():
        with open(out / ".tokenmill.lock", "rb") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held.append(True)
            else:
                fcntl.flock(f, fcntl.LOCK_UN)
                held.append(False)
        return lambda: "0" * 40

    monkeypatch.setattr(run_module, "git_revision", revision)
    run_module.run_all(data, out, Config(vocab_size=1000))
    assert held == [False]
    assert manifest(out)["git_revision"] == "0" * 40


def test_verify_holds_the_split_to_the_totals(tmp_path):
    data = copy_sample(tmp_path / "data")
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN, "--val-fraction", "0.1")
    assert "files match" in tokenmill_here("verify", out).stderr
    m = manifest(out)
    m["split"]["val"]["documents"] = 0
    (out / "manifest.json").write_text(json.dumps(m))
    result = tokenmill_here("verify", out, check=False)
    assert result.returncode == 3
    assert "manifest split: train and val documents" in result.stderr
