//! Word counting for one shard: how often each word occurs and where it was
//! first seen. The first-occurrence key orders the merged word table, which
//! is what makes training ties independent of sharding and worker count.

use crate::error::Result;
use crate::pretok::PreTokenizer;
use crate::wordmap::WordMap;
use rayon::prelude::*;

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

#[derive(Default)]
pub struct Counter {
    words: WordMap<Box<str>, Seen>,
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

/// Count the words of `texts` (rows from `first_row` on) into `map`; `own`
/// makes the key of a new long word.
fn count_into<'a, L: std::hash::Hash + Eq + std::borrow::Borrow<str>>(
    map: &mut WordMap<L, Seen>,
    own: impl Fn(&'a str) -> L,
    pretok: &PreTokenizer,
    texts: &[&'a str],
    first_row: u64,
) -> Result<()> {
    for (i, &text) in texts.iter().enumerate() {
        let row = first_row + i as u64;
        let mut pos = 0u64;
        pretok.for_each_word_in(text, |w| {
            let first = first_key(row, pos);
            pos += 1;
            // `min`: batches may come in any order, the first key stays the least.
            let seen = Seen { count: 1, first };
            map.upsert_within(text, w, &own, |s| s.absorb(seen), || seen);
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
            // Straight into the shard's map: a map per batch would be grown
            // from empty, then folded in word by word.
            return count_into(&mut self.words, Box::from, pretok, &texts, first_row);
        }
        let chunk = texts
            .len()
            .div_ceil(rayon::current_num_threads() * 2)
            .max(16);
        let maps: Vec<WordMap<&str, Seen>> = texts
            .par_chunks(chunk)
            .enumerate()
            .map(|(ci, part)| {
                let mut map = WordMap::default();
                count_into(
                    &mut map,
                    |w| w,
                    pretok,
                    part,
                    first_row + (ci * chunk) as u64,
                )?;
                Ok(map)
            })
            .collect::<Result<_>>()?;
        for map in maps {
            self.words.absorb(map, Box::from, Seen::absorb);
        }
        Ok(())
    }

    pub fn finish(self) -> CountTable {
        // Gather the words' bytes in map order, then copy them out in
        // first-occurrence order: two flat copies, no allocation per word.
        let mut unsorted = Vec::new();
        let mut entries: Vec<(u64, u64, usize, usize)> = Vec::with_capacity(self.words.len());
        self.words.drain_into(|w, s| {
            entries.push((s.first, s.count, unsorted.len(), w.len()));
            unsorted.extend_from_slice(w);
        });
        entries.sort_unstable_by_key(|e| e.0);
        let mut table = CountTable {
            offsets: Vec::with_capacity(entries.len() + 1),
            data: Vec::with_capacity(unsorted.len()),
            counts: Vec::with_capacity(entries.len()),
            firsts: Vec::with_capacity(entries.len()),
        };
        table.offsets.push(0);
        for (first, count, at, len) in entries {
            table.data.extend_from_slice(&unsorted[at..at + len]);
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
}
