"""`make tokenize` on sample_data/: every document decodes back to its text."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from realtext import load_sample_texts

from tokenmill.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_tokenize_on_sample_data_round_trips(tmp_path):
    out = tmp_path / "out"
    subprocess.run(
        ["make", "-s", "tokenize", f"OUT={out}", "ARGS=--vocab-size 4096"],
        cwd=ROOT,
        check=True,
    )
    tok = Tokenizer.load(out / "tokenizer.json")
    manifest = json.loads((out / "manifest.json").read_text())
    rows = []
    for entry in manifest["outputs"]:
        rows.extend(pq.read_table(out / entry["path"])["ids"].to_pylist())
    texts = load_sample_texts()
    assert len(rows) == len(texts) == manifest["documents"]
    for ids, text in zip(rows, texts, strict=True):
        assert ids[-1] == tok.eos_id
        assert tok.decode(ids[:-1]) == text
