"""The whole-process encode rows at 1, 2, 4, 8 and 16 workers, measured on a
machine with 16 cores (the developers' has 2) and kept in bench/many-cores/:
one JSON per phase (`real`, `code`, `multilingual`), each written there by
`bench/run.py --only PHASE --workers-list 1,2,4,8,16 --json` (how:
bench/many-cores/README.md). Every run of bench/run.py renders them into
RESULTS.md beside its own rows, with the machine and the day they were
measured on, so that the many-core table is not lost when the 2-core rows
are measured again. The same for superword training against ordinary
training at 2 to 16 workers (`superword.json`, bench/many-cores/superword.sh).
"""

from __future__ import annotations

import json
from pathlib import Path

from encoderows import workers_table
from report import Row

FOLDER = Path(__file__).with_name("many-cores")
PHASES = ("real", "code", "multilingual")
TITLE = "Encode at 1 to 16 workers, on a machine with 16 cores"
SUPERWORD_TITLE = "Superword training at 2 to 16 workers, on a machine with 16 cores"
MB = 1 << 20
# The notes of those runs worth repeating beside their table: which rows ran
# beside other load, and that every document's ids were compared.
KEPT_NOTES = ("Exactness, encode", "Measured while other processes", "Other processes used")


def runs(folder: Path = FOLDER) -> dict[str, dict]:
    """Each kept phase's run, by phase name."""
    files = {name: folder / f"{name}.json" for name in PHASES}
    return {name: json.loads(p.read_text()) for name, p in files.items() if p.exists()}


def machine_line(run: dict) -> str:
    m, v = run["machine"], run["machine"]["versions"]
    found = ", ".join(f"{k} {v[k]}" for k in v if v[k] != "not installed")
    return (
        f"{m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB, {m['os']}; {found}; "
        f"tokenmill at {m['tokenmill_build']['commit']}"
    )


def section(folder: Path = FOLDER) -> tuple[str, str]:
    """(title, Markdown) of the many-core table; no text when none is kept."""
    by_phase = runs(folder)
    if not by_phase:
        return TITLE, ""
    found = list(by_phase.values())
    rows = [Row.from_dict(d) for run in found for d in run["rows"]]
    corpora = "; ".join(f"`{name}`: {run['about']}" for name, run in by_phase.items())
    lines = [
        f"Measured on {', '.join(sorted({run['date'] for run in found}))}, on a lent machine: "
        f"{machine_line(found[0])}. Each corpus its own `bench/run.py --only PHASE "
        f"--workers-list 1,2,4,8,16 --repeat 1` run (bench/many-cores/README.md), the corpora "
        f"being what the machine could take along: {corpora}. Rows as in the table above; the "
        f"JSON of every row is in bench/many-cores/.",
        "",
        workers_table(rows),
        "",
    ]
    notes = [n for run in found for n in run["notes"] if n.startswith(KEPT_NOTES)]
    # What was found wrong with a kept run after it ran, said beside its rows.
    notes += [n for run in found for n in run.get("errata", [])]
    lines += [f"- {n}" for n in notes]
    return TITLE, "\n".join(lines)


def superword_section(folder: Path = FOLDER) -> tuple[str, str]:
    """(title, Markdown) of the kept superword training run; no text when
    none is kept."""
    path = folder / "superword.json"
    if not path.exists():
        return SUPERWORD_TITLE, ""
    run = json.loads(path.read_text())
    lines = [
        f"Measured on {run['date']}, on the lent machine of the table above, by "
        f"bench/many-cores/superword.sh: the superword phase's training child (count, merge and "
        f"train as `tokenmill run` does them, {run['vocab']} ids, the transition at 90%) on the "
        f"bench corpus, ordinary and superword in turn, {len(run['rows'][0]['ordinary'])} "
        "rounds, the fastest of each.",
        "",
        "| workers | ordinary (s) | superword (s) | superword ÷ ordinary | peak RSS, MB |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in run["rows"]:
        rss = r["peak_rss"]
        lines.append(
            f"| {r['workers']} | {min(r['ordinary']):.2f} | {min(r['superword']):.2f} | "
            f"{r['ratio']:.2f} | {rss['ordinary'] / MB:.0f} / {rss['superword'] / MB:.0f} |"
        )
    return SUPERWORD_TITLE, "\n".join(lines)
