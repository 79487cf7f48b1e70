//! A hash map keyed by words, tuned for the hot loops: words of up to 15
//! bytes (nearly all of them) are packed into a `u128`, so lookups hash and
//! compare two machine words instead of calling memcmp on a heap string.

use rustc_hash::FxHashMap;
use std::borrow::Borrow;
use std::hash::Hash;

const INLINE: usize = 15;

fn short_key(word: &[u8]) -> Option<u128> {
    if word.len() > INLINE {
        return None;
    }
    let mut buf = [0u8; 16];
    buf[..word.len()].copy_from_slice(word);
    buf[INLINE] = word.len() as u8;
    Some(u128::from_le_bytes(buf))
}

fn short_word(key: u128) -> ([u8; 16], usize) {
    let buf = key.to_le_bytes();
    (buf, buf[INLINE] as usize)
}

/// Word -> value. `L` is the owned or borrowed form of long words
/// (`Box<str>` or `&str`).
pub struct WordMap<L, V> {
    short: FxHashMap<u128, V>,
    long: FxHashMap<L, V>,
}

impl<L, V> Default for WordMap<L, V> {
    fn default() -> Self {
        WordMap {
            short: FxHashMap::default(),
            long: FxHashMap::default(),
        }
    }
}

impl<L: Hash + Eq + Borrow<str>, V> WordMap<L, V> {
    pub fn len(&self) -> usize {
        self.short.len() + self.long.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&mut self) {
        self.short.clear();
        self.long.clear();
    }

    pub fn get(&self, word: &str) -> Option<&V> {
        match short_key(word.as_bytes()) {
            Some(k) => self.short.get(&k),
            None => self.long.get(word),
        }
    }

    /// Update the word's value with `update`, or insert `make()` (with the
    /// long key built by `own` only when the word is new).
    pub fn upsert<'w>(
        &mut self,
        word: &'w str,
        own: impl FnOnce(&'w str) -> L,
        update: impl FnOnce(&mut V),
        make: impl FnOnce() -> V,
    ) {
        match short_key(word.as_bytes()) {
            Some(k) => {
                self.short.entry(k).and_modify(update).or_insert_with(make);
            }
            None => match self.long.get_mut(word) {
                Some(v) => update(v),
                None => {
                    self.long.insert(own(word), make());
                }
            },
        }
    }

    /// Every (word, value), in no particular order.
    pub fn drain_into(self, mut f: impl FnMut(&str, V)) {
        for (k, v) in self.short {
            let (buf, len) = short_word(k);
            // Keys were made from whole `&str` words, so the bytes are UTF-8.
            f(
                std::str::from_utf8(&buf[..len]).expect("word keys hold UTF-8"),
                v,
            );
        }
        for (k, v) in self.long {
            f(k.borrow(), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_words_round_trip() {
        let words = [
            "",
            "a",
            "a\0",
            "exactly15bytes!",
            "sixteen bytes!!!",
            "καλημέρα κόσμε",
        ];
        let mut m: WordMap<Box<str>, usize> = WordMap::default();
        for (i, w) in words.iter().enumerate() {
            m.upsert(w, Box::from, |_| unreachable!(), || i);
        }
        for (i, w) in words.iter().enumerate() {
            assert_eq!(m.get(w), Some(&i));
        }
        assert_eq!(m.get("a\0\0"), None);
        let mut back = Vec::new();
        m.drain_into(|w, i| back.push((i, w.to_string())));
        back.sort();
        let expected: Vec<(usize, String)> = words
            .iter()
            .enumerate()
            .map(|(i, w)| (i, w.to_string()))
            .collect();
        assert_eq!(back, expected);
    }
}
