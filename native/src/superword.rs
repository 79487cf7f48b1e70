//! Superword tokens (SuperBPE, Liu et al. 2025): the pre-tokenizer of stage 2
//! and which merges stage 2 may learn.
//!
//! Stage 2 continues training from stage 1's merges over words that are no
//! longer split at whitespace. Its pattern is the SuperBPE reference's
//! stage-2 regex, applied as Hugging Face's `Split` with behavior
//! "isolated" (the text between matches is a piece too):
//!
//! ```text
//! \p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)
//! ```
//!
//! so a piece ends only at a group of up to three digits, a run of two or
//! more punctuation characters, or spaces before other whitespace; words,
//! single spaces, single punctuation and line breaks join. [`PATTERN`]
//! writes that as one regex whose matches cover the text (the gaps are its
//! last branch), which fancy-regex (tokenmill, tiktoken) and Oniguruma
//! (Hugging Face) both read alike; the scanner here gives its pieces without
//! a regex engine, and the tests hold the two equal.
//!
//! A merge is learned in stage 2 only if its token holds at most
//! `max_words` words (runs of bytes other than the space) and no colon
//! followed by a space: the reference trainer's two limits (DESIGN.md says
//! why).

use crate::encode::{Alphabet, Encoder};
use crate::error::Result;
use crate::pretok::PreTokenizer;
use crate::scanner::classes::{class_at, is_other, run_bytes, NUMBER, SPACE};
use crate::train::Pair;
use crate::wordmap::short_key;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use smallvec::{smallvec, SmallVec};

/// The stage-2 regex of the SuperBPE reference.
pub const CORE: &str = r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)";

/// [`CORE`] with the text between its matches as pieces of their own: the
/// pattern a superword tokenizer records and encodes with.
pub const PATTERN: &str = concat!(
    r"(?:\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S))",
    r"|(?:(?!(?:\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)))[\s\S])+",
);

/// End of the match of [`CORE`] at `i`, trying its branches in order as a
/// backtracking engine does; None where none matches.
#[inline(always)]
fn core_match(b: &[u8], i: usize) -> Option<usize> {
    let (class, len) = class_at(b, i);
    if class & NUMBER != 0 {
        // \p{N}{1,3}
        let mut end = i + len;
        for _ in 0..2 {
            if end >= b.len() {
                break;
            }
            let (c, l) = class_at(b, end);
            if c & NUMBER == 0 {
                break;
            }
            end += l;
        }
        return Some(end);
    }
    // ` ?[^\s\p{L}\p{N}]{2,}[\r\n/]*`: the optional space is taken when two
    // punctuation characters follow it; without it, the space itself would
    // have to be punctuation, which it is not.
    let start = if b[i] == b' ' { i + 1 } else { i };
    if start < b.len() {
        let (first, first_len) = class_at(b, start);
        let second = start + first_len;
        if is_other(first) && second < b.len() && is_other(class_at(b, second).0) {
            let mut end = second;
            while end < b.len() {
                let (c, l) = class_at(b, end);
                if !is_other(c) {
                    break;
                }
                end += l;
            }
            return Some(run_bytes(b, end, |x| matches!(x, b'\r' | b'\n' | b'/')));
        }
    }
    if b[i] == b' ' {
        // ` +(?!\S)`: all the spaces if whitespace or the end follows them,
        // else all but the last (which a space then follows).
        let end = run_bytes(b, i, |x| x == b' ');
        if end == b.len() || class_at(b, end).0 & SPACE != 0 {
            return Some(end);
        }
        if end - i >= 2 {
            return Some(end - 1);
        }
    }
    None
}

/// End of the piece of [`PATTERN`] that starts at `i`: a match of [`CORE`],
/// else the run of characters up to where one starts.
#[inline(always)]
fn next_end(b: &[u8], i: usize) -> usize {
    if let Some(end) = core_match(b, i) {
        return end;
    }
    let mut end = i + class_at(b, i).1;
    while end < b.len() && core_match(b, end).is_none() {
        end += class_at(b, end).1;
    }
    end
}

/// Calls `f` with every piece of `text` under [`PATTERN`], in order: non-empty
/// subslices that concatenate back to `text`.
pub fn for_each_piece<'a>(text: &'a str, mut f: impl FnMut(&'a str)) {
    let b = text.as_bytes();
    let mut start = 0;
    while start < b.len() {
        let end = next_end(b, start);
        debug_assert!(end > start && text.is_char_boundary(end));
        f(&text[start..end]);
        start = end;
    }
}

/// Whether stage 2 may learn a token of these bytes: no ": " in it, and at
/// most `max_words` runs of non-space bytes (None: any number).
pub fn allowed(token: &[u8], max_words: Option<u32>) -> bool {
    if token.windows(2).any(|w| w == b": ") {
        return false;
    }
    let Some(max) = max_words else {
        return true;
    };
    let mut words = 0;
    let mut in_word = false;
    for &x in token {
        if x == b' ' {
            in_word = false;
        } else if !in_word {
            in_word = true;
            words += 1;
            if words > max {
                return false;
            }
        }
    }
    true
}

/// Stage 2's words segmented by stage 1's merges, each word whole, as the
/// tokenizer will encode it (a stage-1 merge may join the end of one
/// stage-1 word to the start of the next).
///
/// A word is segmented from runs of its stage-1 pieces, each run traced
/// once and cached: the runs' merges are those of the whole word as long as
/// no merge ever joins two runs, and two runs never join when no pair of a
/// last token the left one ever had and a first token the right one ever
/// had is a merge (the only pairs across them the merging can meet, as it
/// merges each run as if alone). Runs that may join are traced as one; a
/// word whose runs grow long is merged whole.
pub struct Segmenter {
    /// Merge rank and the id it makes, by pair.
    ranks: FxHashMap<Pair, (u32, u32)>,
    /// Bit 256 x + y: some merge joins a token ending in byte x to one
    /// starting with byte y. Two runs whose bytes at the seam are no such
    /// pair never join, whatever their tokens: most seams need no lookup.
    seams: Box<[u64; 1024]>,
    pieces: PreTokenizer,
    whole: Encoder,
}

/// Runs longer than this are not traced (merging one takes time quadratic
/// in its length): their words are merged whole.
const TRACED_BYTES: usize = 64;

/// The runs of pieces traced so far, by text: a short one by its bytes
/// packed in an integer (`wordmap::short_key`), which hashes and compares
/// without reading the text.
#[derive(Default)]
struct Traces<'a> {
    short: FxHashMap<u128, u32>,
    long: FxHashMap<&'a str, u32>,
    all: Vec<Traced>,
}

/// A piece's tokens, and every token it had first and last on the way.
struct Traced {
    tokens: SmallVec<[u32; 8]>,
    firsts: SmallVec<[u32; 4]>,
    lasts: SmallVec<[u32; 4]>,
}

impl Segmenter {
    /// `merges`: stage 1's, merge k making id 256 + k; `pattern`: stage 1's
    /// pre-tokenization pattern, which the pieces come from.
    pub fn new(merges: &[Pair], pattern: &str) -> Result<Self> {
        let with_ids: Vec<(Pair, u32)> = (merges.iter().enumerate())
            .map(|(k, &pair)| (pair, 256 + k as u32))
            .collect();
        let ranks = (with_ids.iter().enumerate())
            .map(|(rank, &(pair, id))| (pair, (rank as u32, id)))
            .collect();
        // Each token's first and last byte, then the seams of the merges.
        let mut ends: Vec<(u8, u8)> = (0..=255u8).map(|b| (b, b)).collect();
        let mut seams = Box::new([0u64; 1024]);
        for &(a, b) in merges {
            let (Some(&(first, x)), Some(&(y, last))) =
                (ends.get(a as usize), ends.get(b as usize))
            else {
                ends.push((0, 0)); // not a merge of earlier tokens: no word holds it
                continue;
            };
            let bit = 256 * x as usize + y as usize;
            seams[bit / 64] |= 1 << (bit % 64);
            ends.push((first, last));
        }
        let whole = Encoder::new(
            PreTokenizer::whitespace(false), // unused: words are encoded whole
            Alphabet::identity_bytes(),
            &with_ids,
            None,
        );
        Ok(Segmenter {
            ranks,
            seams,
            pieces: PreTokenizer::for_pattern(pattern)?,
            whole,
        })
    }

    /// Every word's tokens one after another, and how many each has.
    pub fn segment(&self, words: &[&str]) -> Result<(Vec<u32>, Vec<u32>)> {
        // A few long runs of words, each with its own cache: a cache started
        // afresh traces the common pieces again.
        let size = words
            .len()
            .div_ceil(rayon::current_num_threads() * 4)
            .max(1024);
        let parts: Vec<Result<(Vec<u32>, Vec<u32>)>> = words
            .par_chunks(size)
            .map_init(Traces::default, |traces, chunk| {
                let mut symbols = Vec::new();
                let mut lens = Vec::with_capacity(chunk.len());
                for word in chunk {
                    let before = symbols.len();
                    self.segment_word(word, traces, &mut symbols)?;
                    lens.push((symbols.len() - before) as u32);
                }
                Ok((symbols, lens))
            })
            .collect();
        let mut symbols = Vec::new();
        let mut lens = Vec::with_capacity(words.len());
        for part in parts {
            let (s, l) = part?;
            symbols.extend(s);
            lens.extend(l);
        }
        Ok((symbols, lens))
    }

    fn segment_word<'a>(
        &self,
        word: &'a str,
        traces: &mut Traces<'a>,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        // Runs of pieces (start, end, trace), merged into one run wherever two
        // adjacent runs may join, until none may.
        let mut runs: SmallVec<[(usize, usize, u32); 32]> = SmallVec::new();
        let base = word.as_ptr() as usize;
        let mut long = false;
        self.pieces.for_each_word_in(word, |piece| {
            let start = piece.as_ptr() as usize - base;
            long |= piece.len() > TRACED_BYTES;
            if !long {
                let t = self.traced(piece, traces);
                runs.push((start, start + piece.len(), t));
            }
        })?;
        loop {
            if long {
                out.extend(self.whole.encode_word(word));
                return Ok(());
            }
            let bytes = word.as_bytes();
            let joins = |left: (usize, usize, u32), right: (usize, usize, u32)| {
                let seam = 256 * bytes[left.1 - 1] as usize + bytes[right.0] as usize;
                if self.seams[seam / 64] & (1 << (seam % 64)) == 0 {
                    return false;
                }
                let (left, right) = (&traces.all[left.2 as usize], &traces.all[right.2 as usize]);
                (left.lasts.iter()).any(|&l| {
                    right
                        .firsts
                        .iter()
                        .any(|&f| self.ranks.contains_key(&(l, f)))
                })
            };
            let mut merged: SmallVec<[(usize, usize, u32); 32]> = SmallVec::new();
            let mut joined = false;
            for (k, &run) in runs.iter().enumerate() {
                if k > 0 && joins(runs[k - 1], run) {
                    merged.last_mut().expect("a run").1 = run.1;
                    joined = true;
                } else {
                    merged.push(run);
                }
            }
            if !joined {
                for &(_, _, t) in &runs {
                    out.extend_from_slice(&traces.all[t as usize].tokens);
                }
                return Ok(());
            }
            for run in &mut merged {
                long |= run.1 - run.0 > TRACED_BYTES;
                if !long {
                    run.2 = self.traced(&word[run.0..run.1], traces);
                }
            }
            runs = merged;
        }
    }

    /// The index in `traces` of `piece`'s trace, traced if it is new.
    fn traced<'a>(&self, piece: &'a str, traces: &mut Traces<'a>) -> u32 {
        let next = traces.all.len() as u32;
        let i = match short_key(piece.as_bytes()) {
            Some(key) => *traces.short.entry(key).or_insert(next),
            None => *traces.long.entry(piece).or_insert(next),
        };
        if i == next {
            traces.all.push(self.trace(piece.as_bytes()));
        }
        i
    }

    /// Merge `piece` alone, lowest rank first (each merge everywhere, left
    /// to right), noting every first and last token it has on the way.
    /// Each pair's rank is kept beside it, and only the pairs a merge makes
    /// are looked up.
    fn trace(&self, piece: &[u8]) -> Traced {
        let rank = |a: u32, b: u32| self.ranks.get(&(a, b)).map_or(NONE, |&(r, _)| r);
        let mut tokens: SmallVec<[u32; 8]> = piece.iter().map(|&b| b as u32).collect();
        // ranks[i]: the rank of (tokens[i], tokens[i + 1]), NONE if no merge.
        let mut ranks: SmallVec<[u32; 8]> = tokens.windows(2).map(|w| rank(w[0], w[1])).collect();
        let mut firsts: SmallVec<[u32; 4]> = smallvec![tokens[0]];
        let mut lasts: SmallVec<[u32; 4]> = smallvec![tokens[tokens.len() - 1]];
        loop {
            let r = ranks.iter().copied().min().unwrap_or(NONE);
            if r == NONE {
                break;
            }
            let new = 256 + r; // merge k makes 256 + k
            let mut merged: SmallVec<[u32; 8]> = SmallVec::with_capacity(tokens.len());
            let mut merged_ranks: SmallVec<[u32; 8]> = SmallVec::with_capacity(ranks.len());
            let mut i = 0;
            while i < tokens.len() {
                let (token, next) = if i + 1 < tokens.len() && ranks[i] == r {
                    (new, i + 2)
                } else {
                    (tokens[i], i + 1)
                };
                if let Some(&prev) = merged.last() {
                    // The pair before `token`: made anew if either side is new.
                    let kept = token != new && prev != new;
                    merged_ranks.push(if kept {
                        ranks[i - 1]
                    } else {
                        rank(prev, token)
                    });
                }
                merged.push(token);
                i = next;
            }
            tokens = merged;
            ranks = merged_ranks;
            if firsts.last() != Some(&tokens[0]) {
                firsts.push(tokens[0]);
            }
            if lasts.last() != tokens.last() {
                lasts.push(tokens[tokens.len() - 1]);
            }
        }
        Traced {
            tokens,
            firsts,
            lasts,
        }
    }
}

/// No merge: the rank of a pair that is none.
const NONE: u32 = u32::MAX;

#[cfg(test)]
mod tests {
    use super::*;
    use fancy_regex::Regex;

    fn pieces(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        for_each_piece(text, |p| out.push(p));
        out
    }

    /// Hugging Face's Split "isolated" of CORE: its matches and the text between them.
    fn isolated(text: &str) -> Vec<&str> {
        let re = Regex::new(CORE).unwrap();
        let mut out = Vec::new();
        let mut end = 0;
        for m in re.find_iter(text) {
            let m = m.unwrap();
            if m.start() > end {
                out.push(&text[end..m.start()]);
            }
            out.push(m.as_str());
            end = m.end();
        }
        if end < text.len() {
            out.push(&text[end..]);
        }
        out
    }

    fn regex_pieces(text: &str) -> Vec<&str> {
        let re = Regex::new(PATTERN).unwrap();
        re.find_iter(text).map(|m| m.unwrap().as_str()).collect()
    }

    #[test]
    fn scanner_splits_as_the_regex_does() {
        let texts = [
            "By the way, the cat sat on the mat.\nThe end.  Next: 12345 items!",
            "a  b   c \n d\t e  \r\n",
            "x -- y, (z)... 'q' ?!/\n/ w: v  ",
            " 1 22 333 4444 ٣٤٥ ½ x",
            "Ünïcödé — «quotes» 日本語の文。中文，한국어! 😀👍🏽 ",
            "  ",
            " ",
            "::",
            " ,,",
            " ,",
            "a\u{a0}\u{a0}b\u{3000} c\u{85}",
        ];
        for text in texts {
            assert_eq!(pieces(text), regex_pieces(text), "{text:?}");
            assert_eq!(pieces(text), isolated(text), "{text:?}");
        }
    }

    #[test]
    fn scanner_agrees_with_the_regex_on_random_text() {
        let atoms = [
            "a", "B", "é", "中", "😀", "1", "٣", "½", " ", " ", "  ", "\n", "\r", "\t", ".", ",",
            "!", "/", "'", ":", "-", "\u{a0}", "\u{3000}", "\u{85}", "\u{301}", "_",
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..1000 {
            let mut text = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let n = (seed % 24) as usize;
            for _ in 0..n {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                text.push_str(atoms[(seed % atoms.len() as u64) as usize]);
            }
            assert_eq!(pieces(&text), regex_pieces(&text), "{text:?}");
        }
    }

    #[test]
    fn segments_as_merging_each_word_whole() {
        // Merges learned on one text; words of another, where a merge of stage 1
        // joins two of its pieces (" \n" + " ", "a" + ",b" ...).
        let texts = ["ab ab, abc abc\n  ab\tab,b a,b", "x  \n  ab,b ab ab"];
        let pt = PreTokenizer::for_pattern("cl100k").unwrap();
        let mut words = Vec::new();
        for text in texts {
            pt.for_each_word_in(text, |w| words.push(w)).unwrap();
        }
        let table = crate::train::Words::from(
            (words.iter())
                .map(|w| crate::train::Word {
                    symbols: w.bytes().map(u32::from).collect(),
                    count: 1,
                })
                .collect::<Vec<_>>(),
        );
        let merges = crate::train::Trainer::new(table, 256).train(40, |_| {});
        let seg = Segmenter::new(&merges, "cl100k").unwrap();
        let stage2 = [
            "ab ab, abc abc\n  ab",
            "\tab,b a,b x",
            "  \n  ab,b ab ab",
            " ab ab ab ab",
            "a,b a,b,b a,b",
            "",
        ];
        let (symbols, lens) = seg.segment(&stage2).unwrap();
        let mut at = 0;
        for (word, &n) in stage2.iter().zip(&lens) {
            let got = &symbols[at..at + n as usize];
            assert_eq!(got, seg.whole.encode_word(word).as_slice(), "{word:?}");
            at += n as usize;
        }
    }

    #[test]
    fn limits_of_stage_two() {
        assert!(allowed(b" of the", Some(2)));
        assert!(!allowed(b" of the", Some(1)));
        assert!(allowed(b". The", Some(2)));
        assert!(allowed(b"\n\nThe", Some(1)));
        assert!(allowed(b" a  b ", Some(2)));
        assert!(!allowed(b" a b c d e", Some(4)));
        assert!(allowed(b" a b c d e", None));
        assert!(!allowed(b"Answer: A", None));
        assert!(allowed(b"Answer:A", Some(4)));
    }
}
