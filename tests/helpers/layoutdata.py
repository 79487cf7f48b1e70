"""Token shards for the layout tests: a small corpus of three inputs (an empty
text among them), encoded once per tokenizer with a split column, and the
documents a layout should hold for them."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import make_documents, one_line, write_shard
from realtext import O200K_FILE

import tokenmill
from tokenmill.config import Config
from tokenmill.layouts import Layout, LayoutJob, LayoutResult
from tokenmill.stages.encode import run_encode
from tokenmill.stages.tokens import TokenShard, token_shards
from tokenmill.tokenizer import BOS, ENDOFTEXT, Tokenizer

FRACTION = 0.3
NAMES = ("a.jsonl", "c", "sub/b.txt")  # the token shards' names without .parquet


def write_corpus(data: Path, seed: int) -> Path:
    docs = make_documents(60, seed=seed)
    write_shard(data / "a.jsonl", [*docs[:25], ""])  # an empty text: an empty row with --no-eos
    write_shard(data / "c.parquet", docs[25:45])
    write_shard(data / "sub" / "b.txt", [" ".join(d.split()) or "x" for d in docs[45:]])
    return data


def write_nested_corpus(data: Path) -> Path:
    """90 documents (some empty) in a.jsonl, code/b.jsonl and c.txt (one line each):
    a folder below the top one, and each reader's format."""
    docs = make_documents(90, seed=3)
    write_shard(data / "a.jsonl", docs[:40])
    write_shard(data / "code" / "b.jsonl", docs[40:70])
    write_shard(data / "c.txt", one_line(docs[70:]))
    return data


def small_tokenizer() -> Tokenizer:
    return Tokenizer.train(make_documents(30), vocab_size=300, special_tokens=[ENDOFTEXT, BOS])


def edge_tokenizer() -> Tokenizer:
    """65512 ids: the token shards' ids fit uint16, but Megatron takes int32 from
    65500. Char mode: an alphabet of ASCII, CJK and Hangul makes the ids to get there."""
    letters = [*range(0x21, 0x7F), *range(0x4E00, 0x9FFF), *range(0xAC00, 0xD7A4)]
    alphabet = " ".join(map(chr, letters))
    specials = {ENDOFTEXT: 65510, BOS: 65511}
    texts = [alphabet, *make_documents(30)]
    return Tokenizer.train(texts, mode="char", num_merges=10, special_tokens=specials)


def wide_tokenizer() -> Tokenizer:
    """o200k_base, ids up to 200018 (<|bos|> in place of <|endofprompt|>)."""
    return tokenmill.load(O200K_FILE, special_tokens={ENDOFTEXT: 199999, BOS: 200018})


TOKENIZERS = {"small": small_tokenizer, "edge": edge_tokenizer, "wide": wide_tokenizer}


class Encoded:
    """encoded(name): (tokenizer, token shards of `data`) for a tokenizer of
    TOKENIZERS, encoded once, with a split column; "<name>-no-eos": with --no-eos."""

    def __init__(self, data: Path, tmp_path_factory):
        self.data = data
        self.factory = tmp_path_factory
        self.made: dict[str, tuple[Tokenizer, list[TokenShard]]] = {}

    def __call__(self, name: str) -> tuple[Tokenizer, list[TokenShard]]:
        if name not in self.made:
            tok = TOKENIZERS[name.removesuffix("-no-eos")]()
            tokens = self.factory.mktemp(name) / "tokens"
            config = Config(workers=1, val_fraction=FRACTION, eos=not name.endswith("-no-eos"))
            run_encode(self.data, tokens, tok, config)
            self.made[name] = tok, token_shards(tokens)
        return self.made[name]


def encoded_fixture(seed: int):
    """A module's `encoded` fixture: an Encoded of the corpus of `seed`."""

    @pytest.fixture(scope="module")
    def encoded(tmp_path_factory) -> Encoded:
        return Encoded(write_corpus(tmp_path_factory.mktemp("data"), seed), tmp_path_factory)

    return encoded


def write(layout: Layout, tmp_path: Path, tok, shards, **options) -> tuple[Path, LayoutResult]:
    """`layout` written into tmp_path/<its folder>: (that folder, what it returned)."""
    folder = tmp_path / layout.folder
    return folder, layout.write(LayoutJob(shards=shards, folder=folder, tokenizer=tok, **options))


def shard_rows(shard: TokenShard, side: str = "") -> list[tuple[int, list[int]]]:
    """(row, ids) of a token shard's rows (those of one side of the split)."""
    table = pq.read_table(shard.path, columns=["row", "ids", "split"]).to_pydict()
    return [
        (row, ids) for row, ids, split in zip(*table.values(), strict=True) if side in ("", split)
    ]


def expected(tok, shards, side="", bos=False, eos_added=False) -> list[list[int]]:
    """Each document as a layout should hold it: the row, after <|bos|> when
    asked, ending in <|endoftext|> (added when the shards were encoded without)."""
    first = [tok.special_id(BOS)] if bos else []
    last = [tok.eos_id] if eos_added else []
    return [first + ids + last for shard in shards for _, ids in shard_rows(shard, side)]


def framework_documents(layout: Layout, folder: Path, split: bool) -> list[tuple[str, list[int]]]:
    """(split, ids) of the documents the trainer's own reader gives (its module
    imported already), which must be those of tokenmill's `read`; `split`: the
    layout was written with a val fraction."""
    docs = layout.framework_read(folder, split)
    got = [(d.split, d.ids.tolist()) for d in docs]
    assert got == [(d.split, d.ids.tolist()) for d in layout.read(folder, split)]
    return got


def assert_trainer_reads_all(layout: Layout, folder: Path, tok, shards) -> None:
    """The trainer's reader finds every document of `shards`, written split and
    with --bos, train's then val's."""
    want = [(side, ids) for side in ("train", "val") for ids in expected(tok, shards, side, True)]
    assert framework_documents(layout, folder, split=True) == want
