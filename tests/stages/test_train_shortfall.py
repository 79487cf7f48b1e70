"""A corpus that runs out of pairs before --vocab-size: the `train:` line says
so (as superword training says where stage 1 ran out), in `run`, `train` and
with --extend, trained or kept; one that reaches it exactly says nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenmill import Tokenizer

# "hello world": 9 merges, then no pair is left: 256 bytes + 9 + <|endoftext|>.
REACHED = 266


@pytest.fixture
def data(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("hello world\n")
    return tmp_path / "data"


def train_line(result) -> str:
    return next(x for x in result.output.splitlines() if x.startswith("train: "))


def test_run_says_it_ran_out_of_pairs_trained_and_kept(cli, data, tmp_path):
    short = f"(ran out of pairs at {REACHED} ids, short of --vocab-size 300)"
    out = tmp_path / "out"
    trained = train_line(cli("run", data, out, "--vocab-size", 300))
    kept = train_line(cli("run", data, out, "--vocab-size", 300))
    assert f"vocabulary {REACHED}, from 2 words {short}" in trained
    assert short in kept and "(kept: inputs unchanged)" in kept
    exact = train_line(cli("run", data, tmp_path / "exact", "--vocab-size", REACHED))
    assert "ran out" not in exact


def test_train_command_says_it_ran_out_of_pairs(cli, data, tmp_path):
    out = tmp_path / "out"
    cli("run", data, out, "--vocab-size", 300)
    said = train_line(
        cli("train", out / "counts.parquet", tmp_path / "t.json", "--vocab-size", 400)
    )
    assert f"(ran out of pairs at {REACHED} ids, short of --vocab-size 400)" in said


def test_extend_says_it_ran_out_of_pairs(cli, data, tmp_path):
    base = tmp_path / "base.json"
    Tokenizer.train(["low lower lowest"] * 3, vocab_size=262).save(base)
    said = train_line(cli("run", data, tmp_path / "out", "--extend", base, "--vocab-size", 400))
    reached = Tokenizer.load(tmp_path / "out" / "tokenizer.json").vocab_size
    assert reached < 400
    assert f"(ran out of pairs at {reached} ids, short of --vocab-size 400)" in said
