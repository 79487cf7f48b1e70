//! Applying trained merges: each word's symbols are merged by rank, lowest
//! first (the same result as replaying the merge list in order).

use crate::atoms::Atoms;
use crate::error::Result;
use crate::longword;
use crate::pretok::PreTokenizer;
use crate::sharedcache::{halves, hash, wide_key, Held, Key, SharedCache, MANY, NO_KEY, SHORT_IDS};
use crate::superword::Pieces;
use crate::train::{Pair, PairBits};
use crate::wordmap::{short_key, WordMap};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use smallvec::{smallvec, SmallVec};
use std::sync::{Mutex, MutexGuard, TryLockError};

/// How a word becomes base symbols.
pub enum Alphabet {
    /// Each UTF-8 byte is a token: `ids[byte]` (the identity for tokenmill's
    /// own vocabularies; imported ones such as GPT-2's order bytes otherwise).
    Bytes { ids: Box<[u32; 256]> },
    /// Characters of the training corpus, then an end-of-word token; unseen
    /// characters become `unk`.
    Chars {
        ids: FxHashMap<char, u32>,
        end_of_word: u32,
        unk: u32,
    },
}

impl Alphabet {
    pub fn identity_bytes() -> Self {
        Alphabet::Bytes {
            ids: Box::new(std::array::from_fn(|b| b as u32)),
        }
    }
}

/// Whole-word tokens, word -> id: short ones keyed in place (see `WordMap`),
/// so 200k tokens make few allocations to build and a lookup follows no
/// pointer.
pub type WholeWords = WordMap<Box<str>, u32>;

/// The whole-word map of `tokens` (bytes, id). A token that is not UTF-8 is
/// left out: words are text, so no word could equal it. Of equal tokens the
/// last listed wins.
pub fn whole_words<'a>(tokens: impl Iterator<Item = (&'a [u8], u32)>) -> WholeWords {
    let mut map = WholeWords::default();
    let (at_least, at_most) = tokens.size_hint();
    map.reserve(at_most.unwrap_or(at_least));
    for (bytes, id) in tokens {
        if let Ok(word) = std::str::from_utf8(bytes) {
            map.upsert(word, Box::from, |v| *v = id, || id);
        }
    }
    map
}

pub struct Encoder {
    pretok: PreTokenizer,
    alphabet: Alphabet,
    /// Words that are whole tokens skip merging (Hugging Face's `ignore_merges`).
    whole_words: Option<WholeWords>,
    /// (left, right) -> (rank, merged token id)
    merges: FxHashMap<Pair, (u32, u32)>,
    /// Characters a word may start from as one symbol (byte mode).
    atoms: Option<Atoms>,
    /// Short words of few ids, for every thread (nearly all lookups).
    shared: SharedCache,
    /// Each thread's own cache of the other words: a caller takes one for a
    /// run of documents and gives it back, so callers running side by side
    /// never share or wait on one, and the warmest comes back first.
    caches: Mutex<Vec<WordCache>>,
    /// Superword tokens' pieces (sentences, often) merge by runs instead.
    superword: Option<Box<Pieces>>,
    /// Where set (`with_pair_filter`), pairs it rules out are not looked up.
    filter: Option<PairBits>,
}

/// Words whose ids are on their way: their keys and hashes.
struct Run<'t> {
    n: usize,
    words: [&'t str; MANY],
    keys: [u128; MANY],
    hashes: [u64; MANY],
}

impl Default for Run<'_> {
    fn default() -> Self {
        Run {
            n: 0,
            words: [""; MANY],
            keys: [NO_KEY; MANY],
            hashes: [0; MANY],
        }
    }
}

/// Word -> ids.
#[derive(Default)]
pub(crate) struct WordCache {
    words: WordMap<Box<str>, CachedIds>,
    /// Ids of words with more than `INLINE_IDS` tokens.
    spilled: Vec<u32>,
    /// A superword tokenizer's: the cache of its pieces' runs (`for_runs`).
    runs: Option<Box<WordCache>>,
}

const INLINE_IDS: usize = 3;

/// A word's ids: inline when there are few (nearly every word), so a cache
/// hit costs one memory access; else a span of `WordCache::spilled`. The map
/// entry is as big either way: its `u128` key aligns it to 32 bytes.
#[derive(Clone, Copy)]
struct CachedIds {
    len: u32,
    /// The ids, or `[start in spilled, ..]` when `len > INLINE_IDS`.
    data: [u32; INLINE_IDS],
}

impl WordCache {
    /// The cache a superword tokenizer's pieces encode their runs with
    /// (`superword::Pieces`, whose own encoder gives runs other ids than
    /// this cache's words have): one to each of its encoder's caches.
    fn for_runs(&mut self) -> &mut WordCache {
        self.runs.get_or_insert_with(Box::default)
    }

    fn insert(&mut self, word: &str, ids: &[u32]) {
        if self.words.len() >= CACHE_LIMIT {
            self.words.clear();
            self.spilled.clear();
        }
        let mut data = [0; INLINE_IDS];
        if ids.len() <= INLINE_IDS {
            data[..ids.len()].copy_from_slice(ids);
        } else {
            data[0] = self.spilled.len() as u32;
            self.spilled.extend_from_slice(ids);
        }
        let len = ids.len() as u32;
        self.words
            .upsert(word, Box::from, |_| {}, || CachedIds { len, data });
    }

    /// Append the word's ids to `out`; false when the word is not cached.
    fn extend(&self, word: &str, out: &mut Vec<u32>) -> bool {
        let Some(c) = self.words.get(word) else {
            return false;
        };
        let len = c.len as usize;
        if len <= INLINE_IDS {
            // A loop of pushes beats a memcpy call for one to three ids.
            for &id in &c.data[..len] {
                out.push(id);
            }
        } else {
            let start = c.data[0] as usize;
            out.extend_from_slice(&self.spilled[start..start + len]);
        }
        true
    }
}

/// `short_key` of `word` (NO_KEY when it has none), read from `text` when
/// the word lies inside it with 16 bytes of `text` from its start (nearly
/// always): one load, masked to the word, and no branch on its length.
#[inline(always)]
fn key_within(text: &[u8], word: &[u8]) -> u128 {
    const LENGTH: u32 = 8 * (KEY_BYTES as u32 - 1);
    const MASKS: [u128; KEY_BYTES] = {
        let mut masks = [0; KEY_BYTES];
        let mut n = 1;
        while n < KEY_BYTES {
            masks[n] = (1 << (8 * n)) - 1;
            n += 1;
        }
        masks
    };
    let n = word.len();
    // A word outside `text` starts outside it (they are separate
    // allocations): the offset is then past its end, or wraps around.
    let at = (word.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
    match text
        .get(at..)
        .and_then(|rest| rest.first_chunk::<KEY_BYTES>())
    {
        Some(bytes) if n < KEY_BYTES => {
            u128::from_le_bytes(*bytes) & MASKS[n] | (n as u128) << LENGTH
        }
        _ => short_key(word).unwrap_or(NO_KEY),
    }
}

/// The bytes of a short key: 15 of the word and its length.
const KEY_BYTES: usize = 16;

const CACHE_LIMIT: usize = 1 << 20;
/// Longer words are rare and would bloat the cache.
const CACHE_WORD_BYTES: usize = 256;
/// Words longer than this use the heap merge loop instead of rescanning.
const SHORT_WORD: usize = 48;

impl Encoder {
    pub fn new(
        pretok: PreTokenizer,
        alphabet: Alphabet,
        merges: &[(Pair, u32)],
        whole_words: Option<WholeWords>,
    ) -> Self {
        let index = merges
            .iter()
            .enumerate()
            .map(|(rank, &(pair, id))| (pair, (rank as u32, id)))
            .collect();
        let atoms = match &alphabet {
            Alphabet::Bytes { ids } => Atoms::build(ids, merges, &index),
            Alphabet::Chars { .. } => None,
        };
        let superword = match (&pretok, &alphabet) {
            (PreTokenizer::Superword, Alphabet::Bytes { ids }) => {
                Some(Box::new(Pieces::new(ids, merges)))
            }
            _ => None,
        };
        Encoder {
            pretok,
            alphabet,
            whole_words,
            merges: index,
            atoms,
            shared: SharedCache::default(),
            caches: Mutex::default(),
            superword,
            filter: None,
        }
    }

    /// This encoder, looking up only the pairs a bit filter of its merges
    /// lets through, one load from a table in cache: for an encoder of few
    /// merges over symbols that mostly none of them join (superword tokens'
    /// second step, over pieces of stage-1 tokens).
    pub fn with_pair_filter(mut self) -> Self {
        self.filter = Some(PairBits::of_pairs(self.merges.keys()));
        self
    }

    /// (rank, id made) of the merge of `pair`, if one merges it.
    #[inline(always)]
    fn merge_of(&self, pair: Pair) -> Option<(u32, u32)> {
        if self.filter.as_ref().is_some_and(|f| !f.holds(pair)) {
            return None;
        }
        self.merges.get(&pair).copied()
    }

    fn base_symbols(&self, word: &str) -> Vec<u32> {
        match &self.alphabet {
            Alphabet::Bytes { ids } => match &self.atoms {
                Some(atoms) if !word.is_ascii() => {
                    let bytes = word.as_bytes();
                    let mut symbols = Vec::with_capacity(word.len());
                    for (i, c) in word.char_indices() {
                        match atoms.at(bytes, i, c) {
                            Some(id) => symbols.push(id),
                            None => symbols.extend(
                                bytes[i..i + c.len_utf8()].iter().map(|&b| ids[b as usize]),
                            ),
                        }
                    }
                    symbols
                }
                _ => word.bytes().map(|b| ids[b as usize]).collect(),
            },
            Alphabet::Chars {
                ids,
                end_of_word,
                unk,
            } => word
                .chars()
                .map(|c| *ids.get(&c).unwrap_or(unk))
                .chain(std::iter::once(*end_of_word))
                .collect(),
        }
    }

    /// The token ids of one pre-tokenized word, merged (no cache holds it).
    pub fn encode_word(&self, word: &str) -> Vec<u32> {
        let mut out = Vec::new();
        self.encode_word_into(word, &mut WordCache::default(), &mut out);
        out
    }

    /// `symbols` merged as a word's base symbols are.
    pub fn merge_symbols(&self, mut symbols: Vec<u32>) -> Vec<u32> {
        if symbols.len() <= SHORT_WORD {
            self.merge_short(&mut symbols);
            symbols
        } else {
            self.merge_long(symbols)
        }
    }

    /// Append the ids of `words` (pieces of `text`, split already), as
    /// encoding `text` would.
    pub fn encode_split(&self, text: &str, words: &[&str], out: &mut Vec<u32>) {
        self.with_cache(|cache| self.encode_split_with(text, words, cache, out));
    }

    /// `encode_split` with a cache the caller holds (one this encoder's
    /// words only are ever cached in).
    pub(crate) fn encode_split_with(
        &self,
        text: &str,
        words: &[&str],
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) {
        for part in words.chunks(MANY) {
            self.encode_words(text, part, cache, out);
        }
    }

    /// Merging for short words: the lowest-ranked, leftmost pair each round.
    /// Each pair's (rank, id) is looked up once and kept; a merge looks up
    /// only the two pairs it changes (as tiktoken does).
    fn merge_short(&self, symbols: &mut Vec<u32>) {
        const NO_MERGE: (u32, u32) = (u32::MAX, 0);
        // A function, not a closure: the closure was not inlined.
        #[inline(always)]
        fn pair_at(encoder: &Encoder, s: &[u32], i: usize) -> (u32, u32) {
            match s.get(i + 1) {
                Some(&b) => encoder.merge_of((s[i], b)).unwrap_or(NO_MERGE),
                None => NO_MERGE,
            }
        }
        let mut n = symbols.len();
        let mut pairs: SmallVec<[(u32, u32); SHORT_WORD]> = smallvec![NO_MERGE; n.max(1)];
        for (i, p) in pairs.iter_mut().enumerate().take(n.saturating_sub(1)) {
            *p = pair_at(self, symbols, i);
        }
        loop {
            let mut best = 0;
            for i in 1..n.saturating_sub(1) {
                if pairs[i].0 < pairs[best].0 {
                    best = i;
                }
            }
            let (rank, id) = pairs[best];
            if n < 2 || rank == u32::MAX {
                return;
            }
            symbols[best] = id;
            symbols.remove(best + 1);
            // Pairs are 0..n - 1: the one at best + 1 is gone, later ones move left.
            if best + 2 < n {
                pairs.copy_within(best + 2..n - 1, best + 1);
            }
            n -= 1;
            pairs[n - 1] = NO_MERGE;
            pairs[best] = pair_at(self, symbols, best);
            if best > 0 {
                pairs[best - 1] = pair_at(self, symbols, best - 1);
            }
        }
    }

    /// Merging for long words, in near-linear time and about 8 bytes a
    /// symbol (`longword`).
    fn merge_long(&self, sym: Vec<u32>) -> Vec<u32> {
        longword::merge(sym, |pair| self.merge_of(pair))
    }

    /// The ids of a word the short family did not give (`short`: what it
    /// said of it): from the wide family (`wide`: what it said, when asked
    /// already), the thread's own cache, or merging.
    fn encode_cached(
        &self,
        word: &str,
        short: Held,
        wide: Option<Held>,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) {
        // A superword tokenizer's long pieces are sentences, nearly all met
        // once: looked up and kept, they only crowd the caches. Merged
        // straight into `out`.
        if self.superword.is_some() && short_key(word.as_bytes()).is_none() {
            return self.encode_word_into(word, cache, out);
        }
        let short_key = short_key(word.as_bytes()).map(halves);
        let wide_key = wide_key(word.as_bytes());
        // A short word the short family has never held is new, as is a
        // longer one the wide family has never held: no other place holds
        // it either.
        let mut new = short == Held::Absent;
        if !new {
            if let Some(k) = wide_key {
                match wide.unwrap_or_else(|| self.shared.wide.extend(&k, out)) {
                    Held::Ids => return,
                    // A short word's wide entry may still be on its way.
                    Held::Absent => new = short_key.is_none(),
                    Held::Elsewhere | Held::Unknown => {}
                }
            }
        }
        if !new && cache.extend(word, out) {
            return;
        }
        let start = out.len();
        self.encode_word_into(word, cache, out);
        let ids = &out[start..];
        if short_key.is_some_and(|k| self.shared.short.insert(&k, ids))
            || wide_key.is_some_and(|k| self.shared.wide.insert(&k, ids))
        {
            return;
        }
        if word.len() <= CACHE_WORD_BYTES {
            cache.insert(word, ids);
        }
    }

    /// `encode_word` appended to `out`; a superword tokenizer's pieces
    /// encode their runs with `cache`'s cache for them.
    fn encode_word_into(&self, word: &str, cache: &mut WordCache, out: &mut Vec<u32>) {
        match (
            &self.superword,
            self.whole_words.as_ref().and_then(|w| w.get(word)),
        ) {
            (_, Some(&id)) => out.push(id),
            (Some(pieces), None) => pieces.encode_into_with(word, cache.for_runs(), out),
            (None, None) => out.extend_from_slice(&self.merge_symbols(self.base_symbols(word))),
        }
    }

    /// Append the ids of `words` (at most `MANY`, pieces of `text`).
    fn encode_words(&self, text: &str, words: &[&str], cache: &mut WordCache, out: &mut Vec<u32>) {
        let mut run = Run::default();
        self.start(&mut run, text, words);
        self.finish(&run, cache, out);
    }

    /// Hash `words` (pieces of `text`) into `run` and start loading their
    /// slots in the shared cache, so the loads of a run overlap.
    #[inline(always)]
    fn start<'t>(&self, run: &mut Run<'t>, text: &str, words: &[&'t str]) {
        run.n = words.len();
        for (i, w) in words.iter().enumerate() {
            let k = key_within(text.as_bytes(), w.as_bytes());
            // A word of 16 to 31 bytes has its wide slot fetched too (1 word
            // in 20 of multilingual text): looked up only when reached, its
            // load was a cache miss that nothing overlapped.
            let h = match k {
                NO_KEY => {
                    let h = self.wide_key(w).map_or(0, |k| hash(&k));
                    self.shared.wide.prefetch(h);
                    h
                }
                _ => {
                    let h = hash(&halves(k));
                    self.shared.short.prefetch(h);
                    h
                }
            };
            (run.words[i], run.keys[i], run.hashes[i]) = (w, k, h);
        }
    }

    /// Append the ids of a started run's words.
    #[inline(always)]
    fn finish(&self, run: &Run<'_>, cache: &mut WordCache, out: &mut Vec<u32>) {
        // Room for the ids of every word found, so that copying them grows nothing.
        out.reserve(run.n * SHORT_IDS);
        for i in 0..run.n {
            let (key, h, word) = (run.keys[i], run.hashes[i], run.words[i]);
            let (short, wide) = match key {
                NO_KEY => {
                    let wide = self.wide_key(word);
                    let held = wide.map(|k| self.shared.wide.extend_from(&k, h, out));
                    (Held::Unknown, held)
                }
                _ => (self.shared.short.extend_from(&halves(key), h, out), None),
            };
            if short != Held::Ids && wide != Some(Held::Ids) {
                self.encode_cached(word, short, wide, cache, out);
            }
        }
    }

    /// The wide family's key of a word without a short key, when the wide
    /// family may hold it.
    #[inline(always)]
    fn wide_key(&self, word: &str) -> Option<Key<4>> {
        // A superword tokenizer's long pieces stay out of the caches
        // (`encode_cached`).
        match self.superword {
            Some(_) => None,
            None => wide_key(word.as_bytes()),
        }
    }

    /// Token ids of one document, with `eos` appended when given.
    pub fn encode_text(&self, text: &str, eos: Option<u32>, out: &mut Vec<u32>) -> Result<()> {
        self.with_cache(|cache| self.encode_with(text, eos, cache, out))
    }

    fn encode_with(
        &self,
        text: &str,
        eos: Option<u32>,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        // Each run's slots load while the run before it is looked up: the
        // loads of a run, started just before its lookups, had too little
        // time to arrive (encoding C from a warm cache now takes 5% less).
        let text = &*self.pretok.prepared(text);
        let mut runs = [Run::default(), Run::default()];
        let mut next = 0;
        self.pretok.for_each_run::<MANY>(text, |words| {
            let [a, b] = &mut runs;
            let (this, last) = if next == 0 { (a, b) } else { (b, a) };
            self.start(this, text, words);
            self.finish(last, cache, out);
            last.n = 0;
            next ^= 1;
        })?;
        self.finish(&runs[next ^ 1], cache, out);
        if let Some(eos) = eos {
            out.push(eos);
        }
        Ok(())
    }

    /// Run `f` with a word cache no other caller holds.
    fn with_cache<R>(&self, f: impl FnOnce(&mut WordCache) -> R) -> R {
        let mut cache = self.caches().and_then(|mut c| c.pop()).unwrap_or_default();
        let result = f(&mut cache);
        if let Some(mut caches) = self.caches() {
            caches.push(cache);
        }
        result
    }

    /// The caches, unless they stay locked past a short wait: in a process
    /// forked while another thread held them, that thread is gone and they
    /// are locked for ever. A fresh cache is only a colder one.
    fn caches(&self) -> Option<MutexGuard<'_, Vec<WordCache>>> {
        for _ in 0..64 {
            match self.caches.try_lock() {
                Ok(caches) => return Some(caches),
                Err(TryLockError::Poisoned(e)) => return Some(e.into_inner()),
                Err(TryLockError::WouldBlock) => std::thread::yield_now(),
            }
        }
        None
    }

    /// Ids of `texts` and one length per document, on the calling thread.
    fn encode_run(
        &self,
        texts: &[&str],
        eos: Option<u32>,
        cache: &mut WordCache,
    ) -> Result<(Vec<u32>, Vec<u32>)> {
        // Text averages about four bytes a token: sized so, the buffer
        // rarely grows (each growth copies it and faults in new pages).
        let bytes: usize = texts.iter().map(|t| t.len()).sum();
        let mut ids = Vec::with_capacity(bytes / 3 + texts.len());
        let mut lens = Vec::with_capacity(texts.len());
        for t in texts {
            let before = ids.len();
            self.encode_with(t, eos, cache, &mut ids)?;
            lens.push((ids.len() - before) as u32);
        }
        Ok((ids, lens))
    }

    /// Encode documents, split over the current thread pool when `parallel`,
    /// else on the calling thread alone (the caller runs other shards beside
    /// it); returns the ids in consecutive parts (to be concatenated by the
    /// caller, who copies them out anyway) and one length per document.
    pub fn encode_batch(
        &self,
        texts: &[&str],
        eos: Option<u32>,
        parallel: bool,
    ) -> Result<(Vec<Vec<u32>>, Vec<u32>)> {
        if !parallel {
            let (ids, lens) = self.with_cache(|cache| self.encode_run(texts, eos, cache))?;
            return Ok((vec![ids], lens));
        }
        let chunk = texts
            .len()
            .div_ceil(rayon::current_num_threads() * 8)
            .max(1);
        let parts: Vec<(Vec<u32>, Vec<u32>)> = texts
            .par_chunks(chunk)
            .map(|part| self.with_cache(|cache| self.encode_run(part, eos, cache)))
            .collect::<Result<_>>()?;
        let lens = parts.iter().flat_map(|p| p.1.iter().copied()).collect();
        Ok((parts.into_iter().map(|p| p.0).collect(), lens))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::train::{Trainer, Word, UNSTOPPED};

    /// Deterministic pseudo-random symbols from a small alphabet.
    /// The next deterministic pseudo-random number below `n`.
    fn next_below(seed: &mut u64, n: u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 33) % n
    }

    fn random_symbols(seed: &mut u64, len: usize, alphabet: u64) -> Vec<u32> {
        (0..len)
            .map(|_| next_below(seed, alphabet) as u32)
            .collect()
    }

    #[test]
    fn long_loop_agrees_with_short_loop_on_trained_merges() {
        let mut seed = 7;
        for alphabet in [2, 3, 5] {
            let words: Vec<Word> = (0..200)
                .map(|i| Word {
                    symbols: random_symbols(&mut seed, 2 + i % 9, alphabet),
                    count: 1 + i as u64 % 4,
                })
                .collect();
            let pairs = Trainer::new(words, 256)
                .train(60, |_| {}, &UNSTOPPED)
                .unwrap();
            let merges: Vec<(Pair, u32)> = pairs
                .iter()
                .enumerate()
                .map(|(k, &p)| (p, 256 + k as u32))
                .collect();
            let enc = Encoder::new(
                PreTokenizer::whitespace(false),
                Alphabet::identity_bytes(),
                &merges,
                None,
            );
            for len in [2, 3, 10, 49, 100, 500, 2000] {
                let base = random_symbols(&mut seed, len, alphabet);
                let mut short = base.clone();
                enc.merge_short(&mut short);
                assert_eq!(
                    enc.merge_long(base.clone()),
                    short,
                    "alphabet {alphabet}, len {len}"
                );
            }
        }
    }

    /// A pair filter changes which pairs are looked up, never the ids, in
    /// either merge loop, and it rules out most pairs that are no merge.
    #[test]
    fn a_pair_filter_changes_no_ids() {
        let mut seed = 11;
        let words: Vec<Word> = (0..300)
            .map(|i| Word {
                symbols: random_symbols(&mut seed, 2 + i % 9, 40),
                count: 1 + i as u64 % 5,
            })
            .collect();
        let pairs = Trainer::new(words, 256)
            .train(150, |_| {}, &UNSTOPPED)
            .unwrap();
        let merges: Vec<(Pair, u32)> = (pairs.iter().copied()).zip(256..).collect();
        let make = || {
            Encoder::new(
                PreTokenizer::whitespace(false),
                Alphabet::identity_bytes(),
                &merges,
                None,
            )
        };
        let (plain, filtered) = (make(), make().with_pair_filter());
        for len in [2, 3, 10, 47, 49, 100, 2000] {
            let symbols = random_symbols(&mut seed, len, 40);
            assert_eq!(
                filtered.merge_symbols(symbols.clone()),
                plain.merge_symbols(symbols),
                "len {len}"
            );
        }
        let filter = filtered.filter.as_ref().unwrap();
        assert!(pairs.iter().all(|&p| filter.holds(p)));
        let others: Vec<Pair> = (0..10_000u32)
            .map(|k| (1000 + k, 7))
            .filter(|p| !plain.merges.contains_key(p))
            .collect();
        let through = others.iter().filter(|&&p| filter.holds(p)).count();
        assert!(through * 5 < others.len(), "{through} of {}", others.len());
    }

    /// An encoder for a vocabulary shipped in the repository.
    fn real_encoder(name: &str, pattern: &str) -> Encoder {
        let path = format!(
            "{}/../vocabularies/{name}.tiktoken",
            env!("CARGO_MANIFEST_DIR")
        );
        let v = crate::vocab::Imported::from_tiktoken(
            &std::fs::read(path).unwrap(),
            &Default::default(),
        )
        .unwrap();
        let merges: Vec<(Pair, u32)> = v.merges.iter().copied().zip(v.merge_ids).collect();
        let ids: [u32; 256] = v.byte_ids.unwrap().try_into().unwrap();
        Encoder::new(
            PreTokenizer::for_pattern(pattern).unwrap(),
            Alphabet::Bytes { ids: Box::new(ids) },
            &merges,
            None,
        )
    }

    /// Random text: characters of many scripts (one to four bytes), spaces
    /// and ASCII, mixed, so every kind of neighbour meets every atom.
    fn random_text(seed: &mut u64, chars: usize) -> String {
        const RANGES: [(u32, u32); 14] = [
            (0x20, 0x7e),
            (0x20, 0x20),
            (0xa0, 0x17f),
            (0x370, 0x3ff),
            (0x400, 0x4ff),
            (0x590, 0x6ff),
            (0xe00, 0xe7f),
            (0x1ea0, 0x1eff),
            (0x3040, 0x30ff),
            (0x4e00, 0x4fff),
            (0xac00, 0xac7f),
            (0xff00, 0xffef),
            (0x1f300, 0x1f64f),
            // A space and one CJK character on their own: drawn often, they
            // meet every other character as a neighbour.
            (0x4e2d, 0x4e2d),
        ];
        (0..chars)
            .filter_map(|_| {
                let (lo, hi) = RANGES[next_below(seed, RANGES.len() as u64) as usize];
                char::from_u32(lo + next_below(seed, u64::from(hi - lo + 1)) as u32)
            })
            .collect()
    }

    #[test]
    fn atoms_change_no_ids_of_real_vocabularies() {
        let mut seed = 11;
        for (name, pattern) in [
            ("gpt2", "gpt2"),
            ("cl100k_base", "cl100k"),
            ("o200k_base", "o200k"),
        ] {
            let with = real_encoder(name, pattern);
            let atoms = with.atoms.as_ref().map_or(0, Atoms::count);
            assert!(atoms > 100, "{name}: {atoms} atoms");
            let mut without = real_encoder(name, pattern);
            without.atoms = None;
            for n in 0..3000 {
                let text = random_text(&mut seed, 1 + n % 40);
                let (mut a, mut b) = (Vec::new(), Vec::new());
                with.encode_text(&text, None, &mut a).unwrap();
                without.encode_text(&text, None, &mut b).unwrap();
                assert_eq!(a, b, "{name}: {text:?}");
                assert_eq!(
                    with.encode_word(&text),
                    without.encode_word(&text),
                    "{name}: {text:?}"
                );
            }
        }
    }

    #[test]
    fn ids_from_the_caches_are_the_ids_merging_makes() {
        let mut seed = 5;
        // Words of every length class (short, wide, longer) and id count,
        // each met several times, so the second and later come from a cache.
        let words: Vec<String> = (0..400)
            .map(|n| random_text(&mut seed, 1 + n % 37))
            .collect();
        let text: String = (0..3000)
            .map(|_| words[next_below(&mut seed, words.len() as u64) as usize].as_str())
            .collect::<Vec<_>>()
            .join(" ");
        for (name, pattern) in [("cl100k_base", "cl100k"), ("o200k_base", "o200k")] {
            let enc = real_encoder(name, pattern);
            let mut want = Vec::new();
            enc.pretok
                .for_each_word(&text, |w| want.extend(enc.encode_word(w)))
                .unwrap();
            assert_encodes_again_alike(&enc, &text, &want, name);
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_child_forked_while_another_thread_holds_the_caches_encodes() {
        let enc = Encoder::new(
            PreTokenizer::whitespace(false),
            Alphabet::identity_bytes(),
            &[],
            None,
        );
        let (locked, wait) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let _caches = enc.caches.lock().unwrap();
                locked.send(()).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(200));
            });
            wait.recv().unwrap();
            assert!(crate::pool::runs_in_a_fork(|| {
                let mut ids = Vec::new();
                enc.encode_text("ab", None, &mut ids).unwrap();
                assert_eq!(ids, [97, 98]);
            }));
        });
    }

    /// `enc` gives `text` the ids `want` twice over (the second time from
    /// its caches), and on two threads sharing them.
    pub(crate) fn assert_encodes_again_alike(enc: &Encoder, text: &str, want: &[u32], name: &str) {
        for pass in 0..2 {
            let mut got = Vec::new();
            enc.encode_text(text, None, &mut got).unwrap();
            assert_eq!(got, want, "{name}, pass {pass}");
        }
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let mut got = Vec::new();
                    enc.encode_text(text, None, &mut got).unwrap();
                    assert_eq!(got, want, "{name}, threads");
                });
            }
        });
    }

    /// Ids of `word` with atoms and with every character from its bytes.
    fn with_and_without_atoms(merges: &[(Pair, u32)], word: &str) -> (Vec<u32>, Vec<u32>) {
        let make = || {
            Encoder::new(
                PreTokenizer::whitespace(false),
                Alphabet::identity_bytes(),
                merges,
                None,
            )
        };
        let mut bytes_only = make();
        bytes_only.atoms = None;
        (make().encode_word(word), bytes_only.encode_word(word))
    }

    /// (what it shows, merges in rank order, word, its ids).
    type AtomCase = (&'static str, [(Pair, u32); 3], &'static str, &'static [u32]);

    #[test]
    fn characters_breaking_an_atom_condition_start_from_their_bytes() {
        let cases: [AtomCase; 3] = [
            (
                // "о" (d0 be) is an operand at rank 0 but made at rank 2: from
                // bytes, (x, y) at rank 1 goes first and "о" never meets "x".
                "used before it is made",
                [((256, 120), 257), ((120, 121), 258), ((0xd0, 0xbe), 256)],
                "оxy",
                &[256, 258],
            ),
            (
                // "中" (e4 b8 ad) is a token, but from its bytes (e4, b8) goes
                // first and nothing then joins the rest.
                "not made by BPE from its bytes",
                [((0xe4, 0xb8), 256), ((0xb8, 0xad), 257), ((0xe4, 257), 258)],
                "中",
                &[256, 0xad],
            ),
            (
                // " \xd0" is a token: "о" after a space is not whole before it.
                "reached into by a token",
                [((0x20, 0xd0), 256), ((0xd0, 0xbe), 257), ((256, 0xbe), 258)],
                " оо",
                &[258, 257],
            ),
        ];
        for (what, merges, word, want) in cases {
            let (atoms, bytes) = with_and_without_atoms(&merges, word);
            assert_eq!(bytes, want, "{what}");
            assert_eq!(atoms, bytes, "{what}");
        }
    }

    #[test]
    fn long_and_short_merge_loops_agree() {
        // merges: (a,a)->3, (3,a)->4, (a,b)->5, (4,5)->6  with a=0,b=1
        let merges = [((0, 0), 3), ((3, 0), 4), ((0, 1), 5), ((4, 5), 6)];
        let enc = Encoder::new(
            PreTokenizer::whitespace(false),
            Alphabet::identity_bytes(),
            &merges,
            None,
        );
        for n in 0..200 {
            let base: Vec<u32> = (0..n).map(|i| if i % 7 == 6 { 1 } else { 0 }).collect();
            let mut short = base.clone();
            enc.merge_short(&mut short);
            assert_eq!(enc.merge_long(base), short, "n={n}");
        }
    }
}
