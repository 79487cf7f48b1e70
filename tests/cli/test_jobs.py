"""Job files (jobs/*.toml): `tokenmill run --job FILE` and `make job JOB=FILE`."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import assert_one_line_error, assert_usage_error, make_documents, write_shard
from runs import copy_sample, manifest, output_files, tokenmill_here

from tokenmill.config import Config
from tokenmill.jobs import load_job
from tokenmill.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[2]


def write_job(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_sample_job_reads_sample_data():
    job = load_job(ROOT / "jobs" / "sample.toml")
    assert job["inputs"] == ROOT / "sample_data"
    assert job["special_tokens"] == ("<|pad|>",)


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git checkout")
def test_sample_job_and_make_tokenize_write_separate_ignored_folders():
    """Nested, the one's outputs would be extra files in the other's `verify`."""
    job_out = load_job(ROOT / "jobs" / "sample.toml")["output"]
    make_out = ROOT / re.search(r"^OUT \?= (\S+)$", (ROOT / "Makefile").read_text(), re.M)[1]
    assert not job_out.is_relative_to(make_out)
    assert not make_out.is_relative_to(job_out)
    for out in (job_out, make_out):
        ignored = subprocess.run(["git", "-C", ROOT, "check-ignore", "-q", out / "manifest.json"])
        assert ignored.returncode == 0, f"{out} is not in .gitignore"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_job_runs_the_sample_job(tmp_path):
    # jobs/sample.toml as shipped, in a folder laid out like the repository
    # (its paths are relative to the job file), so the run writes under tmp_path.
    shutil.copy(ROOT / "jobs" / "sample.toml", write_job(tmp_path / "jobs" / "x", "").parent)
    (tmp_path / "sample_data").symlink_to(ROOT / "sample_data")
    job = tmp_path / "jobs" / "sample.toml"
    subprocess.run(["make", "-s", "job", f"JOB={job}"], cwd=ROOT, check=True)
    out = load_job(job)["output"]
    assert out.is_relative_to(tmp_path)
    m = manifest(out)
    assert m["config"]["vocab_size"] == 4096
    assert m["config"]["special_tokens"] == ["<|pad|>"]
    tok = Tokenizer.load(out / "tokenizer.json")
    assert tok.special_tokens == ["<|endoftext|>", "<|pad|>"]
    assert tok.vocab_size == 4096
    assert m["documents"] == m["documents_in"] > 0
    tokenmill_here("verify", out)
    # the same job again keeps everything
    subprocess.run(["make", "-s", "job", f"JOB={job}"], cwd=ROOT, check=True)
    assert all(s["redone"] == 0 for s in manifest(out)["stages"].values())


def test_job_equals_the_same_run_from_options_and_options_override_it(tmp_path):
    data = copy_sample(tmp_path / "data", ["lines.txt", "multilingual.jsonl"])
    job = write_job(
        tmp_path / "jobs" / "j.toml",
        'inputs = "../data"\noutput = "../out"\nvocab_size = 2000\nmode = "char"\nworkers = 2\n',
    )
    tokenmill_here("run", "--job", job)
    tokenmill_here("run", data, tmp_path / "direct", "--vocab-size", "2000", "--mode", "char")
    assert output_files(tmp_path / "out") == output_files(tmp_path / "direct")
    tokenmill_here("run", "--job", job, "--vocab-size", "1600")
    assert manifest(tmp_path / "out")["config"]["vocab_size"] == 1600
    assert manifest(tmp_path / "out")["config"]["mode"] == "char"


def test_count_only_and_encode_only_jobs(tmp_path):
    copy_sample(tmp_path / "data", ["lines.txt", "prose-en.parquet"])
    full = write_job(
        tmp_path / "jobs" / "full.toml",
        'inputs = "../data"\noutput = "../full"\nvocab_size = 700\n',
    )
    tokenmill_here("run", "--job", full)
    counting = write_job(
        tmp_path / "jobs" / "count.toml",
        'inputs = "../data"\noutput = "../counted"\nsteps = "count"\n',
    )
    tokenmill_here("run", "--job", counting)
    counted = output_files(tmp_path / "counted")
    assert sorted(counted) == sorted(
        f for f in output_files(tmp_path / "full") if f.startswith(("counts", ".counts"))
    )
    assert manifest(tmp_path / "counted")["steps"] == "count"
    encoding = write_job(
        tmp_path / "jobs" / "encode.toml",
        'inputs = "../data"\noutput = "../encoded"\ntokenizer = "../full/tokenizer.json"\n',
    )
    tokenmill_here("run", "--job", encoding)
    encoded = output_files(tmp_path / "encoded")
    assert encoded == {k: v for k, v in output_files(tmp_path / "full").items() if k in encoded}
    shown = sorted(k for k in encoded if not Path(k).name.startswith("."))
    assert shown == ["tokenizer.json", "tokens/lines.txt.parquet", "tokens/prose-en.parquet"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('inputs = "d"\noutput = "o"\nvocab = 5\n', "unknown key 'vocab'"),
        ('inputs = "d"\noutput = "o"\nvocab_size = "big"\n', "vocab_size must be int"),
        ('inputs = "d"\n', "give DATA and OUT"),
        ('inputs = "d"\noutput = "o"\nsteps = "train"\n', "steps must be one of"),
        ("inputs = [", "not valid TOML"),
        # An empty path was the job file's own folder, then refused as someone else's.
        ('inputs = "d"\noutput = ""\n', "bad.toml: output is empty (give a path)"),
        ('inputs = " "\noutput = "o"\n', "bad.toml: inputs is empty (give a path)"),
        # 0 is no packing, as --pack 0 is; the line said the least was 1.
        ('inputs = "d"\noutput = "o"\npack = -1\n', "bad.toml: pack -1 is out of range: 0 (none)"),
        # A bad value the job set is named by the job's key, not by an option
        # that is nowhere on the command line.
        ('inputs = "d"\noutput = "o"\non_error = "ignore"\n', "bad.toml: on_error must be one of"),
        ('inputs = "d"\noutput = "o"\nvocab_size = 5\n', "bad.toml: vocab_size 5 is below the"),
        ('inputs = "d"\noutput = "o"\nval_fraction = 1.5\n', "bad.toml: val_fraction 1.5 is out"),
        # The library's spelling of a value (superword_at=-1) named the option.
        ('inputs = "d"\noutput = "o"\nsuperword_at = -1\n', "bad.toml: superword_at -1: want"),
        # steps, said of the job's own keys, not of a tokenizer or a --count-only not given.
        ('inputs = "d"\noutput = "o"\nsteps = "encode"\n', "steps = 'encode' needs a tokenizer"),
        (
            'inputs = "d"\noutput = "o"\nsteps = "count"\nshuffle = 1\n',
            "bad.toml: shuffle acts on token shards: not with steps = 'count'",
        ),
        (
            'inputs = "d"\noutput = "o"\nsteps = "count"\npack = 64\n',
            "bad.toml: pack acts on token shards",
        ),
        (
            'inputs = "d"\noutput = "o"\nsteps = "count"\nvocab_size = 500\n',
            "bad.toml: vocab_size trains: not with steps = 'count'",
        ),
        # Settings nothing reads, named as the job's keys whatever their value.
        (
            'inputs = "d"\noutput = "o"\nsteps = "count"\neos = false\n',
            "bad.toml: eos acts on token shards: not with steps = 'count'",
        ),
        ('inputs = "d"\noutput = "o"\nmode = "char"\npattern = "cl100k"\n', "bad.toml: pattern"),
        ('inputs = "d"\noutput = "o"\nsuperword_max_words = 4\n', "bad.toml: superword_max_words"),
        ('inputs = "d"\noutput = "o"\nformat = "bin"\nper_shard = true\n', "bad.toml: per_shard"),
    ],
)
def test_bad_job_is_a_one_line_error(tmp_path, cli, text, needle):
    job = write_job(tmp_path / "bad.toml", text)
    result = cli("run", "--job", job, ok=False)
    assert_one_line_error(result, needle)
    assert result.exit_code == 1  # a bad job file, not a usage error


def test_a_bad_value_given_on_the_command_line_over_a_job_names_the_option(tmp_path, cli):
    job = write_job(tmp_path / "job.toml", 'inputs = "d"\noutput = "o"\nvocab_size = 500\n')
    result = cli("run", "--job", job, "--vocab-size", "7", ok=False)
    assert_one_line_error(result, "Error: --vocab-size 7 is below the base vocabulary")


def sample_job(tmp_path: Path, settings: str) -> Path:
    """jobs/j.toml: lines.txt of the sample into out/, vocabulary 400, and `settings`."""
    copy_sample(tmp_path / "data", ["lines.txt"])
    job = 'inputs = "../data"\noutput = "../out"\nvocab_size = 400\n' + settings
    return write_job(tmp_path / "jobs" / "j.toml", job)


def test_superword_at_0_switches_off_a_jobs_superword_tokens(tmp_path, cli):
    """Other options of a job the command line overrides or switches off
    (--pack 0, --no-bos); --superword-at took no value that meant none."""
    job = sample_job(tmp_path, "superword_at = 350\nsuperword_max_words = 2\n")
    cli("run", "--job", job, "--superword-at", "0")
    config = manifest(tmp_path / "out")["config"]
    assert "superword_at" not in config and "superword_max_words" not in config
    assert not (tmp_path / "out" / "superword-counts.parquet").exists()
    # Its word limit given with it is still one nothing acts on.
    result = cli("run", "--job", job, "--superword-at", "0", "--superword-max-words", "3", ok=False)
    assert_usage_error(result, "--superword-max-words goes with --superword-at", "run")


def test_a_training_option_of_a_run_that_counts_only_is_refused(tmp_path, cli):
    """Nothing trains: the option was dropped without a word, the run ended 0."""
    counting = write_job(tmp_path / "c.toml", 'inputs = "d"\noutput = "o"\nsteps = "count"\n')
    result = cli("run", "--job", counting, "--vocab-size", "500", ok=False)
    message = f"--vocab-size trains: not with steps = 'count' of {counting}"
    assert_usage_error(result, message, "run", tmp_path / "o")
    training = write_job(tmp_path / "t.toml", 'inputs = "d"\noutput = "o"\nvocab_size = 500\n')
    result = cli("run", "--job", training, "--count-only", ok=False)
    assert_one_line_error(result, f"{training}: vocab_size trains: not with --count-only")
    assert result.exit_code == 1  # the job file's key, not a usage error


def test_pattern_of_an_encode_only_run_reads_the_tokenizer(tmp_path):
    """With a tokenizer, --pattern (a preset or a regex, as for `encode`) says how to
    read it; it is no training option, so a regex is no error."""
    from tokenmill.jobs import resolve_job

    options = {"pattern": r"\w+|\s+"}
    job = resolve_job(None, tmp_path, tmp_path / "o", options, {"pattern"}, tmp_path / "t")
    assert (job.steps, job.load_pattern, job.config.pattern) == ("encode", r"\w+|\s+", "cl100k")
    job = resolve_job(None, tmp_path, tmp_path / "o", {"pattern": "gpt2"}, set())
    assert (job.steps, job.load_pattern, job.config.pattern) == ("all", None, "gpt2")


def test_a_jobs_extend_base_is_relative_to_the_job_file(tmp_path):
    """`extend` is a path like inputs and output: the job runs the same from any folder."""
    copy_sample(tmp_path / "data", ["lines.txt", "prose-en.parquet"])
    tokenmill_here("run", tmp_path / "data", tmp_path / "base", "--vocab-size", "400")
    job = write_job(
        tmp_path / "jobs" / "grow.toml",
        'inputs = "../data"\noutput = "../grown"\nvocab_size = 450\n'
        'extend = "../base/tokenizer.json"\n',
    )
    assert load_job(job)["extend"] == str(tmp_path / "base" / "tokenizer.json")
    tokenmill_here("run", "--job", job)  # from the repository's folder, not the job's
    base = Tokenizer.load(tmp_path / "base" / "tokenizer.json")
    grown = Tokenizer.load(tmp_path / "grown" / "tokenizer.json")
    assert manifest(tmp_path / "grown")["config"]["extend"] == str(
        tmp_path / "base" / "tokenizer.json"
    )
    assert grown.vocab_size == 450
    assert grown.merges[: len(base.merges)] == base.merges


def test_no_mix_and_no_shuffle_switch_off_a_jobs(tmp_path, cli):
    """Options of a value had none that meant none: a job's shuffle or
    recipe could be changed from the command line, not left out. The job's
    recipe switched off is not read, so it cannot fail the run."""
    job = sample_job(tmp_path, 'shuffle = 7\nmix = "no-such-recipe.toml"\n')
    cli("run", "--job", job, "--no-mix", "--no-shuffle")
    config = manifest(tmp_path / "out")["config"]
    assert "shuffle" not in config and "mix" not in config
    assert not (tmp_path / "out" / "mix").exists()
    result = cli("run", "--job", job, "--no-shuffle", "--shuffle", "3", ok=False)
    assert_usage_error(result, "--shuffle and --no-shuffle: give one", "run")


def test_no_extend_switches_off_a_jobs_base_and_its_alphabet_option(tmp_path, cli):
    job = sample_job(tmp_path, 'mode = "char"\nextend = "base.json"\nextend_alphabet = true\n')
    base = Tokenizer.train(["a small base of words"], mode="char", vocab_size=40)
    base.save(tmp_path / "jobs" / "base.json")
    cli("run", "--job", job, "--no-extend")
    config = manifest(tmp_path / "out")["config"]
    assert "extend" not in config and "extend_alphabet" not in config
    trained = Tokenizer.load(tmp_path / "out" / "tokenizer.json")
    assert trained.vocab_size == 400 and trained.mode == "char"
    cli("run", "--job", job)
    assert manifest(tmp_path / "out")["config"]["extend_alphabet"] is True


@pytest.mark.parametrize(
    ("settings", "args", "dropped"),
    [
        ('executor = "ray"\nray_address = "h:6379"\n', ["--executor", "threads"], "ray_address"),
        ('mode = "char"\nlowercase = true\n', ["--mode", "byte"], "lowercase"),
        ('pattern = "gpt2"\n', ["--mode", "char"], "pattern"),
    ],
)
def test_a_jobs_setting_goes_with_the_one_the_command_line_changes(
    tmp_path, cli, settings, args, dropped
):
    """A job's ray_address is its executor's, lowercase and pattern its mode's:
    the command line changing those left them behind, and the run failed
    (`ray_address goes with --executor ray`), as if the job were at fault."""
    job = sample_job(tmp_path, settings)
    cli("run", "--job", job, *args)
    config = manifest(tmp_path / "out")["config"]
    assert config[dropped] == Config.__dataclass_fields__[dropped].default
    assert config[args[0].removeprefix("--")] == args[1]
    # Given on the command line too, the setting is the run's, and refused.
    given = {"ray_address": ["--ray-address", "h:1"], "lowercase": ["--lowercase"]}
    given["pattern"] = ["--pattern", "gpt2"]
    result = cli("run", "--job", job, *args, *given[dropped], ok=False)
    assert_usage_error(result, f"--{dropped.replace('_', '-')}", "run")


def test_options_that_do_not_go_with_a_jobs_base_name_the_job(tmp_path, cli):
    """Found once the base is read, before any work: the job's key, status 1;
    given on the command line, a usage error."""
    base = tmp_path / "jobs" / "base.json"
    base.parent.mkdir(parents=True)
    Tokenizer.train(["a small base of words"] * 3, vocab_size=280).save(base)
    for settings, key in (('mode = "char"\n', "mode"), ("extend_alphabet = true\n", "ext")):
        job = sample_job(tmp_path, f'extend = "base.json"\n{settings}')
        result = cli("run", "--job", job, ok=False)
        assert_one_line_error(result, f"{job}: {key}")
        assert "does not go with --extend" in result.output and result.exit_code == 1
    result = cli("run", "--job", job, "--mode", "char", "--extend", base, ok=False)
    assert_usage_error(result, "--mode char does not go with --extend", "run")


def test_a_float_key_takes_a_whole_number_as_toml_writes_it(tmp_path, cli):
    """`val_fraction = 0` (no split) was refused: "val_fraction must be float, not int"."""
    write_shard(tmp_path / "d" / "a.jsonl", make_documents(30, seed=2))
    job = write_job(
        tmp_path / "j.toml", 'inputs = "d"\noutput = "o"\nvocab_size = 300\nval_fraction = 0\n'
    )
    cli("run", "--job", job)
    assert manifest(tmp_path / "o")["config"]["val_fraction"] == 0.0
    job = write_job(tmp_path / "k.toml", 'inputs = "d"\noutput = "o"\nval_fraction = 1\n')
    result = cli("run", "--job", job, ok=False)
    assert result.exit_code == 1
    assert_one_line_error(
        result, f"{job}: val_fraction 1.0 is out of range: 0 (no split) to below 1"
    )
    job = write_job(tmp_path / "b.toml", 'inputs = "d"\noutput = "o"\nval_fraction = true\n')
    assert_one_line_error(
        cli("run", "--job", job, ok=False), "val_fraction must be float, not bool"
    )
