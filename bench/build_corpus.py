"""Build the benchmark corpus: ~60 MB of real text from Debian packages, as Parquet shards.

    python bench/build_corpus.py OUTDIR [--shards 16] [--install] [--list]

Three sources, each a set of files that Debian packages install:

* prose-en          the Python documentation sources (reStructuredText), python3.11-doc
* code-python       the standard library of the interpreter running this script (.py)
* man-multilingual  man pages in Spanish, Italian, Polish, Ukrainian, Greek and Vietnamese,
                    manpages-{es,it,pl,uk,el,vi} (and whatever else installed pages there)

Every file that decodes as UTF-8 (gzip-compressed man pages are decompressed first)
and is not empty is one document; the others are counted and left out. The documents
are shuffled with a fixed seed and dealt round-robin into OUTDIR/shard-NNNNN.parquet
(columns `text` and `source`), and OUTDIR/README.txt says what came from where.

OUTDIR is built beside itself under a temporary name and renamed when complete, so
it exists only whole: `make bench` builds it when it is missing. An existing OUTDIR
is refused. --install first has apt-get install the packages that dpkg reports
missing (needs root and the network); --list only prints what would go in.
Needs pyarrow (the project's own dependency).
"""

from __future__ import annotations

import argparse
import gzip
import random
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

SEED = 0
MAN_LANGUAGES = ("es", "it", "pl", "uk", "el", "vi")
DOC_PACKAGE = "python3.11-doc"
DOC_SOURCES = Path("/usr/share/doc/python3.11/html/_sources")
MAN_ROOT = Path("/usr/share/man")
PACKAGES = (DOC_PACKAGE, *(f"manpages-{lang}" for lang in MAN_LANGUAGES))


def prose_files() -> list[Path]:
    return sorted(DOC_SOURCES.rglob("*.txt"))


def code_files() -> list[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts)


def man_files() -> list[Path]:
    return sorted(p for lang in MAN_LANGUAGES for p in (MAN_ROOT / lang).rglob("*.gz"))


SOURCES = {"prose-en": prose_files, "code-python": code_files, "man-multilingual": man_files}


@dataclass
class Source:
    name: str
    texts: list[str] = field(default_factory=list)
    files: int = 0
    not_utf8: int = 0
    empty: int = 0

    @property
    def n_bytes(self) -> int:
        return sum(len(t.encode()) for t in self.texts)

    def line(self) -> str:
        left = f"; left out: {self.not_utf8} not UTF-8, {self.empty} empty" if self.files else ""
        return (
            f"{self.name}: {len(self.texts)} documents, {self.n_bytes / 1e6:.1f} MB "
            f"(of {self.files} files{left})"
        )


def read_document(path: Path) -> str | None:
    """The file's text, or None when it is no UTF-8 text."""
    data = path.read_bytes()
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
        for path in files():
            source.files += 1
            text = read_document(path)
            if text is None:
                source.not_utf8 += 1
            elif not text:
                source.empty += 1
            else:
                source.texts.append(text)
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
    """Write the shards and README.txt into a temporary sibling, then rename it to outdir."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = [(s.name, t) for s in sources for t in s.texts]
    random.Random(SEED).shuffle(docs)
    total = sum(s.n_bytes for s in sources)
    summary = [s.line() for s in sources]
    summary.append(f"total: {len(docs)} documents, {total / 1e6:.1f} MB in {shards} shards")
    summary.append(
        f"built by bench/build_corpus.py with Python {sys.version.split()[0]} "
        f"(standard library {sysconfig.get_paths()['stdlib']}), shuffle seed {SEED}"
    )
    outdir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.", dir=outdir.parent))
    try:
        for i in range(shards):
            part = docs[i::shards]
            table = pa.table(
                {"text": [t for _, t in part], "source": [name for name, _ in part]},
                schema=pa.schema([("text", pa.string()), ("source", pa.string())]),
            )
            pq.write_table(table, tmp / f"shard-{i:05d}.parquet")
        (tmp / "README.txt").write_text("\n".join(summary) + "\n", encoding="utf-8")
        tmp.chmod(0o755)
        tmp.rename(outdir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("outdir", type=Path, nargs="?", help="the corpus folder to create")
    ap.add_argument("--shards", type=int, default=16, help="Parquet shards (default 16)")
    ap.add_argument(
        "--install", action="store_true", help="apt-get install the missing packages first"
    )
    ap.add_argument("--list", action="store_true", help="print what would go in; write nothing")
    args = ap.parse_args()
    if not args.list and args.outdir is None:
        ap.error("OUTDIR is needed (or --list)")
    if args.shards < 1:
        ap.error("--shards must be at least 1")
    if args.outdir is not None and not args.list and args.outdir.exists():
        raise SystemExit(f"{args.outdir} exists; remove it or choose another folder")
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
