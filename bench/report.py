"""The benchmark's one table, as Markdown (readable in a terminal too), and its
summary: a few rows of tokenmill against each peer, for the README."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

MB = 1_000_000


@dataclass
class Row:
    phase: str  # train | encode | scaling
    contender: str
    seconds: float
    peak_rss: int  # bytes, largest single process
    tree_rss: int  # bytes, sum over the process tree
    n_bytes: int  # corpus text bytes processed (0: no text, no MB/s)
    baseline: Row | None = None  # what the ratio columns compare against
    cpu_seconds: float = 0.0  # user + system time of the child's tree, whole life
    process_seconds: float = 0.0  # the child's whole life, start-up included
    other_cores: float = 0.0  # CPU taken by other processes meanwhile, in cores
    ratio: float | None = None  # the speed × shown, when not the two walls' quotient

    @property
    def mb_per_s(self) -> float:
        return self.n_bytes / MB / self.seconds

    @property
    def speedup(self) -> float | None:
        """How many times faster the tokenmill side is (baseline for peers)."""
        if self.ratio is not None:
            return self.ratio
        if self.baseline is None:
            return None
        if self.phase == "scaling":
            return self.baseline.seconds / self.seconds
        return self.seconds / self.baseline.seconds

    @property
    def memory_ratio(self) -> float | None:
        """tokenmill's tree RSS over this peer's (peers' rows only)."""
        if self.baseline is None or self.phase == "scaling":
            return None
        return self.baseline.tree_rss / self.tree_rss

    def to_dict(self) -> dict:
        return {
            "phase": self.phase,
            "contender": self.contender,
            "seconds": round(self.seconds, 3),
            "mb_per_s": round(self.mb_per_s, 2),
            "peak_rss_mb": round(self.peak_rss / MB, 1),
            "tree_rss_mb": round(self.tree_rss / MB, 1),
            "speedup": _round(self.speedup),
            "memory_ratio": _round(self.memory_ratio),
            "cpu_seconds": round(self.cpu_seconds, 2),
            "process_seconds": round(self.process_seconds, 2),
            "other_cores": round(self.other_cores, 2),
        }

    @classmethod
    def from_dict(cls, d: dict) -> Row:
        """A row back from its `to_dict` (a run's JSON), its ratio as measured."""
        return cls(
            phase=d["phase"],
            contender=d["contender"],
            seconds=d["seconds"],
            peak_rss=round(d["peak_rss_mb"] * MB),
            tree_rss=round(d["tree_rss_mb"] * MB),
            n_bytes=round(d["mb_per_s"] * d["seconds"] * MB),
            cpu_seconds=d["cpu_seconds"],
            process_seconds=d["process_seconds"],
            other_cores=d["other_cores"],
            ratio=d["speedup"],
        )


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


HEADER = (
    "phase",
    "contender",
    "wall s",
    "MB/s",
    "peak RSS MB",
    "tree RSS MB",
    "tokenmill speed ×",
    "tokenmill RSS ×",
)


def _cells(row: Row) -> list[str]:
    speed = "" if row.speedup is None else f"{row.speedup:.2f}"
    memory = "" if row.memory_ratio is None else f"{row.memory_ratio:.2f}"
    return [
        row.phase,
        row.contender,
        f"{row.seconds:.2f}",
        f"{row.mb_per_s:.1f}" if row.n_bytes else "",
        f"{row.peak_rss / MB:.0f}",
        f"{row.tree_rss / MB:.0f}",
        speed,
        memory,
    ]


def markdown_table(rows: list[Row]) -> str:
    lines = [_cells(r) for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in lines)) for i, h in enumerate(HEADER)]
    numeric = [False, False, True, True, True, True, True, True]

    def fmt(cells) -> str:
        padded = [
            c.rjust(w) if right else c.ljust(w)
            for c, w, right in zip(cells, widths, numeric, strict=True)
        ]
        return "| " + " | ".join(padded) + " |"

    rule = [
        "-" * (w - 1) + (":" if right else "-") for w, right in zip(widths, numeric, strict=True)
    ]
    return "\n".join([fmt(HEADER), fmt(rule), *(fmt(c) for c in lines)])


def machine_lines(machine: dict, command: str, corpus: dict) -> list[str]:
    v = machine["versions"]
    build = machine["tokenmill_build"]
    return [
        f"- command: `{command}`",
        f"- machine: {machine['cpu']}, {machine['cores']} cores, "
        f"{machine['ram_gib']:.1f} GiB RAM, {machine['os']}",
        f"- corpus: {corpus['path']}: {corpus['shards']} Parquet shards, "
        f"{corpus['documents']} documents, {corpus['bytes'] / MB:.1f} MB of UTF-8 text",
        "- software: " + ", ".join(f"{k} {val}" for k, val in v.items()),
        f"- tokenmill build: commit {build['commit']}, native library {build['native_sha256']}",
    ]


def render(
    machine: dict,
    command: str,
    corpus: dict,
    rows: list[Row],
    notes: list[str],
    date: str,
    sections: list[tuple[str, str]] = (),
    lines: list[str] = (),
) -> str:
    """The report; `sections`: (title, Markdown) between the summary and the
    full table, those with no text left out; `lines`: the summary's last paragraphs."""
    parts = ["# tokenmill benchmark", "", "## Summary", ""]
    parts += [summary(machine, corpus, rows, date, "", lines), ""]
    for title, text in sections:
        if text:
            parts += [f"## {title}", "", text, ""]
    parts += ["## All rows", "", *machine_lines(machine, command, corpus), ""]
    parts += [markdown_table(rows), ""]
    parts += [f"{i}. {note}" for i, note in enumerate(notes, 1)]
    return "\n".join(parts) + "\n"


# ---- the summary ---------------------------------------------------------


@dataclass(frozen=True)
class Pick:
    """One summary row: the peer rows of the phases that `phase` matches,
    beside those phases' tokenmill rows."""

    phase: str  # fnmatch pattern of the rows' phase
    peer: str  # how the peer's contender name starts
    work: str  # what was measured; {size} is what the phase's `*` matched, " / " between rows
    name: str = ""  # the peer column (default: `peer`)


GIGA_JOB = "gigatoken encode_files + PyArrow"
GIGA_BARE = "gigatoken encode_files, writing nothing"
WHOLE = "{size} workers, whole process"

# At most SUMMARY_ROWS, each a peer against tokenmill on the same work; the
# full table has the rest. Where a pattern matches several rows (one per
# worker count), the row shows each one's ratio, in the rows' order.
SUMMARY = (
    Pick("train", "rustbpe", "train (count, merge, train) on the bench corpus"),
    Pick("memory * of C", "rustbpe", "`tokenmill run` on {size} of C against training alone"),
    Pick(
        "encode bench o200k_base w*",
        GIGA_JOB,
        f"encode the bench corpus, {WHOLE}",
        "gigatoken, the same job",
    ),
    Pick(
        "encode bench o200k_base w*",
        GIGA_BARE,
        f"encode the bench corpus, {WHOLE}",
        "gigatoken, writing nothing",
    ),
    Pick(
        "encode C o200k_base w*",
        GIGA_JOB,
        f"encode ~500 MB of C, {WHOLE}",
        "gigatoken, the same job",
    ),
    Pick(
        "encode C o200k_base w*",
        GIGA_BARE,
        f"encode ~500 MB of C, {WHOLE}",
        "gigatoken, writing nothing",
    ),
    Pick(
        "encode multilingual o200k_base w*",
        GIGA_JOB,
        f"encode the multilingual corpus, {WHOLE}",
        "gigatoken, the same job",
    ),
    Pick(
        "encode multilingual o200k_base w*",
        GIGA_BARE,
        f"encode the multilingual corpus, {WHOLE}",
        "gigatoken, writing nothing",
    ),
    Pick("encode bench o200k_base w*", "fastokens", f"encode the bench corpus, {WHOLE}"),
    Pick("encode bench o200k_base w*", "tiktoken", f"encode the bench corpus, {WHOLE}"),
    Pick("startup o200k_base", "gigatoken", "start-up: python, imports, o200k_base loaded"),
)
SUMMARY_ROWS = 12  # the README's limit (tests/project/test_docs.py)
SUMMARY_START = "<!-- bench-summary:start -->"
SUMMARY_END = "<!-- bench-summary:end -->"
SUMMARY_HEADER = ("work", "peer", "tokenmill speed ×", "tokenmill memory ×")


def summary_table(rows: list[Row]) -> str:
    """The SUMMARY rows that this run has (a skipped phase has none), as Markdown."""
    lines = [
        "| " + " | ".join(SUMMARY_HEADER) + " |",
        "| --- | --- | ---: | ---: |",
    ]
    for pick in SUMMARY:
        found = [
            row
            for row in rows
            if row.baseline is not None
            and row.contender.startswith(pick.peer)
            and fnmatch.fnmatchcase(row.phase, pick.phase)
        ]
        if not found:
            continue
        before, _, after = pick.phase.partition("*")
        sizes = [row.phase[len(before) : len(row.phase) - len(after)] for row in found]
        speed = " / ".join("" if r.speedup is None else f"{r.speedup:.2f}" for r in found)
        memory = " / ".join(
            "" if r.memory_ratio is None else f"{r.memory_ratio:.2f}" for r in found
        )
        work = pick.work.format(size=" / ".join(sizes))
        lines.append("| " + " | ".join((work, pick.name or pick.peer, speed, memory)) + " |")
    return "\n".join(lines)


def summary(
    machine: dict, corpus: dict, rows: list[Row], date: str, link: str = "", lines=()
) -> str:
    """The machine, the corpus and the summary table; `link` names the full
    tables, `lines` are paragraphs after the table."""
    where = (
        f"The benchmark of {date}, on {machine['cpu']}, {machine['cores']} cores, "
        f"{machine['ram_gib']:.1f} GiB RAM, {machine['os']}, Python "
        f"{machine['versions']['python']}; the bench corpus (`bench/build_corpus.py`): "
        f"{corpus['documents']} documents, {corpus['bytes'] / MB:.1f} MB. tokenmill speed ×: "
        "the peer's time over tokenmill's (above 1: tokenmill is faster); tokenmill memory ×: "
        "tokenmill's peak memory over the peer's (below 1: tokenmill uses less)."
    )
    if link:
        where += f" Every row, with notes: [{link}]({link})."
    return "\n\n".join([where, summary_table(rows), *lines])


MARKED = re.compile(re.escape(SUMMARY_START) + ".*?" + re.escape(SUMMARY_END), re.DOTALL)


def check_summary_markers(path: Path) -> str:
    """`path`'s text, if it holds exactly one summary block (checked before an hour's run)."""
    try:
        text = path.read_text()
    except OSError as e:
        raise SystemExit(f"--summary {path}: cannot read ({e.strerror})") from None
    if len(MARKED.findall(text)) != 1:
        raise SystemExit(f"--summary {path}: needs one {SUMMARY_START} ... {SUMMARY_END} block")
    return text


def write_summary(path: Path, text: str) -> None:
    """Put `text` between the summary markers of `path` (the README), in place."""
    block = f"{SUMMARY_START}\n{text}\n{SUMMARY_END}"
    path.write_text(MARKED.sub(lambda _: block, check_summary_markers(path)))
