//! Training that counts, at first, only the pairs that may win soon.
//!
//! Superword tokens' stage 2 trains on sentences: millions of distinct
//! pairs, nearly all rare, for a few thousand merges. Statistics for every
//! pair (each with its word list, then a map and a queue entry) were most of
//! its time and memory. Here the pairs are first counted roughly, in a table
//! of counts by a hash of the pair (two pairs sharing a slot add up, so a
//! slot's count is never below its pairs' own); only the pairs whose slot
//! reaches a floor get statistics. A pair's count never grows after the
//! merge that makes it, which counts it whole (and leaves it out too when it
//! is below the floor, as most are), so every pair left out stays below the
//! floor: the best pair is exact while it reaches the floor. When it no
//! longer does, the pairs are counted again from the words as they are then,
//! with a lower floor (last: none), and training goes on, exact throughout.

use super::*;

/// The floor is set so that about this many pairs for each merge asked for,
/// and at least `MIN_COUNTED`, reach it.
const PAIRS_PER_MERGE: usize = 4;
const MIN_COUNTED: usize = 4096;
/// Each lowering divides the floor by this; below it, every pair is counted.
const LOWER_BY: i64 = 8;
/// At most this many slots (8 MB of counts, a 256 KB bitmap of those kept).
const MAX_SLOTS: usize = 1 << 21;
/// Slots are counted in at most this many tables at once (32 MB at most).
const TABLES: usize = 4;

impl Trainer {
    /// A trainer for `merges` merges (or fewer) that counts only the pairs
    /// that may be among them, and the others when they may win.
    pub fn with_floor(words: impl Into<Words>, base_size: u32, merges: usize) -> Self {
        let wanted = (merges * PAIRS_PER_MERGE).max(MIN_COUNTED);
        Self::floored(words, base_size, wanted)
    }

    /// A trainer counting the pairs of the `wanted` highest slots, about.
    fn floored(words: impl Into<Words>, base_size: u32, wanted: usize) -> Self {
        let mut trainer = Trainer {
            words: words.into(),
            token_len: vec![1; base_size as usize],
            stats: FxHashMap::default(),
            queue: Queue::new(),
            scratch: Vec::new(),
            runs: Vec::new(),
            floor: 0,
        };
        let slots = Slots::count(&trainer.words);
        let floor = slots.floor_for(wanted);
        trainer.count_from(floor, slots.reaching(floor));
        trainer
    }

    /// Count the pairs again, from the words as they are now, with a lower
    /// floor: the best pair counted so far is below the floor.
    pub(super) fn lower_floor(&mut self) {
        let floor = if self.floor >= LOWER_BY {
            self.floor / LOWER_BY
        } else {
            0
        };
        let kept = (floor > 1).then(|| Slots::count(&self.words).reaching(floor));
        self.count_from(floor, kept.flatten());
    }

    /// Statistics and queue entries of the pairs `kept` holds (all of them
    /// when None), in place of those held; `floor`: the count every pair
    /// left out is below.
    fn count_from(&mut self, floor: i64, kept: Option<Kept>) {
        let token_len = &self.token_len;
        let (stats, firsts) = count_pairs(
            &self.words,
            |pair| kept.as_ref().is_none_or(|k| k.holds(pair)),
            // Positions are in base symbols, as merges keep them.
            |t| token_len[t as usize],
        );
        self.stats = stats;
        self.queue = Queue::new();
        for entry in firsts {
            self.queue.push(entry);
        }
        self.floor = if kept.is_some() { floor } else { 0 };
    }
}

/// The slot of a pair, of `1 << bits`.
#[inline(always)]
fn slot((a, b): Pair, bits: u32) -> usize {
    let key = (u64::from(a) << 32 | u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (key >> (64 - bits)) as usize
}

/// Weighted pair counts by slot: each slot at least the count of every pair
/// in it (u32::MAX standing for any count beyond).
struct Slots {
    counts: Vec<u32>,
    bits: u32,
}

impl Slots {
    fn count(words: &Words) -> Self {
        // About two slots a distinct pair (there are fewer than symbols), but
        // at most MAX_SLOTS: a table that stays in cache is counted faster,
        // which more than pays for the rare pairs that then share a slot with
        // a frequent one and get statistics with it.
        let n = (words.buf.len() / 2)
            .next_power_of_two()
            .clamp(1 << 12, MAX_SLOTS);
        let bits = n.trailing_zeros();
        // A table per thread (at most TABLES), each counting a run of words,
        // then added up: shared atomic counters cost a locked add per pair.
        let threads = rayon::current_num_threads().clamp(1, TABLES);
        let per = words.starts.len().div_ceil(threads).max(1);
        let mut tables: Vec<Vec<u32>> = (words.starts.par_chunks(per))
            .map(|starts| {
                let mut counts = vec![0u32; n];
                let mut at: SmallVec<[usize; 32]> = SmallVec::new();
                for &w in starts {
                    let (symbols, count) = word_at(&words.buf[w as usize..]);
                    let count = count.min(u32::MAX as i64) as u32;
                    // Every slot of the word first: their cache misses overlap.
                    at.clear();
                    for s in symbols.windows(2) {
                        let i = slot((s[0], s[1]), bits);
                        prefetch(&counts[i]);
                        at.push(i);
                    }
                    for &i in &at {
                        counts[i] = counts[i].saturating_add(count);
                    }
                }
                counts
            })
            .collect();
        let mut counts = tables.pop().unwrap_or_else(|| vec![0; n]);
        counts
            .par_chunks_mut(1 << 14)
            .enumerate()
            .for_each(|(k, chunk)| {
                for table in &tables {
                    let theirs = &table[k << 14..][..chunk.len()];
                    for (c, &t) in chunk.iter_mut().zip(theirs) {
                        *c = c.saturating_add(t);
                    }
                }
            });
        Slots { counts, bits }
    }

    /// The highest count that at least `wanted` slots reach (1 when fewer
    /// slots are in use): the floor that keeps about `wanted` slots. First
    /// by powers of two, then, within the one where `wanted` is reached, by
    /// the counts themselves: a power of two may keep several times more.
    fn floor_for(&self, wanted: usize) -> i64 {
        let mut reaching = [0usize; 32];
        for &c in &self.counts {
            if c > 0 {
                reaching[c.ilog2() as usize] += 1;
            }
        }
        let mut above = 0;
        for k in (0..32).rev() {
            if above + reaching[k] >= wanted {
                if k == 0 {
                    return 1;
                }
                let mut within: Vec<u32> = (self.counts.iter().copied())
                    .filter(|&c| c > 0 && c.ilog2() as usize == k)
                    .collect();
                let nth = wanted - above - 1;
                let (_, &mut floor, _) = within.select_nth_unstable_by(nth, |a, b| b.cmp(a));
                return i64::from(floor);
            }
            above += reaching[k];
        }
        1
    }

    /// The slots reaching `floor`; None (every pair) for a floor of 1 or less.
    fn reaching(&self, floor: i64) -> Option<Kept> {
        if floor <= 1 {
            return None;
        }
        let mut kept = PairBits::with_slots(self.bits);
        for (i, &c) in self.counts.iter().enumerate() {
            if i64::from(c) >= floor {
                kept.set(i);
            }
        }
        Some(kept)
    }
}

/// The pairs whose slot reached the floor.
type Kept = PairBits;

/// A bit per slot of hashed pairs (`slot`): a pair whose bit is clear is
/// none of those set; one that is set may be. Small enough to stay in cache
/// where a table of the pairs would not: the floor's pairs that may win,
/// or an encoder's few merges (`Encoder::with_pair_filter`).
pub(crate) struct PairBits {
    bits: Vec<u64>,
    slot_bits: u32,
}

impl PairBits {
    fn with_slots(slot_bits: u32) -> Self {
        PairBits {
            bits: vec![0; (1usize << slot_bits).div_ceil(64)],
            slot_bits,
        }
    }

    fn set(&mut self, i: usize) {
        self.bits[i / 64] |= 1 << (i % 64);
    }

    /// The bits of `pairs`, about 16 a pair: one pair in 16 that is none of
    /// them is let through.
    pub(crate) fn of_pairs<'p>(pairs: impl ExactSizeIterator<Item = &'p Pair>) -> Self {
        let n = (pairs.len() * 16).next_power_of_two().max(1 << 12);
        let mut bits = PairBits::with_slots(n.trailing_zeros());
        for &pair in pairs {
            bits.set(slot(pair, bits.slot_bits));
        }
        bits
    }

    #[inline(always)]
    pub(crate) fn holds(&self, pair: Pair) -> bool {
        let i = slot(pair, self.slot_bits);
        self.bits[i / 64] & (1 << (i % 64)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words of `n` symbols from a small alphabet, with counts: the floor
    /// must change no merge, whether it is reached early or never.
    fn random_words(seed: u64, n: usize, alphabet: u64) -> Vec<Word> {
        let mut s = seed | 1;
        let mut next = move |m: u64| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s % m
        };
        (0..n)
            .map(|_| Word {
                symbols: (0..1 + next(12)).map(|_| next(alphabet) as u32).collect(),
                count: 1 + next(3) * next(4),
            })
            .collect()
    }

    #[test]
    fn the_floor_keeps_about_the_slots_wanted() {
        // Counts 1..=1000 once each: the floor for `wanted` slots is the
        // wanted-th highest count, not the power of two below it.
        let slots = Slots {
            counts: (1..=1000).rev().chain([0; 24]).collect(),
            bits: 10,
        };
        for (wanted, floor) in [(1, 1000), (10, 991), (300, 701), (1000, 1), (5000, 1)] {
            assert_eq!(slots.floor_for(wanted), floor, "{wanted}");
        }
    }

    #[test]
    fn same_merges_as_counting_every_pair() {
        for (seed, alphabet, merges) in [(1, 6, 40), (2, 20, 200), (3, 50, 2000), (4, 3, 10)] {
            let words = random_words(seed, 3000, alphabet);
            let copy = |w: &Vec<Word>| -> Vec<Word> {
                (w.iter())
                    .map(|w| Word {
                        symbols: w.symbols.clone(),
                        count: w.count,
                    })
                    .collect()
            };
            let every = Trainer::new(copy(&words), alphabet as u32)
                .train(merges, |_| {}, &UNSTOPPED)
                .unwrap();
            let floored = Trainer::with_floor(copy(&words), alphabet as u32, merges);
            assert_eq!(
                floored.train(merges, |_| {}, &UNSTOPPED).unwrap(),
                every,
                "seed {seed}"
            );
            // A high floor, lowered on the way, perhaps to none.
            for wanted in [1, 5] {
                let high = Trainer::floored(copy(&words), alphabet as u32, wanted);
                assert!(high.floor > 1, "seed {seed}: a floor to lower");
                assert_eq!(
                    high.train(merges, |_| {}, &UNSTOPPED).unwrap(),
                    every,
                    "seed {seed}, {wanted}"
                );
            }
        }
    }
}
