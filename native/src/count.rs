//! Word counting for one shard: how often each word occurs and where it was
//! first seen. The first-occurrence key orders the merged word table, which
//! is what makes training ties independent of sharding and worker count.

use crate::pretok::PreTokenizer;
use rayon::prelude::*;
use rustc_hash::FxHashMap;

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

#[derive(Default)]
pub struct Counter {
    words: FxHashMap<Box<str>, Seen>,
}

/// Words of a shard sorted by first occurrence.
pub struct CountTable {
    pub words: Vec<Box<str>>,
    pub counts: Vec<u64>,
    pub firsts: Vec<u64>,
}

fn count_chunk<'a>(
    pretok: &PreTokenizer,
    texts: &'a [&'a str],
    first_row: u64,
    lowered: &'a mut Vec<String>,
) -> FxHashMap<&'a str, Seen> {
    // Char mode lowercases whole documents; the owned copies must outlive the map.
    let sources: &'a [String] = match pretok {
        PreTokenizer::Whitespace { lowercase: true } => {
            *lowered = texts.iter().map(|t| t.to_lowercase()).collect();
            lowered
        }
        _ => &[],
    };
    let mut map: FxHashMap<&'a str, Seen> = FxHashMap::default();
    for (i, text) in texts.iter().enumerate() {
        let text: &'a str = sources.get(i).map_or(text, |s| s.as_str());
        let row = first_row + i as u64;
        let mut pos = 0u64;
        pretok.for_each_word_in(text, |w| {
            let key = first_key(row, pos);
            pos += 1;
            map.entry(w).and_modify(|s| s.count += 1).or_insert(Seen {
                count: 1,
                first: key,
            });
        });
    }
    map
}

impl Counter {
    /// Count the words of a batch of documents whose first row is `first_row`.
    pub fn add(&mut self, pretok: &PreTokenizer, texts: &[&str], first_row: u64) {
        let n_chunks = (rayon::current_num_threads() * 4).max(1);
        let chunk = texts.len().div_ceil(n_chunks).max(64);
        let maps: Vec<FxHashMap<Box<str>, Seen>> = texts
            .par_chunks(chunk)
            .enumerate()
            .map(|(ci, part)| {
                let mut lowered = Vec::new();
                let local =
                    count_chunk(pretok, part, first_row + (ci * chunk) as u64, &mut lowered);
                local.into_iter().map(|(w, s)| (Box::from(w), s)).collect()
            })
            .collect();
        for map in maps {
            for (w, s) in map {
                self.words
                    .entry(w)
                    .and_modify(|t| {
                        t.count += s.count;
                        t.first = t.first.min(s.first);
                    })
                    .or_insert(s);
            }
        }
    }

    pub fn finish(self) -> CountTable {
        let mut entries: Vec<(Box<str>, Seen)> = self.words.into_iter().collect();
        entries.sort_unstable_by_key(|(_, s)| s.first);
        let mut table = CountTable {
            words: Vec::with_capacity(entries.len()),
            counts: Vec::with_capacity(entries.len()),
            firsts: Vec::with_capacity(entries.len()),
        };
        for (w, s) in entries {
            table.words.push(w);
            table.counts.push(s.count);
            table.firsts.push(s.first);
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
        c.add(&pt, &["b a", "A c b"], 0);
        let t = c.finish();
        let words: Vec<&str> = t.words.iter().map(|w| &**w).collect();
        assert_eq!(words, ["b", "a", "c"]);
        assert_eq!(t.counts, [2, 2, 1]);
        assert_eq!(
            t.firsts,
            [first_key(0, 0), first_key(0, 1), first_key(1, 1)]
        );
    }
}
