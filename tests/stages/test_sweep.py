"""`tokenmill sweep`: bytes per token for the prefix vocabularies of one training.

The sweep encodes with OUT's merges cut to each size; the claim it rests on is that a
training to that size learns exactly those merges. So for three sizes its numbers (per
source and overall) must equal those of a separate `run` to that size followed by `stats`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import assert_usage_error

from tokenmill.cli import main
from tokenmill.config import Config
from tokenmill.errors import TokenmillError
from tokenmill.stages.run import run_all
from tokenmill.stages.stats import run_stats
from tokenmill.stages.sweep import default_sizes, prefix, read_sweep, run_sweep
from tokenmill.tokenizer import Tokenizer

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
SIZES = [300, 1000, 2500]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    data = root / "data"
    data.mkdir()
    for name in ("lines.txt", "multilingual.jsonl"):  # no source column, and one
        shutil.copy(SAMPLE / name, data / name)
    out = root / "out"
    run_all(data, out, Config(vocab_size=4000))
    return root, data, out


def numbers(lines: list[dict], k: int | None = None) -> dict:
    """name -> (documents, bytes, text tokens, bytes per token), at size index k."""
    return {
        x["name"]: (
            x["documents"],
            x["bytes"],
            x["text_tokens"] if k is None else x["text_tokens"][k],
            x["bytes_per_token"] if k is None else x["bytes_per_token"][k],
        )
        for x in lines
    }


def test_sweep_equals_separate_trainings_and_stats(swept):
    root, data, out = swept
    sweep = run_sweep(out, sizes=SIZES)
    assert sweep.vocab_sizes == SIZES
    for k, size in enumerate(SIZES):
        other = root / f"out-{size}"
        run_all(data, other, Config(vocab_size=size))
        small = Tokenizer.load(other / "tokenizer.json")
        assert small.merges == Tokenizer.load(out / "tokenizer.json").merges[: len(small.merges)]
        stats = run_stats(other).stats
        assert numbers(sweep.sources, k) == numbers(stats["sources"])
        assert numbers([sweep.all], k) == {"all": numbers([dict(stats, name="all")])["all"]}


def test_sample_is_deterministic_and_a_subset(swept):
    _, _, out = swept
    a = run_sweep(out, sizes=[1000], sample=50, write=False)
    b = run_sweep(out, sizes=[1000], sample=50, write=False)
    assert a.to_json() == b.to_json()
    assert a.all["documents"] == 50
    whole = run_sweep(out, sizes=[1000], write=False)
    assert whole.all["documents"] > 50


def test_default_ladder_and_limits(swept):
    _, _, out = swept
    tok = Tokenizer.load(out / "tokenizer.json")
    assert default_sizes(tok) == [512, 1024, 2048, tok.vocab_size]
    with pytest.raises(Exception, match="out of range"):
        prefix(tok, tok.vocab_size + 1)
    assert prefix(tok, tok.vocab_size).merges == tok.merges


def test_cli_prints_a_table_and_json_and_report_plots_it(swept):
    _, _, out = swept
    result = CliRunner().invoke(main, ["sweep", str(out), "--vocab-sizes", "300,1000"])
    assert result.exit_code == 0, result.output
    assert "bytes per token by vocabulary size" in result.output
    assert "lines.txt" in result.output and "all" in result.output
    result = CliRunner().invoke(main, ["sweep", str(out), "--json", "--sample", "20"])
    assert result.exit_code == 0, result.output
    d = json.loads(result.output[: result.output.rindex("}") + 1])
    assert d["sample"] == 20 and d["all"]["documents"] == 20
    assert read_sweep(out)["vocab_sizes"] == d["vocab_sizes"]
    result = CliRunner().invoke(main, ["report", str(out)])
    assert result.exit_code == 0, result.output
    html = (out / "report.html").read_text()
    assert "id=sweep" in html and "lines.txt" in html


def test_a_tokenizer_the_shards_were_not_encoded_with_is_refused_as_stats_refuses(swept, tmp_path):
    """Copied over OUT/tokenizer.json, another tokenizer's numbers were printed as OUT's."""
    _, _, out = swept
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    Tokenizer.train(["another corpus"] * 5, vocab_size=300).save(copy / "tokenizer.json")
    for command in ("stats", "sweep"):
        result = CliRunner().invoke(main, [command, str(copy)])
        assert result.exit_code == 1, result.output
        assert result.output.startswith(f"Error: {copy / 'tokenizer.json'}: not the tokenizer ")
        assert len(result.output.strip().splitlines()) == 1
    assert not (copy / "sweep.json").exists() or read_sweep(copy) == read_sweep(out)


def test_an_input_changed_since_the_run_is_refused(swept, tmp_path):
    """sweep encodes the run's documents again from DATA: another text there
    would be measured as the run's, as stats and verify refuse it."""
    _, data, out = swept
    copy, changed = tmp_path / "out", tmp_path / "data"
    shutil.copytree(out, copy)
    shutil.copytree(data, changed)
    with open(changed / "lines.txt", "a", encoding="utf-8") as f:
        f.write("a line the run never read\n")
    result = CliRunner().invoke(main, ["sweep", str(copy), "--data", str(changed)])
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {changed / 'lines.txt'}: changed since the run (not the sha256 its manifest "
        "records); sweep measures the run's documents: run again, or give --held-out\n"
    )
    assert not (copy / "sweep.json").exists() or read_sweep(copy) == read_sweep(out)
    assert CliRunner().invoke(main, ["sweep", str(copy), "--data", str(data)]).exit_code == 0


def test_a_held_out_file_that_cannot_be_read_is_named_for_its_own_fault(swept, tmp_path):
    """Its source column is read first: the file's fault, not the column's."""
    _, _, out = swept
    (tmp_path / "array.json").write_text('[{"text": "a document"}]\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["sweep", str(out), "--held-out", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {tmp_path / 'array.json'}: one JSON array, not JSON Lines (one object per "
        "line); convert it, e.g. jq -c '.[]'\n"
    )


@pytest.mark.parametrize("lines", [['{"text": ""}', '{"text": ""}'], []])
def test_held_out_text_with_nothing_to_measure_is_refused(swept, tmp_path, lines):
    """Empty documents, or none: sweep printed "bytes per token None to None" and
    report drew an empty plot."""
    _, _, out = swept
    held_out = tmp_path / "held-out"
    held_out.mkdir()
    (held_out / "empty.jsonl").write_text("".join(f"{line}\n" for line in lines))
    before = (out / "sweep.json").read_bytes() if (out / "sweep.json").exists() else None
    result = CliRunner().invoke(main, ["sweep", str(out), "--held-out", str(held_out)])
    assert result.exit_code == 1, result.output
    what = "its 2 documents are empty" if lines else "it holds no documents"
    assert result.output == f"Error: {held_out}: {what}: nothing to measure bytes per token on\n"
    after = (out / "sweep.json").read_bytes() if (out / "sweep.json").exists() else None
    assert after == before


def test_an_extended_run_is_swept_from_its_base(swept, tmp_path):
    """Sizes below the base's ids are no training's (`run --extend` refuses
    them): the default sizes were the powers of two from 512 below the
    trained size, and --vocab-sizes took any size down to the ids of no merge."""
    _, data, _ = swept
    base = Tokenizer.train(["low lower lowest newer"] * 5, mode="char", vocab_size=40)
    base.save(tmp_path / "base.json")

    def config(vocab_size: int) -> Config:
        extend = str(tmp_path / "base.json")
        return Config(vocab_size=vocab_size, extend=extend, extend_alphabet=True)

    out = tmp_path / "out"
    run_all(data, out, config(3000))
    tok = Tokenizer.load(out / "tokenizer.json")
    smallest = tok.vocab_size - len(tok.merges) + len(base.merges)  # the base, alphabet grown
    with pytest.raises(TokenmillError, match=f"below the base's {smallest} ids"):
        run_all(data, tmp_path / "smaller", config(smallest - 1))
    assert smallest > base.vocab_size and run_sweep(out, write=False).vocab_sizes == [
        smallest, *(v for v in (512, 1024, 2048) if v > smallest), 3000
    ]  # fmt: skip
    for size in (smallest - 1, 300):
        result = CliRunner().invoke(main, ["sweep", str(out), "--vocab-sizes", f"{size},3000"])
        assert result.exit_code == 2, result.output
        assert result.output.startswith(
            f"Error: --vocab-sizes {size} is below the base's {smallest} ids: no training "
        )
        assert len(result.output.strip().splitlines()) == 1
    assert run_sweep(out, sizes=[smallest], write=False).all["documents"] > 0


def test_prefix_of_an_extended_char_tokenizer_has_the_same_tokens():
    import pyarrow as pa

    from tokenmill.tokenizer.core import word_table
    from tokenmill.tokenizer.extend import extend

    base = Tokenizer.train(["low lower lowest"] * 5, mode="char", num_merges=4)
    table = word_table([pa.array(["newer newest news"] * 5, pa.large_string())], "char", "", False)
    tok = extend(base, table["word"], table["count"], num_merges=6).tokenizer
    assert tok.special_ids is not None  # the base's special ids sit among the merges
    text = "lowest newest"

    def tokens(t: Tokenizer) -> list[str]:
        return [t.token_values[i] for i in t.encode(text)]

    assert tokens(prefix(tok, tok.vocab_size)) == tokens(tok)
    assert tokens(prefix(tok, base.vocab_size)) == tokens(base)


def held_out_files(folder):
    """A gzip stream cut short, a file that is no Parquet, bad JSON Lines records."""
    import gzip

    folder.mkdir()
    (folder / "cut.jsonl.gz").write_bytes(gzip.compress(b'{"text": "zzz"}\n' * 50)[:40])
    (folder / "c.parquet").write_bytes(b"garbage")
    (folder / "x.jsonl").write_text('{"text": "alpha beta"}\nnot json\n{"text": null}\n')
    return folder


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("cut.jsonl.gz", "cut.jsonl.gz: cannot read (Compressed file ended before"),
        ("c.parquet", "c.parquet: cannot read (Parquet file size is 7 bytes"),
        ("x.jsonl", "x.jsonl: row 1 (line 2): not JSON"),
    ],
)
def test_a_held_out_document_that_does_not_read_fails_the_sweep_in_one_line(
    swept, tmp_path, name, said
):
    """A traceback before (a broken stream, no Parquet), or (bad records) the
    rest measured as if they were all, without a word."""
    _, _, out = swept
    files = held_out_files(tmp_path / "all")
    (tmp_path / "one").mkdir()
    (files / name).rename(tmp_path / "one" / name)
    result = CliRunner().invoke(main, ["sweep", str(out), "--held-out", str(tmp_path / "one")])
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: {tmp_path / 'one'}/{said}"), result.output
    assert result.output.count("\n") == 1


def test_sample_with_held_out_is_a_usage_error(swept, tmp_path):
    """Refused before any work, with status 2 and the help named, as the
    README's exit table has it for options that do not go together: it was
    status 1."""
    _, _, out = swept
    (tmp_path / "held.txt").write_text("held-out text\n", encoding="utf-8")
    args = ["sweep", str(out), "--held-out", str(tmp_path / "held.txt"), "--sample", "5"]
    result = CliRunner().invoke(main, args)
    assert_usage_error(result, "--sample is for the run's documents: not with --held-out", "sweep")


def test_held_out_needs_none_of_the_runs_inputs_and_refuses_data(swept, tmp_path):
    """With --held-out the run's documents are not read: the sweep failed when
    DATA had moved ("the inputs are not there; give --data DATA"), and took
    --data /etc without a word."""
    _, data, out = swept
    moved = tmp_path / "out"
    shutil.copytree(out, moved)
    manifest = json.loads((moved / "manifest.json").read_text())
    manifest["data"] = str(tmp_path / "gone")
    (moved / "manifest.json").write_text(json.dumps(manifest))
    held = tmp_path / "held.txt"
    held.write_text("held-out text, which the tokenizer never saw\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["sweep", str(moved), "--held-out", str(held)])
    assert result.exit_code == 0, result.output
    args = ["sweep", str(moved), "--held-out", str(held), "--data", str(data)]
    result = CliRunner().invoke(main, args)
    assert_usage_error(
        result, "--data is where the run's documents are: not with --held-out", "sweep"
    )
