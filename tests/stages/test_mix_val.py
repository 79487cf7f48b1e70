"""--val-fraction with a mix: documents are held out by (input, row) before
anything is chosen, so none is both in train and in validation; the budgets
are met from the train documents, and validation takes each source's
held-out documents once, in the proportions of the budgets."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import assert_one_line_error
from mixdata import write_corpus, write_tokenizer
from realtext import REPO
from runs import manifest, output_files, tokenmill

from tokenmill.recipe import Share
from tokenmill.stages.budgets import val_budget
from tokenmill.stages.mix import BUCKET_ENV
from tokenmill.stages.split import is_val
from tokenmill.stages.tokens import token_shards

FRACTION = 0.25
RECIPE = "short = 120\nlong = { epochs = 1.5 }\nbooks = { epochs = 2.0 }\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The recipe with --val-fraction on 1 worker and on 2 (in parts of 2000 ids),
    with the bin and packed layouts."""
    folder = tmp_path_factory.mktemp("val")
    data, tok = write_corpus(folder / "data"), write_tokenizer(folder / "tok.json")
    recipe = folder / "recipe.toml"
    recipe.write_text("[mix]\n" + RECIPE)
    outs = []
    for workers in ("1", "2"):
        out = folder / f"out-{workers}"
        tokenmill("run", data, out, "--tokenizer", tok, "--mix", recipe, "--shuffle", "7",
                  "--val-fraction", str(FRACTION), "--workers", workers, "--format", "bin",
                  "--pack", "64", env={BUCKET_ENV: "2000"})  # fmt: skip
        outs.append(out)
    return outs


def rows(out, prefix: str) -> list[dict]:
    found = []
    for path in sorted((out / "mix").glob(f"{prefix}-*.parquet")):
        found += pq.read_table(path).to_pylist()
    return found


def test_no_document_is_in_both_and_the_split_is_the_runs(runs):
    out = runs[0]
    train, val = rows(out, "part"), rows(out, "val")
    assert len({p.name for p in (out / "mix").glob("part-*")}) > 1 and train and val
    in_train = {(r["shard"], r["input_row"]) for r in train}
    in_val = Counter((r["shard"], r["input_row"]) for r in val)
    assert not in_train & set(in_val)
    assert set(in_val.values()) == {1}  # a held-out document once
    # The documents a run without a mix holds out: the same hash of (input, row).
    for docs, held in ((in_train, False), (set(in_val), True)):
        for shard, row in docs:
            assert bool(is_val(shard, np.array([row], np.uint64), FRACTION)[0]) is held


def test_validation_takes_the_budgets_proportions(runs):
    out = runs[0]
    mix = manifest(out)["mix"]
    val_tokens = Counter()
    longest = Counter()
    for r in rows(out, "val"):
        val_tokens[r["source"]] += r["n_tokens"]
    for r in rows(out, "part"):
        longest[r["source"]] = max(longest[r["source"]], r["n_tokens"])
    for line in mix["sources"]:
        if line["asked"] is None:
            continue
        val, epochs = line["val"], line["asked"].get("epochs")
        held = val["available"]["tokens"]
        if epochs is None:  # a budget: in the fraction's proportion
            assert val["budget"] == min(round(line["budget"] * FRACTION / (1 - FRACTION)), held)
        else:  # epochs: the held-out documents' own, each at most once
            assert val["budget"] == round(min(epochs, 1.0) * held)
        assert val["taken"]["tokens"] == val_tokens[line["name"]]
        assert val["budget"] <= val_tokens[line["name"]] < val["budget"] + longest[line["name"]]
        # The train budget is met from the train documents alone.
        assert line["budget"] <= line["taken"]["tokens"] < line["budget"] + longest[line["name"]]
    short = next(line for line in mix["sources"] if line["name"] == "short")
    assert short["val"]["taken"]["tokens"] == 40  # 1-token documents: 120 * 0.25 / 0.75
    assert mix["val"]["tokens"] == sum(val_tokens.values())
    assert mix["val"]["documents"] == len(rows(out, "val"))


def test_the_layouts_write_each_split_from_its_parts(runs, cli):
    out = runs[0]
    for side, prefix in (("train", "part"), ("val", "val")):
        want = np.concatenate([np.array(r["ids"], np.uint16) for r in rows(out, prefix)])
        assert np.array_equal(np.fromfile(out / "bin" / f"{side}.bin", np.uint16), want)
    checked = cli("check", out).output
    assert "packed: " in checked and "bin: " in checked


def test_reruns_write_the_same_bytes_on_any_number_of_workers(runs):
    assert output_files(runs[0]) == output_files(runs[1])


def test_a_source_the_fraction_holds_out_whole_is_refused(cli, tmp_path):
    """Its epochs would take nothing, silently: the run says why instead."""
    data, tok = write_corpus(tmp_path / "data"), write_tokenizer(tmp_path / "tok.json")
    recipe = tmp_path / "recipe.toml"
    recipe.write_text("[mix]\nshort = 120\nlong = { epochs = 1.5 }\n")
    result = cli("run", data, tmp_path / "out", "--tokenizer", tok, "--mix", recipe,
                 "--val-fraction", "0.99", "--workers", "1", ok=False)  # fmt: skip
    assert_one_line_error(result, "mix.long: --val-fraction 0.99 holds out all 20 of its documents")


def test_a_recipe_that_takes_no_held_out_document_is_refused(cli, tmp_path):
    """The corpus holds documents out, but a budget's share of them rounds to
    no token: the layouts' val files held no ids (numpy cannot map them), and
    a rerun wrote the same. Refused as a fraction holding out nothing is."""
    data, tok = write_corpus(tmp_path / "data"), write_tokenizer(tmp_path / "tok.json")
    recipe = tmp_path / "recipe.toml"
    recipe.write_text("[mix]\nshort = 1\n")  # validation: round(1 * 0.25 / 0.75) tokens
    out = tmp_path / "out"
    result = cli("run", data, out, "--tokenizer", tok, "--mix", recipe, "--val-fraction",
                 str(FRACTION), "--workers", "1", "--format", "bin", ok=False)  # fmt: skip
    assert result.exit_code == 1
    assert_one_line_error(
        result, f"{recipe}: mix: --val-fraction 0.25 puts none of the 1 documents it takes in val"
    )
    assert not (out / "bin").exists() and not (out / "mix").exists()


def test_each_split_of_a_per_shard_layout_holds_its_own_parts_only(runs, cli, monkeypatch):
    """A part is of one split: no file of it (empty, or holding the other
    split's last packed row) stands in the other split's folder."""
    folder = runs[0].parent
    out = folder / "per-shard"
    monkeypatch.setenv(BUCKET_ENV, "2000")
    cli("run", folder / "data", out, "--tokenizer", folder / "tok.json", "--mix",
        folder / "recipe.toml", "--shuffle", "7", "--val-fraction", str(FRACTION),
        "--format", "megatron", "--per-shard", "--pack", "64")  # fmt: skip
    for side, prefix in (("train", "part"), ("val", "val")):
        parts = sorted(p.name.removesuffix(".parquet") for p in (out / "mix").glob(f"{prefix}-*"))
        packed = sorted(p.stem for p in (out / "packed" / side).glob("*.parquet"))
        bins = (out / "megatron" / side).glob("*.bin")
        megatron = sorted(p.name.removesuffix("_text_document.bin") for p in bins)
        assert len(parts) > 1 and packed == parts == megatron
    cli("check", out)


def test_stats_show_the_held_out_set(runs, cli):
    val = manifest(runs[0])["mix"]["val"]
    shown = cli("stats", runs[0]).output
    assert (
        f"validation (--val-fraction {FRACTION}, held out before mixing): {val['tokens']} "
        f"tokens, {val['documents']} documents, {val['parts']} parts"
    ) in shown


def test_a_shuffle_without_a_recipe_holds_out_what_a_run_without_a_mix_does(cli, tmp_path):
    """Every source once: each document in train or in validation, exactly once,
    split as encode's `split` column splits it."""
    data, tok = write_corpus(tmp_path / "data"), write_tokenizer(tmp_path / "tok.json")
    out = tmp_path / "out"
    cli("run", data, out, "--tokenizer", tok, "--shuffle", "3", "--val-fraction", "0.3")
    split = Counter()
    for shard in token_shards(out / "tokens"):
        for batch in shard.batches(columns=("row", "split")):
            rows_, sides = batch.column("row").to_pylist(), batch.column("split").to_pylist()
            split.update((shard.source, row, side) for row, side in zip(rows_, sides, strict=True))
    seen = Counter((r["shard"], r["input_row"], side) for side, prefix in
                   (("train", "part"), ("val", "val")) for r in rows(out, prefix))  # fmt: skip
    assert seen == split and set(seen.values()) == {1}


def test_a_shuffle_without_a_recipe_keeps_a_source_held_out_whole(cli, tmp_path):
    """A one-document file the split sends to validation: a run without --shuffle
    puts it there, so --shuffle, which names no source, must too (not refuse it
    as a recipe's source left with nothing to train on)."""
    data, tok = write_corpus(tmp_path / "data"), write_tokenizer(tmp_path / "tok.json")
    (data / "note.jsonl").write_text('{"text": "a lone note"}\n')
    assert is_val("note.jsonl", np.array([0], np.uint64), 0.5)[0]  # held out, whatever the seed
    out = tmp_path / "out"
    cli("run", data, out, "--tokenizer", tok, "--shuffle", "3", "--val-fraction", "0.5")
    assert [r["shard"] for r in rows(out, "val")].count("note.jsonl") == 1
    assert "note.jsonl" not in {r["shard"] for r in rows(out, "part")}


def test_a_fractional_epoch_takes_that_share_of_the_held_out_tokens():
    assert val_budget(Share("x", epochs=0.5), 500, held=300, fraction=0.25) == 150
    assert val_budget(Share("x", epochs=3.0), 1500, held=300, fraction=0.25) == 300
    assert val_budget(Share("x", tokens=90), 90, held=300, fraction=0.25) == 30


def test_standalone_pack_and_bin_of_the_parts_split_as_the_mix_did_or_refuse(runs, cli, tmp_path):
    """The parts of a split mixture, packed or binned without --val-fraction,
    went into one stream (a row of a training and a validation document), and
    another fraction was taken as the mix's: refused, as for encode's split
    shards; with the mix's fraction, what the run wrote."""
    mix = runs[0] / "mix"
    for fraction in ((), ("--val-fraction", "0.3")):
        for args in (
            ("bin", mix, tmp_path / "b"),
            ("pack", mix, tmp_path / "p", "--seq-len", "64"),
        ):
            result = cli(*args, *fraction, ok=False)
            assert result.exit_code == 1
            assert_one_line_error(result, f"{mix}/part-00000.parquet: the mix split its documents")
            assert not args[2].exists()
    cli("bin", mix, tmp_path / "b", "--val-fraction", str(FRACTION))
    for name in ("train.bin", "val.bin", "train.idx.npy", "val.idx.npy"):
        assert (tmp_path / "b" / name).read_bytes() == (runs[0] / "bin" / name).read_bytes()
    cli("pack", mix, tmp_path / "p", "--seq-len", "64", "--val-fraction", str(FRACTION))
    assert sorted(p.name for p in (tmp_path / "p").iterdir() if p.is_dir()) == ["train", "val"]
    # The run packed with --shuffle 7: so does pack, row for row (it could not, before).
    cli("pack", mix, tmp_path / "s", "--seq-len", "64", "--val-fraction", str(FRACTION),
        "--shuffle", "7")  # fmt: skip
    packed = sorted(
        p.relative_to(runs[0] / "packed") for p in (runs[0] / "packed").rglob("*.parquet")
    )
    assert packed == sorted(
        p.relative_to(tmp_path / "s") for p in (tmp_path / "s").rglob("*.parquet")
    )
    for name in packed:
        run_rows = pq.read_table(runs[0] / "packed" / name)
        assert pq.read_table(tmp_path / "s" / name).equals(run_rows), name
        assert not pq.read_table(tmp_path / "p" / name).equals(run_rows), name


def test_standalone_pack_of_parts_without_a_split_refuses_to_split_them(cli, tmp_path):
    """Split anew, a repeated document's copies would fall in both splits."""
    data, tok = write_corpus(tmp_path / "data"), write_tokenizer(tmp_path / "tok.json")
    recipe = tmp_path / "recipe.toml"
    recipe.write_text("[mix]\n" + RECIPE)
    out = tmp_path / "out"
    cli("run", data, out, "--tokenizer", tok, "--mix", recipe, "--workers", "1")
    result = cli("pack", out / "mix", tmp_path / "p", "--seq-len", "64", "--val-fraction", "0.1",
                 ok=False)  # fmt: skip
    assert_one_line_error(result, "part-00000.parquet: the mix held out no documents")
    assert not (tmp_path / "p").exists()


def test_parts_without_the_part_that_records_the_split_say_so(runs, cli, tmp_path):
    # Before: "split its documents by another --val-fraction than 0.1", though
    # 0.1 was the mix's own: the record was what was missing.
    import shutil

    mix = tmp_path / "mix"
    shutil.copytree(runs[0] / "mix", mix)
    (mix / "part-00000.parquet").unlink()
    result = cli("pack", mix, tmp_path / "p", "--seq-len", "64", "--val-fraction", str(FRACTION),
                 ok=False)  # fmt: skip
    assert_one_line_error(result, f"{mix}/part-00000.parquet: missing or unreadable")
    assert not (tmp_path / "p").exists()


def test_a_budgets_validation_share_is_met_as_a_budget_is(cli, tmp_path):
    """At least budget * F / (1 - F) tokens, beyond it by less than one
    document, as train's budget: what docs/recipes.md says it takes."""
    data, tok = write_corpus(tmp_path / "data"), write_tokenizer(tmp_path / "tok.json")
    recipe = tmp_path / "recipe.toml"
    recipe.write_text("[mix]\nlong = 1500\n")  # documents of about 500 tokens
    out = tmp_path / "out"
    cli("run", data, out, "--tokenizer", tok, "--mix", recipe, "--val-fraction",
        str(FRACTION), "--workers", "1")  # fmt: skip
    val = next(x for x in manifest(out)["mix"]["sources"] if x["name"] == "long")["val"]
    taken = [r["n_tokens"] for r in rows(out, "val")]
    assert val["budget"] == 500 and sum(taken) == val["taken"]["tokens"]
    assert val["budget"] < sum(taken) < val["budget"] + max(taken)
    rule = (REPO / "docs" / "recipes.md").read_text().split("## Validation", 1)[1]
    rule = " ".join(rule.split("## What a budget takes", 1)[0].split())
    assert "at least `budget * F / (1 - F)` tokens" in rule, rule
    assert "up to `budget * F / (1 - F)`" not in rule
