//! Word counting for one shard: how often each word occurs and where it was
//! first seen. The first-occurrence key orders the merged word table, which
//! is what makes training ties independent of sharding and worker count.

use crate::error::Result;
use crate::pretok::PreTokenizer;
use crate::wordmap::{short_key_within, short_word, INLINE};
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHasher};
use std::collections::hash_map::Entry;
use std::hash::Hasher;

/// `row << 32 | word position in the row`: orders words by document, then by
/// position, within one shard.
pub fn first_key(row: u64, pos: u64) -> u64 {
    (row << 32) | pos.min(u32::MAX as u64)
}

#[derive(Clone, Copy)]
struct Seen {
    count: u64,
    first: u64,
}

impl Seen {
    fn absorb(&mut self, other: Seen) {
        self.count += other.count;
        self.first = self.first.min(other.first);
    }
}

/// Words longer than `short_key` packs (for superword tokens' stage 2,
/// mostly whole sentences), their bytes one after another in one buffer:
/// no allocation per word, and a growing table moves small entries instead
/// of hashing every word again.
struct LongWords {
    /// A word's hash -> its entry, the first of those with that hash (each
    /// names the next in `next`).
    index: FxHashMap<u64, usize>,
    entries: Vec<LongWord>,
    bytes: Vec<u8>,
    /// FxHash; a test makes every word collide.
    hash: fn(&[u8]) -> u64,
}

impl Default for LongWords {
    fn default() -> Self {
        LongWords {
            index: FxHashMap::default(),
            entries: Vec::new(),
            bytes: Vec::new(),
            hash: |word| {
                let mut hasher = FxHasher::default();
                hasher.write(word);
                hasher.finish()
            },
        }
    }
}

struct LongWord {
    at: usize,
    len: usize,
    next: usize,
    seen: Seen,
}

const NONE: usize = usize::MAX;

impl LongWords {
    fn word(&self, i: usize) -> &[u8] {
        let e = &self.entries[i];
        &self.bytes[e.at..e.at + e.len]
    }

    fn push(&mut self, word: &[u8], seen: Seen) -> usize {
        self.entries.push(LongWord {
            at: self.bytes.len(),
            len: word.len(),
            next: NONE,
            seen,
        });
        self.bytes.extend_from_slice(word);
        self.entries.len() - 1
    }

    fn add(&mut self, word: &[u8], seen: Seen) {
        let mut i = match self.index.entry((self.hash)(word)) {
            Entry::Occupied(e) => *e.get(),
            Entry::Vacant(e) => {
                e.insert(self.entries.len());
                self.push(word, seen);
                return;
            }
        };
        loop {
            if self.word(i) == word {
                return self.entries[i].seen.absorb(seen);
            }
            match self.entries[i].next {
                NONE => break,
                next => i = next,
            }
        }
        let new = self.push(word, seen);
        self.entries[i].next = new;
    }
}

/// A shard's words: those `short_key` packs by key, the others in
/// `LongWords`.
#[derive(Default)]
pub struct Counter {
    short: FxHashMap<u128, Seen>,
    long: LongWords,
}

impl Counter {
    #[inline(always)]
    fn tally(&mut self, text: &str, word: &str, seen: Seen) {
        match short_key_within(text.as_bytes(), word.as_bytes()) {
            Some(k) => self.add_short(k, seen),
            None => self.long.add(word.as_bytes(), seen),
        }
    }

    #[inline(always)]
    fn add_short(&mut self, key: u128, seen: Seen) {
        self.short
            .entry(key)
            .and_modify(|s| s.absorb(seen))
            .or_insert(seen);
    }

    /// Fold `other`'s words into these.
    fn absorb(&mut self, other: Counter) {
        self.short.reserve(other.short.len());
        for (k, seen) in other.short {
            self.add_short(k, seen);
        }
        for (i, e) in other.long.entries.iter().enumerate() {
            self.long.add(other.long.word(i), e.seen);
        }
    }
}

/// Words of a shard sorted by first occurrence, as Arrow-style buffers:
/// word i is `data[offsets[i]..offsets[i + 1]]`.
pub struct CountTable {
    pub offsets: Vec<i64>,
    pub data: Vec<u8>,
    pub counts: Vec<u64>,
    pub firsts: Vec<u64>,
}

impl CountTable {
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    pub fn word(&self, i: usize) -> &str {
        let bytes = &self.data[self.offsets[i] as usize..self.offsets[i + 1] as usize];
        std::str::from_utf8(bytes).expect("words are UTF-8")
    }
}

/// Count the words of `texts` (rows from `first_row` on) into `counter`.
fn count_into(
    counter: &mut Counter,
    pretok: &PreTokenizer,
    texts: &[&str],
    first_row: u64,
) -> Result<()> {
    for (i, &text) in texts.iter().enumerate() {
        let row = first_row + i as u64;
        let mut pos = 0u64;
        pretok.for_each_word_in(text, |w| {
            let first = first_key(row, pos);
            pos += 1;
            // `min`: batches may come in any order, the first key stays the least.
            counter.tally(text, w, Seen { count: 1, first });
        })?;
    }
    Ok(())
}

impl Counter {
    /// Count the words of a batch of documents whose first row is `first_row`,
    /// split over the current thread pool when `parallel`, else on this
    /// thread alone (the caller runs other shards beside it).
    pub fn add(
        &mut self,
        pretok: &PreTokenizer,
        texts: &[&str],
        first_row: u64,
        parallel: bool,
    ) -> Result<()> {
        // Char mode lowercases whole documents first (word boundaries are
        // unchanged, and final sigma needs the context).
        let lowered: Vec<String>;
        let texts: Vec<&str> = match pretok {
            PreTokenizer::Whitespace { lowercase: true } => {
                lowered = if parallel {
                    texts.par_iter().map(|t| t.to_lowercase()).collect()
                } else {
                    texts.iter().map(|t| t.to_lowercase()).collect()
                };
                lowered.iter().map(String::as_str).collect()
            }
            _ => texts.to_vec(),
        };
        if !parallel {
            // Straight into the shard's counter: one per batch would be grown
            // from empty, then folded in word by word.
            return count_into(self, pretok, &texts, first_row);
        }
        let chunk = texts
            .len()
            .div_ceil(rayon::current_num_threads() * 2)
            .max(16);
        let parts: Vec<Counter> = texts
            .par_chunks(chunk)
            .enumerate()
            .map(|(ci, part)| {
                let mut counter = Counter::default();
                count_into(&mut counter, pretok, part, first_row + (ci * chunk) as u64)?;
                Ok(counter)
            })
            .collect::<Result<_>>()?;
        for part in parts {
            self.absorb(part);
        }
        Ok(())
    }

    pub fn finish(self) -> CountTable {
        // Every word by first occurrence (unique to it), then its bytes
        // copied once, in that order: from its short key, or from the long
        // words' buffer (the key's length byte LONG, the entry's index below).
        const LONG: u128 = 0xff << (8 * INLINE);
        let (short, mut long) = (self.short, self.long);
        drop(std::mem::take(&mut long.index));
        let n = short.len() + long.entries.len();
        let mut order: Vec<(u64, u64, u128)> = Vec::with_capacity(n);
        let mut size = 0;
        for (k, seen) in short {
            size += (k >> (8 * INLINE)) as usize;
            order.push((seen.first, seen.count, k));
        }
        for (i, e) in long.entries.iter().enumerate() {
            size += e.len;
            order.push((e.seen.first, e.seen.count, LONG | i as u128));
        }
        order.sort_unstable_by_key(|e| e.0);
        let mut table = CountTable {
            offsets: Vec::with_capacity(n + 1),
            data: Vec::with_capacity(size),
            counts: Vec::with_capacity(n),
            firsts: Vec::with_capacity(n),
        };
        table.offsets.push(0);
        for (first, count, key) in order {
            if key & LONG == LONG {
                table.data.extend_from_slice(long.word(key as usize));
            } else {
                let (buf, len) = short_word(key);
                table.data.extend_from_slice(&buf[..len]);
            }
            table.offsets.push(table.data.len() as i64);
            table.counts.push(count);
            table.firsts.push(first);
        }
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_first_occurrence() {
        let pt = PreTokenizer::whitespace(true);
        let mut c = Counter::default();
        c.add(&pt, &["b a", "A c b"], 0, true).unwrap();
        let t = c.finish();
        let words: Vec<&str> = (0..t.len()).map(|i| t.word(i)).collect();
        assert_eq!(words, ["b", "a", "c"]);
        assert_eq!(t.counts, [2, 2, 1]);
        assert_eq!(
            t.firsts,
            [first_key(0, 0), first_key(0, 1), first_key(1, 1)]
        );
    }

    /// One batch or several, in order or not, on the pool or on this thread:
    /// the same table (long words included).
    #[test]
    fn batching_and_order_do_not_change_the_table() {
        let pt = PreTokenizer::for_pattern("cl100k").unwrap();
        let texts: Vec<String> = (0..60)
            .map(|i| {
                format!(
                    "w{} common x{} a_word_longer_than_fifteen_bytes{}",
                    i % 7,
                    i,
                    i % 3
                )
            })
            .collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let table = |batches: &[(usize, usize)], parallel: bool| {
            let mut c = Counter::default();
            for &(lo, hi) in batches {
                c.add(&pt, &texts[lo..hi], lo as u64, parallel).unwrap();
            }
            let t = c.finish();
            (t.offsets, t.data, t.counts, t.firsts)
        };
        let whole = table(&[(0, 60)], false);
        assert_eq!(table(&[(0, 60)], true), whole);
        assert_eq!(table(&[(0, 20), (20, 45), (45, 60)], false), whole);
        assert_eq!(table(&[(45, 60), (0, 20), (20, 45)], false), whole);
        assert_eq!(table(&[(20, 45), (45, 60), (0, 20)], true), whole);
    }

    /// Long words whose hashes collide are still told apart by their bytes.
    #[test]
    fn long_words_with_one_hash() {
        let mut c = Counter::default();
        c.long.hash = |_| 7;
        let words = ["a sentence of some length", "another sentence, as long"];
        for (i, w) in words.iter().chain(&words).chain(&words[1..]).enumerate() {
            let seen = Seen {
                count: 1,
                first: 10 - i as u64,
            };
            c.tally(w, w, seen);
        }
        let t = c.finish();
        let found: Vec<&str> = (0..t.len()).map(|i| t.word(i)).collect();
        assert_eq!(found, [words[1], words[0]]);
        assert_eq!(t.counts, [3, 2]);
        assert_eq!(t.firsts, [6, 8]);
    }
}
