"""Nothing lost, nothing wrong, nothing unexplained: the folder layouts and
faults of issue 14, each of which lost, mixed up or silently dropped data
before. Every document in is a document out or an accounted skip; every file
under DATA is read or listed with its reason; OUT holds exactly what its
manifest lists; every failure is one line."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import write_shard
from runs import manifest, output_files, temporaries, tokenmill_here
from tmpfs import Tmpfs, root_only

from tokenmill.io.lock import LOCK

RUN = ("--vocab-size", "300", "--workers", "1")


def token_files(out: Path) -> list[str]:
    return sorted(
        p.relative_to(out / "tokens").as_posix() for p in (out / "tokens").rglob("*.parquet")
    )


def documents_out(out: Path) -> int:
    return sum(pq.read_metadata(out / "tokens" / n).num_rows for n in token_files(out))


def one_line_error(result: subprocess.CompletedProcess, *needles: str, status: int = 1) -> str:
    """The run failed with exit status `status` (2: a usage error) and one line
    of error, its last line (after the summaries of the stages that finished,
    if any)."""
    assert result.returncode == status, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("Error:")]
    assert errors == lines[-1:] and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


# 1. Output names never collide.


def test_inputs_that_flatten_to_one_name_each_get_their_own_outputs(tmp_path):
    data = tmp_path / "d"
    write_shard(data / "a" / "b.txt", ["x from a/b"])
    write_shard(data / "a__b.txt", ["y from a__b"])
    out = tmp_path / "o"
    result = tokenmill_here("run", data, out, *RUN)
    assert token_files(out) == ["a/b.txt.parquet", "a__b.txt.parquet"]
    counts = sorted(p.relative_to(out).as_posix() for p in (out / "counts").rglob("*.parquet"))
    assert counts == ["counts/a/b.txt.parquet", "counts/a__b.txt.parquet"]
    for shard, text in (("a/b.txt", "x from a/b"), ("a__b.txt", "y from a__b")):
        decoded = tokenmill_here(
            "decode", "--shard", out / "tokens" / f"{shard}.parquet", "--row", 0
        )
        assert decoded.stdout.startswith(text)
    assert tokenmill_here("verify", out).returncode == 0
    again = tokenmill_here("run", data, out, *RUN)  # the rerun that crashed on a shared temporary
    assert "2 kept, 0 done" in again.stderr and "2 shards" in result.stderr


def test_a_parquet_input_keeps_its_name_and_real_clashes_are_refused(tmp_path):
    data = tmp_path / "d"
    write_shard(data / "code" / "stdlib.parquet", ["import os"])
    out = tmp_path / "o"
    tokenmill_here("run", data, out, *RUN)
    assert token_files(out) == ["code/stdlib.parquet"]
    # `x.jsonl` and a Parquet file named `x.jsonl.parquet` would write one output.
    write_shard(data / "x.jsonl", ["one"])
    write_shard(data / "x.jsonl.parquet", ["two"])
    result = tokenmill_here("run", data, tmp_path / "o2", *RUN, check=False)
    one_line_error(result, "'x.jsonl'", "'x.jsonl.parquet'", "rename one")


# 2. A rerun never keeps (or certifies) a damaged output.


@pytest.mark.parametrize("folder", ["tokens", "counts"])
def test_a_damaged_output_is_redone_not_kept(tmp_path, folder):
    data = tmp_path / "d"
    write_shard(data / "a.jsonl", [f"document {i} with some words" for i in range(200)])
    write_shard(data / "b.txt", [f"line {i} of text" for i in range(100)])
    out, ref = tmp_path / "o", tmp_path / "ref"
    tokenmill_here("run", data, ref, *RUN)
    tokenmill_here("run", data, out, *RUN)
    target = out / folder / "a.jsonl.parquet"
    raw = bytearray(target.read_bytes())
    raw[len(raw) // 3] ^= 0xFF  # inside the data pages, not the footer
    target.write_bytes(bytes(raw))
    result = tokenmill_here("run", data, out, *RUN)
    stage = "encode" if folder == "tokens" else "count"
    assert f"{stage}: 2 shards (1 kept, 1 done)" in result.stderr
    assert output_files(out) == output_files(ref)
    assert tokenmill_here("verify", out).returncode == 0


# 3. OUT and DATA never overlap.


def test_out_inside_data_is_left_out_of_the_inputs(tmp_path):
    data = tmp_path / "d"
    write_shard(data / "a.jsonl", ["some text here", "more text"])
    write_shard(data / "b.txt", ["plain line"])
    ref = tmp_path / "ref"
    tokenmill_here("run", data, ref, *RUN)
    out = data / "out"
    for _ in range(2):  # the second run sees the first one's outputs under DATA
        result = tokenmill_here("run", data, out, *RUN, "--on-error", "skip")
        assert "skipped" not in result.stderr
        assert token_files(out) == ["a.jsonl.parquet", "b.txt.parquet"]
    assert {"path": "out/", "reason": "the output folder"} in manifest(out)["not_read"]
    assert manifest(out)["skipped"] == []
    tokens = {k: v for k, v in output_files(out).items() if k.startswith("tokens/")}
    assert tokens == {k: v for k, v in output_files(ref).items() if k.startswith("tokens/")}
    assert tokenmill_here("verify", out).returncode == 0


def test_data_inside_or_equal_to_out_is_refused(tmp_path):
    data = tmp_path / "d"
    write_shard(data / "a.jsonl", ["text"])
    one_line_error(tokenmill_here("run", data, data, *RUN, check=False), "DATA is OUT")
    one_line_error(tokenmill_here("run", data, tmp_path, *RUN, check=False), "DATA is inside OUT")
    assert not (data / "manifest.json").exists() and not (tmp_path / "tokens").exists()


# 4. Every file under DATA is accounted for.


def test_every_file_under_data_is_read_or_listed_with_its_reason(tmp_path):
    data = tmp_path / "d"
    write_shard(data / "read.jsonl", ["a document"])
    (data / "UPPER.JSONL").write_text('{"text": "upper case suffix"}\n')
    (data / "docs.json").write_text('{"text": "JSON Lines named .json"}\n')
    (data / "x.jsonl.lz4").write_bytes(b"\x04\x22\x4d\x18")
    (data / "table.csv").write_text("text\nnot read\n")
    (data / "notes.md").write_text("# notes\n")
    (data / ".hidden.jsonl").write_text('{"text": "hidden"}\n')
    (data / ".git").mkdir()
    (data / ".git" / "HEAD").write_text("ref\n")
    (data / "dangling.txt").symlink_to(tmp_path / "nowhere.txt")
    (data / "loop").symlink_to(data)
    (data / "self.txt").symlink_to(data / "self.txt")
    result = tokenmill_here("run", data, tmp_path / "o", *RUN)
    reasons = {e["path"]: e["reason"] for e in manifest(tmp_path / "o")["not_read"]}
    assert reasons == {
        ".git/": "hidden",
        ".hidden.jsonl": "hidden",
        "dangling.txt": "dangling link",
        "loop": "symlink loop",
        "notes.md": "unknown suffix",
        "self.txt": "symlink loop",
        "table.csv": "unknown suffix",
        "x.jsonl.lz4": "unknown suffix",
    }
    inputs = [i["path"] for i in manifest(tmp_path / "o")["inputs"]]
    assert inputs == ["UPPER.JSONL", "docs.json", "read.jsonl"]
    line = (
        "inputs: 3 read, 8 not read (3 unknown suffix, 2 hidden, 2 symlink loop, 1 dangling link)"
    )
    assert line in result.stderr


def test_symlinked_files_and_folders_are_read_under_their_own_names(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    write_shard(elsewhere / "shared.txt", ["shared line"])
    data = tmp_path / "d"
    write_shard(data / "own.txt", ["own line"])
    (data / "linked").symlink_to(elsewhere)
    (data / "alias.txt").symlink_to(elsewhere / "shared.txt")
    out = tmp_path / "o"
    tokenmill_here("run", data, out, *RUN)
    assert token_files(out) == ["alias.txt.parquet", "linked/shared.txt.parquet", "own.txt.parquet"]
    assert manifest(out)["not_read"] == []


# 5. No stale, unlisted or half-written outputs.


def test_derived_folders_and_outputs_of_removed_inputs_go(tmp_path):
    data = tmp_path / "d"
    write_shard(data / "a.jsonl", [f"doc {i} of a" for i in range(30)])
    write_shard(data / "sub" / "b.txt", [f"line {i} of b" for i in range(30)])
    out = tmp_path / "o"
    tokenmill_here("run", data, out, *RUN, "--pack", "16", "--format", "bin")
    assert (out / "bin" / "sub" / "b.txt.bin").is_file()
    (data / "sub" / "b.txt").unlink()
    tokenmill_here("run", data, out, *RUN, "--pack", "16", "--format", "bin")
    every = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert not [p for p in every if "b.txt" in p]
    assert tokenmill_here("verify", out).returncode == 0
    result = tokenmill_here("run", data, out, *RUN)  # no --pack, no --format bin
    assert not (out / "packed").exists() and not (out / "bin").exists()
    assert "removed" in result.stderr and "stale" in result.stderr
    assert tokenmill_here("verify", out).returncode == 0


def jsonl_corpus(data: Path, **sizes: int) -> Path:
    """DATA with one JSON Lines shard per keyword, of that many documents."""
    for name, n in sizes.items():
        write_shard(data / f"{name}.jsonl", [f"{name} document {i}" for i in range(n)])
    return data


def test_verify_reports_unlisted_files_and_stats_reads_only_the_manifest(tmp_path):
    data = jsonl_corpus(tmp_path / "d", a=20, b=5)
    out = tmp_path / "o"
    tokenmill_here("run", data, out, *RUN)
    before = json.loads(tokenmill_here("stats", out, "--json").stdout)["documents"]
    extra = out / "tokens" / "extra.jsonl.parquet"
    extra.write_bytes((out / "tokens" / "a.jsonl.parquet").read_bytes())
    (out / "tokens" / ".a.jsonl.parquet.tmp-1-ab").write_bytes(b"half")
    result = tokenmill_here("verify", out, check=False)
    assert result.returncode == 3
    assert "extra tokens/extra.jsonl.parquet: not in the manifest" in result.stderr
    assert "extra tokens/.a.jsonl.parquet.tmp-1-ab: not in the manifest" in result.stderr
    # Two differences, neither of them one of the files the manifest lists.
    assert re.search(
        r"verify: 2 differences from the manifest \(\d+ files checked\)\n$", result.stderr
    )
    assert json.loads(tokenmill_here("stats", out, "--json").stdout)["documents"] == before == 25
    tokenmill_here("run", data, out, *RUN)  # removes both
    assert not extra.exists() and temporaries(out) == []
    assert tokenmill_here("verify", out).returncode == 0


# 6. One run per OUT, and an OUT is not silently reused for another DATA.


def test_a_second_run_into_the_same_out_fails_at_once_naming_the_holder(tmp_path):
    data = jsonl_corpus(tmp_path / "d", a=50, b=50)
    out = tmp_path / "o"
    marker = tmp_path / "paused"
    first = subprocess.Popen(
        [sys.executable, "-m", "tokenmill", "run", data, out, *RUN],
        env={**os.environ, "TOKENMILL_PAUSE_AT": "count:1", "TOKENMILL_PAUSE_FILE": str(marker)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not marker.exists():
            assert first.poll() is None, "the first run ended before pausing"
            time.sleep(0.05)
        second = tokenmill_here("run", data, out, *RUN, "--vocab-size", "400", check=False)
        one_line_error(second, str(out), "in use by another tokenmill run", f"pid {first.pid}")
    finally:
        first.kill()
        first.wait()
    tokenmill_here("run", data, out, *RUN)  # the killed holder's lock went with it
    assert tokenmill_here("verify", out).returncode == 0


def test_an_out_of_another_data_is_refused_unless_forced(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    write_shard(one / "a.jsonl", ["first corpus"])
    write_shard(two / "b.jsonl", ["second corpus"])
    out = tmp_path / "o"
    tokenmill_here("run", one, out, *RUN)
    result = tokenmill_here("run", two, out, *RUN, check=False)
    one_line_error(result, "another DATA", str(one.resolve()), "--force")
    assert token_files(out) == ["a.jsonl.parquet"]
    tokenmill_here("run", two, out, *RUN, "--force")
    assert token_files(out) == ["b.jsonl.parquet"]


def test_a_killed_first_run_still_tells_which_data_it_was(tmp_path):
    from runs import kill_when_paused

    one, two = tmp_path / "one", tmp_path / "two"
    write_shard(one / "a.jsonl", ["first corpus"])
    write_shard(one / "b.jsonl", ["first corpus again"])
    write_shard(two / "c.jsonl", ["second corpus"])
    out = tmp_path / "o"
    kill_when_paused(["run", one, out, *RUN], "count", 1, tmp_path)
    assert not (out / "manifest.json").exists()
    one_line_error(tokenmill_here("run", two, out, *RUN, check=False), "another DATA")
    tokenmill_here("run", one, out, *RUN)


def test_a_first_run_that_failed_before_writing_leaves_out_to_any_data(tmp_path):
    bad, good = tmp_path / "bad", tmp_path / "good"
    bad.mkdir()
    (bad / "a.jsonl").write_text("not json\n")
    write_shard(good / "a.jsonl", ["a corpus"])
    out = tmp_path / "o"
    out.mkdir()  # an OUT of yours: kept, with the failed run's lock file in it
    one_line_error(tokenmill_here("run", bad, out, *RUN, check=False), "not JSON")
    assert (out / LOCK).exists()
    tokenmill_here("run", good, out, *RUN)


def test_a_run_that_failed_before_writing_leaves_no_out_it_made(tmp_path):
    bad, empty = tmp_path / "bad", tmp_path / "empty"
    bad.mkdir()
    (bad / "a.jsonl").write_text("not json\n")
    empty.mkdir()
    for data in (bad, empty):
        out = tmp_path / "new" / "o"
        one_line_error(tokenmill_here("run", data, out, *RUN, check=False))
        assert not out.exists()


# 7. Every error one line.


def test_out_that_is_a_file_and_names_too_long(tmp_path):
    data = tmp_path / "d"
    write_shard(data / "a.jsonl", ["text"])
    (tmp_path / "file").write_text("x")
    one_line_error(
        tokenmill_here("run", data, tmp_path / "file", *RUN, check=False), "not a folder"
    )
    long = tmp_path / "long"
    write_shard(long / ("n" * 240 + ".txt"), ["text"])
    one_line_error(tokenmill_here("run", long, tmp_path / "o", *RUN, check=False), "too long")


@pytest.mark.parametrize(
    ("option", "value", "needle"),
    [
        ("--vocab-size", str(2**32), "--vocab-size 4294967296 is out of range"),
        ("--vocab-size", str(2**63 - 1), "--vocab-size"),
        ("--pack", str(10**20), "--pack"),
        ("--workers", "100000", "--workers 100000 is out of range"),
    ],
)
def test_bounded_options_are_checked_before_any_work(tmp_path, option, value, needle):
    data = tmp_path / "d"
    write_shard(data / "a.jsonl", ["text"])
    out = tmp_path / "o"
    args = ["run", data, out, "--workers", "1", option, value]
    # A value refused is a usage error, as click's own refusals: status 2, help named.
    line = one_line_error(tokenmill_here(*args, check=False), needle, status=2)
    assert line.endswith(" run --help')")
    assert not (out / "counts").exists()


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"[]",
        b'{"data": 5}',
        b'{"data": "/x", "inputs": [{"path": 3}]}',
        b'{"data": "/x", "outputs": "tokens"}',
        b"[" * 100_000 + b"]" * 100_000,
        b"\xff\xfe",
    ],
)
def test_verify_on_a_malformed_manifest_is_one_line(tmp_path, content):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "manifest.json").write_bytes(content)
    one_line_error(tokenmill_here("verify", tmp_path / "o", check=False), "manifest.json")


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.1, 0.2, 0.3])
def test_ctrl_c_while_verify_starts_is_never_a_traceback(tmp_path, delay):
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenmill", "verify", tmp_path],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate()
    if "Traceback" in err:
        # Only the interpreter's own start-up (site, runpy) runs before tokenmill's
        # first line can catch it, and a machine slow to start may be hit there:
        # that traceback is Python's, and names none of tokenmill's files.
        # It ends the process (-2), or fails the import of runpy (1).
        assert f"{os.sep}tokenmill{os.sep}" not in err, err
        assert proc.returncode in (-signal.SIGINT, 1), (proc.returncode, err)
        return
    # Before Python installs its handler, SIGINT ends the process (-2); after, one line.
    assert proc.returncode in (-signal.SIGINT, 1, 130), (proc.returncode, err)
    assert len(err.strip().splitlines()) <= 1, err


@pytest.fixture
def tmpfs(tmp_path):
    mounts = []

    def make(size_kb: int) -> Tmpfs:
        mounts.append(Tmpfs(tmp_path / f"tmpfs{len(mounts)}", size_kb))
        return mounts[-1]

    yield make
    for m in mounts:
        m.close()


@pytest.fixture(scope="module")
def disk_corpus(tmp_path_factory):
    """DATA on the normal disk, and an uninterrupted run of it."""
    root = tmp_path_factory.mktemp("disk")
    data = root / "d"
    for k in range(4):
        lines = [f"shard {k} line {i} with words {i * k} and more {i % 7}" for i in range(3000)]
        write_shard(data / f"s{k}.jsonl", lines)
    with gzip.open(data / "s4.txt.gz", "wt") as f:
        f.write("".join(f"gz {i} text\n" for i in range(3000)))
    tokenmill_here("run", data, root / "ref", *RUN, "--pack", "64", "--format", "bin")
    size = sum(p.stat().st_size for p in (root / "ref").rglob("*") if p.is_file())
    return data, root / "ref", size


@root_only()
@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_disk_full_is_one_line_and_a_rerun_with_room_is_identical(disk_corpus, tmpfs, fraction):
    data, ref, size = disk_corpus
    fs = tmpfs(max(16, int(size * fraction) // 1024))
    out = fs.path / "o"
    result = tokenmill_here("run", data, out, *RUN, "--pack", "64", "--format", "bin", check=False)
    one_line_error(result, "No space left on device")
    assert temporaries(out) == []
    fs.resize(4 * size // 1024 + 1024)
    tokenmill_here("run", data, out, *RUN, "--pack", "64", "--format", "bin")
    assert output_files(out) == output_files(ref)
    assert tokenmill_here("verify", out).returncode == 0


@root_only()
def test_a_read_only_out_is_one_line(disk_corpus, tmpfs):
    data, _, _ = disk_corpus
    fs = tmpfs(1024)
    fs.resize(1024, readonly=True)
    one_line_error(tokenmill_here("run", data, fs.path / "o", *RUN, check=False), "Read-only")


@root_only()
@pytest.mark.parametrize("command", ["train", "merge", "export"])
def test_a_single_file_output_on_a_read_only_folder_names_the_output(disk_corpus, tmpfs, command):
    # Removing the temporary never made failed too (EROFS, not ENOENT), and that
    # error, naming .NAME.tmp-PID-..., took the place of the one naming the output.
    _, out, _ = disk_corpus
    fs = tmpfs(1024)
    fs.resize(1024, readonly=True)
    target = fs.path / "target"
    args = {
        "train": ("train", out / "counts.parquet", target, "--vocab-size", "280"),
        "merge": ("merge", out / "counts", target),
        "export": ("export", out / "tokenizer.json", target, "--format", "tiktoken"),
    }[command]
    result = tokenmill_here(*args, check=False)
    assert one_line_error(result) == f"Error: {target}: cannot write (Read-only file system)"


# 11. run --tokenizer passes --pattern and --special-token on to a .tiktoken file.


def test_run_with_a_tiktoken_file_takes_pattern_and_special_tokens(tmp_path):
    data = tmp_path / "d"
    write_shard(data / "a.jsonl", [f"some words {i} here" for i in range(50)])
    full = tmp_path / "full"
    tokenmill_here("run", data, full, *RUN)
    ranks = tmp_path / "t.tiktoken"
    tokenmill_here("export", full / "tokenizer.json", ranks, "--format", "tiktoken")
    for beside in tmp_path.glob("t.tiktoken.*"):
        beside.unlink()  # no settings file: the pattern must come from the command line
    eot = f"<|endoftext|>={json.loads((full / 'tokenizer.json').read_text())['vocab_size'] - 1}"
    out = tmp_path / "o"
    args = ["run", data, out, "--tokenizer", ranks, "--pattern", "cl100k", "--special-token", eot]
    tokenmill_here(*args, "--workers", "1")
    ids = pq.read_table(out / "tokens" / "a.jsonl.parquet")["ids"].to_pylist()
    assert ids == pq.read_table(full / "tokens" / "a.jsonl.parquet")["ids"].to_pylist()


def test_lock_file_is_the_only_trace_of_a_refused_run(tmp_path):
    data = tmp_path / "d"
    write_shard(data / "a.jsonl", ["x"])
    out = tmp_path / "o"
    tokenmill_here("run", data, out, "--vocab-size", str(2**40), check=False)
    assert [p.name for p in out.rglob("*")] in ([], [LOCK])


def test_ctrl_c_turned_into_another_error_by_an_import_is_still_one_line():
    """CPython can turn a KeyboardInterrupt raised inside an extension module's
    import into another exception (seen: TypeError from ssl while PyArrow
    loads); after a Ctrl-C, that is still `interrupted` and status 130."""
    script = (
        "import os, signal, time, sys\n"
        "import tokenmill.cli\n"
        "def cli():\n"
        "    try:\n"
        "        os.kill(os.getpid(), signal.SIGINT); time.sleep(5)\n"
        "    except KeyboardInterrupt:\n"
        "        raise TypeError('expected a message argument') from None\n"
        "tokenmill.cli.main = cli\n"
        "from tokenmill.entry import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (130, "interrupted\n")


def test_verify_adds_up_the_skips_and_refuses_numbers_that_are_not_counts(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_text('{"text": "ok words"}\nnot json\n{"text": null}\n')
    out = tmp_path / "out"
    tokenmill_here("run", data, out, "--vocab-size", "270", "--on-error", "skip")
    tokenmill_here("verify", out)
    original = (out / "manifest.json").read_text()
    for change, needle in (
        (lambda m: m["skipped"].pop(0), "manifest documents_skipped: 2, its skips list 1"),
        (lambda m: m.update(documents="1"), "manifest documents: '1' is not a count"),
        (lambda m: m["skipped"][0].update(documents=-1), "-1 is not a count"),
    ):
        m = json.loads(original)
        change(m)
        (out / "manifest.json").write_text(json.dumps(m))
        result = tokenmill_here("verify", out, check=False)
        assert result.returncode == 3, result.stderr
        assert needle in result.stderr and "Traceback" not in result.stderr


def test_verify_reports_an_input_added_to_data_since_the_run(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_text('{"text": "ok words"}\n')
    (data / "notes.md").write_text("not an input\n")
    out = tmp_path / "out"
    tokenmill_here("run", data, out, "--vocab-size", "270")
    tokenmill_here("verify", out)
    (data / "b.jsonl").write_text('{"text": "more words"}\n')
    result = tokenmill_here("verify", out, check=False)
    assert result.returncode == 3
    assert "input b.jsonl: under DATA but not in the manifest" in result.stderr


def test_data_that_is_a_link_to_a_file_is_that_link(cli, tmp_path):
    """DATA a link to a file (`latest.jsonl -> ../store/v1.bin`): the manifest
    recorded the target (v1.bin) but named the input after the link, so verify
    failed right after a clean run, stats and check ended in a traceback (no
    reader for .bin), and the link pointed at new data was "another DATA". The
    link is DATA: verified, read, and its new content redone."""
    store, d = tmp_path / "store", tmp_path / "d"
    store.mkdir()
    d.mkdir()
    (store / "v1.bin").write_text('{"text": "hello there"}\n')
    (d / "latest.jsonl").symlink_to("../store/v1.bin")
    out = tmp_path / "out"
    cli("run", d / "latest.jsonl", out, "--vocab-size", "260")
    assert manifest(out)["data"] == str(d.resolve() / "latest.jsonl")
    assert "files match the manifest" in cli("verify", out).output
    for command in ("stats", "check"):
        cli(command, out)
    (store / "v2.bin").write_text('{"text": "new text"}\n')
    (d / "latest.jsonl").unlink()
    (d / "latest.jsonl").symlink_to("../store/v2.bin")
    changed = cli("verify", out, ok=False)
    assert changed.exit_code == 3 and "input latest.jsonl: changed" in changed.output
    cli("run", d / "latest.jsonl", out, "--vocab-size", "260")
    cli("verify", out)
    assert manifest(out)["documents"] == 1 and manifest(out)["tokens"] > 0


def test_a_manifest_naming_an_input_of_no_known_format_is_one_line(cli, tmp_path):
    (tmp_path / "a.jsonl").write_text('{"text": "hello"}\n')
    out = tmp_path / "out"
    cli("run", tmp_path / "a.jsonl", out, "--vocab-size", "260")
    (tmp_path / "a.bin").write_text('{"text": "hello"}\n')
    path = out / "manifest.json"
    path.write_text(json.dumps({**manifest(out), "data": str(tmp_path / "a.bin")}))
    result = cli("stats", out, ok=False)
    assert result.exit_code == 1 and "a.bin: not a known input format" in result.output


def test_verify_names_the_inputs_of_a_data_folder_that_moved_where_they_were(cli, tmp_path):
    """DATA moved away: verify named each input one folder too high
    (`missing (/x/a.jsonl)` for /x/data/a.jsonl)."""
    data = tmp_path / "data"
    write_shard(data / "a.jsonl", ["hello there", "general kenobi"])
    cli("run", data, tmp_path / "out", "--vocab-size", "260")
    data.rename(tmp_path / "moved")
    result = cli("verify", tmp_path / "out", ok=False)
    assert result.exit_code == 3
    assert f"input a.jsonl: missing ({data.resolve() / 'a.jsonl'})" in result.output


def test_a_folder_under_data_that_cannot_be_listed_stops_the_run(tmp_path, monkeypatch):
    # Its files can be neither read nor listed as not read, so nothing about the
    # run could account for them. (As root, chmod cannot make a folder unlistable.)
    from tokenmill.errors import TokenmillError
    from tokenmill.io import inputs

    data = tmp_path / "d"
    write_shard(data / "a.jsonl", ["a document"])
    (data / "locked").mkdir()
    write_shard(data / "locked" / "b.jsonl", ["another document"])
    scandir = os.scandir

    def refuse(path):
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied")
        return scandir(path)

    monkeypatch.setattr(inputs.os, "scandir", refuse)
    with pytest.raises(TokenmillError, match=r"locked: cannot list folder \(Permission denied\)"):
        inputs.find_inputs(data)


@pytest.mark.parametrize(
    ("signum", "line"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated (SIGTERM)")]
)
def test_a_signal_while_the_command_loads_its_entry_is_one_line(tmp_path, signum, line):
    """A signal between the console script's first import and main() (entry's
    own imports: a few ms, hit on a loaded machine) was a KeyboardInterrupt
    traceback out of the import. Here it comes right after the entry module
    loads, in a script named as the console script is."""
    script = tmp_path / "tokenmill"
    script.write_text(
        "import os, signal, time\n"
        "import tokenmill.entry\n"
        f"os.kill(os.getpid(), {int(signum)})\n"
        "time.sleep(30)\n"
    )
    proc = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (128 + signum, f"{line}\n")


def test_a_program_importing_the_entry_keeps_its_own_signal_handlers(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        "import signal\n"
        "import tokenmill.entry\n"
        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
    )
    subprocess.run([sys.executable, script], check=True, timeout=60)
