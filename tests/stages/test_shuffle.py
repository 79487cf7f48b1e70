"""--shuffle SEED and the mixture's order, run by run: one permutation over
the whole corpus that depends on the seed, the input names and rows and the
recipe only; a mixture cut into several parts (a corpus bigger than one
bucket of the external sort); kills, reruns and verify; the training layouts
written from the mixture."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import write_shard
from mixdata import appearances, mixture, order, parts, write_corpus, write_tokenizer
from runs import manifest, output_files, paused, temporaries, tokenmill
from trainers import megatron_indexed_dataset

from tokenmill.layouts import packed_shuffle
from tokenmill.stages import shuffle
from tokenmill.stages.mix import BUCKET_ENV
from tokenmill.stages.shuffle import hashes

RECIPE = "short = 120\nlong = { epochs = 1.5 }\nbooks = { epochs = 2.0 }\n"
SMALL = {BUCKET_ENV: "2000"}  # ids per part: the mixture in several parts


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shuffle")
    recipe = folder / "recipe.toml"
    recipe.write_text("[mix]\n" + RECIPE)
    return write_corpus(folder / "data"), write_tokenizer(folder / "tok.json"), recipe


def args(corpus, out, *more, data=None) -> list:
    default, tok, recipe = corpus
    return ["run", data or default, out, "--tokenizer", tok, "--mix", recipe, *more]


@pytest.fixture
def run(cli, corpus, monkeypatch):
    """`tokenmill run` of the recipe in this process; `small`: in parts of SMALL ids."""

    def invoke(out, *more, small=False, data=None) -> str:
        with monkeypatch.context() as m:
            if small:
                m.setenv(BUCKET_ENV, SMALL[BUCKET_ENV])
            return cli(*args(corpus, out, *more, data=data)).output

    return invoke


def mix_files(out) -> dict[str, bytes]:
    return {k: v for k, v in output_files(out).items() if k.startswith("mix/")}


def test_the_order_depends_on_neither_workers_nor_executor(corpus, tmp_path):
    outs = {
        (workers, executor): tmp_path / f"{executor}-{workers}"
        for workers, executor in [("1", "threads"), ("2", "threads"), ("2", "processes")]
    }
    for (workers, executor), out in outs.items():
        more = ("--shuffle", "7", "--workers", workers, "--executor", executor, "--pack", "64")
        tokenmill(*args(corpus, out, *more), env=SMALL)
    first, *others = (output_files(out) for out in outs.values())
    assert len(parts(outs["1", "threads"])) > 1
    assert any(name.startswith("packed/") for name in first)  # its rows shuffled too
    assert all(files == first for files in others)


def test_the_order_is_one_seeded_permutation_of_the_whole_corpus(run, tmp_path):
    run(tmp_path / "one", "--shuffle", "7")
    run(tmp_path / "cut", "--shuffle", "7", small=True)
    assert len(parts(tmp_path / "one")) == 1 and len(parts(tmp_path / "cut")) > 3
    mixed = order(tmp_path / "cut")
    # The parts, read in turn, are the one permutation, however many there are ...
    assert mixed == order(tmp_path / "one")
    # ... of every copy, by its seeded key: across inputs, not input by input.
    keys = [int(hashes("order", 7, name, [row], epoch)[0]) for name, row, epoch in mixed]
    assert keys == sorted(keys)
    changes = sum(a[0] != b[0] for a, b in zip(mixed, mixed[1:], strict=False))
    assert changes > len(mixed) // 3
    run(tmp_path / "other", "--shuffle", "8")
    assert sorted(order(tmp_path / "other")) != sorted(mixed)  # another seed, another subset
    assert order(tmp_path / "other") != mixed


def test_without_shuffle_the_mixture_is_in_input_order_epoch_by_epoch(run, tmp_path):
    out = tmp_path / "out"
    run(out, small=True)
    inputs = sorted({name for name, _, _ in order(out)})
    assert order(out) == sorted(order(out), key=lambda c: (c[2], inputs.index(c[0]), c[1]))
    assert manifest(out)["mix"]["shuffle"] is None


def test_moving_data_changes_nothing(run, corpus, tmp_path):
    run(tmp_path / "here", "--shuffle", "7")
    moved = shutil.copytree(corpus[0], tmp_path / "elsewhere" / "corpus")
    run(tmp_path / "there", "--shuffle", "7", data=moved)
    assert mix_files(tmp_path / "there") == mix_files(tmp_path / "here")


@pytest.mark.parametrize("stage", ["mix", "mix-write"])
def test_a_killed_mix_reruns_to_the_same_bytes(corpus, tmp_path, stage):
    whole, out = tmp_path / "whole", tmp_path / "out"
    tokenmill(*args(corpus, whole, "--shuffle", "7", "--workers", "1"), env=SMALL)
    with paused(args(corpus, out, "--shuffle", "7", "--workers", "1"), stage, 1, tmp_path,
                env=SMALL):  # fmt: skip
        pass  # SIGKILLed in the middle of the mix
    tokenmill(*args(corpus, out, "--shuffle", "7", "--workers", "1"), env=SMALL)
    assert output_files(out) == output_files(whole)
    assert temporaries(out) == [] and not (out / "mix" / ".buckets").exists()


def test_changing_only_the_seed_or_a_budget_redoes_only_the_mix(run, cli, corpus, tmp_path):
    out = tmp_path / "out"
    run(out, "--shuffle", "7")
    again = run(out, "--shuffle", "7")
    assert "encode: 5 shards (5 kept, 0 done)" in again and "(kept: inputs unchanged)" in again
    before = output_files(out)
    reseeded = run(out, "--shuffle", "8")
    assert "encode: 5 shards (5 kept, 0 done)" in reseeded
    mix_line = next(line for line in reseeded.splitlines() if line.startswith("mix:"))
    assert "kept" not in mix_line
    after = output_files(out)
    assert {k for k in after if before.get(k) != after[k]} <= {k for k in after if "mix/" in k}
    assert mix_files(out) != {k: v for k, v in before.items() if k.startswith("mix/")}
    _, tok, _ = corpus
    recipe = tmp_path / "other.toml"
    recipe.write_text("[mix]\n" + RECIPE.replace("short = 120", "short = 150"))
    reweighed = cli("run", corpus[0], out, "--tokenizer", tok, "--mix", recipe, "--shuffle", "8")
    reweighed = reweighed.output
    assert "encode: 5 shards (5 kept, 0 done)" in reweighed
    assert manifest(out)["mix"]["sources"][0]["taken"]["tokens"] == 150
    plain = cli("run", corpus[0], out, "--tokenizer", tok).output  # no mix: its parts go
    assert "removed 2 stale files" in plain and not (out / "mix").exists()
    assert "mix" not in manifest(out) and "mix" not in manifest(out)["config"]
    cli("verify", out)


def test_verify_covers_the_mixture(run, cli, tmp_path):
    out = tmp_path / "out"
    run(out, "--shuffle", "7", small=True)
    listed = {e["path"] for e in manifest(out)["files"]}
    assert {f"mix/{p.name}" for p in parts(out)} <= listed
    cli("verify", out)
    part = parts(out)[1]
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 1
    part.write_bytes(bytes(data))
    result = cli("verify", out, ok=False)
    assert result.exit_code == 3
    assert f"output mix/{part.name}: changed, sha256" in result.output
    fixed = run(out, "--shuffle", "7", small=True)  # redone, not kept
    assert "(kept" not in next(line for line in fixed.splitlines() if line.startswith("mix:"))
    cli("verify", out)


def test_verify_holds_the_mixtures_account_to_its_first_part(run, cli, tmp_path):
    """The manifest's `mix` (what each source took) is the account part 0
    records: an edited number is a difference, though every file hashes as listed."""
    out = tmp_path / "out"
    run(out, "--shuffle", "7")
    cli("verify", out)
    edited = json.loads((out / "manifest.json").read_text())
    edited["mix"]["documents"] += 1
    (out / "manifest.json").write_text(json.dumps(edited))
    result = cli("verify", out, ok=False)
    assert result.exit_code == 3
    assert "manifest mix: not the account mix/part-00000.parquet records" in result.output


def test_the_layouts_are_written_from_the_mixture(run, cli, tmp_path):
    out = tmp_path / "out"
    run(out, "--shuffle", "7", "--format", "megatron,bin", "--pack", "64", small=True)
    rows = mixture(out)
    assert all(r["ids"][-1] == rows[0]["ids"][-1] for r in rows)  # each ends in <|endoftext|>
    dataset = megatron_indexed_dataset().IndexedDataset(str(out / "megatron/corpus_text_document"))
    assert [dataset[i].tolist() for i in range(len(dataset))] == [r["ids"] for r in rows]
    assert sum(appearances(out).values()) == len(rows) == manifest(out)["mix"]["documents"]
    checked = cli("check", out).output
    assert f"megatron: {len(rows)} documents equal" in checked
    assert f"packed: {len(rows)} documents equal" in checked


def test_stats_and_report_show_the_recipe_against_the_mixture(run, cli, tmp_path):
    out = tmp_path / "out"
    run(out, "--shuffle", "7")
    books = next(x for x in manifest(out)["mix"]["sources"] if x["name"] == "books")
    stats = cli("stats", out).output
    assert "mixture (shuffled with seed 7):" in stats
    line = next(row for row in stats.splitlines() if row.strip().startswith("books"))
    assert line.split()[1:4] == ["2.0", "epochs", str(books["budget"])]
    assert str(books["taken"]["tokens"]) in line
    assert f"{100 * books['asked_share']:.1f} -> {100 * books['share']:.1f}" in line
    cli("report", out)
    assert "Data recipe: asked against written" in (out / "report.html").read_text()


def test_empty_documents_keep_their_place_without_shuffle(cli, corpus, tmp_path):
    """With --no-eos an empty text is a document of no ids, whose place in the
    stream is the next one's: it still comes before it, epoch by epoch."""
    data = tmp_path / "data"
    write_shard(data / "a.jsonl", ["x y", "", "z", ""])
    write_shard(data / "b.jsonl", ["w", ""])  # the last of epoch 0: where epoch 1 starts
    recipe = tmp_path / "recipe.toml"
    recipe.write_text("[mix]\na = { epochs = 2.0 }\nb = { epochs = 2.0 }\n")
    out = tmp_path / "out"
    cli("run", data, out, "--tokenizer", corpus[1], "--mix", recipe, "--no-eos")
    once = [("a.jsonl", row) for row in range(4)] + [("b.jsonl", row) for row in range(2)]
    assert order(out) == [(name, row, epoch) for epoch in (0, 1) for name, row in once]


def test_small_buffers_write_the_same_bytes(run, tmp_path, monkeypatch):
    """Pass 1 and the shuffled packing append to their files a buffer at a time:
    buffers of a few documents, many record batches a bucket, write what one
    buffer for a whole shard writes."""
    run(tmp_path / "one", "--shuffle", "7", "--pack", "64", small=True)
    monkeypatch.setattr(shuffle, "BUFFER_BYTES", 1500)
    monkeypatch.setattr(packed_shuffle, "BUFFER_BYTES", 1500)
    run(tmp_path / "many", "--shuffle", "7", "--pack", "64", small=True)
    assert output_files(tmp_path / "one") == output_files(tmp_path / "many")


MB = 1 << 20


@pytest.mark.parametrize(
    ("ids_bytes", "most", "parts"),
    [
        (1000, 64 * MB, 1),  # below MIN_PART_BYTES: one part
        (58 * MB, 64 * MB, 15),  # parts of 4 MB, not one of 58
        (200 * MB, 64 * MB, 16),  # 16 parts of 12.5 MB
        (4096 * MB, 64 * MB, 64),  # parts of 64 MB at most
        (20_000, 2000, 10),  # TOKENMILL_MIX_BUCKET_BYTES asks for small parts
    ],
)
def test_parts_follow_from_the_mixture_size_alone(ids_bytes, most, parts):
    """At most `most` bytes of ids a part, and at least MIN_PARTS parts while
    each holds MIN_PART_BYTES: pass 2 (one part a task) spreads over workers."""
    itemsize = 4
    tokens = ids_bytes // itemsize
    for seed in (None, 7):
        cut = shuffle.Order.sized(seed, tokens, itemsize, most)
        assert cut.buckets == parts
        assert cut.bucket_tokens * cut.buckets >= tokens
        assert cut.bucket_tokens * itemsize <= max(most, shuffle.MIN_PART_BYTES)


@pytest.mark.parametrize("seed", [None, "7"])
def test_a_mixture_cut_into_the_least_parts_is_the_same_sequence(run, tmp_path, monkeypatch, seed):
    """A small mixture cut into MIN_PARTS parts (MIN_PART_BYTES made tiny) reads
    back as the same documents in the same order as one part, and the layouts
    written from it are the same bytes."""
    more = ("--format", "megatron", *(("--shuffle", seed) if seed else ()))
    run(tmp_path / "one", *more)
    monkeypatch.setattr(shuffle, "MIN_PART_BYTES", 64)
    run(tmp_path / "cut", *more)
    assert len(parts(tmp_path / "one")) == 1
    assert len(parts(tmp_path / "cut")) == shuffle.MIN_PARTS
    assert order(tmp_path / "cut") == order(tmp_path / "one")
    one, cut = output_files(tmp_path / "one"), output_files(tmp_path / "cut")
    megatron = [k for k in one if k.startswith("megatron/")]
    assert megatron and all(one[k] == cut[k] for k in megatron)


def test_a_link_in_place_of_the_scratch_folder_is_never_written_through(run, tmp_path):
    """OUT/mix/.buckets (and OUT/packed/.buckets) made a link to a folder of the
    user's: the rerun removes the link and writes its scratch files in OUT."""
    out = tmp_path / "out"
    run(out, "--shuffle", "7", "--pack", "64")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "000000.arrow").write_bytes(b"the user's")
    for folder in ("mix", "packed"):
        (out / folder / ".buckets").symlink_to(theirs, target_is_directory=True)
    run(out, "--shuffle", "8", "--pack", "64")
    assert [p.name for p in theirs.iterdir()] == ["000000.arrow"]
    assert (theirs / "000000.arrow").read_bytes() == b"the user's"
    assert not any((out / folder / ".buckets").is_symlink() for folder in ("mix", "packed"))
