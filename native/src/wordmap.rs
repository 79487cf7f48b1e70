//! A hash map keyed by words, tuned for the hot loops: words of up to 15
//! bytes (nearly all of them) are packed into a `u128`, so lookups hash and
//! compare two machine words instead of calling memcmp on a heap string.

use rustc_hash::FxHashMap;
use std::borrow::Borrow;
use std::hash::Hash;

pub const INLINE: usize = 15;

/// The word's bytes, zero-padded, with its length in the last byte. Built
/// from (overlapping) register-sized loads: copying into a stack buffer and
/// reading it back as one integer stalls on store forwarding, which cost
/// counting about a tenth of its time.
pub fn short_key(word: &[u8]) -> Option<u128> {
    let n = word.len();
    if n > INLINE {
        return None;
    }
    let load8 = |at: usize| u64::from_le_bytes(word[at..at + 8].try_into().unwrap());
    let load4 = |at: usize| u64::from(u32::from_le_bytes(word[at..at + 4].try_into().unwrap()));
    let byte = |at: usize| u64::from(word[at]);
    let (lo, hi) = match n {
        // For n == 8 the whole second load overlaps the first.
        8.. => (
            load8(0),
            load8(n - 8).checked_shr(8 * (16 - n as u32)).unwrap_or(0),
        ),
        4.. => (load4(0) | load4(n - 4) << (8 * (n - 4)), 0),
        1.. => (
            byte(0) | byte(n / 2) << (8 * (n / 2)) | byte(n - 1) << (8 * (n - 1)),
            0,
        ),
        0 => (0, 0),
    };
    Some(u128::from(lo) | u128::from(hi | (n as u64) << 56) << 64)
}

/// `short_key` of `word`, read from `text` when the word lies inside it
/// with 16 bytes of `text` from its start (nearly always): one load, masked
/// to the word, and no branch on the word's length, which `short_key`
/// mispredicts on text whose word lengths vary. Any other word (near the
/// end of `text`, or not in it at all) gets `short_key`.
#[inline(always)]
pub fn short_key_within(text: &[u8], word: &[u8]) -> Option<u128> {
    let n = word.len();
    if n > INLINE {
        return None;
    }
    // A word outside `text` starts outside it (they are separate
    // allocations): the offset is then past its end, or wraps around.
    let at = (word.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
    match text.get(at..at + 16) {
        Some(bytes) => {
            let loaded = u128::from_le_bytes(bytes.try_into().unwrap());
            let mask = (1u128 << (8 * n)) - 1;
            Some(loaded & mask | (n as u128) << (8 * INLINE))
        }
        None => short_key(word),
    }
}

/// The word a short key holds: its bytes, zero-padded, and its length.
pub fn short_word(key: u128) -> ([u8; 16], usize) {
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

    /// Room for `n` more short words without growing.
    pub fn reserve(&mut self, n: usize) {
        self.short.reserve(n);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_keys_are_padded_bytes_then_length() {
        let bytes: Vec<u8> = (1..=16).collect();
        for n in 0..=16 {
            let word = &bytes[..n];
            let expected = (n <= INLINE).then(|| {
                let mut buf = [0u8; 16];
                buf[..n].copy_from_slice(word);
                buf[INLINE] = n as u8;
                u128::from_le_bytes(buf)
            });
            assert_eq!(short_key(word), expected, "length {n}");
        }
    }

    /// Keys read from the text equal `short_key` for every word in a text
    /// (at its start, its end, and the last 16 bytes), and for words that
    /// are not in it.
    #[test]
    fn keys_within_a_text_equal_short_keys() {
        let text = "a bc déf ghij 0123456789abcdef xyz\0\0 end";
        let bytes = text.as_bytes();
        for start in 0..bytes.len() {
            for end in start..=bytes.len().min(start + 17) {
                let word = &bytes[start..end];
                assert_eq!(
                    short_key_within(bytes, word),
                    short_key(word),
                    "{start}..{end}"
                );
            }
        }
        let elsewhere = b"abcdefghijklmnopqrstuvwxyz".to_vec();
        for n in 0..=16 {
            assert_eq!(
                short_key_within(bytes, &elsewhere[..n]),
                short_key(&elsewhere[..n])
            );
            assert_eq!(
                short_key_within(&bytes[..5], &bytes[3..3 + n.min(20)]),
                short_key(&bytes[3..3 + n.min(20)])
            );
        }
    }

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
        for w in &words[..4] {
            let (buf, len) = short_word(short_key(w.as_bytes()).unwrap());
            assert_eq!(&buf[..len], w.as_bytes());
        }
    }
}
