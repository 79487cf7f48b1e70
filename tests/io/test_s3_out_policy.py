"""What a run into an OUT on S3 (a local S3 server, tests/helpers/s3.py) may
refuse, remove and keep: as for a local OUT (stages/test_out_policy.py)."""

from __future__ import annotations

import pytest
from runs import copy_sample, tokenmill_here

RUN = ("--vocab-size", "300", "--workers", "1")


def store():
    """A client that sees what other processes wrote (no listing cache)."""
    import s3fs

    return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)


def key(url: str) -> str:
    return url.removeprefix("s3://")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return copy_sample(tmp_path_factory.mktemp("s3-out-policy") / "data", ["lines.txt"])


@pytest.fixture
def here(s3):
    """`tokenmill ARGS` in this process, seeing what the store holds now."""

    def invoke(*args, check: bool = True):
        from upath import UPath

        UPath(f"s3://{s3.bucket}").fs.invalidate_cache()
        return tokenmill_here(*args, check=check)

    return invoke


@pytest.mark.parametrize("force", [(), ("--force",)], ids=["plain", "force"])
def test_an_object_named_as_out_is_refused(s3, data, here, force):
    """An object at OUT's own key, beside a prefix of outputs: the listing of the
    prefix must not make it pass for a folder."""
    url = s3.url("out")
    here("run", data, url, *RUN)
    store().pipe_file(key(url), b"a file, not a folder\n")
    result = here("run", data, url, *RUN, *force, check=False)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"Error: {url}: exists and is not a folder"]
    assert store().cat_file(key(url)) == b"a file, not a folder\n"
