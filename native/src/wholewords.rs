//! Whole-word tokens, word -> id, for encoders whose words that are whole
//! tokens skip merging (tiktoken's, Hugging Face's `ignore_merges`).
//!
//! Each word the caches lack is looked up here before it is merged, and most
//! of those words are no token: in a map of 200k words, a lookup waited on
//! memory for two lines. A bitset of 256 KB in front of the map, two bits
//! per token, answers "no token" for nearly all of them from the CPU's cache.

use crate::wordmap::WordMap;
use rustc_hash::FxBuildHasher;
use std::hash::BuildHasher;

const FILTER_BITS: u32 = 21;

pub struct WholeWords {
    /// Short ones keyed in place (see `WordMap`), so 200k tokens make few
    /// allocations to build and a lookup follows no pointer.
    map: WordMap<Box<str>, u32>,
    /// Bits `bits(word)` of every word in `map`.
    filter: Box<[u64]>,
}

/// The two filter bits of a word.
#[inline(always)]
fn bits(word: &str) -> [usize; 2] {
    let h = FxBuildHasher.hash_one(word.as_bytes());
    let mask = (1 << FILTER_BITS) - 1;
    [(h >> (64 - FILTER_BITS)) as usize, (h >> 8) as usize & mask]
}

impl WholeWords {
    /// The id of the token whose bytes are `word`'s.
    #[inline]
    pub fn get(&self, word: &str) -> Option<&u32> {
        let set = |b: usize| self.filter[b / 64] >> (b % 64) & 1 != 0;
        if !bits(word).into_iter().all(set) {
            return None;
        }
        self.map.get(word)
    }
}

/// The whole-word map of `tokens` (bytes, id). A token that is not UTF-8 is
/// left out: words are text, so no word could equal it. Of equal tokens the
/// last listed wins.
pub fn whole_words<'a>(tokens: impl Iterator<Item = (&'a [u8], u32)>) -> WholeWords {
    let mut words = WholeWords {
        map: WordMap::default(),
        filter: vec![0; 1 << (FILTER_BITS - 6)].into_boxed_slice(),
    };
    let (at_least, at_most) = tokens.size_hint();
    words.map.reserve(at_most.unwrap_or(at_least));
    for (bytes, id) in tokens {
        if let Ok(word) = std::str::from_utf8(bytes) {
            words.map.upsert(word, Box::from, |v| *v = id, || id);
            for b in bits(word) {
                words.filter[b / 64] |= 1 << (b % 64);
            }
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_found_and_other_words_are_not() {
        let tokens: Vec<(String, u32)> = (0..50_000u32)
            .map(|i| (format!("w{i}"), i))
            .chain([("a long word of more than fifteen bytes".into(), 7)])
            .collect();
        let words = whole_words(tokens.iter().map(|(w, id)| (w.as_bytes(), *id)));
        for (w, id) in &tokens {
            assert_eq!(words.get(w), Some(id), "{w}");
        }
        for i in 50_000..100_000 {
            assert_eq!(words.get(&format!("w{i}")), None);
        }
        // Of equal tokens the last listed wins.
        let twice = whole_words([(&b"x"[..], 1), (&b"x"[..], 2)].into_iter());
        assert_eq!(twice.get("x"), Some(&2));
    }
}
