"""The whole pipeline end to end: outputs, decoding and determinism."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import Future
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import make_documents, write_shard
from realtext import load_sample_texts
from runs import output_files, tokenmill_here

from tokenmill import executors
from tokenmill.errors import TokenmillError
from tokenmill.io.inputs import find_inputs
from tokenmill.io.readers import read_documents
from tokenmill.tokenizer import Tokenizer, word_table

RUN = ("--vocab-size", "600", "--workers")


def all_documents(data: Path) -> list[str]:
    return [
        d for s in find_inputs(data).shards for b in read_documents(s.path) for d in b.to_pylist()
    ]


def token_rows(out: Path) -> list[list[int]]:
    """Every token shard's ids, in input order (the manifest's)."""
    rows = []
    for entry in json.loads((out / "manifest.json").read_text())["outputs"]:
        rows.extend(pq.read_table(out / entry["path"])["ids"].to_pylist())
    return rows


def test_run_writes_every_output_and_ids_decode_to_the_documents(corpus, cli, tmp_path):
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN, "2")
    # Besides the outputs: hidden state files that let a rerun keep them.
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "counts",
        "counts.parquet",
        "manifest.json",
        "tokenizer.json",
        "tokens",
    ]
    tok = Tokenizer.load(out / "tokenizer.json")
    docs = all_documents(corpus)
    rows = token_rows(out)
    assert len(rows) == len(docs)
    for doc, ids in zip(docs, rows, strict=True):
        assert ids[-1] == tok.eos_id
        assert tok.decode(ids[:-1]) == doc
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["documents"] == len(docs)
    assert manifest["tokens"] == sum(map(len, rows))
    assert manifest["tokenizer_sha256"] == tok.sha256
    assert [o["shard"] for o in manifest["outputs"]] == [
        "a.parquet",
        "b.jsonl",
        "c.jsonl.gz",
        "sub/d.txt",
        "sub/e.txt.gz",
    ]


def test_token_shards_hold_row_keys_and_16_bit_ids(corpus, cli, tmp_path):
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN, "1")
    table = pq.read_table(out / "tokens" / "a.parquet")
    assert str(table.schema.field("ids").type.value_type) == "uint16"
    assert table["row"].to_pylist() == list(range(40))
    assert table["n_tokens"].to_pylist() == [len(r) for r in table["ids"].to_pylist()]
    meta = table.schema.metadata
    assert (
        meta[b"tokenmill.tokenizer_sha256"].decode()
        == Tokenizer.load(out / "tokenizer.json").sha256
    )


def test_decode_command_prints_a_documents_text(corpus, cli, tmp_path):
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN, "1")
    result = cli(
        "decode",
        "--tokenizer",
        out / "tokenizer.json",
        "--shard",
        out / "tokens" / "b.jsonl.parquet",
        "--row",
        "3",
    )
    expected = all_documents(corpus / "b.jsonl")[3]
    assert result.stdout_bytes == expected.encode()


def test_no_eos(corpus, cli, tmp_path):
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN, "1", "--no-eos")
    tok = Tokenizer.load(out / "tokenizer.json")
    assert all(tok.eos_id not in ids for ids in token_rows(out))


def files_bytes(out: Path) -> dict[str, bytes]:
    return output_files(out)


@pytest.mark.parametrize("mode", ["byte", "char"])
def test_outputs_are_byte_identical_whatever_the_workers_or_executor(corpus, cli, tmp_path, mode):
    outs = []
    for workers, executor in (("1", "threads"), ("2", "threads"), ("2", "processes")):
        out = tmp_path / f"out-{workers}-{executor}"
        cli("run", corpus, out, *RUN, workers, "--executor", executor, "--mode", mode)
        outs.append(files_bytes(out))
    assert outs[0] == outs[1] == outs[2]


def test_a_log_that_goes_away_does_not_stop_the_run(corpus, cli, tmp_path):
    """stderr a pipe nobody reads any more (`tokenmill run ... 2>&1 | head -1`) or a
    full disk: every status line fails to be written, and the run still makes the
    outputs a run with its log makes, manifest included, and exits 0."""
    cli("run", corpus, tmp_path / "logged", *RUN, "2")
    want = files_bytes(tmp_path / "logged")
    run = [sys.executable, "-m", "tokenmill", "run", str(corpus)]
    gone, write_end = os.pipe()
    os.close(gone)
    try:
        piped = subprocess.run([*run, str(tmp_path / "piped"), *RUN, "2"], stderr=write_end)
    finally:
        os.close(write_end)
    with open("/dev/full", "w") as full:
        disk_full = subprocess.run([*run, str(tmp_path / "full"), *RUN, "2"], stderr=full)
    assert piped.returncode == disk_full.returncode == 0
    assert files_bytes(tmp_path / "piped") == files_bytes(tmp_path / "full") == want
    for out in ("piped", "full"):
        assert cli("verify", tmp_path / out).output.endswith("files match the manifest\n")


@pytest.mark.parametrize("mode", ["byte", "char"])
def test_same_corpus_in_different_shards_gives_same_merges_and_ids(cli, tmp_path, mode):
    docs = make_documents(200, seed=7)
    one = write_shard(tmp_path / "one" / "all.jsonl", docs)
    cuts = [0, 13, 14, 90, 200]
    for i, (a, b) in enumerate(zip(cuts, cuts[1:], strict=False)):
        write_shard(tmp_path / "many" / f"part-{i:02d}.parquet", docs[a:b])
    results = []
    for data in (one.parent, tmp_path / "many"):
        out = tmp_path / f"out-{data.name}"
        cli("run", data, out, "--vocab-size", "500", "--mode", mode)
        results.append((Tokenizer.load(out / "tokenizer.json").merges, token_rows(out)))
    assert results[0][0] == results[1][0]
    assert results[0][1] == results[1][1]


def test_stages_one_by_one_equal_run(corpus, cli, tmp_path):
    s = tmp_path / "stages"
    cli("count", corpus, s / "counts", "--workers", "2")
    cli("merge", s / "counts", s / "counts.parquet")
    cli("train", s / "counts.parquet", s / "tokenizer.json", "--vocab-size", "600")
    cli("encode", corpus, s / "tokens", "--tokenizer", s / "tokenizer.json")
    cli("run", corpus, tmp_path / "run", *RUN, "2")
    assert files_bytes(s) == files_bytes(tmp_path / "run")


def test_min_count_drops_rare_words(corpus, cli, tmp_path):
    cli("count", corpus, tmp_path / "counts")
    cli("merge", tmp_path / "counts", tmp_path / "all.parquet")
    cli("merge", tmp_path / "counts", tmp_path / "common.parquet", "--min-count", "5")
    every = pq.read_table(tmp_path / "all.parquet").to_pydict()
    common = pq.read_table(tmp_path / "common.parquet").to_pydict()
    expected = [w for w, c in zip(every["word"], every["count"], strict=True) if c >= 5]
    assert common["word"] == expected
    assert 0 < len(expected) < len(every["word"])


@pytest.mark.parametrize(
    ("mode", "pattern", "lowercase"),
    [("byte", "cl100k", False), ("byte", "o200k", False), ("char", "cl100k", True)],
)
def test_word_table_is_the_same_split_over_threads_or_on_one(mode, pattern, lowercase):
    # Count splits a shard over the thread pool only when shards are fewer
    # than workers; both paths must give the same table, batch after batch.
    texts = load_sample_texts() + make_documents(300, seed=3)
    batches = [pa.array(texts[i : i + 97], pa.large_string()) for i in range(0, len(texts), 97)]
    tables = [
        word_table(batches, mode, pattern, lowercase, parallel=parallel)
        for parallel in (True, False)
    ]
    assert tables[0].num_rows > 1000
    assert tables[0].equals(tables[1])


class _InlineExecutor:
    """Runs each task as it is submitted, so submission order is observable."""

    def shutdown(self, wait=True, cancel_futures=False):
        pass

    def submit(self, fn, task):
        f = Future()
        f.set_result(fn(task))
        return f


def test_largest_tasks_start_first_and_results_keep_task_order(monkeypatch):
    monkeypatch.setattr(executors, "_pool", lambda *args: _InlineExecutor())
    started = []

    def work(size: int) -> int:
        started.append(size)
        return size * 10

    sizes = [3, 9, 1, 7, 9]
    results = executors.run_tasks(work, sizes, workers=2, desc="test", size=lambda s: s)
    assert results == [30, 90, 10, 70, 90]
    assert started == [9, 9, 7, 3, 1]


@pytest.mark.parametrize("executor", ["threads", "processes"])
def test_after_a_task_fails_no_queued_task_starts(tmp_path, executor):
    # Before, leaving the pool waited for every task: a run that had failed
    # went on working through its queue, writing outputs after the error.
    tasks = [(tmp_path, i) for i in range(40)]
    with pytest.raises(ValueError, match="task 0 failed"):
        executors.run_tasks(_fail_first, tasks, workers=2, desc="test", executor=executor)
    started = len(list(tmp_path.iterdir()))
    assert 1 <= started < 20, started  # of 40


def _fail_first(task) -> None:
    folder, i = task
    (folder / str(i)).touch()
    if i == 0:
        raise ValueError("task 0 failed")
    time.sleep(0.2)


def test_counts_of_one_are_singular_in_every_summary(tmp_path):
    data = tmp_path / "d"
    data.mkdir()
    (data / "a.jsonl").write_text('{"text": "a"}\n')
    out = tmp_path / "o"
    said = tokenmill_here("run", data, out, "--vocab-size", "257", "--no-eos", "--pack", "1").stderr
    said += tokenmill_here("stats", out).stdout + tokenmill_here("verify", out).stderr
    nouns = "tokens|documents|words|distinct words|sequences|merges|shards|tables|files|parts"
    wrong = re.findall(rf"(?<![\d.,])1 (?:{nouns})\b", said)
    assert not wrong, said
    assert "1 document, 1 token" in said


def test_a_local_ray_that_fails_to_start_is_one_line():
    """Ray raises a bare Exception when its node times out at start (an
    overloaded machine): it was a traceback."""

    class Failing:
        def init(self, **options):
            raise Exception("The current node timed out during startup. This could happen...")  # noqa: TRY002

    with pytest.raises(
        TokenmillError,
        match="^cannot start or join a local Ray: Exception: The current node timed out",
    ):
        executors._init_ray(Failing(), 2, None)
