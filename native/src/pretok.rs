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
//!
//! A pattern `(?:P)|(?:(?!(?:P))[\s\S])+` (`formats.regex.covering`: Hugging
//! Face's Split "isolated" of P, whose unmatched runs are pieces too) runs as
//! P alone, its gaps cut between its matches: the last branch would have the
//! engine backtrack over a whole gap, which fails past about a million
//! characters.

use crate::error::{Error, Result};
use crate::scanner::{self, Preset};
use fancy_regex::{Expr, LookAround, Regex, RegexInput, RuntimeError};
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
    /// The matches of a regex and the text between them, as tokenizers'
    /// Split "isolated" gives them.
    Isolated(Box<Regex>),
    Whitespace {
        lowercase: bool,
    },
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
        let pt = match isolated_core(name_or_regex).and_then(|core| Regex::new(core).ok()) {
            Some(core) => PreTokenizer::Isolated(Box::new(core)),
            None => PreTokenizer::Regex(Box::new(re)),
        };
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
            PreTokenizer::Isolated(re) => isolated_pieces(re, text, f)?,
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

/// tokenizers' Split "isolated" of `re` over `text`: each match and each run
/// of text between two, the empty ones left out. Matches are found as
/// fancy-regex's `find_iter` finds them (`\G`, which that tells apart,
/// `isolated_core` leaves out).
fn isolated_pieces<'a>(re: &Regex, text: &'a str, mut f: impl FnMut(&'a str)) -> Result<()> {
    let failed = |e| Error::Pattern(format!("pre-tokenization pattern failed: {e}"));
    let mut end = 0; // of the last piece given
    let mut from = 0; // where the next search starts
    let mut last_match = None;
    while from <= text.len() {
        let found = match re.find_from_pos(text, from) {
            Ok(found) => found,
            // A search counts the attempts at every position it passes
            // against one backtracking limit: a regex with look-around
            // reaches it in a run of about a million characters without a
            // match. Each attempt alone has the limit to itself.
            Err(fancy_regex::Error::RuntimeError(RuntimeError::BacktrackLimitExceeded)) => {
                first_match_from(re, text, from).map_err(failed)?
            }
            Err(e) => return Err(failed(e)),
        };
        let Some(m) = found else { break };
        let (start, stop) = (m.start(), m.end());
        if start == stop {
            from = text[stop..]
                .chars()
                .next()
                .map_or(stop + 1, |c| stop + c.len_utf8());
            if last_match == Some(stop) {
                continue; // no empty match right after a match
            }
        } else {
            from = stop;
        }
        last_match = Some(stop);
        if start > end {
            f(&text[end..start]);
        }
        if stop > start {
            f(&text[start..stop]);
        }
        end = stop;
    }
    if end < text.len() {
        f(&text[end..]);
    }
    Ok(())
}

/// The first match of `re` that starts at or after `from`, tried position by
/// position (anchored attempts).
fn first_match_from<'a>(
    re: &Regex,
    text: &'a str,
    from: usize,
) -> std::result::Result<Option<fancy_regex::Match<'a>>, fancy_regex::Error> {
    let starts = text[from..].char_indices().map(|(i, _)| from + i);
    for at in starts.chain([text.len()]) {
        let input = RegexInput::new(text).from_pos(at).anchored(true);
        if let Some(m) = re.find_input(input)? {
            return Ok(Some(m));
        }
    }
    Ok(None)
}

/// P of a pattern `(?:P)|(?:(?!(?:P))[\s\S])+` that the engine reads as
/// that form (P's copies alike, each a whole group: `a)|(?:b` is not) and
/// whose P means alone what it means there: none of it refers to a group by
/// number (the copies' numbers differ) or to where a search started.
fn isolated_core(pattern: &str) -> Option<&str> {
    const MIDDLE: &str = ")|(?:(?!(?:";
    let rest = pattern.strip_prefix("(?:")?.strip_suffix("))[\\s\\S])+")?;
    let len = rest.len().checked_sub(MIDDLE.len())? / 2;
    let core = rest.get(..len)?;
    if rest.get(len..)? != [MIDDLE, core].concat() {
        return None;
    }
    let tree = Expr::parse_tree(pattern).ok()?.expr;
    let p = Expr::parse_tree(core).ok()?.expr;
    if !context_free(&p) {
        return None;
    }
    let any = Expr::parse_tree("[\\s\\S]").ok()?.expr;
    let gap = Expr::Repeat {
        child: Box::new(Expr::Concat(vec![
            Expr::LookAround(Box::new(p.clone()), LookAround::LookAheadNeg),
            any,
        ])),
        lo: 1,
        hi: usize::MAX,
        greedy: true,
    };
    (tree == Expr::Alt(vec![p, gap])).then_some(core)
}

fn context_free(expr: &Expr) -> bool {
    let leaf = matches!(
        expr,
        Expr::Empty
            | Expr::Any { .. }
            | Expr::Assertion(_)
            | Expr::GeneralNewline { .. }
            | Expr::Literal { .. }
            | Expr::LiteralBytes { .. }
            | Expr::Delegate { .. }
    );
    let inner = matches!(
        expr,
        Expr::Concat(_)
            | Expr::Alt(_)
            | Expr::Group(_)
            | Expr::LookAround(..)
            | Expr::Repeat { .. }
            | Expr::AtomicGroup(_)
    );
    leaf || inner && expr.children_iter().all(context_free)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn covering(core: &str) -> String {
        format!("(?:{core})|(?:(?!(?:{core}))[\\s\\S])+")
    }

    fn isolated(core: &str) -> PreTokenizer {
        PreTokenizer::Isolated(Box::new(Regex::new(core).unwrap()))
    }

    const CORES: [&str; 7] = [
        r"\p{N}{1,3}",
        r"a|b",
        r" ?\p{L}+|\s+(?!\S)",
        r"(x)y|(?<=z)w",
        r"(?i)ab",
        r"(?<!\s)\p{N}|\s+$",
        crate::superword::CORE,
    ];

    #[test]
    fn covering_patterns_run_as_their_core() {
        for core in &CORES[..CORES.len() - 1] {
            let pattern = covering(core);
            assert_eq!(isolated_core(&pattern), Some(*core), "{pattern}");
            let pt = PreTokenizer::for_pattern(&pattern).unwrap();
            assert!(matches!(pt, PreTokenizer::Isolated(_)), "{pattern}");
        }
        // Not that form as the engine reads it: the core is no whole group,
        // or the copies' group numbers differ.
        for pattern in [
            covering("a)|(?:b"),
            covering(r"(a)\1"),
            covering(r"\Ga"),
            r"[\s\S]".into(),
        ] {
            assert_eq!(isolated_core(&pattern), None, "{pattern}");
        }
    }

    #[test]
    fn pieces_are_the_covering_patterns() {
        let texts = [
            "ab 12 3456 x",
            "  hello   world\n\n 7  ",
            "xyzw zw xy Ab aB",
            "",
            "a",
            "ÜΑβγ 日本語 😀 ½٣",
        ];
        for core in CORES {
            let re = Regex::new(&covering(core)).unwrap();
            for text in texts {
                let want: Vec<&str> = re.find_iter(text).map(|m| m.unwrap().as_str()).collect();
                let mut got = Vec::new();
                isolated(core)
                    .for_each_word_in(text, |w| got.push(w))
                    .unwrap();
                assert_eq!(got, want, "{core} on {text:?}");
            }
        }
    }

    #[test]
    fn empty_matches_cut_the_text_as_tokenizers_does() {
        // Where the covering regex fails (an empty match leaves a character
        // unmatched), the pieces are tokenizers': runs between the matches.
        assert_eq!(isolated("x|(?=b)").words("abab").unwrap(), ["a", "ba", "b"]);
        assert_eq!(isolated(r"\d*").words("a12b").unwrap(), ["a", "12", "b"]);
    }

    #[test]
    fn a_long_gap_is_one_piece() {
        let text = format!("1{}22", "a".repeat(3_000_000));
        let gap = &text[1..text.len() - 2];
        let pt = PreTokenizer::for_pattern(&covering(r"\p{N}{1,3}")).unwrap();
        assert_eq!(pt.words(&text).unwrap(), ["1", gap, "22"]);
        // Look-around: a search with fancy-regex's own machine.
        for core in [r"(?<!b)\p{N}", r"\p{N}(?!b)"] {
            let pt = PreTokenizer::for_pattern(&covering(core)).unwrap();
            assert_eq!(pt.words(&text).unwrap(), ["1", gap, "2", "2"]);
        }
        let pt = PreTokenizer::for_pattern(&covering(r"(?<=b)\p{N}")).unwrap();
        assert_eq!(pt.words(&text).unwrap(), [text.as_str()]);
    }
}
