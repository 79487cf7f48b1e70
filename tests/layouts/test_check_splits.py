"""`tokenmill check` on DATA with train/ and val/ folders: they name input
files, not splits, unless the run had --val-fraction; every layout reads back
as the run wrote it either way, merged or one set of files per shard."""

from __future__ import annotations

import sys

import pytest
from conftest import make_documents, write_shard
from runs import manifest
from trainers import megatron_indexed_dataset, olmo_core_data_utils, torch_stand_in

from tokenmill.layouts import layout

LAYOUTS = ("packed", "bin", "megatron", "datatrove", "olmo")
TRAINERS = ("megatron", "datatrove", "olmo_core")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    data = tmp_path_factory.mktemp("splits") / "data"
    docs = make_documents(36, seed=5)
    write_shard(data / "train" / "a.jsonl", docs[:12])
    write_shard(data / "val" / "b.jsonl", docs[12:24])
    write_shard(data / "z.jsonl", docs[24:])
    return data


def check_output(cli, out, trainers: bool, monkeypatch) -> str:
    """`tokenmill check OUT`'s output, which must pass, read by the trainers'
    own readers or with them unimportable (tokenmill's)."""
    if trainers:
        megatron_indexed_dataset()
        olmo_core_data_utils()
        with torch_stand_in():
            result = cli("check", out, ok=False)
    else:
        with monkeypatch.context() as m:
            for name in [*TRAINERS, *sys.modules]:
                if name.split(".")[0] in TRAINERS:
                    m.setitem(sys.modules, name, None)
            result = cli("check", out, ok=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("fraction", [None, "0.4"], ids=["unsplit", "split"])
@pytest.mark.parametrize("per_shard", [False, True], ids=["merged", "per-shard"])
def test_data_with_train_and_val_folders_checks(
    cli, data, tmp_path, monkeypatch, per_shard, fraction
):
    out = tmp_path / "out"
    args = ["--vocab-size", "300", "--workers", "1", "--pack", "64"]
    args += ["--format", "bin,megatron,datatrove,olmo"]
    args += ["--per-shard"] * per_shard + ["--val-fraction", fraction] * bool(fraction)
    cli("run", data, out, *args)
    n = manifest(out)["documents"]
    assert n == 36
    for trainers in (True, False):
        output = check_output(cli, out, trainers, monkeypatch)
        for name in LAYOUTS:
            assert f"{name}: {n} documents equal the token shards' (read with" in output
    want = {"train", "val"} if fraction else {""}
    for name in LAYOUTS:
        lay = layout(name)
        assert {d.split for d in lay.read(out / lay.folder, bool(fraction))} == want, name
