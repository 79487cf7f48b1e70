"""--pack: fixed-length training sequences made from the token shards."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import assert_one_line_error, assert_usage_error, make_documents, write_shard
from runs import output_files

from tokenmill.errors import TokenmillError
from tokenmill.stages.pack import Packer, run_pack
from tokenmill.stages.tokens import token_shards
from tokenmill.tokenizer import BOS, Tokenizer

RUN = ("--vocab-size", "600", "--workers", "2")
INPUT_ORDER = ["a.parquet", "b.jsonl", "c.jsonl.gz", "sub/d.txt", "sub/e.txt.gz"]


def documents_in_order(out: Path) -> list[tuple[str, int, list[int]]]:
    """(input shard, row, ids) of every document, in input order, from the token shards."""
    docs = []
    for shard in token_shards(out / "tokens"):
        t = pq.read_table(shard.path)
        for row, ids in zip(t["row"].to_pylist(), t["ids"].to_pylist(), strict=True):
            docs.append((shard.source, row, ids))
    return docs


def files_under(folder: Path) -> list[str]:
    """Relative paths of the Parquet files under `folder`, at any depth."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.parquet"))


def packed_rows(packed: Path) -> list[tuple[str, dict]]:
    """(packed shard's source, row) of every packed row, in input order."""
    rows = []
    for path in packed.rglob("*.parquet"):
        source = pq.read_schema(path).metadata[b"tokenmill.source"].decode()
        rows.extend((source, r) for r in pq.read_table(path).to_pylist())
    order = {name: i for i, name in enumerate(INPUT_ORDER)}
    return sorted(rows, key=lambda sr: (order[sr[0]], sr[1]["sequence"]))


def check_packing(out: Path, packed: Path, seq_len: int, eos: int, bos: int | None):
    docs = documents_in_order(out)
    # What the documents should become: [bos] + ids, ending in exactly one eos.
    expected = {}
    for shard, row, ids in docs:
        ids = ([bos] if bos is not None else []) + ids
        if not ids or ids[-1] != eos:
            ids = ids + [eos]
        expected[shard, row] = ids
    stream = [i for shard, row, _ in docs for i in expected[shard, row]]

    rows = packed_rows(packed)
    lengths = [len(r["ids"]) for _, r in rows]
    assert all(n == seq_len for n in lengths[:-1])
    assert 1 <= lengths[-1] <= seq_len
    assert [r["n_tokens"] for _, r in rows] == lengths
    assert [r["sequence"] for _, r in rows] == list(range(len(rows)))
    # Nothing lost, nothing duplicated, nothing reordered.
    assert [i for _, r in rows for i in r["ids"]] == stream

    # The documents column says exactly what each row holds.
    seen: dict[tuple[str, int], list[int]] = {}
    for _, r in rows:
        position = 0
        for piece in r["documents"]:
            assert piece["start"] == position
            doc = expected[piece["shard"], piece["row"]]
            part = doc[piece["offset"] : piece["offset"] + piece["length"]]
            assert r["ids"][position : position + piece["length"]] == part
            assert piece["offset"] == len(seen.get((piece["shard"], piece["row"]), []))
            seen.setdefault((piece["shard"], piece["row"]), []).extend(part)
            position += piece["length"]
        assert position == len(r["ids"])
    assert seen == expected

    # Remainder policy: a shard's rows are those that end inside its documents.
    ends = {}
    position = 0
    for shard, row, _ in docs:
        position += len(expected[shard, row])
        ends[shard] = position
    for (source, r), start in zip(rows, np.cumsum([0, *lengths[:-1]]), strict=True):
        end = start + len(r["ids"])
        previous = max([0] + [e for s, e in ends.items() if s < source])
        assert previous < end <= ends[source]
    return rows


@pytest.mark.parametrize("seq_len", [1, 7, 64, 100_000])
def test_packed_rows_have_seq_len_ids_and_join_the_documents(corpus, cli, tmp_path, seq_len):
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN, "--pack", seq_len)
    tok = Tokenizer.load(out / "tokenizer.json")
    rows = check_packing(out, out / "packed", seq_len, tok.eos_id, None)
    assert files_under(out / "packed") == files_under(out / "tokens")
    if seq_len == 100_000:
        assert len(rows) == 1  # the whole corpus is one short row


def test_bos_and_no_eos(corpus, cli, tmp_path):
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN, "--no-eos", "--bos", "--pack", "33")
    tok = Tokenizer.load(out / "tokenizer.json")
    assert tok.special_tokens == ["<|endoftext|>", BOS]
    check_packing(out, out / "packed", 33, tok.eos_id, tok.special_id(BOS))
    # The eos and bos are where they belong: packing adds one eos per document.
    rows = packed_rows(out / "packed")
    stream = [i for _, r in rows for i in r["ids"]]
    n_docs = len(documents_in_order(out))
    assert stream.count(tok.eos_id) == stream.count(tok.special_id(BOS)) == n_docs


def test_pack_command_equals_run_pack(corpus, cli, tmp_path):
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN, "--pack", "50")
    cli("pack", out / "tokens", tmp_path / "again", "--seq-len", "50")
    again = output_files(tmp_path / "again")
    assert again == output_files(out / "packed") and len(again) == len(INPUT_ORDER)


def test_pack_and_bin_into_their_own_input_name_their_own_arguments(corpus, cli, tmp_path):
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN)
    tokens = out / "tokens"
    for command, folder, extra in (
        ("pack", "PACKED_DIR", ("--seq-len", "8")),
        ("bin", "BIN_DIR", ()),
    ):
        result = cli(command, tokens, tokens, *extra, ok=False)
        assert result.exit_code == 1
        assert_one_line_error(result, f"{tokens}: TOKENS_DIR is {folder} {tokens}; give {folder}")


def test_pack_and_bin_refuse_a_worker_count_out_of_range_as_a_usage_error(corpus, cli, tmp_path):
    """As `run --workers` is: a refused value is a usage error (README, Exit status)."""
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN)
    for command, extra in (("pack", ("--seq-len", "8")), ("bin", ())):
        folder = tmp_path / command
        result = cli(command, out / "tokens", folder, *extra, "--workers", "100000", ok=False)
        assert_usage_error(result, "--workers 100000 is out of range", command, folder)


def test_pack_needs_bos_in_the_tokenizer(corpus, cli, tmp_path):
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN)
    result = cli("pack", out / "tokens", tmp_path / "p", "--seq-len", "8", "--bos", ok=False)
    assert result.exit_code == 1
    assert "<|bos|>" in result.output and "--special-token" in result.output
    with pytest.raises(TokenmillError, match="not the tokenizer"):
        other = Tokenizer.train(["something else"], vocab_size=300)
        other.save(tmp_path / "other.json")
        run_pack(out / "tokens", tmp_path / "p", 8, tokenizer=tmp_path / "other.json")


def test_pack_without_a_tokenizer_makes_no_folder(corpus, cli, tmp_path):
    """Shards copied away from their run: refused before PACKED_DIR is made
    (it was left holding a lock file)."""
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN)
    shards = tmp_path / "shards"
    shutil.copytree(out / "tokens", shards)
    result = cli("pack", shards, tmp_path / "p", "--seq-len", "8", ok=False)
    assert_one_line_error(result, "no tokenizer.json beside its folder; give --tokenizer")
    assert not (tmp_path / "p").exists()


def test_packing_does_not_depend_on_batches():
    """The Packer gives the same rows and pieces however the documents are batched."""
    rng = random.Random(3)
    eos, seq_len = 9, 16
    docs = [
        [rng.randrange(9) for _ in range(rng.choice([0, 1, 2, 5, 15, 16, 17, 40]))] + [eos]
        for _ in range(200)
    ]
    results = []
    for cuts in ([0, 200], [0, 1, 2, 50, 51, 200], sorted({0, 200, *rng.sample(range(200), 40)})):
        packer = Packer(seq_len, eos, None, np.uint16, ["s"])
        ids, pieces = [], []
        for a, b in zip(cuts, cuts[1:], strict=False):
            flat = np.array([i for d in docs[a:b] for i in d], np.uint16)
            offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs[a:b]])])
            out, p, n = packer.add(0, np.arange(a, b, dtype=np.uint64), flat, offsets)
            ids.append(out)
            pieces.append(np.stack([p.row, p.offset, p.start, p.length]))
        out, p, n = packer.finish()
        ids.append(out)
        pieces.append(np.stack([p.row, p.offset, p.start, p.length]))
        results.append((np.concatenate(ids).tolist(), np.concatenate(pieces, axis=1).tolist()))
    assert results[0] == results[1] == results[2]
    assert results[0][0] == [i for d in docs for i in d]


def test_a_shard_too_small_for_a_row_gets_an_empty_packed_shard(cli, tmp_path):
    data = tmp_path / "data"
    docs = make_documents(30, seed=5)
    write_shard(data / "1.jsonl", docs[:20])
    write_shard(data / "2.jsonl", ["x"])
    write_shard(data / "3.jsonl", docs[20:])
    out = tmp_path / "out"
    cli("run", data, out, "--vocab-size", "400", "--pack", "64")
    assert pq.read_table(out / "packed" / "2.jsonl.parquet").num_rows == 0
    rows = pq.read_table(out / "packed" / "3.jsonl.parquet").to_pylist()
    assert {p["shard"] for p in rows[0]["documents"]} >= {"1.jsonl", "2.jsonl", "3.jsonl"}


def test_packed_and_bin_outputs_are_in_the_manifest_and_verified(corpus, cli, tmp_path):
    out = tmp_path / "out"
    cli("run", corpus, out, *RUN, "--pack", "40", "--format", "bin")
    files = [e["path"] for e in json.loads((out / "manifest.json").read_text())["files"]]
    assert "packed/a.parquet" in files and "bin/sub/d.txt.bin" in files
    assert "bin/sub/d.txt.idx.npy" in files and "bin/index.json" in files
    before = output_files(out / "packed")
    # A rerun keeps what it can and gives the same packed rows.
    cli("run", corpus, out, *RUN, "--pack", "40", "--format", "bin")
    assert output_files(out / "packed") == before
    assert "files match the manifest" in cli("verify", out).output
    (out / "packed" / "b.jsonl.parquet").write_bytes(b"garbage")
    result = cli("verify", out, ok=False)
    assert result.exit_code == 3 and "packed/b.jsonl.parquet" in result.output
