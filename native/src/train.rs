//! Incremental BPE training with exact tie-breaking.
//!
//! Rule: merge the pair with the highest weighted count; ties go to the pair
//! met first when scanning words in table order, each left to right.
//! A pair's count never grows after it first exists and its first position
//! only moves right, so stored heap entries are optimistic bounds: popping an
//! entry and re-checking it against the live state is exact (see DESIGN.md).

// A 4-ary heap is half as deep as a binary one: fewer cache misses per pop,
// which is most of what picking the next pair costs.
use crate::error::{Error, Result};
use dary_heap::QuaternaryHeap;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;
use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicBool, Ordering};

mod floor;
pub(crate) use floor::PairBits;

/// A stop flag never set: training that no signal ends.
#[cfg(test)]
pub(crate) static UNSTOPPED: AtomicBool = AtomicBool::new(false);

pub type Pair = (u32, u32);

/// Char mode's end-of-word symbol, one base token.
pub const END_OF_WORD: &str = "</w>";

/// A word as a sequence of token ids, with how often it occurs.
pub struct Word {
    pub symbols: Vec<u32>,
    pub count: u64,
}

#[derive(Default)]
struct PairStats {
    count: i64,
    /// Indices of words that may hold the pair, ascending (a superset: words
    /// that lost the pair are dropped lazily). Most pairs are in a few
    /// words: those lists live inline, with no allocation to make or free.
    words: SmallVec<[u32; 4]>,
}

impl PairStats {
    /// Words are noted in ascending order, so only a repeat needs checking.
    fn note_word(&mut self, w: u32) {
        debug_assert!(self.words.last().is_none_or(|&last| last <= w));
        if self.words.last() != Some(&w) {
            self.words.push(w);
        }
    }

    /// Append `other`, whose words all come after this one's.
    fn append(&mut self, other: PairStats) {
        self.count += other.count;
        if self.words.is_empty() {
            self.words = other.words;
        } else {
            let skip = usize::from(self.words.last() == other.words.first());
            self.words.extend_from_slice(&other.words[skip..]);
        }
    }
}

/// A value per token id, with the ids given one since the table was last
/// drained: every pair a merge of (a, b) into `new` changes is (x, a),
/// (b, x), (x, new) or (new, x), so its other token x names it, and a
/// change indexes an array instead of hashing into a map.
#[derive(Default)]
struct ById<T> {
    values: Vec<T>,
    touched: Vec<u32>,
}

impl<T: Copy + Default + PartialEq> ById<T> {
    /// Room for ids below `n` (the tokens made so far, the new one included).
    fn fit(&mut self, n: usize) {
        if self.values.len() < n {
            self.values.resize(n, T::default());
        }
    }

    #[inline(always)]
    fn at(&mut self, id: u32) -> &mut T {
        let v = &mut self.values[id as usize];
        if *v == T::default() {
            self.touched.push(id);
        }
        v
    }

    /// The ids given a value, each with it, leaving the table empty (an id
    /// listed twice, its value having stayed the default, gives it twice).
    fn drain(&mut self) -> impl Iterator<Item = (u32, T)> + '_ {
        let values = &mut self.values;
        self.touched
            .drain(..)
            .map(move |id| (id, std::mem::take(&mut values[id as usize])))
    }
}

/// A pair a merge created, while the merge runs. Its words are noted in
/// `Delta::noted` and given their list at the end, at its exact size: a list
/// grown word by word would reallocate on the way, and the allocator was a
/// tenth of training's time.
struct Created {
    pair: Pair,
    count: i64,
    /// Its first creation (word, position): the first occurrence of a pair
    /// that did not exist before.
    first: (u32, u32),
    /// How many words it was made in, and the last of them.
    n_words: u32,
    last_word: u32,
}

/// What merging one pair did to the pair statistics of a run of words.
/// Gathered locally, so the big statistics map is touched once per distinct
/// pair instead of once per occurrence.
#[derive(Default)]
struct Delta {
    /// Weighted occurrences lost by (x, a), by x, and by (b, x), by x,
    /// (a, b) being the merged pair: pairs that existed before the merge.
    lost_before: ById<i64>,
    lost_after: ById<i64>,
    /// Pairs the merge created, in the order they were first met: every one
    /// holds the new token, so none existed before, and its first creation
    /// is its first occurrence. `made_before` finds (x, new) by x,
    /// `made_after` (new, x) by x: its index in `created`, plus one.
    created: Vec<Created>,
    made_before: ById<u32>,
    made_after: ById<u32>,
    /// (index in `created`, word) for each word a created pair was made in,
    /// in word order.
    noted: Vec<(u32, u32)>,
    /// `drain_created`'s statistics, kept so merges allocate nothing.
    finished: Vec<PairStats>,
}

impl Delta {
    /// Room for the ids of `n_tokens` tokens.
    fn fit(&mut self, n_tokens: usize) {
        self.lost_before.fit(n_tokens);
        self.lost_after.fit(n_tokens);
        self.made_before.fit(n_tokens);
        self.made_after.fit(n_tokens);
    }

    /// `pair`, which holds `op`'s left token second or its right token
    /// first, lost `weight` occurrences.
    #[inline(always)]
    fn lose(&mut self, op: &MergeOp, pair: Pair, weight: i64) {
        let lost = if pair.1 == op.pair.0 {
            self.lost_before.at(pair.0)
        } else {
            self.lost_after.at(pair.1)
        };
        *lost += weight;
    }

    /// The index in `created` of `pair` (it holds the new token), made with
    /// first occurrence `first` if it has none.
    #[inline(always)]
    fn created_at(&mut self, op: &MergeOp, pair: Pair, first: (u32, u32)) -> usize {
        let slot = if pair.1 == op.new_id {
            self.made_before.at(pair.0)
        } else {
            self.made_after.at(pair.1)
        };
        if *slot == 0 {
            self.created.push(Created {
                pair,
                count: 0,
                first,
                n_words: 0,
                last_word: u32::MAX,
            });
            *slot = self.created.len() as u32;
        }
        *slot as usize - 1
    }

    /// `pair` was made `weight` more times, in word `w` at position `at`
    /// (words come in ascending order).
    #[inline(always)]
    fn made(&mut self, op: &MergeOp, pair: Pair, w: u32, at: u32, weight: i64) {
        let i = self.created_at(op, pair, (w, at));
        let c = &mut self.created[i];
        c.count += weight;
        if c.last_word != w {
            c.last_word = w;
            c.n_words += 1;
            self.noted.push((i as u32, w));
        }
    }

    /// The lost occurrences, each with its pair.
    fn drain_lost(&mut self, op: &MergeOp) -> impl Iterator<Item = (Pair, i64)> + '_ {
        let (a, b) = op.pair;
        let before = self.lost_before.drain().map(move |(x, d)| ((x, a), d));
        before.chain(self.lost_after.drain().map(move |(x, d)| ((b, x), d)))
    }

    /// Empty `made_before` and `made_after`, which find created pairs by
    /// index while a merge runs, once `created` is being taken.
    fn forget_made(&mut self) {
        self.made_before.drain().for_each(drop);
        self.made_after.drain().for_each(drop);
    }

    /// The created pairs that occur at least `floor` times, in the order
    /// first met, each with its statistics and first occurrence, leaving
    /// none.
    fn drain_created(
        &mut self,
        floor: i64,
    ) -> impl Iterator<Item = (Pair, PairStats, (u32, u32))> + '_ {
        self.forget_made();
        let stats = &mut self.finished;
        stats.extend(self.created.iter().map(|c| PairStats {
            count: c.count,
            words: if c.count >= floor {
                SmallVec::with_capacity(c.n_words as usize)
            } else {
                SmallVec::new()
            },
        }));
        for (i, w) in self.noted.drain(..) {
            let st = &mut stats[i as usize];
            if st.count >= floor {
                st.words.push(w);
            }
        }
        (self.created.drain(..))
            .zip(stats.drain(..))
            .filter(move |(c, _)| c.count >= floor)
            .map(|(c, st)| (c.pair, st, c.first))
    }

    /// Fold in the delta of the run of words that follows this one's,
    /// leaving `other` empty.
    fn append(&mut self, op: &MergeOp, other: &mut Delta) {
        for (pair, d) in other.drain_lost(op) {
            self.lose(op, pair, d);
        }
        other.forget_made();
        let mut index = Vec::with_capacity(other.created.len());
        for c in other.created.drain(..) {
            let i = self.created_at(op, c.pair, c.first);
            let mine = &mut self.created[i];
            mine.count += c.count;
            // The runs' words are disjoint: no word is counted twice.
            mine.n_words += c.n_words;
            index.push(i as u32);
        }
        let noted = other.noted.drain(..);
        self.noted
            .extend(noted.map(|(i, w)| (index[i as usize], w)));
    }
}

/// Merges that touch at least this many words are split over the thread pool;
/// below that, waking the other threads costs more than it saves.
const PARALLEL_MIN_WORDS: usize = 2048;

/// The most merges `Trainer::train` reserves room for up front (a few
/// hundred MB of tables); beyond that they grow as merges are made.
const RESERVE_MERGES: usize = 1 << 22;

/// Heap key: higher count first, then earlier word, then earlier position.
type HeapEntry = (i64, Reverse<u32>, Reverse<u32>, Reverse<Pair>);

/// The candidate pairs, best first. Most pairs a merge creates are rare and
/// never win: they wait in buckets by count (bucket k holds counts in
/// [2^k, 2^(k+1))), and only the buckets at or above `floor` are in the
/// heap. The heap stays small enough to live in cache, and a rare pair costs
/// a push onto a list. Every heap entry outranks every bucketed one, so the
/// heap's top is the top of all; when the heap runs dry, the highest
/// non-empty bucket moves in and becomes the floor.
struct Queue {
    heap: QuaternaryHeap<HeapEntry>,
    buckets: Vec<Vec<HeapEntry>>,
    floor: usize,
}

/// The bucket of a count (counts below 1 never reach the queue).
fn bucket(count: i64) -> usize {
    (count.max(1) as u64).ilog2() as usize
}

impl Queue {
    fn new() -> Self {
        Queue {
            heap: QuaternaryHeap::new(),
            buckets: vec![Vec::new(); 64],
            floor: 64,
        }
    }

    /// Queue `pair` with its count and first occurrence (word, position).
    fn push_pair(&mut self, pair: Pair, count: i64, (w, pos): (u32, u32)) {
        self.push((count, Reverse(w), Reverse(pos), Reverse(pair)));
    }

    fn push(&mut self, entry: HeapEntry) {
        let b = bucket(entry.0);
        if b >= self.floor {
            self.heap.push(entry);
        } else {
            self.buckets[b].push(entry);
        }
    }

    fn pop(&mut self) -> Option<HeapEntry> {
        if self.heap.is_empty() {
            let b = (0..self.floor)
                .rev()
                .find(|&b| !self.buckets[b].is_empty())?;
            self.floor = b;
            self.heap.extend(std::mem::take(&mut self.buckets[b]));
        }
        self.heap.pop()
    }
}

/// Every word in one buffer, in table order: a header (its current length
/// and its count) followed by its symbols. A word is named by its header's
/// offset, so visiting one costs one cache miss, and walking a sorted word
/// list walks memory forward, which is what makes merging fast.
pub struct Words {
    buf: Vec<u32>,
    /// Header offsets, in table order.
    starts: Vec<u32>,
    /// How many merges the words can take at most: each merge joins at least
    /// one adjacent pair, so no more than the symbols less one per word.
    max_merges: usize,
}

/// Header words: the length, then the count's low and high halves.
const HEADER: usize = 3;

fn header(len: u32, count: u64) -> [u32; HEADER] {
    [len, count as u32, (count >> 32) as u32]
}

/// The symbols and count of the word whose header is at the start of `at`.
#[inline(always)]
fn word_at(at: &[u32]) -> (&[u32], i64) {
    let count = (at[1] as u64 | (at[2] as u64) << 32) as i64;
    (&at[HEADER..HEADER + at[0] as usize], count)
}

/// Where each word's header goes in the buffer of words of `lens` symbols,
/// and the buffer's size; an error when the table is too large to name its
/// words by u32 offsets (16 GiB of symbols is beyond any word table), or
/// when its pairs could occur more often than an i64 counts (no corpus
/// does; a count near 2^64 in a word table made training loop for ever).
fn word_starts(lens: &[u32], counts: &[u64]) -> Result<(Vec<u32>, usize)> {
    if lens.len() != counts.len() {
        return Err(Error::Train(format!(
            "{} counts for {} words",
            counts.len(),
            lens.len()
        )));
    }
    let pairs: u128 = lens
        .iter()
        .zip(counts)
        .map(|(&n, &c)| n.saturating_sub(1) as u128 * c as u128)
        .sum();
    if pairs > i64::MAX as u128 {
        return Err(Error::Train(format!(
            "the word counts make {pairs} pairs, more than the {} that training counts \
             (a count in the word table is wrong)",
            i64::MAX
        )));
    }
    let mut starts = Vec::with_capacity(lens.len());
    let mut total = 0usize;
    for &n in lens {
        starts.push(total as u32);
        total += n as usize + HEADER;
        if total > u32::MAX as usize {
            let total: usize = lens.iter().map(|&n| n as usize + HEADER).sum();
            return Err(Error::Train(format!(
                "the word table holds {total} symbols and headers, more than the {} \
                 that training can hold",
                u32::MAX
            )));
        }
    }
    Ok((starts, total))
}

/// Words filled into the buffer per run of this many, on the thread pool.
const FILL_RUN: usize = 4096;

impl Words {
    /// Words whose symbols `symbols` yields one after another, `lens[i]` of them for word i.
    fn build(mut symbols: impl Iterator<Item = u32>, lens: &[u32], counts: &[u64]) -> Result<Self> {
        let (starts, total) = word_starts(lens, counts)?;
        let max_merges = lens.iter().map(|&n| n.saturating_sub(1) as usize).sum();
        let mut buf = Vec::with_capacity(total);
        for (&len, &count) in lens.iter().zip(counts) {
            buf.extend(header(len, count));
            buf.extend(symbols.by_ref().take(len as usize));
        }
        debug_assert_eq!(buf.len(), total);
        Ok(Words {
            buf,
            starts,
            max_merges,
        })
    }

    /// Words as their bytes, one symbol each (byte mode). Runs of words are
    /// written on the thread pool, each into its own part of the buffer: one
    /// pass over the table, a tenth of training's start when done symbol by
    /// symbol through an iterator.
    fn from_bytes(words: &[&str], counts: &[u64]) -> Result<Self> {
        let lens = word_lengths(words, str::len)?;
        let (starts, total) = word_starts(&lens, counts)?;
        let max_merges = lens.iter().map(|&n| n.saturating_sub(1) as usize).sum();
        let mut buf = vec![0u32; total];
        let mut regions = Vec::with_capacity(words.len().div_ceil(FILL_RUN));
        let mut rest = buf.as_mut_slice();
        for lo in (0..words.len()).step_by(FILL_RUN) {
            let hi = (lo + FILL_RUN).min(words.len());
            let end = starts.get(hi).map_or(total, |&s| s as usize);
            let (region, tail) = std::mem::take(&mut rest).split_at_mut(end - starts[lo] as usize);
            rest = tail;
            regions.push((region, lo..hi));
        }
        regions.into_par_iter().for_each(|(region, run)| {
            let mut at = 0;
            for i in run {
                let word = words[i].as_bytes();
                region[at..at + HEADER].copy_from_slice(&header(word.len() as u32, counts[i]));
                at += HEADER;
                let symbols = &mut region[at..at + word.len()];
                for (s, &b) in symbols.iter_mut().zip(word) {
                    *s = u32::from(b);
                }
                at += word.len();
            }
        });
        Ok(Words {
            buf,
            starts,
            max_merges,
        })
    }

    /// Words given as token ids (`lens[i]` of them for word i, one word
    /// after another): a word table already segmented by a tokenizer's
    /// merges, which training continues (extending a tokenizer).
    pub fn from_symbols(symbols: &[u32], lens: &[u32], counts: &[u64]) -> Result<Self> {
        let total: u64 = lens.iter().map(|&n| n as u64).sum();
        if total != symbols.len() as u64 {
            return Err(Error::Train(format!(
                "{} symbols for words of {total} in all",
                symbols.len()
            )));
        }
        Self::build(symbols.iter().copied(), lens, counts)
    }

    /// Words given as token ids in runs of words: each run's ids one word
    /// after another, and how many each word has. Each run is written into
    /// its part of the buffer on the thread pool.
    pub fn from_runs(runs: &[(Vec<u32>, Vec<u32>)], counts: &[u64]) -> Result<Self> {
        let lens: Vec<u32> = runs.iter().flat_map(|r| r.1.iter().copied()).collect();
        let (starts, total) = word_starts(&lens, counts)?;
        let max_merges = lens.iter().map(|&n| n.saturating_sub(1) as usize).sum();
        let mut buf = vec![0u32; total];
        let mut regions = Vec::with_capacity(runs.len());
        let mut rest = buf.as_mut_slice();
        let mut first = 0;
        for run in runs {
            let (symbols, lens) = run;
            let end = first + lens.len();
            let to = starts.get(end).map_or(total, |&s| s as usize);
            let from = starts.get(first).map_or(total, |&s| s as usize);
            let (region, tail) = std::mem::take(&mut rest).split_at_mut(to - from);
            rest = tail;
            regions.push((region, symbols, lens, &counts[first..end]));
            first = end;
        }
        regions
            .into_par_iter()
            .for_each(|(region, symbols, lens, counts)| {
                let (mut at, mut from) = (0, 0);
                for (&len, &count) in lens.iter().zip(counts) {
                    region[at..at + HEADER].copy_from_slice(&header(len, count));
                    at += HEADER;
                    let len = len as usize;
                    region[at..at + len].copy_from_slice(&symbols[from..from + len]);
                    at += len;
                    from += len;
                }
            });
        Ok(Words {
            buf,
            starts,
            max_merges,
        })
    }

    fn get(&self, w: u32) -> &[u32] {
        word_at(&self.buf[w as usize..]).0
    }
}

#[cfg(test)]
impl From<Vec<Word>> for Words {
    fn from(words: Vec<Word>) -> Self {
        let lens: Vec<u32> = words.iter().map(|w| w.symbols.len() as u32).collect();
        let counts: Vec<u64> = words.iter().map(|w| w.count).collect();
        let symbols = words.iter().flat_map(|w| w.symbols.iter().copied());
        Words::build(symbols, &lens, &counts).expect("a small test table")
    }
}

pub struct Trainer {
    words: Words,
    /// Length of each token in base symbols, so positions survive merges.
    token_len: Vec<u32>,
    stats: FxHashMap<Pair, PairStats>,
    queue: Queue,
    /// `apply_merge`'s deltas, kept so merges allocate nothing, and the
    /// list it gathers a merge's deltas in, one per run of words.
    scratch: Vec<Delta>,
    runs: Vec<Delta>,
    /// Pairs counted below this were left out (`floor.rs`); 0: none were.
    floor: i64,
}

/// Hint the CPU to load `p`'s cache line; a no-op where unsupported.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is only a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    }
}

/// How often `pair` occurs in `symbols` (overlapping, as pairs are counted)
/// and the position (in base symbols) of its first occurrence; None if never.
fn count_pair(symbols: &[u32], pair: Pair, token_len: &[u32]) -> Option<(i64, u32)> {
    let first = find_pair(symbols, pair, token_len)?;
    let n = symbols.windows(2).filter(|w| (w[0], w[1]) == pair).count();
    Some((n as i64, first))
}

/// Position (in base symbols) of the first occurrence of `pair` in `symbols`.
fn find_pair(symbols: &[u32], pair: Pair, token_len: &[u32]) -> Option<u32> {
    let first = find_first(symbols, pair)?;
    Some(position(&symbols[..first], token_len))
}

/// Where the symbol after `symbols` starts, in base symbols.
fn position(symbols: &[u32], token_len: &[u32]) -> u32 {
    symbols.iter().map(|&t| token_len[t as usize]).sum()
}

impl Trainer {
    /// `base_size` is the number of base tokens; merges get ids from there on.
    pub fn new(words: impl Into<Words>, base_size: u32) -> Self {
        let token_len = vec![1; base_size as usize];
        let words = words.into();
        let (stats, firsts) = initial_stats(&words);
        let mut queue = Queue::new();
        for entry in firsts {
            queue.push(entry);
        }
        Trainer {
            words,
            token_len,
            stats,
            queue,
            scratch: Vec::new(),
            runs: Vec::new(),
            floor: 0,
        }
    }

    /// The first (word, position) holding `pair`, dropping stale word entries.
    fn first_occurrence(&mut self, pair: Pair) -> Option<(u32, u32)> {
        let stats = self.stats.get_mut(&pair)?;
        if stats.count <= 0 {
            return None;
        }
        let mut found = None;
        let mut stale = 0;
        for &w in &stats.words {
            if let Some(pos) = find_pair(self.words.get(w), pair, &self.token_len) {
                found = Some((w, pos));
                break;
            }
            stale += 1;
        }
        stats.words.drain(..stale);
        found
    }

    /// The next pair to merge under the exact rule, with the word of its
    /// first occurrence, or `None` when none is left.
    fn best_pair(&mut self) -> Option<(Pair, u32)> {
        loop {
            let entry = self.queue.pop();
            // Below the floor, a pair left out may be the best: count them.
            if entry.map_or(self.floor > 0, |e| e.0 < self.floor) {
                self.lower_floor();
                continue;
            }
            let (count, Reverse(w), Reverse(pos), Reverse(pair)) = entry?;
            let live = match self.stats.get(&pair) {
                Some(s) if s.count > 0 => s.count,
                Some(_) => continue,
                // A pair made in one word has no statistics (see
                // `apply_merge`): that word, the entry's, tells its count.
                None => {
                    let (symbols, weight) = word_at(&self.words.buf[w as usize..]);
                    let Some((n, first)) = count_pair(symbols, pair, &self.token_len) else {
                        continue; // gone (or dead: no word holds it)
                    };
                    let live = n * weight;
                    if (live, first) == (count, pos) {
                        return Some((pair, w));
                    }
                    self.queue.push_pair(pair, live, (w, first));
                    continue;
                }
            };
            if live != count {
                // The old first occurrence is still a bound (it only moves
                // right), so skip the word scan until the entry is on top again.
                self.queue.push_pair(pair, live, (w, pos));
                continue;
            }
            match self.first_occurrence(pair) {
                Some(first) if first == (w, pos) => return Some((pair, w)),
                Some(first) => self.queue.push_pair(pair, live, first),
                None => {}
            }
        }
    }

    /// Train up to `num_merges` merges; stops early when no pair is left.
    /// Ids are u32: merges stop before the next id would not fit.
    /// `Error::Stopped` once `stop` is set (a signal came): it is looked at
    /// before each merge, so a training of any size ends within one.
    pub fn train(
        mut self,
        num_merges: usize,
        progress: impl FnMut(usize),
        stop: &AtomicBool,
    ) -> Result<Vec<Pair>> {
        self.train_where(num_merges, progress, |_| true, stop)
    }

    /// Word `i`'s tokens (in table order) as the merges so far left them.
    pub fn word(&self, i: usize) -> &[u32] {
        self.words.get(self.words.starts[i])
    }

    /// `train`, learning only pairs that `admit` accepts: a refused pair is
    /// dropped for good (no merge gives an existing pair occurrences again),
    /// and the next best pair is taken as if it had never been there.
    pub fn train_where(
        &mut self,
        num_merges: usize,
        mut progress: impl FnMut(usize),
        mut admit: impl FnMut(Pair) -> bool,
        stop: &AtomicBool,
    ) -> Result<Vec<Pair>> {
        let num_merges = num_merges.min(u32::MAX as usize + 1 - self.token_len.len());
        // Each merge adds a handful of pairs: sizing for that up front saves
        // rehashing and regrowing (and page faults) along the way. Sized for
        // the merges the words can take, not for a vocabulary size far beyond
        // them, and never more than RESERVE_MERGES up front.
        let expected = num_merges.min(self.words.max_merges).min(RESERVE_MERGES);
        let mut merges = Vec::with_capacity(expected);
        self.stats.reserve(expected * 4);
        self.token_len.reserve(expected);
        while merges.len() < num_merges {
            if stop.load(Ordering::Relaxed) {
                return Err(Error::Stopped);
            }
            let Some((pair, first_word)) = self.best_pair() else {
                break;
            };
            if !admit(pair) {
                self.stats.remove(&pair);
                continue;
            }
            let new_id = self.token_len.len() as u32;
            self.token_len
                .push(self.token_len[pair.0 as usize] + self.token_len[pair.1 as usize]);
            self.apply_merge(pair, new_id, first_word);
            merges.push(pair);
            progress(merges.len());
        }
        Ok(merges)
    }

    /// Merge `pair` everywhere; `first_word` holds its first occurrence.
    fn apply_merge(&mut self, pair: Pair, new_id: u32, first_word: u32) {
        let words = match self.stats.remove(&pair) {
            Some(s) => s.words,
            None => smallvec::smallvec![first_word], // made in that word alone
        };
        let op = MergeOp {
            pair,
            new_id,
            token_len: &self.token_len,
        };
        let mut deltas = std::mem::take(&mut self.runs);
        if words.len() < PARALLEL_MIN_WORDS {
            let mut delta = self.scratch.pop().unwrap_or_default();
            delta.fit(self.token_len.len());
            merge_run(&mut self.words.buf, 0, &words, op, &mut delta);
            deltas.push(delta);
        } else {
            deltas.extend(merge_parallel(
                &mut self.words,
                &words,
                op,
                &mut self.scratch,
            ));
        }
        let (delta, rest) = deltas.split_first_mut().expect("a delta per run");
        for other in rest {
            delta.append(&op, other);
        }
        for (p, d) in delta.drain_lost(&op) {
            if let Entry::Occupied(mut e) = self.stats.entry(p) {
                e.get_mut().count -= d;
                // A pair that has lost every occurrence can never come back:
                // new adjacencies always involve the new token.
                if e.get().count <= 0 {
                    e.remove();
                }
            }
        }
        // A pair made below the floor stays below it (a pair never gains
        // occurrences after the merge that makes it): like the pairs the
        // floor left out, it is counted again when the floor is lowered.
        for (p, st, first) in delta.drain_created(self.floor) {
            let count = st.count;
            // A pair made in one word (half of all pairs made) can never be
            // in another: a pair is made only when the newer of its tokens
            // is. Its count is that word's occurrences times its weight, so
            // it needs no statistics, only its queue entry, which
            // `best_pair` checks against the word. Leaving such pairs out
            // keeps the statistics map small and spares an insertion each.
            if st.words.len() > 1 {
                self.stats.insert(p, st);
            }
            self.queue.push_pair(p, count, first);
        }
        self.scratch.append(&mut deltas);
        self.runs = deltas;
    }
}

/// `apply_merge`'s word loop over the thread pool: each task merges a run of
/// consecutive words, whose symbols are one disjoint slice of the buffer.
/// Each run gets a delta from `scratch` (the deltas are returned in run order).
fn merge_parallel(
    table: &mut Words,
    words: &[u32],
    op: MergeOp,
    scratch: &mut Vec<Delta>,
) -> Vec<Delta> {
    let size = words
        .len()
        .div_ceil(rayon::current_num_threads() * 4)
        .max(PARALLEL_MIN_WORDS / 2);
    // Each run's region reaches from its first word's header to the next
    // run's: disjoint slices, split off back to front.
    let mut rest: &mut [u32] = &mut table.buf;
    let mut runs = Vec::new();
    for run in words.chunks(size).rev() {
        let lo = run[0] as usize;
        let (head, region) = std::mem::take(&mut rest).split_at_mut(lo);
        rest = head;
        runs.push((region, lo, run));
    }
    runs.reverse();
    let deltas: Vec<Delta> = (0..runs.len())
        .map(|_| {
            let mut delta = scratch.pop().unwrap_or_default();
            delta.fit(op.token_len.len());
            delta
        })
        .collect();
    runs.into_par_iter()
        .zip(deltas)
        .map(|((region, base, run), mut delta)| {
            merge_run(region, base, run, op, &mut delta);
            delta
        })
        .collect()
}

/// One merge: the pair, the id of the token it makes, and every token's
/// length in base symbols (the new one's included).
#[derive(Clone, Copy)]
struct MergeOp<'a> {
    pair: Pair,
    new_id: u32,
    token_len: &'a [u32],
}

/// Merge `op.pair` in each of `words` (ascending), whose symbols lie in
/// `region` from buffer offset `base` on, recording the changes in `delta`.
fn merge_run(region: &mut [u32], base: usize, words: &[u32], op: MergeOp, delta: &mut Delta) {
    // Word lists are sparse in memory: fetch ahead, or every word is a cache
    // miss. The first words are fetched together up front, which is what
    // most merges (a few words each) wait on. A word's header and symbols
    // average about a cache line (13 symbols on the corpus), so most words
    // straddle two: fetching both lines was 5-10% faster on both corpora.
    const AHEAD: usize = 8;
    const LINE: usize = 64 / std::mem::size_of::<u32>();
    let origin = region.as_ptr();
    let fetch = |w: u32| {
        let at = origin.wrapping_add(w as usize - base);
        prefetch(at);
        prefetch(at.wrapping_add(LINE));
    };
    words.iter().take(AHEAD).for_each(|&w| fetch(w));
    for (k, &w) in words.iter().enumerate() {
        if let Some(&ahead) = words.get(k + AHEAD) {
            fetch(ahead);
        }
        let at = w as usize - base;
        let weight = word_at(&region[at..]).1;
        let (head, symbols) = region[at..].split_at_mut(HEADER);
        let word = &mut symbols[..head[0] as usize];
        let new_len = merge_word(word, op.pair, op.new_id, op.token_len, |p, d, at| {
            if p == op.pair {
                // Its statistics go as a whole: apply_merge removed them.
                return;
            }
            if d > 0 {
                delta.made(&op, p, w, at, weight);
            } else {
                delta.lose(&op, p, weight);
            }
        });
        head[0] = new_len as u32;
    }
}

/// The index of the first occurrence of `pair` in `symbols`. Eight positions
/// are compared at a time without branching (the compiler vectorizes it):
/// a visit mostly scans a whole word, and a word that lost the pair has no
/// match at all.
#[inline(always)]
fn find_first(symbols: &[u32], (a, b): Pair) -> Option<usize> {
    const LANES: usize = 8;
    let n = symbols.len();
    if n < 2 {
        return None;
    }
    let (lefts, rights) = (&symbols[..n - 1], &symbols[1..]);
    let mut i = 0;
    while i + LANES < n {
        let (l, r) = (&lefts[i..i + LANES], &rights[i..i + LANES]);
        let mut hits = 0u32;
        for j in 0..LANES {
            hits |= u32::from((l[j] == a) & (r[j] == b)) << j;
        }
        if hits != 0 {
            return Some(i + hits.trailing_zeros() as usize);
        }
        i += LANES;
    }
    (i..n - 1).find(|&k| lefts[k] == a && rights[k] == b)
}

/// Merge every occurrence of `pair` in place, left to right without overlap,
/// reporting each adjacent-pair change as `(pair, +1 | -1, position)`, left
/// to right; a created pair's position (in base symbols, by `token_len`) is
/// where it now starts. Returns the new length.
pub fn merge_word(
    symbols: &mut [u32],
    pair: Pair,
    new_id: u32,
    token_len: &[u32],
    mut change: impl FnMut(Pair, i64, u32),
) -> usize {
    let (a, b) = pair;
    let n = symbols.len();
    let is_match = |s: &[u32], i: usize| i + 1 < n && s[i] == a && s[i + 1] == b;
    let len = |t: u32| token_len[t as usize];
    // Nothing changes before the first match (and a word that lost the pair
    // has none): find it without rewriting or measuring symbols.
    let Some(first) = find_first(symbols, pair) else {
        return n;
    };
    // Reads run ahead of writes (`o <= i`), so lookahead sees original symbols.
    let mut o = first;
    let mut at = position(&symbols[..first], token_len); // of output symbol `o`
    let mut last_was_merge = false;
    let mut i = first;
    // Each pass merges the match at `i`, then moves the symbols up to the
    // next match down in one copy: most of a word lies between matches.
    loop {
        debug_assert!(is_match(symbols, i));
        change(pair, -1, at);
        if o > 0 {
            let left = symbols[o - 1];
            let left_at = at - len(left);
            if last_was_merge {
                // (b, a) was already removed as the previous merge's right side.
                change((new_id, new_id), 1, left_at);
            } else {
                change((left, a), -1, left_at);
                change((left, new_id), 1, left_at);
            }
        }
        if i + 2 < n {
            change((b, symbols[i + 2]), -1, at + len(a));
            if !is_match(symbols, i + 2) {
                change((new_id, symbols[i + 2]), 1, at);
            }
        }
        symbols[o] = new_id;
        at += len(new_id);
        o += 1;
        i += 2;
        let next = find_first(&symbols[i..], pair).map_or(n, |k| i + k);
        last_was_merge = next == i;
        symbols.copy_within(i..next, o);
        let moved = o..o + (next - i);
        o = moved.end;
        if next == n {
            return o;
        }
        at += position(&symbols[moved], token_len);
        i = next;
    }
}

/// Pairs of ids below this are found by indexing a table, not by hashing:
/// every pair of bytes, and in char mode the pairs of the first characters.
const DENSE_IDS: u32 = 256;

/// The pairs met so far, each with its statistics and first occurrence, in
/// the order they were met; `slot` finds a pair's entry.
#[derive(Default)]
struct PairList {
    dense: Vec<u32>,
    sparse: FxHashMap<Pair, u32>,
    entries: Vec<(Pair, PairStats, (u32, u32))>,
}

impl PairList {
    fn new() -> Self {
        PairList {
            dense: vec![u32::MAX; (DENSE_IDS * DENSE_IDS) as usize],
            ..Default::default()
        }
    }

    /// The entry of `pair`, new (first met at `first()`) if it has none.
    #[inline(always)]
    fn entry(&mut self, pair: Pair, first: impl FnOnce() -> (u32, u32)) -> &mut PairStats {
        let at = self.index(pair, first);
        &mut self.entries[at].1
    }

    /// The index in `entries` of `pair`'s entry, new (first met at
    /// `first()`) if it has none.
    #[inline(always)]
    fn index(&mut self, pair: Pair, first: impl FnOnce() -> (u32, u32)) -> usize {
        let fresh = self.entries.len() as u32;
        let at = if pair.0 < DENSE_IDS && pair.1 < DENSE_IDS {
            let slot = &mut self.dense[(pair.0 * DENSE_IDS + pair.1) as usize];
            if *slot == u32::MAX {
                *slot = fresh;
            }
            *slot
        } else {
            *self.sparse.entry(pair).or_insert(fresh)
        };
        if at == fresh {
            self.entries.push((pair, PairStats::default(), first()));
        }
        at as usize
    }
}

/// Every pair's statistics, and its queue entry: its count and where it is
/// first met (base symbols are one long, so a position is an index).
fn initial_stats(words: &Words) -> (FxHashMap<Pair, PairStats>, Vec<HeapEntry>) {
    count_pairs(words, |_| true, |_| 1)
}

/// The statistics and queue entries of the pairs of `words` that `keep`
/// accepts, each first met at a position counted in `step(token)` per
/// token. Each thread counts a run of words; the runs' lists are joined in
/// word order.
fn count_pairs(
    words: &Words,
    keep: impl Fn(Pair) -> bool + Sync,
    step: impl Fn(u32) -> u32 + Sync,
) -> (FxHashMap<Pair, PairStats>, Vec<HeapEntry>) {
    let chunk = words
        .starts
        .len()
        .div_ceil(rayon::current_num_threads())
        .max(1024);
    let parts: Vec<PairList> = words
        .starts
        .par_chunks(chunk)
        .map(|starts| {
            let mut local = PairList::new();
            for &w in starts {
                let (symbols, count) = word_at(&words.buf[w as usize..]);
                for (k, s) in symbols.windows(2).enumerate() {
                    let pair = (s[0], s[1]);
                    if keep(pair) {
                        // The position only where the pair is new: few are.
                        let at = || (w, symbols[..k].iter().map(|&t| step(t)).sum());
                        let st = local.entry(pair, at);
                        st.count += count;
                        st.note_word(w);
                    }
                }
            }
            local
        })
        .collect();
    let mut parts = parts.into_iter();
    let mut all = parts.next().unwrap_or_default();
    // Each pair's statistics in the later chunks, in chunk order, appended to
    // its first on the pool: the word lists are megabytes to copy.
    let mut later: Vec<Vec<PairStats>> = Vec::new();
    for part in parts {
        for (pair, st, first) in part.entries {
            let i = all.index(pair, || first);
            if later.len() <= i {
                later.resize_with(i + 1, Vec::new);
            }
            later[i].push(st);
        }
    }
    later.resize_with(all.entries.len(), Vec::new);
    all.entries
        .par_iter_mut()
        .zip(later)
        .with_min_len(256)
        .for_each(|((_, st, _), tails)| {
            if !st.words.is_empty() {
                st.words
                    .reserve_exact(tails.iter().map(|t| t.words.len()).sum());
            }
            for tail in tails {
                // Chunks are in word order: appending keeps each word list sorted.
                st.append(tail);
            }
        });
    let mut stats = FxHashMap::default();
    stats.reserve(all.entries.len());
    let mut firsts = Vec::with_capacity(all.entries.len());
    for (pair, st, (w, pos)) in all.entries {
        firsts.push((st.count, Reverse(w), Reverse(pos), Reverse(pair)));
        stats.insert(pair, st);
    }
    (stats, firsts)
}

/// Char mode's base vocabulary: every character seen, plus the end-of-word
/// marker, sorted as strings (code point order).
pub fn char_alphabet(words: &[&str]) -> Vec<String> {
    let chars: FxHashSet<char> = words.par_iter().flat_map_iter(|w| w.chars()).collect();
    let mut alphabet: Vec<String> = chars.into_iter().map(String::from).collect();
    alphabet.push(END_OF_WORD.to_string());
    alphabet.sort_unstable();
    alphabet
}

/// Words as base-symbol sequences: their bytes (`alphabet` None) or their
/// characters plus end-of-word. Returns the words and the number of base
/// tokens; an error when the table is too large, or a character of a word (or
/// the end-of-word marker) is not in `alphabet`.
pub fn symbolize(
    words: &[&str],
    counts: &[u64],
    alphabet: Option<&[String]>,
) -> Result<(Words, u32)> {
    match alphabet {
        None => Ok((Words::from_bytes(words, counts)?, 256)),
        Some(alphabet) => {
            let base = u32::try_from(alphabet.len()).map_err(|_| {
                Error::Train(format!("an alphabet of {} characters", alphabet.len()))
            })?;
            let ids: FxHashMap<&str, u32> = alphabet
                .iter()
                .enumerate()
                .map(|(i, s)| (s.as_str(), i as u32))
                .collect();
            let end_of_word = *ids
                .get(END_OF_WORD)
                .ok_or_else(|| Error::Train(format!("the alphabet lacks {END_OF_WORD}")))?;
            let lens = word_lengths(words, |w| w.chars().count() + 1)?;
            let ids = &ids;
            let missing = std::cell::Cell::new(None);
            let symbols = words.iter().flat_map(|w| {
                let missing = &missing;
                w.chars()
                    .map(move |c| {
                        ids.get(&*c.encode_utf8(&mut [0u8; 4]))
                            .copied()
                            .unwrap_or_else(|| {
                                missing.set(Some(c));
                                end_of_word
                            })
                    })
                    .chain([end_of_word])
            });
            let table = Words::build(symbols, &lens, counts)?;
            match missing.get() {
                Some(c) => Err(Error::Train(format!(
                    "character {c:?} is not in the alphabet"
                ))),
                None => Ok((table, base)),
            }
        }
    }
}

/// Each word's length in symbols, as u32.
fn word_lengths(words: &[&str], len: impl Fn(&str) -> usize) -> Result<Vec<u32>> {
    words
        .iter()
        .map(|w| {
            u32::try_from(len(w)).map_err(|_| Error::Train("a word too long to train on".into()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair_counts(words: &[Vec<u32>]) -> FxHashMap<Pair, i64> {
        let mut m = FxHashMap::default();
        for w in words {
            for s in w.windows(2) {
                *m.entry((s[0], s[1])).or_default() += 1;
            }
        }
        m
    }

    #[test]
    fn merge_word_reports_exact_changes() {
        let cases: Vec<Vec<u32>> = vec![
            vec![0, 0, 0],
            vec![0, 0, 0, 0],
            vec![0, 1, 0, 1, 2],
            vec![2, 0, 1, 0, 1],
            vec![1, 0, 1, 1, 0, 1, 0],
        ];
        for pair in [(0, 0), (0, 1), (1, 0)] {
            for case in &cases {
                let mut s = case.clone();
                let mut counts = pair_counts(std::slice::from_ref(case));
                let n = merge_word(&mut s, pair, 9, &TOKEN_LEN, |p, d, _| {
                    *counts.entry(p).or_default() += d
                });
                s.truncate(n);
                counts.retain(|_, c| *c != 0);
                assert_eq!(counts, pair_counts(&[s.clone()]), "{case:?} {pair:?}");
            }
        }
    }

    /// Tokens 0..9 are base symbols; 9 is a merge of two.
    const TOKEN_LEN: [u32; 10] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 2];

    #[test]
    fn merge_word_reports_where_pairs_are_created() {
        let cases: Vec<Vec<u32>> = vec![
            vec![0, 1, 0, 1, 2],
            vec![2, 0, 1, 2, 0, 1, 0, 1],
            vec![1, 0, 1, 1, 0, 1, 0],
        ];
        for case in &cases {
            let mut s = case.clone();
            let mut created = Vec::new();
            let n = merge_word(&mut s, (0, 1), 9, &TOKEN_LEN, |p, d, at| {
                if d > 0 {
                    created.push((p, at));
                }
            });
            s.truncate(n);
            let mut expected = Vec::new();
            let mut at = 0;
            for w in s.windows(2) {
                if w.contains(&9) {
                    expected.push(((w[0], w[1]), at));
                }
                at += TOKEN_LEN[w[0] as usize];
            }
            assert_eq!(created, expected, "{case:?}");
        }
    }

    /// A generator of numbers below its argument (an LCG seeded with `seed`).
    fn below(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        }
    }

    /// Random words over tokens of lengths 1 to 4, merged by random pairs:
    /// the pairs each merge reports (counted) leave exactly the pairs of the
    /// result, and each created pair is reported where it starts in the
    /// result, in base symbols. Matches far apart, next to each other and
    /// overlapping (a, a) all occur.
    #[test]
    fn merge_word_reports_exact_changes_and_positions_on_random_words() {
        let mut next = below(7);
        let new_id = 6;
        let token_len: Vec<u32> = (0..6).map(|_| 1 + next(4) as u32).collect();
        for _ in 0..2000 {
            let word: Vec<u32> = (0..next(40)).map(|_| next(3) as u32).collect();
            let pair = (next(3) as u32, next(3) as u32);
            let mut lens = token_len.clone();
            lens.push(lens[pair.0 as usize] + lens[pair.1 as usize]);
            let mut s = word.clone();
            let mut counts = pair_counts(std::slice::from_ref(&word));
            let mut created = Vec::new();
            let n = merge_word(&mut s, pair, new_id, &lens, |p, d, at| {
                *counts.entry(p).or_default() += d;
                if d > 0 {
                    created.push((p, at));
                }
            });
            s.truncate(n);
            counts.retain(|_, c| *c != 0);
            assert_eq!(
                counts,
                pair_counts(std::slice::from_ref(&s)),
                "{word:?} {pair:?}"
            );
            let mut expected = Vec::new();
            let mut at = 0;
            for w in s.windows(2) {
                if w.contains(&new_id) {
                    expected.push(((w[0], w[1]), at));
                }
                at += lens[w[0] as usize];
            }
            assert_eq!(created, expected, "{word:?} {pair:?}");
        }
    }

    /// The textbook rule, recounting every pair before each merge.
    fn textbook_merges(mut words: Vec<Vec<u32>>, counts: &[u64], base: u32, n: usize) -> Vec<Pair> {
        let mut merges = Vec::new();
        for new_id in base..base + n as u32 {
            let mut stats: FxHashMap<Pair, (i64, usize)> = FxHashMap::default();
            let mut order = 0;
            for (w, &c) in words.iter().zip(counts) {
                for s in w.windows(2) {
                    let e = stats.entry((s[0], s[1])).or_insert((0, order));
                    e.0 += c as i64;
                    order += 1;
                }
            }
            let Some((&pair, _)) = stats
                .iter()
                .max_by_key(|(_, &(c, first))| (c, Reverse(first)))
            else {
                break;
            };
            for w in &mut words {
                let len = merge_word(w, pair, new_id, &[1; 1024], |_, _, _| {});
                w.truncate(len);
            }
            merges.push(pair);
        }
        merges
    }

    #[test]
    fn agrees_with_textbook_on_big_merges_split_over_threads() {
        let mut next = below(11);
        // Enough words that the first merges take the parallel path.
        let words: Vec<Vec<u32>> = (0..6 * PARALLEL_MIN_WORDS)
            .map(|_| (0..2 + next(10)).map(|_| next(4) as u32).collect())
            .collect();
        let counts: Vec<u64> = words.iter().map(|_| 1 + next(3)).collect();
        let table: Vec<Word> = words
            .iter()
            .zip(&counts)
            .map(|(w, &count)| Word {
                symbols: w.clone(),
                count,
            })
            .collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let merges = pool
            .install(|| Trainer::new(table, 4).train(60, |_| {}, &UNSTOPPED))
            .unwrap();
        assert_eq!(merges, textbook_merges(words, &counts, 4, 60));
    }

    #[test]
    fn words_from_runs_are_words_from_their_symbols() {
        let runs = vec![
            (vec![1, 2, 3, 4, 5], vec![2, 0, 3]),
            (vec![6], vec![1]),
            (vec![7, 8, 9], vec![3, 0]),
        ];
        let counts = [5, 1, 2, 7, 1 << 40, 3];
        let symbols: Vec<u32> = runs.iter().flat_map(|r| r.0.clone()).collect();
        let lens: Vec<u32> = runs.iter().flat_map(|r| r.1.clone()).collect();
        let built = Words::from_runs(&runs, &counts).unwrap();
        let expected = Words::from_symbols(&symbols, &lens, &counts).unwrap();
        assert_eq!(
            (built.buf, built.starts, built.max_merges),
            (expected.buf, expected.starts, expected.max_merges)
        );
        assert!(
            Words::from_runs(&runs, &counts[1..]).is_err(),
            "a count a word"
        );
    }

    #[test]
    fn ties_go_to_first_met_pair() {
        // "ab" then "cd", equal counts: (a,b) is met first.
        let words = vec![
            Word {
                symbols: vec![0, 1],
                count: 1,
            },
            Word {
                symbols: vec![2, 3],
                count: 1,
            },
        ];
        let merges = Trainer::new(words, 4)
            .train(10, |_| {}, &UNSTOPPED)
            .unwrap();
        assert_eq!(merges, vec![(0, 1), (2, 3)]);
    }

    #[test]
    fn a_stop_ends_training_before_the_next_merge() {
        let words: Vec<Word> = (0..50)
            .map(|i| Word {
                symbols: vec![i % 4, (i + 1) % 4, i % 3, 3, i % 2],
                count: 1 + i as u64,
            })
            .collect();
        let stop = AtomicBool::new(false);
        let mut made = 0;
        let stopped = Trainer::new(words, 4).train(
            40,
            |k| {
                made = k;
                if k == 3 {
                    stop.store(true, Ordering::Relaxed);
                }
            },
            &stop,
        );
        assert!(matches!(stopped, Err(Error::Stopped)));
        assert_eq!(made, 3);
    }
}
