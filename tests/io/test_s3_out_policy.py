"""What a run into an OUT on S3 (a local S3 server, tests/helpers/s3.py) may
refuse, remove and keep: as for a local OUT (stages/test_out_policy.py), and
the tests of both that hold them to the same lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from runs import copy_sample, tokenmill_here
from s3 import key, store

from tokenmill.io.storage import forget_listings

RUN = ("--vocab-size", "300", "--workers", "1")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return copy_sample(tmp_path_factory.mktemp("s3-out-policy") / "data", ["lines.txt"])


@pytest.fixture
def here(s3):
    """`tokenmill ARGS` in this process, seeing what the store holds now."""

    def invoke(*args, check: bool = True):
        forget_listings()
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


@pytest.fixture(params=["local", "s3"])
def out(request, tmp_path) -> str:
    """A new OUT, on local disk or on S3."""
    if request.param == "local":
        return str(tmp_path / "out")
    return request.getfixturevalue("s3").url("out")


def put(out: str, name: str, body: bytes) -> None:
    if out.startswith("s3://"):
        store().pipe_file(f"{key(out)}/{name}", body)
    else:
        (Path(out) / name).parent.mkdir(parents=True, exist_ok=True)
        (Path(out) / name).write_bytes(body)


def exists(out: str, name: str) -> bool:
    if out.startswith("s3://"):
        return store().exists(f"{key(out)}/{name}")
    return (Path(out) / name).exists()


def test_a_temporary_no_manifest_listed_is_named_when_removed(out, data, here):
    """Removed by its name alone (tokenmill writes none on S3; locally a killed
    run's, or yours so named): at OUT's top and in tokenmill's folders, never
    in a folder of yours."""
    here("run", data, out, *RUN)
    put(out, ".notes.tmp-1234", b"not tokenmill's\n")
    put(out, "tokens/.x.parquet.tmp-1-abcd", b"half\n")
    put(out, "mine/.draft.tmp-1", b"an editor's file\n")
    result = here("run", data, out, *RUN)
    named = [line for line in result.stderr.splitlines() if ".tmp-" in line]
    assert named == [
        f"removed 2 temporary files from {out} by their names alone (a killed run's, or yours "
        "named as tokenmill names its temporaries, .NAME.tmp-*): .notes.tmp-1234, "
        "tokens/.x.parquet.tmp-1-abcd"
    ]
    assert not exists(out, ".notes.tmp-1234") and not exists(out, "tokens/.x.parquet.tmp-1-abcd")
    assert exists(out, "mine/.draft.tmp-1")


def test_a_file_of_yours_at_outs_top_is_named_as_kept(out, data, here):
    """As one in tokenmill's folders: verify lists both as extra."""
    here("run", data, out, *RUN)
    put(out, "notes.txt", b"mine\n")
    put(out, "tokens/README.txt", b"mine too\n")
    result = here("run", data, out, *RUN)
    kept = [line for line in result.stderr.splitlines() if line.startswith("kept ")]
    assert kept == [
        f"kept 2 files in {out} that tokenmill did not write (verify lists them as extra): "
        "notes.txt, tokens/README.txt"
    ]
    assert exists(out, "notes.txt") and exists(out, "tokens/README.txt")


def manifest_of(out: str) -> bytes | None:
    if out.startswith("s3://"):
        name = f"{key(out)}/manifest.json"
        return store().cat_file(name) if store().exists(name) else None
    path = Path(out) / "manifest.json"
    return path.read_bytes() if path.exists() else None


def test_a_failed_rerun_keeps_the_manifest_until_an_output_changed(out, here, tmp_path):
    """The manifest of the run before is put back when the rerun fails with
    every output as it was (on a store, as told by one listing of OUT); once
    an output was written, it is not."""
    data = copy_sample(tmp_path / "data", ["lines.txt"])
    here("run", data, out, *RUN)
    before = manifest_of(out)
    (data / "z.jsonl").write_text("not json\n")
    assert here("run", data, out, *RUN, check=False).returncode == 1
    assert manifest_of(out) == before
    (data / "b.txt").write_text("a new input, counted before z.jsonl fails\n")
    assert here("run", data, out, *RUN, check=False).returncode == 1
    assert manifest_of(out) is None
