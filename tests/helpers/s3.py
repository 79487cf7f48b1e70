"""A local S3-compatible server for the tests: moto's standalone server on
127.0.0.1 (a free port), as s3fs's own test suite runs it. The endpoint and
dummy credentials go where every S3 client looks (AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID...), so subprocesses and Ray workers started by a test
reach the same server; nothing leaves the machine."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

BUCKET = "tokenmill-test"


def store():
    """A client that sees what other processes wrote (no listing cache)."""
    import s3fs

    return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)


def take_over(here, *args):
    """`tokenmill ARGS` by `here` (in this process: a CliRunner result), once a
    stalled holder's lock on the store is stale: until then it is refused at
    once, naming the holder."""
    import time

    from runs import HANG_GUARD_S

    deadline = time.monotonic() + HANG_GUARD_S
    while True:
        result = here(*args, ok=False)
        if result.exit_code == 0:
            return result
        assert "in use by another tokenmill run" in result.output, result.output
        assert time.monotonic() < deadline, "the stalled run's lock never went stale"
        time.sleep(0.2)


def key(url: str) -> str:
    """An s3:// URL as the client's path: bucket/key."""
    return url.removeprefix("s3://")


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str

    def url(self, *parts: str) -> str:
        """A new, empty prefix in the bucket (unique per call), or under it `parts`."""
        return "/".join([f"s3://{self.bucket}/{uuid.uuid4().hex[:12]}", *parts])

    @property
    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }


@contextmanager
def s3_server() -> Iterator[S3Server]:
    """Start the server, point this process's environment at it, create the
    bucket; on exit stop the server and put the environment back."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    s3 = S3Server(f"http://{host}:{port}", BUCKET)
    saved = {k: os.environ.get(k) for k in s3.env}
    os.environ.update(s3.env)
    try:
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()
        s3fs.S3FileSystem().mkdir(BUCKET)
        yield s3
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
