"""Pretraining-ready outputs: .bin files, token shard metadata, decode from a shard,
special tokens reserved at train time."""

from __future__ import annotations

import base64
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenmill.errors import TokenmillError
from tokenmill.io.inputs import output_name
from tokenmill.layouts.bin import run_bin
from tokenmill.stages.tokens import token_shards
from tokenmill.tokenizer import ENDOFTEXT, Tokenizer, training_special_tokens

RUN = ("--vocab-size", "600", "--workers", "2")


def test_bin_files_memory_map_to_the_parquet_ids(corpus, cli, tmp_path):
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN, "--format", "bin")
    index = json.loads((out / "bin" / "index.json").read_text())
    assert index["dtype"] == "uint16"
    assert index["tokenizer_sha256"] == Tokenizer.load(out / "tokenizer.json").sha256
    assert [s["source"] for s in index["shards"]] == [
        "a.parquet",
        "b.jsonl",
        "c.jsonl.gz",
        "sub/d.txt",
        "sub/e.txt.gz",
    ]
    for entry in index["shards"]:
        # As the README shows it:
        ids = np.memmap(out / "bin" / entry["bin"], dtype=np.uint16, mode="r")
        idx = np.load(out / "bin" / entry["index"])
        name = output_name(entry["source"])
        rows = pq.read_table(out / "tokens" / name)["ids"].to_pylist()
        assert len(idx) == len(rows) + 1 == entry["documents"] + 1
        assert [ids[idx[i] : idx[i + 1]].tolist() for i in range(len(rows))] == rows
        assert len(ids) == idx[-1] == entry["tokens"] == sum(map(len, rows))


def test_bin_of_32_bit_ids(tmp_path):
    """A vocabulary above 65536 ids: uint32, little-endian."""
    rows = [[70000, 1, 2**32 - 1], [], [65536]]
    schema = pa.schema(
        [("row", pa.uint64()), ("ids", pa.large_list(pa.uint32())), ("n_tokens", pa.uint32())],
        metadata={
            "tokenmill.source": "big.txt",
            "tokenmill.tokenizer_sha256": "0" * 64,
            "tokenmill.vocab_size": "100000",
        },
    )
    table = pa.table([[0, 1, 2], rows, [3, 0, 1]], schema=schema)
    (tmp_path / "tokens").mkdir()
    pq.write_table(table, tmp_path / "tokens" / "big.txt.parquet")
    summary = run_bin(tmp_path / "tokens", tmp_path / "bin")
    assert summary.describe().startswith("bin: 3 documents, 4 ids (uint32, 1 shard)")
    assert json.loads((tmp_path / "bin" / "index.json").read_text())["dtype"] == "uint32"
    ids = np.fromfile(tmp_path / "bin" / "big.txt.bin", dtype="<u4")
    assert ids.tolist() == [70000, 1, 2**32 - 1, 65536]
    assert np.load(tmp_path / "bin" / "big.txt.idx.npy").tolist() == [0, 3, 3, 4]


def test_every_token_shard_records_tokenizer_and_vocab_size(corpus, cli, tmp_path):
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN)
    tok = Tokenizer.load(out / "tokenizer.json")
    shards = token_shards(out / "tokens")
    assert len(shards) == 5
    for shard in shards:
        meta = pq.read_schema(shard.path).metadata
        assert meta[b"tokenmill.tokenizer_sha256"].decode() == tok.sha256
        assert int(meta[b"tokenmill.vocab_size"]) == tok.vocab_size == 600


def test_decode_finds_the_tokenizer_of_a_shard(corpus, cli, tmp_path):
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN)
    shard = out / "tokens" / "sub" / "d.txt.parquet"
    lines = (corpus / "sub" / "d.txt").read_text().split("\n")
    text = [line for line in lines if line.strip(" \t\r\f\v")][4]  # blank lines are no rows
    result = cli("decode", "--shard", shard, "--row", "4")
    assert result.stdout == text  # exactly the document: no <|endoftext|>, no newline
    # Another tokenizer is refused rather than printing garbage.
    Tokenizer.train(["other text"], vocab_size=300).save(tmp_path / "other.json")
    result = cli(
        "decode", "--tokenizer", tmp_path / "other.json", "--shard", shard, "--row", "4", ok=False
    )
    assert result.exit_code == 1 and "not the tokenizer" in result.output
    result = cli("decode", "--shard", shard, "--row", "99", ok=False)
    assert "out of range" in result.output
    result = cli("decode", "1", "2", ok=False)
    assert "--tokenizer" in result.output
    # Ids beside --row were dropped without a word.
    result = cli("decode", "--shard", shard, "--row", "3", "5", "6", ok=False)
    assert result.exit_code == 2 and "not both (--row 3 takes one row; 5 6 given too)" in (
        result.output
    )


@pytest.mark.parametrize("mode", ["byte", "char"])
def test_special_tokens_reserved_at_train_time(corpus, cli, tmp_path, mode):
    out = tmp_path / "out"
    extra = ("--special-token", "<|pad|>", "--special-token", "<|fim_middle|>")
    cli("run", corpus, out, *RUN, "--mode", mode, *extra)
    tok = Tokenizer.load(out / "tokenizer.json")
    defaults = ["<unk>", ENDOFTEXT] if mode == "char" else [ENDOFTEXT]
    assert tok.special_tokens == [*defaults, "<|pad|>", "<|fim_middle|>"]
    assert tok.vocab_size == 600 or mode == "char"  # char mode may run out of pairs
    first = tok._base_size + len(tok.merges)
    assert tok.special_map == {t: first + k for k, t in enumerate(tok.special_tokens)}
    assert tok.decode([tok.special_id("<|pad|>")]) == "<|pad|>"
    # Encoding is ordinary: the special token's text is encoded as text.
    if mode == "byte":
        assert tok.special_id("<|pad|>") not in tok.encode_ordinary("a <|pad|> b")
    # train alone does the same.
    cli("train", out / "counts.parquet", tmp_path / "t.json", "--vocab-size", "600", "--mode", mode,
        *extra)  # fmt: skip
    assert Tokenizer.load(tmp_path / "t.json").special_tokens == tok.special_tokens


def test_special_token_order_and_errors(cli, tmp_path):
    assert training_special_tokens("byte", ["<s>", ENDOFTEXT]) == ["<s>", ENDOFTEXT]
    assert training_special_tokens("char", ["<s>"]) == ["<unk>", ENDOFTEXT, "<s>"]
    with pytest.raises(TokenmillError, match="--special-token: '<s>' is listed twice"):
        training_special_tokens("byte", ["<s>", "<s>"])
    with pytest.raises(TokenmillError, match="--special-token: '' is no special token's name"):
        training_special_tokens("byte", [""])
    with pytest.raises(TokenmillError, match="a name without surrounding spaces"):
        training_special_tokens("byte", ["<s> "])
    data = tmp_path / "d.txt"
    data.write_text("hello world\n")
    result = cli("run", data, tmp_path / "o", "--vocab-size", "258", *("--special-token", "a"),
                 *("--special-token", "b"), ok=False)  # fmt: skip
    assert result.exit_code == 2 and "256 byte tokens + 3 special tokens" in result.output


def test_training_refuses_a_special_token_given_an_id(cli, tmp_path):
    """NAME=ID is how a .tiktoken file's special tokens are read; training
    took the whole of it as the name (`<|pad|>=3`, id one after the merges)."""
    data = tmp_path / "d.txt"
    data.write_text("hello world\n")
    why = "training gives special tokens the ids after the merges; give the name alone ('<|a|>')"
    for args in (("run", data, tmp_path / "o"), ("train", tmp_path / "c.parquet", tmp_path / "t")):
        result = cli(*args, "--vocab-size", "300", "--special-token", "<|a|>=3", ok=False)
        assert result.exit_code == 2 and f"--special-token '<|a|>=3': {why}" in result.output
    assert not (tmp_path / "o").exists()
    job = tmp_path / "job.toml"
    job.write_text(f'inputs = "{data}"\noutput = "o"\nspecial_tokens = ["<|a|>=3"]\n')
    result = cli("run", "--job", job, ok=False)
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        f"Error: {job}: special_tokens '<|a|>=3': {why}"
    )
    job.write_text(f'inputs = "{data}"\noutput = "o"\nspecial_tokens = [" x"]\n')  # as named
    assert (
        f"{job}: special_tokens ' x': a name without" in cli("run", "--job", job, ok=False).output
    )
    # Reading a .tiktoken file with `run --tokenizer`, NAME=ID is what it takes.
    tik = tmp_path / "bytes.tiktoken"
    tik.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)))
    cli("run", data, tmp_path / "enc", "--tokenizer", tik, "--pattern", "gpt2",
        "--special-token", "<|endoftext|>=256")  # fmt: skip
    [shard] = token_shards(tmp_path / "enc" / "tokens")
    assert pq.read_table(shard.path)["ids"].to_pylist() == [[*b"hello world", 256]]
