"""A command given the wrong kind of file says so in one line naming the file
and what it wanted, never with a traceback (the runner re-raises any
exception)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import assert_one_line_error, write_shard

NOT_TOKENIZER = "not a tokenizer file"
NOT_WORD_TABLE = "word table `tokenmill merge` writes"
NOT_OUT = "not an output folder of `tokenmill run`"


@pytest.fixture
def files(tmp_path):
    """notes.txt (text), docs.parquet (documents), counts.parquet (a word
    table), plain/ (a folder of documents, not an OUT), tokens/ (of a token shard)."""
    (tmp_path / "notes.txt").write_text("just some notes\n", encoding="utf-8")
    pq.write_table(pa.table({"text": ["a document"]}), tmp_path / "docs.parquet")
    words = pa.table({"word": ["a", " document"], "count": pa.array([3, 2], pa.uint64())})
    pq.write_table(words, tmp_path / "counts.parquet")
    write_shard(tmp_path / "plain" / "docs.jsonl", ["a document", "another one"])
    (tmp_path / "tokens").mkdir()
    pq.write_table(pa.table({"row": [0], "ids": [[5, 6]]}), tmp_path / "tokens" / "a.parquet")
    return tmp_path


CASES = [
    (["decode", "--tokenizer", "docs.parquet", "1", "2"], "docs.parquet", NOT_TOKENIZER),
    (["decode", "--tokenizer", "notes.txt", "1"], "notes.txt", NOT_TOKENIZER),
    (["tokenize", "--tokenizer", "counts.parquet", "hi"], "counts.parquet", NOT_TOKENIZER),
    (["encode", "plain", "out", "--tokenizer", "counts.parquet"], "counts.parquet", NOT_TOKENIZER),
    (["export", "counts.parquet", "tok.json", "--format", "hf"], "counts.parquet", NOT_TOKENIZER),
    (["run", "plain", "out", "--extend", "docs.parquet"], "docs.parquet", NOT_TOKENIZER),
    (["train", "notes.txt", "tok.json"], "notes.txt", NOT_WORD_TABLE),
    (["train", "docs.parquet", "tok.json"], "docs.parquet", NOT_WORD_TABLE),
    (["train", "plain", "tok.json"], "plain", NOT_WORD_TABLE),
    (["stats", "plain"], "plain", NOT_OUT),
    (["stats", "notes.txt"], "notes.txt", NOT_OUT),
    (["report", "plain"], "plain", NOT_OUT),
    (["bin", "notes.txt", "bins"], "notes.txt", "no such folder of token shards"),
    (["merge", "notes.txt", "merged.parquet"], "notes.txt", "no such directory"),
    # The table of the wrong kind is named, not the one merge would write.
    (["merge", "tokens", "merged.parquet"], "tokens/a.parquet", "not a count table"),
]


@pytest.mark.parametrize(("args", "named", "wanted"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_file_of_the_wrong_kind_is_a_one_line_error(cli, files, monkeypatch, args, named, wanted):
    monkeypatch.chdir(files)
    assert_one_line_error(cli(*args, ok=False), f"{named}:", wanted)
