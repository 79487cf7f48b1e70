"""Build the large benchmark corpus: the C source of Debian's linux-source package, as Parquet.

    python bench/build_linux.py OUTDIR [--shards 40] [--max-mb N] [--tarball PATH] [--install]

Every .c and .h file of the kernel tarball (/usr/src/linux-source-*.tar.xz,
the newest when several) that decodes as UTF-8 and is not empty is one
document (6.1: 55,000 files, 1.18 GB, 17x the bench corpus). The tarball is
read as a stream, in its own order, and never unpacked: each file goes to the
shard that has the fewest bytes so far, so every shard samples the whole tree
(drivers/gpu, a third of the bytes, included) and the first k shards are a
smaller corpus of the same kind. That is what the benchmark's size rows take:
prefixes of the shards, a quarter, a half and all of them; the memory row
takes the shortest prefix of about 500 MB. --max-mb N stops reading the
tarball once N MB of text went in: the first N MB, in the tarball's order
(the encode rows' ~500 MB of C on a machine short of disk or time).

Shards are OUTDIR/shard-NNNNN.parquet with columns `text`, `path` (in the
tarball) and `language` ("c"), written a row group at a time (memory stays
at about SHARDS x ROW_GROUP_BYTES). OUTDIR/README.txt says what went in.
OUTDIR is built beside itself under a temporary name and renamed when
complete, so it exists only whole; an existing OUTDIR is refused. --install
has apt-get install linux-source when no tarball is there (root, network).
"""

from __future__ import annotations

import argparse
import heapq
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from build_corpus import built_whole

SOURCE_DIR = Path("/usr/src")
PACKAGE = "linux-source"
SUFFIXES = (".c", ".h")
ROW_GROUP_BYTES = 4_000_000  # text buffered per shard before it is written


def tarballs(folder: Path = SOURCE_DIR) -> list[Path]:
    """The kernel source tarballs in `folder`, oldest version first."""

    def version(p: Path) -> tuple:
        digits = p.name.removeprefix("linux-source-").removesuffix(".tar.xz").split(".")
        return tuple(int(d) if d.isdigit() else 0 for d in digits)

    return sorted(folder.glob("linux-source-*.tar.xz"), key=version)


def install() -> None:
    if shutil.which("apt-get") is None:
        raise SystemExit("--install needs Debian's apt-get")
    print(f"installing {PACKAGE}", file=sys.stderr)
    try:
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", PACKAGE], check=True)
    except (subprocess.CalledProcessError, PermissionError) as e:
        raise SystemExit(f"apt-get failed ({e}); install {PACKAGE} as root") from None


def documents(tarball: Path, tally: Tally, max_bytes: float = float("inf")):
    """(path, text) of every UTF-8, non-empty .c/.h file, in the tarball's
    order, until `max_bytes` of text went out."""
    with tarfile.open(tarball, "r|*") as tar:
        for member in tar:
            if sum(tally.n_bytes) >= max_bytes:
                tally.capped = True
                return
            if not member.isfile() or not member.name.endswith(SUFFIXES):
                continue
            tally.files += 1
            data = tar.extractfile(member).read()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                tally.not_utf8 += 1
                continue
            if not text:
                tally.empty += 1
                continue
            yield member.name, text


@dataclass
class Tally:
    files: int = 0
    not_utf8: int = 0
    empty: int = 0
    documents: list[int] = field(default_factory=list)  # per shard
    n_bytes: list[int] = field(default_factory=list)  # per shard
    capped: bool = False  # stopped at --max-mb


class Shard:
    """One output shard, written a row group at a time."""

    def __init__(self, path: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.schema = pa.schema([(c, pa.string()) for c in ("text", "path", "language")])
        self.writer = pq.ParquetWriter(path, self.schema)
        self.paths: list[str] = []
        self.texts: list[str] = []
        self.pending = 0  # bytes buffered

    def add(self, path: str, text: str, n_bytes: int) -> None:
        self.paths.append(path)
        self.texts.append(text)
        self.pending += n_bytes
        if self.pending >= ROW_GROUP_BYTES:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa

        if self.texts:
            columns = {"text": self.texts, "path": self.paths, "language": ["c"] * len(self.texts)}
            self.writer.write_table(pa.table(columns, schema=self.schema))
        self.paths, self.texts, self.pending = [], [], 0

    def close(self) -> None:
        self.flush()
        self.writer.close()


def write_corpus(
    outdir: Path, tarball: Path, shards: int, max_bytes: float = float("inf")
) -> list[str]:
    """Deal the tarball's documents (the first `max_bytes` of them) into
    `shards` shards in a temporary sibling of outdir, then rename it to
    outdir; the README lines."""
    tally = Tally(documents=[0] * shards, n_bytes=[0] * shards)
    with built_whole(outdir) as tmp:
        writers = [Shard(tmp / f"shard-{i:05d}.parquet") for i in range(shards)]
        smallest = [(0, i) for i in range(shards)]  # (bytes so far, shard): a heap
        for path, text in documents(tarball, tally, max_bytes):
            n_bytes = len(text.encode())
            size, i = heapq.heappop(smallest)
            writers[i].add(path, text, n_bytes)
            tally.documents[i] += 1
            tally.n_bytes[i] += n_bytes
            heapq.heappush(smallest, (size + n_bytes, i))
        for w in writers:
            w.close()
        summary = readme(tarball, tally)
        (tmp / "README.txt").write_text("\n".join(summary) + "\n", encoding="utf-8")
    return summary


def readme(tarball: Path, t: Tally) -> list[str]:
    total = sum(t.n_bytes)
    first = f"the first {total / 1e6:.0f} MB of " if t.capped else ""
    return [
        f"linux-c: {first}the {', '.join(SUFFIXES)} files of {tarball.name}, in the tarball's "
        "order, each dealt to the shard with the fewest bytes so far",
        f"total: {sum(t.documents)} documents, {total / 1e6:.1f} MB in {len(t.n_bytes)} shards "
        f"(of {t.files} files; left out: {t.not_utf8} not UTF-8, {t.empty} empty)",
        f"shard sizes: {min(t.n_bytes) / 1e6:.1f} to {max(t.n_bytes) / 1e6:.1f} MB",
        f"built by bench/build_linux.py with Python {sys.version.split()[0]}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("outdir", type=Path, help="the corpus folder to create")
    ap.add_argument("--shards", type=int, default=40, help="Parquet shards (default 40)")
    ap.add_argument(
        "--max-mb", type=float, metavar="N", help="stop after N MB of text (default: all)"
    )
    ap.add_argument("--tarball", type=Path, help=f"default: the newest in {SOURCE_DIR}")
    ap.add_argument("--install", action="store_true", help=f"apt-get install {PACKAGE} if needed")
    args = ap.parse_args()
    if args.shards < 1:
        ap.error("--shards must be at least 1")
    if args.max_mb is not None and args.max_mb <= 0:
        ap.error("--max-mb must be above 0")
    if args.outdir.exists():
        raise SystemExit(f"{args.outdir} exists; remove it or choose another folder")
    if args.tarball is None and args.install and not tarballs():
        install()
    tarball = args.tarball or next(reversed(tarballs()), None)
    if tarball is None or not tarball.exists():
        raise SystemExit(
            f"no kernel source tarball in {SOURCE_DIR}: install {PACKAGE} "
            "(or run with --install as root)"
        )
    max_bytes = float("inf") if args.max_mb is None else args.max_mb * 1e6
    print("\n".join(write_corpus(args.outdir, tarball, args.shards, max_bytes)))
    print(f"wrote {args.outdir}")


if __name__ == "__main__":
    main()
