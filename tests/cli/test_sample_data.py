"""The real-text sample in sample_data/ is present and is what it claims to be."""

from __future__ import annotations

import ast
import re
from collections import Counter

from realtext import iter_sample_documents, load_sample_texts, sample_paths

GREEK = re.compile(r"[\u0370-\u03ff\u1f00-\u1fff]")
CYRILLIC = re.compile(r"[\u0400-\u04ff]")
UKRAINIAN_ONLY = re.compile(r"[іїєґІЇЄҐ]")
CJK = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def test_sample_has_every_input_format():
    names = [p.name for p in sample_paths()]
    assert names == sorted(names)
    for suffix in (".parquet", ".jsonl", ".jsonl.gz", ".txt"):
        assert any(n.endswith(suffix) for n in names), (suffix, names)
    docs_per_shard = Counter(name for name, _ in iter_sample_documents())
    for name in names:
        assert docs_per_shard[name] > 0, name


def test_sample_is_at_least_one_megabyte_of_utf8_text():
    texts = load_sample_texts()
    assert all(isinstance(t, str) for t in texts)
    total = sum(len(t.encode("utf-8")) for t in texts)  # raises on lone surrogates
    assert total >= 1_000_000, total
    assert len(texts) >= 1000


def test_sample_has_greek_and_cyrillic_and_cjk():
    joined = "\n".join(load_sample_texts())
    assert len(GREEK.findall(joined)) >= 10_000
    assert len(CYRILLIC.findall(joined)) >= 100_000
    assert len(UKRAINIAN_ONLY.findall(joined)) >= 1_000
    assert len(CJK.findall(joined)) >= 10_000


def test_sample_has_english_prose():
    joined = "\n".join(load_sample_texts())
    for word in (" the ", " and ", " of ", " is "):
        assert joined.count(word) >= 1000, word


def test_sample_has_nontrivial_python_code():
    modules = []
    for text in load_sample_texts():
        if len(text) < 1000 or "def " not in text:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        if functions:
            modules.append((text, functions))
    assert len(modules) >= 20
    assert sum(len(t) for t, _ in modules) >= 300_000
    assert sum(len(f) for _, f in modules) >= 500
