"""Patterns that Oniguruma (Hugging Face tokenizers) and fancy-regex
(tokenmill) read differently: a tokenizer.json's Split regex is imported, and
a tokenmill pattern exported, either so that both engines split text alike
(checked against tokenizers' own splitting) or refused with one line."""

from __future__ import annotations

import json
import sys
from functools import cache

import pytest

from tokenmill import _native
from tokenmill.errors import TokenmillError
from tokenmill.formats import export, hf, load_any, regex, regex_sets
from tokenmill.tokenizer import Tokenizer

tokenizers = pytest.importorskip("tokenizers")


def onig_pieces(pattern: str, text: str) -> list[str]:
    """Hugging Face's Split (Oniguruma), behavior isolated."""
    split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(pattern), behavior="isolated")
    return [text[a:b] for _, (a, b) in split.pre_tokenize_str(text)]


def fancy_pieces(pattern: str, text: str) -> list[str]:
    """tokenmill's pieces, as a Split (isolated) keeps unmatched text."""
    return _native.pretokenize(text, regex.covering(pattern))


@cache
def small_file() -> str:
    return hf.to_json(Tokenizer.train(["hello world"], pattern="gpt2", vocab_size=260))


def split_file(tmp_path, pattern: str):
    """A tokenizer.json whose pre-tokenizer is Split(`pattern`) then ByteLevel."""
    d = json.loads(small_file())
    split = {
        "type": "Split",
        "pattern": {"Regex": pattern},
        "behavior": "Isolated",
        "invert": False,
    }
    byte_level = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": False,
        "use_regex": False,
    }
    d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split, byte_level]}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(d))
    return path


def imported_pieces(tmp_path, pattern: str, text: str) -> list[str]:
    """The pieces of `text` by a tokenizer.json's Split(`pattern`), as tokenmill imports it."""
    return _native.pretokenize(text, load_any(split_file(tmp_path, pattern)).pattern)


def refused_import(tmp_path, pattern: str, *needles: str) -> str:
    path = split_file(tmp_path, pattern)
    tokenizers.Tokenizer.from_file(str(path))  # which tokenizers loads
    with pytest.raises(TokenmillError) as e:
        load_any(path)
    message = str(e.value)
    assert "\n" not in message, message
    assert message.startswith(f"{path}: unsupported Hugging Face tokenizer.json: "), message
    for needle in needles:
        assert needle in message, message
    return message


def refused_export(pattern: str, *needles: str) -> str:
    with pytest.raises(TokenmillError) as e:
        regex.fancy_to_onig(pattern)
    message = str(e.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, message
    return message


# X{n}? is an optional X{n} to Oniguruma (Ruby syntax), a lazy exactly-n
# times to fancy-regex.
INTERVALS = [
    (r"x\d{2}?", "x1 x12 x123 x"),
    (r"(?:a|bc){2}?x", "x ax abcx bcbcx aaax"),
    (r"[\d]{2}?z", "z 1z 12z 123z"),
    (r"x\d{2}?|\S+|\s+", "x1 x12 x1"),
    (r"x{2,3}?|x{2,}?|\s", "xxxxx xx x"),
]


@pytest.mark.parametrize("pattern, text", INTERVALS)
def test_an_exact_interval_made_lazy_or_optional_splits_as_tokenizers_does(tmp_path, pattern, text):
    theirs = onig_pieces(pattern, text)
    assert imported_pieces(tmp_path, pattern, text) == theirs
    # A tokenmill pattern: fancy-regex's reading, exported.
    assert onig_pieces(regex.fancy_to_onig(pattern), text) == fancy_pieces(pattern, text)


def test_an_exact_interval_made_optional_differs_where_tokenmill_read_it_lazy(tmp_path):
    assert onig_pieces(r"x\d{2}?", "x1 ") != fancy_pieces(r"x\d{2}?", "x1 ")
    assert regex.onig_to_fancy(r"x\d{2}?") == r"x(?:\d{2})?"
    assert regex.fancy_to_onig(r"x\d{2}?") == r"x\d{2}"
    assert regex.fancy_to_onig(r"x\d{2,3}?") == r"x\d{2,3}?"  # lazy in both


def test_the_ids_of_an_exported_lazy_interval_are_tokenizers(tmp_path):
    text = "x1 x12 x1"
    tok = Tokenizer.train([text] * 30, pattern=r"x\d{2}?|\S+|\s+", vocab_size=300)
    assert tokenizers.Tokenizer.from_str(hf.to_json(tok)).encode(text).ids == tok.encode(text)
    # And an imported optional interval gives tokenizers' ids.
    path = split_file(tmp_path, r"x\d{2}?")
    theirs = tokenizers.Tokenizer.from_file(str(path))
    assert load_any(path).encode("x1 a") == theirs.encode("x1 a").ids


# Bare flags hold to the end of their group: across `|` in both engines, but
# Oniguruma puts the rest of the group, alternatives and all, under the flag.
SCOPES = [
    (r"a(?i)b|c", "ab aB AB C c"),
    (r"(?i)x(?-i)y|z", "xy Xy xY XY z Z"),
    (r"(?:a(?i)b|c)d", "abd aBd Cd cd cD"),
    (r"a(?i)b|c(?-i)d|e", "ab aB cd Cd cD E e"),
]


@pytest.mark.parametrize("pattern, text", SCOPES)
def test_a_bare_flag_is_scoped_as_each_engine_reads_it(tmp_path, pattern, text):
    assert onig_pieces(pattern, text) != fancy_pieces(pattern, text)
    assert imported_pieces(tmp_path, pattern, text) == onig_pieces(pattern, text)
    assert onig_pieces(regex.fancy_to_onig(pattern), text) == fancy_pieces(pattern, text)


@pytest.mark.parametrize("pattern", [r"(a(?i)b)c", r"(?>a(?i)b)c", r"(?=a(?i)b)..c"])
def test_a_bare_flag_fancy_regex_keeps_past_its_group_is_refused_on_export(tmp_path, pattern):
    text = "abc abC aBc"
    assert onig_pieces(pattern, text) != fancy_pieces(pattern, text)
    assert imported_pieces(tmp_path, pattern, text) == onig_pieces(pattern, text)
    refused_export(pattern, "a bare (?i)", "write (?i:...) instead")
    # Where it ends as it began, it is exported.
    kept = r"(a(?i)b(?-i))c"
    assert onig_pieces(regex.fancy_to_onig(kept), text) == fancy_pieces(kept, text)


def test_bare_flags_become_groups():
    assert regex.onig_to_fancy(r"a(?i)b|c") == r"a(?i:b|c)"
    assert regex.onig_to_fancy(r"(?i)x(?-i)y|z") == r"(?i:x(?-i:y|z))"
    assert regex.fancy_to_onig(r"a(?i)b|c") == r"a(?i:b)|(?i:c)"
    assert regex.fancy_to_onig(r"(?i)x(?-i)y|z") == r"(?i:x(?-i:y))|(?-i:z)"


@cache
def multi_folds() -> list[str]:
    """The characters whose case folding is several characters (ß: ss)."""
    return [chr(c) for c in range(0x10000) if len(chr(c).casefold()) > 1]


def folding_text() -> str:
    """Each character that folds to several, its folding and their cases,
    after an apostrophe (the contractions), a space and a letter."""
    out = []
    for c in multi_folds():
        for s in {c, c.casefold(), c.upper(), c.lower(), c.casefold().upper()}:
            out.append(f"'{s} x{s} ")
    return "".join(out) + "'S 'ſ 'LL 'Re K k"


# Oniguruma folds a case-insensitive character or string to or from several
# characters (ß and ss), fancy-regex never does.
FOLDS = [
    (r"(?i)ss", "'ss'", "ß ss SS ẞ"),
    (r"(?i)ß", "'ß'", "ss ß SS"),
    (r"(?i)ff", "'ff'", "ﬀ ff"),
    (r"(?i)st", "'st'", "ﬅ ﬆ st"),
    (r"(?i)\x{DF}", "'ß'", "ss ß"),
    (r"(?i)[ß]", "'ß'", "ss ß"),
    (r"(?i)[\x{D0}-\x{E0}]", "'ß'", "ss ß"),
    ("(?i)\u01f0", "'\u01f0'", "\u01f0 j\u030c"),
    (r"(?i)s(?:s)", "'ss'", "ß ss"),
    (r"(?i)S\x{73}", "'ss'", "ß ss"),
    (r"(?i)i\x{307}", "'i̇'", "İ i̇"),
    (r"(?i:ΑΙ)", "'αι'", "ᾳ αι"),
]


@pytest.mark.parametrize("pattern, needle, text", FOLDS)
def test_case_insensitive_text_oniguruma_folds_to_or_from_several_characters_is_refused(
    tmp_path, pattern, needle, text
):
    assert onig_pieces(pattern, text) != fancy_pieces(pattern, text)
    needles = ("case-insensitive", needle, "read differently")
    refused_import(tmp_path, pattern, *needles, f"'{pattern}'")
    refused_export(pattern, *needles)


# Case-insensitive patterns whose characters fold to single characters only,
# the contractions as Llama 3, cl100k and tiktoken's converter spell them.
KEPT_FOLDS = [
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|\s+|\S",
    r"'(?i:[sdmt]|ll|ve|re)|\s+|\S",
    r"(?i)'s|'t|'re|'ve|'m|'ll|'d|\s+|\S",
    r"(?i)s[s]|x|\s",
    r"(?i)s|s|\s",
    r"(?i)[a-z]+|\s",
]


@pytest.mark.parametrize("pattern", KEPT_FOLDS)
def test_case_insensitive_text_that_folds_to_single_characters_splits_as_tokenizers_does(
    tmp_path, pattern
):
    text = folding_text()
    assert imported_pieces(tmp_path, pattern, text) == onig_pieces(pattern, text)
    assert onig_pieces(regex.fancy_to_onig(pattern), text) == fancy_pieces(pattern, text)


def cased_text() -> str:
    """Every character of the scripts with case (Latin, Greek, Coptic,
    Cyrillic, Armenian, Georgian, Cherokee, ...), and the ones that fold to
    a letter of another category (µ, the combining ypogegrammeni, Kelvin)."""
    ranges = [(0x20, 0x590), (0x10A0, 0x1100), (0x13A0, 0x1400), (0x1C80, 0x2000)]
    chars = (chr(c) for a, b in ranges for c in range(a, b))
    return "".join(chars) + "µ\u0345\u1fbe\u212a\u2126Kk"


# Oniguruma leaves a property outside a class unfolded under (?i), folding
# one in a class; fancy-regex folds both.
CASEDPROPERTIES = [
    r"(?i)\P{Lu}+",
    r"(?i)\p{^Lu}+",
    r"(?i)\p{M}+",
    r"(?i)[^\p{Lu}\s]+",
]
# Exported, these are classes holding a character that folds to several
# (ẞ, ß, ﬁ, ΐ, ᾈ...), which Oniguruma matches to that folding's text too.
CASEDPROPERTIES_IMPORTED = [
    r"(?i)\p{Lu}+",
    r"(?i)\p{Upper}+",
    r"(?i)\p{Uppercase}+",
    r"(?i)\p{Ll}+|\p{Lt}",
    r"(?i)\p{Greek}+",
    r"(?i)\p{L}+",
]


@pytest.mark.parametrize("pattern", CASEDPROPERTIES + CASEDPROPERTIES_IMPORTED)
def test_a_case_insensitive_property_splits_as_tokenizers_does(tmp_path, pattern):
    text = cased_text()
    assert imported_pieces(tmp_path, pattern, text) == onig_pieces(pattern, text)
    if pattern in CASEDPROPERTIES_IMPORTED:
        refused_export(pattern, ", to Oniguruma a class holding", "Oniguruma matches")
    else:
        assert onig_pieces(regex.fancy_to_onig(pattern), text) == fancy_pieces(pattern, text)


def test_a_case_insensitive_property_outside_a_class_is_read_otherwise_by_each():
    assert onig_pieces(r"(?i)\p{Lu}+", "abcDEF") == ["abc", "DEF"]
    assert fancy_pieces(r"(?i)\p{Lu}+", "abcDEF") == ["abcDEF"]
    assert regex.onig_to_fancy(r"(?i)\p{Lu}+") == r"(?i:(?-i:\p{Lu})+)"
    assert regex.fancy_to_onig(r"(?i)\P{Lu}+") == r"(?i:[^\p{Lu}]+)"


# Under (?i) Oniguruma builds a class (its &&, its negated parts) and then
# case-folds it; fancy-regex folds each of its parts first.
CLASS_FOLDS = [
    (r"(?i)[A-Z&&a-z]", "the class intersection &&"),
    (r"(?i)[\P{Lu}]", r"the negated property \P{Lu} in a class"),
    (r"(?i)[\p{^Lu}]", r"the negated property \p{^Lu} in a class"),
    (r"(?i)[\P{Ll}]", r"the negated property \P{Ll} in a class"),
    (r"(?i)[^\P{Lu}]", r"the negated property \P{Lu} in a class"),
    (r"(?i)[d-k[^Z-t]]", "a negated class [^...] in a class"),
]


@pytest.mark.parametrize("pattern, needle", CLASS_FOLDS)
def test_a_case_insensitive_class_folded_otherwise_by_each_is_refused(tmp_path, pattern, needle):
    text = "aAbB1ßẞ zZ dD kK tT ſ \u212a x"
    assert onig_pieces(pattern, text) != fancy_pieces(pattern, text)
    refused_import(tmp_path, pattern, needle, "under (?i)", "read differently")
    refused_export(pattern, needle, "under (?i)")
    # Case-sensitive, each engine reads it alike.
    sensitive = pattern.removeprefix("(?i)")
    assert imported_pieces(tmp_path, sensitive, text) == onig_pieces(sensitive, text)
    assert onig_pieces(regex.fancy_to_onig(sensitive), text) == fancy_pieces(sensitive, text)


# Under (?i) a class holding a character that folds to several (ß, ẞ: "ss";
# ﬁ: "fi") matches that folding's text too in Oniguruma, where the one
# character fails; fancy-regex never does. Properties and escapes hold them.
CLASS_MULTI_FOLDS = [
    (r"(?i)[\p{Ll}]#", "fi# x", "'ß'"),
    (r"(?i)[\p{L}]-", "ss- ss-", "'ß'"),
    (r"(?i)[\p{Lu}]#", "ss# x", "'İ'"),  # and ẞ
    (r"(?i)[\S]-", "ss- ss-", "'ß'"),
    (r"(?i)[\D]-", "ss- ss-", "'ß'"),
    (r"(?i)[\s\S]#", "ss#", "'ß'"),
    (r"(?i)[\p{Lu}]+", "ss SS", "'İ'"),
]


@pytest.mark.parametrize("pattern, text, held", CLASS_MULTI_FOLDS)
def test_a_case_insensitive_class_holding_a_character_folding_to_several_is_refused(
    tmp_path, pattern, text, held
):
    if not pattern.endswith("+"):
        assert onig_pieces(pattern, text) != fancy_pieces(pattern, text)
    needles = ("the case-insensitive class [", f"], holding {held}", "Oniguruma matches")
    refused_import(tmp_path, pattern, *needles)
    refused_export(pattern, *needles)


def test_a_case_insensitive_property_exported_as_a_class_holding_such_a_character_is_refused():
    pattern, text = r"(?i)\p{Ll}#|[a-z]+|[\s\S]", "i# i# fi fi fi#"
    # As a class (Oniguruma folds no property outside one), it reads otherwise.
    assert onig_pieces(r"(?i:[\p{Ll}]#|[a-z]+|[\s\S])", text) != fancy_pieces(pattern, text)
    refused_export(pattern, r"case-insensitive \p{Ll}, to Oniguruma a class holding 'ß'")


@pytest.mark.parametrize(
    "pattern", [r"(?i)[^a]#", r"(?i)[^\s]#", r"(?i)[^\p{Lu}]#", r"(?i)\S#", r"(?i).#"]
)
def test_case_insensitive_negated_classes_and_escapes_fold_to_single_characters(tmp_path, pattern):
    # Oniguruma matches no folding's text to a negated class, nor to an
    # escape or a dot outside a class.
    text = "ss# fi# ß# ﬁ# SS# x# ẞ#"
    assert imported_pieces(tmp_path, pattern, text) == onig_pieces(pattern, text)
    assert onig_pieces(regex.fancy_to_onig(pattern), text) == fancy_pieces(pattern, text)


# \pL: Oniguruma's "pL", fancy-regex's \p{L}.
BRACELESS = [r"\pL+|\PL+", r"[\pL]+", r"a\p|\PN", r"\pN+|\pL|\s"]


@pytest.mark.parametrize("pattern", BRACELESS)
def test_a_property_without_braces_splits_as_tokenizers_does(tmp_path, pattern):
    text = "pL xL aPN p PL 12 pN ab"
    assert imported_pieces(tmp_path, pattern, text) == onig_pieces(pattern, text)
    if not pattern.startswith("a\\p"):  # \p at the end: fancy-regex refuses it
        assert onig_pieces(regex.fancy_to_onig(pattern), text) == fancy_pieces(pattern, text)


def test_a_property_without_braces_is_the_letters_to_oniguruma_and_braced_on_export():
    assert regex.onig_to_fancy(r"\pL+|[\PN]") == r"pL+|[PN]"
    assert regex.fancy_to_onig(r"\pL+|[\PN]") == r"\p{L}+|[\P{N}]"


@pytest.mark.parametrize("name", ["Word", "Graph", "Print", "word", "XDigit", "In_Basic_Latin"])
def test_a_property_not_known_to_match_alike_is_refused(tmp_path, name):
    pattern = rf"\p{{{name}}}+|\s+|\S"
    needles = (rf"\p{{{name}}}", "known to read alike")
    refused_import(tmp_path, pattern, *needles)
    refused_export(pattern, *needles)
    refused_export(rf"[^\P{{{name}}}]", *needles[1:])


def test_export_refuses_a_pattern_read_differently_and_writes_nothing(tmp_path):
    tok = Tokenizer.train(["a² b"] * 10, pattern=r"\p{Word}+|[\s\S]", vocab_size=260)
    with pytest.raises(TokenmillError, match=r"the property \\p\{Word\}"):
        export(tok, tmp_path / "tokenizer.json", "hf")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name, text", [("Word", "a² b‌c"), ("Graph", "a\xad b"), ("Print", "a؀ b")])
def test_the_refused_properties_are_read_differently(name, text):
    pattern = rf"\p{{{name}}}+"
    assert onig_pieces(pattern, text) != _native.pretokenize(text, regex.covering(pattern))


def test_a_property_is_written_as_both_engines_read_it(tmp_path):
    # Oniguruma reads \p{Al_num} as Alnum; fancy-regex refuses it.
    text = "a1 _ ²"
    assert imported_pieces(tmp_path, r"\p{Al_num}+", text) == onig_pieces(r"\p{Al_num}+", text)
    assert regex.onig_to_fancy(r"\p{greek}\P{white space}\p{^Extended-Pictographic}") == (
        r"\p{Greek}\P{White_Space}\P{Extended_Pictographic}"
    )


# Every code point of the Basic Multilingual Plane, then every 37th: the
# properties were compared over every code point once; this keeps them
# compared where the engines' versions of Unicode would differ.
@cache
def sample_text() -> str:
    points = (c for c in range(1, 0x110000) if c < 0x10000 or c % 37 == 0)
    return "".join(chr(c) for c in points if not 0xD800 <= c < 0xE000)


def test_the_allowed_properties_are_each_one_name():
    keys = {regex_sets.property_key(name) for name in regex_sets.PROPERTIES}
    assert len(keys) == len(regex_sets.PROPERTIES)


@pytest.mark.parametrize("part", range(4))
def test_every_allowed_property_matches_the_same_code_points_in_both_engines(part):
    text = sample_text()
    differ = []
    for name in regex_sets.PROPERTIES[part::4]:
        cls = rf"\p{{{name}}}"
        remove = tokenizers.normalizers.Replace(tokenizers.Regex(f"(?:{cls})+"), "")
        pieces = _native.pretokenize(text, f"(?:{cls})+|(?:(?!{cls})[\\s\\S])+")
        # Runs of the property and of the rest alternate; which comes first:
        first = len(_native.pretokenize(pieces[0][0] + "\0", f"(?:{cls})\\x00|[\\s\\S]")) == 1
        if remove.normalize_str(text) != "".join(pieces[first::2]):
            differ.append(name)
    assert differ == []


def test_a_pattern_matching_empty_text_is_named_as_written(tmp_path):
    # Not as tokenmill reads it ((?m:$)), nor with its backslashes doubled.
    message = refused_import(
        tmp_path, r"x$|\d*", r"Split pattern 'x$|\d*' matches the empty string"
    )
    assert "(?m:" not in message


def test_a_pattern_fancy_regex_cannot_compile_is_named_as_written_with_its_positions(tmp_path):
    # Oniguruma takes \x{} (the letters x{}); `$` is rewritten before it.
    refused_import(
        tmp_path,
        r"a$\x{}",
        r"invalid pre-tokenization pattern 'a$\x{}': Parsing error at position 4",
    )


@pytest.mark.parametrize("pattern", [r"x\x7", r"x\x7|b", r"\x41B", r"\xZ", r"[\x7-\x9]+"])
def test_a_hex_escape_of_fewer_digits_reads_as_oniguruma_reads_it(tmp_path, pattern):
    text = "x\x07 xb AB \x00Z \x08\x09"
    assert imported_pieces(tmp_path, pattern, text) == onig_pieces(pattern, text)


def test_the_characters_folding_to_several_are_those_oniguruma_folds_so():
    """The refusal's data (Python's case folding) agrees with tokenizers:
    each such character matches its folding there."""
    folds = sorted(multi_folds(), key=lambda c: -len(c.casefold()))  # the longest first
    text = " ".join(c.casefold() for c in folds)
    alternatives = "|".join(rf"\x{{{ord(c):X}}}" for c in folds)
    whole = onig_pieces(f"(?i:{alternatives})", text)
    assert [p for p in whole if p != " "] == [c.casefold() for c in folds]


# \x or \u without digits: a NUL to Oniguruma, but the letter where it ends
# the pattern.
@pytest.mark.parametrize("pattern", [r"a\x", r"\x", r"a\u", r"a\x|b", r"(a\x)", r"a\x+", r"[a\x]+"])
def test_a_hex_escape_without_digits_reads_as_oniguruma_reads_it(tmp_path, pattern):
    text = "zaxz za\0z axx a\0\0 ub au xb"
    assert imported_pieces(tmp_path, pattern, text) == onig_pieces(pattern, text)


def test_an_escape_without_digits_ending_the_pattern_is_the_letter():
    assert onig_pieces(r"a\x", "zaxz") == ["z", "ax", "z"]
    assert regex.onig_to_fancy(r"a\x") == "ax"
    assert regex.onig_to_fancy(r"a\x|b") == r"a\x{0}|b"


# \< and \>: the characters to Oniguruma, word boundaries to fancy-regex
# (outside a class).
@pytest.mark.parametrize("pattern", [r"a\<b", r"a\>b|\<", r"[\<\>]+", r"\>"])
def test_an_escaped_angle_bracket_reads_as_oniguruma_reads_it(tmp_path, pattern):
    text = "xa<b ab a<b a>b <> x"
    assert onig_pieces(r"a\<b", text) != fancy_pieces(r"a\<b", text)
    assert imported_pieces(tmp_path, pattern, text) == onig_pieces(pattern, text)


def test_an_escaped_angle_bracket_is_refused_on_export_outside_a_class():
    refused_export(r"\<[a-z]+|[\s\S]", r"the escape \<", "read differently")
    refused_export(r"[a-z]+\>|[\s\S]", r"the escape \>")
    pattern, text = r"[\<>]+|[\s\S]", "ab <cab> <"
    assert onig_pieces(regex.fancy_to_onig(pattern), text) == fancy_pieces(pattern, text)


# Oniguruma's ^ is the text's start, or follows a newline, but not at the
# text's end: `\n^` matches no text's last newline.
CARETS = [r"\n^", r"\D^", r"[\r\n]^", r"(?<=\n^)b", r"(?<!^)a|\n", r"(?<=^)\n", r"\n^|\S+"]


@pytest.mark.parametrize("pattern", CARETS)
def test_a_caret_reads_as_oniguruma_reads_it(tmp_path, pattern):
    for text in ["ab\n", "a\r\n", "\n", "\nb", "b\n\n", "ab\n\na\nb\n"]:
        assert imported_pieces(tmp_path, pattern, text) == onig_pieces(pattern, text), text


def test_a_caret_is_not_a_multi_line_one_at_the_texts_end():
    assert onig_pieces(r"\n^", "ab\n") == ["ab\n"]
    assert fancy_pieces(r"\n(?m:^)", "ab\n") == ["ab", "\n"]
    assert regex.onig_to_fancy(r"\n^") == r"\n(?:\A|(?m:^)(?!\z))"


# Inside a look-behind fancy-regex misreads an atomic group or a possessive
# quantifier: (?<!a*+)b matches the b of "xb" there, nowhere in Oniguruma.
LOOKBEHIND_POSSESSIVES = [
    (r"(?<!a*+)b", "xb", "the quantifier '*+'"),
    (r"(?<!(?>a*))b", "xb", "an atomic group (?>...)"),
    (r"(?<=p++)(?<=p++)", "p", "the quantifier '++'"),
    (r"(?<=p?+)q", "pq", "the quantifier '?+'"),
    (r"(?<=a{1,2}+)b", "ab", "the quantifier '{1,2}+'"),
]


@pytest.mark.parametrize("pattern, text, needle", LOOKBEHIND_POSSESSIVES)
def test_an_atomic_group_or_possessive_quantifier_in_a_look_behind_is_refused(
    tmp_path, pattern, text, needle
):
    if pattern.startswith("(?<!"):
        assert onig_pieces(pattern, text) != fancy_pieces(pattern, text)
    refused_import(tmp_path, pattern, needle, "inside a look-behind")
    refused_export(pattern, needle, "inside a look-behind")


# fancy-regex takes these; Oniguruma refuses them, so that an export would
# write a file tokenizers cannot load.
ONIG_REFUSES = [
    (r"a\z?|[\s\S]", "a quantifier '?' on an anchor"),
    (r"a\A{2}|[\s\S]", "a quantifier '{2}' on an anchor"),
    (r"(?:^)*a|[\s\S]", "a quantifier '*' on an anchor"),
    (r"(?:a|\z)?b|[\s\S]", "a quantifier '?' on an anchor"),
    (r"(?:|\z)?b|[\s\S]", "a quantifier '?' on an anchor"),
    (r"(?:(?=a)|b)?a|[\s\S]", "a quantifier '?' on an anchor or a look-around"),
    (r"(?<=a\z+)|[\s\S]", r"\z inside a look-behind"),
    (r"(?<!(a))b+|[\s\S]", "a capture group inside a negative look-behind"),
    (r"(?<!(?P<n>a))b+|[\s\S]", "a capture group inside a negative look-behind"),
    (r"[a-z]+(?<!x|$)|[\s\S]", "the end of the text $ inside a look-behind"),
    (r"(?<=a(?=b))b|[\s\S]", "a look-ahead (?=...) inside a look-behind"),
    (r"(?<=(?<!a))b|[\s\S]", "a negative look-behind inside a look-behind (?<=...)"),
]


@pytest.mark.parametrize("pattern, needle", ONIG_REFUSES)
def test_export_refuses_what_oniguruma_refuses(pattern, needle):
    _native.pretokenize("ab", pattern)  # which tokenmill takes
    refused_export(pattern, needle, "which Oniguruma (Hugging Face tokenizers) refuses")


# ... and these Oniguruma takes (a group that is no (?:...) may be repeated).
ONIG_TAKES = [
    r"(a|\z)?b|[\s\S]",
    r"(?i:\z)?b|[\s\S]",
    r"(?:a\z)?b|[\s\S]",
    r"(?:(?i)\z)?a|[\s\S]",
    r"(?<=^)a|[\s\S]",
    r"(?<=(?P<n>a))b|[\s\S]",
    r"(?<!(?:a|b))b|[\s\S]",
    r"(?P<word>[a-z]+)|[\s\S]",
]


@pytest.mark.parametrize("pattern", ONIG_TAKES)
def test_export_writes_what_oniguruma_takes_and_splits_alike(pattern):
    text = "ab ba aab\nxab b"
    assert onig_pieces(regex.fancy_to_onig(pattern), text) == fancy_pieces(pattern, text)


def test_a_named_group_is_exported_as_oniguruma_names_it(tmp_path):
    pattern, text = r"(?P<word>[a-z]+)|[\s\S]", "ab ba aab"
    assert regex.fancy_to_onig(pattern) == r"(?<word>[a-z]+)|[\s\S]"
    tok = Tokenizer.train([text] * 10, pattern=pattern, vocab_size=270)
    export(tok, tmp_path / "tokenizer.json", "hf")
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert theirs.encode(text).ids == tok.encode(text)


def test_export_refuses_a_translation_oniguruma_does_not_compile(tmp_path):
    # Oniguruma repeats at most 100000 times; fancy-regex takes more.
    pattern = r"a{100001}|[\s\S]"
    refused_export(pattern, f"'{pattern}' is one that Oniguruma", "too big number for repeat")
    tok = Tokenizer.train(["ab"] * 10, pattern=pattern, vocab_size=258)
    with pytest.raises(TokenmillError, match="too big number for repeat"):
        export(tok, tmp_path / "tokenizer.json", "hf")
    assert list(tmp_path.iterdir()) == []


def test_without_tokenizers_export_translates_with_its_own_refusals(monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import tokenizers fails
    assert regex.fancy_to_onig(r"a{100001}|[\s\S]") == r"a{100001}|[\s\S]"
    refused_export(r"a\z?|[\s\S]", "a quantifier '?' on an anchor")
