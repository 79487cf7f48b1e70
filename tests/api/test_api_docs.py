"""The Python API's documentation holds: every ```python block of
docs/python-api.md, and of README.md's "## Python API" section once it has
one, runs (in order, in one namespace per file, from the repository root, as
a reader would paste them); the README's section stays short; every public
name is documented, and the package exports only public names."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import tokenmill
from tokenmill import Tokenizer

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python-api.md"
SECTION = "## Python API"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def section(text: str, title: str) -> str | None:
    """The lines from the heading `title` to the next heading of its level."""
    lines = text.split("\n")
    if title not in lines:
        return None
    start = lines.index(title)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), None)
    return "\n".join(lines[start:end])


def run_blocks(text: str, name: str, monkeypatch) -> int:
    monkeypatch.chdir(ROOT)  # the examples read vocabularies/ from here
    namespace: dict = {"__name__": "__doc_example__"}
    blocks = BLOCK.findall(text)
    for k, block in enumerate(blocks):
        exec(compile(block, f"{name}, python block {k + 1}", "exec"), namespace)
    return len(blocks)


def test_the_reference_examples_run(monkeypatch):
    assert run_blocks(DOC.read_text(encoding="utf-8"), DOC.name, monkeypatch) >= 5


def test_the_readme_examples_run(monkeypatch):
    text = section((ROOT / "README.md").read_text(encoding="utf-8"), SECTION)
    if text is None:
        pytest.skip("README.md has no Python API section yet")
    run_blocks(text, "README.md", monkeypatch)


def test_the_readme_section_is_short_and_runnable():
    text = section(DOC.read_text(encoding="utf-8"), SECTION)
    assert text is not None and len(text.split("\n")) <= 45
    assert len(BLOCK.findall(text)) >= 2


def public_names() -> set[str]:
    names = {n for n in dir(Tokenizer) if not n.startswith("_")}
    return names | {f.name for f in dataclasses.fields(Tokenizer)}


def test_every_public_name_is_documented():
    doc = DOC.read_text(encoding="utf-8")
    missing = [n for n in sorted(public_names() | set(tokenmill.__all__)) if n not in doc]
    assert not missing, f"not in {DOC.name}: {missing}"


def test_the_package_exports_only_the_public_api():
    assert set(tokenmill.__all__) == {
        "Tokenizer",
        "load",
        "__version__",
        "TokenmillError",
        "DisallowedSpecialTokenError",
        "WriteError",
        "StoreError",
        "InputChanged",
        "WorkerLost",
        "NoSuchPath",
        "OptionError",
    }
    for name in tokenmill.__all__:
        assert getattr(tokenmill, name) is not None
    assert sorted(dir(tokenmill)) == sorted(tokenmill.__all__)


def test_internal_names_are_private():
    internal = {
        "imported", "given_tables", "custom_byte_ids", "checked", "validate", "from_file",
        "train_from_word_arrays", "byte_vocab", "byte_ids", "merge_ids", "base_size",
        "wide_ids", "id_type", "ids_type", "normalizer",
    }  # fmt: skip
    assert not internal & public_names()
    for name in internal:
        assert hasattr(Tokenizer, f"_{name}"), name
