"""Arguments of the wrong kind are refused in one line, never read as something
else: before these checks, a None in a batch was encoded as an empty document,
bytes as text, a string given to train as its characters, a float count
truncated, eos="no" added the token, and an option the mode ignores trained
another tokenizer than the one asked for."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from realtext import GPT2_FILE

import tokenmill
from tokenmill import OptionError, Tokenizer, TokenmillError
from tokenmill.formats import export

TEXTS = ["hello world", "hello there"] * 10


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.train(TEXTS, vocab_size=270)


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda t: t.encode_batch(["a", None]), "encode_batch: texts[1] is NoneType"),
        (lambda t: t.encode_batch([b"a"], disallowed_special=()), "texts[0] is bytes"),
        (lambda t: t.encode_ordinary_batch(["a", "b", None]), "texts[2] is NoneType"),
        (lambda t: t.encode_ordinary_batch(iter(["a", 5])), "texts[1] is int"),
        (lambda t: t.encode("a", eos="no"), "eos='no': want True or False"),
        (lambda t: t.encode_batch(["a"], eos="no"), "eos='no'"),
        (lambda t: t.encode_arrow(pa.array(["a"]), eos=None), "eos=None"),
        (lambda t: t.encode("a", eos=1), "eos=1: want True or False"),
        (lambda t: t.encode_batch(["a"], eos=0.0), "eos=0.0: want True or False"),
        (lambda t: t.encode_arrow(["a"]), "not list: use encode_batch"),
        (lambda t: t.encode(None), "encode: text= is NoneType, not str"),
        (lambda t: t.encode(b"hi"), "encode: text= is bytes, not str"),
        (lambda t: t.encode_ordinary(None), "encode_ordinary: text= is NoneType"),
        (lambda t: t.encode("x", allowed_special=None), "allowed_special=None: want a set"),
        (lambda t: t.encode("x", disallowed_special=None), "disallowed_special=None: want"),
        (lambda t: t.encode_batch(["a"], parallel=None), "parallel=None: want True or False"),
        (lambda t: t.decode(None), "decode: ids= is NoneType, not a sequence of ids"),
        (lambda t: t.decode({104: 1}), "decode: ids= is dict, not a sequence of ids"),
        (lambda t: tokenmill.load(None), "load: path= is NoneType, not a path or URL"),
        (lambda t: t.save(None), "save: path= is NoneType, not a path or URL"),
        (lambda t: Tokenizer.load(5), "Tokenizer.load: path= is int, not a path or URL"),
        (lambda t: t.encode_batch(None), "encode_batch: texts= is NoneType, not a list of texts"),
        (lambda t: t.encode_batch(5), "encode_batch: texts= is int, not a list of texts"),
        (lambda t: t.encode_ordinary_batch(None), "encode_ordinary_batch: texts= is NoneType"),
        (
            lambda t: t.encode_ordinary_batch("abc"),
            "not one text (texts='abc'): use encode_ordinary",
        ),
        (lambda t: Tokenizer.train(None, num_merges=1), "train: texts= is NoneType"),
        (
            lambda t: Tokenizer.train_from_word_counts(None, [1], num_merges=1),
            "train_from_word_counts: words= is NoneType, not a list of words",
        ),
        (
            lambda t: Tokenizer.train_from_word_counts(["a"], None, num_merges=1),
            "train_from_word_counts: counts= is NoneType, not a list of counts",
        ),
    ],
)
def test_encoding_refuses_what_is_not_text(tok, call, needle):
    with pytest.raises(TypeError, match=re.escape(needle)):
        call(tok)


def test_decode_names_the_id_that_is_no_integer(tok):
    with pytest.raises(TokenmillError, match=r"ids\[1\]=1.0 is not an integer"):
        tok.decode([104, 1.0])


@pytest.mark.parametrize("ids, ndim", [(np.array([[104, 105]]), 2), (np.array(104), 0)])
def test_decode_names_an_array_of_other_than_one_dimension(tok, ids, ndim):
    """A 2-D array met NumPy's "truth value ... is ambiguous", a 0-D one
    "iteration over a 0-d array"."""
    with pytest.raises(TokenmillError, match=f"decode: ids= is a {ndim}-D array; give one"):
        tok.decode(ids)
    assert tok.decode(np.array([104, 105])) == tok.decode([104, 105])


def test_a_null_document_is_refused_by_encode_arrow(tok):
    for docs in (pa.array(["a", None, "b"]), pa.chunked_array([["a"], [None, "b"]])):
        with pytest.raises(TokenmillError, match="encode_arrow: document 1 is null"):
            tok.encode_arrow(docs)


def strings(*docs: bytes) -> pa.Array:
    """A large_string array of `docs` as they are, UTF-8 or not."""
    offsets = np.cumsum([0, *map(len, docs)], dtype=np.int64)
    return pa.Array.from_buffers(
        pa.large_string(), len(docs), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(docs))]
    )


@pytest.mark.parametrize(
    "docs, bad",
    [
        ((b"ok", b"a\xffb", b"c"), 1),
        ((b"ok", b"fine", b"x\xc3"), 2),
        (("é".encode()[:1], "é".encode()[1:]), 0),  # a character cut between two documents
    ],
)
@pytest.mark.parametrize("normalization", ["", "NFC"])
def test_encode_arrow_names_the_document_that_is_not_utf8(tok, docs, bad, normalization):
    """The message was the core's "invalid UTF-8: ... from index 1", an index
    into the batch's bytes (with a normalizer: pyarrow's ArrowInvalid)."""
    import dataclasses

    enc = dataclasses.replace(tok, normalization=normalization)
    with pytest.raises(TokenmillError, match=f"^encode_arrow: document {bad} is not valid UTF-8"):
        enc.encode_arrow(strings(*docs))
    with pytest.raises(TokenmillError, match=f"^encode_arrow: document {bad} is not valid UTF-8"):
        enc.encode_arrow(strings(b"before", *docs)[1:])


def test_a_dictionary_array_of_strings_is_encoded_as_its_strings(tok):
    docs = ["hello", "world", "hello"]
    ids, n_tokens = tok.encode_arrow(pa.array(docs).dictionary_encode())
    assert ids.to_pylist() == [tok.encode(d, eos=True) for d in docs]
    assert n_tokens.to_pylist() == [len(tok.encode(d, eos=True)) for d in docs]


def test_true_and_numpy_flags_are_flags(tok):
    assert tok.encode("hello", eos=np.bool_(True)) == tok.encode("hello") + [tok.eos_id]
    assert tok.encode_batch(["hello"], eos=False) == [tok.encode("hello")]


@pytest.mark.parametrize(
    "kwargs, error, needle",
    [
        ({"texts": ["x", None] * 5}, TypeError, "train: texts[1] is NoneType, not str"),
        ({"texts": ["x", b"y"]}, TypeError, "train: texts[1] is bytes"),
        ({"texts": "one string"}, TypeError, "train takes a list of texts, not one text"),
        ({"texts": TEXTS, "pattern": "gpt4"}, TokenmillError, "GPT-4's is cl100k"),
        ({"texts": TEXTS, "lowercase": True}, TokenmillError, "lowercase=True is char mode's"),
        (
            {"texts": TEXTS, "mode": "char", "pattern": r"\w+"},
            TokenmillError,
            "char mode splits at whitespace and takes no pattern",
        ),
    ],
)
def test_train_refuses_what_it_would_misread(kwargs, error, needle):
    with pytest.raises(error) as e:
        Tokenizer.train(num_merges=3, **kwargs)
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "kwargs, error, needle",
    [
        ({"texts": "one string"}, TypeError, "train takes a list of texts, not one text"),
        ({"texts": ["x", None] * 5}, TypeError, "train: texts[1] is NoneType, not str"),
        ({"texts": ["x", b"y"]}, TypeError, "train: texts[1] is bytes, not str"),
        ({"texts": ["x", 5]}, TypeError, "train: texts[1] is int, not str"),
        ({"texts": TEXTS, "superword_at": None}, TokenmillError, "superword_at=None: want"),
        ({"texts": TEXTS, "superword_at": "300"}, TokenmillError, "superword_at='300': want"),
    ],
)
def test_superword_train_refuses_what_tokenizer_train_refuses(kwargs, error, needle):
    """A string trained on its characters, None was skipped, bytes taken as
    text, and superword_at=None failed comparing None with an int."""
    from tokenmill.tokenizer import superword

    with pytest.raises(error) as e:
        superword.train(**{"superword_at": 260, "vocab_size": 270, **kwargs})
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"superword_at": 1000.0}, "superword_at=1000.0: want a whole number from 257 to "),
        ({"superword_at": True}, "superword_at=True: want a whole number from 257 to "),
        ({"superword_at": 2**33}, "from 257 to 4294967295"),
        ({"superword_at": 256}, "out of range: 257 (256 bytes + 1 special token: stage 2"),
        ({"mode": "char"}, "superword_at=260: superword tokens are for byte mode, not char"),
        ({"lowercase": True}, "lowercase=True is char mode's: superword tokens are byte"),
        ({"max_words": -1}, "max_words=-1: want a whole number from 1, or 0 or None for no"),
    ],
)
def test_superword_train_says_the_range_it_takes(kwargs, needle):
    """The range said 0 to 2**32-1 where only 257 on is taken, and "1 special
    tokens"; mode= and lowercase= were TypeErrors."""
    from tokenmill.tokenizer import superword

    with pytest.raises(TokenmillError) as e:
        superword.train(TEXTS, **{"superword_at": 260, "vocab_size": 270, **kwargs})
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_superword_train_takes_byte_modes_options_and_max_words_0():
    """max_words=0 was refused, though --superword-max-words 0 is no limit;
    mode="byte" and lowercase=False, Tokenizer.train's, were TypeErrors."""
    from tokenmill.tokenizer import superword

    texts = ["one of the best of all of the best of them"] * 8
    unlimited = superword.train(texts, vocab_size=300, superword_at=270, max_words=None)
    assert max(len(t.split()) for t in unlimited.tokens(texts[0])) > 4
    given = {"mode": "byte", "lowercase": False, "max_words": 0}
    assert superword.train(texts, vocab_size=300, superword_at=270, **given) == unlimited


@pytest.mark.parametrize("lowercase", [1, None, "yes"])
def test_lowercase_is_a_flag(lowercase):
    """lowercase=1 met the native core's "'int' object is not an instance of 'bool'"."""
    with pytest.raises(TypeError, match=f"lowercase={lowercase!r}: want True or False"):
        Tokenizer.train(TEXTS, mode="char", lowercase=lowercase, num_merges=3)
    with pytest.raises(TypeError, match=f"lowercase={lowercase!r}: want True or False"):
        Tokenizer.train_from_word_counts(
            ["Hi"], [3], mode="char", lowercase=lowercase, num_merges=1
        )


def test_a_numpy_true_lowercases_and_saves():
    tok = Tokenizer.train(["Hi hi"] * 3, mode="char", lowercase=np.bool_(True), num_merges=1)
    assert tok.lowercase is True and '"lowercase":true' in tok.to_json()


def test_vocab_size_and_num_merges_together_are_refused():
    """Both given, num_merges won and vocab_size was dropped without a word."""
    with pytest.raises(TokenmillError, match="give vocab_size= or num_merges=, not both"):
        Tokenizer.train(TEXTS, vocab_size=300, num_merges=3)


def test_the_options_each_mode_takes_still_train():
    char = Tokenizer.train(["Hi hi"] * 3, mode="char", lowercase=True, num_merges=1)
    assert char.lowercase and char.tokens("HI") == ["hi", "</w>"]
    assert Tokenizer.train(["ab ab"], mode="char", pattern=None, num_merges=1).mode == "char"
    literal = Tokenizer.train(["ab ab"], pattern=r"[a-z]+|[\s\S]", num_merges=1)
    assert literal.merge_pairs() == [(b"a", b"b")]


@pytest.mark.parametrize(
    "words, counts, needle",
    [
        (["a", "b"], [1], "counts= has 1 entries for 2 words"),
        (["a", "b"], [1, -2], "counts[1]=-2 is not a count"),
        (["a", "b"], [1, 2.5], "counts[1]=2.5 is not a count"),
        (["a", "b"], [1, True], "counts[1]=True is not a count"),
        (["a", "b"], [1, 2**64], "is not a count"),
        (
            ["a", "b"],
            [1, 2**63],
            "counts[1]=9223372036854775808 is not a count (a whole number from 0 to 2**63-1)",
        ),
        (["a", None], [1, 2], "train_from_word_counts: words[1] is NoneType"),
        ("ab", [1, 2], "takes a list of words, not one text (words='ab')"),
    ],
)
def test_train_from_word_counts_refuses_what_it_would_misread(words, counts, needle):
    with pytest.raises((TokenmillError, TypeError)) as e:
        Tokenizer.train_from_word_counts(words, counts, num_merges=1)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_numpy_counts_are_counts():
    tok = Tokenizer.train_from_word_counts(["ab", "b"], np.array([3, 2]), num_merges=1)
    assert tok.merge_pairs() == [(b"a", b"b")]


def test_numpy_integers_are_sizes_and_counts():
    """NumPy's integers were refused as no whole number."""
    tok = Tokenizer.train(TEXTS, vocab_size=np.int64(260))
    assert tok == Tokenizer.train(TEXTS, vocab_size=260)
    assert Tokenizer.train(TEXTS, num_merges=np.uint32(3)) == Tokenizer.train(TEXTS, num_merges=3)
    from tokenmill.tokenizer import superword

    at = superword.train(TEXTS, vocab_size=np.int64(270), superword_at=np.int32(262),
                         max_words=np.int8(2))  # fmt: skip
    assert at == superword.train(TEXTS, vocab_size=270, superword_at=262, max_words=2)
    for value in (True, np.bool_(True), 260.0, "260"):
        with pytest.raises(TokenmillError, match="want a whole number"):
            Tokenizer.train(TEXTS, vocab_size=value)


@pytest.mark.parametrize(
    "call",
    [tokenmill.load, Tokenizer.load, lambda path: Tokenizer.train(TEXTS, num_merges=1).save(path)],
)
def test_an_empty_path_is_refused_as_empty(call):
    """ "" was the current folder: "load: .: cannot read tokenizer (Is a directory)"."""
    with pytest.raises(TokenmillError, match=r"^(load|Tokenizer.load|save): path= is empty"):
        call("")


@pytest.mark.parametrize("pattern", [5, b"\\S+"])
def test_load_names_a_pattern_that_is_no_str(pattern):
    """Read as no pattern: "pattern 5: byte mode needs a pattern"."""
    with pytest.raises(TokenmillError, match=r"gpt2.tiktoken: pattern=.*: want a str, a preset"):
        tokenmill.load(GPT2_FILE, pattern=pattern)


def test_load_names_an_empty_pattern_as_empty():
    """Not "want a str", which it is; the caller's mistake, as the CLI's --pattern ''."""
    with pytest.raises(OptionError, match=re.escape("gpt2.tiktoken: pattern='' is empty: give a")):
        tokenmill.load(GPT2_FILE, pattern="")


def test_load_refuses_a_bare_word_pattern_as_train_does():
    """load said the pattern "leaves text ... unmatched", train that it is no preset."""
    needle = "pattern='gpt4' is not a preset (gpt2, cl100k, o200k; GPT-4's is cl100k)"
    with pytest.raises(TokenmillError, match=re.escape(f"gpt2.tiktoken: {needle}")):
        tokenmill.load(GPT2_FILE, pattern="gpt4")
    with pytest.raises(TokenmillError, match=re.escape(needle)):
        Tokenizer.train(TEXTS, num_merges=1, pattern="gpt4")


def test_load_names_special_tokens_given_as_a_list():
    with pytest.raises(TokenmillError, match=r"gpt2.tiktoken: special_tokens= wants a dict"):
        tokenmill.load(GPT2_FILE, special_tokens=["<a>"])


def test_save_and_load_take_a_remote_upath():
    # A remote UPath is no os.PathLike: the check of path= refused it, and with
    # it every run writing its tokenizer to an object store.
    from upath import UPath

    tok = Tokenizer.train(["hello world"] * 5, vocab_size=270)
    path = UPath("memory://bucket/tok.json")
    tok.save(path)
    assert Tokenizer.load(path) == tok and tokenmill.load(path) == tok


def _file_with_special(tmp_path, name: str) -> str:
    d = Tokenizer.train(["ab"], num_merges=1).to_dict()
    d["special_tokens"][name] = d["vocab_size"]
    d["vocab_size"] += 1
    path = tmp_path / "tok.json"
    path.write_text(json.dumps(d))  # JSON's \ud800 escape: a lone surrogate read back
    return str(path)


def _hf_file_with_special(tmp_path, name: str) -> str:
    path = tmp_path / "tokenizer.json"
    export(Tokenizer.train(["ab"], num_merges=1), path, "hf")
    d = json.loads(path.read_text())
    d["added_tokens"][0]["content"] = name
    path.write_text(json.dumps(d))
    return str(path)


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda _: tokenmill.load(GPT2_FILE, special_tokens={"\ud800": 50256}), "gpt2.tiktoken: "),
        (lambda p: tokenmill.load(_hf_file_with_special(p, "\udfff")), "tokenizer.json: added_"),
        (lambda _: Tokenizer.train(["ab"], num_merges=1, special_tokens=["\udc00"]), ""),
        (lambda _: Tokenizer.train(["ab"], num_merges=1, special_tokens={"<\udc00>": 300}), ""),
        (
            lambda p: Tokenizer.from_dict(
                json.loads(Path(_file_with_special(p, "\ud800")).read_text())
            ),
            "tokenizer: ",
        ),
        (lambda p: tokenmill.load(_file_with_special(p, "\ud800")), "tok.json: "),
    ],
)
def test_a_special_token_that_is_not_utf8_is_refused_where_it_enters(tmp_path, call, needle):
    """Taken, it failed every later decode, save and sha256 with a traceback."""
    with pytest.raises(TokenmillError, match=f"{needle}(special_tokens|tokens): .* is not UTF-8"):
        call(tmp_path)


def _file_with_pattern(tmp_path, pattern: str) -> str:
    d = json.loads(Tokenizer.train(["ab"], num_merges=1).to_json())
    d["pattern"] = d["pattern_regex"] = pattern
    path = tmp_path / "tok.json"
    path.write_text(json.dumps(d))  # JSON's \ud800 escape: a lone surrogate read back
    return str(path)


SURROGATE_PATTERN = "a|\ud800|[\\s\\S]"


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda _: Tokenizer.train(["ab"], num_merges=1, pattern=SURROGATE_PATTERN), ""),
        (lambda _: tokenmill.load(GPT2_FILE, pattern=SURROGATE_PATTERN), "gpt2.tiktoken: "),
        (lambda p: tokenmill.load(_file_with_pattern(p, SURROGATE_PATTERN)), "tok.json: .*"),
    ],
)
def test_a_pattern_that_is_not_utf8_is_refused_where_it_enters(tmp_path, call, needle):
    """Taken, the native core's UnicodeEncodeError was a traceback."""
    with pytest.raises(TokenmillError, match=f"{needle}pattern: .* is not UTF-8"):
        call(tmp_path)
