"""No layout file of no ids: numpy's memmap, which nanoGPT and Megatron-LM
open .bin files with, refuses an empty file, so a run that wrote one ended 0
with a dataset its trainer cannot load. An empty input or a shard none of
whose documents is held out gets no file in that split; a --val-fraction
that holds out nothing at all is refused."""

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
