//! One word -> ids cache for all the threads of an encoder.
//!
//! With a cache per thread, each thread learns the same words and grows its
//! own table: with two threads, each did a share of the other's misses
//! again and the caches faulted in over twice the pages of one. Here the
//! threads share one table whose entries are written once and never move:
//! a lookup is plain loads (an index slot, then the entry), with no lock
//! and no atomic read-modify-write, so threads never contend on a hit.
//!
//! It holds the first `CAPACITY` short words it is given (a frequent word is
//! seen early); later words and words of more than `MAX_IDS` ids are left
//! to the caller's own cache.

use rustc_hash::FxBuildHasher;
use std::hash::BuildHasher;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize};

/// Ids a word may have to be held here (nearly every word has one to three).
pub const MAX_IDS: usize = 3;

const ENTRY_BITS: u32 = 20;
const CAPACITY: usize = 1 << ENTRY_BITS;
/// An index slot holds `entry + 1` in its low bits (0: empty) and a tag
/// from the hash in the rest, so other words' slots are passed over
/// without reading their entries.
const SLOT_BITS: u32 = ENTRY_BITS + 1;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
/// Twice the entries: probe runs stay short at a load of one half.
const INDEX_SLOTS: usize = 2 * CAPACITY;

/// A word's short key and ids; all zero until written.
#[repr(C)]
struct Entry {
    key: [AtomicU64; 2],
    ids: [AtomicU32; MAX_IDS],
    len: AtomicU32,
}

impl Entry {
    fn key(&self) -> u128 {
        u128::from(self.key[0].load(Relaxed)) | u128::from(self.key[1].load(Relaxed)) << 64
    }
}

pub struct SharedCache {
    index: ZeroedArray<AtomicU32, INDEX_SLOTS>,
    entries: ZeroedArray<Entry, CAPACITY>,
    claimed: AtomicUsize,
}

impl Default for SharedCache {
    fn default() -> Self {
        SharedCache {
            index: ZeroedArray::new(),
            entries: ZeroedArray::new(),
            claimed: AtomicUsize::new(0),
        }
    }
}

fn hash(key: u128) -> (usize, u32) {
    let h = FxBuildHasher.hash_one(key);
    (h as usize % INDEX_SLOTS, (h >> (32 + SLOT_BITS)) as u32)
}

/// How many words `probe_many` looks up at once.
pub const MANY: usize = 32;
/// A key no word has (a short key's last byte, its length, is at most 15):
/// `probe_many` passes over it.
pub const NO_KEY: u128 = u128::MAX;

/// Where a key's lookup starts: its first index slot, already loaded.
#[derive(Clone, Copy, Default)]
pub struct Probe {
    i: usize,
    tag: u32,
    slot: u32,
}

impl SharedCache {
    /// Append the ids of the word with this short key to `out`; false when
    /// the word is not here.
    pub fn extend(&self, key: u128, out: &mut Vec<u32>) -> bool {
        self.extend_from(key, self.probe(key), out)
    }

    /// The first index slot of each key (`NO_KEY` passed over), for
    /// `extend_from`.
    ///
    /// A lookup is two dependent loads (index slot, then entry) from tables
    /// bigger than the CPU's caches, and each word's lookup waited on the
    /// memory for the one before it. Loading every key's slot first, then the
    /// entries (independent of each other), lets their cache misses overlap.
    pub fn probe_many(&self, keys: &[u128], probes: &mut [Probe; MANY]) {
        for (p, &key) in probes.iter_mut().zip(keys) {
            if key != NO_KEY {
                *p = self.probe(key);
            }
        }
    }

    fn probe(&self, key: u128) -> Probe {
        let (i, tag) = hash(key);
        // Acquire: the entry was written before its slot.
        let slot = self.index[i].load(Acquire);
        Probe { i, tag, slot }
    }

    /// `extend` for a key whose lookup starts at `probe` (from `probe_many`
    /// or `probe`).
    #[inline]
    pub fn extend_from(&self, key: u128, probe: Probe, out: &mut Vec<u32>) -> bool {
        let Probe {
            mut i,
            tag,
            mut slot,
        } = probe;
        loop {
            if slot == 0 {
                return false;
            }
            if slot >> SLOT_BITS == tag {
                let entry = &self.entries[(slot & SLOT_MASK) as usize - 1];
                if entry.key() == key {
                    // All MAX_IDS ids copied, the unused ones dropped: a copy of
                    // fixed size has no branch on the word's length to mispredict.
                    let end = out.len() + entry.len.load(Relaxed) as usize;
                    out.extend(entry.ids.iter().map(|id| id.load(Relaxed)));
                    out.truncate(end);
                    return true;
                }
            }
            i = (i + 1) % INDEX_SLOTS;
            slot = self.index[i].load(Acquire);
        }
    }

    /// Hold `ids` for the word with this short key; false when it cannot
    /// (too many ids, or the cache is full), and the caller keeps it.
    pub fn insert(&self, key: u128, ids: &[u32]) -> bool {
        if ids.len() > MAX_IDS || self.claimed.load(Relaxed) >= CAPACITY {
            return false;
        }
        let at = self.claimed.fetch_add(1, Relaxed);
        let Some(entry) = self.entries.get(at) else {
            return false;
        };
        entry.key[0].store(key as u64, Relaxed);
        entry.key[1].store((key >> 64) as u64, Relaxed);
        for (slot, &id) in entry.ids.iter().zip(ids) {
            slot.store(id, Relaxed);
        }
        entry.len.store(ids.len() as u32, Relaxed);
        let (mut i, tag) = hash(key);
        let slot = tag << SLOT_BITS | (at as u32 + 1);
        loop {
            // Release: a reader that sees the slot sees the entry.
            match self.index[i].compare_exchange(0, slot, Release, Acquire) {
                Ok(_) => return true,
                // Another thread put the same word in first; this entry
                // stays unused.
                Err(other)
                    if other >> SLOT_BITS == tag
                        && self.entries[(other & SLOT_MASK) as usize - 1].key() == key =>
                {
                    return true
                }
                Err(_) => i = (i + 1) % INDEX_SLOTS,
            }
        }
    }
}

/// Types made only of atomic integers, for which all-zero bytes are a
/// valid value.
///
/// # Safety
/// Implementors must be valid when zeroed, have an alignment of at most a
/// page, and be Sync.
unsafe trait ZeroValid: Sync {}
unsafe impl ZeroValid for AtomicU32 {}
unsafe impl ZeroValid for Entry {}

/// `[T; N]` over fresh zeroed pages. The OS maps a page in only when it is
/// first touched, so unused capacity costs nothing. Huge pages where the
/// OS offers them: a hash table's pages are touched at random, each first
/// read (mapping the zero page) and later written (faulting again), which
/// cost as many faults as a per-thread cache saves.
struct ZeroedArray<T, const N: usize> {
    array: *const [T; N],
    _map: memmap2::MmapMut,
}

// SAFETY: the memory is reached only through `&[T; N]`, and `T` is Sync;
// the mapping lives as long as the struct.
unsafe impl<T: ZeroValid, const N: usize> Send for ZeroedArray<T, N> {}
unsafe impl<T: ZeroValid, const N: usize> Sync for ZeroedArray<T, N> {}

impl<T: ZeroValid, const N: usize> ZeroedArray<T, N> {
    fn new() -> Self {
        let mut map = memmap2::MmapMut::map_anon(std::mem::size_of::<[T; N]>())
            .expect("cannot reserve memory for the word cache");
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        ZeroedArray {
            array: map.as_mut_ptr().cast(),
            _map: map,
        }
    }
}

impl<T: ZeroValid, const N: usize> std::ops::Deref for ZeroedArray<T, N> {
    type Target = [T; N];

    fn deref(&self) -> &[T; N] {
        // SAFETY: the mapping is page-aligned, `size_of::<[T; N]>()` bytes,
        // zeroed (valid for `T`) and outlives `&self`.
        unsafe { &*self.array }
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

    #[test]
    fn a_full_cache_refuses_new_words() {
        let cache = SharedCache::default();
        cache.claimed.store(CAPACITY, Relaxed);
        assert!(!cache.insert(3, &[1]));
        assert!(!cache.extend(3, &mut Vec::new()));
    }
}
