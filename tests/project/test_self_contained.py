"""The project is self-contained (issue 15): no file of it names a path outside the
repository (a sibling folder, an absolute path of one machine, a `Path(__file__)`
climbing above the root), and the public data the tests read ships in it, unchanged."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from realtext import GPT2_FILE, REPO, VOCAB_DIR

THIS = Path(__file__).resolve()
# Folders that are built or downloaded, never part of the project.
NOT_OURS = {".git", ".venv", "target", "out", "__pycache__", ".pytest_cache", ".ruff_cache"}
NOT_OURS |= {".hypothesis", "build"}
# Strings that can only name something outside the repository: the sibling
# folder of the workplace this project grew in, and its absolute root. Built
# from parts, so that this file does not itself name them.
SIBLING = "shared"
OUTSIDE = (
    f"../{SIBLING}",
    *(f"{SIBLING}/{sub}" for sub in ("vocab", "seeds", "bench")),
    "/" + "work" + "/",
)
PARENTS = re.compile(r"parents\[(\d+)\]")
PARENT_CHAIN = re.compile(r"__file__\)(?:\.resolve\(\))?((?:\.parent\b)+)")


def project_files() -> list[Path]:
    """Tracked files and untracked ones git does not ignore (the working tree's
    walk, less the built folders, where git is not there)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout.decode()
        files = [REPO / name for name in listed.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        files = [
            p
            for p in REPO.rglob("*")
            if not NOT_OURS & set(p.relative_to(REPO).parts[:-1]) and p.is_file()
        ]
    return sorted(p for p in files if p.is_file())


def is_data(path: Path) -> bool:
    """Public data shipped as is: vocabularies and the sample's shards."""
    rel = path.relative_to(REPO)
    return rel.suffix == ".tiktoken" or (rel.parts[0] == "sample_data" and rel.suffix != ".md")


def outside_references(path: Path, text: str) -> list[str]:
    depth = len(path.relative_to(REPO).parts) - 1  # parents[depth] is the repository root
    found = [f"{s!r}" for s in OUTSIDE if s in text]
    if path.suffix == ".py":
        found += [m.group(0) for m in PARENTS.finditer(text) if int(m.group(1)) > depth]
        found += [
            m.group(0)
            for m in PARENT_CHAIN.finditer(text)
            if m.group(1).count(".parent") - 1 > depth
        ]
    return found


def test_the_checker_sees_what_it_looks_for():
    root_file = REPO / "bench" / "x.py"
    assert outside_references(root_file, 'Path(__file__).resolve().parents[1] / "v"') == []
    assert outside_references(root_file, "Path(__file__).resolve().parent.parent") == []
    assert outside_references(root_file, "Path(__file__).resolve().parents[2]") == ["parents[2]"]
    assert outside_references(root_file, "Path(__file__).parent.parent.parent") == [
        "__file__).parent.parent.parent"
    ]
    sibling = f"../{SIBLING}"
    assert outside_references(REPO / "README.md", f"run {sibling}/x.py") == [repr(sibling)]


def test_no_project_file_names_a_path_outside_the_repository():
    files = [p for p in project_files() if p.resolve() != THIS and not is_data(p)]
    assert any(p.name == "README.md" for p in files) and any(p.suffix == ".py" for p in files)
    bad = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        bad += [f"{path.relative_to(REPO)}: {ref}" for ref in outside_references(path, text)]
    assert not bad, "paths outside the repository:\n" + "\n".join(bad)


def test_the_shipped_vocabularies_are_the_public_files_their_readme_names():
    readme = (VOCAB_DIR / "README.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{64})` \|$", readme, re.M))
    shipped = {p.name for p in VOCAB_DIR.iterdir() if p.name != "README.md"}
    assert set(listed) == shipped and GPT2_FILE.name in shipped
    for name, sha256 in listed.items():
        assert hashlib.sha256((VOCAB_DIR / name).read_bytes()).hexdigest() == sha256, name
