//! Splitting text into the words BPE works on.
//!
//! Byte mode uses tiktoken's pre-tokenization regexes; char mode splits on
//! whitespace exactly like Python's `str.split()` (optionally lowercasing
//! first), because that is what the articles' reference code does.

use fancy_regex::Regex;

pub const GPT2: &str =
    r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s";
pub const CL100K: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";
pub const O200K: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"|\s*[\r\n]+",
    r"|\s+(?!\S)",
    r"|\s+"
);

/// The regex source of a preset name, or `None` for an unknown name.
pub fn preset_regex(name: &str) -> Option<&'static str> {
    match name {
        "gpt2" => Some(GPT2),
        "cl100k" => Some(CL100K),
        "o200k" => Some(O200K),
        _ => None,
    }
}

/// Python's `str.isspace()`: Unicode White_Space plus the ASCII information
/// separators U+001C..U+001F, which Python also treats as whitespace.
pub fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

pub enum PreTokenizer {
    Regex(Box<Regex>),
    Whitespace { lowercase: bool },
}

impl PreTokenizer {
    pub fn for_pattern(name_or_regex: &str) -> Result<Self, String> {
        let source = preset_regex(name_or_regex).unwrap_or(name_or_regex);
        Regex::new(source)
            .map(|re| PreTokenizer::Regex(Box::new(re)))
            .map_err(|e| format!("invalid pre-tokenization pattern {name_or_regex:?}: {e}"))
    }

    pub fn whitespace(lowercase: bool) -> Self {
        PreTokenizer::Whitespace { lowercase }
    }

    /// Call `f` with each word of `text`, in order.
    pub fn for_each_word(&self, text: &str, mut f: impl FnMut(&str)) {
        match self {
            PreTokenizer::Regex(re) => {
                // The presets always match (their last branch is `\s`); errors
                // could only be backtrack limits.
                for m in re.find_iter(text).flatten() {
                    f(m.as_str());
                }
            }
            PreTokenizer::Whitespace { lowercase } => {
                if *lowercase {
                    let lowered = text.to_lowercase();
                    lowered
                        .split(is_python_space)
                        .filter(|w| !w.is_empty())
                        .for_each(f);
                } else {
                    text.split(is_python_space)
                        .filter(|w| !w.is_empty())
                        .for_each(f);
                }
            }
        }
    }

    pub fn words(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.for_each_word(text, |w| out.push(w.to_string()));
        out
    }
}
