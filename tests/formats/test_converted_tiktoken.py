"""tokenizer.json files that transformers' TikTokenConverter writes from a
.tiktoken file, as Llama 3's is: a merge for every split of each token into
two tokens, and `ignore_merges` on. tokenmill reads such a file as the ranks
it was made from, and gives the ids Hugging Face tokenizers gives."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import textbook
import tokenizers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from realtext import CL100K_FILE, load_sample_texts

from tokenmill.errors import TokenmillError
from tokenmill.formats import hf, load_any

converter = pytest.importorskip("transformers.convert_slow_tokenizer").TikTokenConverter

# Llama 3's pattern, as its tokenizer.json spells it (cl100k's older spelling).
LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Words of a, b and c stay whole, so that BPE does the work.
ABC = r"[abc]+|[^abc]"


@pytest.fixture(autouse=True)
def no_tiktoken_cache(monkeypatch):
    # tiktoken's loader, which the converter calls, caches a file by its path.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")


@pytest.fixture(scope="module")
def llama3_style(tmp_path_factory) -> Path:
    """cl100k_base converted as Llama 3's tokenizer.json was made."""
    with pytest.MonkeyPatch.context() as m:
        m.setenv("TIKTOKEN_CACHE_DIR", "")
        return convert(CL100K_FILE, LLAMA3, tmp_path_factory.mktemp("llama3") / "tokenizer.json")


def convert(ranks: Path, pattern: str, out: Path) -> Path:
    converter(vocab_file=str(ranks), pattern=pattern).converted().save(str(out))
    return out


def write_ranks(tokens: list[bytes], path: Path) -> Path:
    path.write_text("".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate(tokens)))
    return path


def hf_ids(path: Path, texts: list[str]) -> list[list[int]]:
    t = tokenizers.Tokenizer.from_file(str(path))
    return [e.ids for e in t.encode_batch(texts, add_special_tokens=False)]


def generated(n: int) -> list[str]:
    """Runs of spaces, digits, letters and marks that make BPE merge long
    words: where a merge order of another rule would show."""
    import random

    rng = random.Random(7)
    parts = [
        "  ",
        "    ",
        "\t",
        "\n",
        "ab",
        "aa",
        "ing",
        "é",
        "ä",
        "йц",
        "的是",
        "12",
        "0",
        "--",
        "==",
        "..",
    ]
    return ["".join(rng.choice(parts) for _ in range(rng.randint(1, 12))) for _ in range(n)]


def test_cl100k_converted_as_llama3_is_gives_tokenizers_ids(llama3_style):
    path = llama3_style
    tok = load_any(path)
    texts = load_sample_texts() + generated(3000)
    ids = tok.encode_ordinary_batch(texts)
    assert ids == hf_ids(path, texts)
    assert ids == load_any(CL100K_FILE, pattern=LLAMA3).encode_ordinary_batch(texts)
    assert sum(map(len, ids)) > 100_000


def test_a_small_conversion_gives_tokenizers_ids(tmp_path):
    # Four spaces ranked before three, as in cl100k: one split of the four
    # joins the three, which a later merge makes.
    tokens = [bytes([b]) for b in range(256)] + [b"  ", b"    ", b"   ", b"ab", b"abc"]
    ranks = write_ranks(tokens, tmp_path / "small.tiktoken")
    gpt2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    path = convert(ranks, gpt2, tmp_path / "tokenizer.json")
    texts = ["abc     x", "   ", "abcabc  ab", "       c"]
    assert load_any(path).encode_ordinary_batch(texts) == hf_ids(path, texts)
    assert load_any(path).encode_ordinary("abc     x") == [260, 257, 32, 120]


def test_the_dict_reader_reads_a_conversion_as_the_file_reader_does(llama3_style):
    path = llama3_style
    texts = generated(500)
    from_dict = hf.from_dict(json.loads(path.read_text(encoding="utf-8")), str(path))
    assert from_dict.encode_ordinary_batch(texts) == load_any(path).encode_ordinary_batch(texts)
    assert list(from_dict.merges) == list(load_any(CL100K_FILE, pattern=LLAMA3).merges)


def vocabulary(corpus: list[str], n_merges: int) -> list[bytes]:
    """The tokens of the textbook's BPE over the words of `corpus`, in rank
    order, each once."""
    counts: dict[bytes, int] = {}
    for word in corpus:
        counts[word.encode()] = counts.get(word.encode(), 0) + 1
    merges = textbook.train_bytes(counts, n_merges)
    tokens = [bytes([b]) for b in range(256)]
    for left, right in merges:
        if left + right not in tokens:
            tokens.append(left + right)
    return tokens


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    corpus=st.lists(st.text("abc", min_size=2, max_size=80), min_size=2, max_size=20),
    n_merges=st.integers(20, 150),
    words=st.lists(st.text("abc", min_size=1, max_size=40), min_size=1, max_size=40),
    case=st.integers(0, 10**9),
)
def test_conversions_of_trained_vocabularies_give_tokenizers_ids(
    tmp_path, corpus, n_merges, words, case
):
    """Ties between two splits of one token at once are where the converter's
    order (the parts' ranks) and tiktoken's (leftmost) could part. About
    two in five of these vocabularies have a token of several splits, one
    of whose parts ranks after it."""
    ranks = write_ranks(vocabulary(corpus, n_merges), tmp_path / f"{case}.tiktoken")
    path = convert(ranks, ABC, tmp_path / f"{case}.json")
    try:
        tok = load_any(path)
    except TokenmillError as e:
        assert "not two lower-ranked tokens merged" in str(e)
        with pytest.raises(TokenmillError, match="not two lower-ranked"):
            load_any(ranks, pattern=ABC)
        return
    texts = words + [" ".join(words)]
    assert tok.encode_ordinary_batch(texts) == hf_ids(path, texts)


def test_a_conversion_without_ignore_merges_is_refused_naming_the_file_to_give(
    tmp_path, llama3_style
):
    path = tmp_path / "tokenizer.json"
    d = json.loads(llama3_style.read_text(encoding="utf-8"))
    d["model"]["ignore_merges"] = False
    path.write_text(json.dumps(d), encoding="utf-8")
    with pytest.raises(TokenmillError, match="give tokenmill that .tiktoken file"):
        load_any(path)


def test_a_conversion_missing_one_split_is_refused(tmp_path, llama3_style):
    path = tmp_path / "tokenizer.json"
    d = json.loads(llama3_style.read_text(encoding="utf-8"))
    # A token of two splits, its second split dropped: no longer what a
    # conversion writes, and Hugging Face's merging by rank would differ.
    merges = d["model"]["merges"]
    at = next(k for k in range(1, len(merges)) if "".join(merges[k]) == "".join(merges[k - 1]))
    del merges[at]
    path.write_text(json.dumps(d), encoding="utf-8")
    with pytest.raises(TokenmillError, match="unsupported Hugging Face tokenizer.json"):
        load_any(path)
