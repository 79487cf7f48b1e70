#!/usr/bin/env python3
"""Rebuild the sample_data/ shards from real text shipped in Debian packages.

This script documents the provenance of every shard in sample_data/ and can
regenerate them; the committed data files are the product, and neither the
pipeline nor the tests run this script.

Requirements (Debian 12 "bookworm"):

    apt-get install python3.11-doc libpython3.11-stdlib manpages-el \
        manpages-uk manpages-ru manpages-ja man-db groff bsdextrautils
    pip install pyarrow

The Chinese (zh_CN) manual pages come from packages that are normally
installed anyway (passwd, login, man-db); the Greek and Ukrainian message
catalogues come from bash, dpkg, apt, coreutils, diffutils and findutils.

Every input list is sorted and every selection is a fixed rule (a fixed list
of names, or "every k-th file in sorted order until a byte budget is
reached"), so with the same package versions the output is byte-identical.
The package versions used for the committed shards are listed in README.md.

Usage:  python3 sample_data/build.py   (writes into the directory of this file)
"""

from __future__ import annotations

import gettext
import gzip
import itertools
import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

OUT = Path(__file__).resolve().parent
DOC_SOURCES = Path("/usr/share/doc/python3.11/html/_sources")
STDLIB = Path("/usr/lib/python3.11")
MAN = Path("/usr/share/man")
LOCALE = Path("/usr/share/locale")

# --------------------------------------------------------------------------
# Fixed selections
# --------------------------------------------------------------------------

# prose-en.parquet: whole tutorial and FAQ, plus a few HOWTOs, split by section.
PROSE_DIRS = ["tutorial", "faq"]
PROSE_EXTRA = [
    "howto/functional.rst.txt",
    "howto/regex.rst.txt",
    "howto/sockets.rst.txt",
    "howto/sorting.rst.txt",
    "howto/unicode.rst.txt",
]
PROSE_ROW_GROUP_SIZE = 128  # rows per Parquet row group (gives several groups)

# code-python.jsonl.gz: whole standard-library modules, one document each.
# Includes three (nearly) empty __init__.py files and a few files with
# non-ASCII characters (re/_casefix.py, encodings/koi8_t.py, statistics.py).
CODE_FILES = [
    "abc.py",
    "base64.py",
    "bisect.py",
    "colorsys.py",
    "concurrent/__init__.py",
    "contextlib.py",
    "copy.py",
    "csv.py",
    "dataclasses.py",
    "encodings/koi8_t.py",
    "fnmatch.py",
    "fractions.py",
    "functools.py",
    "glob.py",
    "graphlib.py",
    "gzip.py",
    "heapq.py",
    "html/__init__.py",
    "html/parser.py",
    "json/__init__.py",
    "json/decoder.py",
    "json/encoder.py",
    "json/scanner.py",
    "json/tool.py",
    "keyword.py",
    "pydoc_data/__init__.py",
    "queue.py",
    "random.py",
    "re/_casefix.py",
    "sched.py",
    "secrets.py",
    "shlex.py",
    "statistics.py",
    "string.py",
    "textwrap.py",
    "tokenize.py",
    "xmlrpc/__init__.py",
]

# multilingual.jsonl: whole rendered manual pages, one document each.
# (language directory, stride k, phase, byte budget).  From the sorted list of
# candidate pages, files with index i where i % k == phase are taken, in
# order, until the UTF-8 size of the selected texts reaches the budget.
MAN_DOC_MAX_BYTES = 60_000  # skip very long pages (bash(1), ...)
MULTI_MAN = [
    ("el", 1, 0, 1_000_000),  # all 5 Greek pages
    ("uk", 9, 0, 220_000),
    ("ru", 9, 0, 180_000),
    ("ja", 41, 0, 180_000),
    ("zh_CN", 4, 0, 60_000),
]
# Greek help texts of bash builtins (msgstr longer than this many characters).
MULTI_GREEK_BASH_MIN_CHARS = 300

# lines.txt.gz: one paragraph per line, interleaved round-robin by source.
LINES_GZ_RST = ["using"]  # English paragraphs from "Python Setup and Usage"
LINES_GZ_MAN = [  # same rule as MULTI_MAN, other phase => other pages
    ("uk", 9, 4, 110_000),
    ("ru", 9, 4, 110_000),
    ("ja", 41, 20, 110_000),
    ("zh_CN", 4, 2, 40_000),
]

# lines.txt (plain): English "What's New" paragraphs and Greek/Ukrainian
# translated program messages.
LINES_TXT_RST = ["whatsnew/3.11.rst.txt"]
LINES_TXT_RST_BUDGET = 70_000
LINES_TXT_MO = [  # (language, catalogue domains, byte budget)
    ("el", ["bash", "diffutils", "dpkg", "findutils", "apt"], 50_000),
    ("uk", ["coreutils", "grep"], 30_000),
]
MO_MIN_CHARS = 40  # skip short messages ("yes", "%s: %s", ...)
PARA_MIN_CHARS = 10

# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def clean(text: str) -> str:
    """Normalise line ends, drop control characters (keep \\n and \\t)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n")


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def owning_package(path: Path) -> str:
    out = subprocess.run(
        ["dpkg", "-S", str(path)], capture_output=True, text=True, check=True
    ).stdout
    return out.split(":", 1)[0].strip()


def is_cjk(ch: str) -> bool:
    if not ch:
        return False
    name = unicodedata.name(ch, "")
    return name.startswith(("CJK", "HIRAGANA", "KATAKANA", "FULLWIDTH", "IDEOGRAPHIC"))


def join_lines(lines: list[str]) -> str:
    """Join the lines of one paragraph with spaces (none between CJK chars)."""
    out = ""
    for line in lines:
        line = re.sub(r"\s+", " ", line).strip()
        if not line:
            continue
        if out and not (is_cjk(out[-1]) and is_cjk(line[0])):
            out += " "
        out += line
    return out


def one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


# --- reStructuredText ------------------------------------------------------

_ADORNMENT = re.compile(r"^([=\-~^*#+'\"`:.])\1{2,}\s*$")


def rst_sections(text: str) -> list[str]:
    """Split a reST file before each section title (title + underline)."""
    lines = text.split("\n")
    starts = [0]
    i = 1
    while i < len(lines):
        if (
            _ADORNMENT.match(lines[i])
            and lines[i - 1].strip()
            and not _ADORNMENT.match(lines[i - 1])
            and len(lines[i].rstrip()) >= len(lines[i - 1].rstrip())
        ):
            start = i - 1
            if start >= 1 and _ADORNMENT.match(lines[start - 1]):  # overline
                start -= 1
            # Labels (".. _name:") and blank lines above a title belong to it.
            while start > starts[-1] and (
                not lines[start - 1].strip() or re.match(r"\.\. _[^:]*:\s*$", lines[start - 1])
            ):
                start -= 1
            if start > starts[-1]:
                starts.append(start)
        i += 1
    starts.append(len(lines))
    sections = []
    for a, b in itertools.pairwise(starts):
        sec = clean("\n".join(lines[a:b]))
        if sec:
            sections.append(sec)
    return sections


_PROSE_DIRECTIVES = (
    "note",
    "warning",
    "seealso",
    "versionadded",
    "versionchanged",
    "deprecated",
    "impl-detail",
    "tip",
    "important",
    "attention",
)


def rst_paragraphs(text: str) -> list[str]:
    """Prose paragraphs of a reST file: no titles, tables, directives, code."""
    blocks = re.split(r"\n\s*\n", clean(text))
    paras = []
    in_literal = False  # inside the indented body of "::" or a code directive
    for block in blocks:
        lines = [line for line in block.split("\n") if line.strip()]
        if not lines:
            continue
        indented = lines[0][:1].isspace()
        if in_literal and indented:
            continue
        in_literal = False
        if any(_ADORNMENT.match(line) for line in lines):
            continue  # section title or simple table
        first = lines[0].strip()
        if first.startswith(".."):
            m = re.match(r"\.\.\s+([\w-]+)::", first)
            in_literal = not (m and m.group(1) in _PROSE_DIRECTIVES)
            continue  # directive, comment or target
        if first.startswith((">>>", "$ ", "|", "+-", ":")):
            continue  # doctest, shell session, line block, grid table, field
        if block.rstrip().endswith("::"):
            in_literal = True
        if indented and lines[0].startswith("      "):
            continue  # deep indentation: option lists, code
        para = join_lines(lines)
        if len(para) >= PARA_MIN_CHARS and re.search(r"[A-Za-z]{3}", para):
            paras.append(para)
    return paras


# --- manual pages ----------------------------------------------------------


def man_candidates(lang: str) -> list[Path]:
    """Regular, non-redirect manual pages of one language, sorted by path."""
    files = []
    for path in sorted((MAN / lang).rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as f:
            head = f.read(200)
        if head.lstrip().startswith(b".so "):
            continue
        files.append(path)
    return files


def render_man(path: Path) -> str:
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", LANG="C.UTF-8")
    env.pop("MANOPT", None)
    env.pop("MAN_KEEP_FORMATTING", None)
    man = subprocess.run(
        ["man", "--nj", "--nh", "-E", "UTF-8", "-l", str(path)],
        capture_output=True,
        env=env,
        check=True,
    ).stdout
    plain = subprocess.run(
        ["col", "-bx"], input=man, capture_output=True, env=env, check=True
    ).stdout
    return clean(plain.decode("utf-8"))


def select_man(lang: str, stride: int, phase: int, budget: int) -> list[tuple[str, str]]:
    """(source, text) of rendered pages: index % stride == phase, until budget."""
    docs = []
    total = 0
    for i, path in enumerate(man_candidates(lang)):
        if i % stride != phase:
            continue
        text = render_man(path)
        size = utf8_len(text)
        if not text or size > MAN_DOC_MAX_BYTES:
            continue
        docs.append((f"{owning_package(path)}:{path}", text))
        total += size
        if total >= budget:
            break
    return docs


def man_paragraphs(text: str) -> list[str]:
    blocks = re.split(r"\n\s*\n", text)
    # The first and last blocks are the page header and footer lines.
    paras = []
    for block in blocks[1:-1]:
        # A line starting in column 0 is a section heading: its own paragraph.
        chunks: list[list[str]] = []
        for line in block.split("\n"):
            if not chunks or not line[:1].isspace():
                chunks.append([])
            chunks[-1].append(line)
            if not line[:1].isspace():
                chunks.append([])
        for chunk in chunks:
            para = join_lines(chunk)
            if len(para) >= PARA_MIN_CHARS:
                paras.append(para)
    return paras


# --- message catalogues ----------------------------------------------------


def mo_messages(lang: str, domain: str) -> tuple[str, list[str]]:
    path = LOCALE / lang / "LC_MESSAGES" / f"{domain}.mo"
    with open(path, "rb") as f:
        catalog = gettext.GNUTranslations(f)._catalog  # noqa: SLF001
    msgs = []
    for key in sorted(catalog, key=lambda k: (str(k), repr(k))):
        value = catalog[key]
        if key == "" or not isinstance(value, str):
            continue
        msgs.append(value)
    return f"{owning_package(path)}:{path}", msgs


# --- writers ---------------------------------------------------------------


def jsonl_line(text: str, source: str) -> str:
    line = json.dumps({"text": text, "source": source}, ensure_ascii=False)
    # Keep each record on one physical line for every line splitter.
    return line.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029") + "\n"


def write_jsonl(path: Path, docs: list[tuple[str, str]], compress: bool) -> None:
    data = "".join(jsonl_line(text, source) for source, text in docs).encode("utf-8")
    write_bytes(path, data, compress)


def write_bytes(path: Path, data: bytes, compress: bool) -> None:
    if compress:
        with open(path, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
                gz.write(data)
    else:
        path.write_bytes(data)


def write_lines(path: Path, paras: list[str], compress: bool) -> None:
    for p in paras:
        assert p and "\n" not in p and "\r" not in p, p
    write_bytes(path, ("\n".join(paras) + "\n").encode("utf-8"), compress)


def round_robin(groups: list[list[str]]) -> list[str]:
    out = []
    seen = set()
    for i in range(max(len(g) for g in groups)):
        for g in groups:
            if i < len(g) and g[i] not in seen:
                seen.add(g[i])
                out.append(g[i])
    return out


# --------------------------------------------------------------------------
# Shards
# --------------------------------------------------------------------------


def build_prose() -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = []
    for d in PROSE_DIRS:
        files += sorted((DOC_SOURCES / d).glob("*.rst.txt"))
    files += [DOC_SOURCES / f for f in PROSE_EXTRA]
    pkg = owning_package(files[0])
    texts, sources = [], []
    for path in files:
        rel = path.relative_to(DOC_SOURCES)
        for n, section in enumerate(rst_sections(path.read_text("utf-8"))):
            texts.append(section)
            sources.append(f"{pkg}:{DOC_SOURCES}/{rel}#section-{n}")
    table = pa.table(
        {"text": pa.array(texts, pa.string()), "source": pa.array(sources, pa.string())}
    )
    pq.write_table(
        table,
        OUT / "prose-en.parquet",
        row_group_size=PROSE_ROW_GROUP_SIZE,
        compression="snappy",
    )
    report("prose-en.parquet", texts)


def build_code() -> None:
    docs = []
    for rel in CODE_FILES:
        path = STDLIB / rel
        docs.append((f"{owning_package(path)}:{path}", path.read_bytes().decode("utf-8")))
    write_jsonl(OUT / "code-python.jsonl.gz", docs, compress=True)
    report("code-python.jsonl.gz", [t for _, t in docs])


def build_multilingual() -> None:
    docs = []
    for lang, stride, phase, budget in MULTI_MAN:
        docs += select_man(lang, stride, phase, budget)
        if lang == "el":
            source, msgs = mo_messages("el", "bash")
            docs += [(source, clean(m)) for m in msgs if len(m) > MULTI_GREEK_BASH_MIN_CHARS]
    write_jsonl(OUT / "multilingual.jsonl", docs, compress=False)
    report("multilingual.jsonl", [t for _, t in docs])


def build_lines_gz() -> None:
    groups = []
    english = []
    for d in LINES_GZ_RST:
        for path in sorted((DOC_SOURCES / d).glob("*.rst.txt")):
            english += rst_paragraphs(path.read_text("utf-8"))
    groups.append(english)
    for lang, stride, phase, budget in LINES_GZ_MAN:
        paras = []
        for _, text in select_man(lang, stride, phase, budget):
            paras += man_paragraphs(text)
        groups.append(paras)
    paras = round_robin(groups)
    write_lines(OUT / "lines.txt.gz", paras, compress=True)
    report("lines.txt.gz", paras)


def build_lines_txt() -> None:
    groups = []
    english = []
    for rel in LINES_TXT_RST:
        english += rst_paragraphs((DOC_SOURCES / rel).read_text("utf-8"))
    groups.append(take_budget(english, LINES_TXT_RST_BUDGET))
    for lang, domains, budget in LINES_TXT_MO:
        paras = []
        for domain in domains:
            _, msgs = mo_messages(lang, domain)
            for m in msgs:
                for block in re.split(r"\n\s*\n", clean(m)):
                    para = one_line(block)
                    if len(para) >= MO_MIN_CHARS:
                        paras.append(para)
        groups.append(take_budget(paras, budget))
    paras = round_robin(groups)
    write_lines(OUT / "lines.txt", paras, compress=False)
    report("lines.txt", paras)


def take_budget(items: list[str], budget: int) -> list[str]:
    out, total = [], 0
    for item in items:
        if total >= budget:
            break
        out.append(item)
        total += utf8_len(item)
    return out


def report(name: str, texts: list[str]) -> None:
    size = (OUT / name).stat().st_size
    text_bytes = sum(utf8_len(t) for t in texts)
    print(f"{name:24s} docs={len(texts):5d} text={text_bytes:9d} B  file={size:9d} B")


def main() -> int:
    build_prose()
    build_code()
    build_multilingual()
    build_lines_gz()
    build_lines_txt()
    return 0


if __name__ == "__main__":
    sys.exit(main())
