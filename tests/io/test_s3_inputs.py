"""Remote inputs (issue 17): DATA as a URL on the local S3 server of tests/helpers/s3.py.

`tokenmill run s3://.../data OUT` finds the same inputs as a local run on the
same files (the same not_read entries, names and order), reads every format
from the object store, and writes byte-identical outputs, with threads or
worker processes; a rerun keeps them; a corrupt object fails or is skipped as
a local file is; a store that says no is one line. Reading a 512 MB Parquet
object keeps peak memory within the bound of reading the same file locally.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import subprocess
import sys
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import make_documents
from runs import manifest, output_files, tokenmill

from tokenmill.errors import TokenmillError
from tokenmill.io.inputs import check_overlap, find_inputs
from tokenmill.io.readers import read_batches, skipped_file_documents
from tokenmill.io.storage import is_remote, location, remote_errors

RUN = ("--vocab-size", "300", "--workers", "2")
# What a manifest holds that depends on where DATA is or on timing, not on the outputs.
UNCOMPARED = ("data", "seconds", "stages")

datasets.disable_progress_bars()


def one_line(docs: list[str]) -> list[str]:
    return [" ".join(d.split()) for d in docs]


def write_corpus(data: Path) -> Path:
    """One shard in each input format and compression, a datasets folder, and
    files that are not inputs (hidden, unknown suffix)."""
    docs = make_documents(420, seed=17)
    data.mkdir(parents=True)
    table = pa.table({"text": docs[:60], "source": ["web"] * 60})
    pq.write_table(table, data / "a.parquet", row_group_size=16)
    jsonl = "".join(json.dumps({"text": d}) + "\n" for d in docs[60:100]).encode()
    (data / "b.jsonl.gz").write_bytes(gzip.compress(jsonl, mtime=0))
    lines = "".join(json.dumps({"text": d}) + "\n" for d in docs[100:140]).encode()
    with pa.output_stream(str(data / "c.json.zst"), compression="zstd") as f:
        f.write(lines)
    (data / "sub").mkdir()
    (data / "sub" / "d.txt").write_text("".join(d + "\n" for d in one_line(docs[140:180])))
    text = "".join(d + "\n" for d in one_line(docs[180:220])).encode()
    (data / "sub" / "e.txt.bz2").write_bytes(bz2.compress(text))
    (data / "sub" / "f.jsonl.xz").write_bytes(
        lzma.compress("".join(json.dumps({"text": d}) + "\n" for d in docs[220:260]).encode())
    )
    arrow = pa.table({"text": docs[260:300]})
    with pa.OSFile(str(data / "g.arrow"), "wb") as f, pa.ipc.new_file(f, arrow.schema) as w:
        for b in arrow.to_batches(max_chunksize=7):
            w.write_batch(b)
    with pa.OSFile(str(data / "h.feather"), "wb") as f, pa.ipc.new_stream(f, arrow.schema) as w:
        w.write_table(pa.table({"text": docs[300:340]}))
    datasets.Dataset.from_dict({"text": docs[340:420]}).save_to_disk(data / "saved", num_shards=3)
    (data / ".hidden.txt").write_text("never read\n")
    (data / ".cache").mkdir()
    (data / ".cache" / "x.txt").write_text("never read\n")
    (data / ".cache" / "y.txt").write_text("never read\n")
    (data / "notes.md").write_text("not an input\n")
    (data / "sub" / "sub.txt.parquet.md").write_text("not an input\n")
    return data


def fs():
    import s3fs

    return s3fs.S3FileSystem()


def upload(folder: Path, url: str) -> str:
    """Every file under `folder` as an object under the prefix `url`."""
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            fs().put_file(str(p), f"{url}/{p.relative_to(folder).as_posix()}")
    return url


def comparable(m: dict) -> dict:
    kept = {k: v for k, v in m.items() if k not in UNCOMPARED}
    kept["config"] = {k: v for k, v in m["config"].items() if k != "executor"}
    return kept


@pytest.fixture(scope="module")
def corpus(s3, tmp_path_factory) -> tuple[Path, str, Path]:
    """(the corpus folder, the same files on S3, a local run's output folder)."""
    root = tmp_path_factory.mktemp("s3-inputs")
    data = write_corpus(root / "data")
    url = upload(data, s3.url("data"))
    out = root / "local-out"
    tokenmill("run", data, out, *RUN)
    return data, url, out


@pytest.mark.parametrize("executor", ["threads", "processes"])
def test_s3_data_gives_the_outputs_of_a_local_run(corpus, tmp_path, executor):
    data, url, local_out = corpus
    out = tmp_path / "out"
    result = tokenmill("run", url, out, *RUN, "--executor", executor)
    assert "Traceback" not in result.stderr
    assert output_files(out) == output_files(local_out)
    m, local = manifest(out), manifest(local_out)
    assert m["data"] == url
    assert comparable(m) == comparable(local)
    names = [i["path"] for i in m["inputs"]]
    assert names[:2] == ["a.parquet", "b.jsonl.gz"]
    # The datasets folder's files come in its state.json's order, as locally.
    assert [n for n in names if n.startswith("saved/")] == [
        f"saved/data-0000{i}-of-00003.arrow" for i in range(3)
    ]
    assert m["documents"] == 420


def test_a_rerun_keeps_every_output(corpus, tmp_path):
    _, url, local_out = corpus
    out = tmp_path / "out"
    tokenmill("run", url, out, *RUN)
    first = output_files(out)
    tokenmill("run", url, out, *RUN)
    m = manifest(out)
    shards = [i["path"] for i in m["inputs"]]
    for stage in ("count", "encode"):
        assert m["stages"][stage]["reused_shards"] == shards, stage
    assert m["stages"]["merge"]["reused"] and m["stages"]["train"]["reused"]
    assert output_files(out) == first == output_files(local_out)


def test_stats_reads_the_inputs_from_s3(corpus, tmp_path):
    _, url, local_out = corpus
    out = tmp_path / "out"
    tokenmill("run", url, out, *RUN)
    remote = json.loads(tokenmill("stats", out, "--json").stdout)
    local = json.loads(tokenmill("stats", local_out, "--json").stdout)
    remote.pop("seconds")
    local.pop("seconds")
    assert remote == local


def test_verify_rehashes_the_input_objects(corpus, s3, tmp_path):
    data, _, _ = corpus
    url = upload(data, s3.url("data"))
    out = tmp_path / "out"
    tokenmill("run", url, out, *RUN)
    assert tokenmill("verify", out, check=False).returncode == 0
    fs().pipe(f"{url}/sub/d.txt", b"changed\n")
    result = tokenmill("verify", out, check=False)
    assert result.returncode == 3, result.stderr
    assert "sub/d.txt" in result.stdout + result.stderr


def test_count_and_encode_commands_read_s3(corpus, tmp_path):
    _, url, local_out = corpus
    tokenmill("count", url, tmp_path / "counts")
    for p in (local_out / "counts").rglob("*.parquet"):
        mine = tmp_path / "counts" / p.relative_to(local_out / "counts")
        assert mine.read_bytes() == p.read_bytes(), p
    tokenmill("encode", url, tmp_path / "tokens", "--tokenizer", local_out / "tokenizer.json")
    for p in (local_out / "tokens").rglob("*.parquet"):
        mine = tmp_path / "tokens" / p.relative_to(local_out / "tokens")
        assert mine.read_bytes() == p.read_bytes(), p
    # The tokenizer an object too (a traceback: its early read took local paths only).
    remote_tok = f"{url.rsplit('/', 1)[0]}/tokenizer.json"
    fs().put_file(str(local_out / "tokenizer.json"), remote_tok)
    tokenmill("encode", url, tmp_path / "tokens2", "--tokenizer", remote_tok)
    for p in (local_out / "tokens").rglob("*.parquet"):
        mine = tmp_path / "tokens2" / p.relative_to(local_out / "tokens")
        assert mine.read_bytes() == p.read_bytes(), p


def test_not_read_is_listed_on_s3_as_locally(corpus, s3):
    data, pristine, _ = corpus
    url = upload(data, s3.url("data"))
    # A console's folder marker, and outputs of a run whose OUT is inside DATA.
    fs().pipe(f"{url}/empty/", b"")
    fs().pipe(f"{url}/out/tokens/a.parquet", b"not read")
    (data / "out").mkdir()
    try:
        local = find_inputs(data, exclude=(data / "out",))
        # An OUT on S3 is never inside a local DATA, and a local one never inside S3.
        assert find_inputs(data, exclude=(location(f"{url}/out"),)).not_read != local.not_read
    finally:
        (data / "out").rmdir()
    remote = find_inputs(location(url), exclude=(location(f"{url}/out"),))
    assert is_remote(remote.shards[0].path)
    assert [s.name for s in remote.shards] == [s.name for s in local.shards]
    assert remote.not_read == local.not_read
    assert {"path": "out/", "reason": "the output folder"} in remote.not_read
    assert {"path": ".cache/", "reason": "hidden"} in remote.not_read
    assert {"path": ".hidden.txt", "reason": "hidden"} in remote.not_read
    assert {"path": "notes.md", "reason": "unknown suffix"} in remote.not_read
    assert {"path": "saved/state.json", "reason": "datasets metadata"} in remote.not_read
    for glob in ("sub/*", "**/*.arrow", "*.parquet"):
        remote, local = find_inputs(location(pristine), glob), find_inputs(data, glob)
        assert [s.name for s in remote.shards] == [s.name for s in local.shards], glob
        assert remote.not_read == local.not_read, glob


def test_every_format_reads_the_same_from_s3(corpus):
    data, url, _ = corpus
    for shard in find_inputs(data).shards:
        remote = location(f"{url}/{shard.name}")
        got = [(r.to_pylist(), d.to_pylist()) for r, d in read_batches(remote, batch_rows=9)]
        want = [(r.to_pylist(), d.to_pylist()) for r, d in read_batches(shard.path, batch_rows=9)]
        assert got == want, shard.name


def test_any_fsspec_filesystem_is_read_the_same(corpus):
    """Nothing is S3-specific: fsspec's in-memory filesystem serves as DATA too."""
    import uuid

    import fsspec

    data, _, _ = corpus
    url = f"memory://tokenmill-{uuid.uuid4().hex[:8]}/data"
    memory = fsspec.filesystem("memory")
    for p in sorted(data.rglob("*")):
        if p.is_file():
            memory.pipe(f"{url}/{p.relative_to(data).as_posix()}", p.read_bytes())
    remote, local = find_inputs(location(url)), find_inputs(data)
    assert [s.name for s in remote.shards] == [s.name for s in local.shards]
    assert remote.not_read == local.not_read
    for r, s in zip(remote.shards, local.shards, strict=True):
        got = [d.to_pylist() for _, d in read_batches(r.path)]
        assert got == [d.to_pylist() for _, d in read_batches(s.path)], s.name


def test_one_object_as_data(corpus):
    _, url, _ = corpus
    inputs = find_inputs(location(f"{url}/sub/e.txt.bz2"))
    assert [s.name for s in inputs.shards] == ["e.txt.bz2"]
    with pytest.raises(TokenmillError, match=r"notes\.md: not a known input format"):
        find_inputs(location(f"{url}/notes.md"))


def test_overlap_of_urls():
    check_overlap(location("s3://b/x/data"), location("s3://b/x/data2"))
    check_overlap(location("s3://b/x/data"), location("s3://b/x/data/out"))
    check_overlap(location("s3://b/x/data"), location("s3://other/x"))
    check_overlap(location("s3://b/x"), Path("/b/x"))
    check_overlap(Path("/b/x/data"), location("s3://b/x"))
    with pytest.raises(TokenmillError, match=r"DATA is inside OUT s3://b/x;"):
        check_overlap(location("s3://b/x/data"), location("s3://b/x"))
    with pytest.raises(TokenmillError, match=r"DATA is OUT s3://b/x;"):
        check_overlap(location("s3://b/x/"), location("s3://b/x"))


def bad_corpus(data: Path) -> Path:
    docs = make_documents(90, seed=5)
    data.mkdir()
    pq.write_table(pa.table({"text": docs[:30]}), data / "a.parquet", row_group_size=10)
    jsonl = gzip.compress("".join(json.dumps({"text": d}) + "\n" for d in docs[30:]).encode())
    (data / "b.jsonl.gz").write_bytes(jsonl[: len(jsonl) * 2 // 3])  # truncated
    good = data / "c.parquet"
    pq.write_table(pa.table({"text": docs[30:60]}), good, row_group_size=10)
    raw = bytearray(good.read_bytes())
    raw[200:400] = bytes(200)  # a corrupt column chunk; the footer still reads
    good.write_bytes(bytes(raw))
    return data


@pytest.mark.parametrize("policy", ["fail", "skip"])
def test_a_corrupt_object_fails_or_is_skipped_as_a_local_file(s3, tmp_path, policy):
    data = bad_corpus(tmp_path / "data")
    url = upload(data, s3.url("data"))
    args = (*RUN, "--on-error", policy)
    local = tokenmill("run", data, tmp_path / "local", *args, check=False)
    remote = tokenmill("run", url, tmp_path / "remote", *args, check=False)
    assert remote.returncode == local.returncode
    if policy == "fail":
        assert remote.returncode != 0
        assert "Traceback" not in remote.stderr
        (line,) = remote.stderr.strip().splitlines()
        assert f"{url}/b.jsonl.gz: cannot read" in line or f"{url}/c.parquet" in line, line
        assert line == local.stderr.strip().replace(str(data), url)
        return
    assert remote.returncode == 0, remote.stderr
    assert output_files(tmp_path / "remote") == output_files(tmp_path / "local")
    m, want = manifest(tmp_path / "remote"), manifest(tmp_path / "local")
    assert [s["shard"] for s in m["skipped"]] == ["b.jsonl.gz", "c.parquet"]
    for got, expected in zip(m["skipped"], want["skipped"], strict=True):
        assert got == {**expected, "reason": expected["reason"].replace(str(data), url)}
    assert comparable(m) == {**comparable(want), "skipped": m["skipped"]}
    # The footer of a corrupt Parquet object gives its rows exactly.
    assert skipped_file_documents(location(f"{url}/c.parquet"), 0) == {"documents": 30}


def test_a_store_that_says_no_is_one_line(s3, tmp_path):
    missing_bucket = "s3://tokenmill-no-such-bucket/data"
    missing_prefix = s3.url("data")
    for url, env in [
        (missing_bucket, {}),
        (missing_prefix, {}),
        # An endpoint that refuses (one attempt, so the test does not wait on retries).
        (missing_bucket, {"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_MAX_ATTEMPTS": "1"}),
    ]:
        result = tokenmill("run", url, tmp_path / "out", *RUN, env=env, check=False)
        assert result.returncode != 0
        assert "Traceback" not in result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert url in line, line
    with pytest.raises(TokenmillError, match=r"no-such-bucket/data: no such file or directory"):
        find_inputs(location(missing_bucket))


def test_a_url_without_a_bucket_is_one_line(s3, tmp_path):
    missing = tokenmill("run", tmp_path / "missing", tmp_path / "out", *RUN, check=False)
    for url, args in [
        ("s3://", ("run", "s3://", tmp_path / "out")),
        ("s3://", ("run", tmp_path, "s3://")),
        ("s3:///", ("count", "s3:///", tmp_path / "counts")),
        ("s3://", ("verify", "s3://")),
    ]:
        result = tokenmill(*args, check=False)
        assert result.returncode == missing.returncode, result.stderr
        assert result.stderr.strip().splitlines() == [f"Error: {url}: names no bucket"]


def test_a_key_with_an_empty_part_is_named(s3, tmp_path):
    """S3 allows `x//a.txt`; a path names another key (`x/a.txt`), so the run
    said the input was "removed during the run; rerun", which never helps."""
    import boto3

    client = boto3.client("s3")
    for key in ("x//a.txt", "/lead.txt"):  # a path holds no empty part
        url = s3.url()
        bucket, prefix = url.removeprefix("s3://").split("/", 1)
        client.put_object(Bucket=bucket, Key=f"{prefix}/ok.txt", Body=b"fine\n")
        client.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=b"text\n")
        result = tokenmill("run", url, tmp_path / "out", *RUN, check=False)
        assert result.returncode == 1
        assert result.stderr.strip().splitlines() == [
            f"Error: {url}/{key}: a key with an empty, '.' or '..' part, which tokenmill "
            "cannot read by its name; copy it to a key without one"
        ]


def test_store_errors_become_one_line():
    import botocore.exceptions

    where = location("s3://b/data")
    with pytest.raises(TokenmillError, match=r"^s3://b/data: permission denied \(Access Denied\)$"):
        with remote_errors(where):
            raise PermissionError("Access Denied")
    with pytest.raises(TokenmillError, match=r"^s3://b/data: Unable to locate credentials$"):
        with remote_errors(where):
            raise botocore.exceptions.NoCredentialsError()
    with pytest.raises(KeyError):  # a bug of ours stays a bug, with its traceback
        with remote_errors(where):
            raise KeyError("x")


def test_a_store_failing_mid_read_is_never_skipped(corpus, tmp_path, monkeypatch):
    """--on-error skip skips bad inputs, not inputs the store failed to give:
    those would be lost from the outputs without the input being at fault."""
    import botocore.exceptions

    from tokenmill.config import Config
    from tokenmill.errors import StoreError
    from tokenmill.io import readers
    from tokenmill.stages.count import run_count

    _, url, _ = corpus

    def unreachable(path, cache="readahead"):
        raise botocore.exceptions.EndpointConnectionError(endpoint_url=str(path))

    monkeypatch.setattr(readers, "open_read", unreachable)
    inputs = find_inputs(location(url), glob="*.gz")
    for policy in ("fail", "skip"):
        config = Config(workers=1, on_error=policy)
        with pytest.raises(StoreError, match=r"b\.jsonl\.gz: cannot read \(Could not connect"):
            run_count(inputs, tmp_path / policy, config)


# --- memory -------------------------------------------------------------------

GROUP_BYTES = 8 << 20
GROUPS = 32  # 256 MiB of text in all, in row groups small beside it
DOC_BYTES = 1024

# Read every document of a shard and print the peak resident memory (MiB)
# before and after. Both runs import the same modules, so only reading differs.
READ_ALL = """
import sys
import s3fs, upath
from tokenmill.io.readers import read_batches
from tokenmill.io.storage import location

def peak_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024

before = peak_mib()
documents = sum(len(docs) for _, docs in read_batches(location(sys.argv[1])))
print(documents, before, peak_mib())
"""


def big_parquet(path: Path, groups: int = GROUPS) -> Path:
    """`groups` row groups of GROUP_BYTES of text, uncompressed (one table
    written again and again: cheap to make, as costly to read)."""
    import numpy as np

    rng = np.random.default_rng(0)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz     ", np.uint8)
    text = letters[rng.integers(0, len(letters), GROUP_BYTES, dtype=np.uint8)]
    rows = GROUP_BYTES // DOC_BYTES
    offsets = np.arange(0, GROUP_BYTES + 1, DOC_BYTES, dtype=np.int64)
    docs = pa.LargeStringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(text))
    table = pa.table({"text": docs})
    with pq.ParquetWriter(path, table.schema, compression="none", use_dictionary=False) as w:
        for _ in range(groups):
            w.write_table(table)
    return path


def read_peak(source: str) -> tuple[int, int, int]:
    result = subprocess.run(
        [sys.executable, "-c", READ_ALL, source], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    documents, before, peak = map(int, result.stdout.split())
    return documents, before, peak


def test_reading_a_big_parquet_object_needs_no_more_memory_than_a_local_file(s3, tmp_path):
    """And no more for a bigger object: it is streamed. (The local S3 server
    reads the whole object for each ranged GET: sizes are kept small.)"""
    peaks = {}
    for groups in (GROUPS // 2, GROUPS):
        path = big_parquet(tmp_path / "big.parquet", groups)
        url = s3.url("big.parquet")
        try:
            fs().put_file(str(path), url)
            if groups == GROUPS:
                peaks["local"] = read_peak(str(path))
            peaks[groups] = read_peak(url)
        finally:
            # Memory back for the session's server (which holds objects in this
            # process) and on disk.
            fs().rm(url)
            path.unlink()
    size_mib = (GROUPS * GROUP_BYTES) >> 20
    local, remote, half = peaks["local"], peaks[GROUPS], peaks[GROUPS // 2]
    # Shown with -s: the numbers the README quotes.
    print(f"peak RSS MiB (before reading, after): local {local[1:]}, S3 {remote[1:]}, "
          f"S3 of half the size {half[1:]}")  # fmt: skip
    assert local[0] == remote[0] == GROUPS * (GROUP_BYTES // DOC_BYTES) == 2 * half[0]
    assert remote[2] <= 1.3 * local[2] + 64
    # Streaming: twice the object grows the peak by less than a row group, and
    # reading locally by a small part of it over what its modules hold.
    grown, grown_half = remote[2] - remote[1], half[2] - half[1]
    assert grown <= grown_half + (GROUP_BYTES >> 20), (grown, grown_half)
    assert local[2] - local[1] < size_mib / 3
