"""The stage commands one after another (`count`, `merge`, `train`, `encode`)
make exactly what `run` makes, byte for byte, on every kind of input."""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import zstd

from tokenmill.io.lock import LOCK

datasets.disable_progress_bars()

TRAIN = ("--vocab-size", "300")


def lines_of(corpus: Path) -> bytes:
    """The corpus fixture's JSON Lines shard, the text of the compressed kinds."""
    return (corpus / "b.jsonl").read_bytes()


def paragraphs(corpus: Path) -> bytes:
    """The corpus's text lines as paragraphs of three lines."""
    lines = (corpus / "sub" / "d.txt").read_bytes().splitlines(keepends=True)
    return b"".join(b"".join(lines[i : i + 3]) + b"\n" for i in range(0, len(lines), 3))


def texts(corpus: Path) -> list[str]:
    return pq.read_table(corpus / "a.parquet")["text"].to_pylist()


def arrow_file(corpus: Path, dest: Path) -> None:
    table = pa.table({"text": texts(corpus)})
    with pa.OSFile(str(dest / "a.arrow"), "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        for batch in table.to_batches(max_chunksize=15):
            w.write_batch(batch)


def arrow_stream(corpus: Path, dest: Path) -> None:
    table = pa.table({"text": texts(corpus)})
    with pa.OSFile(str(dest / "a.arrow"), "wb") as f, pa.ipc.new_stream(f, table.schema) as w:
        for batch in table.to_batches(max_chunksize=15):
            w.write_batch(batch)


def saved_dataset(corpus: Path, dest: Path) -> None:
    datasets.Dataset.from_dict({"text": texts(corpus)}).save_to_disk(dest / "saved", num_shards=2)


# kind -> (fill DATA from the corpus fixture's shards, extra options of count/encode/run)
KINDS = {
    "corpus": (lambda c, d: shutil.copytree(c, d, dirs_exist_ok=True), ()),
    "parquet": (lambda c, d: shutil.copy(c / "a.parquet", d), ()),
    "jsonl": (lambda c, d: shutil.copy(c / "b.jsonl", d), ()),
    "jsonl.gz": (lambda c, d: (d / "b.jsonl.gz").write_bytes(gzip.compress(lines_of(c))), ()),
    "jsonl.zst": (lambda c, d: (d / "b.jsonl.zst").write_bytes(zstd(lines_of(c))), ()),
    "jsonl.bz2": (lambda c, d: (d / "b.jsonl.bz2").write_bytes(bz2.compress(lines_of(c))), ()),
    "jsonl.xz": (lambda c, d: (d / "b.jsonl.xz").write_bytes(lzma.compress(lines_of(c))), ()),
    "txt-line": (lambda c, d: shutil.copy(c / "sub" / "d.txt", d), ("--txt-unit", "line")),
    "txt-paragraph": (
        lambda c, d: (d / "p.txt").write_bytes(paragraphs(c)),
        ("--txt-unit", "paragraph"),
    ),
    "txt-file": (
        lambda c, d: shutil.copytree(c / "sub", d, dirs_exist_ok=True),
        ("--txt-unit", "file"),
    ),
    "arrow-file": (arrow_file, ()),
    "arrow-stream": (arrow_stream, ()),
    "datasets": (saved_dataset, ()),
}


def made(out: Path) -> dict[str, bytes]:
    """The token shards (with their state files) and the tokenizer of a folder, by
    path; not the lock file a stage command leaves in the folder it wrote."""
    shards = sorted(p for p in (out / "tokens").rglob("*") if p.is_file() and p.name != LOCK)
    files = {p.relative_to(out).as_posix(): p.read_bytes() for p in shards}
    return {**files, "tokenizer.json": (out / "tokenizer.json").read_bytes()}


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_stage_commands_make_what_run_makes(corpus, tmp_path, cli, kind):
    fill, options = KINDS[kind]
    data = tmp_path / "in"
    data.mkdir()
    fill(corpus, data)
    cli("run", data, tmp_path / "run", *TRAIN, *options)

    out = tmp_path / "stages"
    cli("count", data, out / "counts", *options)
    cli("merge", out / "counts", out / "counts.parquet")
    cli("train", out / "counts.parquet", out / "tokenizer.json", *TRAIN)
    cli("encode", data, out / "tokens", "--tokenizer", out / "tokenizer.json", *options)

    by_run, by_stages = made(tmp_path / "run"), made(out)
    assert [n for n in by_run if n.startswith("tokens/")]  # something was compared
    assert by_stages.keys() == by_run.keys()
    for name, data_ in by_run.items():
        assert by_stages[name] == data_, name


@pytest.mark.parametrize(
    "counted, trained, needle",
    [
        (["--pattern", "gpt2"], [], "counted with --pattern gpt2: train with it too"),
        (["--mode", "char"], [], "counted with --mode char"),
        (["--mode", "char", "--lowercase"], ["--mode", "char"], "counted with --lowercase"),
        ([], ["--mode", "char"], "counted with --mode byte"),
    ],
)
def test_train_refuses_words_counted_another_way(corpus, tmp_path, cli, counted, trained, needle):
    """`count --pattern gpt2`, `merge`, then `train` (cl100k by default) exited 0
    with a tokenizer recording cl100k whose merges were learned on gpt2's words:
    it encoded text into pieces its merges never saw. The same options through
    the stages make what `run` makes."""
    out = tmp_path / "stages"
    cli("count", corpus, out / "counts", *counted)
    cli("merge", out / "counts", out / "counts.parquet")
    refused = cli("train", out / "counts.parquet", out / "t.json", *TRAIN, *trained, ok=False)
    assert refused.exit_code == 1 and needle in refused.output.strip().splitlines()[-1]
    assert not (out / "t.json").exists()
    cli("train", out / "counts.parquet", out / "t.json", *TRAIN, *counted)
    cli("run", corpus, tmp_path / "run", *TRAIN, *counted)
    assert (out / "t.json").read_bytes() == (tmp_path / "run" / "tokenizer.json").read_bytes()


def test_merge_refuses_tables_counted_two_ways(corpus, tmp_path, cli):
    cli("count", corpus, tmp_path / "gpt2", "--pattern", "gpt2")
    cli("count", corpus, tmp_path / "o200k", "--pattern", "o200k")
    odd = next((tmp_path / "o200k").rglob("*.parquet"))
    shutil.copy(odd, tmp_path / "gpt2" / odd.relative_to(tmp_path / "o200k"))
    result = cli("merge", tmp_path / "gpt2", tmp_path / "counts.parquet", ok=False)
    last = result.output.strip().splitlines()[-1]
    assert result.exit_code == 1 and "pattern 'gpt2' and 'o200k'" in last, last
    assert "count every shard with the same --mode, --pattern and --lowercase" in last
    assert not (tmp_path / "counts.parquet").exists()
