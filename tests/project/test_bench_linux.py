"""bench/build_linux.py, the builder of the benchmark's large corpus of C, on a small
stand-in tarball: what becomes a document, how documents are dealt to shards, what
README.txt says, and that the corpus folder exists only whole."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
import tarfile

import pyarrow.parquet as pq
import pytest
from realtext import REPO

BUILDER = REPO / "bench" / "build_linux.py"

FILES = {
    "linux/init/main.c": "int main(void) { return 0; }\n",
    "linux/include/big.h": "#define REG_" + "A" * 200 + " 0x1\n",
    "linux/Documentation/a.txt": "not C\n",
    "linux/fs/empty.c": "",
    "linux/drivers/latin1.c": "/* caf\xe9 */\n",  # written as Latin-1 below
    "linux/mm/σ.h": "/* ünïcode */\n",
    "linux/kernel/x.c": "void x(void);\n",
}


@pytest.fixture
def builder(monkeypatch):
    monkeypatch.syspath_prepend(str(BUILDER.parent))  # for the module it imports (build_corpus)
    spec = importlib.util.spec_from_file_location("build_linux", BUILDER)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "build_linux", module)  # dataclasses look it up
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def tarball(tmp_path):
    path = tmp_path / "src" / "linux-source-6.1.tar.xz"
    path.parent.mkdir()
    with tarfile.open(path, "w:xz") as tar:
        folder = tarfile.TarInfo("linux/include")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)
        for name, text in FILES.items():
            data = text.encode("latin-1" if "latin1" in name else "utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def read_corpus(folder):
    return {p.name: pq.read_table(p).to_pylist() for p in sorted(folder.glob("*.parquet"))}


def test_builder_deals_every_utf8_c_file_once_to_the_smallest_shard(builder, tarball, tmp_path):
    out = tmp_path / "corpus"
    summary = builder.write_corpus(out, tarball, shards=2)
    shards = read_corpus(out)
    # In the tarball's order, each document to the shard with fewer bytes so
    # far (the first on a tie): main.c to 0, big.h to 1, σ.h to 0, x.c to 0
    # (main.c + σ.h are still smaller than big.h).
    assert {name: [r["path"] for r in rows] for name, rows in shards.items()} == {
        "shard-00000.parquet": ["linux/init/main.c", "linux/mm/σ.h", "linux/kernel/x.c"],
        "shard-00001.parquet": ["linux/include/big.h"],
    }
    rows = [r for rows in shards.values() for r in rows]
    assert {r["path"]: r["text"] for r in rows} == {
        k: v for k, v in FILES.items() if k.endswith((".c", ".h")) and v and "latin1" not in k
    }
    assert {r["language"] for r in rows} == {"c"}
    readme = (out / "README.txt").read_text(encoding="utf-8")
    assert readme == "\n".join(summary) + "\n"
    assert "total: 4 documents" in readme and "in 2 shards" in readme
    assert "(of 6 files; left out: 1 not UTF-8, 1 empty)" in readme
    assert "linux-source-6.1.tar.xz" in readme
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "src"]
    builder.write_corpus(tmp_path / "again", tarball, shards=2)
    assert read_corpus(tmp_path / "again") == shards


def test_max_bytes_keeps_the_first_documents_in_the_tarballs_order(builder, tarball, tmp_path):
    # main.c (29 bytes) is below the cap of 30, big.h takes the total past it: both go in,
    # and reading stops there.
    summary = builder.write_corpus(tmp_path / "corpus", tarball, shards=2, max_bytes=30)
    rows = [r for rows in read_corpus(tmp_path / "corpus").values() for r in rows]
    assert [r["path"] for r in rows] == ["linux/init/main.c", "linux/include/big.h"]
    assert summary[0].startswith("linux-c: the first 0 MB of the .c, .h files of")
    assert "total: 2 documents" in summary[1]
    uncapped = builder.write_corpus(tmp_path / "all", tarball, shards=2)
    assert uncapped[0].startswith("linux-c: the .c, .h files of")


def test_builder_writes_row_groups_as_it_goes(builder, tarball, tmp_path, monkeypatch):
    monkeypatch.setattr(builder, "ROW_GROUP_BYTES", 1)
    builder.write_corpus(tmp_path / "corpus", tarball, shards=1)
    shard = pq.ParquetFile(tmp_path / "corpus" / "shard-00000.parquet")
    assert shard.metadata.num_row_groups == shard.metadata.num_rows == 4


def test_builder_leaves_no_folder_when_writing_fails(builder, tarball, tmp_path, monkeypatch):
    def fail(self):
        raise OSError("disk full")

    monkeypatch.setattr(builder.Shard, "close", fail)
    with pytest.raises(OSError, match="disk full"):
        builder.write_corpus(tmp_path / "corpus", tarball, shards=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_builder_finds_the_newest_tarball_and_refuses_what_it_cannot_do(
    builder, tarball, tmp_path, monkeypatch
):
    for version in ("5.10", "6.10"):
        (tarball.parent / f"linux-source-{version}.tar.xz").write_bytes(b"")
    assert [p.name for p in builder.tarballs(tarball.parent)] == [
        "linux-source-5.10.tar.xz",
        "linux-source-6.1.tar.xz",
        "linux-source-6.10.tar.xz",
    ]
    (tmp_path / "corpus").mkdir()
    monkeypatch.setattr(sys, "argv", ["build_linux.py", str(tmp_path / "corpus")])
    with pytest.raises(SystemExit, match="exists"):
        builder.main()
    monkeypatch.setattr(builder, "tarballs", lambda folder=None: [])
    monkeypatch.setattr(sys, "argv", ["build_linux.py", str(tmp_path / "new")])
    with pytest.raises(SystemExit, match="no kernel source tarball .* install linux-source"):
        builder.main()
    assert not (tmp_path / "new").exists()


def test_builder_help_runs_from_a_fresh_interpreter():
    result = subprocess.run(
        [sys.executable, str(BUILDER), "--help"], capture_output=True, text=True, check=True
    )
    assert "OUTDIR" in result.stdout.upper() and "--install" in result.stdout
