//! Incremental BPE training with exact tie-breaking.
//!
//! Rule: merge the pair with the highest weighted count; ties go to the pair
//! met first when scanning words in table order, each left to right.
//! A pair's count never grows after it first exists and its first position
//! only moves right, so stored heap entries are optimistic bounds: popping an
//! entry and re-checking it against the live state is exact (see DESIGN.md).

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

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
    /// Indices of words that may hold the pair (a superset; may be unsorted).
    words: Vec<u32>,
    sorted: bool,
}

impl PairStats {
    fn note_word(&mut self, w: u32) {
        match self.words.last() {
            Some(&last) if last == w => {}
            Some(&last) => {
                self.sorted &= last < w;
                self.words.push(w);
            }
            None => {
                self.sorted = true;
                self.words.push(w);
            }
        }
    }

    fn sorted_words(&mut self) -> &[u32] {
        if !self.sorted {
            self.words.sort_unstable();
            self.words.dedup();
            self.sorted = true;
        }
        &self.words
    }
}

/// Heap key: higher count first, then earlier word, then earlier position.
type Entry = (i64, Reverse<u32>, Reverse<u32>, Reverse<Pair>);

/// Every word's symbols in one buffer, in table order: walking a sorted word
/// list walks memory forward, which is what makes merging fast.
struct Words {
    symbols: Vec<u32>,
    /// (start, current length) of each word in `symbols`; merges shrink words in place.
    spans: Vec<(usize, u32)>,
    counts: Vec<i64>,
}

impl Words {
    fn new(words: Vec<Word>) -> Self {
        let total = words.iter().map(|w| w.symbols.len()).sum();
        let mut flat = Words {
            symbols: Vec::with_capacity(total),
            spans: Vec::with_capacity(words.len()),
            counts: Vec::with_capacity(words.len()),
        };
        for word in words {
            flat.spans
                .push((flat.symbols.len(), word.symbols.len() as u32));
            flat.symbols.extend_from_slice(&word.symbols);
            flat.counts.push(word.count as i64);
        }
        flat
    }

    fn get(&self, w: u32) -> &[u32] {
        let (start, len) = self.spans[w as usize];
        &self.symbols[start..start + len as usize]
    }
}

pub struct Trainer {
    words: Words,
    /// Length of each token in base symbols, so positions survive merges.
    token_len: Vec<u32>,
    stats: FxHashMap<Pair, PairStats>,
    heap: BinaryHeap<Entry>,
}

/// Hint the CPU to load `p`'s cache line; a no-op where unsupported.
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is only a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    }
}

/// Position (in base symbols) of the first occurrence of `pair` in `symbols`.
fn find_pair(symbols: &[u32], pair: Pair, token_len: &[u32]) -> Option<u32> {
    let mut offset = 0u32;
    for w in symbols.windows(2) {
        if (w[0], w[1]) == pair {
            return Some(offset);
        }
        offset += token_len[w[0] as usize];
    }
    None
}

impl Trainer {
    /// `base_size` is the number of base tokens; merges get ids from there on.
    pub fn new(words: Vec<Word>, base_size: u32) -> Self {
        let token_len = vec![1; base_size as usize];
        let words = Words::new(words);
        let stats = initial_stats(&words);
        let mut trainer = Trainer {
            words,
            token_len,
            stats,
            heap: BinaryHeap::new(),
        };
        let pairs: Vec<Pair> = trainer.stats.keys().copied().collect();
        for pair in pairs {
            trainer.push(pair);
        }
        trainer
    }

    /// Push the pair's live count and first occurrence onto the heap.
    fn push(&mut self, pair: Pair) {
        if let Some(first) = self.first_occurrence(pair) {
            let count = self.stats[&pair].count;
            self.heap
                .push((count, Reverse(first.0), Reverse(first.1), Reverse(pair)));
        }
    }

    /// The first (word, position) holding `pair`, dropping stale word entries.
    fn first_occurrence(&mut self, pair: Pair) -> Option<(u32, u32)> {
        let stats = self.stats.get_mut(&pair)?;
        if stats.count <= 0 {
            return None;
        }
        let words = stats.sorted_words();
        let mut found = None;
        let mut stale = 0;
        for &w in words {
            if let Some(pos) = find_pair(self.words.get(w), pair, &self.token_len) {
                found = Some((w, pos));
                break;
            }
            stale += 1;
        }
        stats.words.drain(..stale);
        found
    }

    /// The next pair to merge under the exact rule, or `None` when none is left.
    fn best_pair(&mut self) -> Option<Pair> {
        while let Some((count, Reverse(w), Reverse(pos), Reverse(pair))) = self.heap.pop() {
            let live = match self.stats.get(&pair) {
                Some(s) if s.count > 0 => s.count,
                _ => continue,
            };
            if live != count {
                self.push(pair);
                continue;
            }
            match self.first_occurrence(pair) {
                Some(first) if first == (w, pos) => return Some(pair),
                Some(_) => self.push(pair),
                None => {}
            }
        }
        None
    }

    /// Train up to `num_merges` merges; stops early when no pair is left.
    pub fn train(mut self, num_merges: usize, mut progress: impl FnMut(usize)) -> Vec<Pair> {
        let mut merges = Vec::with_capacity(num_merges);
        while merges.len() < num_merges {
            let Some(pair) = self.best_pair() else { break };
            let new_id = self.token_len.len() as u32;
            self.token_len
                .push(self.token_len[pair.0 as usize] + self.token_len[pair.1 as usize]);
            self.apply_merge(pair, new_id);
            merges.push(pair);
            progress(merges.len());
        }
        merges
    }

    fn apply_merge(&mut self, pair: Pair, new_id: u32) {
        let mut words = self
            .stats
            .remove(&pair)
            .map(|s| s.words)
            .unwrap_or_default();
        words.sort_unstable();
        words.dedup();
        let mut created = Vec::new();
        let stats = &mut self.stats;
        let Words {
            symbols,
            spans,
            counts,
        } = &mut self.words;
        for (k, &w) in words.iter().enumerate() {
            // Word lists are sparse in memory: fetch ahead, or every word is a cache miss.
            if let Some(&ahead) = words.get(k + 16) {
                prefetch(&spans[ahead as usize]);
                prefetch(&counts[ahead as usize]);
            }
            if let Some(&ahead) = words.get(k + 8) {
                prefetch(symbols.as_ptr().wrapping_add(spans[ahead as usize].0));
            }
            let (start, len) = &mut spans[w as usize];
            let weight = counts[w as usize];
            let word = &mut symbols[*start..*start + *len as usize];
            *len = merge_word(word, pair, new_id, |p, d| {
                if p == pair {
                    return;
                }
                if d > 0 {
                    let st = stats.entry(p).or_default();
                    st.count += weight;
                    st.note_word(w);
                    created.push(p);
                } else if let Some(st) = stats.get_mut(&p) {
                    st.count -= weight;
                    // A pair that has lost every occurrence can never come
                    // back: new adjacencies always involve the new token.
                    if st.count <= 0 {
                        stats.remove(&p);
                    }
                }
            }) as u32;
        }
        created.sort_unstable();
        created.dedup();
        for p in created {
            self.push(p);
        }
    }
}

/// Merge every occurrence of `pair` in place, left to right without overlap,
/// reporting each adjacent-pair change as `(pair, +1 | -1)`; returns the new length.
pub fn merge_word(
    symbols: &mut [u32],
    pair: Pair,
    new_id: u32,
    mut change: impl FnMut(Pair, i64),
) -> usize {
    let (a, b) = pair;
    let n = symbols.len();
    let is_match = |s: &[u32], i: usize| i + 1 < n && s[i] == a && s[i + 1] == b;
    // Reads run ahead of writes (`o <= i`), so lookahead sees original symbols.
    let mut o = 0;
    let mut last_was_merge = false;
    let mut i = 0;
    while i < n {
        if is_match(symbols, i) {
            change(pair, -1);
            if o > 0 {
                let left = symbols[o - 1];
                if last_was_merge {
                    // (b, a) was already removed as the previous merge's right side.
                    change((new_id, new_id), 1);
                } else {
                    change((left, a), -1);
                    change((left, new_id), 1);
                }
            }
            if i + 2 < n {
                change((b, symbols[i + 2]), -1);
                if !is_match(symbols, i + 2) {
                    change((new_id, symbols[i + 2]), 1);
                }
            }
            symbols[o] = new_id;
            last_was_merge = true;
            i += 2;
        } else {
            symbols[o] = symbols[i];
            last_was_merge = false;
            i += 1;
        }
        o += 1;
    }
    o
}

fn initial_stats(words: &Words) -> FxHashMap<Pair, PairStats> {
    let n = words.spans.len();
    let chunk = n.div_ceil(rayon::current_num_threads() * 4).max(1024);
    let parts: Vec<FxHashMap<Pair, PairStats>> = (0..n.div_ceil(chunk))
        .into_par_iter()
        .map(|ci| {
            let mut local: FxHashMap<Pair, PairStats> = FxHashMap::default();
            for w in (ci * chunk..n.min((ci + 1) * chunk)).map(|w| w as u32) {
                for s in words.get(w).windows(2) {
                    let st = local.entry((s[0], s[1])).or_default();
                    st.count += words.counts[w as usize];
                    st.note_word(w);
                }
            }
            local
        })
        .collect();
    // Chunks are in word order, so appending keeps each word list sorted.
    let mut stats: FxHashMap<Pair, PairStats> = FxHashMap::default();
    for part in parts {
        for (p, s) in part {
            let st = stats.entry(p).or_default();
            st.count += s.count;
            if st.words.is_empty() {
                st.sorted = true;
            }
            st.words.extend(s.words);
        }
    }
    stats
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
/// characters plus end-of-word. Returns the words and the number of base tokens.
pub fn symbolize(words: &[&str], counts: &[u64], alphabet: Option<&[String]>) -> (Vec<Word>, u32) {
    match alphabet {
        None => {
            let table = words
                .par_iter()
                .zip(counts)
                .map(|(w, &count)| Word {
                    symbols: w.bytes().map(u32::from).collect(),
                    count,
                })
                .collect();
            (table, 256)
        }
        Some(alphabet) => {
            let ids: FxHashMap<&str, u32> = alphabet
                .iter()
                .enumerate()
                .map(|(i, s)| (s.as_str(), i as u32))
                .collect();
            let end_of_word = ids[END_OF_WORD];
            let mut buf = [0u8; 4];
            let table = words
                .iter()
                .zip(counts)
                .map(|(w, &count)| {
                    let mut symbols: Vec<u32> =
                        w.chars().map(|c| ids[&*c.encode_utf8(&mut buf)]).collect();
                    symbols.push(end_of_word);
                    Word { symbols, count }
                })
                .collect();
            (table, alphabet.len() as u32)
        }
    }
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
                let n = merge_word(&mut s, pair, 9, |p, d| *counts.entry(p).or_default() += d);
                s.truncate(n);
                counts.retain(|_, c| *c != 0);
                assert_eq!(counts, pair_counts(&[s.clone()]), "{case:?} {pair:?}");
            }
        }
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
        let merges = Trainer::new(words, 4).train(10, |_| {});
        assert_eq!(merges, vec![(0, 1), (2, 3)]);
    }
}
