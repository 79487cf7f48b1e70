//! Superword tokens (SuperBPE, Liu et al. 2025): the pre-tokenizer of stage 2,
//! which merges stage 2 may learn, the two stages' training
//! ([`Stage1Trained`]) and the merging of stage 2's pieces ([`Pieces`]).
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

use crate::encode::{Alphabet, Encoder, WordCache};
use crate::error::{Error, Result};
use crate::extend::TokenTexts;
use crate::pretok::PreTokenizer;
use crate::scanner::blocks::{classify, BLOCK};
use crate::scanner::classes::{class_at, is_other, run_bytes, NUMBER, SPACE};
use crate::sharedcache::MANY;
use crate::train::{self, Pair, Trainer, Words};
use crate::wordmap::WordMap;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicBool, Ordering};

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
        // No match starts at a letter, nor at a space before one (a run of
        // spaces matches only at two or more, or before other whitespace):
        // most of the text, passed 64 bytes at a time.
        if b[end].is_ascii_alphabetic() || (b[end] == b' ' && starts_letter(b, end + 1)) {
            end += letter_run(&b[end..]);
        } else if core_match(b, end).is_none() {
            end += class_at(b, end).1;
        } else {
            break;
        }
    }
    end
}

fn starts_letter(b: &[u8], i: usize) -> bool {
    b.get(i).is_some_and(u8::is_ascii_alphabetic)
}

/// Length of the run at the start of `b` of ASCII letters and spaces that
/// a letter follows: where no match of [`CORE`] starts. Prose is mostly
/// such runs; a block's byte classes at once take them without a branch a
/// byte (a space in a block's last byte ends the block's run: its next
/// byte is in the next block).
#[inline(always)]
fn letter_run(b: &[u8]) -> usize {
    let mut n = 0;
    while let Some(block) = b.get(n..n + BLOCK) {
        let c = classify(block.try_into().expect("a block"));
        let letters = c.upper | c.lower;
        let run = (!(letters | (c.space & letters >> 1))).trailing_zeros() as usize;
        n += run;
        if run < BLOCK {
            return n;
        }
    }
    while n < b.len() {
        if b[n].is_ascii_alphabetic() {
            n += 1;
        } else if b[n] == b' ' && starts_letter(b, n + 1) {
            n += 2;
        } else {
            break;
        }
    }
    n
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

/// A superword tokenizer's training, in two steps: `stage1` merges on stage
/// 1's word table ([`Stage1Trained::train`]), then more, up to `total` in
/// all (merge k makes 256 + k), on stage 2's ([`Stage1Trained::stage2`]),
/// each of its words first merged whole by stage 1's merges: split into
/// stage 1's words ([`Split`]) and each part given the tokens stage 1 left
/// it. Stage 2 learns a pair only if [`allowed`] (with `max_words`) allows
/// its token and no token has its bytes yet. Two steps, so that the caller
/// makes stage 2's table and its [`Split`] while stage 1 trains: stage 1's
/// merges are mostly one after another, on one thread.
pub struct Stage1Trained {
    trainer: Trainer,
    merges: Vec<Pair>,
    words: usize,
}

impl Stage1Trained {
    /// `stage1` merges (fewer where pairs run out) on stage 1's word table
    /// (`words`, `counts`, in first-occurrence order); `progress(k)`: k
    /// merges made so far. `Error::Stopped` once `stop` is set.
    pub fn train(
        words: &[&str],
        counts: &[u64],
        stage1: usize,
        progress: impl FnMut(usize),
        stop: &AtomicBool,
    ) -> Result<Self> {
        let (table, base) = train::symbolize(words, counts, None)?;
        let mut trainer = Trainer::new(table, base);
        let merges = trainer.train_where(stage1, progress, |_| true, stop)?;
        Ok(Stage1Trained {
            trainer,
            merges,
            words: words.len(),
        })
    }

    /// Stage 2 from here on `superwords`, `superword_counts` (in
    /// first-occurrence order, split by `split`), `words` the table stage 1
    /// trained on and `split` was made with. Returns the merges of both
    /// stages and how many are stage 1's (fewer than asked where its pairs
    /// ran out); `progress(k)` counts stage 1's merges too. `Error::Stopped`
    /// once `stop` is set.
    #[allow(clippy::too_many_arguments)]
    pub fn stage2(
        self,
        split: Split,
        words: &[&str],
        superwords: &[&str],
        superword_counts: &[u64],
        total: usize,
        max_words: Option<u32>,
        mut progress: impl FnMut(usize),
        stop: &AtomicBool,
    ) -> Result<(Vec<Pair>, usize)> {
        let Stage1Trained {
            trainer,
            mut merges,
            words: trained_on,
        } = self;
        if words.len() != trained_on || split.pieces != superwords.len() {
            return Err(Error::Train(format!(
                "stage 2 given {} words and {} superwords; stage 1 trained on {trained_on} \
                 words and the split holds {}",
                words.len(),
                superwords.len(),
                split.pieces
            )));
        }
        let done = merges.len();
        if superwords.is_empty() || done >= total {
            return Ok((merges, done));
        }
        let ids: Vec<(Pair, u32)> = merges.iter().copied().zip(256..).collect();
        let bytes: [u32; 256] = std::array::from_fn(|b| b as u32);
        let stage1_words = Stage1::new(&split, words, &trainer);
        drop(trainer);
        let runs = Pieces::new(&bytes, &ids).segment(superwords, Some(&stage1_words));
        drop(stage1_words);
        drop(split);
        // Segmenting is stage 2's longest step before its merges.
        if stop.load(Ordering::Relaxed) {
            return Err(Error::Stopped);
        }
        let table = Words::from_runs(&runs, superword_counts)?;
        drop(runs);
        let mut texts = TokenTexts::new(token_bytes(&merges));
        // Stage 2's sentences hold millions of rare pairs: only those that may
        // win are counted (`train/floor.rs`).
        let more = Trainer::with_floor(table, (256 + done) as u32, total - done).train_where(
            total - done,
            |k| progress(done + k),
            |pair| texts.admit_if(pair, |t| allowed(t, max_words)),
            stop,
        )?;
        merges.extend(more);
        Ok((merges, done))
    }
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

/// Stage 2's words, each as the stage-1 words it splits into: each named by
/// its index in stage 1's table, or, where the table lacks it, by its length
/// (`UNLISTED` set). Split in runs of `chunk_size` words; a word with no
/// parts (only where a part is too long to name) is merged whole.
pub struct Split {
    chunks: Vec<SplitRun>,
    /// How many words were split, in runs of `size`.
    pieces: usize,
    size: usize,
}

struct SplitRun {
    parts: Vec<u32>,
    /// How many parts each word has.
    lens: Vec<u32>,
}

const UNLISTED: u32 = 1 << 31;

/// Words are segmented in runs of this many, on the thread pool.
fn chunk_size(n: usize) -> usize {
    n.div_ceil(rayon::current_num_threads() * 4).max(1024)
}

impl Split {
    /// `pieces` split by `pretok`, their parts looked up in `words`. A piece
    /// the pattern does not cover, or every piece without one, is left whole:
    /// splitting only spares segmenting work.
    pub fn new(pieces: &[&str], words: &[&str], pretok: Option<&PreTokenizer>) -> Self {
        let mut index: WordMap<&str, u32> = WordMap::default();
        index.reserve(words.len());
        for (i, &word) in words.iter().enumerate() {
            index.upsert(word, |w| w, |_| {}, || i as u32);
        }
        let size = chunk_size(pieces.len());
        let chunks = pieces
            .par_chunks(size)
            .map(|chunk| {
                let mut run = SplitRun {
                    parts: Vec::new(),
                    lens: Vec::with_capacity(chunk.len()),
                };
                for piece in chunk {
                    let before = run.parts.len();
                    let mut whole = pretok.is_none();
                    let split = pretok.map(|p| {
                        p.for_each_word_in(piece, |w| match index.get(w) {
                            Some(&i) => run.parts.push(i),
                            None if w.len() < UNLISTED as usize => {
                                run.parts.push(UNLISTED | w.len() as u32)
                            }
                            None => whole = true,
                        })
                    });
                    if whole || matches!(split, Some(Err(_))) {
                        run.parts.truncate(before);
                    }
                    run.lens.push((run.parts.len() - before) as u32);
                }
                run
            })
            .collect();
        Split {
            chunks,
            pieces: pieces.len(),
            size,
        }
    }
}

/// Stage 1's words (`words`, split as `split` says) and the tokens its
/// training left them.
pub struct Stage1<'a> {
    split: &'a Split,
    words: &'a [&'a str],
    tokens: Tokens,
}

impl<'a> Stage1<'a> {
    pub fn new(split: &'a Split, words: &'a [&'a str], trainer: &Trainer) -> Self {
        Stage1 {
            split,
            words,
            tokens: Tokens::new(words.len(), |i| trainer.word(i)),
        }
    }
}

/// Each word's tokens by its index: up to `INLINE` in its slot, more in
/// `spilled`. A slot is 16 bytes, one load, which segmenting fetches ahead:
/// it looks words up in no order, and the trainer's words are two loads
/// (the word's offset, then the word) in a far larger buffer.
struct Tokens {
    slots: Vec<TokenSlot>,
    spilled: Vec<u32>,
}

const INLINE: usize = 3;

/// How many ids, then the ids (or where they start in `spilled`).
#[derive(Clone, Copy, Default)]
#[repr(C, align(16))]
struct TokenSlot {
    len: u32,
    ids: [u32; INLINE],
}

impl Tokens {
    fn new<'t>(n: usize, word: impl Fn(usize) -> &'t [u32]) -> Self {
        let mut tokens = Tokens {
            slots: Vec::with_capacity(n),
            spilled: Vec::new(),
        };
        for i in 0..n {
            let ids = word(i);
            let mut slot = TokenSlot {
                len: ids.len() as u32,
                ids: [0; INLINE],
            };
            if ids.len() <= INLINE {
                slot.ids[..ids.len()].copy_from_slice(ids);
            } else {
                slot.ids[0] = tokens.spilled.len() as u32;
                tokens.spilled.extend_from_slice(ids);
            }
            tokens.slots.push(slot);
        }
        tokens
    }

    #[inline(always)]
    fn prefetch(&self, i: u32) {
        if let Some(slot) = self.slots.get(i as usize) {
            crate::train::prefetch(slot);
        }
    }

    #[inline(always)]
    fn extend(&self, i: u32, out: &mut Vec<u32>) {
        let slot = &self.slots[i as usize];
        let len = slot.len as usize;
        if len <= INLINE {
            out.extend_from_slice(&slot.ids[..len]);
        } else {
            let start = slot.ids[0] as usize;
            out.extend_from_slice(&self.spilled[start..start + len]);
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
/// its words as encoding meets them, its runs cut only between stage-1
/// words ([`Split`]), which take the tokens stage 1's training left them.
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
            later: (split < merges.len()).then(|| encoder(&merges[split..]).with_pair_filter()),
        }
    }

    /// Whether a merge below the split joins a token ending in byte `x` to
    /// one starting with byte `y`.
    #[inline(always)]
    fn joins(&self, x: u8, y: u8) -> bool {
        let bit = 256 * x as usize + y as usize;
        self.seams[bit / 64] & (1 << (bit % 64)) != 0
    }

    /// Append the ids of `piece`, merged as if whole, to `out`.
    pub fn encode_into(&self, piece: &str, out: &mut Vec<u32>) {
        self.merge_runs(piece, out, |runs, out| {
            self.runs.encode_split(piece, runs, out)
        });
    }

    /// `encode_into` with `cache` for the runs (a cache only these pieces'
    /// runs are ever encoded with): no cache taken from the encoder's pool
    /// for each piece, which cost encoding a tenth of its time.
    pub(crate) fn encode_into_with(&self, piece: &str, cache: &mut WordCache, out: &mut Vec<u32>) {
        self.merge_runs(piece, out, |runs, out| {
            self.runs.encode_split_with(piece, runs, cache, out)
        });
    }

    /// Step 1 on `piece`, its runs encoded by `encode` (at most `MANY` at
    /// once), then step 2.
    fn merge_runs(
        &self,
        piece: &str,
        out: &mut Vec<u32>,
        mut encode: impl FnMut(&[&str], &mut Vec<u32>),
    ) {
        let start = out.len();
        let mut runs = [""; MANY];
        let mut n = 0;
        let mut from = 0;
        self.for_each_cut(piece.as_bytes(), |i| {
            runs[n] = &piece[from..i];
            n += 1;
            from = i;
            if n == MANY {
                encode(&runs, out);
                n = 0;
            }
        });
        if from < piece.len() {
            runs[n] = &piece[from..];
            n += 1;
        }
        if n > 0 {
            encode(&runs[..n], out);
        }
        self.merge_later(start, out);
    }

    /// Calls `f` with each place in `b` (ascending) where a run may end:
    /// before a character whose first byte no merge below the split joins
    /// to the byte before. Not between two ASCII letters, which a block's
    /// classes skip 64 bytes at a time: a run need not end wherever it may
    /// (runs merged whole are merged as their parts are), and letters
    /// nearly always join.
    #[inline(always)]
    fn for_each_cut(&self, b: &[u8], mut f: impl FnMut(usize)) {
        let mut cut_at = |i: usize| {
            if b[i] as i8 >= -0x40 && !self.joins(b[i - 1], b[i]) {
                f(i);
            }
        };
        let (mut at, mut letter_before) = (0, false);
        while let Some(block) = b.get(at..at + BLOCK) {
            let c = classify(block.try_into().expect("a block"));
            let letters = c.upper | c.lower;
            // Bit k: byte k of the block, and the byte before it, are letters.
            let inside = letters & (letters << 1 | u64::from(letter_before));
            let mut check = !inside & if at == 0 { !1 } else { !0 };
            while check != 0 {
                cut_at(at + check.trailing_zeros() as usize);
                check &= check - 1;
            }
            letter_before = letters >> (BLOCK - 1) != 0;
            at += BLOCK;
        }
        for i in at.max(1)..b.len() {
            cut_at(i);
        }
    }

    /// Step 2 on the ids of a piece, `out[start..]`.
    fn merge_later(&self, start: usize, out: &mut Vec<u32>) {
        if let Some(later) = &self.later {
            if out.len() - start > 1 {
                let merged = later.merge_symbols(out[start..].to_vec());
                out.truncate(start);
                out.extend_from_slice(&merged);
            }
        }
    }

    /// `encode_into` of a piece whose stage-1 words are `parts` (see
    /// [`Split`]): the runs are cut only between its words, and a run that
    /// is one word of stage 1's table takes the tokens training left it.
    fn encode_parts(&self, piece: &str, parts: &[u32], stage1: &Stage1, out: &mut Vec<u32>) {
        if parts.is_empty() {
            return self.encode_into(piece, out);
        }
        let start = out.len();
        let b = piece.as_bytes();
        let run = |from: usize, to: usize, listed: Option<u32>, out: &mut Vec<u32>| match listed {
            Some(i) => stage1.tokens.extend(i, out),
            None => self.runs.encode_split(piece, &[&piece[from..to]], out),
        };
        const AHEAD: usize = 8;
        for &part in parts.iter().take(AHEAD) {
            stage1.tokens.prefetch(part);
        }
        let (mut from, mut at) = (0, 0);
        let mut listed = None; // the run's word, while it is one word of the table
        for (k, &part) in parts.iter().enumerate() {
            if let Some(&ahead) = parts.get(k + AHEAD) {
                stage1.tokens.prefetch(ahead);
            }
            if at > from && !self.joins(b[at - 1], b[at]) {
                run(from, at, listed, out);
                from = at;
            }
            listed = (at == from && part & UNLISTED == 0).then_some(part);
            at += match listed {
                Some(i) => stage1.words[i as usize].len(),
                None if part & UNLISTED != 0 => (part & !UNLISTED) as usize,
                None => stage1.words[part as usize].len(),
            };
        }
        debug_assert_eq!(at, b.len(), "the parts cover {piece:?}");
        run(from, at, listed, out);
        self.merge_later(start, out);
    }

    /// The ids of `piece`, merged as if whole.
    pub fn encode(&self, piece: &str) -> Vec<u32> {
        let mut out = Vec::new();
        self.encode_into(piece, &mut out);
        out
    }

    /// Every word's ids, in runs of words: each run's ids one word after
    /// another, and how many each word has; on the current thread pool.
    /// With `stage1`, whose split is of `words`, runs of stage-1 words are
    /// taken from there.
    pub fn segment(&self, words: &[&str], stage1: Option<&Stage1>) -> Vec<(Vec<u32>, Vec<u32>)> {
        // In the runs the split was made in (on another thread pool, maybe).
        let size = stage1.map_or_else(|| chunk_size(words.len()), |s| s.split.size);
        let segment = |chunk: &[&str], split: Option<&SplitRun>| {
            // Room for a token per stage-1 word, which most words end as.
            let mut symbols = Vec::with_capacity(split.map_or(0, |s| s.parts.len()));
            let mut lens = Vec::with_capacity(chunk.len());
            let mut at = 0;
            for (k, word) in chunk.iter().enumerate() {
                let before = symbols.len();
                match (stage1, split) {
                    (Some(stage1), Some(split)) => {
                        let parts = &split.parts[at..at + split.lens[k] as usize];
                        at += parts.len();
                        self.encode_parts(word, parts, stage1, &mut symbols);
                    }
                    _ => self.encode_into(word, &mut symbols),
                }
                lens.push((symbols.len() - before) as u32);
            }
            (symbols, lens)
        };
        match stage1 {
            Some(stage1) => (words.par_chunks(size))
                .zip(&stage1.split.chunks)
                .map(|(chunk, split)| segment(chunk, Some(split)))
                .collect(),
            None => (words.par_chunks(size))
                .map(|chunk| segment(chunk, None))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::UNSTOPPED;
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

    /// `texts` texts of fewer than `most` atoms, each chosen by `atom` from a
    /// xorshift number: the scanner splits each as the regex does.
    fn scanner_agrees_on(
        mut seed: u64,
        texts: usize,
        most: u64,
        atom: impl Fn(u64) -> &'static str,
    ) {
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..texts {
            let n = next() % most;
            let text: String = (0..n).map(|_| atom(next())).collect();
            assert_eq!(pieces(&text), regex_pieces(&text), "{text:?}");
        }
    }

    #[test]
    fn scanner_agrees_with_the_regex_on_random_text() {
        let atoms = [
            "a", "B", "é", "中", "😀", "1", "٣", "½", " ", " ", "  ", "\n", "\r", "\t", ".", ",",
            "!", "/", "'", ":", "-", "\u{a0}", "\u{3000}", "\u{85}", "\u{301}", "_", "\u{1}",
            "\u{1f}", "\u{7f}", "\u{b}",
        ];
        scanner_agrees_on(0x9e37_79b9_7f4a_7c15, 1000, 24, |r| {
            atoms[(r % atoms.len() as u64) as usize]
        });
    }

    #[test]
    fn scanner_agrees_with_the_regex_across_blocks() {
        // Long texts, mostly letters and spaces: runs that cross the
        // 64-byte blocks the scanner takes them in, ended anywhere.
        let atoms = [
            "a", "Zz", "word", " ", " ", " of", "  ", "\n", ".", ", ", "1", "é", "中", "--", "\t",
            " /", ": ",
        ];
        // Letters and single spaces nine times in ten.
        scanner_agrees_on(0x2545_f491_4f6c_dd1d, 500, 300, |r| {
            match (r % 97) as usize {
                k @ 0..87 => atoms[k % 7],
                k => atoms[k - 80],
            }
        });
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
        let merges = crate::train::Trainer::new(table, 256)
            .train(n, |_| {}, &UNSTOPPED)
            .unwrap();
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
        assert_segments(pieces, &runs.segment(pieces, None), &whole);
    }

    /// `segment`'s runs, piece by piece, against merging each piece whole.
    fn assert_segments(pieces: &[&str], runs: &[(Vec<u32>, Vec<u32>)], whole: &Encoder) {
        let mut pieces = pieces.iter();
        for (symbols, lens) in runs {
            let mut at = 0;
            for &n in lens {
                let piece = pieces.next().expect("a run's word is a piece");
                assert_eq!(
                    symbols[at..at + n as usize],
                    whole.encode_word(piece),
                    "{piece:?}"
                );
                at += n as usize;
            }
        }
        assert!(pieces.next().is_none(), "every piece segmented");
    }

    // The last two are over a block long, with letters no merge joins
    // ("ca", "xa") inside and across blocks, where runs are not cut.
    const PIECES: [&str; 13] = [
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
        " abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcé abcxabc, abcabc",
        "ab ab abc ab ab ab ab ab ab ab ab ab ab ab ab ab ab ab ab ab abcabcabcabc xabcabc,ab",
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
        let merges = two_step_merges(&texts);
        assert!(Pieces::new(&bytes, &merges).later.is_some(), "two steps");
        check_pieces(&bytes, &merges, &PIECES);
    }

    /// Stage 1's merges on `texts` split by cl100k, then those learned on
    /// the whole texts that stage 1 lacks, renumbered after them (kept only
    /// where both parts exist by then): a split rank between the two.
    fn two_step_merges(texts: &[&str]) -> Vec<(Pair, u32)> {
        let mut merges = learned(texts, Some("cl100k"), 12);
        let known: std::collections::HashSet<Pair> = merges.iter().map(|m| m.0).collect();
        for pair in learned(texts, None, 80).into_iter().map(|m| m.0) {
            let made = 256 + merges.len() as u32;
            if !known.contains(&pair) && pair.0 < made && pair.1 < made {
                merges.push((pair, made));
            }
        }
        merges
    }

    #[test]
    fn a_superword_encoder_gives_cached_runs_the_ids_of_merging() {
        // A superword tokenizer's encoder keeps its pieces' runs in a cache
        // of each of its word caches: texts met again, on one thread or
        // two, still give each piece the ids of merging it whole.
        let texts = ["ab ab, abc abc\n  ab\tab,b a,b", "x  \n  ab,b ab ab é ab é"];
        let bytes: [u32; 256] = std::array::from_fn(|b| b as u32);
        let merges = two_step_merges(&texts);
        let alphabet = || Alphabet::Bytes {
            ids: Box::new(bytes),
        };
        let enc = Encoder::new(PreTokenizer::Superword, alphabet(), &merges, None);
        let pieces = Pieces::new(&bytes, &merges);
        let text = [
            texts[0],
            texts[1],
            " ab ab ab,b abc",
            "x ab é, abc abc abc ab",
        ]
        .repeat(40)
        .join(" ");
        let mut want = Vec::new();
        for_each_piece(&text, |p| want.extend(pieces.encode(p)));
        crate::encode::tests::assert_encodes_again_alike(&enc, &text, &want, "superword");
    }

    #[test]
    fn stage_one_words_segment_as_merging_whole() {
        // Stage 1's words with the tokens its training left them, then stage 2's
        // words segmented with them: as merging each whole.
        // The last: "abc" left as "ab" "c" by the first two merges, "ab" and
        // "bc", a run of two tokens. "(b" after "." is a stage-1 word that a
        // merge joins to the one before, and "日本" none of the table's.
        let texts = [
            "ab ab, abc abc\n  ab\tab,b a,b",
            "x  \n  ab,b ab ab é ab é abcabcabcabcabcabc (b x(b",
            "ab\nab\nab\nbc\nbc\nbc\nabc\nabc",
        ];
        let pieces: Vec<&str> = PIECES
            .iter()
            .copied()
            .chain([".(b", "x.(b 日本 ab"])
            .collect();
        let pt = PreTokenizer::for_pattern("cl100k").unwrap();
        let mut counted = std::collections::BTreeMap::new();
        for text in texts {
            pt.for_each_word_in(text, |w| *counted.entry(w).or_insert(0u64) += 1)
                .unwrap();
        }
        let words: Vec<&str> = counted.keys().copied().collect();
        let counts: Vec<u64> = counted.values().copied().collect();
        let bytes: [u32; 256] = std::array::from_fn(|b| b as u32);
        // Split by stage 1's pattern, and by none (each piece merged whole).
        let splits = [Some(&pt), None].map(|p| Split::new(&pieces, &words, p));
        for (n, split) in [0, 2, 7, 30]
            .into_iter()
            .flat_map(|n| splits.iter().map(move |s| (n, s)))
        {
            let (table, _) = train::symbolize(&words, &counts, None).unwrap();
            let mut trainer = Trainer::new(table, 256);
            let learned = trainer
                .train_where(n, |_| {}, |_| true, &UNSTOPPED)
                .unwrap();
            let merges: Vec<(Pair, u32)> = learned.into_iter().zip(256..).collect();
            let whole = Encoder::new(
                PreTokenizer::whitespace(false),
                Alphabet::identity_bytes(),
                &merges,
                None,
            );
            let stage1 = Stage1::new(split, &words, &trainer);
            let runs = Pieces::new(&bytes, &merges).segment(&pieces, Some(&stage1));
            assert_segments(&pieces, &runs, &whole);
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
    fn stage_two_takes_the_tables_stage_one_and_the_split_were_made_with() {
        let words = ["of", " the", " cat"];
        let pieces = ["of the cat", "of the"];
        let pt = PreTokenizer::for_pattern("cl100k").unwrap();
        // Stage 1 and the split of the full tables, stage 2 given `given`.
        let stage2 = |given: &[&str], given_pieces: &[&str]| {
            let trained = Stage1Trained::train(&words, &[5, 5, 5], 2, |_| {}, &UNSTOPPED).unwrap();
            let split = Split::new(&pieces, &words, Some(&pt));
            let counts = vec![3; given_pieces.len()];
            let stage2 =
                |stop| trained.stage2(split, given, given_pieces, &counts, 6, None, |_| {}, stop);
            stage2(&UNSTOPPED)
        };
        let (merges, done) = stage2(&words, &pieces).unwrap();
        assert_eq!((merges.len(), done), (6, 2));
        let err = stage2(&words[..2], &pieces).unwrap_err().to_string();
        assert!(err.contains("stage 2 given 2 words"), "{err}");
        assert!(stage2(&words, &pieces[..1]).is_err());
    }

    #[test]
    fn a_stop_ends_either_stage() {
        let words = ["of", " the", " cat"];
        let pieces = ["of the cat", "of the"];
        let stopped = AtomicBool::new(true);
        let stage1 = Stage1Trained::train(&words, &[5, 5, 5], 2, |_| {}, &stopped);
        assert!(matches!(stage1, Err(Error::Stopped)));
        let trained = Stage1Trained::train(&words, &[5, 5, 5], 2, |_| {}, &UNSTOPPED).unwrap();
        let split = Split::new(&pieces, &words, None);
        let stage2 = trained.stage2(split, &words, &pieces, &[3, 3], 6, None, |_| {}, &stopped);
        assert!(matches!(stage2, Err(Error::Stopped)));
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
