"""Patterns between fancy-regex (tokenmill, tiktoken) and Oniguruma (Hugging
Face tokenizers): the rewrites, and that both engines then cut text alike."""

from __future__ import annotations

import pytest

from tokenmill import _native
from tokenmill.errors import TokenmillError
from tokenmill.formats import regex

PRESETS = ("gpt2", "cl100k", "o200k")


def onig_pieces(pattern: str, text: str) -> list[str]:
    """Hugging Face's Split (Oniguruma), behavior isolated."""
    tokenizers = pytest.importorskip("tokenizers")
    split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(pattern), behavior="isolated")
    return [text[a:b] for _, (a, b) in split.pre_tokenize_str(text)]


def fancy_pieces(pattern: str, text: str) -> list[str]:
    return _native.pretokenize(text, pattern)


def test_rewrites():
    cl100k = regex.fancy_to_onig(_native.preset_regex("cl100k"))
    assert r"(?>\p{N}{1,3})" in cl100k and "{1,3}+" not in cl100k
    assert r"\s++\z" in cl100k and "$" not in cl100k
    assert regex.onig_to_fancy(r"\p{N}{1,3}+") == r"(?:\p{N}{1,3})+"
    # Oniguruma's ^ is no line's start at the text's end (after its last newline).
    assert regex.onig_to_fancy(r"a$|^b") == r"a(?m:$)|(?:\A|(?m:^)(?!\z))b"
    assert regex.onig_to_fancy(r"x{,2}") == r"x{0,2}"
    assert regex.fancy_to_onig(r"[$^]\$") == r"[$^]\$"  # literals stay
    assert regex.fancy_to_onig(r"(?i:'s)|(ab){2,3}+") == r"(?i:'s)|(?>(ab){2,3})"


@pytest.mark.parametrize(
    "text",
    ["1234567 89", "x  \n\n y  ", "a\r\n\r\nb", "ends with space ", "'S 'LL ſ ǅ", ""],
)
def test_interval_and_line_end_quirks(text):
    """The constructs the rewrites exist for cut alike in both engines, which
    they would not verbatim (Oniguruma reads `{1,3}+` as a repeated interval:
    "1234567" would be one piece)."""
    for fancy in (r"\p{N}{1,3}+|\s++$|\S|\s", _native.preset_regex("cl100k")):
        assert onig_pieces(regex.fancy_to_onig(fancy), text) == fancy_pieces(fancy, text)
    assert onig_pieces(r"\p{N}{1,3}+|\s", "1234567") == ["1234567"]
    for onig in (r"\p{N}{1,3}+|[^\n]+$|\s|\S", r"^\s*\S|\s|\S"):
        assert fancy_pieces(regex.onig_to_fancy(onig), text) == onig_pieces(onig, text)


@pytest.mark.parametrize("name", PRESETS)
def test_presets_are_recognized_after_a_round_trip(name):
    source = _native.preset_regex(name)
    assert regex.preset_name(source) == name
    assert regex.preset_name(regex.onig_to_fancy(regex.fancy_to_onig(source))) == name
    assert regex.preset_name(source + "|x") is None


# The character classes the presets and the final-sigma rule use (with their
# complements), compared over every code point: the engines' Unicode tables
# must agree.
CLASSES = [
    (r"\s", r"\S"),
    *((rf"\p{{{c}}}", rf"\P{{{c}}}") for c in ("L", "N", "Lu", "Ll", "Lt", "Lm", "Lo", "M")),
    (r"\p{Cased}", r"\P{Cased}"),
    (r"\p{Case_Ignorable}", r"\P{Case_Ignorable}"),
    (r"(?i:[sdmt])", r"(?i:[^sdmt])"),
]


def test_character_classes_agree_on_every_code_point():
    tokenizers = pytest.importorskip("tokenizers")
    text = "".join(chr(c) for c in range(1, 0x110000) if not 0xD800 <= c < 0xE000)
    for cls, complement in CLASSES:
        # The text without the class's characters, by each engine.
        remove = tokenizers.normalizers.Replace(tokenizers.Regex(f"(?:{cls})+"), "")
        onig = remove.normalize_str(text)
        # Runs of the class and of its complement alternate, the complement's
        # first (U+0001 is in no class); tokenmill refuses a pattern that
        # leaves text unmatched, so both kinds of run are pieces.
        assert onig[0] == "\x01", cls
        pieces = fancy_pieces(f"(?:{complement})+|(?:{cls})+", text)
        fancy = "".join(pieces[::2])
        assert onig == fancy, cls
        assert 0 < len(fancy) < len(text)


@pytest.mark.parametrize("pattern", [r"\w", r"\W", r"\b", r"\h", r"\K", r"\Z", r"\1", r"\G"])
def test_constructs_read_differently_are_refused(pattern):
    for translate in (regex.fancy_to_onig, regex.onig_to_fancy):
        with pytest.raises(TokenmillError, match="read differently"):
            translate(f"a{pattern}|b")


@pytest.mark.parametrize(
    "pattern, needle",
    [
        (r"[\p{L}--[a-z]]+", "the class operation --"),
        (r"[\s~~\n]+", "the class operation ~~"),
        (r"\p{Script=Greek}+", r"write it without its key"),
        (r"\p{sc=Grek}+", r"\p{sc=Grek}"),
        (r"[\u{1F600}-\u{1F64F}]+", r"write it \x{1F600}"),
    ],
)
def test_fancy_only_syntax_is_refused_before_export_writes_what_tokenizers_cannot_load(
    pattern, needle
):
    """These trained and exported with exit 0, to a tokenizer.json tokenizers
    refused to load (Oniguruma has no class difference, no property keys, no
    \\u{...})."""
    with pytest.raises(TokenmillError, match="read differently") as e:
        regex.fancy_to_onig(f"{pattern}|[\\s\\S]")
    assert needle in str(e.value)


def test_what_both_read_alike_is_exported():
    import tokenizers

    from tokenmill import Tokenizer
    from tokenmill.formats import hf

    text = "x 😀😃😄 αβγ δ"
    for pattern in (r"[\x{1F600}-\x{1F64F}]+|[\s\S]", r"\p{Greek}+|\P{Greek}+"):
        tok = Tokenizer.train(["abc def 😀😃 αβγ"] * 10, num_merges=5, pattern=pattern)
        loaded = tokenizers.Tokenizer.from_str(hf.to_json(tok))
        assert loaded.encode(text).ids == tok.encode(text)


@pytest.mark.parametrize("pattern", ["(a", "a)", "[a", "*a", "a\\"])
def test_malformed_patterns(pattern):
    with pytest.raises(TokenmillError):
        regex.onig_to_fancy(pattern)


def test_covering_keeps_unmatched_text_as_pieces():
    text = "ab, cd!! 12"
    assert fancy_pieces(regex.covering(r"\p{L}+"), text) == ["ab", ", ", "cd", "!! 12"]
    assert onig_pieces(r"\p{L}+", text) == ["ab", ", ", "cd", "!! 12"]
