"""tokenmill's errors: one hierarchy rooted in TokenmillError, a ValueError (as
tiktoken's and rustbpe's are), exported from the package; and the package's
own `except ValueError` clauses let a TokenmillError through as it was raised
(a store's failure is not an unreadable file; an unsupported file is not a
malformed one)."""

from __future__ import annotations

import contextlib
import json

import pytest

import tokenmill
from tokenmill import (
    DisallowedSpecialTokenError,
    InputChanged,
    StoreError,
    Tokenizer,
    TokenmillError,
    WorkerLost,
    WriteError,
)
from tokenmill.config import Config
from tokenmill.errors import cli_message
from tokenmill.formats import export, load_any
from tokenmill.io import files, metadata
from tokenmill.stages import train


def test_one_hierarchy_of_value_errors():
    assert issubclass(TokenmillError, ValueError)
    for error in (DisallowedSpecialTokenError, WriteError, StoreError, InputChanged, WorkerLost):
        assert issubclass(error, TokenmillError)
        assert getattr(tokenmill, error.__name__) is error
    with pytest.raises(ValueError):  # how tiktoken's users catch a bad argument
        Tokenizer.train(["x"], vocab_size=10)


def test_cli_messages_name_options_where_the_library_names_arguments():
    assert cli_message("vocab_size=300 is below 257") == "--vocab-size 300 is below 257"
    assert cli_message("give pattern= (gpt2, cl100k)") == "give --pattern (gpt2, cl100k)"
    assert cli_message("a: pattern= and special_tokens= apply") == (
        "a: --pattern and --special-token apply"
    )
    # Only a Python argument: not a path or a key that ends so.
    for text in ("data/mode=train/a.txt: bad", "x_vocab_size=3", "a.pattern=b"):
        assert cli_message(text) == text


def failing_store(path, **options):
    @contextlib.contextmanager
    def fail():
        raise StoreError(f"{path}: cannot read (connection reset)")
        yield

    return fail()


def test_a_store_failure_is_not_taken_for_an_unreadable_file(tmp_path, monkeypatch):
    path = tmp_path / "counts.parquet"
    path.write_bytes(b"not parquet")
    assert files.parquet_json_metadata(path, b"key") is None  # unreadable: no metadata
    for module in (files, metadata, train):
        monkeypatch.setattr(module, "parquet_file", failing_store)
    with pytest.raises(StoreError):
        files.parquet_json_metadata(path, b"key")
    with pytest.raises(StoreError):
        metadata.count_table_source(path)
    with pytest.raises(StoreError, match="connection reset"):
        train.run_train(path, tmp_path / "tokenizer.json", Config())


def test_an_unsupported_tokenizer_json_is_not_called_malformed(tmp_path):
    tok = Tokenizer.train(["a b c"] * 3, vocab_size=260)
    export(tok, tmp_path / "hf.json", "hf")
    d = json.loads((tmp_path / "hf.json").read_text(encoding="utf-8"))
    d["pre_tokenizer"] = None
    (tmp_path / "hf.json").write_text(json.dumps(d), encoding="utf-8")
    with pytest.raises(TokenmillError) as e:
        load_any(tmp_path / "hf.json")
    assert "no pre-tokenizer" in str(e.value) and "malformed" not in str(e.value)
