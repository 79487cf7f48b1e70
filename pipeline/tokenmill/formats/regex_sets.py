"""The characters on which Oniguruma (Hugging Face tokenizers) and
fancy-regex (tokenmill) agree or part, for `regex.py`'s translation: the
Unicode properties both match alike, and the characters whose case folding
is several characters, which Oniguruma, not fancy-regex, matches against
those characters' text under (?i)."""

from __future__ import annotations

import re
from functools import cache

# The Unicode properties Oniguruma (tokenizers 0.23) and fancy-regex (0.20,
# Unicode 16) match on the same code points, compared over every one of
# U+0000..U+10FFFF (tests/formats/test_regex_readings.py keeps comparing them,
# over a sample). An allow-list, not a list of those known to differ (Word,
# Graph, Print: fancy-regex reads \p{Word} as \w, which holds U+00B2;
# Oniguruma's Graph holds U+00AD), so that a name neither was compared under
# is refused, not guessed. General categories, POSIX-like names, binary
# properties, scripts:
PROPERTIES = """
L LC Lu Ll Lt Lm Lo M Mn Mc Me N Nd Nl No P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So Z Zs Zl Zp C
Cc Cf Cs Co Cn
Cased_Letter Close_Punctuation Connector_Punctuation Control Currency_Symbol
Dash_Punctuation Decimal_Number Enclosing_Mark Final_Punctuation Format Initial_Punctuation
Letter Letter_Number Line_Separator Lowercase_Letter Mark Math_Symbol Modifier_Letter
Modifier_Symbol Nonspacing_Mark Number Open_Punctuation Other Other_Letter Other_Number
Other_Punctuation Other_Symbol Paragraph_Separator Private_Use Punctuation Separator
Space_Separator Spacing_Mark Symbol Titlecase_Letter Unassigned Uppercase_Letter
Alnum Alpha ASCII Any Blank Cntrl Digit Lower Punct Space Upper
ASCII_Hex_Digit Alphabetic Bidi_Control Case_Ignorable Cased Changes_When_Casefolded
Changes_When_Casemapped Changes_When_Lowercased Changes_When_Titlecased
Changes_When_Uppercased Dash Default_Ignorable_Code_Point Deprecated Diacritic Emoji
Emoji_Component Emoji_Modifier Emoji_Modifier_Base Emoji_Presentation Extended_Pictographic
Extender Grapheme_Base Grapheme_Extend Grapheme_Link Hex_Digit Hyphen IDS_Binary_Operator
IDS_Trinary_Operator IDS_Unary_Operator ID_Compat_Math_Continue ID_Compat_Math_Start
ID_Continue ID_Start Ideographic Join_Control Logical_Order_Exception Lowercase Math
Modifier_Combining_Mark Noncharacter_Code_Point Other_Alphabetic
Other_Default_Ignorable_Code_Point Other_Grapheme_Extend Other_ID_Continue Other_ID_Start
Other_Lowercase Other_Math Other_Uppercase Pattern_Syntax Pattern_White_Space
Prepended_Concatenation_Mark Quotation_Mark Radical Regional_Indicator Sentence_Terminal
Soft_Dotted Terminal_Punctuation Unified_Ideograph Uppercase Variation_Selector White_Space
XID_Continue XID_Start
Adlam Ahom Anatolian_Hieroglyphs Arabic Armenian Avestan Balinese Bamum Bassa_Vah Batak
Bengali Bhaiksuki Bopomofo Brahmi Braille Buginese Buhid Canadian_Aboriginal Carian
Caucasian_Albanian Chakma Cham Cherokee Chorasmian Common Coptic Cuneiform Cypriot
Cypro_Minoan Cyrillic Deseret Devanagari Dives_Akuru Dogra Duployan Egyptian_Hieroglyphs
Elbasan Elymaic Ethiopic Garay Georgian Glagolitic Gothic Grantha Greek Gujarati
Gunjala_Gondi Gurmukhi Gurung_Khema Han Hangul Hanifi_Rohingya Hanunoo Hatran Hebrew
Hiragana Imperial_Aramaic Inherited Inscriptional_Pahlavi Inscriptional_Parthian Javanese
Kaithi Kannada Katakana Kawi Kayah_Li Kharoshthi Khitan_Small_Script Khmer Khojki Khudawadi
Kirat_Rai Lao Latin Lepcha Limbu Linear_A Linear_B Lisu Lycian Lydian Mahajani Makasar
Malayalam Mandaic Manichaean Marchen Masaram_Gondi Medefaidrin Meetei_Mayek Mende_Kikakui
Meroitic_Cursive Meroitic_Hieroglyphs Miao Modi Mongolian Mro Multani Myanmar Nabataean
Nag_Mundari Nandinagari New_Tai_Lue Newa Nko Nushu Nyiakeng_Puachue_Hmong Ogham Ol_Chiki
Ol_Onal Old_Hungarian Old_Italic Old_North_Arabian Old_Permic Old_Persian Old_Sogdian
Old_South_Arabian Old_Turkic Old_Uyghur Oriya Osage Osmanya Pahawh_Hmong Palmyrene
Pau_Cin_Hau Phags_Pa Phoenician Psalter_Pahlavi Rejang Runic Samaritan Saurashtra Sharada
Shavian Siddham SignWriting Sinhala Sogdian Sora_Sompeng Soyombo Sundanese Sunuwar
Syloti_Nagri Syriac Tagalog Tagbanwa Tai_Le Tai_Tham Tai_Viet Takri Tamil Tangsa Tangut
Telugu Thaana Thai Tibetan Tifinagh Tirhuta Todhri Toto Tulu_Tigalari Ugaritic Vai Vithkuqi
Wancho Warang_Citi Yezidi Yi Zanabazar_Square
""".split()


def property_key(name: str) -> str:
    """A property's name as both engines compare names: case, spaces, `_`
    and `-` aside."""
    return re.sub(r"[\s_-]", "", name).lower()


@cache
def property_names() -> dict[str, str]:
    return {property_key(name): name for name in PROPERTIES}


@cache
def multi_folds() -> tuple[list[int], dict[str, str], int]:
    """The characters whose full case folding is several characters (ß:
    "ss"), as code points; each such folding with a character folding to it;
    the longest folding's length. All are in the Basic Multilingual Plane."""
    sources = [c for c in range(0x10000) if len(chr(c).casefold()) > 1]
    targets: dict[str, str] = {}
    for c in sources:
        targets.setdefault(chr(c).casefold(), chr(c))
    return sources, targets, max(map(len, targets))


@cache
def multi_fold_held(cls: str) -> str | None:
    """A character folding to several (ß: "ss") that the fancy-regex class
    `cls` holds, case-insensitively; None if none (or if fancy-regex cannot
    compile it, which the caller reports)."""
    from tokenmill import _native

    sources, _, _ = multi_folds()
    # Each character then a NUL: `cls` then a NUL matches both where it holds
    # the character, and nothing else matches two characters.
    text = "".join(f"{chr(c)}\0" for c in sources)
    # As written first, to name a character it holds itself.
    for flags in ("", "i"):
        try:
            pieces = _native.pretokenize(text, f"(?{flags}:{cls})\\x00|[\\s\\S]")
        except _native.NativeError:
            return None
        held = next((piece[0] for piece in pieces if len(piece) == 2), None)
        if held is not None:
            return held
    return None
