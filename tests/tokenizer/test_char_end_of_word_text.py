"""Char mode: a document holding the characters `</w>` (HTML, XML, this very
project's docs) decodes back as it was, modulo char mode's whitespace split;
only the end-of-word symbol `</w>` becomes a space."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import tokenmill_here

from tokenmill.formats import export
from tokenmill.tokenizer import Tokenizer

PIECES = ["</w>", "<", "/", "w", ">", "w>", "/w>", "a", "</", " ", "  ", "\n", "\t"]
REAL = (
    "In the articles' tables a word ends in </w>, as in low</w> and lowest</w>;\n"
    "an HTML <w>word</w> tag closes with </w>, and a path a</w>b/w> stays."
)
TRAIN = [REAL, "</w></w> <</w>> a</w> w> </ < / w > a", "low lower lowest newer wider"] * 4


def one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    # Merges that spell "</w>" out of its characters, beside the symbol.
    tok = Tokenizer.train(TRAIN, mode="char", vocab_size=120)
    assert tok.token_values.count("</w>") > 1
    return tok


@settings(max_examples=200, deadline=None)
@given(text=st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
def test_text_holding_end_of_word_characters_decodes_back(tok, text):
    assert tok.decode(tok.encode_ordinary(text)) == one_line(text)
    ids, _ = tok.encode_arrow(pa.array([text], pa.large_string()))
    assert tok.decode(ids.to_pylist()[0][:-1]) == one_line(text)


def test_real_text_decodes_back(tok):
    assert tok.decode(tok.encode_ordinary(REAL)) == one_line(REAL)
    assert tok.decode(tok.encode(REAL + "<|endoftext|>", allowed_special="all")) == (
        one_line(REAL) + " <|endoftext|>"
    )


def test_run_then_decode_row_gives_the_document(tmp_path: Path):
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    docs = [one_line(d) for d in TRAIN]
    (data / "d.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    tokenmill_here("run", data, out, "--mode", "char", "--vocab-size", "120", "--workers", "1")
    shard = next((out / "tokens").glob("*.parquet"))
    assert tokenmill_here("decode", "--shard", shard, "--row", "0").stdout == docs[0]


def test_hf_export_decodes_back(tok, tmp_path: Path):
    from tokenizers import Tokenizer as HfTokenizer

    export(tok, tmp_path / "t.json", "hf")
    hf = HfTokenizer.from_file(str(tmp_path / "t.json"))
    ids = hf.encode(REAL, add_special_tokens=False).ids
    assert ids == tok.encode_ordinary(REAL)
    assert hf.decode(ids) == one_line(REAL)


def test_report_shows_the_characters_and_counts_them(tok):
    from tokenmill.stages.report import pieces, token_lengths

    ids = tok.encode_ordinary(REAL)
    assert "".join(text for text, _, _ in pieces(tok, ids)) == one_line(REAL) + " "
    lengths = token_lengths(tok)
    assert sorted(lengths[i] for i, v in enumerate(tok.token_values) if v == "</w>") == [0, 4]
