"""Interoperability: tokenmill's tokenizers exported to Hugging Face tokenizers,
transformers and tiktoken give exactly tokenmill's ids, and existing
vocabularies (the real GPT-2 one) imported into tokenmill give exactly their
tool's ids, document by document on the real-text sample (2.4 MB of English
prose, Python code, Greek, Ukrainian, Russian, Japanese and Chinese).

Ids are compared with special tokens off: tiktoken's encode_ordinary,
add_special_tokens=False for Hugging Face. (Hugging Face always cuts special
tokens' text out of the input before BPE; the sample holds none, which a
test checks, so ordinary encoding is what is compared.)
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from realtext import GPT2_FILE, SAMPLE_DIR, iter_sample_documents

from tokenmill import _native
from tokenmill.formats import export, hf, load_any
from tokenmill.formats import tiktoken as tiktoken_format
from tokenmill.io.inputs import output_name
from tokenmill.tokenizer import ENDOFTEXT, UNK, Tokenizer

PRESETS = ("gpt2", "cl100k", "o200k")


@cache
def sample() -> tuple[tuple[str, str], ...]:
    """(shard name, text) of every document of the sample."""
    return tuple(iter_sample_documents())


def texts() -> list[str]:
    return [text for _, text in sample()]


def training_texts() -> list[str]:
    return texts()[::2]


def assert_same_ids(expected, actual, what: str) -> None:
    """Per document: ids `expected(texts)` == `actual(texts)` (lists of id lists)."""
    docs = sample()
    want, got = expected(texts()), actual(texts())
    assert len(want) == len(got) == len(docs)
    bad = [i for i, (w, g) in enumerate(zip(want, got, strict=True)) if list(w) != list(g)]
    if bad:
        i = bad[0]
        w, g = list(want[i]), list(got[i])
        at = next((k for k, (a, b) in enumerate(zip(w, g, strict=False)) if a != b), None)
        at = min(len(w), len(g)) if at is None else at
        name, text = docs[i]
        pytest.fail(
            f"{what}: {len(bad)} of {len(docs)} documents differ; first: {name} document "
            f"{i}, at token {at}: {w[at : at + 5]} vs {g[at : at + 5]} ({text[:60]!r}...)"
        )


def tokenmill_ids(tok: Tokenizer):
    return lambda docs: [tok.encode(t) for t in docs]


def hf_ids(path: Path):
    tokenizers = pytest.importorskip("tokenizers")
    hf_tok = tokenizers.Tokenizer.from_file(str(path))
    return lambda docs: [e.ids for e in hf_tok.encode_batch(docs, add_special_tokens=False)]


def transformers_ids(path: Path):
    transformers = pytest.importorskip("transformers")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path))
    return lambda docs: [fast.encode(t, add_special_tokens=False) for t in docs]


def tiktoken_ids(encoding):
    return lambda docs: encoding.encode_ordinary_batch(docs)


def test_sample_is_big_and_mixed_and_holds_no_special_token_text():
    docs = texts()
    assert sum(len(t.encode()) for t in docs) > 1_000_000
    joined = "".join(docs)
    for script_letter in ("α", "і", "ы", "の", "的"):  # Greek, Ukrainian, Russian, ja, zh
        assert script_letter in joined
    assert "def " in joined and "import " in joined
    assert ENDOFTEXT not in joined and UNK not in joined


# ---- tokenmill -> Hugging Face, transformers, tiktoken ------------------


@pytest.fixture(scope="module", params=PRESETS)
def byte_export(request, tmp_path_factory):
    """A byte-mode tokenizer trained on half the sample, and its exports."""
    tok = Tokenizer.train(training_texts(), pattern=request.param, vocab_size=6000)
    out = tmp_path_factory.mktemp(f"byte-{request.param}")
    tok.save(out / "tokenmill.json")
    export(tok, out / "tokenizer.json", "hf")
    export(tok, out / "tok.tiktoken", "tiktoken")
    return tok, out


@pytest.fixture(scope="module", params=[False, True], ids=["cased", "lowercase"])
def char_export(request, tmp_path_factory):
    tok = Tokenizer.train(training_texts(), mode="char", lowercase=request.param, vocab_size=6000)
    out = tmp_path_factory.mktemp("char")
    tok.save(out / "tokenmill.json")
    export(tok, out / "tokenizer.json", "hf")
    return tok, out


def test_byte_mode_tokenizers_gives_tokenmill_ids(byte_export):
    tok, out = byte_export
    assert_same_ids(tokenmill_ids(tok), hf_ids(out / "tokenizer.json"), f"{tok.pattern} hf")


def test_byte_mode_transformers_gives_tokenmill_ids(byte_export):
    tok, out = byte_export
    ids = transformers_ids(out / "tokenizer.json")
    assert_same_ids(tokenmill_ids(tok), ids, f"{tok.pattern} transformers")


def test_byte_mode_tiktoken_gives_tokenmill_ids(byte_export):
    tiktoken = pytest.importorskip("tiktoken")
    tok, out = byte_export
    # The README's one-line helper, verbatim.
    import base64

    enc = tiktoken.Encoding(
        **json.load(open(out / "tok.tiktoken.json")),
        mergeable_ranks={
            base64.b64decode(t): int(r)
            for t, r in (line.split() for line in open(out / "tok.tiktoken"))
        },
    )  # noqa: E501
    assert enc.n_vocab == tok.vocab_size
    assert enc.eot_token == tok.eos_id
    assert_same_ids(tokenmill_ids(tok), tiktoken_ids(enc), f"{tok.pattern} tiktoken")
    # tiktoken merges by the rank of the concatenation, tokenmill by the rank of
    # the pair: on trained merges the two agree (the ids above), and the
    # exporter checked that the merges are the ones tiktoken's rule implies.
    assert tiktoken_format.derive_merges(enc._mergeable_ranks) == tok.merges


def test_byte_mode_hf_decodes_like_tokenmill(byte_export):
    tokenizers = pytest.importorskip("tokenizers")
    tok, out = byte_export
    hf_tok = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    for text in texts()[::7]:
        ids = tok.encode(text)
        assert hf_tok.decode(ids) == tok.decode(ids) == text


def test_byte_mode_hf_pieces_are_tokenmill_words(byte_export):
    """The Split pre-tokenizer (the pattern rewritten for Oniguruma) cuts the
    text exactly where tokenmill's pattern does."""
    tokenizers = pytest.importorskip("tokenizers")
    tok, out = byte_export
    hf_tok = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    split = hf_tok.pre_tokenizer
    tricky = ["a  \n\n b   ", "1234567 x", "'S 'll ſ", " \t\r\n x\r\n", "x\u3000 \u3000y", ""]
    for text in [*texts()[::5], *tricky]:
        pieces = [text[a:b] for _, (a, b) in split.pre_tokenize_str(text)]
        assert pieces == _native.pretokenize(text, tok.pattern), text[:60]


def test_char_mode_tokenizers_gives_tokenmill_ids(char_export):
    tok, out = char_export
    assert_same_ids(tokenmill_ids(tok), hf_ids(out / "tokenizer.json"), "char hf")


def test_char_mode_transformers_gives_tokenmill_ids(char_export):
    tok, out = char_export
    assert_same_ids(tokenmill_ids(tok), transformers_ids(out / "tokenizer.json"), "char tf")


def test_char_mode_hf_decodes_like_tokenmill(char_export):
    tokenizers = pytest.importorskip("tokenizers")
    tok, out = char_export
    hf_tok = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    for text in texts()[::7]:
        ids = tok.encode(text)
        assert hf_tok.decode(ids, skip_special_tokens=False) == tok.decode(ids)


EDGE_WORDS = [
    "a\x1fb c\x1cd\x1d\x1e e",  # Python's str.split() splits at U+001C..U+001F
    "x\u00a0y\u2028z\u3000w\x85v \u200bu",  # Unicode spaces; U+200B is no space
    "ΟΔΟΣ ΑΣ. ΑΣʰ ΣΑ ΑΣΣ ʰΣ aΣ́ b Σ",  # final sigma, case-ignorable marks around it
    "İSTANBUL ǅ ß ﬃ",  # lowercasing that lengthens or titlecases
    "",
    "   ",
    "unseen ☃ chars ☃☃",
]


def test_char_mode_hf_words_are_str_split_words(char_export):
    """The exported normalizers + WhitespaceSplit give the words of Python's
    str.split() (after str.lower() when lowercasing), each followed by the
    end-of-word mark; on the sample and on edge cases."""
    tokenizers = pytest.importorskip("tokenizers")
    tok, out = char_export
    hf_tok = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    for text in [*texts(), *EDGE_WORDS]:
        normalized = hf_tok.normalizer.normalize_str(text)
        words = [w for w, _ in hf_tok.pre_tokenizer.pre_tokenize_str(normalized)]
        expected = (text.lower() if tok.lowercase else text).split()
        assert words == [w + hf.WORD_END for w in expected], text[:60]


def test_char_mode_edge_cases_give_tokenmill_ids(char_export):
    tokenizers = pytest.importorskip("tokenizers")
    tok, out = char_export
    hf_tok = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    for text in EDGE_WORDS:
        assert hf_tok.encode(text, add_special_tokens=False).ids == tok.encode(text), text


def test_whitespace_split_differs_from_str_split_only_at_u001c_to_u001f():
    """Why the char-mode export has its first normalizer: Hugging Face's
    WhitespaceSplit splits at Unicode White_Space, Python's str.split() also at
    the information separators U+001C..U+001F. (HF's `Whitespace` pre-tokenizer
    is another thing altogether: it also splits punctuation from letters.)"""
    tokenizers = pytest.importorskip("tokenizers")
    split = tokenizers.pre_tokenizers.WhitespaceSplit()
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    text = "x".join(chars)
    kept = set("".join(w for w, _ in split.pre_tokenize_str(text)))
    hf_spaces = set(chars) - kept
    py_spaces = {c for c in chars if c.isspace()}
    assert py_spaces - hf_spaces == {"\x1c", "\x1d", "\x1e", "\x1f"}
    assert hf_spaces - py_spaces == set()
    assert [w for w, _ in tokenizers.pre_tokenizers.Whitespace().pre_tokenize_str("a,b")] == [
        "a",
        ",",
        "b",
    ]


# ---- GPT-2's vocabulary imported ---------------------------------------


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    tok = load_any(GPT2_FILE, pattern="gpt2")
    out = tmp_path_factory.mktemp("gpt2")
    export(tok, out / "tokenizer.json", "hf")
    return tok, out


@pytest.fixture(scope="module")
def gpt2_tiktoken():
    tiktoken = pytest.importorskip("tiktoken")
    return tiktoken.Encoding(
        name="gpt2",
        pat_str=_native.preset_regex("gpt2"),
        mergeable_ranks=tiktoken_format.read_ranks(GPT2_FILE),
        special_tokens={ENDOFTEXT: 50256},
    )


def test_gpt2_tiktoken_file_imports_with_tiktokens_ids(gpt2, gpt2_tiktoken):
    tok, _ = gpt2
    assert tok.vocab_size == gpt2_tiktoken.n_vocab == 50257
    assert tok.eos_id == gpt2_tiktoken.eot_token == 50256
    assert len(tok.merges) == 50000  # one per multi-byte token, as in GPT-2's merges.txt
    assert tok._wide_ids is False
    assert_same_ids(tiktoken_ids(gpt2_tiktoken), tokenmill_ids(tok), "gpt2 import")
    for text in texts()[::50]:
        assert tok.decode(tok.encode(text)) == gpt2_tiktoken.decode(tok.encode(text)) == text


def test_gpt2_without_whole_words_still_gives_tiktokens_ids(gpt2, gpt2_tiktoken):
    """tiktoken merges by the rank of the concatenation (and looks whole
    pre-tokens up); merges derived from the ranks, applied by pair rank alone,
    give the same ids on real text."""
    tok, _ = gpt2
    plain = Tokenizer(**{**tok.__getstate__(), "whole_words": False})
    assert_same_ids(tiktoken_ids(gpt2_tiktoken), tokenmill_ids(plain), "gpt2 by pair rank")


def test_gpt2_exported_as_tokenizer_json_imports_with_the_same_ids(gpt2, gpt2_tiktoken):
    tok, out = gpt2
    again = load_any(out / "tokenizer.json")
    assert again.pattern == "gpt2"  # the Oniguruma form of the pattern is recognized
    assert again.merges == tok.merges and again.vocab == tok.vocab
    assert_same_ids(tiktoken_ids(gpt2_tiktoken), tokenmill_ids(again), "gpt2 via tokenizer.json")
    assert_same_ids(tiktoken_ids(gpt2_tiktoken), hf_ids(out / "tokenizer.json"), "gpt2 hf")


def test_gpt2_style_tokenizer_json_with_byte_level_regex(gpt2, tmp_path):
    """GPT-2's own tokenizer.json layout: ByteLevel with its built-in regex,
    <|endoftext|> both in the vocab and an added token."""
    _, out = gpt2
    d = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    d["pre_tokenizer"] = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": True,
        "use_regex": True,
    }
    d["model"]["vocab"][ENDOFTEXT] = 50256
    path = tmp_path / "gpt2-style.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    tok = load_any(path)
    assert tok.special_map == {ENDOFTEXT: 50256}
    assert_same_ids(hf_ids(path), tokenmill_ids(tok), "ByteLevel regex import")


LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


@pytest.mark.parametrize(
    "pattern",
    [LLAMA3_PATTERN, r"\p{L}+|\p{N}{1,3}+", r"[^\s]+$|\s+"],
    ids=["llama3", "gaps-and-interval", "line-end"],
)
def test_split_byte_level_tokenizer_json(gpt2, tmp_path, pattern):
    """Llama 3 / Qwen 2 layout: Split with a regex, then ByteLevel without one,
    and ignore_merges. Oniguruma's regex is read as Oniguruma reads it: text
    the pattern does not match stays a piece, `{1,3}+` repeats the interval,
    `$` ends a line."""
    _, out = gpt2
    d = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    d["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": pattern}
    d["model"]["ignore_merges"] = True
    path = tmp_path / "split.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    tok = load_any(path)
    assert tok.whole_words
    assert_same_ids(hf_ids(path), tokenmill_ids(tok), f"Split {pattern[:20]}")
    extra = ["x 1234567 y\nab  \ncd", "!!\n\n?", "", "  "]
    ids = hf_ids(path)(extra)
    assert ids == [tok.encode(t) for t in extra]


def test_nfc_normalizer_import(gpt2, tmp_path):
    """Qwen 2 normalizes to NFC first; tokenmill applies NFC before the native encoder."""
    _, out = gpt2
    d = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    d["normalizer"] = {"type": "NFC"}
    path = tmp_path / "nfc.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    tok = load_any(path)
    assert tok.normalization == "NFC"
    decomposed = ["Cafe\u0301 e\u0301te\u0301 A\u030a ", "\u1100\u1161\u11a8"]
    ids = hf_ids(path)(decomposed)
    assert ids == [tok.encode(t) for t in decomposed]
    assert tok.encode(decomposed[0]) != load_any(out / "tokenizer.json").encode(decomposed[0])
    assert_same_ids(hf_ids(path), tokenmill_ids(tok), "NFC import")
    # and back out again, and through tokenmill's own format
    export(tok, tmp_path / "again.json", "hf")
    assert hf_ids(tmp_path / "again.json")(decomposed) == ids
    tok.save(tmp_path / "tm.json")
    assert Tokenizer.load(tmp_path / "tm.json").encode(decomposed[0]) == ids[0]


def test_nfc_is_hugging_faces_on_every_code_point(gpt2, tmp_path):
    """tokenizers' NFC has Unicode 9's tables: newer ones (Arrow's, Python's)
    reorder and compose marks it does not know (U+0C3C, U+1AC1, U+1133B ...),
    and ids differed on text holding them. Each code point between an `a` and
    a combining mark, on either side: every segment starts with a starter
    that composes with nothing before it, so one string holds them all."""
    from tokenizers.normalizers import NFC

    path = tmp_path / "nfc.json"
    d = json.loads((gpt2[1] / "tokenizer.json").read_text(encoding="utf-8"))
    d["normalizer"] = {"type": "NFC"}
    path.write_text(json.dumps(d), encoding="utf-8")
    tok = load_any(path)
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for mark in ("\u0301", "\u0334", "\u05b0"):
        for text in (
            "".join(f"a{c}{mark}" for c in points),
            "".join(f"a{mark}{c}" for c in points),
        ):
            ours = tok._normalize(pa.array([text], pa.large_string()))[0].as_py()
            theirs = NFC().normalize_str(text)
            if ours != theirs:
                at = next(i for i, (x, y) in enumerate(zip(ours, theirs, strict=False)) if x != y)
                raise AssertionError(f"NFC differs near {ascii(theirs[max(0, at - 3) : at + 3])}")
    # The ids too, on marks newer than Unicode 9.
    newer = ["a\u0c3c\u0301", "a\u1ac1\u0334", "\U0001133b\u0338", "a\u0898\u0334"]
    assert hf_ids(path)(newer) == [tok.encode(t) for t in newer]


def test_imported_tokenizer_saves_loads_and_pickles(gpt2, tmp_path):
    import pickle

    tok, _ = gpt2
    tok.save(tmp_path / "gpt2.json")
    again = Tokenizer.load(tmp_path / "gpt2.json")
    assert again == tok
    assert again.sha256 == tok.sha256
    assert again.to_dict()["vocab"][:3] == ["!", '"', "#"]
    assert again.to_dict()["vocab"][220] == "Ġ"  # GPT-2's alphabet, as in tokenizer.json
    restored = pickle.loads(pickle.dumps(tok))
    assert restored == tok
    text = texts()[0]
    assert restored.encode(text) == tok.encode(text) == again.encode(text)
    assert tok.token_values[50256] == ENDOFTEXT.encode()
    assert tok.decode([15496, 995, 50256]) == "Hello world" + ENDOFTEXT
    assert tok.tokens("Hello world") == ["Hello", " world"]


def test_gpt2_exported_to_tiktoken_again(gpt2, gpt2_tiktoken, tmp_path):
    tok, _ = gpt2
    export(tok, tmp_path / "again.tiktoken", "tiktoken")
    assert (tmp_path / "again.tiktoken").read_bytes() == GPT2_FILE.read_bytes()
    enc = tiktoken_format.encoding(tmp_path / "again.tiktoken")
    assert enc._special_tokens == {ENDOFTEXT: 50256}
    assert load_any(tmp_path / "again.tiktoken") == tok  # settings from the JSON beside it
    assert load_any(tmp_path / "again.tiktoken.json") == tok


# ---- the CLI ------------------------------------------------------------


def test_cli_export_both_formats(cli, tmp_path):
    pytest.importorskip("tiktoken")
    tok = Tokenizer.train(training_texts()[:300], pattern="o200k", vocab_size=1500)
    tok.save(tmp_path / "tok.json")
    cli("export", tmp_path / "tok.json", tmp_path / "hf.json", "--format", "hf")
    cli("export", tmp_path / "tok.json", tmp_path / "t.tiktoken", "--format", "tiktoken")
    sample_texts = texts()[::20]
    want = [tok.encode(t) for t in sample_texts]
    assert hf_ids(tmp_path / "hf.json")(sample_texts) == want
    enc = tiktoken_format.encoding(tmp_path / "t.tiktoken")
    assert enc.encode_ordinary_batch(sample_texts) == want
    # and the exports read back in, with the same ids
    for path in (tmp_path / "hf.json", tmp_path / "t.tiktoken"):
        assert [load_any(path).encode(t) for t in sample_texts] == want


def test_cli_char_mode_export_to_tiktoken_is_refused(cli, tmp_path):
    tok = Tokenizer.train(["a b c"], mode="char", vocab_size=10)
    tok.save(tmp_path / "tok.json")
    result = cli(
        "export", tmp_path / "tok.json", tmp_path / "t.tiktoken", "--format", "tiktoken", ok=False
    )
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1].startswith("Error: ")
    assert "char mode" in result.output
    assert not (tmp_path / "t.tiktoken").exists()


def test_cli_encodes_with_gpt2_tiktoken_file(cli, tmp_path, gpt2_tiktoken):
    data = SAMPLE_DIR
    out = tmp_path / "tokens"
    cli("encode", data, out, "--tokenizer", GPT2_FILE, "--pattern", "gpt2", "--workers", "2")
    by_shard: dict[str, list[str]] = {}
    for name, text in sample():
        by_shard.setdefault(name, []).append(text)
    for name, docs in by_shard.items():
        table = pq.read_table(out / output_name(name))
        assert table.schema.field("ids").type.value_type.bit_width == 16
        meta = table.schema.metadata
        assert meta[b"tokenmill.vocab_size"] == b"50257"
        want = [ids + [50256] for ids in gpt2_tiktoken.encode_ordinary_batch(docs)]
        assert table["ids"].to_pylist() == want, name
    result = cli("decode", "--tokenizer", GPT2_FILE, "--pattern", "gpt2", "15496", "995")
    assert result.output == "Hello world"


def test_cli_encode_with_tokenizer_json_and_special_token_option(cli, tmp_path, gpt2):
    _, out = gpt2
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("Hello world\nsecond line\n", encoding="utf-8")
    cli("encode", data, tmp_path / "t1", "--tokenizer", out / "tokenizer.json")
    ids = pq.read_table(tmp_path / "t1" / "a.txt.parquet")["ids"].to_pylist()
    assert ids == [[15496, 995, 50256], [12227, 1627, 50256]]
    # a .tiktoken file with a special token given on the command line
    cli(
        "encode",
        data,
        tmp_path / "t2",
        "--tokenizer",
        GPT2_FILE,
        "--pattern",
        "gpt2",
        "--special-token",
        "<|end|>=50300",
        "--no-eos",
    )
    ids = pq.read_table(tmp_path / "t2" / "a.txt.parquet")["ids"].to_pylist()
    assert ids == [[15496, 995], [12227, 1627]]
    result = cli(
        "encode",
        data,
        tmp_path / "t3",
        "--tokenizer",
        GPT2_FILE,
        "--pattern",
        "gpt2",
        "--special-token",
        "<|end|>=50300",
        ok=False,
    )
    assert result.exit_code == 1 and "--no-eos" in result.output
