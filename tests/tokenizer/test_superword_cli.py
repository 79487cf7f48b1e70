"""`--superword-at` on the command line: `run` counts stage 2's word table beside
counts.parquet (sharded, merged, kept by a rerun), trains both stages and encodes with the
superword tokenizer; `count --superword`, `merge` and `train --superword-counts` make the
same tokenizer; options that cannot go together are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import assert_one_line_error, assert_usage_error, make_documents, write_shard

from tokenmill import Tokenizer
from tokenmill.tokenizer.superword import PATTERN


@pytest.fixture
def data(tmp_path) -> Path:
    docs = make_documents(80, seed=3)
    write_shard(tmp_path / "data" / "a.parquet", docs[:50])
    write_shard(tmp_path / "data" / "b.jsonl", docs[50:])
    return tmp_path / "data"


def stages(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())["stages"]


def test_run_trains_both_stages_and_a_rerun_keeps_them(cli, data, tmp_path):
    out = tmp_path / "out"
    cli("run", data, out, "--vocab-size", 600, "--superword-at", 500)
    tok = Tokenizer.load(out / "tokenizer.json")
    assert tok.pattern == PATTERN and tok.vocab_size == 600
    for name in ("a.parquet", "b.jsonl.parquet"):
        assert (out / "superword-counts" / name).is_file()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["superword_at"] == 500
    listed = {e["path"] for e in manifest["files"] + manifest["counts"]}
    assert "superword-counts.parquet" in listed and "superword-counts/a.parquet" in listed
    assert cli("verify", out).exit_code == 0
    assert cli("check", out).exit_code == 0  # the pattern recorded is stage 1's

    cli("run", data, out, "--vocab-size", 600, "--superword-at", 500)
    assert all(s["redone"] == 0 for s in stages(out).values())
    # Stage 2's table merged again, the same: the tokenizer is kept, not trained again.
    (out / "superword-counts.parquet").unlink()
    cli("run", data, out, "--vocab-size", 600, "--superword-at", 500)
    again = stages(out)
    assert again["superword-merge"]["redone"] == 1 and again["train"]["reused"] == 1
    # Another transition point trains again; the word tables are kept.
    cli("run", data, out, "--vocab-size", 600, "--superword-at", 550)
    after = stages(out)
    assert after["superword-count"]["redone"] == 0 and after["train"]["redone"] == 1
    assert Tokenizer.load(out / "tokenizer.json").merges != tok.merges
    # Without superword tokens, the stage-2 tables are stale: removed.
    cli("run", data, out, "--vocab-size", 600)
    assert not (out / "superword-counts").exists() or not any((out / "superword-counts").iterdir())
    assert not (out / "superword-counts.parquet").exists()


def test_stage_commands_make_the_runs_tokenizer(cli, data, tmp_path):
    cli("run", data, tmp_path / "out", "--vocab-size", 600, "--superword-at", 500)
    cli("count", data, tmp_path / "c1")
    cli("count", data, tmp_path / "c2", "--superword")
    cli("merge", tmp_path / "c1", tmp_path / "c1.parquet")
    cli("merge", tmp_path / "c2", tmp_path / "c2.parquet")
    cli(
        "train", tmp_path / "c1.parquet", tmp_path / "tok.json", "--vocab-size", 600,
        "--superword-at", 500, "--superword-counts", tmp_path / "c2.parquet",
    )  # fmt: skip
    assert Tokenizer.load(tmp_path / "tok.json") == Tokenizer.load(tmp_path / "out/tokenizer.json")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--superword-at", "700"], "--superword-at 700 is out of range: 257"),
        (["--superword-at", "100"], "--superword-at 100: the transition point is a vocabulary"),
        (["--superword-at", "256"], "--superword-at 256 is out of range: 257 (256 bytes + 1"),
        (["--superword-at", "500", "--mode", "char"], "--superword-at 500: superword tokens are"),
        (
            ["--superword-at", "500", "--superword-max-words", str(2**32)],
            f"--superword-max-words {2**32}: want a whole number from 1 to {2**32 - 1} (0: no",
        ),
        (
            ["--superword-at", "500", "--extend", "{base}"],
            "does not go with --extend: a superword tokenizer is trained from the bytes up",
        ),
    ],
)
def test_refused_options(cli, data, tmp_path, args, message):
    base = tmp_path / "base.json"
    Tokenizer.train(["a b c"], vocab_size=260).save(base)
    args = [a.format(base=base) for a in args]
    result = cli("run", data, tmp_path / "out", "--vocab-size", 600, *args, ok=False)
    assert result.exit_code != 0
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_superword_tokenizer_is_not_extended(cli, data, tmp_path):
    """The message said its pattern is no preset, "which counting words needs"."""
    cli("run", data, tmp_path / "out", "--vocab-size", 600, "--superword-at", 500)
    base = tmp_path / "out" / "tokenizer.json"
    result = cli("run", data, tmp_path / "grown", "--vocab-size", 700, "--extend", base, ok=False)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and not (tmp_path / "grown" / "tokenizer.json").exists()
    assert lines[0].startswith(
        f"Error: --extend {base}: a superword tokenizer cannot be extended: merges grown on "
        "its pieces would skip stage 2's limits"
    )


def test_train_needs_both_tables(cli, data, tmp_path):
    """--superword-at without --superword-counts was told "--superword-counts goes with
    --superword-at", as the opposite mistake is. Either is a usage error (status 2,
    was 1), and so is the table with --superword-at 0, which switches it off; a
    table that is not there is named as the option's."""
    cli("count", data, tmp_path / "c1")
    cli("merge", tmp_path / "c1", tmp_path / "c1.parquet")
    c1, tok = tmp_path / "c1.parquet", tmp_path / "tok.json"
    result = cli("train", c1, tok, "--vocab-size", 600, "--superword-at", 500, ok=False)
    message = (
        "Error: --superword-at 500 needs --superword-counts FILE: stage 2's word table, the "
        "one `count --superword` counts (then `merge`) (see '"
    )
    assert_usage_error(result, message, "train", tok)
    assert result.output.startswith(message)
    for off in ([], ["--superword-at", 0]):
        result = cli(
            "train", c1, tok, "--vocab-size", 600, "--superword-counts", c1, *off, ok=False
        )
        assert_usage_error(result, "Error: --superword-counts goes with --superword-at", "train")
    missing = tmp_path / "nofile"
    args = ("--vocab-size", 600, "--superword-at", 500, "--superword-counts", missing)
    result = cli("train", c1, tok, *args, ok=False)
    assert_one_line_error(result, f"Error: --superword-counts {missing}: no such file")
    assert result.exit_code == 1 and not tok.exists()


@pytest.mark.parametrize("superword", [True, False])
def test_train_says_a_stage_2_table_given_as_counts_file_goes_as_superword_counts(
    cli, data, tmp_path, superword
):
    """It said the table was counted with --pattern and stage 2's whole regex, to train
    with that too: training takes a preset only."""
    cli("count", data, tmp_path / "c1")
    cli("merge", tmp_path / "c1", tmp_path / "c1.parquet")
    cli("count", data, tmp_path / "c2", "--superword")
    cli("merge", tmp_path / "c2", tmp_path / "c2.parquet")
    c2 = tmp_path / "c2.parquet"
    more = ["--superword-at", 500, "--superword-counts", tmp_path / "c1.parquet"]
    result = cli(
        "train", c2, tmp_path / "tok.json", "--vocab-size", 600, *(more if superword else []),
        ok=False,
    )  # fmt: skip
    at = "" if superword else " with --superword-at T"
    assert result.output.strip().splitlines() == [
        f"Error: {c2} is a stage-2 table (`count --superword`): give it as "
        f"--superword-counts{at}, and as COUNTS_FILE the table `count` counts"
    ]


@pytest.mark.parametrize(
    "count_args, message",
    [
        ([], "counted with --pattern cl100k, not by stage 2's pattern"),
        (["--mode", "char"], "--mode char"),
    ],
)
def test_train_refuses_a_stage_2_table_count_superword_did_not_write(
    cli, data, tmp_path, count_args, message
):
    cli("count", data, tmp_path / "c1")
    cli("merge", tmp_path / "c1", tmp_path / "c1.parquet")
    cli("count", data, tmp_path / "c2", *count_args)
    cli("merge", tmp_path / "c2", tmp_path / "c2.parquet")
    result = cli(
        "train", tmp_path / "c1.parquet", tmp_path / "tok.json", "--vocab-size", 600,
        "--superword-at", 500, "--superword-counts", tmp_path / "c2.parquet", ok=False,
    )  # fmt: skip
    assert result.exit_code == 1 and not (tmp_path / "tok.json").exists()
    assert result.output.startswith(f"Error: --superword-counts {tmp_path / 'c2.parquet'}: ")
    assert message in result.output and "count --superword" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_sweep_sets_superword_tokens_against_ordinary_bpe(cli, data, tmp_path):
    out = tmp_path / "out"
    cli("run", data, out, "--vocab-size", 600, "--superword-at", 450)
    held_out = tmp_path / "held-out"
    write_shard(held_out / "new.parquet", make_documents(40, seed=11))
    for extra in ([], ["--held-out", held_out]):
        d = json.loads(cli("sweep", out, "--json", *extra).output.split("\nsweep: ")[0])
        assert d["superword_at"] == 450 and d["vocab_sizes"][0] == 450
        assert d["vocab_sizes"][-1] == 600
        for line in [d["all"], *d["sources"]]:
            assert len(line["bpe_bytes_per_token"]) == len(d["vocab_sizes"])
        # At the transition both have stage 1's merges (on other pieces: the counts
        # differ a little, docs/superword.md); superword tokens add up from there.
        assert d["all"]["text_tokens"][-1] < d["all"]["bpe_text_tokens"][-1]
    assert d["held_out"] == str(held_out) and d["all"]["documents"] == 40
    plain = cli("sweep", out, "--vocab-sizes", "450,600").output
    assert "ordinary BPE of the same sizes" in plain and "fewer tokens than ordinary BPE" in plain
    # The report plots ordinary BPE beside the superword tokenizer (it had no line for it).
    cli("report", out)
    section = (out / "report.html").read_text(encoding="utf-8").split("<h2 id=sweep>")[1]
    assert "Superword tokens from 450 ids; ordinary BPE of the same sizes" in section
    assert section.count("<title>ordinary BPE, all documents</title>") == 1


def test_sweep_says_where_ordinary_bpe_stops(cli, tmp_path):
    """Past the size ordinary BPE's pairs ran out at, the JSON had 0 tokens and the
    summary line said "(ordinary BPE: None)"."""
    docs = ["one of the best of times, one of the worst of times"] * 5 + ["it was the age"] * 3
    write_shard(tmp_path / "data" / "a.jsonl", docs)
    out = tmp_path / "out"
    cli("run", tmp_path / "data", out, "--vocab-size", 330, "--superword-at", 280)
    result = cli("sweep", out, "--json")
    d = json.loads(result.output.split("\nsweep: ")[0])
    stops = d["bpe_vocab_size"]
    assert d["vocab_sizes"][0] <= stops < d["vocab_sizes"][-1]
    assert d["all"]["bpe_text_tokens"][-1] is None and d["all"]["bpe_bytes_per_token"][-1] is None
    assert d["all"]["bpe_text_tokens"][0] > 0
    said = f"ordinary BPE stops at {stops} ids: no pair is left to merge"
    last = result.output.splitlines()[-1]
    assert last.startswith("sweep: ") and f"({said})" in last and "None" not in last
    assert said in cli("sweep", out).output.splitlines()


def test_train_says_where_stage_1_ran_out_of_pairs(cli, tmp_path):
    """Stage 1 ran out of pairs short of --superword-at, stage 2 went on from there (the
    textbook's two stages), and the train line said nothing: --superword-at T =
    --vocab-size, documented as no stage 2, made superword tokens without a word."""
    write_shard(tmp_path / "data" / "a.jsonl", ["the cat sat on the mat, the cat ate"] * 5)
    lines = {}
    for at in (265, 1000, 2000):
        out = tmp_path / f"out-{at}"
        for run in ("trained", "kept"):
            said = cli("run", tmp_path / "data", out, "--vocab-size", 2000, "--superword-at", at)
            lines[at, run] = next(x for x in said.output.splitlines() if x.startswith("train: "))
    short = "(stage 1 ran out of pairs at 271 ids, short of --superword-at {}: stage 2 learned"
    for at in (1000, 2000):
        assert short.format(at) in lines[at, "trained"] and short.format(at) in lines[at, "kept"]
        assert "(kept: inputs unchanged)" in lines[at, "kept"]
    assert "stage 1" not in lines[265, "trained"] + lines[265, "kept"]
    tok = Tokenizer.load(tmp_path / "out-2000" / "tokenizer.json")
    assert tok == Tokenizer.load(tmp_path / "out-1000" / "tokenizer.json")
    assert tok.vocab_size == 278 and tok.pattern == PATTERN  # 7 merges of stage 2
    # sweep's superword columns start where stage 2 did.
    assert "superword tokens from 271\n" in cli("sweep", tmp_path / "out-2000").output


def test_a_job_file_takes_the_options(cli, data, tmp_path):
    job = tmp_path / "job.toml"
    job.write_text(
        f'inputs = "{data}"\noutput = "out"\nvocab_size = 600\n'
        "superword_at = 500\nsuperword_max_words = 2\n"
    )
    cli("run", "--job", job)
    config = json.loads((tmp_path / "out" / "manifest.json").read_text())["config"]
    assert (config["superword_at"], config["superword_max_words"]) == (500, 2)
    tok = Tokenizer.load(tmp_path / "out" / "tokenizer.json")
    assert tok.pattern == PATTERN
    assert max(len(tok.token_values[i].split()) for i in tok._merge_ids) <= 2
