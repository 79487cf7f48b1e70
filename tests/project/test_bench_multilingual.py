"""bench/build_multilingual.py, the builder of the benchmark's multilingual corpus, on
stand-in packages (no apt, no dpkg-deb): what of a package becomes a document and
its text, what the shards and README.txt hold, that the same packages give the same
corpus, and the errors for missing or doubled .deb files."""

from __future__ import annotations

import gzip
import importlib
import sys

import pyarrow.parquet as pq
import pytest
from realtext import REPO
from test_bench_corpus import mo_catalog

PAGE = """<!DOCTYPE html><html lang="ja"><head><title>題名</title>
<script>var x = "<p>not text</p>";</script><style>p { color: red }</style></head>
<body><header><p>LibreOffice 7.4 ヘルプ</p></header><aside><div>索引</div></aside>
<div id="DisplayArea"><h1>ページの背景</h1>
<p>背景を <a href="x.html">変更</a> します &amp; 保存。</p>

<p>   Choose View - Styles.  </p></div>
<footer><p>This page is: /text/x.xhp</p></footer></body></html>"""


@pytest.fixture
def builder(monkeypatch):
    """The builder, imported fresh with the module it imports (build_corpus)."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    for name in ("build_corpus", "build_multilingual"):
        monkeypatch.setitem(sys.modules, name, None)  # restored after the test
        del sys.modules[name]
    return importlib.import_module("build_multilingual")


def test_a_help_page_is_its_text_without_what_every_page_repeats(builder):
    assert (
        builder.page_text(PAGE)
        == "ページの背景\n背景を 変更 します & 保存。\nChoose View - Styles.\n"
    )


def test_which_members_are_documents(builder):
    help_page = "./usr/share/libreoffice/help/ja/text/shared/01/a.html"
    assert builder.is_document("help", help_page)
    assert not builder.is_document("help", "./usr/share/libreoffice/help/ja/noscript.html")
    assert not builder.is_document("help", "./usr/share/libreoffice/help/ja/bookmarks.js")
    assert builder.is_document("messages", "./usr/lib/libreoffice/program/resource/ja/x.mo")
    assert builder.is_document("man", "./usr/share/man/cs/man1/ls.1.gz")
    assert not builder.is_document("man", "./usr/share/doc/manpages-cs/changelog.gz")


def packages_of(builder, contents: dict[str, dict[str, bytes]]):
    """A stand-in for reading .deb files: each package's (path, bytes) members."""

    def files(deb):
        yield from contents[deb.name.split("_")[0]].items()

    return files


@pytest.fixture
def debs(builder, tmp_path, monkeypatch):
    """Two help pages in Japanese, a Russian catalog (and one in EUC-JP, not
    UTF-8), a Czech man page (and a broken one), as three small packages."""
    monkeypatch.setattr(
        builder,
        "SOURCES",
        {
            "help": ("libreoffice-help-", ("ja",)),
            "messages": ("libreoffice-l10n-", ("ru",)),
            "man": ("manpages-", ("cs",)),
        },
    )
    folder = tmp_path / "debs"
    folder.mkdir()
    for package in ("libreoffice-help-ja", "libreoffice-l10n-ru", "manpages-cs"):
        (folder / f"{package}_1.0_all.deb").write_bytes(b"")
    euc = mo_catalog({"hello": "こんにちは"}).replace(b"\xe3", b"\xa4")
    contents = {
        "libreoffice-help-ja": {
            "./usr/share/libreoffice/help/ja/text/a.html": PAGE.encode(),
            "./usr/share/libreoffice/help/ja/text/empty.html": b"<html><head></head></html>",
            "./usr/share/libreoffice/help/ja/bookmarks.js": b"var bookmarks = [];",
        },
        "libreoffice-l10n-ru": {
            "./usr/lib/libreoffice/program/resource/ru/LC_MESSAGES/sw.mo": mo_catalog(
                {"": "Content-Type: text/plain; charset=UTF-8\n", "File": "Файл"}
            ),
            "./usr/lib/libreoffice/program/resource/ru/LC_MESSAGES/euc.mo": euc,
        },
        "manpages-cs": {
            "./usr/share/man/cs/man1/ls.1.gz": gzip.compress(".TH LS 1\nVypíše obsah\n".encode()),
            "./usr/share/man/cs/man1/bad.1.gz": b"not gzip",
        },
    }
    return folder, packages_of(builder, contents)


def test_collect_reads_every_package_and_counts_what_it_leaves_out(builder, debs):
    folder, files = debs
    sources, read = builder.collect(folder, files)
    assert read == ["libreoffice-help-ja_1.0_all.deb", "libreoffice-l10n-ru_1.0_all.deb",
                    "manpages-cs_1.0_all.deb"]  # fmt: skip
    assert [(s.name, s.texts, s.languages, s.not_utf8, s.empty) for s in sources] == [
        ("help", [builder.page_text(PAGE)], ["ja"], 0, 1),
        ("messages", ["Файл\n"], ["ru"], 1, 0),
        ("man", [".TH LS 1\nVypíše obsah\n"], ["cs"], 1, 0),
    ]


def test_the_corpus_is_the_documents_shuffled_into_shards_with_a_readme(builder, debs, tmp_path):
    folder, files = debs
    sources, read = builder.collect(folder, files)
    out = tmp_path / "corpus"
    summary = builder.write_corpus(out, sources, read, shards=2)
    rows = [r for s in sorted(out.glob("*.parquet")) for r in pq.read_table(s).to_pylist()]
    assert sorted((r["source"], r["language"]) for r in rows) == [
        ("help", "ja"),
        ("man", "cs"),
        ("messages", "ru"),
    ]
    readme = (out / "README.txt").read_text(encoding="utf-8")
    assert readme == "\n".join(summary) + "\n"
    assert "total: 3 documents" in readme
    assert "manpages-cs_1.0_all.deb" in readme
    assert "languages (MB): " in readme and "letters by script (MB): " in readme
    again = tmp_path / "again"
    builder.write_corpus(again, *builder.collect(folder, files), shards=2)
    assert [pq.read_table(s).to_pylist() for s in sorted(again.glob("*.parquet"))] == [
        pq.read_table(s).to_pylist() for s in sorted(out.glob("*.parquet"))
    ]


def test_a_missing_or_doubled_package_is_named(builder, debs):
    folder, files = debs
    (folder / "manpages-cs_1.0_all.deb").unlink()
    with pytest.raises(SystemExit, match=r"no manpages-cs_\*\.deb; run with --install"):
        builder.collect(folder, files)
    (folder / "manpages-cs_1.0_all.deb").write_bytes(b"")
    (folder / "manpages-cs_2.0_all.deb").write_bytes(b"")
    with pytest.raises(SystemExit, match="several versions of manpages-cs"):
        builder.collect(folder, files)


def test_letters_are_counted_by_script(builder):
    texts = ["Файл " * 50_000, "漢字 ab, 1. " * 50_000]
    source = builder.Source("help", texts, ["ru", "ja"])
    # Cyrillic 4 letters x 2 bytes, CJK 2 x 3, Latin 2 x 1; digits and punctuation none.
    assert builder.script_line([source]) == (
        "letters by script (MB): Latin 0.1, CJK 0.3, Cyrillic 0.4, Greek 0.0, Devanagari 0.0"
    )
