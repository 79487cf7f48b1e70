//! Exact, allocation-free pre-tokenizer for the tiktoken split patterns.
//!
//! A hand-written scanner per preset reproduces, piece for piece, what
//! `regex.findall(pattern, text)` (Python's `regex` module) and `fancy-regex`
//! (as used by tiktoken) return for the gpt2/r50k/p50k, cl100k and o200k
//! patterns. Each scanner decides, at the start of every piece, which
//! alternative of the pattern matches first and how far it extends, emulating
//! the engines' backtracking (`\s+(?!\S)`, `\s*[\r\n]`, o200k's overlapping
//! case classes) without a regex engine. Pieces are subslices of the input.
//!
//! Unicode tables: `unicode-general-category` 1.1.0 (Unicode 16.0.0) plus the
//! fixed `White_Space` list, which agrees with `regex-syntax` 0.8 (Unicode
//! 16.0.0) used by `fancy-regex`; the tests check this exhaustively.

pub(crate) mod blocks;
mod cl100k;
pub(crate) mod classes;
mod gpt2;
mod o200k;
#[cfg(test)]
mod tests;

/// The split pattern to emulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Preset {
    /// gpt2 / r50k_base / p50k_base / p50k_edit.
    Gpt2,
    /// cl100k_base.
    Cl100k,
    /// o200k_base / o200k_harmony.
    O200k,
}

impl Preset {
    /// Looks a preset up by its name or by the name of a tiktoken encoding
    /// that uses its pattern.
    pub fn from_name(name: &str) -> Option<Preset> {
        match name {
            "gpt2" | "r50k" | "r50k_base" | "p50k" | "p50k_base" | "p50k_edit" => {
                Some(Preset::Gpt2)
            }
            "cl100k" | "cl100k_base" => Some(Preset::Cl100k),
            "o200k" | "o200k_base" | "o200k_harmony" => Some(Preset::O200k),
            _ => None,
        }
    }

    /// The canonical name (the inverse of [`Preset::from_name`]).
    pub fn name(self) -> &'static str {
        match self {
            Preset::Gpt2 => "gpt2",
            Preset::Cl100k => "cl100k",
            Preset::O200k => "o200k",
        }
    }

    /// The tiktoken regex this preset reproduces (for reference and tests).
    pub fn pattern(self) -> &'static str {
        match self {
            Preset::Gpt2 => GPT2_PATTERN,
            Preset::Cl100k => CL100K_PATTERN,
            Preset::O200k => O200K_PATTERN,
        }
    }
}

/// tiktoken's `r50k_pat_str`.
pub const GPT2_PATTERN: &str =
    r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s";

/// tiktoken's cl100k_base `pat_str`.
pub const CL100K_PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";

/// tiktoken's o200k_base `pat_str`.
pub const O200K_PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"\p{N}{1,3}",
    "|",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    "|",
    r"\s*[\r\n]+",
    "|",
    r"\s+(?!\S)",
    "|",
    r"\s+",
);

#[inline(always)]
fn drive<'a>(text: &'a str, next_end: impl Fn(&[u8], usize) -> usize, mut f: impl FnMut(&'a str)) {
    let bytes = text.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        let end = next_end(bytes, start);
        debug_assert!(end > start && text.is_char_boundary(end));
        f(&text[start..end]);
        start = end;
    }
}

/// Calls `f` with every piece of `text`, in order. The pieces are non-empty,
/// contiguous subslices of `text` that concatenate back to it.
pub fn for_each_piece<'a>(preset: Preset, text: &'a str, f: impl FnMut(&'a str)) {
    // One monomorphic loop per preset so the scanner inlines into it.
    match preset {
        Preset::Gpt2 => drive(text, gpt2::next_end, f),
        Preset::Cl100k => blocks::drive(preset, text, cl100k::next_end, f),
        Preset::O200k => blocks::drive(preset, text, o200k::next_end, f),
    }
}

/// `for_each_piece` by the per-piece scanners alone (the tests' reference
/// for the block scanner).
#[cfg(test)]
pub fn pieces_by_piece(preset: Preset, text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let push = |piece| out.push(piece);
    match preset {
        Preset::Gpt2 => drive(text, gpt2::next_end, push),
        Preset::Cl100k => drive(text, cl100k::next_end, push),
        Preset::O200k => drive(text, o200k::next_end, push),
    }
    out
}

/// All pieces of `text`, collected.
pub fn pieces(preset: Preset, text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for_each_piece(preset, text, |piece| out.push(piece));
    out
}
