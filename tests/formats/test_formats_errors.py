"""Tokenizer files tokenmill cannot read exactly are refused with one line that
names the file and what is wrong, never approximated."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path

import pytest

from tokenmill import _native
from tokenmill.errors import TokenmillError
from tokenmill.formats import export, hf, load_any
from tokenmill.tokenizer import Tokenizer


def byte_level_json(**changes) -> dict:
    """A small valid byte-level tokenizer.json (tokenmill's export), changed."""
    tok = Tokenizer.train(["hello hello world, hello there"], pattern="gpt2", vocab_size=270)
    d = hf.to_dict(tok)
    for key, value in changes.items():
        if key.startswith("model_"):
            d["model"][key.removeprefix("model_")] = value
        else:
            d[key] = value
    return d


def write(tmp_path: Path, d, name: str = "tokenizer.json") -> Path:
    path = tmp_path / name
    path.write_text(d if isinstance(d, str) else json.dumps(d), encoding="utf-8")
    return path


def refused(path: Path, *needles: str, **options) -> str:
    with pytest.raises(TokenmillError) as e:
        load_any(path, **options)
    message = str(e.value)
    assert "\n" not in message
    assert str(path) in message, message
    for needle in needles:
        assert needle in message, message
    return message


def test_the_valid_file_loads(tmp_path):
    assert load_any(write(tmp_path, byte_level_json())).vocab_size == 270


@pytest.mark.parametrize(
    "text, needle",
    [
        ('{"model": {"type": "BPE", "vocab": {"a": 0}', "not valid JSON"),
        ("[1, 2]", "not a tokenizer file"),
        ('{"hello": 1}', "not a tokenizer file"),
        ("just some text\n", "not a tokenizer file"),
        ('{"model": {"type": "BPE", "vocab": [1, 2], "merges": []}}', "malformed"),
        ('{"model": {"type": "BPE"}, "pre_tokenizer": {"type": "ByteLevel"}}', "malformed"),
        # What is wrong, not Python's AttributeError or unpacking error.
        ('{"model": null}', "malformed tokenizer file (no model object)"),
    ],
)
def test_malformed_tokenizer_files(tmp_path, text, needle):
    message = refused(write(tmp_path, text), needle)
    assert "Error(" not in message


def test_a_merge_of_three_tokens_is_named(tmp_path):
    d = byte_level_json()
    d["model"]["merges"][0] = "a b c"
    message = refused(write(tmp_path, d), "merge 0 'a b c' is not two tokens")
    assert "Error(" not in message


def test_merge_of_unknown_token(tmp_path):
    d = byte_level_json()
    d["model"]["merges"].append("Ġhello nosuchtoken")
    refused(write(tmp_path, d), "malformed", "nosuchtoken")


def test_merge_yielding_no_token(tmp_path):
    d = byte_level_json()
    d["model"]["merges"].append("a b")
    refused(write(tmp_path, d), "merge", "does not join")


def test_vocab_missing_a_byte(tmp_path):
    d = byte_level_json()
    del d["model"]["vocab"]["Ā"]  # byte 0x00
    d["model"]["merges"] = []
    refused(write(tmp_path, d), "byte 0x00")


@pytest.mark.parametrize(
    "model, needle",
    [
        ({"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0}}, "WordPiece"),
        ({"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0]]}, "Unigram"),
        ({"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}, "WordLevel"),
    ],
)
def test_unsupported_models(tmp_path, model, needle):
    d = byte_level_json()
    d["model"] = model
    refused(write(tmp_path, d), "unsupported", f"model type {needle}")


@pytest.mark.parametrize(
    "normalizer, needle",
    [
        ({"type": "NFKC"}, "NFKC"),
        ({"type": "Lowercase"}, "Lowercase"),
        ({"type": "BertNormalizer", "lowercase": True}, "BertNormalizer"),
        ({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Strip"}]}, "Strip"),
        ({"type": "Prepend", "prepend": "▁"}, "Prepend"),
    ],
)
def test_unsupported_normalizers(tmp_path, normalizer, needle):
    refused(write(tmp_path, byte_level_json(normalizer=normalizer)), "normalizer", needle)


BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}


@pytest.mark.parametrize(
    "pre_tokenizer, needle",
    [
        ({"type": "Whitespace"}, "Whitespace"),
        ({"type": "Metaspace", "replacement": "▁"}, "Metaspace"),
        ({"type": "BertPreTokenizer"}, "BertPreTokenizer"),
        (None, "no pre-tokenizer"),
        ({**BYTE_LEVEL, "add_prefix_space": True, "use_regex": True}, "add_prefix_space"),
        (BYTE_LEVEL, "without a regex"),
        (
            {
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed"},
                    BYTE_LEVEL,
                ],
            },
            "Removed",
        ),
        (
            {
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Isolated"},
                    {**BYTE_LEVEL, "use_regex": True},
                ],
            },
            "Split + ByteLevel",
        ),
        (
            {
                "type": "Sequence",
                "pretokenizers": [{"type": "Digits", "individual_digits": True}, BYTE_LEVEL],
            },
            "Digits",
        ),
        (
            {
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": "a*"}, "behavior": "Isolated"},
                    BYTE_LEVEL,
                ],
            },
            "empty string",
        ),
    ],
)
def test_unsupported_pre_tokenizers(tmp_path, pre_tokenizer, needle):
    refused(write(tmp_path, byte_level_json(pre_tokenizer=pre_tokenizer)), needle)


@pytest.mark.parametrize(
    "pattern, needle",
    [
        (r"\w+|\s+", r"\w"),
        (r"\b\S+|\s+", r"\b"),
        (r"(a)\1|\s+", r"\1"),
        (r"(?m)^a|\s+", "(?m)"),
        (r"(?x) a |\s+", "(?x)"),
        (r"[[:alpha:]]+|\s+", "POSIX"),
    ],
)
def test_unsupported_split_patterns(tmp_path, pattern, needle):
    d = byte_level_json()
    d["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": pattern}
    refused(write(tmp_path, d), "pattern", needle)


@pytest.mark.parametrize(
    "key, value, needle",
    [
        ("dropout", 0.1, "dropout"),
        ("byte_fallback", True, "byte_fallback"),
        ("continuing_subword_prefix", "##", "continuing_subword_prefix"),
        ("end_of_word_suffix", "</w>", "end_of_word_suffix"),
    ],
)
def test_unsupported_bpe_options(tmp_path, key, value, needle):
    refused(write(tmp_path, byte_level_json(**{f"model_{key}": value})), needle)


def test_added_token_that_is_not_special(tmp_path):
    d = byte_level_json()
    d["added_tokens"].append({"id": 300, "content": "<tool>", "special": False})
    refused(write(tmp_path, d), "'<tool>'", "not special")


def test_char_level_tokenizer_json_is_refused(tmp_path):
    tok = Tokenizer.train(["a b c"], mode="char", vocab_size=10)
    export(tok, tmp_path / "char.json", "hf")
    refused(tmp_path / "char.json", "unsupported")


def test_vocabulary_outside_the_byte_level_alphabet(tmp_path):
    d = byte_level_json()
    d["model"]["vocab"]["héllo wörld"] = 400
    refused(write(tmp_path, d), "byte-level alphabet")


# ---- .tiktoken ----------------------------------------------------------


def ranks_file(tmp_path: Path, lines: list[bytes], name: str = "v.tiktoken") -> Path:
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def byte_ranks() -> list[bytes]:
    return [base64.b64encode(bytes([b])) + b" " + str(b).encode() for b in range(256)]


def test_tiktoken_file_loads(tmp_path):
    lines = [*byte_ranks(), base64.b64encode(b"ab") + b" 256"]
    tok = load_any(ranks_file(tmp_path, lines), pattern="cl100k")
    assert tok.encode("abab") == [256, 256]
    assert tok.special_tokens == []


@pytest.mark.parametrize(
    "extra, needle",
    [
        (b"not-base64! 300", "malformed .tiktoken line"),
        (b"YWI=", "malformed .tiktoken line"),
        (b"YWI= x1", "malformed .tiktoken line"),
        (b"YQ== 300", "repeated"),  # b"a" again
        (b"YWI= 97", "repeated"),  # rank 97 again
    ],
)
def test_malformed_tiktoken_files(tmp_path, extra, needle):
    path = ranks_file(tmp_path, [*byte_ranks(), extra])
    message = refused(path, needle, pattern="gpt2")
    assert f"{path}:257" in message


def test_tiktoken_file_missing_a_byte(tmp_path):
    refused(ranks_file(tmp_path, byte_ranks()[1:]), "byte 0x00", pattern="gpt2")


def test_tiktoken_file_needs_a_pattern(tmp_path):
    refused(ranks_file(tmp_path, byte_ranks()), "pattern=")


def test_tiktoken_file_with_a_bad_pattern(tmp_path):
    refused(ranks_file(tmp_path, byte_ranks()), "pattern", pattern="(unclosed")


def test_pattern_option_is_refused_for_files_with_their_own(tmp_path):
    tok = Tokenizer.train(["a b c"], vocab_size=260)
    tok.save(tmp_path / "tok.json")
    refused(tmp_path / "tok.json", "pattern=", pattern="gpt2")
    export(tok, tmp_path / "hf.json", "hf")
    refused(tmp_path / "hf.json", "special_tokens=", special_tokens={"<s>": 1})


def test_cli_errors_are_one_line_naming_the_file(cli, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("hello\n", encoding="utf-8")
    d = byte_level_json()
    d["model"] = {"type": "WordPiece", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"}
    bad = write(tmp_path, d, "wordpiece.json")
    for args in (
        ("encode", data, tmp_path / "out", "--tokenizer", bad),
        ("export", bad, tmp_path / "x.json", "--format", "hf"),
        ("decode", "--tokenizer", bad, "1"),
    ):
        result = cli(*args, ok=False)
        assert result.exit_code == 1
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
        assert "wordpiece.json" in lines[0] and "WordPiece" in lines[0]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    result = cli(
        "encode", data, tmp_path / "out", "--tokenizer", bad, "--special-token", "x", ok=False
    )
    assert result.exit_code == 2 and "NAME=ID" in result.output


def test_a_special_token_given_two_ids_is_a_usage_error(cli, tmp_path):
    """The last id won, and the other was a gap in an export's vocabulary."""
    from realtext import GPT2_FILE

    twice = ("--special-token", "<|x|>=50257", "--special-token", "<|x|>=50258")
    result = cli("tokenize", "--tokenizer", GPT2_FILE, *twice, "hi", ok=False)
    assert result.exit_code == 2
    assert "'<|x|>' is given two ids, 50257 and 50258" in result.output
    same = ("--special-token", "<|x|>=50257") * 2  # said twice alike: one token
    assert cli("tokenize", "--tokenizer", GPT2_FILE, *same, "hi").output.split() == ["5303"]


# ---- exports that would not give the same ids ---------------------------


def explicit(merges, vocab_extra, **kw) -> Tokenizer:
    vocab = [bytes([b]) for b in range(256)] + vocab_extra
    return Tokenizer(mode="byte", pattern="gpt2", merges=merges, vocab=vocab, **kw)._validate()


def test_tiktoken_export_refuses_merges_out_of_id_order(tmp_path):
    # "bc" (id 257) is merged before "ab" (id 256): tiktoken, merging by id, would not.
    tok = explicit([(98, 99), (97, 98)], [b"ab", b"bc"])
    with pytest.raises(TokenmillError, match="merge priorities"):
        export(tok, tmp_path / "t.tiktoken", "tiktoken")
    assert not (tmp_path / "t.tiktoken").exists()


def test_tiktoken_export_refuses_merges_tiktoken_would_not_make(tmp_path):
    # "abc" from a + bc, but BPE over lower ranks splits it into ab + c.
    tok = explicit([(97, 98), (98, 99), (97, 257)], [b"ab", b"bc", b"abc"])
    with pytest.raises(TokenmillError, match="merge 2 is not the one"):
        export(tok, tmp_path / "t.tiktoken", "tiktoken")


def test_tiktoken_export_refuses_tokens_no_merge_makes(tmp_path):
    # "abc" with neither "ab" nor "bc": tiktoken reaches it only as a whole pre-token.
    tok = explicit([], [b"abc"])
    with pytest.raises(TokenmillError, match="made by no merge"):
        export(tok, tmp_path / "t.tiktoken", "tiktoken")
    tok = dataclasses.replace(tok, whole_words=True)  # tiktoken's own rule: fine
    export(tok, tmp_path / "t.tiktoken", "tiktoken")


def test_exports_refuse_two_ids_with_the_same_bytes(tmp_path):
    tok = Tokenizer(mode="byte", pattern="gpt2", merges=[(97, 98), (97, 98)])
    for fmt in ("hf", "tiktoken"):
        with pytest.raises(TokenmillError, match="ids 256 and 257"):
            export(tok, tmp_path / f"out.{fmt}", fmt)


def test_explicit_vocab_checks():
    with pytest.raises(TokenmillError, match="same bytes"):
        explicit([], [b"ab", b"ab"])
    with pytest.raises(TokenmillError, match="taken"):
        explicit([], [b"ab"], special_tokens=["<s>"], special_ids=[256])
    with pytest.raises(TokenmillError, match="does not join"):
        explicit([(97, 300)], [b"ab"])


def test_ranks_tiktoken_reaches_by_other_pairs_are_refused(tmp_path):
    """GPT-2's ranks without ' l' (rank 300): tiktoken still makes ' look' of
    ' ' and 'look', tokenmill's merges (each token two lower-ranked tokens)
    did not, and 18 of the sample documents got other ids, silently."""
    import tiktoken
    import tiktoken.load
    from realtext import GPT2_FILE

    lines = GPT2_FILE.read_bytes().splitlines()
    path = ranks_file(tmp_path, [*lines[:300], *lines[301:]])
    refused_message = refused(
        path, "not two lower-ranked tokens merged", "ids would differ", pattern="gpt2"
    )
    assert "282 tokens" in refused_message
    enc = tiktoken.Encoding(
        name="gap", pat_str=_native.preset_regex("gpt2"),
        mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(path)), special_tokens={},
    )  # fmt: skip
    assert enc.encode_ordinary(" lookaheads") == [804, 64, 16600]  # ' look' all the same
