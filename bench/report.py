"""The benchmark's one table, as Markdown (readable in a terminal too)."""

from __future__ import annotations

from dataclasses import dataclass

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


def render(machine: dict, command: str, corpus: dict, rows: list[Row], notes: list[str]) -> str:
    parts = ["## tokenmill benchmark", "", *machine_lines(machine, command, corpus), ""]
    parts += [markdown_table(rows), ""]
    parts += [f"{i}. {note}" for i, note in enumerate(notes, 1)]
    return "\n".join(parts) + "\n"
