"""bench/build_corpus.py, the builder `make bench` runs when its corpus is missing, on
small stand-in sources: what becomes a document, what the shards and README.txt hold,
and that the corpus folder exists only whole."""

from __future__ import annotations

import gzip
import importlib.util
import struct
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from realtext import REPO

BUILDER = REPO / "bench" / "build_corpus.py"


def mo_catalog(messages: dict[str, str]) -> bytes:
    """A compiled gettext catalog (little-endian .mo), entries sorted by msgid as msgfmt writes."""
    entries = sorted((k.encode(), v.encode()) for k, v in messages.items())
    n = len(entries)
    originals, translations = 28, 28 + 8 * n
    offset = 28 + 16 * n
    tables, blobs = [b"", b""], b""
    for side in (0, 1):  # all msgids, then all msgstrs
        for entry in entries:
            tables[side] += struct.pack("<2I", len(entry[side]), offset + len(blobs))
            blobs += entry[side] + b"\0"
    header = struct.pack("<7I", 0x950412DE, 0, n, originals, translations, 0, 0)
    return header + tables[0] + tables[1] + blobs


@pytest.fixture
def builder(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("build_corpus", BUILDER)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "build_corpus", module)  # dataclasses look it up
    spec.loader.exec_module(module)
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("prose one\n", encoding="utf-8")
    (src / "b.txt").write_text("πρόζα δύο\n", encoding="utf-8")
    (src / "empty.txt").write_bytes(b"")
    (src / "c.py").write_text("x = 1\n", encoding="utf-8")
    (src / "latin1.py").write_bytes("caf\xe9\n".encode("latin-1"))
    (src / "man.1.gz").write_bytes(gzip.compress("Привіт\n".encode()))
    (src / "broken.1.gz").write_bytes(b"not gzip at all")
    header = "Content-Type: text/plain; charset=UTF-8\n"
    plural = "{0} file\0{0} files"
    (src / "ja.mo").write_bytes(
        mo_catalog({"": header, "hello": "こんにちは", plural: "1 ファイル\0{0} ファイル"})
    )
    (src / "ko.mo").write_bytes(mo_catalog({"": header, "hello": "안녕", "untranslated": ""}))
    (src / "euc.mo").write_bytes(mo_catalog({"hello": "こんにちは"}).replace(b"\xe3", b"\xa4"))
    (src / "header-only.mo").write_bytes(mo_catalog({"": header}))
    (src / "not-a-catalog.mo").write_bytes(b"\0" * 40)
    monkeypatch.setattr(
        module,
        "SOURCES",
        {
            "prose-en": lambda: [(src / f, "en") for f in ("a.txt", "b.txt", "empty.txt")],
            "code-python": lambda: [(src / "c.py", "en"), (src / "latin1.py", "en")],
            "man-multilingual": lambda: [(src / "broken.1.gz", "uk"), (src / "man.1.gz", "uk")],
            "messages-cjk": lambda: [
                (src / f, f.split(".")[0] if f[:2] in ("ja", "ko") else "ja")
                for f in ("ja.mo", "ko.mo", "euc.mo", "header-only.mo", "not-a-catalog.mo")
            ],
        },
    )
    return module


def read_corpus(folder):
    rows = []
    for shard in sorted(folder.glob("*.parquet")):
        rows += pq.read_table(shard).to_pylist()
    return rows


def test_builder_writes_every_utf8_document_once(builder, tmp_path):
    out = tmp_path / "corpus"
    sources = builder.collect()
    assert [(s.name, len(s.texts), s.not_utf8, s.empty) for s in sources] == [
        ("prose-en", 2, 0, 1),
        ("code-python", 1, 1, 0),
        ("man-multilingual", 1, 1, 0),
        ("messages-cjk", 2, 2, 1),
    ]
    summary = builder.write_corpus(out, sources, shards=3)
    assert sorted(p.name for p in out.iterdir()) == [
        "README.txt",
        "shard-00000.parquet",
        "shard-00001.parquet",
        "shard-00002.parquet",
    ]
    rows = read_corpus(out)
    # Catalogs: the translations only, in msgid order, plural forms a line each,
    # untranslated entries and the header left out.
    assert sorted((r["source"], r["language"], r["text"]) for r in rows) == [
        ("code-python", "en", "x = 1\n"),
        ("man-multilingual", "uk", "Привіт\n"),
        ("messages-cjk", "ja", "こんにちは\n1 ファイル\n{0} ファイル\n"),
        ("messages-cjk", "ko", "안녕\n"),
        ("prose-en", "en", "prose one\n"),
        ("prose-en", "en", "πρόζα δύο\n"),
    ]
    readme = (out / "README.txt").read_text(encoding="utf-8")
    assert readme == "\n".join(summary) + "\n"
    assert "total: 6 documents" in readme and "1 not UTF-8, 0 empty" in readme
    sliced = len("Привіт\nこんにちは\n1 ファイル\n{0} ファイル\n안녕\n".encode())
    assert "multilingual slice (uk, el, vi, ja, ko, zh_CN, zh_TW): 3 documents" in readme
    assert f"{sliced / 1e6:.1f} MB" in readme.splitlines()[-2]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".corpus")] == []
    # The same sources give the same shards (a fixed shuffle).
    builder.write_corpus(tmp_path / "again", builder.collect(), shards=3)
    assert read_corpus(tmp_path / "again") == rows


def test_builder_leaves_no_folder_when_writing_fails(builder, tmp_path, monkeypatch):
    import pyarrow.parquet

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(pyarrow.parquet, "write_table", fail)
    with pytest.raises(OSError, match="disk full"):
        builder.write_corpus(tmp_path / "corpus", builder.collect(), shards=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_builder_refuses_an_existing_folder_and_missing_sources(builder, tmp_path, monkeypatch):
    (tmp_path / "corpus").mkdir()
    monkeypatch.setattr(sys, "argv", ["build_corpus.py", str(tmp_path / "corpus")])
    with pytest.raises(SystemExit, match="exists"):
        builder.main()
    monkeypatch.setitem(builder.SOURCES, "prose-en", lambda: [])
    monkeypatch.setattr(sys, "argv", ["build_corpus.py", str(tmp_path / "new")])
    with pytest.raises(SystemExit, match="no text for prose-en: install python3.11-doc"):
        builder.main()
    assert not (tmp_path / "new").exists()


def test_builder_help_runs_from_a_fresh_interpreter():
    result = subprocess.run(
        [sys.executable, str(BUILDER), "--help"], capture_output=True, text=True, check=True
    )
    assert "OUTDIR" in result.stdout.upper() and "--install" in result.stdout
