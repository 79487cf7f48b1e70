//! Piece starts of ASCII text, 64 bytes at a time, for cl100k and o200k.
//!
//! The per-piece scanners decide each piece with branches on its first
//! characters; on source code, where a piece averages four bytes, those
//! branches mispredicted about once a piece and the scanner took about 40%
//! of encoding. Here the classes of a block's bytes become bitmasks (bit k
//! for byte k) and each rule of the pattern one expression over whole
//! masks: "an uppercase letter after a lowercase one starts a piece" is
//! `upper & lower << 1`, for all 64 bytes at once, without a branch.
//!
//! A block starts where a piece starts: the pattern is matched from there on,
//! so what precedes the block does not matter. What follows it may: only
//! starts below a limit are kept (two bytes before the block's end or its
//! first non-ASCII byte, a contraction's lookahead; never past the start of a
//! run of whitespace that reaches that end, whose pieces depend on where it
//! ends), and the next block starts at the last start kept. A block that
//! proves no start (one piece longer than the block) and the text around
//! non-ASCII characters go to the per-piece scanner.
//!
//! Rules, for ASCII (what each alternative of the patterns does to the
//! pieces that precede and follow it):
//! - a letter continues a letter run; o200k starts a piece at an uppercase
//!   letter after a lowercase one (`[UPPER]*[LOWER]+` then `[UPPER]+[LOWER]*`
//!   reduce to that on ASCII);
//! - the one character before a letter joins it (`[^\r\n\p{L}\p{N}]?`) when
//!   a piece starts at that character: always for a space or tab; for other
//!   punctuation only when it does not continue a run of punctuation or
//!   follow a space (` ?[^\s\p{L}\p{N}]+` took it);
//! - digits go in threes from the start of their run;
//! - punctuation runs (after an optional space) take the newlines after
//!   them (o200k: and slashes, `[\r\n/]*`): the tail;
//! - a run of whitespace is cut after its last newline (`\s*[\r\n]`), before
//!   its last character when at least two others are left (`\s+(?!\S)`),
//!   and that last character joins a following letter, or a following
//!   punctuation run if it is a space;
//! - contractions: `'s` and the like end a letter piece (o200k) or are a
//!   piece of their own where a piece starts (cl100k); the next character
//!   starts a piece.
//!
//! The tests check every start against the per-piece scanners and
//! fancy-regex on random text built to meet these rules at every offset.

use super::Preset;

/// Bytes in a block.
pub const BLOCK: usize = 64;

/// Bitmasks of a block's byte classes: bit k for byte k. Only ASCII bytes
/// are in any class (`ascii` included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Classes {
    pub upper: u64,
    pub lower: u64,
    pub digit: u64,
    /// The space, U+0020.
    pub space: u64,
    /// `\t`, `\v`, `\f`: the other ASCII `\s` that are not newlines.
    pub tab: u64,
    /// `\r`, `\n`.
    pub newline: u64,
    pub slash: u64,
    pub quote: u64,
    pub ascii: u64,
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn classify(block: &[u8; BLOCK]) -> Classes {
    if std::arch::is_x86_feature_detected!("avx512bw") {
        // SAFETY: the CPU has AVX-512BW (checked above).
        unsafe { classify_avx512(block) }
    } else {
        classify_sse2(block)
    }
}

/// `classify` with AVX-512BW: each class one compare of the 64 bytes into a
/// mask register (SSE2 takes four compares and four moves of 16-bit masks).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
pub fn classify_avx512(block: &[u8; BLOCK]) -> Classes {
    use std::arch::x86_64::*;
    // SAFETY: the load reads exactly the 64 bytes of `block`, unaligned
    // loads being allowed.
    let v = unsafe { _mm512_loadu_si512(block.as_ptr().cast()) };
    let eq = |b: u8| _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b as i8));
    // Unsigned `v - lo <= hi - lo`: bytes of multi-byte characters wrap
    // above every ASCII range.
    let range = |lo: u8, hi: u8| {
        let from_lo = _mm512_sub_epi8(v, _mm512_set1_epi8(lo as i8));
        _mm512_cmple_epu8_mask(from_lo, _mm512_set1_epi8((hi - lo) as i8))
    };
    Classes {
        upper: range(b'A', b'Z'),
        lower: range(b'a', b'z'),
        digit: range(b'0', b'9'),
        space: eq(b' '),
        tab: eq(b'\t') | eq(0x0b) | eq(0x0c),
        newline: eq(b'\n') | eq(b'\r'),
        slash: eq(b'/'),
        quote: eq(b'\''),
        ascii: !_mm512_movepi8_mask(v),
    }
}

/// `classify` with SSE2, which every x86_64 has.
#[cfg(target_arch = "x86_64")]
pub fn classify_sse2(block: &[u8; BLOCK]) -> Classes {
    use std::arch::x86_64::*;
    let mut c = Classes::default();
    for (k, chunk) in block.chunks_exact(16).enumerate() {
        // SAFETY: SSE2 is part of x86_64; the load reads the 16 bytes of
        // `chunk`, unaligned loads being allowed.
        let m = unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast());
            // Signed compares: bytes of multi-byte characters are negative,
            // below every range.
            let range = |lo: u8, hi: u8| {
                let above = _mm_cmpgt_epi8(v, _mm_set1_epi8(lo as i8 - 1));
                let below = _mm_cmplt_epi8(v, _mm_set1_epi8(hi as i8 + 1));
                _mm_movemask_epi8(_mm_and_si128(above, below)) as u16
            };
            let eq = |b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
            let mask = |x| _mm_movemask_epi8(x) as u16;
            let newline = _mm_or_si128(eq(b'\n'), eq(b'\r'));
            Classes {
                upper: range(b'A', b'Z').into(),
                lower: range(b'a', b'z').into(),
                digit: range(b'0', b'9').into(),
                space: mask(eq(b' ')).into(),
                tab: (range(b'\t', 0x0c) & !mask(eq(b'\n'))).into(),
                newline: mask(newline).into(),
                slash: mask(eq(b'/')).into(),
                quote: mask(eq(b'\'')).into(),
                ascii: (!mask(v)).into(),
            }
        };
        let at = 16 * k;
        c.upper |= m.upper << at;
        c.lower |= m.lower << at;
        c.digit |= m.digit << at;
        c.space |= m.space << at;
        c.tab |= m.tab << at;
        c.newline |= m.newline << at;
        c.slash |= m.slash << at;
        c.quote |= m.quote << at;
        c.ascii |= m.ascii << at;
    }
    c
}

#[cfg(not(target_arch = "x86_64"))]
pub fn classify(block: &[u8; BLOCK]) -> Classes {
    classify_byte_by_byte(block)
}

/// `classify` without SIMD: the other targets' version, and the tests' reference.
#[cfg(any(test, not(target_arch = "x86_64")))]
pub fn classify_byte_by_byte(block: &[u8; BLOCK]) -> Classes {
    let mut c = Classes::default();
    for (k, &b) in block.iter().enumerate() {
        let set = |mask: &mut u64, yes: bool| *mask |= u64::from(yes) << k;
        set(&mut c.upper, b.is_ascii_uppercase());
        set(&mut c.lower, b.is_ascii_lowercase());
        set(&mut c.digit, b.is_ascii_digit());
        set(&mut c.space, b == b' ');
        set(&mut c.tab, matches!(b, b'\t' | 0x0b | 0x0c));
        set(&mut c.newline, matches!(b, b'\n' | b'\r'));
        set(&mut c.slash, b == b'/');
        set(&mut c.quote, b == b'\'');
        set(&mut c.ascii, b.is_ascii());
    }
    c
}

/// Bits of `within` reachable from a bit of `seed` (which must be in
/// `within`) going up through consecutive bits of `within`: adding a seed
/// carries through the run above it.
#[inline(always)]
fn fill_up(seed: u64, within: u64) -> u64 {
    ((within.wrapping_add(seed) ^ within) & within) | seed
}

/// Bits of `within` from which consecutive bits of `within` reach a bit of
/// `seed` going up.
#[inline(always)]
fn fill_down(seed: u64, within: u64) -> u64 {
    let (mut x, mut m) = (seed & within, within);
    for shift in [1, 2, 4, 8, 16, 32] {
        x |= (x >> shift) & m;
        m &= m >> shift;
    }
    x
}

/// Letters a contraction takes after its apostrophe, given the two bytes
/// that follow it (`'s 't 'm 'd`, `'re 've 'll`, any case): 0 when none.
#[inline]
fn contraction_letters(b1: u8, b2: u8) -> u32 {
    match (b1 | 0x20, b2 | 0x20) {
        (b's' | b't' | b'm' | b'd', _) => 1,
        (b'l', b'l') | (b'r' | b'v', b'e') => 2,
        _ => 0,
    }
}

/// The piece starts that a block starting at a piece start proves: bit k
/// (0 < k) for a piece starting at byte k. Bit 0 is never set.
#[inline(always)]
pub fn starts(preset: Preset, c: &Classes, block: &[u8; BLOCK]) -> u64 {
    match preset {
        Preset::O200k => starts_of::<true>(c, block),
        _ => starts_of::<false>(c, block),
    }
}

#[inline(always)]
fn starts_of<const O200K: bool>(c: &Classes, block: &[u8; BLOCK]) -> u64 {
    // Bytes 0..known_len are ASCII: what lies beyond is not known here.
    let known_len = c.ascii.trailing_ones();
    if known_len < 4 {
        return 0;
    }
    let known = u64::MAX >> (64 - known_len);
    let (upper, lower, digit) = (c.upper & known, c.lower & known, c.digit & known);
    let (space, tab, newline) = (c.space & known, c.tab & known, c.newline & known);
    let letter = upper | lower;
    let white = space | tab | newline;
    let other = known & !(letter | digit | white);

    // The tail of each punctuation run: the newlines (o200k: and slashes)
    // from a newline right after it.
    let tail_chars = if O200K {
        newline | (c.slash & known)
    } else {
        newline
    };
    let tail = fill_up(newline & other << 1, tail_chars);
    let punct = other & !tail;
    let ws = white & !tail;

    let mut limit = known_len - 2;

    // Contractions: an apostrophe after a letter (o200k), or where a piece
    // starts (cl100k: not after a space or punctuation, which take it).
    let quotes = if O200K {
        c.quote & known & letter << 1
    } else {
        c.quote & known & !((space | punct) << 1)
    };
    // `inside`: the apostrophes and letters of contractions that no piece
    // starts at; `after`: the byte after each contraction, where one does.
    let (mut inside, mut after) = (0u64, 0u64);
    let mut q = quotes;
    while q != 0 {
        let k = q.trailing_zeros();
        q &= q - 1;
        if k + 2 >= known_len {
            limit = limit.min(k);
            break;
        }
        // o200k: the letter before must not be a contraction's, which ends its piece.
        if O200K && inside >> (k - 1) & 1 != 0 {
            continue;
        }
        let n = contraction_letters(block[k as usize + 1], block[k as usize + 2]);
        if n > 0 {
            let own = if O200K { 0 } else { 1 };
            inside |= ((1u64 << (n + 1)) - 1 - own) << k;
            // Past the block only when the limit is below it anyway.
            after |= 1u64.checked_shl(k + n + 1).unwrap_or(0);
        }
    }

    // Letters: not after a letter (o200k: unless lowercase then uppercase),
    // nor after a space or tab, nor after punctuation that a piece starts at.
    let case_split = if O200K { upper & lower << 1 } else { 0 };
    let joined =
        (letter << 1 & !case_split) | ((space | tab) << 1) | (punct << 1 & !((space | punct) << 2));
    let letters = letter & !joined;

    // Digits: the first of each run, then every third.
    let mut groups = digit & !(digit << 1);
    let mut next = groups;
    loop {
        next = next << 3 & digit & digit << 1 & digit << 2;
        if next == 0 {
            break;
        }
        groups |= next;
    }

    // Punctuation: not within its run, nor after a space.
    let puncts = punct & !((space | punct) << 1);

    // Whitespace: where its run starts, after the run's last newline, and
    // at its last character when two or more without a newline precede it.
    let run_first = ws & !(ws << 1);
    let run_last = ws & !(ws >> 1);
    let newlines = newline & ws;
    let after_last_newline = ws & newlines << 1 & !fill_down(newlines, ws);
    let blank = ws & !newline;
    let last_alone = run_last & blank & blank << 1;
    let spaces = run_first | after_last_newline | last_alone;
    // A run reaching the end of what is known may go on: its pieces are
    // not known past its start.
    if ws >> (known_len - 1) & 1 != 0 {
        limit = limit.min(64 - run_first.leading_zeros());
    }

    let all = (letters | after | groups | puncts | spaces) & !inside;
    all & !1 & (u64::MAX >> (64 - limit.max(1)))
}

/// How many of the block's leading bytes are ASCII.
#[inline(always)]
pub fn ascii_prefix(block: &[u8; BLOCK]) -> u32 {
    let lo = u64::from_le_bytes(block[..8].try_into().unwrap());
    if lo & 0x8080_8080_8080_8080 != 0 {
        return (lo & 0x8080_8080_8080_8080).trailing_zeros() / 8;
    }
    let mut n = 8;
    for chunk in block[8..].chunks_exact(8) {
        let x = u64::from_le_bytes(chunk.try_into().unwrap()) & 0x8080_8080_8080_8080;
        if x != 0 {
            return n + x.trailing_zeros() / 8;
        }
        n += 8;
    }
    n
}

/// Below this many ASCII bytes ahead, a block is not tried: the text up to
/// the next non-ASCII character goes piece by piece.
const MIN_ASCII: u32 = 16;

/// `f` with every piece of `text`: a block at a time where the text is
/// ASCII, else with `next_end`, the preset's per-piece scanner.
#[inline(always)]
pub fn drive<'a>(
    preset: Preset,
    text: &'a str,
    next_end: impl Fn(&[u8], usize) -> usize,
    mut f: impl FnMut(&'a str),
) {
    let b = text.as_bytes();
    let mut s = 0;
    // Pieces up to here go to `next_end` (non-ASCII text).
    let mut by_piece = 0;
    while s < b.len() {
        // A block needs text after it: only then is its last run of
        // whitespace not at the end of the text (`\s++$`, `\s+(?!\S)`).
        if s >= by_piece && s + BLOCK < b.len() {
            let block: &[u8; BLOCK] = b[s..s + BLOCK].try_into().unwrap();
            let ascii = ascii_prefix(block);
            if ascii < MIN_ASCII {
                by_piece = s + ascii as usize + 1;
            } else {
                let mut starts = starts(preset, &classify(block), block);
                if starts != 0 {
                    let base = s;
                    while starts != 0 {
                        let end = base + starts.trailing_zeros() as usize;
                        // SAFETY: `s` and `end` are at most `base + ascii`, and
                        // the bytes before it are ASCII: both are character
                        // boundaries of `text`, with `s < end`.
                        debug_assert!(end <= base + ascii as usize);
                        f(unsafe { text.get_unchecked(s..end) });
                        s = end;
                        starts &= starts - 1;
                    }
                    continue;
                }
            }
        }
        let end = next_end(b, s);
        debug_assert!(end > s && text.is_char_boundary(end));
        f(&text[s..end]);
        s = end;
    }
}
