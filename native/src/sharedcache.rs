//! One word -> ids cache for all the threads of an encoder.
//!
//! With a cache per thread, each thread learns the same words and grows its
//! own table: with two threads, each did a share of the other's misses
//! again and the caches faulted in over twice the pages of one. Here the
//! threads share one table whose slots are written once and never move: a
//! lookup is plain loads, with no lock and no atomic read-modify-write, so
//! threads never contend on a hit.
//!
//! A slot holds a word's short key, its ids and their count, 32 bytes: a
//! lookup reads one cache line (an index then an entry took two, the second
//! waiting on the first). The table is bigger than the CPU's caches, so the
//! encoder hashes a batch of words first and prefetches their slots
//! (`prefetch`), and the loads of a batch overlap.
//!
//! A writer claims an empty slot (state BUSY), writes the key and ids, then
//! publishes the state (Release); a reader that sees the state (Acquire)
//! sees them. A reader that meets a slot being written takes the word as
//! absent: its caller then encodes the word and `insert` finds it.
//!
//! It holds the first `CAPACITY` short words it is given (a frequent word is
//! seen early); later words and words of more than `MAX_IDS` ids are left
//! to the caller's own cache.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize};

/// Ids a word may have to be held here (nearly every word has one to three).
pub const MAX_IDS: usize = 3;

const SLOT_BITS: u32 = 20;
const SLOTS: usize = 1 << SLOT_BITS;
/// At most three quarters full: probe runs stay short.
const CAPACITY: usize = SLOTS / 4 * 3;

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

pub struct SharedCache {
    slots: ZeroedArray<Slot, SLOTS>,
    held: AtomicUsize,
}

impl Default for SharedCache {
    fn default() -> Self {
        SharedCache {
            slots: ZeroedArray::new(),
            held: AtomicUsize::new(0),
        }
    }
}

/// How many words the encoder hashes and prefetches at once.
pub const MANY: usize = 32;
/// A key no word has (a short key's last byte, its length, is at most 15).
pub const NO_KEY: u128 = u128::MAX;

/// The slot where the lookup of `key` starts.
#[inline(always)]
pub fn home(key: u128) -> usize {
    let (lo, hi) = (key as u64, (key >> 64) as u64);
    let h = (lo.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ hi).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (h >> (64 - SLOT_BITS)) as usize
}

impl SharedCache {
    /// Append the ids of the word with this short key to `out`; false when
    /// the word is not here.
    pub fn extend(&self, key: u128, out: &mut Vec<u32>) -> bool {
        self.extend_from(key, home(key), out)
    }

    /// Start loading the slot `at` (a key's `home`) into the CPU's cache.
    #[inline(always)]
    pub fn prefetch(&self, at: usize) {
        prefetch(&self.slots[at]);
    }

    /// `extend`, for a key whose `home` is `at`.
    #[inline(always)]
    pub fn extend_from(&self, key: u128, mut at: usize, out: &mut Vec<u32>) -> bool {
        loop {
            let slot = &self.slots[at];
            let state = slot.state.load(Acquire);
            if state == 0 || state == BUSY {
                return false;
            }
            if slot.key() == key {
                // All MAX_IDS ids copied, the unused ones dropped: a copy of
                // fixed size has no branch on the word's length to mispredict.
                let len = (state & (HELD - 1)) as usize;
                let ids = slot.ids.each_ref().map(|id| id.load(Relaxed));
                match out.spare_capacity_mut().get_mut(..MAX_IDS) {
                    Some(spare) => {
                        for (to, id) in spare.iter_mut().zip(ids) {
                            to.write(id);
                        }
                        // SAFETY: the first `len` (at most MAX_IDS) spare
                        // elements were just written.
                        unsafe { out.set_len(out.len() + len) };
                    }
                    None => out.extend_from_slice(&ids[..len]),
                }
                return true;
            }
            at = (at + 1) % SLOTS;
        }
    }

    /// Hold `ids` for the word with this short key; false when it cannot
    /// (too many ids, or the cache is full), and the caller keeps it.
    pub fn insert(&self, key: u128, ids: &[u32]) -> bool {
        if ids.len() > MAX_IDS || self.held.load(Relaxed) >= CAPACITY {
            return false;
        }
        let mut at = home(key);
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
                    return true;
                }
                // Another thread is writing this slot: its word may be this one.
                Err(BUSY) => std::hint::spin_loop(),
                // Another thread put the same word in first.
                Err(_) if slot.key() == key => return true,
                Err(_) => at = (at + 1) % SLOTS,
            }
        }
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

/// Types made only of atomic integers, for which all-zero bytes are a
/// valid value.
///
/// # Safety
/// Implementors must be valid when zeroed, have an alignment of at most a
/// page, and be Sync.
unsafe trait ZeroValid: Sync {}
unsafe impl ZeroValid for Slot {}

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
        cache.held.store(CAPACITY, Relaxed);
        assert!(!cache.insert(3, &[1]));
        assert!(!cache.extend(3, &mut Vec::new()));
    }
}
