"""Build the multilingual benchmark corpus: ~113 MB of text in 28 languages from Debian packages.

    python bench/build_multilingual.py OUTDIR [--shards 32] [--debs DIR] [--install] [--list]

Three sources, each read from the .deb files of Debian packages, which are
downloaded (`apt-get download`, no dependencies) and never installed:

* help      LibreOffice's help pages, libreoffice-help-LANG: the text of each
            HTML page (its header, side bars, footer and scripts left out), one
            document per page
* messages  LibreOffice's translated messages, libreoffice-l10n-LANG: the
            translations (msgstr) of each gettext catalog, one document per catalog
* man       man pages, manpages-LANG, in languages the bench corpus does not use

Scripts: CJK (ja, ko, zh-cn, zh-tw), Cyrillic (ru, uk, bg, sr, be, kk, mk),
Greek, Devanagari (hi) and Latin (15 languages, Vietnamese among them). The
Japanese, Chinese, Russian, German and French man pages are left out on
purpose: other checks use them as text the benchmark never saw.

Every file of a source that decodes as UTF-8 and is not empty is one
document; the others are counted and left out. The documents are shuffled
with a fixed seed and dealt round-robin into OUTDIR/shard-NNNNN.parquet
(columns `text`, `source` and `language`, as bench/build_corpus.py writes),
and OUTDIR/README.txt says what came from where, with each package's file.
The same .deb files give the same corpus.

The .deb files are looked for in DIR (default /tmp/multilingual-debs);
--install first has apt-get download those missing (the network; apt-get
update as root). OUTDIR is built beside itself under a temporary name and
renamed when complete; an existing OUTDIR is refused. --list prints what
would go in and writes nothing.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

from build_corpus import SEED, Source, builder_args, builder_parser, mo_messages, write_sources

DEBS = Path("/tmp/multilingual-debs")
HELP_LANGUAGES = (
    *("ja", "ko", "zh-cn", "zh-tw", "ru", "el", "hi", "vi"),
    *("es", "it", "pt-br", "pl", "nl", "cs", "sv", "tr"),
)
MESSAGE_LANGUAGES = (*HELP_LANGUAGES, "uk", "bg", "sr", "be", "kk")
MAN_LANGUAGES = ("cs", "da", "fi", "hu", "id", "mk", "nb", "nl", "pt-br", "ro", "sr", "sv", "tr")
# source -> (its packages' names before the language, the languages)
SOURCES = {
    "help": ("libreoffice-help-", HELP_LANGUAGES),
    "messages": ("libreoffice-l10n-", MESSAGE_LANGUAGES),
    "man": ("manpages-", MAN_LANGUAGES),
}


def packages() -> list[tuple[str, str, str]]:
    """(source, package, language) of every package read, in reading order."""
    return [
        (source, prefix + lang, lang)
        for source, (prefix, languages) in SOURCES.items()
        for lang in languages
    ]


# ---- what becomes a document --------------------------------------------


class PageText(HTMLParser):
    """The text of an HTML page, less what every page repeats (head, header,
    side bars, footer) and what is no text (scripts, styles)."""

    SKIP = frozenset({"head", "header", "aside", "footer", "script", "style", "noscript"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in self.SKIP:
            self.skipping += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and self.skipping:
            self.skipping -= 1

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def page_text(html: str) -> str:
    """The page's text, one line per non-blank line, stripped."""
    parser = PageText()
    parser.feed(html)
    parser.close()
    lines = (line.strip() for line in "".join(parser.parts).splitlines())
    return "".join(line + "\n" for line in lines if line)


def is_document(source: str, name: str) -> bool:
    """Whether the package member `name` is a document of `source`."""
    if source == "help":
        return name.endswith(".html") and "/text/" in name
    if source == "messages":
        return name.endswith(".mo")
    return name.startswith(("./usr/share/man/", "usr/share/man/")) and name.endswith(".gz")


def read_document(source: str, data: bytes) -> str | None:
    """The member's text, or None when it is no UTF-8 text."""
    if source == "messages":
        data = mo_messages(data)
        if data is None:
            return None
    elif source == "man":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return page_text(text) if source == "help" else text


# ---- reading the packages ------------------------------------------------


def deb_files(deb: Path) -> Iterator[tuple[str, bytes]]:
    """(path, contents) of every regular file of a .deb, in the archive's order,
    without installing it (dpkg-deb reads any of its compressions)."""
    proc = subprocess.Popen(
        ["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
        for member in tar:
            if member.isfile():
                yield member.name, tar.extractfile(member).read()
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{deb}: dpkg-deb failed: {err.decode(errors='replace').strip()}")


def deb_path(debs: Path, package: str) -> Path | None:
    """The one .deb of `package` in `debs` (None: missing)."""
    found = sorted(debs.glob(f"{package}_*.deb"))
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise SystemExit(f"--debs {debs}: several versions of {package} ({names}); keep one")
    return found[0] if found else None


def collect(debs: Path, files=deb_files) -> tuple[list[Source], list[str]]:
    """One Source per source (its documents and their languages), and the
    .deb file names read."""
    sources = {name: Source(name) for name in SOURCES}
    read = []
    for source_name, package, lang in packages():
        deb = deb_path(debs, package)
        if deb is None:
            raise SystemExit(f"--debs {debs}: no {package}_*.deb; run with --install")
        read.append(deb.name)
        source = sources[source_name]
        for name, data in files(deb):
            if not is_document(source_name, name):
                continue
            source.add(read_document(source_name, data), lang)
    return list(sources.values()), read


def download(debs: Path) -> None:
    """apt-get download the packages missing from `debs` (no dependencies)."""
    missing = [p for _, p, _ in packages() if deb_path(debs, p) is None]
    if not missing:
        return
    if shutil.which("apt-get") is None:
        raise SystemExit("--install needs Debian's apt-get")
    debs.mkdir(parents=True, exist_ok=True)
    print(f"downloading {' '.join(missing)}", file=sys.stderr)
    try:
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "download", "-qq", *missing], check=True, cwd=debs)
    except (subprocess.CalledProcessError, PermissionError) as e:
        raise SystemExit(
            f"apt-get failed ({e}); download {' '.join(missing)} into {debs}"
        ) from None


# ---- writing --------------------------------------------------------------


def language_lines(sources: list[Source]) -> list[str]:
    """MB of text per language, all sources together, largest first."""
    by_language: dict[str, int] = {}
    for s in sources:
        for lang, text in zip(s.languages, s.texts, strict=True):
            by_language[lang] = by_language.get(lang, 0) + len(text.encode())
    ranked = sorted(by_language.items(), key=lambda kv: (-kv[1], kv[0]))
    return ["languages (MB): " + ", ".join(f"{k} {v / 1e6:.1f}" for k, v in ranked)]


# Letters by script, as character ranges: enough to say what the corpus holds.
SCRIPTS = {
    "Latin": "A-Za-z\u00c0-\u024f\u1e00-\u1eff",
    "CJK": "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff",
    "Cyrillic": "\u0400-\u052f",
    "Greek": "\u0370-\u03ff\u1f00-\u1fff",
    "Devanagari": "\u0900-\u097f",
}


def script_line(sources: list[Source]) -> str:
    """MB of letters in each script (untranslated passages and markup are Latin)."""
    import re

    counts = dict.fromkeys(SCRIPTS, 0)
    runs = {name: re.compile(f"[{chars}]+") for name, chars in SCRIPTS.items()}
    for s in sources:
        for text in s.texts:
            for name, run in runs.items():
                counts[name] += sum(len(m.encode()) for m in run.findall(text))
    return "letters by script (MB): " + ", ".join(f"{k} {v / 1e6:.1f}" for k, v in counts.items())


def write_corpus(outdir: Path, sources: list[Source], debs: list[str], shards: int) -> list[str]:
    notes = [*language_lines(sources), script_line(sources), "packages: " + ", ".join(debs)]
    notes.append(
        f"built by bench/build_multilingual.py with Python {sys.version.split()[0]}, "
        f"shuffle seed {SEED}"
    )
    return write_sources(outdir, sources, shards, notes)


def main() -> None:
    ap = builder_parser(__doc__, 32, "apt-get download the missing .debs")
    ap.add_argument("--debs", type=Path, default=DEBS, help=f"the .deb files (default {DEBS})")
    args = builder_args(ap)
    if args.install:
        download(args.debs)
    sources, debs = collect(args.debs)
    if args.list:
        print("\n".join([s.line() for s in sources] + language_lines(sources)))
        return
    print("\n".join(write_corpus(args.outdir, sources, debs, args.shards)))
    print(f"wrote {args.outdir}")


if __name__ == "__main__":
    main()
