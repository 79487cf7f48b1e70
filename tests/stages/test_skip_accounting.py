"""--on-error skip: the skipped documents each stage and the run print are the
manifest's documents_skipped; a run that read no document at all fails."""

from __future__ import annotations

import json

import pytest
from conftest import assert_one_line_error, make_documents, write_shard
from realtext import GPT2_FILE
from runs import manifest, tokenmill_here

SKIP = ("--text-column", "content", "--on-error", "skip", "--workers", "1")
RUN = ("--vocab-size", "300", *SKIP)


def write_jsonl(path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_skipped_documents_printed_are_the_manifests(tmp_path):
    data = tmp_path / "data"
    write_shard(data / "a.parquet", make_documents(8))  # no column 'content': skipped whole
    docs = make_documents(5, seed=1)
    write_jsonl(data / "b.jsonl", [{"content": d} for d in docs] + [{"text": "x"}] * 3)
    out = tmp_path / "out"
    result = tokenmill_here("run", data, out, *RUN)
    m = manifest(out)
    assert (m["documents_skipped"], len(m["skipped"])) == (8 + 3, 1 + 3)
    said = f"{m['documents_skipped']} documents skipped (1 whole file, 3 rows)"
    for stage in ("count", "encode", "run"):
        [line] = [line for line in result.stderr.splitlines() if line.startswith(f"{stage}: ")]
        assert said in line, line


@pytest.mark.parametrize(
    "args",
    [
        ("run", "{data}", "{out}", *RUN),
        ("run", "{data}", "{out}", *SKIP, "--count-only"),
        ("run", "{data}", "{out}", *SKIP, "--tokenizer", GPT2_FILE, "--pattern", "gpt2"),
        ("count", "{data}", "{out}", *SKIP),
        ("encode", "{data}", "{out}", *SKIP, "--tokenizer", GPT2_FILE, "--pattern", "gpt2"),
    ],
    ids=["run", "count-only", "encode-only", "count", "encode"],
)
def test_a_run_that_read_no_document_fails_in_one_line(tmp_path, cli, args):
    data = tmp_path / "data"
    write_shard(data / "a.parquet", make_documents(8))
    write_jsonl(data / "b.jsonl", [{"text": "x"}] * 3)
    args = [str(a).format(data=data, out=tmp_path / "out") for a in args]
    result = cli(*args, ok=False)
    assert_one_line_error(result, "no document read", "a.parquet", "no column 'content'")
    skips = [line for line in result.output.splitlines() if line.startswith("skipped: ")]
    assert len(skips) == 4
