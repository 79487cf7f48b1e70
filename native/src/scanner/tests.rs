//! Differential tests against `fancy-regex` running the exact tiktoken patterns.

use super::blocks::{self, classify_byte_by_byte, BLOCK};
use super::classes::{
    class_at, classify, is_other, window, window_byte_by_byte, Window, LETTER, LOWER, NUMBER,
    SPACE, UPPER, WINDOW,
};
use super::{pieces, Preset};
use fancy_regex::Regex;
use std::sync::OnceLock;

const PRESETS: [Preset; 3] = [Preset::Gpt2, Preset::Cl100k, Preset::O200k];

fn regex_for(preset: Preset) -> &'static Regex {
    static CELLS: [OnceLock<Regex>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    CELLS[preset as usize].get_or_init(|| Regex::new(preset.pattern()).unwrap())
}

fn reference(preset: Preset, text: &str) -> Vec<&str> {
    regex_for(preset)
        .find_iter(text)
        .map(|m| m.expect("fancy-regex failed").as_str())
        .collect()
}

fn check(preset: Preset, text: &str) {
    let got = pieces(preset, text);
    let want = reference(preset, text);
    assert_eq!(
        got,
        want,
        "{preset:?} split of {text:?} (code points {:x?})",
        text.chars().map(|c| c as u32).collect::<Vec<_>>()
    );
}

fn check_all(text: &str) {
    for preset in PRESETS {
        check(preset, text);
    }
}

/// Every Unicode scalar value, in order.
fn all_chars() -> impl Iterator<Item = char> {
    (0..=0x10ffff).filter_map(char::from_u32)
}

/// The classes the scanners read (`class_at`: ASCII's table, the Basic
/// Multilingual Plane's table, the category lookup beyond it) agree with the
/// regex crate's (via fancy-regex) on every scalar value, for every class
/// the patterns use; and with `classify`, which the other tests use.
#[test]
fn classes_match_regex_crate_exhaustively() {
    let chars: Vec<char> = all_chars().collect();
    let text: String = chars.iter().collect();
    let ours: Vec<u8> = (text.char_indices())
        .map(|(i, _)| class_at(text.as_bytes(), i).0)
        .collect();
    for (&c, &class) in chars.iter().zip(&ours) {
        assert_eq!(class, classify(c), "U+{:04X}", c as u32);
    }
    let offsets: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    let index_of = |offset: usize| offsets.partition_point(|&o| o < offset);
    let classes = [
        (r"\p{L}+", LETTER),
        (r"\p{N}+", NUMBER),
        (r"\s+", SPACE),
        (r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+", UPPER),
        (r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]+", LOWER),
    ];
    for (pattern, bit) in classes {
        // Walk the matches and the gaps between them in order.
        let mut next = 0;
        let mut expect = |end: usize, want: bool| {
            for i in next..end {
                assert_eq!(
                    ours[i] & bit != 0,
                    want,
                    "{pattern} on U+{:04X}",
                    chars[i] as u32
                );
            }
            next = end;
        };
        for m in Regex::new(pattern).unwrap().find_iter(&text) {
            let m = m.unwrap();
            expect(index_of(m.start()), false);
            expect(index_of(m.end()), true);
        }
        expect(chars.len(), false);
    }
}

/// `(?i:...)` over the contraction letters matches only their ASCII cases
/// and U+017F LATIN SMALL LETTER LONG S (simple case folding of `s`).
#[test]
fn case_insensitive_contraction_letters() {
    let text: String = all_chars().collect();
    let re = Regex::new(r"(?i:[sdmtlver])").unwrap();
    let got: String = re.find_iter(&text).map(|m| m.unwrap().as_str()).collect();
    assert_eq!(got, "DELMRSTVdelmrstvſ");
}

#[test]
fn preset_names() {
    for preset in PRESETS {
        assert_eq!(Preset::from_name(preset.name()), Some(preset));
    }
    assert_eq!(Preset::from_name("r50k_base"), Some(Preset::Gpt2));
    assert_eq!(Preset::from_name("cl100k_base"), Some(Preset::Cl100k));
    assert_eq!(Preset::from_name("o200k_harmony"), Some(Preset::O200k));
    assert_eq!(Preset::from_name("bogus"), None);
}

#[test]
fn known_splits() {
    let text = "Hello world's  HelloWorld'S 12345\r\n\n  x ";
    assert_eq!(
        pieces(Preset::Gpt2, text),
        [
            "Hello",
            " world",
            "'s",
            " ",
            " HelloWorld",
            "'",
            "S",
            " 12345",
            "\r\n\n ",
            " x",
            " "
        ]
    );
    assert_eq!(
        pieces(Preset::Cl100k, text),
        [
            "Hello",
            " world",
            "'s",
            " ",
            " HelloWorld",
            "'S",
            " ",
            "123",
            "45",
            "\r\n\n",
            " ",
            " x",
            " "
        ]
    );
    assert_eq!(
        pieces(Preset::O200k, text),
        [
            "Hello", " world's", " ", " Hello", "World'S", " ", "123", "45", "\r\n\n", " ", " x",
            " "
        ]
    );
    // A leading combining mark: o200k's first alternative wins without the
    // (mark) prefix before the second alternative is tried with it.
    assert_eq!(pieces(Preset::O200k, "\u{301}A"), ["\u{301}", "A"]);
    assert_eq!(pieces(Preset::Cl100k, "\u{301}A"), ["\u{301}A"]);
}

const TRICKY: &[&str] = &[
    "",
    " ",
    "  ",
    "a",
    "'",
    "''",
    "'s",
    "'S",
    "'ll",
    "'LL",
    "'lL",
    "'ve",
    "'VE",
    "'re",
    "'Re",
    "'d",
    "'D",
    "'m",
    "'t",
    "'x",
    "'ſ",
    "'ſa",
    "a'ſ",
    "don't",
    "DON'T",
    "I'M",
    "we'll",
    "They'RE",
    "it''s",
    "'''s",
    " 's",
    " 'sa",
    "x 's",
    "HelloWorld'S",
    "helloWORLD's",
    "ABCdef'll",
    "ǅemal'S",
    "ᾈbc",
    "ʰA",
    "ʰAb",
    "AʰB.",
    "AAʰBBc",
    "々AB",
    "中文A",
    "A中文",
    "e\u{301}",
    "E\u{301}\u{302}",
    "\u{301}",
    "\u{301}A",
    "\u{301}a",
    "\u{301}\u{301}A",
    " \u{301}A",
    ".\u{301}A",
    "\u{301}'s",
    "A\u{301}'s'S",
    "ः",
    "क्षि",
    "नमस्ते दुनिया",
    "\u{20dd}x",
    "x\u{20dd}",
    "1",
    "12",
    "123",
    "1234",
    "12345",
    "123456",
    "1234567",
    " 1234567",
    "a1234567b",
    "٣٤٥٦",
    "Ⅻ½²3",
    "½a",
    "3.14159",
    "2024-01-01",
    "$100",
    "x\r\ny",
    "x\n\ny",
    "\r\n",
    "\r\n\r\n",
    "\n",
    "\n\n\n",
    "a\n",
    "a\n\n",
    "a \n",
    "a\n ",
    "a \n b",
    "a  \n  b",
    "a\t\nb",
    " \r\n \r\n x",
    "a  ",
    "a   b",
    "a \t b",
    "a\t\tb",
    "  leading",
    "trailing  ",
    "\u{a0}x",
    "\u{a0}\u{a0}x",
    "x\u{a0}",
    "\u{3000}中",
    "\u{3000}\u{3000}中",
    "\u{2028}x",
    "x\u{2028}\u{2029}y",
    "\u{85}x",
    "\u{1680}\u{2000}\u{200a}\u{202f}\u{205f}x",
    "\u{1c}\u{1d}\u{1e}\u{1f}x",
    "\u{b}\u{c}x",
    " \u{b}x",
    "  .",
    " .",
    " ..",
    ". ",
    "...\n\n",
    "..\r\n/",
    " //\n//x",
    "a/b",
    " /\n/\r",
    "x: \n",
    "!!! ???\n",
    "(x)",
    " (x)",
    "😀",
    "😀😀 😀",
    "👨\u{200d}👩\u{200d}👧",
    "👍🏽",
    "❤\u{fe0f}",
    "🇺🇸",
    "a\u{fe0f}b",
    "\u{200d}a",
    "\u{feff}text",
    "tab\there",
    "mixed\r\n\tindent",
    "def f(x):\n    return x ** 2\n",
    "    \n    x",
    "Привет, мир!",
    "Γειά σου Κόσμε",
    "こんにちは世界",
    "안녕하세요",
    "مرحبا بالعالم",
    "שלום עולם",
    "สวัสดีชาวโลก",
    "𝐀𝐁𝐂𝐚𝐛𝐜",
    "ＡＢＣａｂｃ１２３",
    "x\u{e0041}y",
    "\u{10ffff}",
    "\u{fffd}\u{fffd}",
];

#[test]
fn tricky_strings() {
    for text in TRICKY {
        check_all(text);
    }
}

#[test]
fn long_runs() {
    let cases = [
        "A".repeat(500),
        format!("ʰ{}", "A".repeat(500)),
        format!("{}ʰ", "A".repeat(500)),
        "\u{301}".repeat(300),
        format!("!{}", "\u{301}".repeat(300)),
        " ".repeat(300),
        format!("{}x", " ".repeat(300)),
        format!("{}\n{}x", " ".repeat(200), " ".repeat(200)),
        "1".repeat(301),
        "'s".repeat(100),
        "ab'S".repeat(100),
        ".\n".repeat(100),
    ];
    for text in &cases {
        check_all(text);
    }
}

/// Representatives of every class combination the scanners distinguish, in
/// 1- to 4-byte encodings, plus the characters the patterns name literally
/// (the exhaustive table test covers the other members of each class).
const ALPHABET: &[char] = &[
    'a', 'Z', 'ǅ', 'ʰ', '中', '\u{301}', '7', '½', ' ', '\t', '\n', '\r', '\u{a0}', '\u{3000}',
    '\u{1c}', '\'', 's', 'S', 'ſ', 'l', 'L', 'e', 'v', 'R', 't', 'd', 'M', '.', '/', '😀',
];

/// Every string of up to three characters over [`ALPHABET`], and of four
/// characters over a smaller one.
#[test]
fn all_short_strings() {
    let mut buf = String::new();
    for &a in ALPHABET {
        for &b in ALPHABET {
            for &c in ALPHABET {
                buf.clear();
                buf.extend([a, b, c]);
                check_all(&buf);
                check_all(&buf[..a.len_utf8() + b.len_utf8()]);
            }
            check_all(&buf[..a.len_utf8()]);
        }
    }
    const SMALL: &[char] = &['a', 'Z', 'ʰ', '\u{301}', '1', ' ', '\n', '\'', 's', '/'];
    for &a in SMALL {
        for &b in SMALL {
            for &c in SMALL {
                for &d in SMALL {
                    buf.clear();
                    buf.extend([a, b, c, d]);
                    check_all(&buf);
                }
            }
        }
    }
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Code point ranges from many scripts and categories.
const RANGES: &[(u32, u32)] = &[
    (0x20, 0x7e),       // ASCII printable
    (0xa0, 0xff),       // Latin-1 (letters, symbols, NBSP, ², ½)
    (0x100, 0x24f),     // Latin Extended (incl. Lt ǅ ǈ ǋ ǲ)
    (0x250, 0x2ff),     // IPA, modifier letters (Lm) and symbols (Sk)
    (0x300, 0x36f),     // combining diacritics (Mn)
    (0x370, 0x3ff),     // Greek
    (0x400, 0x52f),     // Cyrillic (incl. Me U+0488)
    (0x530, 0x58f),     // Armenian
    (0x590, 0x5ff),     // Hebrew (Mn, Lo)
    (0x600, 0x6ff),     // Arabic (Lo, Mn, Nd, Cf)
    (0x900, 0x97f),     // Devanagari (Lo, Mn, Mc, Nd)
    (0xb80, 0xbff),     // Tamil
    (0xe00, 0xe7f),     // Thai
    (0x10a0, 0x10ff),   // Georgian (Lu, Ll, Lm)
    (0x13a0, 0x13ff),   // Cherokee
    (0x1680, 0x169f),   // Ogham (U+1680 space)
    (0x1e00, 0x1fff),   // Latin/Greek extended (Lt ᾈ..)
    (0x2000, 0x206f),   // general punctuation and spaces
    (0x2070, 0x218f),   // super/subscripts, letterlike, number forms (Nl)
    (0x20d0, 0x20ff),   // combining marks for symbols (Me)
    (0x2460, 0x24ff),   // enclosed alphanumerics (No, So)
    (0x3000, 0x30ff),   // CJK punctuation, kana (Lm 々 ー)
    (0x4e00, 0x4fff),   // CJK ideographs
    (0xa640, 0xa69f),   // Cyrillic Extended-B
    (0xac00, 0xac7f),   // Hangul
    (0xfe00, 0xfe0f),   // variation selectors (Mn)
    (0xff00, 0xffef),   // full/halfwidth forms
    (0x10400, 0x1044f), // Deseret (Lu/Ll astral)
    (0x1d400, 0x1d7ff), // mathematical alphanumerics
    (0x1e900, 0x1e95f), // Adlam (Lu, Ll, Mn, Nd)
    (0x1f300, 0x1faff), // emoji, skin tones (Sk)
    (0xe0000, 0xe007f), // tags (Cf)
];

/// Multi-character snippets that exercise the literal parts of the patterns.
const SNIPPETS: &[&str] = &[
    "'s",
    "'S",
    "'t",
    "'T",
    "'re",
    "'RE",
    "'rE",
    "'ve",
    "'Ve",
    "'m",
    "'M",
    "'ll",
    "'LL",
    "'Ll",
    "'d",
    "'D",
    "'ſ",
    "\r\n",
    "\r\n\r\n",
    " \n",
    "\n ",
    "  ",
    "   ",
    "//",
    " /",
    "\u{301}\u{301}",
];

const SPACES: &[char] = &[
    ' ', ' ', ' ', '\t', '\n', '\r', '\u{b}', '\u{c}', '\u{85}', '\u{a0}', '\u{1680}', '\u{2000}',
    '\u{2007}', '\u{200a}', '\u{2028}', '\u{2029}', '\u{202f}', '\u{205f}', '\u{3000}', '\u{1c}',
    '\u{200b}',
];

fn random_char(rng: &mut Rng, out: &mut String) {
    match rng.below(16) {
        0..=3 => {
            out.push(char::from(b' ' + rng.below(95) as u8));
        }
        4..=6 => out.push(*rng.pick(SPACES)),
        7 => out.push_str(SNIPPETS[rng.below(SNIPPETS.len())]),
        8..=12 => {
            let &(lo, hi) = rng.pick(RANGES);
            let cp = lo + rng.below((hi - lo + 1) as usize) as u32;
            out.push(char::from_u32(cp).unwrap());
        }
        13 => out.push(*rng.pick(ALPHABET)),
        14 => {
            if let Some(c) = char::from_u32(rng.below(0x10000) as u32) {
                out.push(c);
            }
        }
        _ => {
            if let Some(c) = char::from_u32(rng.below(0x110000) as u32) {
                out.push(c);
            }
        }
    }
}

#[test]
fn fuzz_against_fancy_regex() {
    let mut rng = Rng(0x5eed_f00d_70c3);
    let mut text = String::new();
    for _ in 0..6000 {
        text.clear();
        let len = rng.below(33);
        for _ in 0..len {
            random_char(&mut rng, &mut text);
        }
        check_all(&text);
    }
}

/// Low-entropy fuzzing: few distinct characters, so runs and interactions
/// between neighbouring alternatives are frequent.
#[test]
fn fuzz_small_alphabets() {
    let mut rng = Rng(42);
    let mut text = String::new();
    for _ in 0..3000 {
        let alphabet: Vec<char> = (0..2 + rng.below(4)).map(|_| *rng.pick(ALPHABET)).collect();
        text.clear();
        for _ in 0..rng.below(40) {
            text.push(*rng.pick(&alphabet));
        }
        check_all(&text);
    }
}

#[test]
fn iterator_and_callback_agree() {
    for text in TRICKY {
        for preset in PRESETS {
            let collected = pieces(preset, text);
            assert_eq!(collected.concat(), *text);
            assert!(collected.iter().all(|p| !p.is_empty()));
        }
    }
}

/// Each window selector the scanners use marks exactly the ASCII bytes whose
/// class passes the test it stands for, at every position, and no byte of
/// a multi-byte character.
#[test]
fn windows_agree_with_the_class_table() {
    type Pair = (fn(&Window) -> u32, fn(u8) -> bool);
    let pairs: [Pair; 6] = [
        (Window::letter, |c| c & LETTER != 0),
        (|w| w.upper, |c| c & UPPER != 0),
        (|w| w.lower, |c| c & LOWER != 0),
        (|w| w.digit, |c| c & NUMBER != 0),
        (|w| w.space, |c| c & SPACE != 0),
        (Window::other, is_other),
    ];
    for byte in 0..=255u8 {
        for at in 0..WINDOW {
            let mut bytes = [0x80u8; WINDOW + 1];
            bytes[at] = byte;
            let w = window(&bytes, 0).unwrap();
            assert_eq!(w.ascii, u32::from(byte.is_ascii()) << at, "byte {byte:#x}");
            for (k, (select, test)) in pairs.iter().enumerate() {
                let want = byte.is_ascii() && test(classify(char::from(byte)));
                assert_eq!(
                    select(&w),
                    u32::from(want) << at,
                    "selector {k}, byte {byte:#x} at {at}"
                );
            }
        }
    }
}

/// Long runs of one ASCII class (the scanners take them a window at a
/// time), broken by characters of every kind, at every offset.
#[test]
fn fuzz_ascii_runs_across_windows() {
    const RUNS: [&[u8]; 6] = [
        b"abcdefghijklmnopqrstuvwxyz",
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        b"aAbBzZ",
        b"0123456789",
        b"  \t\n\r\x0b\x0c",
        b"!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~'",
    ];
    let mut rng = Rng(0xa5c1_1f00d);
    let mut text = String::new();
    for _ in 0..3000 {
        text.clear();
        for _ in 0..1 + rng.below(6) {
            let run = *rng.pick(&RUNS);
            for _ in 0..rng.below(3 * WINDOW) {
                text.push(char::from(*rng.pick(run)));
            }
            for _ in 0..rng.below(3) {
                random_char(&mut rng, &mut text);
            }
        }
        check_all(&text);
    }
}

/// The SIMD window and the byte-by-byte one (other targets') agree.
#[test]
fn simd_and_byte_by_byte_windows_agree() {
    let mut rng = Rng(16);
    for _ in 0..20_000 {
        let bytes: [u8; WINDOW] = std::array::from_fn(|_| match rng.below(3) {
            0 => rng.below(256) as u8,
            _ => rng.below(128) as u8,
        });
        assert_eq!(
            window(&bytes, 0),
            Some(window_byte_by_byte(&bytes)),
            "{bytes:x?}"
        );
    }
}

/// ASCII that meets every rule of the block scanner: letters of both cases
/// (contraction letters among them), digits, each kind of whitespace, the
/// slash and apostrophe, other punctuation and controls.
const BLOCK_ASCII: &[u8] = b"aAzZsStTmMdDlLrReEvVx0179 \t\n\r\x0b\x0c/'.;(-_\"#\x00\x1c\x7f";

/// Texts longer than a block, so the block scanner takes them (it needs
/// text after a block): the block and per-piece scanners and fancy-regex
/// agree on every piece.
fn check_blocks(text: &str) {
    for preset in [Preset::Cl100k, Preset::O200k] {
        let got = pieces(preset, text);
        assert_eq!(
            got,
            super::pieces_by_piece(preset, text),
            "{preset:?}: block and per-piece scanners split {text:?} apart"
        );
    }
}

fn random_ascii(rng: &mut Rng, alphabet: &[u8], len: usize, text: &mut String) {
    text.clear();
    for _ in 0..len {
        text.push(char::from(*rng.pick(alphabet)));
    }
}

#[test]
fn blocks_agree_with_fancy_regex() {
    let mut rng = Rng(0xb10c);
    let mut text = String::new();
    for round in 0..1500 {
        // Each round's own few characters: runs and neighbours of each kind.
        let alphabet: Vec<u8> = if round % 3 == 0 {
            BLOCK_ASCII.to_vec()
        } else {
            (0..2 + rng.below(6))
                .map(|_| *rng.pick(BLOCK_ASCII))
                .collect()
        };
        let len = 65 + rng.below(200);
        random_ascii(&mut rng, &alphabet, len, &mut text);
        for preset in [Preset::Cl100k, Preset::O200k] {
            check(preset, &text);
        }
        check_blocks(&text);
    }
}

#[test]
fn blocks_agree_with_the_per_piece_scanners() {
    let mut rng = Rng(0x5ca1ab1e);
    let mut text = String::new();
    for round in 0..60_000 {
        let alphabet: Vec<u8> = if round % 4 == 0 {
            BLOCK_ASCII.to_vec()
        } else {
            (0..2 + rng.below(5))
                .map(|_| *rng.pick(BLOCK_ASCII))
                .collect()
        };
        let len = 65 + rng.below(100);
        random_ascii(&mut rng, &alphabet, len, &mut text);
        check_blocks(&text);
    }
}

/// Non-ASCII characters among ASCII: blocks end before them, and the text
/// around them goes piece by piece.
#[test]
fn blocks_meet_non_ascii_text() {
    let mut rng = Rng(0xc0de);
    let mut text = String::new();
    for _ in 0..4000 {
        text.clear();
        let len = 65 + rng.below(200);
        while text.len() < len {
            if rng.below(12) == 0 {
                random_char(&mut rng, &mut text);
            } else {
                text.push(char::from(*rng.pick(BLOCK_ASCII)));
            }
        }
        check_blocks(&text);
        check(Preset::O200k, &text);
        check(Preset::Cl100k, &text);
    }
}

/// Each snippet of `SNIPPETS`, and the tricky ASCII strings, at every offset
/// of a block, after and before ASCII of each kind.
#[test]
fn blocks_see_snippets_at_every_offset() {
    let fillers = ["a", "A", " ", "1", ".", "\n", "a'", "x\t", "+\n"];
    let ascii_tricky = TRICKY.iter().filter(|t| t.is_ascii());
    let snippets: Vec<&str> = SNIPPETS
        .iter()
        .copied()
        .chain(ascii_tricky.copied())
        .collect();
    for snippet in snippets {
        for before in fillers {
            for after in fillers {
                for offset in 0..=BLOCK + 2 {
                    let text = format!(
                        "{}{snippet}{}",
                        before.repeat(offset.div_ceil(before.len())),
                        after.repeat(80)
                    );
                    check_blocks(&text);
                }
            }
        }
    }
}

/// The SIMD classes and the byte-by-byte ones (other targets') agree.
#[test]
fn simd_and_byte_by_byte_block_classes_agree() {
    let mut rng = Rng(64);
    for _ in 0..20_000 {
        let bytes: [u8; BLOCK] = std::array::from_fn(|_| match rng.below(3) {
            0 => rng.below(256) as u8,
            _ => rng.below(128) as u8,
        });
        let want = classify_byte_by_byte(&bytes);
        assert_eq!(blocks::classify(&bytes), want, "{bytes:x?}");
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(blocks::classify_sse2(&bytes), want, "{bytes:x?}");
            if std::arch::is_x86_feature_detected!("avx512bw") {
                // SAFETY: the CPU has AVX-512BW.
                assert_eq!(unsafe { blocks::classify_avx512(&bytes) }, want);
            }
        }
    }
}
