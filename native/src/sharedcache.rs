//! One word -> ids cache for all the threads of an encoder.
//!
//! With a cache per thread, each thread learns the same words and grows its
//! own table: with two threads, each did a share of the other's misses
//! again and the caches faulted in over twice the pages of one. Here the
//! threads share tables whose slots are written once and never move: a
//! lookup is plain loads, with no lock and no atomic read-modify-write, so
//! threads never contend on a hit.
//!
//! A slot holds a word's short key, its ids and their count, 32 bytes: a
//! lookup reads one cache line (an index then an entry took two, the second
//! waiting on the first). The encoder hashes a batch of words first and
//! prefetches their slots (`prefetch`), so the loads of a batch overlap.
//!
//! The first table has room for 196k words, 8 MB; when it is three quarters
//! full the next one, twice its size, takes the new words, and so on. A
//! frequent word is seen early, so nearly every hit is in the first table,
//! and memory grows with the words met: a random slot of a table touches
//! its page, and one table of 32 MB for every text faulted in all of it.
//!
//! A writer claims an empty slot (state BUSY), writes the key and ids, then
//! publishes the state (Release); a reader that sees the state (Acquire)
//! sees them. A reader that meets a slot being written takes the word as
//! absent: its caller then encodes the word and `insert` finds it.
//!
//! Words of more than `MAX_IDS` ids, and words met once every table is
//! full, are left to the caller's own cache.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize};
use std::sync::OnceLock;

/// Ids a word may have to be held here (nearly every word has one to three).
pub const MAX_IDS: usize = 3;

/// Slots of the first table, as a power of two; each next table has twice
/// as many (3M words in all).
const FIRST_BITS: u32 = 18;
const TABLES: usize = 4;

/// A slot's state: 0 when empty, BUSY while being written, else HELD and the
/// number of ids.
const BUSY: u32 = u32::MAX;
const HELD: u32 = 1 << 8;

/// A word's short key and ids; all zero until written.
#[repr(C, align(32))]
struct Slot {
    key: [AtomicU64; 2],
    ids: [AtomicU32; MAX_IDS],
    state: AtomicU32,
}

impl Slot {
    fn key(&self) -> u128 {
        u128::from(self.key[0].load(Relaxed)) | u128::from(self.key[1].load(Relaxed)) << 64
    }
}

struct Table {
    slots: ZeroedSlice<Slot>,
    bits: u32,
    held: AtomicUsize,
}

/// Where a lookup ends.
enum Found<'a> {
    Here(&'a Slot, u32),
    /// An empty slot: the word is not in this table.
    Absent,
    /// A slot being written: the word may be it.
    Busy,
}

impl Table {
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
    fn find(&self, key: u128, hash: u64) -> Found<'_> {
        let mut at = self.home(hash);
        loop {
            let slot = &self.slots[at];
            match slot.state.load(Acquire) {
                0 => return Found::Absent,
                BUSY => return Found::Busy,
                state if slot.key() == key => return Found::Here(slot, state),
                _ => at = (at + 1) & (self.slots.len() - 1),
            }
        }
    }

    /// Three quarters full at most: probe runs stay short.
    fn full(&self) -> bool {
        self.held.load(Relaxed) >= self.slots.len() / 4 * 3
    }

    fn insert(&self, key: u128, hash: u64, ids: &[u32]) {
        let mut at = self.home(hash);
        loop {
            let slot = &self.slots[at];
            match slot.state.compare_exchange(0, BUSY, Relaxed, Acquire) {
                Ok(_) => {
                    slot.key[0].store(key as u64, Relaxed);
                    slot.key[1].store((key >> 64) as u64, Relaxed);
                    for (to, &id) in slot.ids.iter().zip(ids) {
                        to.store(id, Relaxed);
                    }
                    // Release: a reader that sees the state sees the rest.
                    slot.state.store(HELD | ids.len() as u32, Release);
                    self.held.fetch_add(1, Relaxed);
                    return;
                }
                // Another thread is writing this slot: its word may be this one.
                Err(BUSY) => std::hint::spin_loop(),
                // Another thread put the same word in first.
                Err(_) if slot.key() == key => return,
                Err(_) => at = (at + 1) & (self.slots.len() - 1),
            }
        }
    }
}

pub struct SharedCache {
    first: Table,
    /// Each made when the one before fills.
    more: [OnceLock<Table>; TABLES - 1],
}

impl Default for SharedCache {
    fn default() -> Self {
        SharedCache {
            first: Table::new(FIRST_BITS),
            more: Default::default(),
        }
    }
}

/// How many words the encoder hashes and prefetches at once.
pub const MANY: usize = 32;
/// A key no word has (a short key's last byte, its length, is at most 15).
pub const NO_KEY: u128 = u128::MAX;

/// The hash of a short key, from which each table takes its slot.
#[inline(always)]
pub fn hash(key: u128) -> u64 {
    let (lo, hi) = (key as u64, (key >> 64) as u64);
    (lo.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ hi).wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

impl SharedCache {
    /// Append the ids of the word with this short key to `out`; false when
    /// the word is not here.
    pub fn extend(&self, key: u128, out: &mut Vec<u32>) -> bool {
        self.extend_from(key, hash(key), out)
    }

    /// Start loading the first table's slot for `hash` into the CPU's cache.
    #[inline(always)]
    pub fn prefetch(&self, hash: u64) {
        prefetch(&self.first.slots[self.first.home(hash)]);
    }

    /// `extend`, for a key whose `hash` is known.
    #[inline(always)]
    pub fn extend_from(&self, key: u128, hash: u64, out: &mut Vec<u32>) -> bool {
        match self.first.find(key, hash) {
            Found::Here(slot, state) => {
                copy_ids(slot, state, out);
                true
            }
            Found::Absent => self.extend_from_more(key, hash, out),
            Found::Busy => false,
        }
    }

    /// `extend_from` in the tables after the first.
    #[cold]
    fn extend_from_more(&self, key: u128, hash: u64, out: &mut Vec<u32>) -> bool {
        for table in self.more.iter().map_while(OnceLock::get) {
            match table.find(key, hash) {
                Found::Here(slot, state) => {
                    copy_ids(slot, state, out);
                    return true;
                }
                Found::Absent => continue,
                Found::Busy => return false,
            }
        }
        false
    }

    /// Hold `ids` for the word with this short key; false when it cannot
    /// (too many ids, or every table is full), and the caller keeps it.
    pub fn insert(&self, key: u128, ids: &[u32]) -> bool {
        if ids.len() > MAX_IDS {
            return false;
        }
        let more = (self.more.iter().enumerate())
            .map(|(k, cell)| cell.get_or_init(|| Table::new(FIRST_BITS + 1 + k as u32)));
        match std::iter::once(&self.first).chain(more).find(|t| !t.full()) {
            Some(table) => {
                table.insert(key, hash(key), ids);
                true
            }
            None => false,
        }
    }
}

/// Append a held slot's ids to `out`. All MAX_IDS are copied and the unused
/// ones dropped: a copy of fixed size has no branch on the word's length to
/// mispredict.
#[inline(always)]
fn copy_ids(slot: &Slot, state: u32, out: &mut Vec<u32>) {
    let len = (state & (HELD - 1)) as usize;
    let ids = slot.ids.each_ref().map(|id| id.load(Relaxed));
    match out.spare_capacity_mut().get_mut(..MAX_IDS) {
        Some(spare) => {
            for (to, id) in spare.iter_mut().zip(ids) {
                to.write(id);
            }
            // SAFETY: the first `len` (at most MAX_IDS) spare elements were
            // just written.
            unsafe { out.set_len(out.len() + len) };
        }
        None => out.extend_from_slice(&ids[..len]),
    }
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

impl ZeroedSlice<Slot> {
    fn new(len: usize) -> Self {
        let map = memmap2::MmapMut::map_anon(len * std::mem::size_of::<Slot>())
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

impl std::ops::Deref for ZeroedSlice<Slot> {
    type Target = [Slot];

    fn deref(&self) -> &[Slot] {
        // SAFETY: the mapping is page-aligned, holds `len` slots, zeroed (a
        // valid, empty slot: atomic integers) or written through atomics
        // since, and outlives `&self`.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_come_back_with_their_ids() {
        let cache = SharedCache::default();
        let words: Vec<(u128, Vec<u32>)> = (0..5000u32)
            .map(|k| {
                (
                    u128::from(k) * 0x9E37_79B9_7F4A_7C15,
                    vec![k; k as usize % 4],
                )
            })
            .collect();
        for (key, ids) in &words {
            assert!(cache.insert(*key, ids));
        }
        for (key, ids) in &words {
            let mut out = vec![7];
            assert!(cache.extend(*key, &mut out));
            assert_eq!(out[1..], ids[..]);
        }
        assert!(!cache.extend(1, &mut Vec::new()));
        assert!(!cache.insert(2, &[1, 2, 3, 4]), "more than MAX_IDS ids");
    }

    #[test]
    fn threads_inserting_the_same_words_agree() {
        let cache = SharedCache::default();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for k in 0..20_000u128 {
                        let mut out = Vec::new();
                        if !cache.extend(k, &mut out) {
                            assert!(cache.insert(k, &[k as u32, 1]));
                        } else {
                            assert_eq!(out, [k as u32, 1]);
                        }
                    }
                });
            }
        });
        for k in 0..20_000u128 {
            let mut out = Vec::new();
            assert!(cache.extend(k, &mut out));
            assert_eq!(out, [k as u32, 1]);
        }
    }

    /// Fill table `k` (making it first) as far as `insert` can tell.
    fn fill(cache: &SharedCache, k: usize) {
        let table = match k {
            0 => &cache.first,
            _ => cache.more[k - 1].get_or_init(|| Table::new(FIRST_BITS + k as u32)),
        };
        table.held.store(table.slots.len(), Relaxed);
    }

    #[test]
    fn words_go_to_the_next_table_when_one_is_full() {
        let cache = SharedCache::default();
        assert!(cache.insert(1, &[10]));
        fill(&cache, 0);
        assert!(cache.insert(2, &[20, 21]));
        assert!(cache.more[0].get().is_some());
        for (key, ids) in [(1, vec![10]), (2, vec![20, 21])] {
            let mut out = Vec::new();
            assert!(cache.extend(key, &mut out));
            assert_eq!(out, ids);
        }
        assert!(!cache.extend(3, &mut Vec::new()));
    }

    #[test]
    fn a_full_cache_refuses_new_words() {
        let cache = SharedCache::default();
        for k in 0..TABLES {
            fill(&cache, k);
        }
        assert!(!cache.insert(3, &[1]));
        assert!(!cache.extend(3, &mut Vec::new()));
    }
}
