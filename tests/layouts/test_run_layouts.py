"""`run` and its layouts: --format takes a list, --per-shard, job files, the
checks made before any work, and the tokenizers a run loads (each once)."""

from __future__ import annotations

import importlib.util
import json

import pytest
from conftest import assert_one_line_error, write_shard
from runs import manifest, output_files

from tokenmill import formats
from tokenmill.config import OUTPUT_FORMATS, Config
from tokenmill.jobs import load_job, resolve_job
from tokenmill.layouts import FORMATS, MODULES, layout
from tokenmill.stages.run import run_all
from tokenmill.tokenizer import ENDOFTEXT, Tokenizer

# Every layout whose module exists, so that each new one is held to these.
NAMES = [n for n in MODULES if importlib.util.find_spec(f"tokenmill.layouts.{MODULES[n]}")]
RUN = ("--vocab-size", "300", "--workers", "1")


def test_format_is_held_as_a_list_in_one_order_each_once():
    assert OUTPUT_FORMATS == ("parquet", *FORMATS)  # the CLI's names are the registry's
    assert Config().format == Config(format="parquet").format == ("parquet",)
    assert Config(format="olmo,bin,parquet,bin").format == ("parquet", "bin", "olmo")
    assert Config(format=["megatron", "bin"]).format == ("parquet", "bin", "megatron")
    assert Config(format="parquet").layouts == ()
    assert Config(format="datatrove,bin", pack=8).layouts == ("packed", "bin", "datatrove")


@pytest.mark.parametrize("value", ["bin,nope", "", "bin,"])
def test_an_unknown_format_is_one_line_naming_the_choices(cli, corpus, tmp_path, value):
    result = cli("run", corpus, tmp_path / "out", *RUN, "--format", value, ok=False)
    assert_one_line_error(result, "--format", ", ".join(OUTPUT_FORMATS))
    assert not (tmp_path / "out").exists()


def test_run_writes_each_format_given_and_a_rerun_resumes(cli, corpus, tmp_path):
    formats_given = [n for n in NAMES if n != "packed"]
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN, "--format", ",".join(reversed(formats_given)), "--per-shard")
    config = manifest(out)["config"]
    assert config["format"] == ["parquet", *formats_given] and config["per_shard"] is True
    listed = [e["path"] for e in manifest(out)["files"]]
    for name in formats_given:
        assert (out / name).is_dir()
        assert any(p.startswith(f"{layout(name).folder}/") for p in listed), name
    before = output_files(out)
    result = cli("run", corpus, out, *RUN, "--format", ",".join(formats_given), "--per-shard")
    assert "encode: 5 shards (5 kept, 0 done)" in result.output
    assert output_files(out) == before
    # --format given once per layout: each is written (the last alone was, before).
    repeated = [a for name in formats_given for a in ("--format", name)]
    result = cli("run", corpus, out, *RUN, *repeated, "--per-shard")
    assert manifest(out)["config"]["format"] == ["parquet", *formats_given]
    assert output_files(out) == before


def test_a_job_takes_the_formats_as_a_list_or_one_string(tmp_path):
    job = tmp_path / "job.toml"
    for value in ('["megatron", "bin"]', '"megatron,bin"'):
        job.write_text(f'inputs = "d"\noutput = "o"\nformat = {value}\nper_shard = true\n')
        options = {"format": "parquet", "per_shard": False}
        config = resolve_job(job, None, None, options, set()).config
        assert config.format == ("parquet", "bin", "megatron") and config.per_shard
    job.write_text('inputs = "d"\noutput = "o"\nformat = 3\n')
    with pytest.raises(ValueError, match="format must be a list of strings"):
        load_job(job)


@pytest.mark.parametrize("name", NAMES)
def test_a_file_where_a_layout_folder_goes_is_refused_before_any_work(cli, corpus, tmp_path, name):
    out = tmp_path / "out"
    out.mkdir()
    (out / layout(name).folder).write_text("mine")
    option = ("--pack", "8") if name == "packed" else ("--format", name)
    result = cli("run", corpus, out, *RUN, *option, "--force", ok=False)
    # The folder named, not a file of another layout's or another run's names.
    said = f"{out / layout(name).folder}: a file where tokenmill writes a folder; move it away"
    assert_one_line_error(result, said)
    assert not (out / "counts").exists()


@pytest.mark.parametrize("name", NAMES)
def test_a_folder_where_a_layout_writes_a_file_is_refused_before_any_work(
    cli, corpus, tmp_path, name
):
    # The layout names its files by the options: found only when written, the
    # run ended after the counts, tokens and the layout's earlier files.
    option = ("--pack", "8") if name == "packed" else ("--format", name)
    cli("run", corpus, tmp_path / "first", *RUN, *option)
    folder = tmp_path / "first" / layout(name).folder
    last = sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file())[-1]
    out = tmp_path / "out"
    (out / layout(name).folder / last).mkdir(parents=True)
    result = cli("run", corpus, out, *RUN, *option, "--force", ok=False)
    said = f"{out / layout(name).folder / last}: a folder, where tokenmill writes a file"
    assert_one_line_error(result, said)
    assert not (out / "counts").exists()


@pytest.mark.parametrize("command", ["bin", "pack"])
def test_standalone_layouts_refuse_a_folder_where_they_write_a_file(cli, corpus, tmp_path, command):
    cli("run", corpus, tmp_path / "r", *RUN)
    wanted = (
        "index.json"
        if command == "bin"
        else sorted(
            p.relative_to(tmp_path / "r" / "tokens")
            for p in (tmp_path / "r" / "tokens").rglob("*.parquet")
        )[-1]
    )
    (tmp_path / "o" / wanted).mkdir(parents=True)
    options = ("--seq-len", "8") if command == "pack" else ()
    result = cli(command, tmp_path / "r" / "tokens", tmp_path / "o", *options, ok=False)
    assert_one_line_error(result, f"{tmp_path / 'o' / wanted}: a folder, where tokenmill writes")
    assert [p.name for p in (tmp_path / "o").iterdir()] == [str(wanted).split("/")[0]]


def test_a_run_loads_its_base_once_and_encodes_with_the_tokenizer_it_trained(tmp_path, monkeypatch):
    data = tmp_path / "data"
    write_shard(data / "a.txt", ["the cat sat on the mat", "a dog and a log"] * 20)
    base = Tokenizer.train(["the cat sat"] * 5, pattern="gpt2", num_merges=3)
    base.save(tmp_path / "base.json")
    loaded = []
    load_any = formats.load_any

    def counting(path, **options):
        loaded.append(path.name)
        return load_any(path, **options)

    monkeypatch.setattr(formats, "load_any", counting)
    out = tmp_path / "out"
    run_all(data, out, Config(vocab_size=280, extend=str(tmp_path / "base.json"), format="bin"))
    assert loaded == ["base.json"]
    written = json.loads((out / "manifest.json").read_text())
    saved = Tokenizer.load(out / "tokenizer.json")
    assert written["tokenizer"]["sha256"] == written["tokenizer_sha256"] == saved.sha256


def test_bos_with_a_tokenizer_without_it_is_refused_before_any_work(cli, corpus, tmp_path):
    Tokenizer.train(["a b c"] * 5, num_merges=2, special_tokens=[ENDOFTEXT]).save(
        tmp_path / "tok.json"
    )
    out = tmp_path / "out"
    result = cli(
        "run", corpus, out, "--tokenizer", tmp_path / "tok.json", "--bos", "--format", "bin",
        ok=False,
    )  # fmt: skip
    assert_one_line_error(result, "--bos: the tokenizer has no <|bos|>")
    assert not out.exists()


def stamps(out) -> dict[str, tuple[int, int]]:
    """(mtime_ns, inode) of every layout file under OUT."""
    folders = {layout(n).folder for n in NAMES}
    return {
        p.relative_to(out).as_posix(): (p.stat().st_mtime_ns, p.stat().st_ino)
        for p in out.rglob("*")
        if p.is_file() and p.relative_to(out).parts[0] in folders
    }


def test_a_rerun_keeps_a_layout_made_from_the_same_shards_and_options(cli, corpus, tmp_path):
    """Every layout was written again on every rerun, the same bytes with new
    mtimes: a nightly rerun that found nothing new rewrote the whole training
    layout, and sync tools going by mtime sent it all again. A layout is
    kept when the last manifest records it made from the same shards and
    options and its files still hash as recorded; else it is written anew,
    equal to a fresh run's."""
    out = tmp_path / "out"
    options = (*RUN, "--pack", "64", "--format", ",".join(FORMATS))
    cli("run", corpus, out, *options)
    before = stamps(out)
    assert before
    result = cli("run", corpus, out, *options)
    kept = [line for line in result.output.splitlines() if "kept: shards and options" in line]
    assert len(kept) == len(FORMATS) + 1  # and packed
    assert stamps(out) == before
    cli("verify", out)

    # One layout's option changed: that layout alone is written again.
    cli("run", corpus, out, *RUN, "--pack", "32", "--format", ",".join(FORMATS))
    fresh = tmp_path / "fresh"
    cli("run", corpus, fresh, *RUN, "--pack", "32", "--format", ",".join(FORMATS))
    assert output_files(out) == output_files(fresh)
    after = stamps(out)
    assert {n for n in after if before.get(n) != after[n]} == {
        n for n in after if n.startswith("packed/")
    }

    # A file damaged since, or gone, is written again; --force writes all.
    bin_file = next(p for p in (out / "megatron").iterdir() if p.suffix == ".bin")
    bin_file.write_bytes(bin_file.read_bytes()[:-2] + b"\0\0")
    (out / "olmo" / "index.json").unlink()
    cli("run", corpus, out, *RUN, "--pack", "32", "--format", ",".join(FORMATS))
    assert output_files(out) == output_files(fresh)
    cli("verify", out)
    forced = stamps(out)
    cli("run", corpus, out, *RUN, "--pack", "32", "--format", ",".join(FORMATS), "--force")
    assert all(stamps(out)[n] != forced[n] for n in forced)
