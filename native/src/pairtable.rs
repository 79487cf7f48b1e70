//! (left, right) -> rank of their merge, for the encoder's merge loops.
//! Where the ids merges make grow with their rank (tiktoken's, tokenmill's
//! own), the table holds the id, which orders merges as the rank does and
//! saves a lookup of the id by rank.
//!
//! A word the caches lack is merged symbol pair by symbol pair, and each
//! pair is a lookup in a table of every merge (200k for o200k_base): in a
//! `HashMap`, a group of control bytes then the entry, two lines of a table
//! bigger than the CPU's caches, and on source code (many rare identifiers)
//! these misses took a tenth of encoding. Here pairs of two small ids
//! (bytes, and the earliest merges, which make most of the pairs met) are
//! one load from a grid, and the others one line of an open-addressing
//! table whose `u64` slots hold the pair and its rank together.

use crate::train::Pair;
use rustc_hash::FxHashMap;

/// Bits of an id or rank in a packed slot.
const ID_BITS: u32 = 21;
const ID_MASK: u64 = (1 << ID_BITS) - 1;
/// Ids below this have their pairs in the grid (4 MB of u32).
const GRID: u32 = 1 << 10;
/// No merge (grid), or a free slot (table: its pair is above every real one).
const NONE: u32 = u32::MAX;
const FREE: u64 = u64::MAX;

pub struct PairTable {
    grid: Table<u32>,
    slots: Table<u64>,
    shift: u32,
    /// Whether `rank` gives the id the merge makes.
    pub ids: bool,
}

impl PairTable {
    /// The table of `merges` ((left, right) -> (rank, id)), or None when an
    /// id or rank does not fit its slots. `by_id`: hold the ids, which the
    /// caller knows to grow with the rank.
    pub fn new(merges: &FxHashMap<Pair, (u32, u32)>, by_id: bool) -> Option<Self> {
        let fits = |x: u32| u64::from(x) < ID_MASK;
        let order = |(rank, id): (u32, u32)| if by_id { id } else { rank };
        if !(merges.iter()).all(|(&(a, b), &v)| fits(a) && fits(b) && fits(order(v))) {
            return None;
        }
        // At most half full: a probe ends within a slot or two.
        let size = (2 * merges.len()).next_power_of_two().max(64);
        let mut table = PairTable {
            grid: Table::new((GRID * GRID) as usize, NONE),
            slots: Table::new(size, FREE),
            shift: 64 - size.trailing_zeros(),
            ids: by_id,
        };
        for (&(a, b), &v) in merges {
            let rank = order(v);
            if a < GRID && b < GRID {
                table.grid[(a * GRID + b) as usize] = rank;
            }
            let key = key(a, b);
            let mut i = table.home(key);
            while table.slots[i] != FREE {
                i = (i + 1) & (size - 1);
            }
            table.slots[i] = key << ID_BITS | u64::from(rank);
        }
        Some(table)
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The rank of the merge of `a` then `b`; u32::MAX, above every rank,
    /// when they do not merge.
    #[inline(always)]
    pub fn rank(&self, a: u32, b: u32) -> u32 {
        if a < GRID && b < GRID {
            return self.grid[(a * GRID + b) as usize];
        }
        let key = key(a, b);
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let slot = self.slots[i];
            if slot >> ID_BITS == key {
                return (slot & ID_MASK) as u32;
            }
            if slot == FREE {
                return NONE;
            }
            i = (i + 1) & mask;
        }
    }
}

/// A slice on its own pages, huge ones where the OS offers them: lookups
/// land anywhere in a table of MB, and with pages of 4 KB nearly each one
/// also missed the TLB.
struct Table<T> {
    map: memmap2::MmapMut,
    len: usize,
    _type: std::marker::PhantomData<T>,
}

impl<T: Copy> Table<T> {
    fn new(len: usize, fill: T) -> Self {
        let map = memmap2::MmapMut::map_anon(len * std::mem::size_of::<T>())
            .expect("cannot reserve memory for the merge table");
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        let mut table = Table {
            map,
            len,
            _type: std::marker::PhantomData,
        };
        table.fill(fill);
        table
    }
}

impl<T> std::ops::Deref for Table<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // SAFETY: the mapping is page-aligned and holds `len` values of T
        // (plain integers, valid whatever their bytes).
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast(), self.len) }
    }
}

impl<T> std::ops::DerefMut for Table<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as for `deref`, and `&mut self` is the only access.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().cast(), self.len) }
    }
}

#[inline(always)]
fn key(a: u32, b: u32) -> u64 {
    u64::from(a) << ID_BITS | u64::from(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_of_grid_and_table_pairs_and_of_no_merge() {
        let mut merges = FxHashMap::default();
        let pairs = [
            (1, 2),
            (GRID - 1, 0),
            (GRID, 3),
            (5, 70_000),
            (70_000, 70_001),
        ];
        for (rank, &pair) in pairs.iter().enumerate() {
            merges.insert(pair, (rank as u32 * 7, 0));
        }
        let table = PairTable::new(&merges, false).unwrap();
        for (rank, &(a, b)) in pairs.iter().enumerate() {
            assert_eq!(table.rank(a, b), rank as u32 * 7, "({a}, {b})");
        }
        let by_id = PairTable::new(&merges, true).unwrap();
        assert_eq!(by_id.rank(GRID, 3), 0);
        for (a, b) in [(2, 1), (0, GRID - 1), (3, GRID), (70_001, 70_000), (9, 9)] {
            assert_eq!(table.rank(a, b), NONE, "({a}, {b})");
        }
    }

    #[test]
    fn ids_too_large_for_a_slot_are_refused() {
        let mut merges = FxHashMap::default();
        merges.insert((1, 1 << ID_BITS), (0, 0));
        assert!(PairTable::new(&merges, false).is_none());
    }
}
