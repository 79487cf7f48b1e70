"""OUT on object storage (a local S3 server, tests/helpers/s3.py): every guarantee of
a local OUT holds. Outputs are byte-identical to a local run's, a rerun keeps
them, a killed run resumes to the same bytes with nothing left behind,
`verify` catches a changed object, and the lock (a lease on an object, see
pipeline/tokenmill/io/lock.py) keeps one run per OUT and is taken over from a dead one.
Runs are killed at known points (tokenmill.faults), never after a delay."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from runs import HANG_GUARD_S, copy_sample, output_files, paused, tokenmill
from s3 import key, store

from tokenmill.errors import TokenmillError
from tokenmill.io.lock import LOCK, Lost, _put, output_lock
from tokenmill.io.storage import forget_listings
from tokenmill.io.writers import is_temporary

RUN = ("--vocab-size", "1000", "--workers", "1")
BIN = ("--pack", "256", "--format", "bin", "--val-fraction", "0.1")
MANIFEST_KEYS = ("inputs", "not_read", "outputs", "counts", "files", "tokenizer")
MANIFEST_KEYS += ("documents", "documents_skipped", "tokens", "split")


def objects(url: str) -> dict[str, bytes]:
    """Every object under the prefix `url`, by its name relative to it."""
    fs = store()
    base = key(url)
    return {name[len(base) + 1 :]: fs.cat_file(name) for name in sorted(fs.find(base))}


def remote_output_files(url: str) -> dict[str, bytes]:
    """As runs.output_files: every object but the manifest and the lock."""
    return {k: v for k, v in objects(url).items() if k not in ("manifest.json", LOCK)}


def remote_manifest(url: str) -> dict:
    return json.loads(store().cat_file(f"{key(url)}/manifest.json"))


def local_manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def lock_record(url: str) -> dict:
    return json.loads(store().cat_file(f"{key(url)}/{LOCK}"))


@pytest.fixture
def here(cli):
    """`tokenmill ARGS` in this process (no interpreter to start: quicker than
    `runs.tokenmill`), seeing what other processes wrote to the store."""

    def invoke(*args, ok: bool = True):
        forget_listings()
        return cli(*args, ok=ok)

    return invoke


def assert_same_run(url: str, local_out: Path) -> None:
    assert remote_output_files(url) == output_files(local_out)
    remote, local = remote_manifest(url), local_manifest(local_out)
    for k in MANIFEST_KEYS:
        assert remote.get(k) == local.get(k), k
    assert [k for k in objects(url) if is_temporary(k.rsplit("/", 1)[-1])] == []


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return copy_sample(tmp_path_factory.mktemp("s3-outputs") / "data")


@pytest.fixture(scope="module")
def local_run(data, tmp_path_factory):
    """The local OUT of `run DATA OUT *options`, made once per options."""
    done: dict[tuple, Path] = {}

    def run(*options: str) -> Path:
        if options not in done:
            out = tmp_path_factory.mktemp("local") / "out"
            tokenmill("run", data, out, *RUN, *options)
            done[options] = out
        return done[options]

    return run


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A TMPDIR of the test's own, where runs stage their uploads."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))  # this process's runs too
    return folder / "tokenmill-scratch"


def scratch_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize("options", [(), BIN], ids=["plain", "pack-bin-val"])
def test_local_to_s3_is_identical_and_a_rerun_keeps_everything(
    s3, data, local_run, scratch, here, options
):
    url = s3.url("out")
    first = tokenmill("run", data, url, *RUN, *options)
    assert f"-> {url}/manifest.json" in first.stderr
    assert_same_run(url, local_run(*options))
    manifest = remote_manifest(url)
    # Outputs are recorded relative to OUT, as for a local OUT; DATA as given.
    assert manifest["tokenizer"]["path"] == "tokenizer.json"
    assert manifest["data"] == str(data.resolve())
    assert lock_record(url)["released"]

    again = here("run", data, url, *RUN, *options).output
    assert "count: 5 shards (5 kept, 0 done)" in again
    assert "encode: 5 shards (5 kept, 0 done)" in again
    assert again.count("(kept: inputs unchanged)") == 2  # merge, train
    assert "took over" not in again  # a released lock is simply taken
    stages = remote_manifest(url)["stages"]
    assert [stages[s]["redone"] for s in ("count", "merge", "train", "encode")] == [0] * 4
    assert_same_run(url, local_run(*options))
    assert scratch_files(scratch) == []

    assert "files match the manifest" in here("verify", url).output
    if options:
        # numpy's memmap, nanoGPT's reader, maps local files only: said so.
        checked = here("check", url).output
        assert "(read with tokenmill's reader: numpy reads local files only)" in checked
        assert "0 problems" in checked
        return
    # stats and report read OUT's objects as they read a local OUT.
    remote = json.loads(here("stats", url, "--json").stdout)
    local = json.loads(here("stats", local_run(), "--json").stdout)
    remote.pop("seconds"), local.pop("seconds")
    assert remote == local
    here("report", url)
    page = store().cat_file(f"{key(url)}/report.html").decode()
    assert "tokenmill report: out" in page
    assert "files match the manifest" in here("verify", url).output  # report.html is OUT's


def test_verify_catches_a_changed_object_and_a_rerun_redoes_it(s3, data, local_run, scratch, here):
    url = s3.url("out")
    tokenmill("run", data, url, *RUN)
    fs = store()
    shard = f"{key(url)}/tokens/lines.txt.parquet"
    body = bytearray(fs.cat_file(shard))
    body[len(body) // 2] ^= 0xFF
    fs.pipe_file(shard, bytes(body))
    fs.pipe_file(f"{key(url)}/tokens/stray.parquet", b"not a shard")

    check = here("verify", url, ok=False)
    assert check.exit_code == 3, check.output
    assert "verify: output tokens/lines.txt.parquet: changed, sha256" in check.output
    assert "verify: extra tokens/stray.parquet: not in the manifest" in check.output

    again = here("run", data, url, *RUN).output
    assert "encode: 5 shards (4 kept, 1 done)" in again
    assert "removed 1 stale file" in again and "tokens/stray.parquet" in again
    assert remote_manifest(url)["stages"]["encode"]["reused_shards"] == [
        "code-python.jsonl.gz",
        "lines.txt.gz",
        "multilingual.jsonl",
        "prose-en.parquet",
    ]
    assert_same_run(url, local_run())
    assert "files match the manifest" in here("verify", url).output


@pytest.mark.parametrize(
    ("stage", "step", "options"),
    [("encode", 3, ()), ("bin-write", 1, BIN)],
    ids=["mid-encode", "bin-upload-staged"],
)
def test_a_run_killed_against_s3_resumes_to_identical_outputs(
    s3, data, local_run, scratch, here, tmp_path, stage, step, options
):
    url = s3.url("out")
    with paused(["run", data, url, *RUN, *options], stage, step, tmp_path) as proc:
        pid = proc.pid
    left = objects(url)
    assert "manifest.json" not in left
    if stage == "encode":
        assert len([k for k in left if k.startswith("tokens/") and k.endswith(".parquet")]) == 3
    else:
        # Killed while writing bin/: its staged files stay on this machine, never in OUT.
        assert scratch_files(scratch) and not any(k.startswith("bin/") for k in left)
    holder = lock_record(url)
    assert holder["pid"] == pid and "released" not in holder
    # What other tools or a killed upload may leave: a temporary and an
    # unfinished multipart upload under OUT.
    fs = store()
    fs.pipe_file(f"{key(url)}/tokens/.x.parquet.tmp-1-abcd", b"half")
    bucket, prefix = key(url).split("/", 1)
    fs.call_s3("create_multipart_upload", Bucket=bucket, Key=f"{prefix}/tokens/big.parquet")

    # Its holder is gone (killed on this machine): the lock is taken over at
    # once. A run of another DATA is still refused: the outputs are DATA's.
    other = copy_sample(tmp_path / "other", ["lines.txt"])
    refused = here("run", other, url, *RUN, *options, ok=False)
    assert refused.exit_code == 1 and "holds the outputs of another DATA" in refused.output
    took = f"took over the lock of a tokenmill run that ended without releasing it (pid {pid}"
    assert took in refused.output
    assert lock_record(url)["data"] == str(data.resolve())

    here("run", data, url, *RUN, *options)
    assert_same_run(url, local_run(*options))
    assert scratch_files(scratch) == []
    uploads = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix + "/")
    assert uploads.get("Uploads", []) == []


def test_verify_of_a_prefix_with_no_manifest_says_why(s3, here):
    """As locally: the object store's error for a missing object was its name."""
    url = s3.url("nothing")
    result = here("verify", url, ok=False)
    assert result.output.strip().splitlines()[-1] == (
        f"Error: {url}/manifest.json: cannot read manifest (No such file or directory)"
    )


def test_a_second_run_fails_at_once_naming_the_holder(s3, data, scratch, tmp_path):
    url = s3.url("out")
    with paused(["run", data, url, *RUN], "count", 1, tmp_path) as proc:
        second = tokenmill("run", data, url, *RUN, check=False)
        assert second.returncode == 1
        assert f"{url}: in use by another tokenmill run (pid {proc.pid} on " in second.stderr
        assert "last heartbeat" in second.stderr
        assert "count:" not in second.stderr  # refused before any work
        assert lock_record(url)["pid"] == proc.pid  # the holder's record untouched
    # Once killed, its lock is taken over at once: see the test above.


def test_a_stale_lock_is_taken_over_and_a_fresh_one_is_not(
    s3, data, local_run, scratch, here, monkeypatch
):
    url = s3.url("out")
    # A holder on another machine: nothing here can tell whether it still runs.
    holder = {"pid": 4242, "host": "elsewhere", "started": "2026-01-01T00:00:00+0000"}
    store().pipe_file(f"{key(url)}/{LOCK}", json.dumps(holder).encode())
    fresh = here("run", data, url, *RUN, ok=False)
    assert fresh.exit_code == 1
    assert "in use by another tokenmill run (pid 4242 on elsewhere" in fresh.output

    time.sleep(2)  # longer than the stale limit below (the store counts whole seconds)
    monkeypatch.setenv("TOKENMILL_LOCK_STALE_S", "1")
    taken = here("run", data, url, *RUN).output
    assert "took over the lock of a tokenmill run that ended without releasing it" in taken
    assert "pid 4242 on elsewhere" in taken and "no heartbeat for" in taken
    record = lock_record(url)
    assert record["pid"] != 4242 and record["released"]
    assert_same_run(url, local_run())


def test_the_holder_beats_and_learns_when_its_lock_is_taken(s3, monkeypatch):
    from upath import UPath

    monkeypatch.setenv("TOKENMILL_LOCK_STALE_S", "0.5")  # a heartbeat every 0.1 s
    url = s3.url("out")
    path = UPath(url) / LOCK
    fs = store()
    with pytest.raises(TokenmillError, match="taken over by another tokenmill run"):
        with output_lock(UPath(url)) as lock:
            lock.record(None, "run")
            first = fs.info(path.path)["ETag"]
            deadline = time.monotonic() + HANG_GUARD_S
            while fs.info(path.path)["ETag"] == first:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            lock.check()  # still ours
            # Another run takes it over (as if this one had stalled)...
            taker = {"pid": 7, "host": "elsewhere"}
            fs.pipe_file(path.path, json.dumps(taker).encode())
            taken = fs.info(path.path)["ETag"]
            while lock.lost is None:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            # ...and a writer holding an older ETag can no longer write it.
            with pytest.raises(Lost):
                _put(path, b"{}", etag=first)
            with pytest.raises(Lost):
                _put(path, b"{}", create=True)
            lock.check()
    # The release leaves the taker's lock as it is.
    assert fs.info(path.path)["ETag"] == taken
    assert json.loads(fs.cat_file(path.path)) == taker


def test_s3_to_s3_is_identical_uninterrupted_and_resumed(
    s3, data, local_run, scratch, here, tmp_path
):
    fs = store()
    remote_data = s3.url("data")
    for p in sorted(data.iterdir()):
        fs.put_file(str(p), f"{key(remote_data)}/{p.name}")
    url = s3.url("out")
    tokenmill("run", remote_data, url, *RUN)
    assert_same_run(url, local_run())
    assert remote_manifest(url)["data"] == remote_data

    resumed = s3.url("out")
    with paused(["run", remote_data, resumed, *RUN], "encode", 3, tmp_path):
        pass
    here("run", remote_data, resumed, *RUN)
    assert_same_run(resumed, local_run())
    assert "files match the manifest" in here("verify", resumed).output


@pytest.mark.parametrize("executor", ["processes", "ray"])
def test_a_rerun_with_workers_sees_what_they_wrote(s3, data, local_run, tmp_path, executor):
    """The driver lists OUT before its workers write there: the listing it
    keeps must not hide their outputs from the stages after (merge reading
    the count table of an input added since the first run)."""
    fewer = tmp_path / "data"
    shutil.copytree(data, fewer)
    added = sorted(fewer.iterdir())[0]
    added.rename(tmp_path / added.name)
    url = s3.url("out")
    options = ("--vocab-size", "1000", "--workers", "2")
    tokenmill("run", fewer, url, *options)  # the first run only makes OUT
    (tmp_path / added.name).rename(added)
    rerun = tokenmill("run", fewer, url, *options, "--executor", executor)
    assert "count: 5 shards (4 kept, 1 done)" in rerun.stderr
    assert_same_run(url, local_run())


def test_verify_finds_a_local_tokenizer_given_to_a_run_into_s3(
    s3, data, local_run, scratch, here, tmp_path, monkeypatch
):
    """The manifest lists the tokenizer given by its absolute local path: neither
    under OUT nor relative to wherever `run` was started."""
    (tmp_path / "local.json").write_bytes((local_run() / "tokenizer.json").read_bytes())
    monkeypatch.chdir(tmp_path)
    url = s3.url("out")
    here("run", data, url, "--tokenizer", "./local.json", "--workers", "1")
    assert remote_manifest(url)["tokenizer"]["path"] == str(tmp_path / "local.json")
    assert "files match the manifest" in here("verify", url).output
    (tmp_path / "local.json").write_bytes(b"{}")
    check = here("verify", url, ok=False)
    assert "verify: output ./local.json" not in check.output
    assert f"verify: output {tmp_path / 'local.json'}: changed" in check.output
