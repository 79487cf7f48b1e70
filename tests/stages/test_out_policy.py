"""What tokenmill may delete (docs/guarantees.md): only files it can tell it
wrote, in a folder that is its own; never a folder it did not write, another
run's folder nested in or around OUT, anything through a symlink, or a path
holding something other than a regular file where it writes one."""

from __future__ import annotations

import json
import os
import shutil
import stat

import pytest
from conftest import write_shard
from runs import manifest, tokenmill, tokenmill_here

from tokenmill.io.lock import LOCK

RUN = ("--vocab-size", "300", "--workers", "1")


def data_folder(tmp_path, *names: str):
    data = tmp_path / "data"
    for name in names or ("a.jsonl", "b.jsonl"):
        write_shard(data / name, [f"{name} document {i} with some words" for i in range(20)])
    return data


def tree(folder) -> dict[str, bytes | str]:
    """Every entry under `folder`: a file's bytes, a link's target, another's kind."""
    found: dict[str, bytes | str] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = os.path.join(root, name)
            key = os.path.relpath(p, folder)
            mode = os.lstat(p).st_mode
            if stat.S_ISLNK(mode):
                found[key] = "-> " + os.readlink(p)
            elif stat.S_ISREG(mode):
                with open(p, "rb") as f:
                    found[key] = f.read()
            else:
                found[key] = stat.filemode(mode)[0]  # a folder, a FIFO
    return found


def error_line(result, *needles: str) -> str:
    assert result.returncode == 1, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("Error:")] == lines[-1:], result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[-1], (needle, lines[-1])
    return lines[-1]


def kept_line(result) -> str:
    [line] = [line for line in result.stderr.splitlines() if line.startswith("kept ")]
    return line


def users_folder(out):
    """A folder of someone's files, named as tokenmill names some of its own."""
    files = {
        "bin/deploy.sh": b"#!/bin/sh\n",
        "tokens/README.txt": b"my notes\n",
        "tokens/mine.parquet": b"my own table\n",
        "report.html": b"<html>mine</html>\n",
        "tokenizer.json": b"{}\n",
        "deep/er/.draft.tmp-1": b"an editor's file\n",
    }
    for name, body in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(body)
    return files


def test_a_folder_tokenmill_did_not_write_is_refused_untouched(tmp_path):
    data = data_folder(tmp_path)
    out = tmp_path / "out"
    users_folder(out)
    before = tree(out)
    result = tokenmill_here("run", data, out, *RUN, check=False)
    error_line(result, str(out), "not a tokenmill output folder", "--force")
    assert tree(out) == before  # not even a lock file
    result = tokenmill_here("count", data, out, check=False)
    error_line(result, str(out), "--force")
    assert tree(out) == before


def test_a_folder_holding_only_files_named_as_temporaries_is_refused_untouched(tmp_path):
    """Named as tokenmill names its temporaries, but in a folder no run
    locked: a killed run leaves its lock file beside them, so these are the
    user's (removed, before, as if empty)."""
    data = data_folder(tmp_path)
    out = tmp_path / "out"
    for name in (".precious.tmp-1", "sub/.x.tmp-1"):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(b"mine\n")
    before = tree(out)
    result = tokenmill_here("run", data, out, *RUN, check=False)
    error_line(result, str(out), "not a tokenmill output folder", "--force")
    assert tree(out) == before


def test_force_writes_into_it_and_replaces_only_tokenmill_named_outputs(tmp_path):
    data = data_folder(tmp_path)
    out = tmp_path / "out"
    files = users_folder(out)
    result = tokenmill_here("run", data, out, *RUN, "--force")
    # Replaced: the names of this run's outputs (tokenizer.json) and a Parquet
    # file in tokens/. Kept: everything else, and named when in tokenmill's folders.
    kept = {n: b for n, b in files.items() if n not in ("tokenizer.json", "tokens/mine.parquet")}
    line = kept_line(result)
    assert "kept 3 files" in line and "verify lists them" in line
    assert all(name in line for name in ("report.html", "tokens/README.txt", "bin/deploy.sh"))
    for name, body in kept.items():
        assert (out / name).read_bytes() == body, name
    assert not (out / "tokens" / "mine.parquet").exists()
    assert manifest(out)["tokenizer"]["path"] == "tokenizer.json"
    again = tokenmill_here("run", data, out, *RUN)
    assert "removed" not in again.stderr and "kept 3 files" in kept_line(again)
    for name, body in kept.items():
        assert (out / name).read_bytes() == body, name
    # A stage command's folder likewise (--force on bin and pack too).
    bins = tmp_path / "bins"
    users_folder(bins)
    error_line(tokenmill_here("bin", out / "tokens", bins, check=False), str(bins), "--force")
    tokenmill_here("bin", out / "tokens", bins, "--force")
    assert (bins / "a.jsonl.bin").exists() and (bins / "bin" / "deploy.sh").exists()


def test_a_folder_of_another_commands_outputs_is_refused_untouched(tmp_path):
    # encode into a run's OUT wrote shards beside its counts/ and tokens/; run
    # into count's folder mixed its outputs with the tables; encode into
    # count's folder replaced the tables with token shards.
    data = data_folder(tmp_path)
    out, counts = tmp_path / "out", tmp_path / "counts"
    tokenmill_here("run", data, out, *RUN)
    tokenmill_here("count", data, counts)
    tokenizer = ("--tokenizer", out / "tokenizer.json")
    cases = [
        (("encode", data, out, *tokenizer), out, "run", "encode"),
        (("count", data, out), out, "run", "count"),
        (("pack", out / "tokens", counts, "--seq-len", "8"), counts, "count", "pack"),
        (("run", data, counts, *RUN), counts, "count", "run"),
        (("encode", data, counts, *tokenizer), counts, "count", "encode"),
    ]
    for args, folder, before, command in cases:
        was = tree(folder)
        result = tokenmill_here(*args, check=False)
        error_line(
            result,
            f"{folder}: holds the outputs of `tokenmill {before}`, not `tokenmill {command}`",
            "--force",
        )
        assert tree(folder) == was, args
    # The same command again is a rerun; --force writes into the folder.
    assert "(2 kept, 0 done)" in tokenmill_here("count", data, counts).stderr
    tokenmill_here("encode", data, counts, *tokenizer, "--force")
    tokenmill_here("encode", data, counts, *tokenizer)


def test_an_empty_or_missing_folder_is_fine(tmp_path):
    data = data_folder(tmp_path)
    (tmp_path / "empty").mkdir()
    for out in (tmp_path / "empty", tmp_path / "new" / "out"):
        tokenmill_here("run", data, out, *RUN)
        assert tokenmill_here("verify", out).returncode == 0


def test_files_of_a_tokenmill_out_that_are_not_its_own_are_kept(tmp_path):
    data = data_folder(tmp_path)
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN)
    mine = {
        "tokens/README.txt": b"notes\n",
        "counts/run.sh": b"#!/bin/sh\n",
        "notes/.x.parquet.tmp-1-abcd1234": b"not in a folder of tokenmill's\n",
        "report.html": b"<html>not written by tokenmill report</html>\n",
    }
    for name, body in mine.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(body)
    (out / "tokens" / "stray.parquet").write_bytes(b"named as a token shard")
    result = tokenmill_here("run", data, out, *RUN, "--pack", "16")
    assert "removed 1 stale file" in result.stderr and "tokens/stray.parquet" in result.stderr
    # Named by itself, not only in the list of stale files (cut after five).
    unlisted = [line for line in result.stderr.splitlines() if line.startswith("of those")]
    assert unlisted == [
        "of those, 1 no earlier manifest listed, removed because a layout or stage writes "
        "files of such names: tokens/stray.parquet"
    ]
    assert "kept 3 files" in kept_line(result)
    again = tokenmill_here("run", data, out, *RUN)  # packed/ goes, the rest stays
    assert not (out / "packed").exists()
    assert "removed 2 stale files" in again.stderr and "of those" not in again.stderr
    for name, body in mine.items():
        assert (out / name).read_bytes() == body, name


def test_an_out_inside_another_out_is_refused(tmp_path):
    data = data_folder(tmp_path)
    a = tmp_path / "a"
    tokenmill_here("run", data, a, *RUN)
    before = tree(a)
    for inner in (a / "tokens", a / "runs" / "b"):
        result = tokenmill_here("run", data, inner, *RUN, check=False)
        error_line(result, str(inner), "inside", str(a))
    error_line(tokenmill_here("count", data, a / "counts2", check=False), "inside", str(a))
    assert tree(a) == before


def test_an_out_holding_another_out_is_refused(tmp_path):
    data = data_folder(tmp_path)
    outer = tmp_path / "outer"
    tokenmill_here("run", data, outer / "x" / "inner", *RUN)
    before = tree(outer)
    result = tokenmill_here("run", data, outer, *RUN, "--force", check=False)
    error_line(result, str(outer), str(outer / "x" / "inner"))
    assert tree(outer) == before


def test_a_tokens_folder_linked_to_another_disk_keeps_its_outputs(tmp_path):
    data = data_folder(tmp_path)
    disk = tmp_path / "disk"
    (disk / "tokens").mkdir(parents=True)
    (disk / "unrelated.txt").write_bytes(b"on the same disk\n")
    (disk / "tokens" / "notes.txt").write_bytes(b"beside the shards\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "tokens").symlink_to(disk / "tokens", target_is_directory=True)
    tokenmill_here("run", data, out, *RUN)
    shards = sorted(p.name for p in (disk / "tokens").glob("*.parquet"))
    assert shards == ["a.jsonl.parquet", "b.jsonl.parquet"]
    assert [e["path"] for e in manifest(out)["outputs"]] == [
        "tokens/a.jsonl.parquet",
        "tokens/b.jsonl.parquet",
    ]
    assert (disk / "unrelated.txt").exists() and (disk / "tokens" / "notes.txt").exists()
    assert tokenmill_here("verify", out).returncode == 0
    again = tokenmill_here("run", data, out, *RUN)
    assert "encode: 2 shards (2 kept, 0 done)" in again.stderr
    assert tokenmill_here("verify", out).returncode == 0
    # A removed input: its shard is not removed through the link.
    (data / "b.jsonl").unlink()
    tokenmill_here("run", data, out, *RUN)
    assert (disk / "tokens" / "b.jsonl.parquet").exists()
    assert (disk / "unrelated.txt").exists() and (out / "tokens").is_symlink()
    assert tokenmill_here("verify", out).returncode == 0


def test_a_stale_link_is_removed_never_its_target(tmp_path):
    data = data_folder(tmp_path)
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "bin").mkdir(parents=True)
    precious = elsewhere / "precious.parquet"
    precious.write_bytes(b"a file outside OUT\n")
    (elsewhere / "bin" / "x.bin").write_bytes(b"\0" * 8)
    (out / "tokens" / "old.parquet").symlink_to(precious)
    (out / "bin").symlink_to(elsewhere / "bin", target_is_directory=True)
    tokenmill_here("run", data, out, *RUN)  # no --format bin: bin/ is stale
    assert not (out / "tokens" / "old.parquet").is_symlink()
    assert precious.read_bytes() == b"a file outside OUT\n"
    assert (elsewhere / "bin" / "x.bin").exists()


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished run, copied by each test that changes it."""
    root = tmp_path_factory.mktemp("finished")
    data = data_folder(root)
    tokenmill_here("run", data, root / "out", *RUN)
    return data, root / "out"


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("tokens/a.jsonl.parquet", "fifo"),
        ("manifest.json", "fifo"),
        ("counts.parquet", "folder"),
        ("tokens", "file"),
    ],
)
def test_a_write_target_that_is_no_regular_file_is_refused_untouched(
    finished, tmp_path, name, kind
):
    data, done = finished
    out = tmp_path / "out"
    shutil.copytree(done, out, symlinks=True)
    path = out / name
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    {"fifo": os.mkfifo, "folder": os.mkdir, "file": lambda p: p.write_bytes(b"x")}[kind](path)
    before = tree(out)
    error_line(tokenmill_here("run", data, out, *RUN, check=False), str(path))
    assert tree(out) == before


def test_a_fifo_in_a_stage_commands_folder_is_refused_untouched(tmp_path):
    data = data_folder(tmp_path)
    counts = tmp_path / "counts"
    tokenmill_here("count", data, counts)
    os.mkfifo(counts / "pipe")
    before = tree(counts)
    error_line(tokenmill_here("count", data, counts, check=False), str(counts / "pipe"))
    assert tree(counts) == before


def test_a_lock_file_that_is_a_link_is_never_written_through(tmp_path):
    data = data_folder(tmp_path)
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN)
    target = tmp_path / "important.txt"
    target.write_bytes(b"keep me\n")
    (out / LOCK).unlink()
    (out / LOCK).symlink_to(target)
    error_line(tokenmill_here("run", data, out, *RUN, check=False), str(out / LOCK))
    assert target.read_bytes() == b"keep me\n"
    assert json.loads((out / "manifest.json").read_text())["inputs"]


def test_on_a_store_a_prefix_of_other_objects_is_refused_and_nesting_too(s3, tmp_path):
    import s3fs

    data = data_folder(tmp_path)
    fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)
    url = s3.url("out")
    prefix = url.removeprefix("s3://")
    theirs = {f"{prefix}/notes.txt": b"mine\n", f"{prefix}/tokens/README.txt": b"also mine\n"}
    fs.pipe(theirs)
    error_line(tokenmill("run", data, url, *RUN, check=False), url, "--force")
    assert sorted(fs.find(prefix)) == sorted(theirs)
    assert "tokens/README.txt" in kept_line(tokenmill("run", data, url, *RUN, "--force"))
    assert {name: fs.cat_file(name) for name in theirs} == theirs
    error_line(tokenmill("run", data, f"{url}/tokens/x", *RUN, check=False), "inside", url)


def test_a_single_file_output_never_replaces_an_input_or_a_file_of_the_users(tmp_path):
    """merge's table, train's tokenizer and an export are one file each: never
    the command's own input, nor inside a folder it reads, nor an existing
    file tokenmill cannot tell it wrote (unless --force, where it has one)."""
    data = data_folder(tmp_path)
    out = tmp_path / "out"
    tokenmill_here("run", data, out, *RUN)
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"my notes\n")
    shard = data / "a.jsonl"
    before = {p: p.read_bytes() for p in (notes, shard, out / "tokenizer.json")}
    refused = [
        (("merge", out / "counts", shard), "COUNTS_FILE exists and tokenmill did not write it"),
        (("merge", out / "counts", out / "counts" / "m.parquet"), "is inside"),
        (("train", out / "counts.parquet", notes, *RUN[:2]), "--force"),
        (("train", out / "counts.parquet", out / "counts.parquet", *RUN[:2]), "which this"),
        # A ranks file's settings go beside it, OUT + ".json": here the input.
        (("export", out / "tokenizer.json", out / "tokenizer", "--format", "tiktoken"), "reads"),
        (("export", out / "tokenizer.json", out / "tokenizer.json", "--format", "hf"), "reads"),
        (("export", out / "tokenizer.json", notes, "--format", "hf"), "remove it first"),
    ]
    for args, needle in refused:
        error_line(tokenmill_here(*args, check=False), needle)
        assert {p: p.read_bytes() for p in before} == before, args
    assert not (out / "counts" / "m.parquet").exists()
    assert not (data / ".a.jsonl.state.json").exists()
    # Its own outputs it replaces, and a file of the user's with --force.
    merged, tok, hf = tmp_path / "m.parquet", tmp_path / "t.json", tmp_path / "hf.json"
    for _ in range(2):
        tokenmill_here("merge", out / "counts", merged)
        tokenmill_here("train", merged, tok, *RUN[:2])
        tokenmill_here("export", tok, hf, "--format", "hf")
        tokenmill_here("export", tok, tmp_path / "t.tiktoken", "--format", "tiktoken")
    tokenmill_here("train", merged, notes, *RUN[:2], "--force")
    assert notes.read_bytes() == tok.read_bytes()


def test_a_killed_attempts_temporary_is_named_as_one_not_as_a_stale_output(
    cli, tmp_path, monkeypatch
):
    """A task that Ray ran again within the run leaves its killed attempt's
    temporary, which the sweep at the end removes: it was named among the
    stale outputs (of removed inputs, of stages not run)."""
    import tokenmill.stages.run as run_module

    data, out = data_folder(tmp_path), tmp_path / "out"
    encode = run_module.run_encode

    def with_a_killed_attempt(*args, **kwargs):
        result = encode(*args, **kwargs)
        (out / "tokens" / ".a.jsonl.parquet.tmp-12345-abcd1234").write_bytes(b"half")
        return result

    monkeypatch.setattr(run_module, "run_encode", with_a_killed_attempt)
    result = cli("run", data, out, *RUN)
    assert "removed 1 temporary file from " in result.output, result.output
    assert "(a killed attempt's): tokens/.a.jsonl.parquet.tmp-12345-abcd1234" in result.output
    assert "stale" not in result.output and "of those" not in result.output
    assert not (out / "tokens" / ".a.jsonl.parquet.tmp-12345-abcd1234").exists()
