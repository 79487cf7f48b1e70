"""Extending a tokenizer (`pipeline/tokenmill/tokenizer/extend.py`, `--extend`).

Differential: a base trained on corpus A, extended on corpus B, learns exactly the merges of
the textbook algorithm (tests/helpers/textbook.py) started from B's word table segmented by A's
merges and continued, ties included, where a pair whose text is already a token's is never
learned; in byte mode (each preset pattern) and char mode (characters A never saw are
``<unk>``, which never merges). The base's ids, merges and special tokens are kept.

Real: GPT-2's public ranks file extended on sample_data/'s non-English text (helpers/realtext.py
style), with its exports read back by tiktoken and Hugging Face tokenizers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pytest
import textbook as tb
from conftest import assert_usage_error
from hypothesis import example, given
from hypothesis import strategies as st
from test_differential import BYTE_TEXTS, SETTINGS, char_texts

from tokenmill import Tokenizer, TokenmillError
from tokenmill.tokenizer import END_OF_WORD, UNK
from tokenmill.tokenizer.core import word_table
from tokenmill.tokenizer.extend import extend

ROOT = Path(__file__).resolve().parents[2]
PATTERNS = ["gpt2", "cl100k", "o200k"]


def extended(base: Tokenizer, texts: list[str], num_merges: int, **options):
    table = word_table(
        [pa.array(texts, pa.large_string())], base.mode, base.pattern or "cl100k", base.lowercase
    )
    return extend(base, table["word"], table["count"], num_merges=num_merges, **options)


def known_texts(tok: Tokenizer) -> list:
    specials = set(tok.special_map.values())
    return [v for i, v in enumerate(tok.token_values) if v is not None and i not in specials]


def check_kept(base: Tokenizer, tok: Tokenizer) -> None:
    """Every base id has its value, the base merges come first, special ids stay."""
    assert tok.token_values[: base.vocab_size] == base.token_values
    assert tok.merges[: len(base.merges)] == base.merges
    for name, i in base.special_map.items():
        assert tok.special_id(name) == i
    assert min(tok._merge_ids[len(base.merges) :], default=base.vocab_size) >= base.vocab_size


# --- differential ------------------------------------------------------------------------------


@SETTINGS
@given(
    a=BYTE_TEXTS,
    b=BYTE_TEXTS,
    pattern=st.sampled_from(PATTERNS),
    base_merges=st.integers(0, 30),
    num_merges=st.integers(1, 40),
)
@example(a=["aab aab ab"], b=["aaab aaab baab"], pattern="gpt2", base_merges=3, num_merges=10)
def test_byte_extend_is_textbook_continued(a, b, pattern, base_merges, num_merges):
    base = Tokenizer.train(a, pattern=pattern, num_merges=base_merges)
    pairs = base.merge_pairs()
    table = [
        (tb.encode_bytes(word, pairs), count)
        for word, count in tb.byte_word_counts(b, pattern).items()
    ]
    expected = tb.train_symbols(table, num_merges, known=known_texts(base))
    grown = extended(base, b, num_merges)
    tok = grown.tokenizer
    assert tok.merge_pairs()[len(base.merges) :] == expected
    assert grown.new_merges == len(expected)
    check_kept(base, tok)
    # Encoding replays the merges: each word of B is its textbook segmentation.
    for word in tb.byte_word_counts(b, pattern):
        ids = tok.encode(word.decode())
        assert [tok.token_values[i] for i in ids] == tb.encode_bytes(word, tok.merge_pairs())
    again = Tokenizer.from_dict(json.loads(tok.to_json()))
    assert again == tok


@SETTINGS
@given(
    a=char_texts(),
    b=char_texts(letters="abcdef"),
    base_merges=st.integers(0, 30),
    num_merges=st.integers(1, 40),
)
def test_char_extend_is_textbook_continued(a, b, base_merges, num_merges):
    base = Tokenizer.train(a, mode="char", num_merges=base_merges)
    pairs = base.merge_pairs()
    seen = set(base.alphabet)

    def symbols(word: str) -> tuple[str, ...]:
        return (*(c if c in seen else UNK for c in word), END_OF_WORD)

    table = [
        (tb.encode_symbols(symbols(word), pairs), count)
        for word, count in tb.char_word_counts(b).items()
    ]
    expected = tb.train_symbols(table, num_merges, known=known_texts(base), frozen=[UNK])
    tok = extended(base, b, num_merges).tokenizer
    assert tok.merge_pairs()[len(base.merges) :] == expected
    check_kept(base, tok)
    again = Tokenizer.from_dict(json.loads(tok.to_json()))
    assert again == tok
    assert again.encode(" ".join(b)) == tok.encode(" ".join(b))


@SETTINGS
@given(
    a=char_texts(letters="abc"),
    b=char_texts(letters="abcdef"),
    base_merges=st.integers(0, 30),
    num_merges=st.integers(1, 40),
)
def test_char_extend_alphabet_is_textbook_continued(a, b, base_merges, num_merges):
    base = Tokenizer.train(a, mode="char", num_merges=base_merges)
    table = [
        (tb.encode_char(word, base.merge_pairs()), count)
        for word, count in tb.char_word_counts(b).items()
    ]
    added = sorted({c for word in tb.char_word_counts(b) for c in word} - set(base.alphabet))
    expected = tb.train_symbols(table, num_merges, known=known_texts(base) + added)
    tok = extended(base, b, num_merges, extend_alphabet=True).tokenizer
    assert tok.merge_pairs()[len(base.merges) :] == expected
    check_kept(base, tok)
    size = base.vocab_size
    assert [tok.token_values[i] for i in range(size, size + len(added))] == added
    assert UNK not in tok.tokens(" ".join(b))
    again = Tokenizer.from_dict(json.loads(tok.to_json()))
    assert again == tok
    assert again.encode(" ".join(b)) == tok.encode(" ".join(b))


def test_a_merge_making_a_token_that_exists_is_not_learned():
    # A byte-level base (as imported from a tokenizer.json) whose merges leave "abc"
    # as [a, bc] though "abc" is a token (made by (ab, c)): the most frequent pair of
    # the new text, (a, bc), would make a second "abc", so it is passed over.
    vocab = [bytes([i]) for i in range(256)] + [b"bc", b"ab", b"abc", None]
    base = Tokenizer(
        mode="byte",
        pattern="gpt2",
        merges=[(98, 99), (97, 98), (257, 99)],
        special_tokens=["<|endoftext|>"],
        vocab=vocab,
        special_ids=[259],
    )._checked("test base")
    texts = ["abc abc abc xabc"]
    table = [
        (tb.encode_bytes(word, base.merge_pairs()), count)
        for word, count in tb.byte_word_counts(texts, "gpt2").items()
    ]
    assert table[0] == ([b"a", b"bc"], 1)
    plain = tb.train_symbols(table, 3)
    assert plain[0] == (b"a", b"bc")  # what training from this table alone would learn
    expected = tb.train_symbols(table, 3, known=known_texts(base))
    assert (b"a", b"bc") not in expected
    tok = extended(base, texts, 3).tokenizer
    assert tok.merge_pairs()[len(base.merges) :] == expected
    assert tok.encode("abc") == [97, 256]  # still as the base splits it
    check_kept(base, tok)


def test_vocab_size_is_the_total_and_new_specials_follow():
    base = Tokenizer.train(["the cat sat on the mat"] * 5, vocab_size=262)
    table = word_table([pa.array(["der Hund und die Katze"] * 5, pa.large_string())],
                       "byte", base.pattern, False)  # fmt: skip
    grown = extend(base, table["word"], table["count"], vocab_size=270,
                   special_tokens=["<|pad|>"])  # fmt: skip
    tok = grown.tokenizer
    assert tok.vocab_size == 270
    assert tok.special_map == {"<|endoftext|>": 261, "<|pad|>": 269}
    assert grown.new_merges == 270 - 262 - 1
    with pytest.raises(Exception, match="below the base"):
        extend(base, table["word"], table["count"], vocab_size=261)


def test_wrong_arguments_are_named_not_taken_apart():
    """A name given as a string was six special tokens, one per character; a
    dict's ids were dropped; a base or table of another type ended in an
    AttributeError."""
    base = Tokenizer.train(["the cat sat on the mat"] * 5, vocab_size=262)
    words, counts = pa.array(["der", " Hund"]), pa.array([3, 2])
    one_string = re.escape("special_tokens='<|pad|>': want a list of names")
    with pytest.raises(TokenmillError, match=one_string):
        extend(base, words, counts, vocab_size=270, special_tokens="<|pad|>")
    with pytest.raises(TypeError, match="special_tokens= names tokens"):
        extend(base, words, counts, vocab_size=270, special_tokens={"<|pad|>": 300})
    with pytest.raises(TokenmillError, match=re.escape("'<|pad|>' is listed twice")):
        extend(base, words, counts, vocab_size=270, special_tokens=["<|pad|>", "<|pad|>"])
    with pytest.raises(TypeError, match="base= is NoneType, not a Tokenizer"):
        extend(None, words, counts, vocab_size=270)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="words= is list, not an Arrow array"):
        extend(base, ["der"], counts, vocab_size=270)  # type: ignore[arg-type]


# --- real: GPT-2 grown on the sample's non-English text ----------------------------------------

NEW_MERGES = 3000


@pytest.fixture(scope="module")
def gpt2_grown(tmp_path_factory):
    from realtext import GPT2_FILE, SAMPLE_DIR, read_documents

    from tokenmill.formats import export, load_any

    base = load_any(GPT2_FILE, pattern="gpt2")
    texts = list(read_documents(SAMPLE_DIR / "multilingual.jsonl"))
    grown = extended(base, texts, NEW_MERGES)
    out = tmp_path_factory.mktemp("gpt2-grown")
    export(grown.tokenizer, out / "tokenizer.json", "hf")
    export(grown.tokenizer, out / "grown.tiktoken", "tiktoken")
    export(grown.tokenizer, out / "transformers", "transformers")
    return base, grown, texts, out


def sample_texts() -> list[str]:
    from realtext import load_sample_texts

    return load_sample_texts()


def test_gpt2_grown_keeps_every_gpt2_id(gpt2_grown):
    tiktoken = pytest.importorskip("tiktoken")
    from realtext import GPT2_FILE

    from tokenmill.formats import tiktoken as tiktoken_format

    base, grown, _, out = gpt2_grown
    tok = grown.tokenizer
    assert grown.new_merges == NEW_MERGES
    assert tok.vocab_size == 50257 + NEW_MERGES
    assert tok.eos_id == 50256 and min(tok._merge_ids[len(base.merges) :]) == 50257
    check_kept(base, tok)
    gpt2 = tiktoken.Encoding(
        "gpt2",
        pat_str=tb.PATTERNS["gpt2"],
        mergeable_ranks=tiktoken_format.read_ranks(GPT2_FILE),
        special_tokens={"<|endoftext|>": 50256},
    )
    ours = tiktoken_format.encoding(out / "grown.tiktoken")
    for i in range(50256):
        assert ours.decode_single_token_bytes(i) == gpt2.decode_single_token_bytes(i)
        assert tok.token_values[i] == gpt2.decode_single_token_bytes(i)
    assert tok.decode([50256]) == "<|endoftext|>"


def test_gpt2_grown_exports_give_tokenmill_ids_on_every_sample_document(gpt2_grown):
    pytest.importorskip("tiktoken")
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    from tokenmill.formats import tiktoken as tiktoken_format

    _, grown, _, out = gpt2_grown
    tok = grown.tokenizer
    docs = sample_texts()
    want = tok.encode_batch(docs)
    assert any(i >= 50257 for ids in want for i in ids)  # the new merges are used
    enc = tiktoken_format.encoding(out / "grown.tiktoken")
    assert enc.encode_ordinary_batch(docs) == want
    hf = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    assert [e.ids for e in hf.encode_batch(docs, add_special_tokens=False)] == want
    fast = transformers.AutoTokenizer.from_pretrained(str(out / "transformers"))
    assert [fast.encode(t, add_special_tokens=False) for t in docs] == want


def test_gpt2_grown_compresses_the_text_it_grew_on_better(gpt2_grown):
    base, grown, texts, _ = gpt2_grown
    n_bytes = sum(len(t.encode()) for t in texts)
    before = n_bytes / sum(map(len, base.encode_batch(texts)))
    after = n_bytes / sum(map(len, grown.tokenizer.encode_batch(texts)))
    assert after > before * 1.5
    # The run summary's numbers (the word table weighted by counts) are these.
    assert grown.base_bytes_per_token == round(before, 4)
    assert grown.bytes_per_token == round(after, 4)


# --- the pipeline: run --extend, reuse, stats --------------------------------------------------


def test_run_extend_keeps_its_tokenizer_until_the_base_changes(tmp_path):
    from click.testing import CliRunner

    from tokenmill.cli import main
    from tokenmill.config import Config
    from tokenmill.stages.run import run_all
    from tokenmill.stages.stats import run_stats

    data = tmp_path / "data"
    data.mkdir()
    docs = ["der Hund und die Katze sitzen", "the cat and the dog sit"] * 20
    (data / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    bases = []
    for k, corpus in enumerate((["the cat sat on the mat"] * 9, ["a dog and a log"] * 9)):
        base = Tokenizer.train(corpus, pattern="gpt2", num_merges=5)
        base.save(tmp_path / f"base{k}.json")
        bases.append(base)
    out = tmp_path / "out"

    def run(k: int):
        stages = []
        config = Config(vocab_size=300, extend=str(tmp_path / f"base{k}.json"))
        run_all(data, out, config, on_stage=stages.append)
        return {s.stage: s for s in stages}

    first = run(0)
    train = first["train"]
    # The corpus runs out of pairs before 300 ids: every merge it has is new.
    assert train.redone and train.extend["new_merges"] == train.vocab_size - bases[0].vocab_size
    assert train.extend["bytes_per_token"] > train.extend["base_bytes_per_token"]
    tok = Tokenizer.load(out / "tokenizer.json")
    check_kept(bases[0], tok)
    assert tok.pattern == "gpt2"  # the base's, not the default cl100k
    again = run(0)
    assert again["train"].reused and again["train"].extend == train.extend
    other = run(1)
    assert other["train"].redone
    check_kept(bases[1], Tokenizer.load(out / "tokenizer.json"))
    stats = run_stats(out).stats
    assert stats["extend"]["new_merges"] == other["train"].extend["new_merges"]
    assert stats["extend"]["bytes_per_token"] == stats["bytes_per_token"]
    result = CliRunner().invoke(main, ["stats", str(out)])
    assert result.exit_code == 0 and "new merges on its 5" in result.output
    result = CliRunner().invoke(
        main,
        ["train", str(out / "counts.parquet"), str(tmp_path / "t.json"),
         "--extend", str(tmp_path / "base0.json"), "--vocab-size", "270"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert Tokenizer.load(tmp_path / "t.json").vocab_size == 270
    assert "new on the base's 5" in result.output


def test_run_extend_alphabet_in_char_mode(tmp_path):
    from tokenmill.config import Config
    from tokenmill.errors import TokenmillError
    from tokenmill.stages.run import run_all
    from tokenmill.stages.tokens import token_shards

    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("über schön grün\nschön über alles\n" * 5)
    base = Tokenizer.train(["uber schon grun alles"] * 5, mode="char", num_merges=10)
    base.save(tmp_path / "base.json")
    with pytest.raises(TokenmillError, match="goes with --extend"):
        Config(extend_alphabet=True)
    for grow, out in ((False, tmp_path / "unk"), (True, tmp_path / "grown")):
        config = Config(vocab_size=60, extend=str(tmp_path / "base.json"), extend_alphabet=grow)
        run_all(data, out, config)
        tok = Tokenizer.load(out / "tokenizer.json")
        check_kept(base, tok)
        assert tok.mode == "char"
        ids = [i for b in token_shards(out / "tokens")[0].batches() for i in b["ids"].flatten()]
        assert (tok.special_id(UNK) in [i.as_py() for i in ids]) is not grow
        if grow:  # the two new letters, sorted, right after the base's ids
            assert tok.token_values[base.vocab_size : base.vocab_size + 2] == ["ö", "ü"]


def test_options_the_base_overrides_are_refused_not_dropped(tmp_path, cli):
    """`--extend` keeps the base's mode and lowercasing; `--mode char` on a byte
    base, or `--lowercase` on one that does not lowercase, trained a byte-mode,
    case-keeping tokenizer without a word. `--lowercase` in byte mode is
    refused as well (it was dropped too); given where it applies, it trains.
    Each is a pair of options that do not go together: a usage error (status
    2), found before any work, by `run` and `train` alike."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("Hello World\nhello world\n" * 5)
    byte_base = tmp_path / "byte.json"
    Tokenizer.train(["hello world"] * 5, num_merges=5).save(byte_base)
    char_base = tmp_path / "char.json"
    Tokenizer.train(["hello world"] * 5, mode="char", lowercase=True, num_merges=5).save(char_base)
    cases = [  # options that do not go together, the base read before any work: usage errors
        (["--extend", byte_base, "--mode", "char"], "--mode char does not go with --extend"),
        (["--extend", byte_base, "--lowercase"], "--lowercase does not go with --extend"),
        (["--lowercase"], "--lowercase is char mode's (--mode char)"),
        # Refused once the corpus was counted and merged, before.
        (["--extend", byte_base, "--vocab-size", "200"], "--vocab-size 200 is below the base's"),
        # Said by training, once the corpus was counted and merged (status 1), before.
        (["--extend", byte_base, "--extend-alphabet"], "--extend-alphabet does not go with"),
    ]
    cli("run", data, tmp_path / "counted", "--count-only")
    for k, (args, message) in enumerate(cases):
        for command, read in (("run", data), ("train", tmp_path / "counted" / "counts.parquet")):
            written = tmp_path / f"{command}{k}"
            result = cli(command, read, written, "--vocab-size", "300", *args, ok=False)
            assert_usage_error(result, message, command, written)
    cli("run", data, tmp_path / "char", "--extend", char_base, "--lowercase", "--vocab-size", "40")
    assert Tokenizer.load(tmp_path / "char" / "tokenizer.json").lowercase


@pytest.mark.parametrize("grow_alphabet", [False, True])
def test_char_extended_hf_export_gives_tokenmill_ids(tmp_path, grow_alphabet):
    """An extended char-mode tokenizer keeps its numbering in a tokenizer.json:
    base ids, then the new merges, and with --extend-alphabet the new characters
    placed after the base's merges, not at the start."""
    tokenizers = pytest.importorskip("tokenizers")
    from realtext import SAMPLE_DIR, read_documents

    from tokenmill.formats import export

    english = [t for t in sample_texts() if t.isascii()][:300]
    texts = list(read_documents(SAMPLE_DIR / "multilingual.jsonl"))[:400]
    base = Tokenizer.train(english, mode="char", num_merges=300)
    tok = extended(base, texts, 500, extend_alphabet=grow_alphabet).tokenizer
    check_kept(base, tok)
    assert (tok.alphabet_ids is not None) is grow_alphabet
    export(tok, tmp_path / "tokenizer.json", "hf")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    got = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    assert got == [tok.encode(t) for t in texts]
