"""A tokenizer.json whose Split pattern leaves text unmatched (behavior
"isolated": each run between two matches is a piece too) splits as tokenizers
does, however long the run: the regex engine is never asked to match a run
itself, which it would backtrack over and give up on past a million or so
characters."""

from __future__ import annotations

import pyarrow as pa
import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Regex, pre_tokenizers

from tokenmill import _native
from tokenmill.formats import load_any, regex
from tokenmill.tokenizer.core import word_table

# Split patterns (Oniguruma) that leave text unmatched, some of them empty
# matches where a character follows (tokenizers keeps the text between).
GAPPY = [
    r"\p{N}{1,3}",
    r" ?\p{L}+",
    r" ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)",
    r"(?<=a)b|c(?!d)",
    r"x|(?=b)",
]


def split(pattern: str) -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Split(Regex(pattern), behavior="isolated")


def hf_pieces(pattern: str, text: str) -> list[str]:
    return [piece for piece, _ in split(pattern).pre_tokenize_str(text)]


def wrapped(pattern: str) -> str:
    """The covering regex, spelled (`{1,}`, not `+`) so that the core runs it
    as the one regex it is: how every Split pattern ran before."""
    covering = regex.covering(regex.onig_to_fancy(pattern))
    assert covering.endswith(")+")
    return covering[:-1] + "{1,}"


@pytest.fixture(scope="module")
def digits_json(tmp_path_factory) -> str:
    """A byte-level BPE tokenizer.json that tokenizers trained and splits by
    Split(\\p{N}{1,3}, isolated) + ByteLevel: letters' runs are gaps."""
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.pre_tokenizer = pre_tokenizers.Sequence([split(r"[\s\S]+"), byte_level])
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(["hello world 12 aaaa ab"] * 10, trainer)
    tok.pre_tokenizer = pre_tokenizers.Sequence([split(r"\p{N}{1,3}"), byte_level])
    path = tmp_path_factory.mktemp("gaps") / "tokenizer.json"
    tok.save(str(path))
    return str(path)


def test_a_run_of_a_million_unmatched_characters_encodes_as_tokenizers_does(digits_json):
    text = "12" + "a" * 1_000_001 + " 345 " + "hello world " * 1000 + "6"
    want = tokenizers.Tokenizer.from_file(digits_json).encode(text).ids
    tok = load_any(digits_json)
    assert tok.encode(text) == want
    ids, _ = tok.encode_arrow(pa.array([text, "a" * 1_000_001]), eos=False)
    assert ids[0].as_py() == want
    # count (training, --extend) cuts the same pieces
    table = word_table([pa.array([text], pa.large_string())], "byte", tok.pattern, False)
    gap = 2 + 1_000_001 + 1
    pieces = ["12", text[2:gap], "345", text[gap + 3 : -1], "6"]
    assert table["word"].to_pylist() == pieces


@pytest.mark.parametrize("pattern", [r"(?<=a)c|\p{N}", r"c(?!d)|\p{N}"])
def test_a_long_run_splits_as_tokenizers_does_where_the_pattern_looks_around(pattern):
    # fancy-regex runs such a pattern on its own backtracking machine, whose
    # search passes a long run only position by position
    text = "12" + "a" * 1_200_000 + "b 3"
    covering = regex.covering(regex.onig_to_fancy(pattern))
    assert _native.pretokenize(text, covering) == hf_pieces(pattern, text)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(GAPPY),
    st.text(alphabet="abcdx1234 !?,\n\tΑé日", max_size=24),
)
def test_pieces_are_tokenizers_split_and_as_the_covering_regex_cut_them(pattern, text):
    covering = regex.covering(regex.onig_to_fancy(pattern))
    pieces = _native.pretokenize(text, covering)
    assert pieces == hf_pieces(pattern, text)
    try:
        before = _native.pretokenize(text, wrapped(pattern))
    except _native.NativeError:
        return  # an empty match left a character unmatched: it failed
    assert pieces == before


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="helowrd 1234a\n", max_size=40))
def test_ids_are_tokenizers(digits_json, text):
    hf = tokenizers.Tokenizer.from_file(digits_json)
    assert load_any(digits_json).encode(text) == hf.encode(text).ids
