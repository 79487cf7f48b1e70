//! Merging a long word: the lowest-ranked, leftmost pair each round, as the
//! short loop does, in near-linear time and little memory a symbol.
//!
//! A word the pattern does not split (a line of base64, letters without a
//! space) can be as large as its document, and a BPE merge can reach across
//! all of it, so it is merged whole: what a symbol costs here bounds the
//! document's peak. A symbol is its id, marked GONE once merged into its left
//! neighbour; its neighbours are found by skipping marks, at most the longest
//! token's symbols away. Links (two u32 a symbol) took 8 bytes a symbol more
//! and were no faster. Positions wait in one bucket per rank.

use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A symbol merged into its left neighbour. No id is this large.
const GONE: u32 = u32::MAX;

/// `sym` (base symbols) merged; `merge_of(pair)` gives a pair's (rank,
/// merged id). All merges of the lowest rank are applied left to right
/// before any higher rank: in a BPE merge list, pairs a merge makes never
/// have a lower rank than it, so this is what repeatedly merging the
/// lowest-ranked, leftmost pair does.
pub fn merge(mut sym: Vec<u32>, merge_of: impl Fn((u32, u32)) -> Option<(u32, u32)>) -> Vec<u32> {
    let n = sym.len();
    debug_assert!(sym.iter().all(|&s| s != GONE));
    let mut queue = RankQueue::default();
    for i in 0..n.saturating_sub(1) {
        if let Some((rank, _)) = merge_of((sym[i], sym[i + 1])) {
            queue.push(rank, i as u32);
        }
    }
    while let Some((rank, positions)) = queue.pop() {
        for i in positions {
            let i = i as usize;
            if sym[i] == GONE {
                continue;
            }
            let j = next(&sym, i);
            // Skip positions whose pair changed since they were queued.
            let id = match sym.get(j).and_then(|&right| merge_of((sym[i], right))) {
                Some((r, id)) if r == rank => id,
                _ => continue,
            };
            sym[i] = id;
            sym[j] = GONE;
            let after = next(&sym, j);
            if after < n {
                if let Some((r, _)) = merge_of((id, sym[after])) {
                    queue.push(r, i as u32);
                }
            }
            if i > 0 {
                // Position 0 is never merged away: a live symbol is to its left.
                let p = (0..i)
                    .rev()
                    .find(|&p| sym[p] != GONE)
                    .expect("symbol 0 stays");
                if let Some((r, _)) = merge_of((sym[p], id)) {
                    queue.push(r, p as u32);
                }
            }
        }
    }
    sym.retain(|&s| s != GONE);
    sym
}

/// The next live position after `i` (or `sym.len()`).
fn next(sym: &[u32], i: usize) -> usize {
    (i + 1..sym.len())
        .find(|&k| sym[k] != GONE)
        .unwrap_or(sym.len())
}

/// Positions waiting to merge, by rank; pops the lowest rank's positions sorted.
#[derive(Default)]
struct RankQueue {
    buckets: FxHashMap<u32, Vec<u32>>,
    ranks: BinaryHeap<Reverse<u32>>,
}

impl RankQueue {
    fn push(&mut self, rank: u32, pos: u32) {
        let ranks = &mut self.ranks;
        self.buckets
            .entry(rank)
            .or_insert_with(|| {
                ranks.push(Reverse(rank));
                Vec::new()
            })
            .push(pos);
    }

    fn pop(&mut self) -> Option<(u32, Vec<u32>)> {
        let Reverse(rank) = self.ranks.pop()?;
        let mut positions = self.buckets.remove(&rank).unwrap_or_default();
        positions.sort_unstable();
        Some((rank, positions))
    }
}
