//! Character classification shared by the preset scanners.
//!
//! Every character is reduced to a small bit set describing the regex classes
//! that the tiktoken patterns use. ASCII goes through a 128-entry table built
//! at compile time, the rest of the Basic Multilingual Plane through a table
//! built at first use, and the other planes through `unicode-general-category`
//! (Unicode 16.0.0, the same Unicode version as the `regex-syntax` 0.8 tables
//! that `fancy-regex` and therefore tiktoken use), from which both tables come.

use std::sync::LazyLock;
use unicode_general_category::{get_general_category, GeneralCategory as Gc};

/// `\p{L}`
pub const LETTER: u8 = 1 << 0;
/// `\p{N}`
pub const NUMBER: u8 = 1 << 1;
/// `\s` (the Unicode `White_Space` property)
pub const SPACE: u8 = 1 << 2;
/// `[\r\n]`
pub const NEWLINE: u8 = 1 << 3;
/// o200k's `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`
pub const UPPER: u8 = 1 << 4;
/// o200k's `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`
pub const LOWER: u8 = 1 << 5;

/// `[^\s\p{L}\p{N}]`: "other" (punctuation, symbols, marks, controls, ...).
#[inline(always)]
pub fn is_other(class: u8) -> bool {
    class & (SPACE | LETTER | NUMBER) == 0
}

/// `[^\r\n\p{L}\p{N}]`: the optional one-character prefix of a word.
#[inline(always)]
pub fn is_prefix(class: u8) -> bool {
    class & (NEWLINE | LETTER | NUMBER) == 0
}

const ASCII: [u8; 128] = build_ascii_table();

const fn build_ascii_table() -> [u8; 128] {
    let mut table = [0u8; 128];
    let mut i = 0;
    while i < 128 {
        let b = i as u8;
        table[i] = if b.is_ascii_uppercase() {
            LETTER | UPPER
        } else if b.is_ascii_lowercase() {
            LETTER | LOWER
        } else if b.is_ascii_digit() {
            NUMBER
        } else if b == b'\r' || b == b'\n' {
            SPACE | NEWLINE
        } else if (b >= b'\t' && b <= 0x0c) || b == b' ' {
            // \t \n \v \f \r and space; 0x1c..=0x1f are *not* White_Space.
            SPACE
        } else {
            0
        };
        i += 1;
    }
    table
}

/// Class of a non-ASCII code point.
#[inline]
fn classify_non_ascii(c: char) -> u8 {
    match get_general_category(c) {
        Gc::UppercaseLetter | Gc::TitlecaseLetter => LETTER | UPPER,
        Gc::LowercaseLetter => LETTER | LOWER,
        Gc::ModifierLetter | Gc::OtherLetter => LETTER | UPPER | LOWER,
        Gc::NonspacingMark | Gc::SpacingMark | Gc::EnclosingMark => UPPER | LOWER,
        Gc::DecimalNumber | Gc::LetterNumber | Gc::OtherNumber => NUMBER,
        // Every Zs/Zl/Zp character is White_Space, and U+0085 is the only
        // non-ASCII White_Space character outside them (checked exhaustively
        // against the regex crate in the tests).
        Gc::SpaceSeparator | Gc::LineSeparator | Gc::ParagraphSeparator => SPACE,
        Gc::Control if c == '\u{85}' => SPACE,
        _ => 0,
    }
}

/// Class of any character: what the table of the Basic Multilingual Plane
/// is built from, and what the tests check against (the scanners use
/// [`class_at`]).
pub fn classify(c: char) -> u8 {
    if c.is_ascii() {
        ASCII[c as usize]
    } else {
        classify_non_ascii(c)
    }
}

/// Class and UTF-8 length of the character starting at byte `i` of `b`.
///
/// `b` must be the bytes of a `str` and `i` a character boundary inside it.
#[inline(always)]
pub fn class_at(b: &[u8], i: usize) -> (u8, usize) {
    let b0 = b[i];
    if b0 < 0x80 {
        (ASCII[b0 as usize], 1)
    } else {
        class_at_non_ascii(b, i)
    }
}

/// The classes of the Basic Multilingual Plane, one byte per code point
/// (64 KB, built at first use in 0.1 ms): a character costs one load, where
/// `get_general_category` takes two and a match on the category. The
/// pre-tokenizers got 13-24% faster on the multilingual slice (o200k,
/// cl100k, gpt2) and 3-6% on the mostly-ASCII bench corpus. Surrogates,
/// which valid UTF-8 never holds, are 0.
static BMP: LazyLock<Box<[u8]>> = LazyLock::new(|| {
    (0..0x10000u32)
        .map(|cp| char::from_u32(cp).map_or(0, classify))
        .collect()
});

#[inline]
fn class_at_non_ascii(b: &[u8], i: usize) -> (u8, usize) {
    let b0 = b[i] as u32;
    let cont = |k: usize| (b[i + k] & 0x3f) as u32;
    let (cp, len) = if b0 < 0xe0 {
        (((b0 & 0x1f) << 6) | cont(1), 2)
    } else if b0 < 0xf0 {
        (((b0 & 0x0f) << 12) | (cont(1) << 6) | cont(2), 3)
    } else {
        (
            ((b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3),
            4,
        )
    };
    let class = match BMP.get(cp as usize) {
        Some(&class) => class,
        // Valid UTF-8 never decodes to a surrogate or past U+10FFFF.
        None => char::from_u32(cp).map_or(0, classify_non_ascii),
    };
    (class, len)
}

/// End of the longest run of characters from `i` whose class satisfies `pred`.
#[inline(always)]
pub fn run_while(b: &[u8], mut i: usize, pred: impl Fn(u8) -> bool) -> usize {
    while i < b.len() {
        let b0 = b[i];
        if b0 < 0x80 {
            if !pred(ASCII[b0 as usize]) {
                break;
            }
            i += 1;
        } else {
            let (class, len) = class_at_non_ascii(b, i);
            if !pred(class) {
                break;
            }
            i += len;
        }
    }
    i
}

/// Bytes a [`Window`] covers.
pub const WINDOW: usize = 16;

/// The ASCII classes of the `WINDOW` bytes from some offset, one bit per
/// byte (bit k for the k-th byte). No byte of a multi-byte character is in
/// any of them, `ascii` included. Runs then end without a branch per byte:
/// the byte loops mispredicted their exit once a piece, and most pieces are
/// a few ASCII bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// `A-Z`: the ASCII part of `\p{L}`, and all of o200k's UPPER there.
    pub upper: u32,
    /// `a-z`: the rest of ASCII `\p{L}`, and all of o200k's LOWER there.
    pub lower: u32,
    /// `0-9`: ASCII `\p{N}`.
    pub digit: u32,
    /// `\t`-`\r` and the space: ASCII `\s`.
    pub space: u32,
    pub ascii: u32,
}

impl Window {
    pub fn letter(&self) -> u32 {
        self.upper | self.lower
    }

    /// ASCII `[^\s\p{L}\p{N}]`.
    pub fn other(&self) -> u32 {
        self.ascii & !(self.upper | self.lower | self.digit | self.space)
    }
}

/// The window of `b` from `i`, or None when fewer than `WINDOW` bytes are left.
#[inline(always)]
pub fn window(b: &[u8], i: usize) -> Option<Window> {
    let bytes: &[u8; WINDOW] = b.get(i..i + WINDOW)?.try_into().ok()?;
    Some(window_of(bytes))
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn window_of(bytes: &[u8; WINDOW]) -> Window {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of x86_64; the load reads exactly the 16 bytes
    // of `bytes`, unaligned loads being allowed.
    unsafe {
        let v = _mm_loadu_si128(bytes.as_ptr().cast());
        // Signed compares: bytes of multi-byte characters are negative, so
        // below every range's start.
        let range = |lo: u8, hi: u8| {
            let above = _mm_cmpgt_epi8(v, _mm_set1_epi8(lo as i8 - 1));
            let below = _mm_cmplt_epi8(v, _mm_set1_epi8(hi as i8 + 1));
            _mm_movemask_epi8(_mm_and_si128(above, below)) as u32
        };
        let space = _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b' ' as i8))) as u32;
        Window {
            upper: range(b'A', b'Z'),
            lower: range(b'a', b'z'),
            digit: range(b'0', b'9'),
            space: space | range(b'\t', b'\r'),
            ascii: !_mm_movemask_epi8(v) as u32 & 0xffff,
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn window_of(bytes: &[u8; WINDOW]) -> Window {
    window_byte_by_byte(bytes)
}

/// `window_of` without SIMD: the other targets' version, and the tests' reference.
#[cfg(any(test, not(target_arch = "x86_64")))]
pub fn window_byte_by_byte(bytes: &[u8; WINDOW]) -> Window {
    let mut w = Window {
        upper: 0,
        lower: 0,
        digit: 0,
        space: 0,
        ascii: 0,
    };
    for (k, &c) in bytes.iter().enumerate() {
        let bit = 1 << k;
        let set = |mask: &mut u32, yes: bool| *mask |= if yes { bit } else { 0 };
        set(&mut w.upper, c.is_ascii_uppercase());
        set(&mut w.lower, c.is_ascii_lowercase());
        set(&mut w.digit, c.is_ascii_digit());
        set(&mut w.space, c == b' ' || (b'\t'..=b'\r').contains(&c));
        set(&mut w.ascii, c.is_ascii());
    }
    w
}

/// `run_while` a window at a time: `in_window` gives the bits of the ASCII
/// bytes whose class satisfies `pred` (they must agree; a test checks every
/// caller's pair). Multi-byte characters are classified one by one.
#[inline(always)]
pub fn run_fast(
    b: &[u8],
    mut i: usize,
    in_window: impl Fn(&Window) -> u32,
    pred: impl Fn(u8) -> bool,
) -> usize {
    loop {
        match b.get(i) {
            None => return i,
            // A multi-byte character: classified on its own, so text of
            // other scripts pays no window per character.
            Some(&c) if c >= 0x80 => {
                let (class, len) = class_at_non_ascii(b, i);
                if !pred(class) {
                    return i;
                }
                i += len;
            }
            // Most runs of other scripts end at an ASCII space or mark:
            // found without building a window.
            Some(&c) if !pred(ASCII[c as usize]) => return i,
            Some(_) => {
                let Some(w) = window(b, i) else {
                    return run_while(b, i, pred);
                };
                let stop = (!in_window(&w)).trailing_zeros() as usize;
                i += stop.min(WINDOW);
                if stop < WINDOW && b[i] < 0x80 {
                    return i;
                }
            }
        }
    }
}

/// End of the longest run of bytes from `i` that are in `set` (ASCII only).
#[inline(always)]
pub fn run_bytes(b: &[u8], mut i: usize, set: impl Fn(u8) -> bool) -> usize {
    while i < b.len() && set(b[i]) {
        i += 1;
    }
    i
}

/// A maximal run of `\s` characters.
pub struct SpaceRun {
    /// Byte offset just past the run.
    pub end: usize,
    /// Byte offset where the run's last character starts.
    pub last_start: usize,
    /// Byte offset just past the run's last `\r` or `\n`, if it has one.
    pub past_last_newline: Option<usize>,
}

/// Scans the maximal run of whitespace starting at `i` (which must be `\s`).
#[inline]
pub fn space_run(b: &[u8], mut i: usize) -> SpaceRun {
    let mut last_start = i;
    let mut past_last_newline = None;
    while i < b.len() {
        // Runs of ASCII whitespace (indentation, blank lines) a window at a
        // time: the newlines among them are found from the run's bytes.
        if let Some(w) = window(b, i).filter(|_| b[i] < 0x80) {
            let n = ((!w.space).trailing_zeros() as usize).min(WINDOW);
            if n > 0 {
                let run = &b[i..i + n];
                if let Some(k) = run.iter().rposition(|&c| c == b'\n' || c == b'\r') {
                    past_last_newline = Some(i + k + 1);
                }
                last_start = i + n - 1;
                i += n;
                continue;
            }
        }
        let (class, len) = class_at(b, i);
        if class & SPACE == 0 {
            break;
        }
        last_start = i;
        i += len;
        if class & NEWLINE != 0 {
            past_last_newline = Some(i);
        }
    }
    SpaceRun {
        end: i,
        last_start,
        past_last_newline,
    }
}

/// `'(?i:[sdmt]|ll|ve|re)` after the apostrophe at `i - 1`: the end of the
/// contraction, if one starts at `i`. Case-insensitive matching uses simple
/// case folding, so `s` also matches U+017F LATIN SMALL LETTER LONG S.
#[inline]
pub fn contraction_ci(b: &[u8], i: usize) -> Option<usize> {
    let lower = |k: usize| b.get(i + k).map(|c| c.to_ascii_lowercase());
    match lower(0)? {
        b's' | b'd' | b'm' | b't' => Some(i + 1),
        b'l' if lower(1) == Some(b'l') => Some(i + 2),
        b'v' | b'r' if lower(1) == Some(b'e') => Some(i + 2),
        // "ſ" is C5 BF in UTF-8.
        0xc5 if b.get(i + 1) == Some(&0xbf) => Some(i + 2),
        _ => None,
    }
}

/// `'(?:[sdmt]|ll|ve|re)` (case-sensitive) after the apostrophe at `i - 1`.
#[inline]
pub fn contraction_cs(b: &[u8], i: usize) -> Option<usize> {
    let at = |k: usize| b.get(i + k).copied();
    match at(0)? {
        b's' | b'd' | b'm' | b't' => Some(i + 1),
        b'l' if at(1) == Some(b'l') => Some(i + 2),
        b'v' | b'r' if at(1) == Some(b'e') => Some(i + 2),
        _ => None,
    }
}
