"""A store that fails while an input is read is never a skip: a run on S3
DATA (the local server of tests/helpers/s3.py, behind a proxy here that
answers 500 to chosen GETs) fails on one line naming the object, whatever
--on-error says, and a rerun then gives the outputs of a clean run. A
0-document skip would drop the object's documents from the outputs though
nothing is wrong with it."""

from __future__ import annotations

import gzip
import http.client
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import make_documents
from runs import HANG_GUARD_S, manifest, output_files, tokenmill

from tokenmill.io.storage import delete, walk_files

RUN = ("--vocab-size", "300", "--workers", "1")
# The store client's own retries, kept few: each waits a backoff.
RETRIES = {"AWS_MAX_ATTEMPTS": "2"}
DOCUMENTS = 60


class FaultyStore(ThreadingHTTPServer):
    """An HTTP proxy on 127.0.0.1 to the S3 endpoint `upstream` that answers
    500 to every GET of a key ending in `failing`, once `healthy_gets` GETs of
    it have passed. Counts the GETs of each key. From the first request for a
    key ending in `stalling` on (or at once, "" for every key), it answers no
    request at all (with `only_its_gets`, only the GETs of that key): a store
    that accepts connections and never replies. Counts the requests left
    unanswered, by method and key."""

    daemon_threads = True

    def __init__(self, upstream: str):
        super().__init__(("127.0.0.1", 0), _Forward)
        self.upstream = urlsplit(upstream).netloc
        self.failing: str | None = None
        self.healthy_gets = 0
        self.gets: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.stalling: str | None = None
        self.stalled = threading.Event()  # set at the first request left unanswered
        self.only_its_gets = False
        self.unanswered: Counter[tuple[str, str]] = Counter()
        self.closing = threading.Event()

    @property
    def endpoint(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FaultyStore

    def log_message(self, *args) -> None:
        pass

    def forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = unquote(urlsplit(self.path).path)
        stalling = self.server.stalling
        stalls = stalling is not None and key.endswith(stalling)
        if self.server.only_its_gets:
            stalls = stalls and self.command == "GET"
        elif self.server.stalled.is_set():
            stalls = True
        if stalls:
            self.server.stalled.set()
            with self.server.lock:
                self.server.unanswered[self.command, key] += 1
            self.server.closing.wait()
            return
        if self.command == "GET":
            with self.server.lock:
                self.server.gets[key] += 1
                failing = self.server.failing
                fail = failing is not None and key.endswith(failing)
                fail = fail and self.server.gets[key] > self.server.healthy_gets
            if fail:
                error = b"<Error><Code>InternalError</Code><Message>injected</Message></Error>"
                self.send_response(500)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(error)))
                self.end_headers()
                self.wfile.write(error)
                return
        upstream = http.client.HTTPConnection(self.server.upstream, timeout=60)
        upstream.request(self.command, self.path, body=body or None, headers=dict(self.headers))
        response = upstream.getresponse()
        payload = response.read()
        self.send_response(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(name, value)
        # A HEAD's size is the object's, which its empty body is not.
        size = response.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", size or str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        upstream.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = forward


@pytest.fixture
def store(s3):
    proxy = FaultyStore(s3.endpoint)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    yield proxy
    proxy.closing.set()
    proxy.shutdown()
    proxy.server_close()


def jsonl(docs: list[str]) -> bytes:
    return gzip.compress("".join(json.dumps({"text": d}) + "\n" for d in docs).encode(), mtime=0)


@pytest.fixture
def data(s3, tmp_path) -> str:
    import s3fs

    docs = make_documents(3 * DOCUMENTS, seed=3)
    url = s3.url("data")
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    for k, name in enumerate(("a.jsonl.gz", "b.jsonl.gz", "c.parquet")):
        part = docs[k * DOCUMENTS : (k + 1) * DOCUMENTS]
        fs.pipe_file(f"{url}/{name}", parquet(part) if name.endswith(".parquet") else jsonl(part))
    return url


def parquet(docs: list[str]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({"text": docs}), buf, row_group_size=DOCUMENTS // 3)
    return buf.getvalue()


def run(store: FaultyStore, data: str, out: Path, *options: str):
    env = {"AWS_ENDPOINT_URL": store.endpoint, **RETRIES}
    return tokenmill("run", data, out, *RUN, *options, env=env, check=False)


def comparable(m: dict) -> dict:
    return {k: v for k, v in m.items() if k not in ("seconds", "stages")}


# (input, --on-error, the stage whose reads fail): count's after its first
# GET (Parquet: the hash, then the footer and row groups), or encode's, after
# count has read and hashed the object whole.
FAULTS = [
    ("b.jsonl.gz", "fail", "encode"),
    ("b.jsonl.gz", "skip", "encode"),
    ("c.parquet", "skip", "encode"),
    ("c.parquet", "skip", "count"),
]


@pytest.mark.parametrize(("name", "policy", "stage"), FAULTS)
def test_a_store_failing_after_the_hash_fails_the_run_and_a_rerun_completes(
    store, data, tmp_path, name, policy, stage
):
    clean = tmp_path / "clean"
    assert run(store, data, clean).returncode == 0
    (key,) = [k for k in store.gets if k.endswith(f"/{name}")]
    # A clean run reads each object in count, then again in encode.
    healthy = 1 if stage == "count" else store.gets[key] // 2
    store.failing, store.healthy_gets = f"/{name}", healthy

    store.gets.clear()
    out = tmp_path / "out"
    failed = run(store, data, out, "--on-error", policy)
    assert store.gets[key] > store.healthy_gets  # refused at least once
    assert failed.returncode != 0, failed.stderr
    assert "Traceback" not in failed.stderr
    (line,) = failed.stderr.strip().splitlines()[-1:]
    assert line.startswith(f"Error: {data}/{name}: cannot read"), failed.stderr
    assert "skipped" not in failed.stderr

    store.failing = None
    again = run(store, data, out, "--on-error", policy)
    assert again.returncode == 0, again.stderr
    assert output_files(out) == output_files(clean)
    assert manifest(out)["documents"] == 3 * DOCUMENTS
    assert comparable(manifest(out)) == {
        **comparable(manifest(clean)),
        "config": manifest(out)["config"],
    }


def unreachable(*args, **kwargs):
    import botocore.exceptions

    raise botocore.exceptions.EndpointConnectionError(endpoint_url="http://store.invalid")


@pytest.mark.parametrize(
    ("method", "act", "verb"),
    [
        ("find", lambda p: list(walk_files(p.parent)), "list"),
        ("rm_file", delete, "remove"),
    ],
)
def test_a_store_failing_to_list_or_remove_names_the_object(monkeypatch, method, act, verb):
    from fsspec.implementations.memory import MemoryFileSystem

    from tokenmill.errors import StoreError
    from tokenmill.io.storage import location

    path = location("memory://store-faults/out/a.parquet")
    monkeypatch.setattr(MemoryFileSystem, method, unreachable)
    where = path.parent if verb == "list" else path
    with pytest.raises(StoreError, match=rf"^{re.escape(str(where))}: cannot {verb} \(Could not"):
        act(path)


def test_a_store_that_stops_answering_fails_the_run_in_one_line(store, data, tmp_path):
    """Each call waits TOKENMILL_STORE_TIMEOUT_S for a reply, each retry is
    said as it happens, and the run ends on one line naming the object: before,
    it waited without a word for botocore's 60 s per read times 25 tries."""
    store.stalling = ""
    env = {
        "AWS_ENDPOINT_URL": store.endpoint,
        "AWS_MAX_ATTEMPTS": "1",
        "TOKENMILL_STORE_TIMEOUT_S": "0.5",
    }
    failed = subprocess.run(
        [sys.executable, "-m", "tokenmill", "run", data, tmp_path / "out", *RUN],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=HANG_GUARD_S,
    )
    assert failed.returncode == 1, failed.stderr
    *notes, line = failed.stderr.strip().splitlines()
    assert line.startswith(f"Error: {data}: Read timeout on endpoint URL"), failed.stderr
    assert notes and all(n.startswith("note: the store: Read timeout") for n in notes)
    assert all(n.endswith("; trying again") for n in notes)


@pytest.mark.parametrize("executor", ["threads", "processes"])
def test_a_read_the_store_stops_answering_is_tried_a_bounded_number_of_times(
    store, data, tmp_path, executor
):
    """A read nests s3fs's tries of a call in its tries of the read, over
    botocore's: at s3fs's five, 25 waits of TOKENMILL_STORE_TIMEOUT_S each
    (75 at botocore's default three), half an hour at the defaults. Now two
    of each: four requests with one botocore try, then one line naming the
    object, in a worker process too (whose filesystem is its own)."""
    store.stalling, store.only_its_gets = "/b.jsonl.gz", True
    env = {
        "AWS_ENDPOINT_URL": store.endpoint,
        "AWS_MAX_ATTEMPTS": "1",
        "TOKENMILL_STORE_TIMEOUT_S": "0.2",
    }
    out = tmp_path / "out"
    args = ("--vocab-size", "300", "--workers", "2", "--executor", executor)
    failed = tokenmill("run", data, out, *args, env=env, check=False)
    assert failed.returncode == 1, failed.stderr
    line = failed.stderr.strip().splitlines()[-1]
    assert line.startswith(f"Error: {data}/b.jsonl.gz: cannot read (Read timeout on"), line
    assert "Traceback" not in failed.stderr
    key = f"{data.removeprefix('s3:/')}/b.jsonl.gz"
    assert store.unanswered == {("GET", key): 4}, store.unanswered


@pytest.mark.parametrize("executor", ["threads", "processes"])
def test_ctrl_c_stops_a_run_waiting_on_a_store_that_stopped_answering(
    store, data, tmp_path, executor
):
    """Ctrl-C while shards are read from a store that stopped answering (and
    will not take the lock's release either): the run ends at once with the
    one line and status of an interrupt. Before, it waited on the threads'
    reads, then on the release, each for as long as the store's timeouts."""
    store.stalling = "/b.jsonl.gz"
    env = {"AWS_ENDPOINT_URL": store.endpoint, "TOKENMILL_STORE_TIMEOUT_S": "3600"}
    out = data.rsplit("/", 1)[0] + "/out"
    args = ["run", data, out, "--vocab-size", "300", "--workers", "2", "--executor", executor]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenmill", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    try:
        assert store.stalled.wait(HANG_GUARD_S)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "interrupted", stderr
    # Nothing after it: the store calls dropped at exit ("Task was destroyed
    # but it is pending!", their coroutines' "Exception ignored") say nothing.
    assert "Traceback" not in stderr and "Task was destroyed" not in stderr, stderr


@pytest.mark.parametrize("value", ["abc", "0", "-1", "nan", "inf"])
def test_a_bad_store_timeout_is_one_line_naming_the_variable(monkeypatch, tmp_path, value):
    from runs import tokenmill_here

    monkeypatch.setenv("TOKENMILL_STORE_TIMEOUT_S", value)
    result = tokenmill_here("run", "s3://bucket/data", tmp_path / "out", check=False)
    assert result.returncode == 2  # a value refused, as a bad option's
    assert result.stderr.strip() == (
        f"Error: TOKENMILL_STORE_TIMEOUT_S={value}: not a number of seconds above 0"
    )
