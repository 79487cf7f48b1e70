"""What every training layout guarantees, whichever it is (tokenmill.layouts):
its files are listed in the manifest with sizes and sha256, and `verify`
catches a changed byte; a run killed while writing it, then rerun, ends with
byte-identical files; the files of a format no longer asked for are removed;
a full disk is one line. Each test runs for every layout module there is."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_documents, one_line, write_shard
from runs import kill_when_paused, manifest, output_files, temporaries, tokenmill_here
from tmpfs import Tmpfs, root_only

from tokenmill.layouts import MODULES, layout
from tokenmill.stages.layout import folders
from tokenmill.stages.manifest import verify
from tokenmill.stages.tokens import list_ids, token_shards

# Every layout whose module exists, so that each new one is held to these.
NAMES = [n for n in MODULES if importlib.util.find_spec(f"tokenmill.layouts.{MODULES[n]}")]
RUN = ("--vocab-size", "300", "--workers", "1")


def options(name: str) -> tuple[str, ...]:
    return ("--pack", "64") if name == "packed" else ("--format", name)


def folder_files(folder: Path) -> dict[str, Path]:
    return {p.relative_to(folder.parent).as_posix(): p for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """Three shards, large enough that a layout takes many pages of a disk."""
    data = tmp_path_factory.mktemp("layouts") / "data"
    docs = make_documents(1500)
    write_shard(data / "a.jsonl", docs[:600])
    write_shard(data / "sub" / "b.txt", one_line(docs[600:1000]))
    write_shard(data / "c.parquet", docs[1000:])
    return data


@pytest.fixture(scope="module")
def reference(data, tmp_path_factory):
    """reference(name): OUT of an uninterrupted run writing that layout."""
    made: dict[str, Path] = {}

    def make(name: str) -> Path:
        if name not in made:
            made[name] = tmp_path_factory.mktemp(f"ref-{name}") / "out"
            tokenmill_here("run", data, made[name], *RUN, *options(name))
        return made[name]

    return make


@pytest.mark.parametrize("name", NAMES)
def test_a_layout_lives_in_the_folder_named_as_it(name):
    """A run's start knows tokenmill's folders of OUT by the layouts' names,
    without importing their modules (stages/layout.py `folders`)."""
    assert layout(name).folder == name
    assert name in folders()


def test_a_training_run_imports_no_layout_it_does_not_write(tmp_path):
    """A layout's module, and what it needs (pyarrow.compute for a shuffle),
    is imported by the run that writes it, not by every run's start."""
    data = tmp_path / "data"
    write_shard(data / "a.parquet", make_documents(50))
    script = (
        "import sys\n"
        "from tokenmill.entry import main\n"
        f"sys.argv = ['tokenmill', 'run', {str(data)!r}, {str(tmp_path / 'out')!r}, "
        "'--vocab-size', '300', '--workers', '1']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print(sorted(m for m in sys.modules if m.startswith('tokenmill.layouts.')"
        " or m in ('pyarrow.compute', 'tokenmill.stages.mix')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("name", NAMES)
def test_files_are_listed_with_size_and_sha256_and_verify_catches_a_changed_byte(
    name, reference, tmp_path
):
    ref = reference(name)
    files = folder_files(ref / layout(name).folder)
    listed = {e["path"]: e for e in manifest(ref)["files"] if e["path"] in files}
    assert files and listed.keys() == files.keys()
    for path, entry in listed.items():
        body = files[path].read_bytes()
        assert (entry["bytes"], entry["sha256"]) == (len(body), hashlib.sha256(body).hexdigest())
    assert verify(ref)[1] == []
    # The documents read back are the token shards' rows, each once.
    rows = [
        tuple(flat[offsets[i] : offsets[i + 1]].tolist())
        for shard in token_shards(ref / "tokens")
        for batch in shard.batches(columns=("ids",))
        for flat, offsets in [list_ids(batch.column(0))]
        for i in range(len(offsets) - 1)
    ]
    read = [tuple(d.ids.tolist()) for d in layout(name).read(ref / layout(name).folder, False)]
    assert sorted(read) == sorted(rows)

    out = tmp_path / "out"
    shutil.copytree(ref, out)
    for path in listed:
        body = bytearray((out / path).read_bytes())
        body[len(body) // 2] ^= 1
        (out / path).write_bytes(bytes(body))
    differences = verify(out)[1]
    assert sorted(d.split(":")[0] for d in differences) == sorted(f"output {p}" for p in listed)


@pytest.mark.parametrize("name", NAMES)
def test_a_kill_while_writing_then_a_rerun_is_identical_and_dropping_the_format_removes_it(
    name, data, reference, tmp_path
):
    out = tmp_path / "out"
    # Each layout pauses at "<name>-write" with a temporary open (tokenmill.faults).
    kill_when_paused(["run", data, out, *RUN, *options(name)], f"{name}-write", 1, tmp_path)
    assert temporaries(out), "the kill should leave a temporary to clean up"
    tokenmill_here("run", data, out, *RUN, *options(name))
    assert temporaries(out) == []
    assert output_files(out) == output_files(reference(name))
    assert verify(out)[1] == []

    result = tokenmill_here("run", data, out, *RUN)
    assert not (out / layout(name).folder).exists()
    assert "stale" in result.stderr
    assert verify(out)[1] == []


def pages(paths) -> int:
    """Bytes a tmpfs gives these files: whole 4 KiB pages."""
    return sum(-(-p.stat().st_size // 4096) * 4096 for p in paths)


@root_only()
@pytest.mark.parametrize("name", NAMES)
def test_a_full_disk_while_writing_is_one_line_and_a_rerun_with_room_is_identical(
    name, data, reference, tmp_path
):
    ref = reference(name)
    files = [p for p in ref.rglob("*") if p.is_file()]
    mine = set(folder_files(ref / layout(name).folder).values())
    before = pages(p for p in files if p not in mine)
    # Room for every other output and half the layout's: the disk fills as it is written.
    with Tmpfs(tmp_path / "fs", (before + pages(mine) // 2) // 1024) as fs:
        out = fs.path / "o"
        result = tokenmill_here("run", data, out, *RUN, *options(name), check=False)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        assert lines[-1].startswith("Error:") and "No space left on device" in lines[-1]
        assert [line for line in lines if line.startswith("Error")] == lines[-1:]
        assert any(line.startswith("encode:") for line in lines), "full before the layout"
        assert temporaries(out) == []
        fs.resize(4 * pages(files) // 1024 + 1024)
        tokenmill_here("run", data, out, *RUN, *options(name))
        assert output_files(out) == output_files(ref)
        assert verify(out)[1] == []
