"""The native pre-tokenizer must split text exactly as tiktoken's split regexes do.

``tokenmill._native.pretokenize(text, preset)`` (the hand-written scanner in
``native/src/scanner/``) is compared with
``regex.findall(pattern, text)`` for the gpt2, cl100k and o200k patterns: on hypothesis
text drawn from every Unicode category, letters of many scripts, marks, digits, spaces of
every kind, ``\\r\\n`` mixes and contractions; on a built-in multilingual sample; and on
the documents in ``sample_data/``.

Unicode versions: the scanner's tables are Unicode 16.0 (the same as the regex crate's
inside tiktoken), while the ``regex`` module may be newer (2026.11.15 is Unicode 17.0).
Code points whose classes differ between the two (``UNICODE_17_DELTA``) are kept out
of the generated text and removed from sample documents.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textbook import PATTERNS

from tokenmill import _native

regex = pytest.importorskip("regex")


def pretokenize(text: str, preset: str) -> list[str]:
    return _native.pretokenize(text, preset)


COMPILED = {name: regex.compile(pattern) for name, pattern in PATTERNS.items()}
PRESETS = list(PATTERNS)

# Code points whose \p{L}, \p{N}, \s, [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] or
# [\p{Ll}\p{Lm}\p{Lo}\p{M}] membership differs between Unicode 16.0 (the scanner, and
# tiktoken) and Unicode 17.0 (regex 2026.11.15): letters, marks and digits new in 17.0,
# and U+0295, which changed from Ll to Lo.
UNICODE_17_DELTA = [
    (0x0295, 0x0295), (0x0558, 0x0558), (0x058B, 0x058C), (0x05C8, 0x05C9), (0x088F, 0x088F),
    (0x0B53, 0x0B54), (0x0C5C, 0x0C5C), (0x0CDC, 0x0CDC), (0x1ACF, 0x1AF0), (0x208F, 0x208F),
    (0x209D, 0x209F), (0xA7CE, 0xA7CF), (0xA7D2, 0xA7D2), (0xA7D4, 0xA7D4), (0xA7DD, 0xA7DD),
    (0xA7E2, 0xA7E2), (0xA7F1, 0xA7F1), (0xAB6C, 0xAB6D), (0x107BB, 0x107BF),
    (0x10940, 0x10959), (0x10EC5, 0x10EC7), (0x10ECB, 0x10ECF), (0x10ED9, 0x10EEE),
    (0x10EF0, 0x10EFB), (0x11B0A, 0x11B0A), (0x11B60, 0x11B67), (0x11DB0, 0x11DDB),
    (0x11DE0, 0x11DE9), (0x11DF0, 0x11DF1), (0x1246F, 0x1246F), (0x12475, 0x1247F),
    (0x12550, 0x12686), (0x16EA0, 0x16EB8), (0x16EBB, 0x16ED3), (0x16FF2, 0x16FF6),
    (0x187F8, 0x187FF), (0x18CD6, 0x18CDA), (0x18D09, 0x18D20), (0x18D80, 0x18DF2),
    (0x18E00, 0x19191), (0x191A0, 0x191D2), (0x1B123, 0x1B128), (0x1B168, 0x1B168),
    (0x1D127, 0x1D128), (0x1D250, 0x1D252), (0x1D25B, 0x1D25C), (0x1D25F, 0x1D25F),
    (0x1D280, 0x1D281), (0x1D6A6, 0x1D6A6), (0x1DF1F, 0x1DF24), (0x1DF2B, 0x1DF81),
    (0x1DF90, 0x1DF96), (0x1DFCD, 0x1DFFF), (0x1E6C0, 0x1E6DE), (0x1E6E0, 0x1E6F5),
    (0x1E6FE, 0x1E6FF), (0x2B73A, 0x2B73F), (0x2B81E, 0x2B81E), (0x2CEA2, 0x2CEAD),
    (0x323B0, 0x33479), (0x3D000, 0x3FC3F),
]  # fmt: skip
DELTA_RE = regex.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in UNICODE_17_DELTA) + "]")

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def comparable(text: str) -> str:
    return DELTA_RE.sub("", text)


def check(text: str, preset: str) -> None:
    got = pretokenize(text, preset)
    want = COMPILED[preset].findall(text)
    assert list(got) == want, (preset, text, [hex(ord(c)) for c in text])
    assert "".join(got) == text


def chars(**kwargs) -> st.SearchStrategy[str]:
    return st.characters(**kwargs).filter(lambda c: not DELTA_RE.match(c))


CATEGORIES = (
    "Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So Zs Zl Zp Cc Cf Co Cn"
).split()
SCRIPTS = [
    (0x00C0, 0x024F),  # Latin-1 and Latin Extended (incl. titlecase ǅ ǈ ǋ ǲ)
    (0x0250, 0x036F),  # IPA, modifier letters, combining diacritics
    (0x0370, 0x03FF),  # Greek
    (0x0400, 0x052F),  # Cyrillic
    (0x0530, 0x058F),  # Armenian
    (0x0590, 0x05FF),  # Hebrew
    (0x0600, 0x06FF),  # Arabic
    (0x0900, 0x097F),  # Devanagari
    (0x0B80, 0x0BFF),  # Tamil
    (0x0E00, 0x0E7F),  # Thai
    (0x10A0, 0x10FF),  # Georgian
    (0x1E00, 0x1FFF),  # Latin and Greek Extended (titlecase ᾈ..)
    (0x3040, 0x30FF),  # kana
    (0x4E00, 0x9FFF),  # CJK ideographs
    (0xAC00, 0xD7A3),  # Hangul
    (0xFF00, 0xFFEF),  # full/halfwidth forms
    (0x1D400, 0x1D7FF),  # mathematical alphanumerics
    (0x1E900, 0x1E95F),  # Adlam
    (0x1F300, 0x1FAFF),  # emoji
]
SPACES = [
    " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", "\r\n\r\n", "\x0b", "\x0c", "\x85",
    "\xa0", "\u1680", "\u2000", "\u2007", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f",
    "\u3000", "\x1c", "\u200b",
]  # fmt: skip
CONTRACTIONS = [
    "'", "'s", "'S", "'t", "'T", "'re", "'RE", "'ve", "'Ve", "'m", "'M", "'ll", "'LL", "'Ll",
    "'d", "'D", "'\u017f", "/", "//",
]  # fmt: skip

ATOMS = st.one_of(
    st.sampled_from(SPACES),
    st.sampled_from(CONTRACTIONS),
    st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    st.one_of([chars(min_codepoint=lo, max_codepoint=hi) for lo, hi in SCRIPTS]),
    st.one_of([chars(categories=[cat]) for cat in CATEGORIES]),
    chars(exclude_categories=["Cs"]),
)
TEXTS = st.lists(ATOMS, max_size=40).map("".join)


@st.composite
def few_distinct(draw) -> str:
    """Long runs over a handful of atoms, so neighbouring alternatives interact."""
    atoms = draw(st.lists(ATOMS, min_size=1, max_size=4))
    return "".join(draw(st.lists(st.sampled_from(atoms), max_size=60)))


@pytest.mark.parametrize("preset", PRESETS)
@SETTINGS
@given(text=TEXTS)
def test_matches_regex_findall(preset, text):
    check(text, preset)


@pytest.mark.parametrize("preset", PRESETS)
@SETTINGS
@given(text=few_distinct())
def test_matches_regex_findall_on_runs(preset, text):
    check(text, preset)


TRICKY = [
    "",
    " ",
    "Hello world's  HelloWorld'S ABCdef'll 12345\r\n\n  x ",
    "don't DON'T I'M we'll They'RE it''s '''s 'ſ a'ſ",
    "\u0301A \u0301a .\u0301A e\u0301 ʰA AʰB. AAʰBBc 々AB ǅemal'S ᾈbc",
    "1 12 123 1234 12345 123456 1234567 ٣٤٥٦ Ⅻ½²3",
    "x\r\ny\n\ny\r\n\r\n a \n a\n  b\t\nb   c trailing  \n",
    "\xa0x \u3000中 \u2028x \x85x \u1680\u2000\u200a\u202f\u205fx \x1c\x1dx",
    " //\n//x a/b ...\n\n !!! ???\n",
    "😀😀 😀 👨\u200d👩\u200d👧 👍🏽 ❤\ufe0f 🇺🇸 \ufefftext",
    "def f(x):\n    return x ** 2\n\n\n",
    "a\n",
    "a \n",
    "a\n\n",
]

MULTILINGUAL = """\
The quick brown fox jumps over the lazy dog's back; it's 2024-01-01 and we'll pay $1,234.56.
Привет, мир! Это тест: 12345 рублей. Γειά σου Κόσμε — ΑΒΓ αβγ.
こんにちは世界！東京は2024年に…「テスト」ですー。 안녕하세요, 세계! 123번
مرحبا بالعالم ١٢٣٤ — שלום עולם! नमस्ते दुनिया, क्षत्रिय ०१२३४ — สวัสดีชาวโลก ๑๒๓
Ǆemal ǅemal ǆemal; naïve café résumé NAÏVE; Straße STRASSE; İstanbul ıi
𝐀𝐁𝐂𝐚𝐛𝐜 ＡＢＣａｂｃ１２３ ① ⅻ ½ x² 😀👍🏽🇺🇸 e\u0301\u0302 \u20dd
\tindented\r\n    code = f(x) // 2  # comment\r\n\r\n
"""


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("text", TRICKY + [MULTILINGUAL], ids=range(len(TRICKY) + 1))
def test_known_strings(preset, text):
    check(text, preset)


def sample_documents() -> list[str]:
    from tokenmill.io.readers import read_documents, shard_format

    shards = sorted(
        p for p in SAMPLE_DATA.rglob("*") if p.is_file() and shard_format(p) is not None
    )
    if not shards:
        pytest.skip("sample_data/ holds no input shards")
    return [doc for shard in shards for batch in read_documents(shard) for doc in batch.to_pylist()]


@pytest.mark.parametrize("preset", PRESETS)
def test_sample_data(preset):
    docs = sample_documents()
    assert docs, "sample_data/ holds no documents"
    for doc in docs:
        check(comparable(doc), preset)


def test_a_custom_pattern_that_exhausts_the_regex_engine_fails_loudly():
    # Catastrophic backtracking: fancy-regex gives up, and the text must not
    # be silently dropped.
    pattern = r"(a|aa)+(?=b)|[\s\S]"
    text = "a" * 40 + "c"
    with pytest.raises(ValueError, match="pattern failed"):
        _native.pretokenize(text, pattern)
    encoder = _native.Encoder.byte(pattern, [], [])
    with pytest.raises(ValueError, match="pattern failed"):
        encoder.encode(text)
