"""--pack: the packed layout written by several workers, one task per shard,
each starting where the shards before it end in the stream."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import assert_one_line_error, make_documents, write_shard
from realtext import O200K_FILE
from runs import output_files

import tokenmill
from tokenmill.config import Config
from tokenmill.errors import TokenmillError
from tokenmill.layouts import LayoutJob
from tokenmill.layouts.packed import LAYOUT
from tokenmill.layouts.packed_plan import Spec, document_lengths, plan
from tokenmill.layouts.packed_write import pack_shard, pack_shards
from tokenmill.stages.encode import run_encode
from tokenmill.stages.split import is_val
from tokenmill.stages.tokens import token_shards
from tokenmill.tokenizer import BOS, ENDOFTEXT, Tokenizer

FRACTION = 0.4


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Shards of a few documents each, some of one short document (shorter
    than a row: a row spans several of them), one empty."""
    data = tmp_path_factory.mktemp("data")
    docs = make_documents(60, seed=7)
    write_shard(data / "a.parquet", docs[:24])  # several row groups
    for i, doc in enumerate(docs[24:36]):
        write_shard(data / f"b{i:02d}.txt", [" ".join(doc.split()[:3]) or "x"])
    write_shard(data / "c.jsonl", [])
    write_shard(data / "d.jsonl", docs[36:])
    return data


@pytest.fixture(scope="module")
def encoded(data, tmp_path_factory):
    """(tokenizer, token shards), encoded once per kind: "small" (a vocabulary
    of uint16 ids), "no-eos" (small, encoded with --no-eos), "wide" (o200k_base)."""
    made = {}

    def make(kind: str):
        if kind not in made:
            if kind == "wide":
                tok = tokenmill.load(O200K_FILE, special_tokens={ENDOFTEXT: 199999, BOS: 200018})
            else:
                specials = [ENDOFTEXT, BOS]
                tok = Tokenizer.train(make_documents(30), vocab_size=300, special_tokens=specials)
            tokens = tmp_path_factory.mktemp(kind) / "tokens"
            run_encode(data, tokens, tok, Config(workers=1, eos=kind != "no-eos"))
            made[kind] = tok, token_shards(tokens)
        return made[kind]

    return make


def pack(folder: Path, tok, shards, seq_len: int, **options):
    job = LayoutJob(shards=shards, folder=folder, tokenizer=tok, seq_len=seq_len, **options)
    return LAYOUT.write(job)


def file_hashes(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def expected_documents(tok, shards, bos: bool, fraction: float) -> dict[str, list]:
    """Per split, (source, row, ids) of each document as the stream holds it:
    after <|bos|> when asked, ending in one <|endoftext|>."""
    sides: dict[str, list] = {}
    for shard in shards:
        table = pq.read_table(shard.path, columns=["row", "ids"])
        rows = table.column("row").to_numpy()
        val = is_val(shard.source, rows, fraction)
        for row, ids, v in zip(rows.tolist(), table.column("ids").to_pylist(), val, strict=True):
            ids = ([tok.special_id(BOS)] if bos else []) + ids
            if not ids or ids[-1] != tok.eos_id:
                ids.append(tok.eos_id)
            side = ("val" if v else "train") if fraction else ""
            sides.setdefault(side, []).append((shard.source, row, ids))
    return sides


def stream_rows(folder: Path) -> list[dict]:
    """Every packed row of one stream, in sequence order."""
    rows = [r for p in folder.glob("*.parquet") for r in pq.read_table(p).to_pylist()]
    return sorted(rows, key=lambda r: r["sequence"])


@pytest.mark.parametrize(
    ("kind", "bos", "fraction", "seq_len"),
    [
        ("small", False, 0.0, 16),
        ("small", False, 0.0, 1),
        ("no-eos", True, 0.0, 23),
        # With a split, many one-document shards have a batch of one side only.
        ("small", True, FRACTION, 16),
        ("no-eos", False, FRACTION, 64),
        ("wide", True, FRACTION, 16),
    ],
)
def test_workers_write_identical_files_holding_every_document(
    encoded, tmp_path, kind, bos, fraction, seq_len
):
    tok, shards = encoded(kind)
    options = {"bos": bos, "val_fraction": fraction}
    results = [
        pack(tmp_path / f"w{w}", tok, shards, seq_len, workers=w, **options) for w in (1, 2, 3)
    ]
    hashes = [file_hashes(tmp_path / f"w{w}") for w in (1, 2, 3)]
    assert hashes[0] == hashes[1] == hashes[2]
    assert sorted(hashes[0]) == sorted(results[0].files)
    assert results[0].rows == results[1].rows == results[2].rows

    want = expected_documents(tok, shards, bos, fraction)
    got: dict[str, list] = {}
    for doc in LAYOUT.read(tmp_path / "w2", fraction > 0):
        got.setdefault(doc.split, []).append((doc.source, doc.row, doc.ids.tolist()))
    assert got == want
    for side, docs in want.items():
        rows = stream_rows(tmp_path / "w2" / side)
        assert [r["sequence"] for r in rows] == list(range(len(rows)))
        assert all(r["n_tokens"] == seq_len for r in rows[:-1])
        assert [i for r in rows for i in r["ids"]] == [i for *_, ids in docs for i in ids]
        id_type = pq.read_schema(next((tmp_path / "w2" / side).glob("*.parquet"))).field("ids")
        assert str(id_type.type.value_type) == ("uint32" if kind == "wide" else "uint16")


@pytest.mark.parametrize("fraction", [0.0, FRACTION])
def test_a_row_carries_ids_across_several_shards(encoded, tmp_path, fraction):
    """A row longer than many shards together: the shard where it ends reads
    the tails of all of them, on any worker."""
    tok, shards = encoded("small")
    for w in (1, 3):
        pack(tmp_path / f"w{w}", tok, shards, 40, val_fraction=fraction, workers=w)
    assert file_hashes(tmp_path / "w1") == file_hashes(tmp_path / "w3")
    for side in ["train", "val"] if fraction else [""]:
        rows = stream_rows(tmp_path / "w3" / side)
        spans = [len({p["shard"] for p in r["documents"]}) for r in rows]
        assert max(spans) >= 3
        # Such a row is written with the shard where it ends, the others get none.
        b_files = sorted((tmp_path / "w3" / side).glob("b*.parquet"))
        assert any(pq.read_metadata(p).num_rows == 0 for p in b_files)


def test_a_shard_changed_after_its_place_was_planned_is_refused(encoded, tmp_path):
    tok, shards = encoded("small")
    spec = Spec(
        seq_len=16,
        eos=tok.eos_id,
        bos=None,
        wide=False,
        sha256=tok.sha256,
        vocab_size=tok.vocab_size,
        names=[s.source for s in shards],
        val_fraction=0.0,
        folder=tmp_path / "packed",
    )
    lengths = [document_lengths((s, spec)) for s in shards]
    # The plan thinks the first shard's first document one id longer than it is.
    lens = lengths[0].lens.copy()
    lens[0] += 1
    lengths[0] = replace(lengths[0], lens=lens)
    task = plan(shards, lengths, spec)[0]
    with pytest.raises(TokenmillError, match=r"a\.parquet.*changed while being packed"):
        pack_shard(task)
    assert not (tmp_path / "packed" / "a.parquet").exists()


def test_owns_only_parquet_files():
    assert LAYOUT.owns("a.parquet") and LAYOUT.owns("train/sub/b.txt.parquet")
    assert not LAYOUT.owns("notes.md") and not LAYOUT.owns("index.json")


def test_pack_command_takes_workers(corpus, cli, tmp_path):
    out = tmp_path / "out"
    cli("run", corpus, out, "--vocab-size", "400", "--workers", "1")
    for w in (1, 3):
        cli("pack", out / "tokens", tmp_path / f"p{w}", "--seq-len", "30", "--workers", w)
    files = output_files(tmp_path / "p1")
    assert len(files) == 5 and files == output_files(tmp_path / "p3")


def test_packed_shards_are_refused_as_token_shards_before_any_folder(corpus, cli, tmp_path):
    # Packed shards carry a token shard's metadata, ids and n_tokens: bin took
    # each row for a document, pack failed on the missing row column.
    out = tmp_path / "out"
    cli("run", corpus, out, "--vocab-size", "400", "--pack", "64")
    for args in (
        ["bin", out / "packed", tmp_path / "b"],
        ["pack", out / "packed", tmp_path / "p", "--seq-len", "5"],
    ):
        result = cli(*args, ok=False)
        assert_one_line_error(
            result, f"{out / 'packed'}/", "not a token shard written by `tokenmill encode`"
        )
        assert not args[2].exists()


def test_the_summary_counts_token_shards_read_not_files_per_split(encoded, tmp_path):
    tok, shards = encoded("small")
    result = pack_shards(shards, tok, tmp_path, 40, val_fraction=FRACTION)
    assert len(result.shards) > len(shards)  # a file per side a shard has documents in
    assert result.describe().startswith(f"pack: {len(shards)} shards, ")
