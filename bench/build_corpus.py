"""Build the benchmark corpus: ~65 MB of real text from Debian packages, as Parquet shards.

    python bench/build_corpus.py OUTDIR [--shards 16] [--install] [--list]

Four sources, each a set of files that Debian packages install:

* prose-en          the Python documentation sources (reStructuredText), python3.11-doc
* code-python       the standard library of the interpreter running this script (.py)
* man-multilingual  man pages in Spanish, Italian, Polish, Ukrainian, Greek and Vietnamese,
                    manpages-{es,it,pl,uk,el,vi} (and whatever else installed pages there)
* messages-cjk      the translated messages (msgstr) of the gettext catalogs in Japanese,
                    Korean and Chinese (zh_CN, zh_TW) of the packages in CATALOGS
                    (coreutils, bash, libc-l10n, git, gtk, glib, ...): one document per
                    catalog and language, its messages one after another

The Japanese, Chinese, Russian, German and French man-page packages are left out on
purpose: other checks use them as text the benchmark never saw.

Every file that decodes as UTF-8 (gzip-compressed man pages are decompressed first)
and is not empty is one document; the others are counted and left out. The documents
are shuffled with a fixed seed and dealt round-robin into OUTDIR/shard-NNNNN.parquet
(columns `text`, `source` and `language`), and OUTDIR/README.txt says what came from
where. The benchmark's multilingual slice is the documents whose language is in
MULTILINGUAL: non-Latin scripts (Cyrillic, Greek, CJK) and Vietnamese.

OUTDIR is built beside itself under a temporary name and renamed when complete, so
it exists only whole: `make bench` builds it when it is missing. An existing OUTDIR
is refused. --install first has apt-get install the packages that dpkg reports
missing (needs root and the network); --list only prints what would go in.
Needs pyarrow (the project's own dependency).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import random
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SEED = 0
MAN_LANGUAGES = ("es", "it", "pl", "uk", "el", "vi")
DOC_PACKAGE = "python3.11-doc"
DOC_SOURCES = Path("/usr/share/doc/python3.11/html/_sources")
MAN_ROOT = Path("/usr/share/man")
CJK_LANGUAGES = ("ja", "ko", "zh_CN", "zh_TW")
LOCALE_ROOT = Path("/usr/share/locale")
# gettext domain -> the Debian package that installs its catalogs. Chosen for
# the amount of CJK text and for being small installs (no services).
CATALOGS = {
    "coreutils": "coreutils",
    "bash": "bash",
    "dpkg": "dpkg",
    "tar": "tar",
    "libc": "libc-l10n",
    "git": "git",
    "gettext-tools": "gettext",
    "gettext-runtime": "gettext-base",
    "gnupg2": "gnupg-l10n",
    "glib20": "libglib2.0-data",
    "gtk30": "libgtk-3-common",
    "gtk30-properties": "libgtk-3-common",
    "wget": "wget",
    "binutils": "binutils-common",
    "bfd": "binutils-common",
    "ld": "binutils-common",
}
MULTILINGUAL = ("uk", "el", "vi", *CJK_LANGUAGES)
PACKAGES = (
    DOC_PACKAGE,
    *(f"manpages-{lang}" for lang in MAN_LANGUAGES),
    *dict.fromkeys(CATALOGS.values()),
)


def prose_files() -> list[tuple[Path, str]]:
    return [(p, "en") for p in sorted(DOC_SOURCES.rglob("*.txt"))]


def code_files() -> list[tuple[Path, str]]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts)
    return [(p, "en") for p in files]


def man_files() -> list[tuple[Path, str]]:
    return [(p, lang) for lang in MAN_LANGUAGES for p in sorted((MAN_ROOT / lang).rglob("*.gz"))]


def catalog_files() -> list[tuple[Path, str]]:
    found = []
    for lang in CJK_LANGUAGES:
        for domain in CATALOGS:
            path = LOCALE_ROOT / lang / "LC_MESSAGES" / f"{domain}.mo"
            if path.exists():  # not every package translates into every language
                found.append((path, lang))
    return found


# name -> the (file, language) pairs of that source
SOURCES = {
    "prose-en": prose_files,
    "code-python": code_files,
    "man-multilingual": man_files,
    "messages-cjk": catalog_files,
}


@dataclass
class Source:
    name: str
    texts: list[str] = field(default_factory=list)
    languages: list[str] = field(default_factory=list)  # one per text
    files: int = 0
    not_utf8: int = 0
    empty: int = 0

    @property
    def n_bytes(self) -> int:
        return sum(len(t.encode()) for t in self.texts)

    def add(self, text: str | None, language: str) -> None:
        """One file read as `text` (None: not UTF-8), counted whatever it is."""
        self.files += 1
        if text is None:
            self.not_utf8 += 1
        elif not text:
            self.empty += 1
        else:
            self.texts.append(text)
            self.languages.append(language)

    def line(self) -> str:
        left = f"; left out: {self.not_utf8} not UTF-8, {self.empty} empty" if self.files else ""
        return (
            f"{self.name}: {len(self.texts)} documents, {self.n_bytes / 1e6:.1f} MB "
            f"(of {self.files} files{left})"
        )


def mo_messages(data: bytes) -> bytes | None:
    """The translations (msgstr) of a compiled gettext catalog, one per line in
    the catalog's order, plural forms on lines of their own; the header entry
    (msgid "") is metadata, not text, and is left out. None: not a catalog."""
    for order in "<>":
        if len(data) >= 20 and struct.unpack_from(order + "I", data)[0] == 0x950412DE:
            break
    else:
        return None
    n, originals, translations = struct.unpack_from(order + "3I", data, 8)
    lines = []
    for i in range(n):
        msgid_length = struct.unpack_from(order + "I", data, originals + 8 * i)[0]
        length, offset = struct.unpack_from(order + "2I", data, translations + 8 * i)
        if msgid_length and length:
            lines.append(data[offset : offset + length].replace(b"\0", b"\n"))
    return b"".join(line + b"\n" for line in lines)


def read_document(path: Path) -> str | None:
    """The file's text, or None when it is no UTF-8 text."""
    data = path.read_bytes()
    if path.suffix == ".mo":
        data = mo_messages(data)
        if data is None:
            return None
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def collect() -> list[Source]:
    sources = []
    for name, files in SOURCES.items():
        source = Source(name)
        for path, language in files():
            source.add(read_document(path), language)
        sources.append(source)
    return sources


def missing_packages() -> list[str]:
    missing = []
    for package in PACKAGES:
        status = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True
        )
        if status.returncode != 0 or "install ok installed" not in status.stdout:
            missing.append(package)
    return missing


def install() -> None:
    if shutil.which("dpkg-query") is None or shutil.which("apt-get") is None:
        raise SystemExit("--install needs Debian's dpkg-query and apt-get")
    missing = missing_packages()
    if not missing:
        return
    print(f"installing {' '.join(missing)}", file=sys.stderr)
    try:
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True)
    except (subprocess.CalledProcessError, PermissionError) as e:
        raise SystemExit(f"apt-get failed ({e}); install {' '.join(missing)} as root") from None


def write_corpus(outdir: Path, sources: list[Source], shards: int) -> list[str]:
    """Write the sources' documents as the corpus; the README lines."""
    sliced = [
        t
        for s in sources
        for lang, t in zip(s.languages, s.texts, strict=True)
        if lang in MULTILINGUAL
    ]
    notes = [
        f"multilingual slice ({', '.join(MULTILINGUAL)}): {len(sliced)} documents, "
        f"{sum(len(t.encode()) for t in sliced) / 1e6:.1f} MB",
        f"built by bench/build_corpus.py with Python {sys.version.split()[0]} "
        f"(standard library {sysconfig.get_paths()['stdlib']}), shuffle seed {SEED}",
    ]
    return write_sources(outdir, sources, shards, notes)


def write_sources(outdir: Path, sources: list[Source], shards: int, notes: list[str]) -> list[str]:
    """Shuffle the sources' documents (seed SEED) and deal them round-robin into
    `shards` Parquet shards in outdir (columns text, source, language), with
    README.txt: a line per source, the total, then `notes`. Returns its lines."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = [
        (s.name, lang, t) for s in sources for lang, t in zip(s.languages, s.texts, strict=True)
    ]
    random.Random(SEED).shuffle(docs)
    total = sum(s.n_bytes for s in sources)
    summary = [s.line() for s in sources]
    summary.append(f"total: {len(docs)} documents, {total / 1e6:.1f} MB in {shards} shards")
    summary += notes
    schema = pa.schema([(c, pa.string()) for c in ("text", "source", "language")])
    with built_whole(outdir) as tmp:
        for i in range(shards):
            part = docs[i::shards]
            names, languages, texts = zip(*part, strict=True) if part else ((), (), ())
            table = pa.table({"text": texts, "source": names, "language": languages}, schema=schema)
            pq.write_table(table, tmp / f"shard-{i:05d}.parquet")
        (tmp / "README.txt").write_text("\n".join(summary) + "\n", encoding="utf-8")
    return summary


@contextlib.contextmanager
def built_whole(outdir: Path) -> Iterator[Path]:
    """A temporary sibling of outdir to build the corpus in, renamed to outdir
    when the block completes and removed when it fails: outdir exists only whole."""
    outdir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.", dir=outdir.parent))
    try:
        yield tmp
        tmp.chmod(0o755)
        tmp.rename(outdir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def builder_parser(doc: str, shards: int, install: str) -> argparse.ArgumentParser:
    """The options of a corpus builder (this one, build_multilingual.py): OUTDIR,
    --shards (default `shards`), --install (`install`: what it does) and --list."""
    ap = argparse.ArgumentParser(
        description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("outdir", type=Path, nargs="?", help="the corpus folder to create")
    ap.add_argument("--shards", type=int, default=shards, help=f"Parquet shards (default {shards})")
    ap.add_argument("--install", action="store_true", help=install)
    ap.add_argument("--list", action="store_true", help="print what would go in; write nothing")
    return ap


def builder_args(ap: argparse.ArgumentParser) -> argparse.Namespace:
    """The builder's arguments, checked: an OUTDIR unless --list, one that does
    not exist yet, and at least one shard."""
    args = ap.parse_args()
    if not args.list and args.outdir is None:
        ap.error("OUTDIR is needed (or --list)")
    if args.shards < 1:
        ap.error("--shards must be at least 1")
    if args.outdir is not None and not args.list and args.outdir.exists():
        raise SystemExit(f"{args.outdir} exists; remove it or choose another folder")
    return args


def main() -> None:
    ap = builder_parser(__doc__, 16, "apt-get install the missing packages first")
    args = builder_args(ap)
    if args.install:
        install()
    sources = collect()
    empty = [s.name for s in sources if not s.texts]
    if args.list or empty:
        for s in sources:
            print(s.line())
    if empty:
        raise SystemExit(
            f"no text for {', '.join(empty)}: install {' '.join(PACKAGES)} "
            "(or run with --install as root)"
        )
    if args.list:
        return
    print("\n".join(write_corpus(args.outdir, sources, args.shards)))
    print(f"wrote {args.outdir}")


if __name__ == "__main__":
    main()
