"""An input that changes during a run is detected, never mixed: each stage
hashes an input as it reads it (no read of its own), a file that changes while
it is read or between count's read and encode's fails the run in one line
naming it, and the rerun redoes what was made from the old content. The
manifest records what each stage read, and `verify` holds every input to it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import make_documents, write_shard
from runs import HANG_GUARD_S, manifest, output_files, paused, tokenmill

import tokenmill.io.files as files
from tokenmill.config import Config
from tokenmill.errors import InputChanged
from tokenmill.io.files import hashed_read
from tokenmill.io.readers import read_documents
from tokenmill.stages import count, shards
from tokenmill.stages.count import run_count

RUN = ("--vocab-size", "300", "--workers", "1")
SHARDS = 5  # in the corpus fixture
LINE = json.dumps({"text": "an appended document with words never seen before: zyxq"}) + "\n"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def big_parquet(path: Path) -> Path:
    """Parquet larger than a reader's jump to its footer, with a second column."""
    docs = make_documents(3000, seed=3) * 4
    table = pa.table({"text": docs, "id": list(range(len(docs)))})
    pq.write_table(table, path, row_group_size=2000, compression="none")
    assert path.stat().st_size > files.SKIP_BYTES + (64 << 10)
    return path


def ipc(path: Path, layout: str) -> Path:
    table = pa.table({"text": make_documents(200, seed=4), "n": list(range(200))})
    new = pa.ipc.new_file if layout == "file" else pa.ipc.new_stream
    with pa.OSFile(str(path), "wb") as f, new(f, table.schema) as w:
        for batch in table.to_batches(max_chunksize=30):
            w.write_batch(batch)
    return path


INPUTS = {
    "parquet": lambda d: write_shard(d / "a.parquet", make_documents(50)),
    "big parquet": lambda d: big_parquet(d / "big.parquet"),
    "jsonl": lambda d: write_shard(d / "b.jsonl", make_documents(50)),
    "jsonl.gz": lambda d: write_shard(d / "c.jsonl.gz", make_documents(50)),
    "txt": lambda d: write_shard(d / "d.txt", [" ".join(x.split()) for x in make_documents(50)]),
    "arrow file": lambda d: ipc(d / "e.arrow", "file"),
    "arrow stream": lambda d: ipc(d / "f.arrow", "stream"),
}


@pytest.mark.parametrize("kind", list(INPUTS))
def test_a_read_hashes_the_bytes_it_reads_and_reads_them_once(tmp_path, monkeypatch, kind):
    path = INPUTS[kind](tmp_path)
    read_from_disk = []
    opened = files.open_file

    def counting(p, cache="readahead"):
        f = opened(p, cache)
        read = f.read

        def counted(*args):
            data = read(*args)
            read_from_disk.append(len(data))
            return data

        f.read = counted
        return f

    monkeypatch.setattr(files, "open_file", counting)
    with hashed_read(path, path.name, "count") as read:
        docs = sum(len(d) for d in read_documents(path))
        fingerprint = read.fingerprint()
    assert docs > 0
    assert fingerprint == {"path": path.name, "bytes": path.stat().st_size, "sha256": sha(path)}
    # Every byte once, but a footer read first and again in order (Parquet, Arrow).
    # (PyArrow reads a local Arrow file-format file itself, unseen here; it is
    # hashed in a pass after: io/ipc.py says why.)
    assert sum(read_from_disk) <= path.stat().st_size + (64 << 10)


@pytest.mark.parametrize("kind", ["parquet", "jsonl", "arrow stream"])
def test_a_file_changed_while_a_stage_reads_it_fails_in_one_line(tmp_path, monkeypatch, kind):
    data = tmp_path / "data"
    data.mkdir()
    path = INPUTS[kind](data)
    reads = read_documents

    def appended_after_first_batch(*args, **kwargs):
        for i, docs in enumerate(reads(*args, **kwargs, batch_rows=10)):
            if i == 0:
                with open(path, "ab") as f:
                    f.write(b"\n")
            yield docs

    monkeypatch.setattr(count, "read_documents", appended_after_first_batch)
    config = Config(vocab_size=300, workers=1, on_error="skip")  # not a bad file to skip
    with pytest.raises(InputChanged) as e:
        run_count(data, tmp_path / "counts", config)
    assert str(e.value) == f"{path}: changed while count read it; rerun"
    assert not list((tmp_path / "counts").rglob("*.parquet"))


def append_line(data: Path) -> Path:
    path = data / "b.jsonl"
    with open(path, "a") as f:
        f.write(LINE)
    return path


def rewrite_parquet(data: Path) -> Path:
    """Another content in the same file (same inode)."""
    path = data / "a.parquet"
    write_shard(path, make_documents(40, seed=7))
    return path


def replace_text(data: Path) -> Path:
    """A new file renamed over the input, as a sync tool replaces it."""
    path = data / "sub" / "d.txt"
    new = path.with_name("d.txt.new")
    new.write_bytes(path.read_bytes() + b"one more line of text\n")
    os.replace(new, path)
    return path


CHANGES = {"append": append_line, "rewrite": rewrite_parquet, "replace": replace_text}


@pytest.mark.parametrize(
    ("change", "options"),
    [("append", ()), ("rewrite", ("--on-error", "skip")), ("replace", ())],
)
def test_an_input_changed_between_count_and_encode_fails_and_the_rerun_redoes_it(
    corpus, tmp_path, cli, change, options
):
    out = tmp_path / "out"
    args = ["run", corpus, out, *RUN, *options]
    with paused(args, "count", SHARDS, tmp_path) as proc:  # every input counted
        before = {p: sha(p) for p in corpus.rglob("*") if p.is_file()}
        path = CHANGES[change](corpus)
        (tmp_path / f"paused-at-count-{SHARDS}").unlink()  # the run goes on
        _, stderr = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 1
    assert stderr.strip().splitlines()[-1] == (
        f"Error: {path}: changed during the run (read by count as sha256 {before[path]}, "
        f"by encode as {sha(path)}); rerun"
    )
    assert not (out / "manifest.json").exists()

    # The rerun counts the new content, merges, trains and encodes: as a clean run does.
    cli(*args)
    clean = tmp_path / "clean"
    shutil.copytree(corpus, tmp_path / "copy")
    cli("run", tmp_path / "copy", clean, *RUN, *options)
    assert output_files(out) == output_files(clean)
    entry = next(e for e in manifest(out)["inputs"] if corpus / e["path"] == path)
    assert entry["read_by"] == {"count": sha(path), "encode": sha(path)}
    assert tokenmill("verify", out, check=False).returncode == 0


def test_an_input_removed_between_count_and_encode_fails_in_one_line(corpus, tmp_path):
    with paused(["run", corpus, tmp_path / "out", *RUN], "count", SHARDS, tmp_path) as proc:
        (corpus / "b.jsonl").unlink()
        (tmp_path / f"paused-at-count-{SHARDS}").unlink()
        _, stderr = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 1
    assert stderr.strip().splitlines()[-1] == (
        f"Error: {corpus / 'b.jsonl'}: removed during the run; rerun"
    )


def test_the_manifest_records_what_each_stage_read_and_verify_holds_the_input_to_it(
    corpus, tmp_path, cli
):
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN)
    inputs = manifest(out)["inputs"]
    for entry in inputs:
        now = sha(corpus / entry["path"])
        assert entry["sha256"] == now
        assert entry["read_by"] == {"count": now, "encode": now}

    # A folder whose counts (so its tokenizer) were made from another content of
    # b.jsonl than its tokens and the input now: the mixed folder this must never be.
    m = json.loads((out / "manifest.json").read_text())
    entry = next(e for e in m["inputs"] if e["path"] == "b.jsonl")
    entry["read_by"]["count"] = "0" * 64
    (out / "manifest.json").write_text(json.dumps(m))
    result = cli("verify", out, ok=False)
    assert result.exit_code == 3
    now = sha(corpus / "b.jsonl")
    assert f"verify: input b.jsonl: read by count as sha256 {'0' * 64}, now {now}" in result.output


def test_count_only_records_what_count_read(corpus, tmp_path, cli):
    out = tmp_path / "out"
    cli("run", corpus, out, "--count-only")
    for entry in manifest(out)["inputs"]:
        assert entry["read_by"] == {"count": sha(corpus / entry["path"])}


def test_a_rerun_keeps_what_is_unchanged_and_reads_only_to_hash_it(
    corpus, tmp_path, cli, monkeypatch
):
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN)

    def never(*args):
        raise AssertionError(f"read again: {args}")

    monkeypatch.setattr(shards, "hashed_read", never)
    cli("run", corpus, out, *RUN)
    assert manifest(out)["stages"]["encode"]["reused"] == SHARDS
