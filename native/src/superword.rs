//! Superword tokens (SuperBPE, Liu et al. 2025): the pre-tokenizer of stage 2,
//! which merges stage 2 may learn, the two stages' training
//! ([`train_merges`]) and the merging of stage 2's pieces ([`Pieces`]).
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
use crate::extend::TokenTexts;
use crate::pretok::PreTokenizer;
use crate::scanner::classes::{class_at, is_other, run_bytes, NUMBER, SPACE};
use crate::sharedcache::MANY;
use crate::train::{self, Pair, Trainer, Words};
use crate::wordmap::{short_key, short_key_within};
use rayon::prelude::*;
use rustc_hash::FxHashMap;

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
    while end < b.len() {
        // No match starts at a letter: most of the text, passed at a byte's cost.
        if b[end].is_ascii_alphabetic() {
            end += 1;
        } else if core_match(b, end).is_none() {
            end += class_at(b, end).1;
        } else {
            break;
        }
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

/// A superword tokenizer's merges (merge k makes 256 + k): `stage1` merges
/// on stage 1's word table (`words`, `counts`, in first-occurrence order),
/// then more, up to `total` in all, on stage 2's (`superwords`,
/// `superword_counts`), each of its words first merged whole by stage 1's
/// merges. Stage 2 learns a pair only if [`allowed`] (with `max_words`)
/// allows its token and no token has its bytes yet. `progress(k)`: k merges
/// made so far. Returns the merges and how many are stage 1's (fewer than
/// `stage1` where its pairs ran out).
#[allow(clippy::too_many_arguments)]
pub fn train_merges(
    words: &[&str],
    counts: &[u64],
    superwords: &[&str],
    superword_counts: &[u64],
    stage1: usize,
    total: usize,
    max_words: Option<u32>,
    mut progress: impl FnMut(usize),
) -> Result<(Vec<Pair>, usize)> {
    let (table, base) = train::symbolize(words, counts, None)?;
    let mut trainer = Trainer::new(table, base);
    let mut merges = trainer.train_where(stage1, &mut progress, |_| true);
    let done = merges.len();
    if superwords.is_empty() || done >= total {
        return Ok((merges, done));
    }
    // Stage 1's words as its training left them: most runs of stage 2's words.
    let known = Known::new(words, trainer.word_tokens());
    drop(trainer);
    let ids: Vec<(Pair, u32)> = merges.iter().copied().zip(256..).collect();
    let bytes: [u32; 256] = std::array::from_fn(|b| b as u32);
    let (symbols, lens) = Pieces::new(&bytes, &ids).segment(superwords, Some(&known));
    drop(known);
    let table = Words::from_symbols(&symbols, &lens, superword_counts)?;
    drop((symbols, lens));
    let mut texts = TokenTexts::new(token_bytes(&merges));
    // Stage 2's sentences hold millions of rare pairs: only those that may
    // win are counted (`train/floor.rs`).
    let more = Trainer::with_floor(table, (256 + done) as u32, total - done).train_where(
        total - done,
        |k| progress(done + k),
        |pair| texts.admit_if(pair, |t| allowed(t, max_words)),
    );
    merges.extend(more);
    Ok((merges, done))
}

/// The bytes of every token of byte-level `merges` (merge k makes 256 + k).
fn token_bytes(merges: &[Pair]) -> Vec<Option<Vec<u8>>> {
    let mut texts: Vec<Option<Vec<u8>>> = (0..=255u8).map(|b| Some(vec![b])).collect();
    for &(a, b) in merges {
        let joined = match (&texts[a as usize], &texts[b as usize]) {
            (Some(a), Some(b)) => Some([&a[..], &b[..]].concat()),
            _ => None,
        };
        texts.push(joined);
    }
    texts
}

/// Words with their tokens, looked up before merging a run: stage 1's
/// words, most of the runs of stage 2's. A short word (`short_key`) is
/// found in one slot of an open-addressing table, one cache line, which
/// `Pieces` prefetches for a batch of runs at once: the lookups were cache
/// misses one after another, half of segmenting's time.
pub struct Known<'a> {
    slots: Vec<KnownSlot>,
    shift: u32,
    /// Ids of the words with more than `INLINE` of them.
    spilled: Vec<u32>,
    long: FxHashMap<&'a str, (u32, u32)>,
}

const INLINE: usize = 3;

/// A short word's key and its ids (or where they start in `spilled`); an
/// empty slot has `len` 0 (no word has no id).
#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct KnownSlot {
    key: u128,
    len: u32,
    ids: [u32; INLINE],
}

impl<'a> Known<'a> {
    /// `tokens`: each word's, in order (a word given twice keeps its first).
    pub fn new<'t>(words: &[&'a str], tokens: impl Iterator<Item = &'t [u32]>) -> Self {
        // At most three quarters full: probes stay short.
        let n = (words.len() * 4 / 3 + 1).next_power_of_two().max(16);
        let mut known = Known {
            slots: vec![KnownSlot::default(); n],
            shift: 128 - n.trailing_zeros(),
            spilled: Vec::new(),
            long: FxHashMap::default(),
        };
        for (&word, ids) in words.iter().zip(tokens) {
            let Some(key) = short_key(word.as_bytes()) else {
                let at = (known.spilled.len() as u32, ids.len() as u32);
                known.spilled.extend_from_slice(ids);
                known.long.entry(word).or_insert(at);
                continue;
            };
            let mut i = known.home(key);
            while known.slots[i].len != 0 && known.slots[i].key != key {
                i = (i + 1) & (n - 1);
            }
            if known.slots[i].len != 0 || ids.is_empty() {
                continue;
            }
            let mut inline = [0; INLINE];
            if ids.len() <= INLINE {
                inline[..ids.len()].copy_from_slice(ids);
            } else {
                inline[0] = known.spilled.len() as u32;
                known.spilled.extend_from_slice(ids);
            }
            known.slots[i] = KnownSlot {
                key,
                len: ids.len() as u32,
                ids: inline,
            };
        }
        known
    }

    #[inline(always)]
    fn home(&self, key: u128) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) >> self.shift) as usize
    }

    /// Start loading the slot where the search for `key` begins.
    #[inline(always)]
    fn prefetch(&self, key: u128) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetching is only a hint; it never faults, whatever the address.
        unsafe {
            let slot = self.slots.as_ptr().add(self.home(key));
            std::arch::x86_64::_mm_prefetch(slot as *const i8, std::arch::x86_64::_MM_HINT_T0)
        }
    }

    /// Append the ids of `word` (whose short key is `key`, if any) to `out`;
    /// false when it is not known.
    #[inline(always)]
    fn extend(&self, word: &str, key: Option<u128>, out: &mut Vec<u32>) -> bool {
        let Some(key) = key else {
            let Some(&(start, len)) = self.long.get(word) else {
                return false;
            };
            out.extend_from_slice(&self.spilled[start as usize..(start + len) as usize]);
            return true;
        };
        let mut i = self.home(key);
        loop {
            let slot = &self.slots[i];
            if slot.len == 0 {
                return false;
            }
            if slot.key == key {
                let len = slot.len as usize;
                if len <= INLINE {
                    out.extend_from_slice(&slot.ids[..len]);
                } else {
                    let start = slot.ids[0] as usize;
                    out.extend_from_slice(&self.spilled[start..start + len]);
                }
                return true;
            }
            i = (i + 1) & (self.slots.len() - 1);
        }
    }
}

/// Merging a piece of [`PATTERN`] (often a sentence) as if whole, in two
/// steps, each cheap where merging it whole is not:
///
/// 1. The merges below a split rank are replayed on runs of the piece, each
///    run looked up in an encoder's word caches: a run ends wherever no such
///    merge joins a token ending in the byte before to one starting with the
///    byte after (bit `256 x + y` of `seams`), so no merge ever joins two
///    runs, and merging them apart is merging the piece whole.
/// 2. The merges from the split rank on are replayed on step 1's ids. No
///    merge below the split applies any more: a merge makes a token that no
///    earlier merge has, so every pair holding it ranks after it.
///
/// The split rank is that of the first merge joining a token that ends in a
/// printable ASCII byte to one starting with a space: past it, merges join
/// words (a superword tokenizer's stage 2), and runs would be whole pieces.
/// Stage 2's training uses step 1 alone, with stage 1's merges, to segment
/// its words as encoding meets them.
pub struct Pieces {
    seams: Box<[u64; 1024]>,
    /// The merges below the split rank, encoding runs as words.
    runs: Encoder,
    /// The merges from the split rank on; None when there are none.
    later: Option<Encoder>,
}

impl Pieces {
    /// `byte_ids`: each byte's id; `merges`: (pair, id made) in rank order.
    pub fn new(byte_ids: &[u32; 256], merges: &[(Pair, u32)]) -> Self {
        // Each token's first and last byte, then the seams of the merges.
        let mut ends: FxHashMap<u32, (u8, u8)> = (0..=255u8)
            .map(|b| (byte_ids[b as usize], (b, b)))
            .collect();
        let mut seams = Box::new([0u64; 1024]);
        let mut split = merges.len();
        for (rank, &((a, b), id)) in merges.iter().enumerate() {
            let (Some(&(first, x)), Some(&(y, last))) = (ends.get(&a), ends.get(&b)) else {
                split = rank; // parts of no known bytes: merged whole from here on
                break;
            };
            if y == b' ' && x.is_ascii_graphic() {
                split = rank;
                break;
            }
            let bit = 256 * x as usize + y as usize;
            seams[bit / 64] |= 1 << (bit % 64);
            ends.insert(id, (first, last));
        }
        let encoder = |merges: &[(Pair, u32)]| {
            Encoder::new(
                PreTokenizer::whitespace(false), // unused: words come split
                Alphabet::Bytes {
                    ids: Box::new(*byte_ids),
                },
                merges,
                None,
            )
        };
        Pieces {
            seams,
            runs: encoder(&merges[..split]),
            later: (split < merges.len()).then(|| encoder(&merges[split..])),
        }
    }

    /// Whether a merge below the split joins a token ending in byte `x` to
    /// one starting with byte `y`.
    #[inline(always)]
    fn joins(&self, x: u8, y: u8) -> bool {
        let bit = 256 * x as usize + y as usize;
        self.seams[bit / 64] & (1 << (bit % 64)) != 0
    }

    /// Append the ids of `piece`, merged as if whole, to `out`: each run
    /// `known` holds from there, the others merged by the encoder.
    pub fn encode_into(&self, piece: &str, known: Option<&Known>, out: &mut Vec<u32>) {
        let start = out.len();
        let b = piece.as_bytes();
        let mut runs = [""; MANY];
        let mut n = 0;
        let mut from = 0;
        for i in 1..=b.len() {
            // A run ends at the end, or before a character whose first byte
            // no merge joins to the byte before.
            if i == b.len() || (b[i] as i8 >= -0x40 && !self.joins(b[i - 1], b[i])) {
                runs[n] = &piece[from..i];
                n += 1;
                from = i;
                if n == MANY {
                    self.encode_runs(piece, &runs, known, out);
                    n = 0;
                }
            }
        }
        self.encode_runs(piece, &runs[..n], known, out);
        if let Some(later) = &self.later {
            if out.len() - start > 1 {
                let merged = later.merge_symbols(out[start..].to_vec());
                out.truncate(start);
                out.extend_from_slice(&merged);
            }
        }
    }

    /// Append the ids of `runs` (of `piece`, at most `MANY`), each merged
    /// alone: those `known` holds from there (their slots loaded all at
    /// once), the others by the encoder.
    fn encode_runs(&self, piece: &str, runs: &[&str], known: Option<&Known>, out: &mut Vec<u32>) {
        let Some(known) = known else {
            if !runs.is_empty() {
                self.runs.encode_split(piece, runs, out);
            }
            return;
        };
        let mut keys = [None; MANY];
        for (key, run) in keys.iter_mut().zip(runs) {
            *key = short_key_within(piece.as_bytes(), run.as_bytes());
            if let Some(k) = *key {
                known.prefetch(k);
            }
        }
        let mut unknown = 0; // runs[unknown..k] wait for the encoder
        for (k, (run, &key)) in runs.iter().zip(&keys).enumerate() {
            let before = out.len();
            if known.extend(run, key, out) {
                if unknown < k {
                    // In order: the ones before it first.
                    let ids = out.split_off(before);
                    self.runs.encode_split(piece, &runs[unknown..k], out);
                    out.extend_from_slice(&ids);
                }
                unknown = k + 1;
            }
        }
        if unknown < runs.len() {
            self.runs.encode_split(piece, &runs[unknown..], out);
        }
    }

    /// The ids of `piece`, merged as if whole.
    pub fn encode(&self, piece: &str) -> Vec<u32> {
        let mut out = Vec::new();
        self.encode_into(piece, None, &mut out);
        out
    }

    /// Every word's ids one after another, and how many each has, on the
    /// current thread pool (runs `known` holds looked up there).
    pub fn segment(&self, words: &[&str], known: Option<&Known>) -> (Vec<u32>, Vec<u32>) {
        let size = words
            .len()
            .div_ceil(rayon::current_num_threads() * 4)
            .max(1024);
        let parts: Vec<(Vec<u32>, Vec<u32>)> = words
            .par_chunks(size)
            .map(|chunk| {
                let mut symbols = Vec::new();
                let mut lens = Vec::with_capacity(chunk.len());
                for word in chunk {
                    let before = symbols.len();
                    self.encode_into(word, known, &mut symbols);
                    lens.push((symbols.len() - before) as u32);
                }
                (symbols, lens)
            })
            .collect();
        let mut symbols = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
        let mut lens = Vec::with_capacity(words.len());
        for (s, l) in parts {
            symbols.extend(s);
            lens.extend(l);
        }
        (symbols, lens)
    }
}

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
            "!", "/", "'", ":", "-", "\u{a0}", "\u{3000}", "\u{85}", "\u{301}", "_", "\u{1}",
            "\u{1f}", "\u{7f}", "\u{b}",
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

    /// Merges learned on `texts`, each split by `pattern` (None: whole),
    /// merge k making 256 + k.
    fn learned(texts: &[&str], pattern: Option<&str>, n: usize) -> Vec<(Pair, u32)> {
        let mut words = Vec::new();
        for &text in texts {
            match pattern {
                Some(p) => (PreTokenizer::for_pattern(p).unwrap())
                    .for_each_word_in(text, |w| words.push(w))
                    .unwrap(),
                None => words.push(text),
            }
        }
        let table = crate::train::Words::from(
            (words.iter())
                .map(|w| crate::train::Word {
                    symbols: w.bytes().map(u32::from).collect(),
                    count: 1,
                })
                .collect::<Vec<_>>(),
        );
        let merges = crate::train::Trainer::new(table, 256).train(n, |_| {});
        merges.into_iter().zip(256..).collect()
    }

    /// `Pieces` against merging each piece whole, byte `b` being id `ids[b]`.
    fn check_pieces(ids: &[u32; 256], merges: &[(Pair, u32)], pieces: &[&str]) {
        let whole = Encoder::new(
            PreTokenizer::whitespace(false),
            Alphabet::Bytes {
                ids: Box::new(*ids),
            },
            merges,
            None,
        );
        let runs = Pieces::new(ids, merges);
        for piece in pieces {
            assert_eq!(runs.encode(piece), whole.encode_word(piece), "{piece:?}");
        }
        let (symbols, lens) = runs.segment(pieces, None);
        assert_segments(pieces, &symbols, &lens, &whole);
    }

    /// `segment`'s symbols, piece by piece (`lens`), against merging each piece whole.
    fn assert_segments(pieces: &[&str], symbols: &[u32], lens: &[u32], whole: &Encoder) {
        let mut at = 0;
        for (piece, &n) in pieces.iter().zip(lens) {
            assert_eq!(
                symbols[at..at + n as usize],
                whole.encode_word(piece),
                "{piece:?}"
            );
            at += n as usize;
        }
    }

    const PIECES: [&str; 11] = [
        "ab ab, abc abc\n  ab",
        "\tab,b a,b x",
        "  \n  ab,b ab ab",
        " ab ab ab ab",
        "a,b a,b,b a,b",
        "",
        "ab",
        "é ab é, ab\u{a0} ab",
        "ab ab ab ab ab ab ab ab ab ab ab ab ab ab ab ab ab ab ab ab ab ab ab ab ab ab",
        " abcabcabcabcabcabc abcabcabcabcabcabc, abc",
        "abc\nabc",
    ];

    #[test]
    fn pieces_merge_as_if_whole() {
        // Stage 1's merges (words split by cl100k, where a merge may still
        // join two of a piece's words: " \n" + " "), then merges learned on
        // whole texts (spaces joined, as superword tokens do).
        let texts = ["ab ab, abc abc\n  ab\tab,b a,b", "x  \n  ab,b ab ab é ab é"];
        let bytes: [u32; 256] = std::array::from_fn(|b| b as u32);
        for n in [0, 5, 20, 60] {
            check_pieces(&bytes, &learned(&texts, Some("cl100k"), n), &PIECES);
            check_pieces(&bytes, &learned(&texts, None, n), &PIECES);
        }
        // Stage 2's merges after stage 1's: the split rank falls between.
        let mut merges = learned(&texts, Some("cl100k"), 12);
        let known: std::collections::HashSet<Pair> = merges.iter().map(|m| m.0).collect();
        let later = learned(&texts, None, 80).into_iter().map(|m| m.0);
        let later: Vec<Pair> = later.filter(|p| !known.contains(p)).collect();
        for pair in later {
            // Renumbered: kept only where both parts exist by then.
            let made = 256 + merges.len() as u32;
            if pair.0 < made && pair.1 < made {
                merges.push((pair, made));
            }
        }
        assert!(Pieces::new(&bytes, &merges).later.is_some(), "two steps");
        check_pieces(&bytes, &merges, &PIECES);
    }

    #[test]
    fn known_words_segment_as_merging_whole() {
        // Stage 1's words with the tokens its training left them, then stage 2's
        // words segmented with them: as merging each whole.
        // The last: "abc" left as "ab" "c" by the first two merges, "ab" and
        // "bc", a run of two tokens.
        let texts = [
            "ab ab, abc abc\n  ab\tab,b a,b",
            "x  \n  ab,b ab ab é ab é abcabcabcabcabcabc",
            "ab\nab\nab\nbc\nbc\nbc\nabc\nabc",
        ];
        let pt = PreTokenizer::for_pattern("cl100k").unwrap();
        let mut counted = std::collections::BTreeMap::new();
        for text in texts {
            pt.for_each_word_in(text, |w| *counted.entry(w).or_insert(0u64) += 1)
                .unwrap();
        }
        let words: Vec<&str> = counted.keys().copied().collect();
        let counts: Vec<u64> = counted.values().copied().collect();
        let bytes: [u32; 256] = std::array::from_fn(|b| b as u32);
        for n in [0, 2, 7, 30] {
            let (table, _) = train::symbolize(&words, &counts, None).unwrap();
            let mut trainer = Trainer::new(table, 256);
            let learned = trainer.train_where(n, |_| {}, |_| true);
            let merges: Vec<(Pair, u32)> = learned.into_iter().zip(256..).collect();
            let known = Known::new(&words, trainer.word_tokens());
            let whole = Encoder::new(
                PreTokenizer::whitespace(false),
                Alphabet::identity_bytes(),
                &merges,
                None,
            );
            let (symbols, lens) = Pieces::new(&bytes, &merges).segment(&PIECES, Some(&known));
            assert_segments(&PIECES, &symbols, &lens, &whole);
        }
    }

    #[test]
    fn pieces_merge_as_if_whole_with_other_byte_ids() {
        // An imported vocabulary's byte ids (GPT-2 orders bytes otherwise).
        let texts = ["ab ab, abc abc\n  ab\tab,b a,b", "x  \n  ab,b ab ab é ab é"];
        let ids: [u32; 256] = std::array::from_fn(|b| (b as u32 * 7 + 3) % 256);
        let to_ids = |t: u32| if t < 256 { ids[t as usize] } else { t };
        let merges: Vec<(Pair, u32)> = (learned(&texts, None, 60).into_iter())
            .map(|((a, b), id)| ((to_ids(a), to_ids(b)), id))
            .collect();
        check_pieces(&ids, &merges, &PIECES);
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
