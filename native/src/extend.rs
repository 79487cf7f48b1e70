//! Extending a tokenizer: which merges may be learned on top of its tokens.
//!
//! A merge makes a token whose bytes (char mode: UTF-8 of its string) are
//! its parts' joined. A merge whose bytes some token already has is not
//! learned: two ids with one text can be held by no tokenizer file
//! (tokenizer.json and .tiktoken map each text to one id), and giving the
//! merge the existing id instead would let a pair gain occurrences, which
//! the trainer's lazy heap (and merge order = rank order) rules out.
//! Special tokens (no bytes) never merge.

use crate::train::Pair;
use rustc_hash::FxHashSet;

pub struct TokenTexts {
    /// The text of each id, base ids first, then one per merge admitted.
    texts: Vec<Option<Vec<u8>>>,
    seen: FxHashSet<Vec<u8>>,
}

impl TokenTexts {
    /// `texts[i]`: the text of id i, None for a special token or a gap.
    pub fn new(texts: Vec<Option<Vec<u8>>>) -> Self {
        let seen = texts.iter().flatten().cloned().collect();
        TokenTexts { texts, seen }
    }

    /// Whether `pair` joins two tokens into a text no token has; if so, that
    /// text is the next id's.
    pub fn admit(&mut self, pair: Pair) -> bool {
        self.admit_if(pair, |_| true)
    }

    /// `admit`, for a pair whose joined text `rule` accepts too (superword
    /// tokens: `superword::allowed`).
    pub fn admit_if(&mut self, (a, b): Pair, rule: impl Fn(&[u8]) -> bool) -> bool {
        let part = |i: u32| self.texts.get(i as usize).and_then(|t| t.as_deref());
        let (Some(left), Some(right)) = (part(a), part(b)) else {
            return false;
        };
        let joined = [left, right].concat();
        if !rule(&joined) || !self.seen.insert(joined.clone()) {
            return false;
        }
        self.texts.push(Some(joined));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::{Trainer, Words, UNSTOPPED};

    #[test]
    fn refuses_texts_already_held_and_specials() {
        // ids: 0 "a", 1 "b", 2 "ab", 3 special; a table where (a, b) is adjacent.
        let texts = vec![
            Some(b"a".to_vec()),
            Some(b"b".to_vec()),
            Some(b"ab".to_vec()),
            None,
        ];
        let mut t = TokenTexts::new(texts);
        assert!(!t.admit((0, 1))); // "ab" is id 2 already
        assert!(!t.admit((0, 3))); // a special token
        assert!(t.admit((2, 0))); // "aba": new, id 4
        assert!(!t.admit((2, 0))); // "aba" again
    }

    #[test]
    fn training_skips_refused_pairs() {
        // Words [a b] x5 and [ab a] x2: (a, b) is the most frequent but makes "ab".
        let symbols = [0, 1, 2, 0];
        let words = Words::from_symbols(&symbols, &[2, 2], &[5, 2]).unwrap();
        let mut texts = TokenTexts::new(vec![
            Some(b"a".to_vec()),
            Some(b"b".to_vec()),
            Some(b"ab".to_vec()),
        ]);
        let merges = Trainer::new(words, 3)
            .train_where(5, |_| {}, |p| texts.admit(p), &UNSTOPPED)
            .unwrap();
        assert_eq!(merges, vec![(2, 0)]);
    }
}
