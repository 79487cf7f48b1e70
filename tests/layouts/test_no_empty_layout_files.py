"""No layout file of no ids: numpy's memmap, which nanoGPT and Megatron-LM
open .bin files with, refuses an empty file, so a run that wrote one ended 0
with a dataset its trainer cannot load. An empty input or a shard none of
whose documents is held out gets no file in that split, nor, in bin, one
whose documents hold no ids; a --val-fraction that holds out nothing at all
is refused."""

from __future__ import annotations

import hashlib
import json

import numpy as np
from conftest import assert_one_line_error, make_documents, write_shard
from runs import manifest

FORMATS = "megatron,bin,olmo,datatrove"


def test_per_shard_layouts_skip_what_holds_no_document(cli, tmp_path):
    data = tmp_path / "data"
    write_shard(data / "big.jsonl", make_documents(400, seed=1))
    write_shard(data / "small.jsonl", make_documents(3, seed=2))  # none held out
    (data / "empty.jsonl").write_bytes(b"")
    for args in ([], ["--val-fraction", "0.05"]):
        out = tmp_path / f"out{len(args)}"
        cli("run", data, out, "--vocab-size", "300", "--per-shard", "--format", FORMATS, *args)
        files = [p for p in out.rglob("*") if p.is_file() and p.parent != out]
        layout = [p for p in files if p.parts[len(out.parts)] in ("megatron", "bin", "olmo")]
        assert layout and not any("empty" in p.name for p in layout)
        for path in layout:
            if path.suffix in (".bin", ".npy") and not path.name.endswith(".idx.npy"):
                assert path.stat().st_size > 0, path
                np.memmap(path, dtype=np.uint8, mode="r")  # what trainers' readers do
        listed = {e["path"] for e in manifest(out)["files"]}
        assert not any("empty" in p for p in listed)
        if args:  # the small shard has training documents only
            assert any("small" in p and "train" in p for p in listed)
            assert not any("small" in p and "val" in p for p in listed)
        cli("check", out)
        cli("verify", out)


def test_a_val_fraction_that_holds_out_nothing_is_refused(cli, tmp_path):
    data = tmp_path / "data"
    write_shard(data / "a.jsonl", make_documents(50, seed=1))
    result = cli("run", data, tmp_path / "out", "--vocab-size", "300", "--val-fraction",
                 "0.0001", "--format", "bin", ok=False)  # fmt: skip
    assert_one_line_error(result, "--val-fraction 0.0001 puts none of the 50 documents in val")
    assert not (tmp_path / "out" / "bin").exists()


def test_pack_and_bin_refuse_a_val_fraction_that_holds_out_nothing_as_run_does(cli, tmp_path):
    """They wrote a val/ of no rows, or no val.bin, and ended 0."""
    data = tmp_path / "data"
    write_shard(data / "a.jsonl", make_documents(50, seed=1))
    cli("run", data, tmp_path / "out", "--vocab-size", "300")
    tokens = tmp_path / "out" / "tokens"
    for fraction, side in (("1e-300", "in val (every one in train)"), ("0.9999999999", "in train")):
        for command, extra in (("pack", ["--seq-len", "64"]), ("bin", [])):
            target = tmp_path / f"{command}-{fraction}"
            result = cli(command, tokens, target, *extra, "--val-fraction", fraction, ok=False)
            assert result.exit_code == 1
            assert_one_line_error(
                result, f"--val-fraction {fraction} puts none of the 50 documents {side}"
            )
            assert not target.exists()


def test_check_names_an_empty_layout_file_an_older_version_wrote(cli, tmp_path):
    """Before, a shard with no ids in a split got a 0-byte .bin, listed in the
    manifest with its (empty) sha256: verify passes such a folder, so check
    is where it must be named."""
    data, out = tmp_path / "data", tmp_path / "out"
    write_shard(data / "a.jsonl", make_documents(60, seed=1))
    cli("run", data, out, "--vocab-size", "300", "--per-shard", "--format", "megatron")
    m = manifest(out)
    empty = "megatron/b.jsonl_text_document.bin"
    (out / empty).write_bytes(b"")
    m["files"].append({"path": empty, "bytes": 0, "sha256": hashlib.sha256(b"").hexdigest()})
    (out / "manifest.json").write_text(json.dumps(m))
    result = cli("check", out, ok=False)
    assert result.exit_code == 1
    assert f"problem: {empty}: an empty file, which numpy's memmap" in result.output


def bin_files(folder):
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def test_bin_writes_no_pair_for_documents_that_hold_no_ids(cli, tmp_path):
    """With --no-eos an empty text is a row of no ids: a shard (or a side of the
    split) of only such rows got a 0-byte .bin, which numpy's memmap refuses,
    and check then told to rerun, which wrote it again. Its documents stay
    counted in index.json, and `read` gives them back empty."""
    data = tmp_path / "data"
    write_shard(data / "a.jsonl", [""] * 20)
    write_shard(data / "b.jsonl", ["hello world"] * 20)
    run = ("--vocab-size", "270", "--no-eos", "--format", "bin")
    out = tmp_path / "out"
    done = cli("run", data, out, *run)
    assert "1 shard of no ids, without files" in done.output
    assert bin_files(out / "bin") == ["b.jsonl.bin", "b.jsonl.idx.npy", "index.json"]
    shards = json.loads((out / "bin" / "index.json").read_text())["shards"]
    assert shards[0] == {"source": "a.jsonl", "bin": None, "index": None,
                         "documents": 20, "tokens": 0}  # fmt: skip
    assert not any(e["path"].startswith("bin/a.") for e in manifest(out)["files"])
    assert "bin: 40 documents equal the token shards'" in cli("check", out).output
    cli("verify", out)
    # The stage command writes the same.
    cli("bin", out / "tokens", tmp_path / "b")
    assert bin_files(tmp_path / "b") == bin_files(out / "bin")
    assert (tmp_path / "b" / "index.json").read_bytes() == (out / "bin" / "index.json").read_bytes()

    # A split whose val documents hold no ids: no val.bin (nor .idx.npy).
    split = tmp_path / "split"
    done = cli("run", data, split, *run, "--val-fraction", "0.01")
    assert bin_files(split / "bin") == ["index.json", "train.bin", "train.idx.npy"]
    counts = json.loads((split / "bin" / "index.json").read_text())["split"]
    assert counts["val"]["documents"] > 0 and counts["val"]["tokens"] == 0
    assert f"no val.bin: {counts['val']['documents']} document" in done.output
    np.memmap(split / "bin" / "train.bin", dtype=np.uint16, mode="r")
    assert "bin: 40 documents equal the token shards'" in cli("check", split).output
    cli("verify", split)
    cli("bin", split / "tokens", tmp_path / "sb", "--val-fraction", "0.01")
    assert bin_files(tmp_path / "sb") == bin_files(split / "bin")


def test_a_rerun_writes_anew_a_layout_an_older_version_left_an_empty_file_in(cli, tmp_path):
    """check names such a file and says to rerun; the rerun kept the layout (same
    shards and options, files unchanged) with the file in it."""
    data, out = tmp_path / "data", tmp_path / "out"
    write_shard(data / "a.jsonl", ["hello world"] * 5)
    run = ("run", data, out, "--vocab-size", "270", "--no-eos", "--format", "bin")
    cli(*run)
    m = manifest(out)
    empty = "bin/b.jsonl.bin"
    (out / empty).write_bytes(b"")
    m["files"].append({"path": empty, "bytes": 0, "sha256": hashlib.sha256(b"").hexdigest()})
    (out / "manifest.json").write_text(json.dumps(m))
    assert cli("check", out, ok=False).exit_code == 1
    done = cli(*run)
    assert "kept" not in next(line for line in done.output.splitlines() if line.startswith("bin:"))
    assert not (out / empty).exists()
    assert not any(e["path"] == empty for e in manifest(out)["files"])
    cli("check", out)
