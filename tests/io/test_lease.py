"""A run holding an S3 OUT's lock that stalls past the stale limit (SIGSTOP
here; a paused VM or a long swap alike) and resumes after another run took the
lock over writes nothing more under OUT, reads nothing of it, and ends with
one line naming the run that took over; the other run's outputs stay as they
were (pipeline/tokenmill/io/lock.py). Runs stall at known points
(tokenmill.faults); the short stale limit is waited for through the lock's
own answers, never by a timing assertion."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from runs import HANG_GUARD_S, copy_sample, output_files, paused, tokenmill
from s3 import store, take_over

from tokenmill.errors import WriteError
from tokenmill.formats import load_any
from tokenmill.io import storage
from tokenmill.io.lock import LOCK, LockLost, output_lock
from tokenmill.io.storage import forget_listings, location
from tokenmill.io.writers import write_json
from tokenmill.stages.merge import scan_tables
from tokenmill.tokenizer import Tokenizer

WORKERS = ("--workers", "1")
TEXTS = ["the cat sat on the mat", "a dog runs; the cat naps"] * 5
STALE = "2"  # seconds: TOKENMILL_LOCK_STALE_S, the shortest the store's whole seconds allow


def snapshot(url: str) -> dict[str, tuple[str, bytes]]:
    """(ETag, bytes) of every object under the prefix `url`, the lock's included."""
    fs = store()
    base = url.removeprefix("s3://")
    found = fs.find(base, detail=True)
    return {
        name[len(base) + 1 :]: (info["ETag"], fs.cat_file(name)) for name, info in found.items()
    }


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return copy_sample(tmp_path_factory.mktemp("lease") / "data")


@pytest.fixture
def stale(monkeypatch):
    """A short stale limit, for the runs in this process and those it starts."""
    monkeypatch.setenv("TOKENMILL_LOCK_STALE_S", STALE)


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A TMPDIR of the test's own, where runs stage their uploads."""
    import tempfile

    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))


@pytest.fixture
def here(cli):
    """`tokenmill ARGS` in this process, seeing what other processes wrote."""

    def invoke(*args, ok: bool = True):
        forget_listings()
        return cli(*args, ok=ok)

    return invoke


def stall(proc, marker: Path) -> None:
    """Stop the run paused at `marker` (tokenmill.faults) and let it go on once
    resumed: it is stalled, as a paused VM is, heartbeat and all."""
    proc.send_signal(signal.SIGSTOP)
    marker.unlink()


def resume(proc) -> str:
    """SIGCONT the stalled run and wait for it to end: its stderr."""
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=HANG_GUARD_S)
    return err


@pytest.mark.parametrize(
    ("stage", "step", "encode_only", "action"),
    [("encode", 3, False, "tokens/"), ("encode", 5, True, "tokenizer.json: not read")],
    ids=["mid-encode", "before-reading-tokenizer-json"],
)
def test_a_stalled_holder_leaves_the_run_that_took_over_intact(
    s3, data, here, stale, scratch, tmp_path, stage, step, encode_only, action
):
    # Mid-encode the taker trains another tokenizer, so its shards are none the
    # holder would keep: the holder would encode and upload its own over them.
    # With a tokenizer given, both encode with it: the holder's next step
    # reads back OUT/tokenizer.json, which the taker wrote.
    holder_options: tuple = ("--vocab-size", "1000")
    taker_options: tuple = ("--vocab-size", "900")
    if encode_only:
        holder_options = taker_options = ("--tokenizer", s3.url("tokenizer.json"))
        Tokenizer.train(TEXTS, vocab_size=300).save(location(holder_options[1]))
    uninterrupted = tmp_path / "uninterrupted"
    tokenmill("run", data, uninterrupted, *WORKERS, *taker_options)

    url = s3.url("out")
    with paused(["run", data, url, *WORKERS, *holder_options], stage, step, tmp_path) as holder:
        stall(holder, tmp_path / f"paused-at-{stage}-{step}")
        taker = take_over(here, "run", data, url, *WORKERS, *taker_options)
        assert (
            "took over the lock of a tokenmill run that ended without releasing it "
            f"(pid {holder.pid}" in taker.output
        )
        before = snapshot(url)
        err = resume(holder)

    assert snapshot(url) == before  # not one object written, rewritten or removed
    assert holder.returncode == 1, err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"Error: {url}/") and action in line, line
    assert f"taken over by another tokenmill run (pid {os.getpid()} on " in line
    assert "files match the manifest" in here("verify", url).output
    local = tmp_path / "local"
    store().get(url.removeprefix("s3://"), str(local), recursive=True)
    assert output_files(local) == output_files(uninterrupted)


def test_the_worker_processes_of_a_stalled_holder_write_nothing_after_a_takeover(
    s3, data, here, scratch, tmp_path, monkeypatch
):
    # Only the driver holds the lease: its workers pass its fence, carried to
    # them. Its worker is held until the taker has ended, then goes on; the
    # driver, stalled meanwhile, resumes after it.
    monkeypatch.setenv("TOKENMILL_LOCK_STALE_S", "4")  # a worker needs a lock dated < 1 s
    holder_options = ("--vocab-size", "1000", "--workers", "2", "--executor", "processes")
    taker_options = ("--vocab-size", "900", *WORKERS)
    url = s3.url("out")
    with paused(["run", data, url, *holder_options], "encode-task", 2, tmp_path) as holder:
        holder.send_signal(signal.SIGSTOP)
        take_over(here, "run", data, url, *taker_options)
        before = snapshot(url)
        (tmp_path / "paused-at-encode-task-2").unlink()
        err = resume(holder)
    assert snapshot(url) == before
    assert holder.returncode == 1, err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"Error: {url}/") and "taken over by another tokenmill run" in line
    assert "files match the manifest" in here("verify", url).output


@pytest.mark.parametrize("limit", [STALE])
def test_worker_processes_go_on_under_a_short_stale_limit(s3, data, scratch, limit):
    """A worker acts on a heartbeat the store dates no more than half the stale
    limit ago, less the second its whole-second dates may take off: at 2 s or
    less nothing was left of that, and the workers waited for ever."""
    url = s3.url("out")
    options = ("--vocab-size", "300", "--workers", "2", "--executor", "processes")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenmill", "run", str(data), url, *options],
        env={**os.environ, "TOKENMILL_LOCK_STALE_S": limit},
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its workers too, had it hung
        proc.wait()
    assert proc.returncode == 0, err
    assert "encode: 5 shards (0 kept, 5 done)" in err


def test_a_holder_that_lost_its_lock_writes_removes_and_reads_nothing(s3, stale, tmp_path):
    """The fence alone, in this process: once another writer replaced the lock
    and tokenizer.json (as a run taking over does), writing, removing or
    reading under OUT fails, naming the file and the taker, instead of
    loading the other run's tokenizer or writing over its outputs."""
    from upath import UPath

    theirs = tmp_path / "theirs.json"
    Tokenizer.train(TEXTS, vocab_size=300).save(theirs)
    out = UPath(s3.url("out"))
    fs = store()
    with pytest.raises(LockLost), output_lock(out) as lock:
        lock.record(None, "run")
        write_json({"ours": True}, out / "state.json")
        fs.pipe_file(f"{out}/{LOCK}", b'{"pid": 7, "host": "elsewhere"}')
        fs.put_file(str(theirs), f"{out}/tokenizer.json")
        taken = snapshot(str(out))
        taker = r"taken over by another tokenmill run \(pid 7 on elsewhere\)"
        with pytest.raises(LockLost, match=rf"tokenizer.json: not read: .*{taker}"):
            load_any(out / "tokenizer.json")
        with pytest.raises(LockLost, match="state.json: not read"):
            with storage.open_read(out / "state.json"):
                pass
        with pytest.raises(LockLost, match="counts/a.parquet: not read"):
            scan_tables([out / "counts" / "a.parquet"])  # merge's, by Polars
        with pytest.raises(LockLost, match="state.json: not written"):
            write_json({"ours": False}, out / "state.json")
        with pytest.raises(LockLost, match="state.json: not removed"):
            storage.delete(out / "state.json")
        lock.check()
    assert snapshot(str(out)) == taken  # its release leaves the taker's lock as it is


class Fence:
    """A folder's lock whose confirmation lapses while the first upload's parts are sent."""

    def __init__(self) -> None:
        self.confirmed = 0

    def confirm(self, path, action) -> None:
        self.confirmed += 1

    def fresh(self) -> bool:
        return self.confirmed > 1


@pytest.mark.parametrize(("mib", "sent"), [(10, 2), (1, 1)], ids=["in-parts", "one-put"])
def test_an_upload_in_parts_is_sent_again_when_the_lock_lapsed_before_its_last_step(
    s3, tmp_path, monkeypatch, mib, sent
):
    import s3fs.core
    from upath import UPath

    monkeypatch.setattr(s3fs.core, "calculate_chunksize", lambda size, chunksize=None: 5 << 20)
    body = os.urandom(mib << 20)
    local = tmp_path / "big"
    local.write_bytes(body)
    url = s3.url("out")
    fence = Fence()
    with storage.fenced(UPath(url), fence):
        storage.upload(local, UPath(url) / "big.bin")
    assert fence.confirmed == sent  # a single PUT is visible before any check after it
    assert store().cat_file(f"{url}/big.bin".removeprefix("s3://")) == body
    bucket, prefix = url.removeprefix("s3://").split("/", 1)
    uploads = store().call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix)
    assert uploads.get("Uploads", []) == []


def test_an_upload_whose_lock_never_stays_confirmed_fails_in_one_line(s3, tmp_path, monkeypatch):
    import s3fs.core
    from upath import UPath

    monkeypatch.setattr(s3fs.core, "calculate_chunksize", lambda size, chunksize=None: 5 << 20)
    monkeypatch.setattr(Fence, "fresh", lambda self: False)
    local = tmp_path / "big"
    local.write_bytes(os.urandom(10 << 20))
    url = s3.url("out")
    with pytest.raises(WriteError, match=r"big.bin: not written: the lock of its folder went"):
        with storage.fenced(UPath(url), Fence()):
            storage.upload(local, UPath(url) / "big.bin")
    assert not store().exists(f"{url}/big.bin".removeprefix("s3://"))
