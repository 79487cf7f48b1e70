"""README.md is read by a newcomer in ten minutes and DESIGN.md by the next engineer:
the README's length and order of sections, no issue numbers or commit hashes in
either, relative links that resolve, and a benchmark summary of at most 12 rows,
which bench/run.py writes through bench/report.py."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
from realtext import REPO

README = REPO / "README.md"
DESIGN = REPO / "DESIGN.md"
MAX_LINES = 450
SECTIONS = [
    "Install",
    "Example",
    "Commands",
    "Formats",
    "Python API",
    "Guarantees",
    "Scale",
    "Benchmark",
    "Layout",
]
MAX_SUMMARY_ROWS = 12

ISSUE = re.compile(r"\bissues?\s*#?\d+|(?<![\w&/])#\d+\b", re.IGNORECASE)
# 7 to 40 hex digits with at least one digit and one letter: how git names a commit.
COMMIT = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _report():
    spec = importlib.util.spec_from_file_location("bench_report", REPO / "bench" / "report.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


report = _report()


def prose(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slugs(text: str) -> set[str]:
    """GitHub's anchors for the headings of a Markdown text."""
    found: set[str] = set()
    for line in prose(text):
        if not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
        n, unique = 0, slug
        while unique in found:
            n += 1
            unique = f"{slug}-{n}"
        found.add(unique)
    return found


def summary_block(text: str) -> str:
    start, end = report.SUMMARY_START, report.SUMMARY_END
    assert text.count(start) == 1 and text.count(end) == 1, "one bench-summary block"
    return text.split(start, 1)[1].split(end, 1)[0]


def table_rows(block: str) -> list[str]:
    rows = [line for line in block.splitlines() if line.startswith("|")]
    return rows[2:]  # header and rule


def exit_status_table(text: str) -> list[str]:
    start = text.index("| status | meaning |")
    return text[start:].split("\n\n", 1)[0].splitlines()


def test_the_exit_statuses_of_jobs_are_the_readmes():
    """A scheduler's page must not say another status than the tool gives."""
    jobs = (REPO / "docs" / "jobs.md").read_text()
    assert exit_status_table(jobs) == exit_status_table(README.read_text())


def test_the_readme_is_short():
    n = len(README.read_text().splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines; move depth into docs/"


def test_the_readme_sections_come_in_order():
    found = [line[3:].strip() for line in prose(README.read_text()) if line.startswith("## ")]
    assert found == SECTIONS


@pytest.mark.parametrize("path", [README, DESIGN], ids=lambda p: p.name)
def test_no_issue_numbers_or_commit_hashes(path):
    text = path.read_text()
    assert ISSUE.findall(text) == []
    assert COMMIT.findall(text) == []


def test_the_patterns_catch_what_they_are_for():
    text = "fixed in issue 18 (#18), commit d9ce666, Issue #3; not 16082018, facade, #anchor"
    assert ISSUE.findall(text) == ["issue 18", "#18", "Issue #3"]
    assert COMMIT.findall(text) == ["d9ce666"]


def test_every_relative_link_of_the_readme_resolves():
    text = README.read_text()
    broken = []
    for line in prose(text):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (README.parent / path).resolve() if path else README
            if not file.exists():
                broken.append(target)
            elif anchor and file.suffix == ".md" and anchor not in slugs(file.read_text()):
                broken.append(target)
    assert broken == []


def test_the_readme_summary_has_the_rows_bench_writes():
    block = summary_block(README.read_text())
    header = next(line for line in block.splitlines() if line.startswith("|"))
    assert header == "| " + " | ".join(report.SUMMARY_HEADER) + " |"
    assert 0 < len(table_rows(block)) <= MAX_SUMMARY_ROWS
    assert len(report.SUMMARY) <= MAX_SUMMARY_ROWS


def test_make_bench_writes_the_results_and_the_summary():
    recipe = (REPO / "Makefile").read_text().split("\nbench:", 1)[1].split("\n\n", 1)[0]
    assert "--markdown bench/RESULTS.md" in recipe
    assert "--summary README.md" in recipe


# ---- bench/report.py's summary --------------------------------------------------

MB = 1_000_000


def row(phase, contender, seconds, rss_mb, baseline=None):
    rss = int(rss_mb * MB)
    return report.Row(phase, contender, seconds, rss, rss, 100 * MB, baseline)


def test_the_summary_puts_each_peer_beside_tokenmill():
    train = row("train", "tokenmill count+merge+train", 0.5, 300)
    big = row("memory 517 MB of C", "tokenmill run (count+merge+train+encode)", 4.0, 540)
    rows = [
        train,
        row("train", "rustbpe", 3.5, 600, train),
        big,
        row("memory 517 MB of C", "rustbpe train_from_iterator (streaming)", 20.0, 600, big),
        row("memory stages", "tokenmill count (its own process)", 1.0, 270),
        row("floor o200k_base", "fastokens encode_batch_flat, one core (no writing)", 1.0, 300),
    ]
    lines = table_rows(report.summary_table(rows))
    assert lines == [
        "| train (count, merge, train) on the bench corpus | rustbpe | 7.00 | 0.50 |",
        "| `tokenmill run` on 517 MB of C against training alone | rustbpe | 5.00 | 0.90 |",
    ]


def test_the_summary_names_machine_corpus_date_and_the_full_tables():
    machine = {
        "cpu": "AMD EPYC 7B13",
        "cores": 2,
        "ram_gib": 23.5,
        "os": "Linux 6.1",
        "versions": {"python": "3.11.7"},
    }
    corpus = {"documents": 3890, "bytes": 66_800_000}
    text = report.summary(machine, corpus, [], "2026-11-27", "bench/RESULTS.md")
    assert "2026-11-27, on AMD EPYC 7B13, 2 cores, 23.5 GiB RAM, Linux 6.1" in text
    assert "3890 documents, 66.8 MB" in text
    assert "[bench/RESULTS.md](bench/RESULTS.md)" in text


def test_write_summary_replaces_only_the_marked_block(tmp_path):
    path = tmp_path / "README.md"
    start, end = report.SUMMARY_START, report.SUMMARY_END
    path.write_text(f"# t\n\nbefore\n{start}\nold rows\n{end}\nafter\n")
    report.write_summary(path, "new rows")
    assert path.read_text() == f"# t\n\nbefore\n{start}\nnew rows\n{end}\nafter\n"


@pytest.mark.parametrize("blocks", [0, 2])
def test_a_file_without_one_summary_block_is_refused(tmp_path, blocks):
    path = tmp_path / "README.md"
    path.write_text("# t\n" + f"{report.SUMMARY_START}\n{report.SUMMARY_END}\n" * blocks)
    with pytest.raises(SystemExit, match=r"--summary .*README\.md: needs one"):
        report.check_summary_markers(path)


def test_the_documented_ids_column_type_is_the_written_one(tmp_path):
    """Code matching a schema to the docs' `ids` type (pa.list_ is not
    pa.large_list) must match what encode and pack write."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tokenmill.config import Config
    from tokenmill.stages.pack import run_pack
    from tokenmill.stages.run import run_all

    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("one document\nanother document\n", encoding="utf-8")
    run_all(data, tmp_path / "out", Config(vocab_size=300))
    run_pack(tmp_path / "out" / "tokens", tmp_path / "packed", 4)
    for folder in ("out/tokens", "packed"):
        (shard,) = (tmp_path / folder).glob("*.parquet")
        ids = pq.read_schema(shard).field("ids").type
        assert pa.types.is_large_list(ids) and ids.value_type == pa.uint16()
    for doc in ("README.md", "docs/formats.md", "docs/recipes.md", "docs/python-api.md"):
        text = (REPO / doc).read_text(encoding="utf-8")
        assert "large_list<uint16>" in text, doc
        assert not re.search(r"(?<!large_)list<uint(16|32)", text), doc
