//! Splitting text into the words BPE works on.
//!
//! Byte mode uses tiktoken's pre-tokenization patterns: the presets run on
//! the hand-written scanner (exact, and an order of magnitude faster than a
//! backtracking engine); any other regex runs on fancy-regex, the engine
//! tiktoken itself uses. Char mode splits on whitespace exactly like Python's
//! `str.split()` (optionally lowercasing first), because that is what the
//! articles' reference code does.
//!
//! Byte mode is lossless only if the pieces cover the text. tiktoken drops
//! what a pattern leaves unmatched (`\w+` encodes "Hello, world" as
//! "Helloworld"), so there is no reference to copy for the gaps: a custom
//! pattern that leaves any text unmatched is refused, when it is compiled if
//! it misses part of `PROBE`, else on the first text it misses.

use crate::error::{Error, Result};
use crate::scanner::{self, Preset};
use fancy_regex::Regex;
use std::borrow::Cow;

/// Letters, digits, punctuation, symbols and whitespace of several scripts:
/// a pattern that leaves any of it unmatched would drop text.
const PROBE: &str = "Hello, world! It's 1,234.5 \t\r\n  x_y-z (a+b)=c; \"q\" @#$%^&*\\/ \
    Ünïcödé ΑΒΓ αβγ кириллица 日本語の文 中文 한국어 عربى עברית हिन्दी 😀👍🏽 \u{a0}\u{3000}\u{200b}\u{1f}\0\n";

/// The regex source of a preset name, or `None` for an unknown name.
pub fn preset_regex(name: &str) -> Option<&'static str> {
    Preset::from_name(name).map(Preset::pattern)
}

/// Python's `str.isspace()`: Unicode White_Space plus the ASCII information
/// separators U+001C..U+001F, which Python also treats as whitespace.
pub fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

pub enum PreTokenizer {
    Scanner(Preset),
    Superword, // superword tokens' stage-2 pattern, superword::PATTERN
    Regex(Box<Regex>),
    Whitespace { lowercase: bool },
}

impl PreTokenizer {
    /// A preset name, or a preset's exact regex, uses the scanner; any other
    /// regex is compiled.
    pub fn for_pattern(name_or_regex: &str) -> Result<Self> {
        let preset = Preset::from_name(name_or_regex).or_else(|| {
            [Preset::Gpt2, Preset::Cl100k, Preset::O200k]
                .into_iter()
                .find(|p| p.pattern() == name_or_regex)
        });
        if let Some(preset) = preset {
            return Ok(PreTokenizer::Scanner(preset));
        }
        if name_or_regex == crate::superword::PATTERN {
            return Ok(PreTokenizer::Superword);
        }
        let re = Regex::new(name_or_regex).map_err(|e| {
            Error::Pattern(format!(
                "invalid pre-tokenization pattern {name_or_regex:?}: {e}"
            ))
        })?;
        let pt = PreTokenizer::Regex(Box::new(re));
        pt.for_each_word(PROBE, |_| ())?;
        Ok(pt)
    }

    pub fn whitespace(lowercase: bool) -> Self {
        PreTokenizer::Whitespace { lowercase }
    }

    /// Call `f` with each word of `text`, in order. Fails only when a
    /// custom pattern exceeds the regex engine's backtracking limit: text is
    /// never silently dropped.
    pub fn for_each_word(&self, text: &str, f: impl FnMut(&str)) -> Result<()> {
        match self {
            PreTokenizer::Whitespace { lowercase: true } => {
                let lowered = text.to_lowercase();
                split_whitespace(&lowered, f);
                Ok(())
            }
            _ => self.for_each_word_in(text, f),
        }
    }

    /// Like `for_each_word`, with words borrowed from `text` for its whole
    /// lifetime. Lowercasing, which needs a copy, is left to the caller.
    pub fn for_each_word_in<'a>(&self, text: &'a str, mut f: impl FnMut(&'a str)) -> Result<()> {
        match self {
            PreTokenizer::Scanner(preset) => scanner::for_each_piece(*preset, text, f),
            PreTokenizer::Superword => crate::superword::for_each_piece(text, f),
            PreTokenizer::Regex(re) => {
                let mut end = 0;
                for m in re.find_iter(text) {
                    let m = m.map_err(|e| {
                        Error::Pattern(format!("pre-tokenization pattern failed: {e}"))
                    })?;
                    if m.start() > end {
                        return Err(uncovered(re.as_str(), &text[end..m.start()]));
                    }
                    f(&text[m.start()..m.end()]);
                    end = m.end();
                }
                if end < text.len() {
                    return Err(uncovered(re.as_str(), &text[end..]));
                }
            }
            PreTokenizer::Whitespace { .. } => split_whitespace(text, f),
        }
        Ok(())
    }

    /// The text words are cut from: `text`, or its lowercase copy for a
    /// lowercasing pre-tokenizer.
    pub fn prepared<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self {
            PreTokenizer::Whitespace { lowercase: true } => Cow::Owned(text.to_lowercase()),
            _ => Cow::Borrowed(text),
        }
    }

    /// Like `for_each_word_in` on a `prepared` text, with the words handed
    /// over in runs of up to `N` (the last may be shorter, none is empty),
    /// so the caller can work on several at once.
    pub fn for_each_run<'a, const N: usize>(
        &self,
        prepared: &'a str,
        mut f: impl FnMut(&[&'a str]),
    ) -> Result<()> {
        let mut run = [""; N];
        let mut n = 0;
        self.for_each_word_in(prepared, |w| {
            run[n] = w;
            n += 1;
            if n == N {
                f(&run);
                n = 0;
            }
        })?;
        if n > 0 {
            f(&run[..n]);
        }
        Ok(())
    }

    pub fn words(&self, text: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        self.for_each_word(text, |w| out.push(w.to_string()))?;
        Ok(out)
    }
}

fn uncovered(pattern: &str, gap: &str) -> Error {
    let shown: String = gap.chars().take(20).collect();
    let more = if shown.len() < gap.len() { "..." } else { "" };
    Error::Pattern(format!(
        "pre-tokenization pattern {pattern:?} leaves text such as {shown:?}{more} unmatched, which \
         byte mode would drop: end the pattern with |[\\s\\S] to make each such character a \
         piece of its own"
    ))
}

fn split_whitespace<'a>(text: &'a str, f: impl FnMut(&'a str)) {
    text.split(is_python_space)
        .filter(|w| !w.is_empty())
        .for_each(f)
}
