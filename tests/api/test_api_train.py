"""Training with any pre-tokenization regex, or none, and with special tokens at
chosen ids. Each checked against an oracle that is not tokenmill's code: the
textbook trainer (tests/helpers/textbook.py) on the words the `regex` module
splits out, minbpe's BasicTokenizer rule for no split, and tiktoken built with
the same pat_str and the learned ranks for the ids."""

from __future__ import annotations

import pytest
import regex
import textbook as tb

import tokenmill
from tokenmill import Tokenizer, TokenmillError
from tokenmill.formats import export
from tokenmill.tokenizer import default_special_tokens

tiktoken = pytest.importorskip("tiktoken")

TEXTS = [
    "The cat's hat sat on the mat; the cats' hats sat on 12 mats.",
    "  Naïve café owners sell 3.14159 pies,   don't they?\nYes!!",
    "print('hello')  # the cat's code\n\tif x >= 10: return x",
] * 4
# Words, numbers, runs of other symbols, spaces: fancy-regex syntax, a
# look-ahead included (as tiktoken's patterns have).
CUSTOM = r"""'s|\s?\p{L}+|\s?\p{N}+|\s?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def word_counts(texts: list[str], pattern: str | None) -> dict[bytes, int]:
    """The words of `texts` (`pattern`'s matches, or each text whole) and
    their counts, in first-occurrence order."""
    counts: dict[bytes, int] = {}
    for text in texts:
        for piece in regex.findall(pattern, text) if pattern else [text]:
            counts[piece.encode()] = counts.get(piece.encode(), 0) + 1
    return counts


def as_tiktoken(tok: Tokenizer, pat_str: str):
    """tiktoken's Encoding of `tok`'s learned ranks (ids) and special tokens."""
    ranks = {v: i for i, v in enumerate(tok.token_values) if v is not None}
    for name in tok.special_tokens:
        del ranks[name.encode()]
    return tiktoken.Encoding(
        "t", pat_str=pat_str, mergeable_ranks=ranks, special_tokens=tok.special_map
    )


def test_a_custom_regex_trains_as_the_textbook_and_encodes_as_tiktoken(tmp_path):
    tok = Tokenizer.train(TEXTS, vocab_size=330, pattern=CUSTOM)
    assert tok.pattern == CUSTOM
    n = len(tok.merges)
    assert n == 330 - 257
    assert tok.merge_pairs() == tb.train_bytes(word_counts(TEXTS, CUSTOM), n)
    enc = as_tiktoken(tok, CUSTOM)
    probe = [*TEXTS, "the cats sat; 42 hats!", "  x  y\n\n", "don't 3.14"]
    assert [tok.encode(t) for t in probe] == [enc.encode(t) for t in probe]
    # It saves, loads and encodes the same, in every format.
    tok.save(tmp_path / "tok.json")
    export(tok, tmp_path / "hf.json", "hf")
    export(tok, tmp_path / "t.tiktoken", "tiktoken")
    for again in (
        Tokenizer.load(tmp_path / "tok.json"),
        tokenmill.load(tmp_path / "hf.json"),
        tokenmill.load(tmp_path / "t.tiktoken"),
    ):
        assert [again.encode(t) for t in probe] == [enc.encode(t) for t in probe]
    assert Tokenizer.load(tmp_path / "tok.json") == tok
    assert tokenmill.load(tmp_path / "t.tiktoken").pattern == CUSTOM


def test_a_preset_regex_written_out_is_the_preset():
    tiktoken_cl100k = tb.PATTERNS["cl100k"]
    assert Tokenizer.train(TEXTS, num_merges=5, pattern=tiktoken_cl100k).pattern == "cl100k"


def test_a_bad_regex_is_one_line_before_any_work():
    with pytest.raises(TokenmillError, match="invalid pre-tokenization pattern") as e:
        Tokenizer.train(TEXTS, num_merges=5, pattern="(unclosed")
    assert "\n" not in str(e.value)
    with pytest.raises(TokenmillError, match=r"pattern=5: want a preset"):
        Tokenizer.train(TEXTS, num_merges=5, pattern=5)


def minbpe_basic(text: str, num_merges: int) -> list[tuple[int, int]]:
    """minbpe's BasicTokenizer.train, as written there: the whole text's bytes,
    the most frequent pair (the first met on a tie), merged left to right."""
    ids = list(text.encode("utf-8"))
    merges = []
    for i in range(num_merges):
        stats: dict[tuple[int, int], int] = {}
        for pair in zip(ids, ids[1:], strict=False):
            stats[pair] = stats.get(pair, 0) + 1
        if not stats:
            break
        pair = max(stats, key=stats.get)
        new, out, k = 256 + i, [], 0
        while k < len(ids):
            if k < len(ids) - 1 and (ids[k], ids[k + 1]) == pair:
                out.append(new)
                k += 2
            else:
                out.append(ids[k])
                k += 1
        ids = out
        merges.append(pair)
    return merges


def test_no_split_trains_as_minbpe_basic_tokenizer():
    text = "\n".join(TEXTS)
    tok = Tokenizer.train([text], num_merges=60, pattern=None)
    assert tok.merges == minbpe_basic(text, 60)


def test_no_split_over_many_texts_is_the_textbook_on_whole_texts(tmp_path):
    tok = Tokenizer.train(TEXTS, num_merges=80, pattern=None)
    assert tok.merge_pairs() == tb.train_bytes(word_counts(TEXTS, None), 80)
    # Spaces do not stop a merge: tokens cross word boundaries.
    assert any(b" " in v and v.strip() != v for v in tok.token_values[256:] if v)
    enc = as_tiktoken(tok, tok.pattern)
    probe = [*TEXTS, "The cat's hat", ""]
    assert [tok.encode(t) for t in probe] == [enc.encode(t) for t in probe]
    tok.save(tmp_path / "tok.json")
    again = Tokenizer.load(tmp_path / "tok.json")
    assert again == tok and again.encode(TEXTS[1]) == tok.encode(TEXTS[1])


def test_special_tokens_at_chosen_ids(tmp_path):
    # cl100k's layout in small: the merges, an unused id, then the special tokens.
    # vocab_size counts the tokens: 256 bytes, 44 merges, 2 special tokens.
    tok = Tokenizer.train(
        TEXTS, vocab_size=302, special_tokens={"<|endoftext|>": 301, "<|fim_prefix|>": 302}
    )
    assert len(tok.merges) == 302 - 256 - 2
    assert tok.special_map == {"<|endoftext|>": 301, "<|fim_prefix|>": 302}
    assert tok.eos_id == 301 and tok.vocab_size == 303  # ids 0 to 302, 300 unused
    assert tok.token_values[300] is None
    with pytest.raises(TokenmillError, match="id 300 is no token"):
        tok.decode([300])
    text = "the cat<|endoftext|><|fim_prefix|>"
    ids = tok.encode(text, allowed_special="all")
    assert ids[-2:] == [301, 302] and tok.decode(ids) == text
    assert ids == as_tiktoken(tok, tb.PATTERNS["cl100k"]).encode(text, allowed_special="all")
    tok.save(tmp_path / "tok.json")
    assert Tokenizer.load(tmp_path / "tok.json") == tok
    export(tok, tmp_path / "t.tiktoken", "tiktoken")
    export(tok, tmp_path / "hf.json", "hf")
    for again in (tokenmill.load(tmp_path / "t.tiktoken"), tokenmill.load(tmp_path / "hf.json")):
        assert again.special_map == tok.special_map
        assert again.encode(text, allowed_special="all") == ids


def test_the_modes_own_tokens_take_the_first_ids_left_after_the_merges():
    tok = Tokenizer.train(TEXTS, num_merges=10, special_tokens={"<|pad|>": 266})
    assert tok.special_map == {"<|pad|>": 266, "<|endoftext|>": 267}
    chars = Tokenizer.train(TEXTS, mode="char", num_merges=3, special_tokens={"<|x|>": 500})
    base = len(chars.alphabet)
    assert chars.special_map == {"<unk>": base + 3, "<|endoftext|>": base + 4, "<|x|>": 500}


@pytest.mark.parametrize(
    "special_tokens, needle",
    [
        ({"<|endoftext|>": 260}, "has id 260, which a base token or merge has (ids 0 to 299)"),
        ({"<|endoftext|>": 10**6}, "has id 1000000, beyond the ids a vocabulary of 301"),
        ({"<|endoftext|>": -1}, "'<|endoftext|>' has id -1"),
        ({"<|endoftext|>": "300"}, "has id '300'"),
        ({"<|a|>": 300, "<|b|>": 300}, "'<|a|>' and '<|b|>' have the same id 300"),
        ({"": 300}, "'' is no special token's name"),
        # Named in a list: a duplicate took an id of its own, and the saved file
        # loaded as another tokenizer; an empty name matched all text.
        (["<|a|>", "<|a|>"], "'<|a|>' is listed twice"),
        ([""], "'' is no special token's name"),
        ([7], "7 is no special token's name"),
    ],
)
def test_special_tokens_given_to_train_are_checked(special_tokens, needle):
    with pytest.raises(TokenmillError) as e:
        Tokenizer.train(TEXTS, num_merges=44, special_tokens=special_tokens)
    message = str(e.value)
    assert message.startswith("special_tokens: ") and needle in message and "\n" not in message


def test_chosen_ids_beyond_what_a_short_training_numbers():
    # 1500 merges asked, far fewer pairs to merge: id 3000 is then out of proportion.
    with pytest.raises(TokenmillError, match="training stopped at .* merges .* has id 3000"):
        Tokenizer.train(["ab ab"], num_merges=1500, special_tokens={"<|endoftext|>": 3000})
    with pytest.raises(TokenmillError, match="not a string"):
        Tokenizer.train(TEXTS, num_merges=2, special_tokens="<|endoftext|>")


@pytest.mark.parametrize(
    "words, counts",
    [(["ab", "ab"], [2**62, 2**62]), (["abab"], [2**62])],
)
def test_counts_beyond_what_training_counts_are_refused_not_looped_on(words, counts):
    """A word table whose pairs occur more than 2^63-1 times, each count within
    bounds, made training loop for ever; then the message called a count wrong."""
    with pytest.raises(TokenmillError) as e:
        Tokenizer.train_from_word_counts(words, counts, num_merges=2)
    message = str(e.value)
    assert message.startswith("train_from_word_counts: each count is in range, but together")
    assert "more than the 9223372036854775807 (2**63-1)" in message and "wrong" not in message


def test_counts_just_under_what_training_counts_train():
    edge = Tokenizer.train_from_word_counts(["ab", "cd"], [2**62, 2**62 - 1], num_merges=2)
    assert edge.merge_pairs() == [(b"a", b"b"), (b"c", b"d")]


@pytest.mark.parametrize("mode", ["byte", "char"])
def test_special_tokens_take_the_ids_the_command_line_gives_them(cli, tmp_path, mode):
    """A list of special tokens: the mode's own first, right after the merges,
    then the list's, from the library as from `tokenmill train` (before, the
    library put `<|endoftext|>` after the list's: another id)."""
    data = tmp_path / "data.txt"
    data.write_text("\n".join(TEXTS))
    cli("count", data, tmp_path / "counts", "--mode", mode)
    cli("merge", tmp_path / "counts", tmp_path / "counts.parquet")
    specials = ["--special-token", "<|pad|>", "--special-token", "<|x|>"]
    cli("train", tmp_path / "counts.parquet", tmp_path / "tok.json", "--mode", mode,
        "--vocab-size", "330", *specials)  # fmt: skip
    ours = Tokenizer.load(tmp_path / "tok.json")
    lib = Tokenizer.train(TEXTS, mode=mode, vocab_size=330, special_tokens=["<|pad|>", "<|x|>"])
    assert lib.special_map == ours.special_map
    assert lib.special_tokens == [*default_special_tokens(mode), "<|pad|>", "<|x|>"]


@pytest.mark.parametrize("mode", ["byte", "char"])
def test_lone_surrogates_are_trained_on_as_encode_reads_them(mode):
    """A lone surrogate, which UTF-8 cannot hold, met pyarrow's UnicodeEncodeError
    naming no argument; encode reads it as U+FFFD, and so training does now."""
    texts = ["a\ud800b x\udfff", "\ud83d\udc4d ok"] * 3
    fixed = ["a\ufffdb x\ufffd", "\U0001f44d ok"] * 3
    options = {"mode": mode, "num_merges": 6}
    assert Tokenizer.train(texts, **options) == Tokenizer.train(fixed, **options)
    assert Tokenizer.train_from_word_counts(["a\ud800", "a\udc00", "b"], [3, 2, 1], **options) == (
        Tokenizer.train_from_word_counts(["a\ufffd", "b"], [5, 1], **options)
    )


def test_lone_surrogates_are_trained_on_by_superword_training_too():
    from tokenmill.tokenizer import superword

    texts = ["a\ud800b x\udfff y"] * 5
    fixed = ["a\ufffdb x\ufffd y"] * 5
    options = {"vocab_size": 270, "superword_at": 262}
    assert superword.train(texts, **options) == superword.train(fixed, **options)
