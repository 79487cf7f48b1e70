//! One word -> ids cache for all the threads of an encoder.
//!
//! With a cache per thread, each thread learns the same words and grows its
//! own table: with two threads, each did a share of the other's misses
//! again and the caches faulted in over twice the pages of one. Here the
//! threads share tables whose slots are written once and never move: a
//! lookup is plain loads, with no lock and no atomic read-modify-write, so
//! threads never contend on a hit.
//!
//! A slot holds a word's key (its bytes), its ids and their count: a lookup
//! reads one cache line (an index then an entry took two, the second
//! waiting on the first). The encoder hashes a run of words first and
//! prefetches their slots (`prefetch`; the wide family's for words of 16 to
//! 31 bytes), so the loads of a run overlap.
//!
//! Two families of tables: `short`, words of up to 15 bytes and 3 ids in
//! 32-byte slots (nearly every word of code and of English); `wide`, words
//! of up to 31 bytes and 7 ids in 64-byte slots (most words in Cyrillic,
//! Greek or CJK, long identifiers: in the thread's own cache, a hash map of
//! strings, a lookup took three dependent loads, a sixth of encoding
//! multilingual text). A word of more ids is held with its ids packed
//! when they fit the slot's bits (`packed`: a short word of 4 ids under
//! 2^24, or 5 under 2^19, as in o200k_base and cl100k_base): marked held
//! elsewhere, it cost a second lookup, in the wide family, that nothing had
//! prefetched (a fifth of encoding multilingual text with cl100k_base). A
//! short word whose ids do not fit is marked in `short` as held elsewhere,
//! and a wide one in `wide`: so a word that a family has never held is new,
//! and its caller merges it at once instead of missing in every other place
//! first.
//!
//! A family's first table has room for 393k words (short, 16 MB) or 196k
//! (wide, 16 MB); when it is three quarters full the next one, twice its
//! size, takes the new words, then a third. A frequent word is seen early,
//! so nearly every hit is in the first table, and memory grows with the
//! words met: a random slot of a table touches its page, and one table of
//! 32 MB for every text faulted in all of it. The first tables are sized
//! for the distinct words of a large corpus (113 MB of text in 28 languages
//! has 355k short words and 137k wide ones): a word in a later table, and
//! every new word, first probes the earlier tables to an empty slot, about
//! eight slots each at three quarters full; with first tables of 8 and 4
//! MB, a fifth of that text's wide lookups went that way.
//!
//! A writer claims an empty slot (state BUSY), writes the key and ids, then
//! publishes the state (Release); a reader that sees the state (Acquire)
//! sees them. A reader that meets a slot being written takes the word as
//! unknown: its caller then looks further, or encodes the word, and
//! `insert` finds it.
//!
//! Longer words, wide words whose ids do not fit their slot, and words met
//! once every table of their family is full, are left to the caller's own
//! cache.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::OnceLock;

/// A word's bytes, zero-padded, with its length in the last byte, as `K`
/// little-endian words: `halves` of a `wordmap::short_key` (K = 2), or a
/// `wide_key` (K = 4).
pub type Key<const K: usize> = [u64; K];

/// Ids a short word's slot holds as they are (more when packed).
pub const SHORT_IDS: usize = 3;
/// Bytes a wide word may have to be held in a slot, and the ids its slot
/// holds as they are (more when packed).
const WIDE_BYTES: usize = 31;
const WIDE_IDS: usize = 7;

/// The wide key of `word`; None when it is longer than WIDE_BYTES.
pub fn wide_key(word: &[u8]) -> Option<Key<4>> {
    if word.len() > WIDE_BYTES {
        return None;
    }
    let mut bytes = [0u8; 32];
    bytes[..word.len()].copy_from_slice(word);
    bytes[WIDE_BYTES] = word.len() as u8;
    Some(std::array::from_fn(|i| {
        u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap())
    }))
}

/// Slots of each family's first table, as a power of two; each next table
/// has twice as many. Three tables in all: at most 112 MB a family.
const SHORT_BITS: u32 = 19;
const WIDE_BITS: u32 = 18;
const TABLES: usize = 3;

/// A slot's state: 0 when empty, BUSY while being written, else HELD and the
/// number of ids (packed when more than the slot's words), or ELSEWHERE for
/// a word whose ids the slot cannot hold.
const BUSY: u32 = u32::MAX;
const HELD: u32 = 1 << 8;
const ELSEWHERE: u32 = HELD | 0xff;

/// What a family knows of a word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// Its ids, now appended.
    Ids,
    /// It has more ids than a slot holds: the next place holds them.
    Elsewhere,
    /// No one has held it: it is new, or being encoded right now.
    Absent,
    /// It may be held elsewhere: a slot is being written, or the family
    /// has turned words away (every table full).
    Unknown,
}

/// A word's key and up to `I` ids; all zero until written. 32 or 64 bytes,
/// so that a slot never straddles two cache lines (the tables are page
/// aligned).
#[repr(C)]
struct Slot<const K: usize, const I: usize> {
    key: [AtomicU64; K],
    ids: [AtomicU32; I],
    state: AtomicU32,
}

impl<const K: usize, const I: usize> Slot<K, I> {
    #[inline(always)]
    fn holds(&self, key: &Key<K>) -> bool {
        (self.key.iter().zip(key)).all(|(k, &want)| k.load(Relaxed) == want)
    }
}

struct Table<const K: usize, const I: usize> {
    slots: ZeroedSlice<Slot<K, I>>,
    bits: u32,
    held: AtomicUsize,
}

/// Where a lookup ends.
enum Found<'a, const K: usize, const I: usize> {
    Here(&'a Slot<K, I>, u32),
    /// An empty slot: the word is not in this table.
    Absent,
    /// A slot being written: the word may be it.
    Busy,
}

impl<const K: usize, const I: usize> Table<K, I> {
    fn new(bits: u32) -> Self {
        Table {
            slots: ZeroedSlice::new(1 << bits),
            bits,
            held: AtomicUsize::new(0),
        }
    }

    #[inline(always)]
    fn home(&self, hash: u64) -> usize {
        (hash >> (64 - self.bits)) as usize
    }

    #[inline(always)]
    fn find(&self, key: &Key<K>, hash: u64) -> Found<'_, K, I> {
        let mut at = self.home(hash);
        loop {
            let slot = &self.slots[at];
            match slot.state.load(Acquire) {
                0 => return Found::Absent,
                BUSY => return Found::Busy,
                state if slot.holds(key) => return Found::Here(slot, state),
                _ => at = (at + 1) & (self.slots.len() - 1),
            }
        }
    }

    /// Three quarters full at most: probe runs stay short.
    fn full(&self) -> bool {
        self.held.load(Relaxed) >= self.slots.len() / 4 * 3
    }

    fn insert(&self, key: &Key<K>, hash: u64, ids: &[u32]) {
        let mut at = self.home(hash);
        loop {
            let slot = &self.slots[at];
            match slot.state.compare_exchange(0, BUSY, Relaxed, Acquire) {
                Ok(_) => {
                    for (to, &k) in slot.key.iter().zip(key) {
                        to.store(k, Relaxed);
                    }
                    let state = match packed::<I>(ids) {
                        Some(words) => {
                            for (to, w) in slot.ids.iter().zip(words) {
                                to.store(w, Relaxed);
                            }
                            HELD | ids.len() as u32
                        }
                        None => ELSEWHERE,
                    };
                    // Release: a reader that sees the state sees the rest.
                    slot.state.store(state, Release);
                    self.held.fetch_add(1, Relaxed);
                    return;
                }
                // Another thread is writing this slot: its word may be this one.
                Err(BUSY) => std::hint::spin_loop(),
                // Another thread put the same word in first.
                Err(_) if slot.holds(key) => return,
                Err(_) => at = (at + 1) & (self.slots.len() - 1),
            }
        }
    }
}

/// One family: a first table, then each next one made when the one before
/// fills.
pub struct Tables<const K: usize, const I: usize> {
    first: Table<K, I>,
    more: [OnceLock<Table<K, I>>; TABLES - 1],
    /// Set once a word was turned away: absent then no longer means new.
    refused: AtomicBool,
}

pub struct SharedCache {
    pub short: Tables<2, SHORT_IDS>,
    pub wide: Tables<4, WIDE_IDS>,
}

impl Default for SharedCache {
    fn default() -> Self {
        SharedCache {
            short: Tables::new(SHORT_BITS),
            wide: Tables::new(WIDE_BITS),
        }
    }
}

/// How many words the encoder hashes and prefetches at once.
pub const MANY: usize = 32;
/// A short key no word has (a short key's last byte, its length, is at most 15).
pub const NO_KEY: u128 = u128::MAX;

/// The hash of a key, from which each table takes its slot.
#[inline(always)]
pub fn hash<const K: usize>(key: &Key<K>) -> u64 {
    let mut h = key[0];
    for &k in &key[1..] {
        h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ k;
    }
    h.wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

/// A short key as the `short` family's key.
#[inline(always)]
pub fn halves(key: u128) -> Key<2> {
    [key as u64, (key >> 64) as u64]
}

impl<const K: usize, const I: usize> Tables<K, I> {
    fn new(bits: u32) -> Self {
        Tables {
            first: Table::new(bits),
            more: Default::default(),
            refused: AtomicBool::new(false),
        }
    }

    /// Append the ids of the word with this key to `out`, if held here.
    pub fn extend(&self, key: &Key<K>, out: &mut Vec<u32>) -> Held {
        self.extend_from(key, hash(key), out)
    }

    /// Start loading the first table's slot for `hash` into the CPU's cache.
    #[inline(always)]
    pub fn prefetch(&self, hash: u64) {
        prefetch(&self.first.slots[self.first.home(hash)]);
    }

    /// `extend`, for a key whose `hash` is known.
    #[inline(always)]
    pub fn extend_from(&self, key: &Key<K>, hash: u64, out: &mut Vec<u32>) -> Held {
        match self.first.find(key, hash) {
            Found::Here(slot, state) => copy_ids(slot, state, out),
            Found::Absent => self.extend_from_more(key, hash, out),
            Found::Busy => Held::Unknown,
        }
    }

    /// `extend_from` in the tables after the first.
    #[cold]
    fn extend_from_more(&self, key: &Key<K>, hash: u64, out: &mut Vec<u32>) -> Held {
        for table in self.more.iter().map_while(OnceLock::get) {
            match table.find(key, hash) {
                Found::Here(slot, state) => return copy_ids(slot, state, out),
                Found::Absent => continue,
                Found::Busy => return Held::Unknown,
            }
        }
        match self.refused.load(Relaxed) {
            true => Held::Unknown,
            false => Held::Absent,
        }
    }

    /// Hold `ids` for the word with this key; true when they are held here.
    /// A word whose ids do not fit a slot (`packed`) is marked as held
    /// elsewhere (false); when every table is full, nothing is held (false).
    pub fn insert(&self, key: &Key<K>, ids: &[u32]) -> bool {
        let more = (self.more.iter().enumerate())
            .map(|(k, cell)| cell.get_or_init(|| Table::new(self.first.bits + 1 + k as u32)));
        match std::iter::once(&self.first).chain(more).find(|t| !t.full()) {
            Some(table) => {
                table.insert(key, hash(key), ids);
                packed::<I>(ids).is_some()
            }
            None => {
                self.refused.store(true, Relaxed);
                false
            }
        }
    }
}

/// Append a held slot's ids to `out`. All `I` are copied and the unused
/// ones dropped: a copy of fixed size has no branch on the word's length to
/// mispredict.
#[inline(always)]
fn copy_ids<const K: usize, const I: usize>(
    slot: &Slot<K, I>,
    state: u32,
    out: &mut Vec<u32>,
) -> Held {
    let len = (state & (HELD - 1)) as usize;
    let ids = slot.ids.each_ref().map(|id| id.load(Relaxed));
    if len > I {
        return unpack(ids, len, out);
    }
    match out.spare_capacity_mut().get_mut(..I) {
        Some(spare) => {
            for (to, id) in spare.iter_mut().zip(ids) {
                to.write(id);
            }
            // SAFETY: the first `len` (at most I) spare elements were
            // just written.
            unsafe { out.set_len(out.len() + len) };
        }
        None => out.extend_from_slice(&ids[..len]),
    }
    Held::Ids
}

/// A slot's `I` words for `ids`: the ids themselves when there are at most
/// `I`, else packed `bits(I, n)` bits each when every id fits (None when not).
fn packed<const I: usize>(ids: &[u32]) -> Option<[u32; I]> {
    let mut words = [0u32; I];
    let n = ids.len();
    if n <= I {
        words[..n].copy_from_slice(ids);
        return Some(words);
    }
    let bits = packed_bits(I, n)?;
    if ids.iter().any(|&id| u64::from(id) >> bits != 0) {
        return None;
    }
    for (k, &id) in ids.iter().enumerate() {
        let at = k * bits;
        let wide = u64::from(id) << (at % 32);
        words[at / 32] |= wide as u32;
        if let Some(w) = words.get_mut(at / 32 + 1) {
            *w |= (wide >> 32) as u32;
        }
    }
    Some(words)
}

/// Bits an id takes when `n` ids share a slot of `i` words; None when they
/// would take fewer than 16 (ids of a large vocabulary would rarely fit).
fn packed_bits(i: usize, n: usize) -> Option<usize> {
    let bits = 32 * i / n;
    (bits >= 16 && n < ELSEWHERE as usize & 0xff).then_some(bits)
}

/// Append the `n` ids packed in `words` (see `packed`), or say the word is
/// held elsewhere.
#[cold]
fn unpack<const I: usize>(words: [u32; I], n: usize, out: &mut Vec<u32>) -> Held {
    let Some(bits) = packed_bits(I, n) else {
        return Held::Elsewhere;
    };
    let mask = (1u64 << bits) - 1;
    out.extend(
        (0..n)
            .map(|k| {
                let at = k * bits;
                let low = u64::from(words[at / 32]);
                let high = words.get(at / 32 + 1).map_or(0, |&w| u64::from(w));
                (low | high << 32) >> (at % 32) & mask
            })
            .map(|id| id as u32),
    );
    Held::Ids
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

/// `[Slot]` over fresh zeroed pages (an empty slot is all zero). The OS maps
/// a page in only when it is first touched, so unused capacity costs
/// nothing. Huge pages where the OS offers them: a hash table's pages are
/// touched at random, each first read (mapping the zero page) and later
/// written (faulting again), which cost as many faults as a per-thread
/// cache saves.
struct ZeroedSlice<T> {
    map: memmap2::MmapMut,
    len: usize,
    _type: std::marker::PhantomData<T>,
}

impl<T> ZeroedSlice<T> {
    fn new(len: usize) -> Self {
        let map = memmap2::MmapMut::map_anon(len * std::mem::size_of::<T>())
            .expect("cannot reserve memory for the word cache");
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        ZeroedSlice {
            map,
            len,
            _type: std::marker::PhantomData,
        }
    }
}

impl<const K: usize, const I: usize> std::ops::Deref for ZeroedSlice<Slot<K, I>> {
    type Target = [Slot<K, I>];

    fn deref(&self) -> &[Slot<K, I>] {
        // SAFETY: the mapping is page-aligned, holds `len` slots, zeroed (a
        // valid, empty slot: atomic integers) or written through atomics
        // since, and outlives `&self`.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short(k: u32) -> Key<2> {
        halves(u128::from(k) * 0x9E37_79B9_7F4A_7C15)
    }

    #[test]
    fn words_come_back_with_their_ids() {
        let cache = SharedCache::default();
        let words: Vec<(Key<2>, Vec<u32>)> = (0..5000u32)
            .map(|k| (short(k), vec![k; 1 + k as usize % 3]))
            .collect();
        for (key, ids) in &words {
            assert!(cache.short.insert(key, ids));
        }
        for (key, ids) in &words {
            let mut out = vec![7];
            assert_eq!(cache.short.extend(key, &mut out), Held::Ids);
            assert_eq!(out[1..], ids[..]);
        }
        assert_eq!(
            cache.short.extend(&short(5000), &mut Vec::new()),
            Held::Absent
        );
    }

    #[test]
    fn a_word_whose_ids_do_not_fit_a_slot_is_marked_held_elsewhere() {
        let cache = SharedCache::default();
        // Four ids fit a short slot at 24 bits each; one of 2^24 does not.
        let ids = [1, 2, 3, 1 << 24];
        assert!(!cache.short.insert(&short(1), &ids));
        let mut out = Vec::new();
        assert_eq!(cache.short.extend(&short(1), &mut out), Held::Elsewhere);
        assert!(out.is_empty());
        let key = wide_key("short word".as_bytes()).unwrap();
        assert!(cache.wide.insert(&key, &ids));
        assert_eq!(cache.wide.extend(&key, &mut out), Held::Ids);
        assert_eq!(out, ids);
        let wider = wide_key("another word".as_bytes()).unwrap();
        assert!(!cache.wide.insert(&wider, &[1; 15]), "15 ids of 14 bits");
        assert_eq!(cache.wide.extend(&wider, &mut out), Held::Elsewhere);
    }

    #[test]
    fn ids_packed_into_a_slot_come_back_as_they_were() {
        let cache = SharedCache::default();
        // For each count, ids at the largest value that fits, and one past it.
        for (k, n) in (SHORT_IDS + 1..=2 * SHORT_IDS).enumerate() {
            let top = (1u64 << (32 * SHORT_IDS / n)) - 1;
            let ids: Vec<u32> = (0..n as u64).map(|i| (top - i * 7) as u32).collect();
            let key = short(100 + k as u32);
            assert!(cache.short.insert(&key, &ids), "{n} ids");
            let mut out = vec![9];
            assert_eq!(cache.short.extend(&key, &mut out), Held::Ids);
            assert_eq!(out[1..], ids[..], "{n} ids");
            let over: Vec<u32> = ids.iter().map(|_| (top + 1) as u32).collect();
            assert!(
                !cache.short.insert(&short(200 + k as u32), &over),
                "{n} ids"
            );
        }
        let ids: Vec<u32> = (0..2 * WIDE_IDS as u32).map(|i| 0xffff - i).collect();
        let key = wide_key("fourteen ids".as_bytes()).unwrap();
        assert!(cache.wide.insert(&key, &ids));
        let mut out = Vec::new();
        assert_eq!(cache.wide.extend(&key, &mut out), Held::Ids);
        assert_eq!(out, ids);
    }

    #[test]
    fn wide_keys_tell_words_of_up_to_31_bytes_apart() {
        let words = [
            "",
            "a",
            "a\0",
            "abcdefghijklmnop",
            "abcdefghijklmnopqrstuvwxyz01234",
        ];
        let keys: Vec<Key<4>> = words
            .iter()
            .map(|w| wide_key(w.as_bytes()).unwrap())
            .collect();
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(wide_key(&[b'x'; 32]), None);
    }

    #[test]
    fn threads_inserting_the_same_words_agree() {
        let cache = SharedCache::default();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for k in 0..20_000u32 {
                        let mut out = Vec::new();
                        match cache.short.extend(&short(k), &mut out) {
                            Held::Ids => assert_eq!(out, [k, 1]),
                            _ => assert!(cache.short.insert(&short(k), &[k, 1])),
                        }
                    }
                });
            }
        });
        for k in 0..20_000u32 {
            let mut out = Vec::new();
            assert_eq!(cache.short.extend(&short(k), &mut out), Held::Ids);
            assert_eq!(out, [k, 1]);
        }
    }

    /// Fill table `k` of the short family (making it first) as far as
    /// `insert` can tell.
    fn fill(cache: &SharedCache, k: usize) {
        let tables = &cache.short;
        let table = match k {
            0 => &tables.first,
            _ => tables.more[k - 1].get_or_init(|| Table::new(SHORT_BITS + k as u32)),
        };
        table.held.store(table.slots.len(), Relaxed);
    }

    #[test]
    fn words_go_to_the_next_table_when_one_is_full() {
        let cache = SharedCache::default();
        assert!(cache.short.insert(&short(1), &[10]));
        fill(&cache, 0);
        assert!(cache.short.insert(&short(2), &[20, 21]));
        assert!(cache.short.more[0].get().is_some());
        for (k, ids) in [(1, vec![10]), (2, vec![20, 21])] {
            let mut out = Vec::new();
            assert_eq!(cache.short.extend(&short(k), &mut out), Held::Ids);
            assert_eq!(out, ids);
        }
        assert_eq!(cache.short.extend(&short(3), &mut Vec::new()), Held::Absent);
    }

    #[test]
    fn once_a_family_turns_a_word_away_absent_words_are_unknown() {
        let cache = SharedCache::default();
        for k in 0..TABLES {
            fill(&cache, k);
        }
        assert_eq!(cache.short.extend(&short(3), &mut Vec::new()), Held::Absent);
        assert!(!cache.short.insert(&short(3), &[1]));
        // The word may now be in its caller's own cache.
        assert_eq!(
            cache.short.extend(&short(3), &mut Vec::new()),
            Held::Unknown
        );
    }
}
