"""`tokenmill export TOKENIZER DIR --format transformers`: a folder that
transformers' AutoTokenizer loads as a fast tokenizer giving exactly the ids
tokenmill wrote into the token shards, document by document on sample_data/,
with eos (and bos, and the other special tokens) set; and a folder that is
written whole or not at all."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from realtext import GPT2_FILE, SAMPLE_DIR, iter_sample_documents

from tokenmill import _native
from tokenmill.cli import main
from tokenmill.errors import TokenmillError, WriteError
from tokenmill.formats import export, load_any
from tokenmill.formats import hf as hf_format
from tokenmill.formats import tiktoken as tiktoken_format
from tokenmill.formats import transformers as tf_format
from tokenmill.io.inputs import output_name
from tokenmill.tokenizer import BOS, ENDOFTEXT, UNK, Tokenizer

# Everything is local; offline mode makes sure nothing is looked up.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

PAD = "<|pad|>"


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def auto_tokenizer(folder: Path, cache: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder), cache_dir=str(cache), local_files_only=True)


def shard_rows(tokens_dir: Path) -> tuple[list[str], list[list[int]]]:
    """Every document of sample_data/ (read independently of the pipeline) and
    the ids tokenmill wrote for it, read back with pyarrow."""
    by_shard: dict[str, list[str]] = {}
    for name, text in iter_sample_documents():
        by_shard.setdefault(name, []).append(text)
    texts, rows = [], []
    for name, docs in by_shard.items():
        ids = pq.read_table(tokens_dir / output_name(name), columns=["ids"])["ids"].to_pylist()
        assert len(ids) == len(docs), name
        texts += docs
        rows += ids
    return texts, rows


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
    """sample_data/ through the whole pipeline, trained with --bos and one more
    special token; the documents and the ids of the token shards."""
    out = tmp_path_factory.mktemp("run") / "out"
    invoke(
        "run", SAMPLE_DIR, out, "--vocab-size", 2000, "--bos", "--special-token", PAD,
        "--workers", 2,
    )  # fmt: skip
    tok = Tokenizer.load(out / "tokenizer.json")
    texts, rows = shard_rows(out / "tokens")
    return tok, out, texts, rows


@pytest.fixture(scope="module")
def exported(sample_run, tmp_path_factory):
    _, out, _, _ = sample_run
    folder = tmp_path_factory.mktemp("export") / "tokenizer"
    result = invoke("export", out / "tokenizer.json", folder, "--format", "transformers")
    assert f"-> {folder / 'tokenizer_config.json'}" in result.output
    return folder, auto_tokenizer(folder, tmp_path_factory.mktemp("cache"))


def test_folder_loads_as_a_fast_tokenizer_with_the_special_tokens(sample_run, exported):
    from transformers import PreTrainedTokenizerFast

    tok, _, _, _ = sample_run
    folder, fast = exported
    assert sorted(p.name for p in folder.iterdir()) == sorted(tf_format.FILES)
    assert isinstance(fast, PreTrainedTokenizerFast) and fast.is_fast
    assert len(fast) == tok.vocab_size
    assert (fast.eos_token, fast.eos_token_id) == (ENDOFTEXT, tok.eos_id)
    assert (fast.bos_token, fast.bos_token_id) == (BOS, tok.special_id(BOS))
    assert fast.unk_token is None and fast.pad_token is None
    assert fast.convert_tokens_to_ids(PAD) == tok.special_id(PAD)
    assert set(fast.all_special_tokens) == {ENDOFTEXT, BOS, PAD}
    assert set(fast.all_special_ids) == set(tok.special_map.values())
    # add_special_tokens adds nothing (as GPT-2's); add_eos_token appends the eos.
    text = "Hello world"
    assert fast(text).input_ids == fast(text, add_special_tokens=False).input_ids
    assert fast.model_max_length >= 10**29  # no truncation warnings on long documents
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["clean_up_tokenization_spaces"] is False
    assert config["add_bos_token"] is False and config["add_eos_token"] is False


def test_add_eos_token_gives_what_encode_writes(sample_run, exported):
    tok, _, texts, rows = sample_run
    folder, _ = exported
    fast = auto_tokenizer(folder, folder.parent / "cache")
    fast.add_eos_token = True
    assert fast(texts[:50]).input_ids == rows[:50]


def test_ids_equal_the_token_shards_on_sample_data(sample_run, exported):
    tok, out, texts, rows = sample_run
    _, fast = exported
    assert len(texts) == json.loads((out / "manifest.json").read_text())["documents"] > 2000
    assert not any(t in text for text in texts for t in tok.special_tokens)
    got = fast(texts, add_special_tokens=False).input_ids
    bad = [
        i
        for i, (g, want) in enumerate(zip(got, rows, strict=True))
        if g + [fast.eos_token_id] != want
    ]
    assert not bad, f"{len(bad)} documents differ, first {bad[0]}: {texts[bad[0]][:60]!r}"
    assert rows[0] == tok.encode(texts[0], eos=True)


def test_decoding_gives_each_document_back(sample_run, exported):
    _, _, texts, rows = sample_run
    _, fast = exported
    assert fast.batch_decode([ids[:-1] for ids in rows]) == texts
    assert fast.batch_decode(rows, skip_special_tokens=True) == texts
    assert fast.decode(rows[0]) == texts[0] + ENDOFTEXT
    bos = fast.bos_token_id
    assert fast.decode([bos, *rows[1]], skip_special_tokens=True) == texts[1]


@pytest.mark.parametrize("lowercase", [False, True], ids=["cased", "lowercase"])
def test_char_mode_gives_tokenmills_ids_and_decoding(sample_run, tmp_path, lowercase):
    _, _, texts, _ = sample_run
    tok = Tokenizer.train(texts[::4], mode="char", lowercase=lowercase, vocab_size=3000)
    tok.save(tmp_path / "char.json")
    invoke("export", tmp_path / "char.json", tmp_path / "tf", "--format", "transformers")
    fast = auto_tokenizer(tmp_path / "tf", tmp_path / "cache")
    assert fast.is_fast
    assert (fast.unk_token, fast.unk_token_id) == (UNK, tok.special_id(UNK))
    assert (fast.eos_token, fast.eos_token_id) == (ENDOFTEXT, tok.eos_id)
    assert fast.bos_token is None
    want = [tok.encode(t, eos=True) for t in texts]
    got = fast(texts, add_special_tokens=False).input_ids
    assert [g + [fast.eos_token_id] for g in got] == want
    assert any(tok.special_id(UNK) in ids for ids in want)  # unseen characters occur
    # char mode is whitespace-normalized: decoding is tokenmill's decoding, <unk>
    # included (skip_special_tokens would drop it, as it drops the eos)
    assert fast.batch_decode([w[:-1] for w in want]) == [tok.decode(w[:-1]) for w in want]


def test_imported_gpt2_gives_tiktokens_ids(sample_run, tmp_path):
    import tiktoken

    _, _, texts, _ = sample_run
    folder = tmp_path / "gpt2"
    invoke("export", GPT2_FILE, folder, "--format", "transformers", "--pattern", "gpt2")
    fast = auto_tokenizer(folder, tmp_path / "cache")
    assert fast.is_fast and len(fast) == 50257
    assert (fast.eos_token, fast.eos_token_id) == (ENDOFTEXT, 50256)
    assert fast.bos_token is None
    enc = tiktoken.Encoding(
        name="gpt2",
        pat_str=_native.preset_regex("gpt2"),
        mergeable_ranks=tiktoken_format.read_ranks(GPT2_FILE),
        special_tokens={ENDOFTEXT: 50256},
    )
    want = enc.encode_ordinary_batch(texts)
    assert fast(texts, add_special_tokens=False).input_ids == want
    assert fast.batch_decode(want[::10]) == texts[::10]


@pytest.mark.parametrize("grown", [False, True], ids=["chosen-ids", "extended-gpt2"])
def test_special_tokens_past_unused_ids_keep_their_ids(sample_run, tmp_path, grown):
    """tokenizers numbers an added token missing from model.vocab after the
    vocabulary's size, whatever id the file gives it: special tokens past
    unused ids (chosen ids; GPT-2 grown, its <|endoftext|> among the merges'
    ids) got other ids, and the grown GPT-2's last merge decoded as
    <|endoftext|>. The special tokens are in model.vocab at their ids now."""
    import tokenizers

    _, _, texts, _ = sample_run
    if grown:
        out = tmp_path / "grown"
        invoke("run", SAMPLE_DIR, out, "--extend", GPT2_FILE, "--pattern", "gpt2",
               "--vocab-size", "50400", "--special-token", "<|pad|>")  # fmt: skip
        tok = Tokenizer.load(out / "tokenizer.json")
        assert tok.eos_id == 50256 < tok.vocab_size - 2
    else:
        tok = Tokenizer.train(texts[::3], num_merges=40,
                              special_tokens={ENDOFTEXT: 400, "<|pad|>": 402})  # fmt: skip
    tok.save(tmp_path / "tok.json")
    invoke("export", tmp_path / "tok.json", tmp_path / "hf.json", "--format", "hf")
    invoke("export", tmp_path / "tok.json", tmp_path / "tf", "--format", "transformers")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "hf.json"))
    assert {name: hf.token_to_id(name) for name in tok.special_map} == tok.special_map
    fast = auto_tokenizer(tmp_path / "tf", tmp_path / "cache")
    assert fast.eos_token_id == tok.eos_id
    text = texts[0][:200] + ENDOFTEXT + texts[1][:200]
    assert hf.encode(text).ids == tok.encode(text, allowed_special="all")
    top = tok.vocab_size - 1  # the last id: a merge when grown, a special token if not
    assert fast.decode([top]) == tok.decode([top])


def test_roles_of_special_tokens():
    """Only <|endoftext|>, <|bos|> and <unk> have roles; a tokenizer without
    <|endoftext|> (an imported one) has no eos_token rather than a wrong one."""
    tok = load_any(GPT2_FILE, pattern="gpt2", special_tokens={"<|end|>": 50256, PAD: 50257})
    assert tf_format.special_tokens_map(tok) == {"additional_special_tokens": ["<|end|>", PAD]}
    config = tf_format.config(tok)
    assert "eos_token" not in config and config["tokenizer_class"] == "PreTrainedTokenizerFast"
    tok = Tokenizer.train(["a b"], vocab_size=300, special_tokens=[PAD, BOS])
    assert tf_format.special_tokens_map(tok) == {
        "eos_token": ENDOFTEXT,
        "additional_special_tokens": [PAD],
        "bos_token": BOS,
    }


# ---- the folder: never half-written ---------------------------------------


def small(text: str = "low lower lowest") -> Tokenizer:
    return Tokenizer.train([text] * 10, vocab_size=262)


def hidden(folder: Path) -> list[str]:
    """Temporaries (and anything else hidden) under `folder`, at any depth."""
    return sorted(p.name for p in folder.rglob(".*"))


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_export_into_an_empty_folder_and_over_an_earlier_export(tmp_path):
    folder = tmp_path / "tf"
    folder.mkdir()
    inode = folder.stat().st_ino
    export(small(), folder, "transformers")
    first = (folder / "tokenizer.json").read_text()
    # a killed export's temporary is removed, not refused
    (folder / f".tokenizer.json{tf_format.TMP_MARK}1-abcd").write_text("half")
    files = export(small("other words entirely"), folder, "transformers")
    assert files == [folder / name for name in tf_format.FILES]
    assert sorted(contents(folder)) == sorted(tf_format.FILES)
    assert (folder / "tokenizer.json").read_text() != first
    assert (folder / "tokenizer.json").read_text() == hf_format.to_json(
        small("other words entirely")
    )
    # the folder itself stays (a mount point, a shell's working directory)
    assert folder.stat().st_ino == inode
    assert hidden(tmp_path) == []
    export(small(), tmp_path / "new" / "deeper", "transformers")  # parents made
    assert sorted(contents(tmp_path / "new" / "deeper")) == sorted(tf_format.FILES)
    assert hidden(tmp_path) == []


def test_export_refuses_a_folder_holding_other_files(cli, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("mine")
    small().save(tmp_path / "tok.json")
    result = cli("export", tmp_path / "tok.json", folder, "--format", "transformers", ok=False)
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"Error: {folder}: holds files a transformers export does not write (config.json); "
        "give a new or empty folder, or an earlier export to replace"
    ]
    assert contents(folder) == {"config.json": b"{}", "tokenizer.json": b"mine"}
    (tmp_path / "file").write_text("x")
    with pytest.raises(TokenmillError, match="exists and is not a folder"):
        export(small(), tmp_path / "file", "transformers")
    assert hidden(tmp_path) == []


@pytest.mark.parametrize("kind", ["another tool's", "fifo", "link"])
def test_export_refuses_the_export_files_it_did_not_write(tmp_path, kind):
    """The names of the export's own files, but not as tokenmill writes them:
    another tool's model folder (its own config), a FIFO, a link. Before, they
    were taken for an earlier export and replaced."""
    folder = tmp_path / "model"
    folder.mkdir()
    if kind == "fifo":
        os.mkfifo(folder / "tokenizer.json")
    elif kind == "link":
        export(small(), tmp_path / "elsewhere", "transformers")
        for name in tf_format.FILES:
            (folder / name).symlink_to(tmp_path / "elsewhere" / name)
    else:
        (folder / "tokenizer.json").write_text('{"mine": 1}')
        (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "LlamaTokenizer"}')
    before = {p.name: (p.is_symlink(), p.is_fifo()) for p in folder.iterdir()}
    with pytest.raises(TokenmillError, match="not as tokenmill's export writes them"):
        export(small(), folder, "transformers")
    assert {p.name: (p.is_symlink(), p.is_fifo()) for p in folder.iterdir()} == before
    if kind == "another tool's":
        assert (folder / "tokenizer.json").read_text() == '{"mine": 1}'


def test_a_refused_tokenizer_writes_nothing(tmp_path):
    tok = Tokenizer(mode="byte", pattern="gpt2", merges=[(97, 98), (97, 98)])
    with pytest.raises(TokenmillError, match="ids 256 and 257"):
        export(tok, tmp_path / "tf", "transformers")
    assert list(tmp_path.iterdir()) == []


def disk_full_at_second_file(monkeypatch) -> None:
    """Writing the export's second file fails as a full disk does."""
    real_write_text = Path.write_text
    written = []

    def write_text(self, *args, **kwargs):
        written.append(self)
        if len(written) == 2:
            raise OSError(28, "No space left on device")
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)


def test_a_failed_write_leaves_no_new_folder(tmp_path, monkeypatch):
    disk_full_at_second_file(monkeypatch)
    with pytest.raises(WriteError, match="No space left on device"):
        export(small(), tmp_path / "tf", "transformers")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_keeps_the_earlier_export(tmp_path, monkeypatch):
    folder = tmp_path / "tf"
    export(small(), folder, "transformers")
    before = contents(folder)
    disk_full_at_second_file(monkeypatch)
    with pytest.raises(WriteError, match="No space left on device"):
        export(small("other words entirely"), folder, "transformers")
    assert contents(folder) == before
    assert hidden(tmp_path) == []


def test_an_added_token_tokenizers_would_number_otherwise_is_refused(tmp_path):
    """tokenizers ignores the id a file gives an added token missing from
    model.vocab and numbers it after the vocabulary: tokenmill took the
    file's id (50300 where tokenizers encodes 50257). Refused, or the same."""
    import tokenizers

    invoke("export", GPT2_FILE, tmp_path / "g.json", "--format", "hf", "--pattern", "gpt2")
    d = json.loads((tmp_path / "g.json").read_text())
    added = {**d["added_tokens"][0], "content": "<|im_start|>", "id": 50300}
    d["added_tokens"].append(added)
    (tmp_path / "far.json").write_text(json.dumps(d))
    with pytest.raises(TokenmillError, match="'<|im_start|>' has id 50300, but tokenizers gives"):
        load_any(tmp_path / "far.json")
    added["id"] = 50257
    (tmp_path / "next.json").write_text(json.dumps(d))
    text = "a<|im_start|>b<|endoftext|>"
    want = tokenizers.Tokenizer.from_file(str(tmp_path / "next.json")).encode(text).ids
    assert load_any(tmp_path / "next.json").encode(text, allowed_special="all") == want
