//! Imported byte-level vocabularies: a .tiktoken ranks file's table, the
//! merges its ranks imply, and the ids an explicit table's bytes and merges
//! have. These are the costs of loading a 200k-token vocabulary; in Python
//! they took seconds.
//!
//! The Python side keeps the reference implementations, with the one-line
//! messages users see: these functions accept only what those accept and
//! give exactly their results, and any error here sends the Python side to
//! its reference, which names the line, rank or id at fault.

use crate::error::{Error, Result};
use crate::wordmap::short_key;
use base64::Engine;
use dary_heap::QuaternaryHeap;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use std::cmp::Reverse;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether merge k, `(a, b)`, makes its id (`made[k]`, or `base + k` when
/// `made` is None) from ids below that, neither of them special, and no
/// merge repeats another: the rule `tokenmill.tokenizer.vocab`'s
/// `OwnNumbering.check` holds a loaded file to. Its `merge_fault` stays the
/// reference, run only when this says no, to name the merge at fault.
pub fn merges_valid(
    merges: &[(u32, u32)],
    base: u32,
    made: Option<&[u32]>,
    specials: &[u32],
) -> bool {
    if made.is_some_and(|m| m.len() != merges.len()) {
        return false;
    }
    let specials: FxHashSet<u32> = specials.iter().copied().collect();
    let mut seen = FxHashSet::default();
    seen.reserve(merges.len());
    merges.iter().enumerate().all(|(k, &(a, b))| {
        let limit = match made {
            Some(made) => u64::from(made[k]),
            None => u64::from(base) + k as u64,
        };
        u64::from(a.max(b)) < limit
            && !specials.contains(&a)
            && !specials.contains(&b)
            && seen.insert((a, b))
    })
}

/// The bytes of each id (None: a special token's id, or a gap).
pub type ByteTable = Vec<Option<Vec<u8>>>;

/// Ids must lie below this for a vocabulary of `n_tokens` tokens: as
/// `tokenmill.tokenizer.ids.id_limit` (unused ids no more than tokens + 1024).
pub fn id_limit(n_tokens: usize) -> u64 {
    (2 * n_tokens as u64 + 1024).min(u32::MAX as u64)
}

fn ranks_error(line: usize, what: &str) -> Error {
    Error::Vocabulary(format!("ranks file line {line}: {what}"))
}

/// The tokens of a .tiktoken file (`base64(token) rank` a line), indexed by
/// rank: None for a rank no line has.
///
/// Only the canonical form is accepted: one space between the fields,
/// padded base64, decimal ranks, lines ending in `\n`, no blank line. The
/// same checks as the Python reader's then hold: ranks below `id_limit` of
/// the number of lines, no token or rank twice, at least one token.
pub fn parse_tiktoken(data: &[u8]) -> Result<ByteTable> {
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    if body.is_empty() {
        return Err(Error::Vocabulary("no tokens in ranks file".into()));
    }
    let lines: Vec<&[u8]> = body.split(|&c| c == b'\n').collect();
    let limit = id_limit(lines.len());
    let parsed: Vec<(Vec<u8>, u32)> = lines
        .par_iter()
        .enumerate()
        .map(|(k, line)| parse_line(line, limit).ok_or_else(|| ranks_error(k + 1, "malformed")))
        .collect::<Result<_>>()?;
    let top = parsed.iter().map(|&(_, r)| r).max().unwrap_or(0);
    let mut vocab: Vec<Option<Vec<u8>>> = vec![None; top as usize + 1];
    let mut seen: FxHashSet<&[u8]> = FxHashSet::default();
    seen.reserve(parsed.len());
    for (k, (token, rank)) in parsed.iter().enumerate() {
        if vocab[*rank as usize].is_some() || !seen.insert(token) {
            return Err(ranks_error(k + 1, "repeated token or rank"));
        }
        vocab[*rank as usize] = Some(Vec::new());
    }
    for (token, rank) in parsed {
        vocab[rank as usize] = Some(token);
    }
    Ok(vocab)
}

/// (token bytes, rank) of one canonical line, if it is one and its rank is
/// below `limit`.
fn parse_line(line: &[u8], limit: u64) -> Option<(Vec<u8>, u32)> {
    let space = line.iter().position(|&c| c == b' ')?;
    let (token, rank) = (&line[..space], &line[space + 1..]);
    // Ten digits hold any rank below the limit (at most 2**32-1).
    if rank.is_empty() || rank.len() > 10 || !rank.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let rank = rank.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
    if rank >= limit {
        return None;
    }
    // The standard engine wants canonical padding and zero trailing bits:
    // stricter than Python's b64decode(validate=True), never more lenient.
    let token = base64::engine::general_purpose::STANDARD
        .decode(token)
        .ok()?;
    if token.is_empty() {
        return None;
    }
    Some((token, rank as u32))
}

/// A short key as two words: a map entry of 24 bytes, not the 32 a `u128`
/// (16-byte aligned) takes, so more of the 200k-entry index stays in cache.
fn halves(k: u128) -> [u64; 2] {
    [k as u64, (k >> 64) as u64]
}

/// Bytes -> id of a table, for BPE's lookups (nearly all the cost of
/// deriving merges): two-byte tokens (every first pair) also in a flat
/// table, tokens of up to 15 bytes packed into a `u128` key (no pointer to
/// follow, no memcmp: a sixth of the derivation's time), longer ones by
/// their bytes.
struct Index<'a> {
    pairs: Vec<u32>,
    short: FxHashMap<[u64; 2], u32>,
    long: FxHashMap<&'a [u8], u32>,
    /// The length of the longest token.
    longest: usize,
}

impl<'a> Index<'a> {
    /// An error when two ids have the same bytes.
    fn new(vocab: &[Option<&'a [u8]>]) -> Result<Self> {
        let mut index = Index {
            pairs: vec![u32::MAX; 1 << 16],
            short: FxHashMap::default(),
            long: FxHashMap::default(),
            longest: 0,
        };
        index.short.reserve(vocab.len());
        for (i, v) in vocab.iter().enumerate() {
            let Some(v) = *v else { continue };
            index.longest = index.longest.max(v.len());
            let before = match short_key(v) {
                Some(k) => index.short.insert(halves(k), i as u32),
                None => index.long.insert(v, i as u32),
            };
            if let Some(j) = before {
                return Err(Error::Vocabulary(format!(
                    "ids {j} and {i} have the same bytes"
                )));
            }
            if let [x, y] = v[..] {
                index.pairs[usize::from(x) << 8 | usize::from(y)] = i as u32;
            }
        }
        Ok(index)
    }

    /// The id of `bytes`, if a token has them.
    fn find(&self, bytes: &[u8]) -> Option<u32> {
        match bytes {
            [x, y] => {
                Some(self.pairs[usize::from(*x) << 8 | usize::from(*y)]).filter(|&i| i != u32::MAX)
            }
            _ => match short_key(bytes) {
                Some(k) => self.short.get(&halves(k)).copied(),
                None => self.long.get(bytes).copied(),
            },
        }
    }

    /// The rank (= id) of `bytes`; u32::MAX, above every rank, if none.
    fn rank(&self, bytes: &[u8]) -> u32 {
        work(bytes.len());
        self.find(bytes).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
thread_local! {
    /// Steps of BPE on this thread: pairs scanned or popped, bytes looked up.
    static WORK: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts `steps` of BPE's work, in tests only: they hold its complexity.
#[inline(always)]
fn work(steps: usize) {
    #[cfg(test)]
    WORK.with(|w| w.set(w.get() + steps));
    #[cfg(not(test))]
    let _ = steps;
}

/// Tokens longer than this are merged by `bpe_parts_long`: below it the
/// rescanning loop's few short arrays are faster than a heap and links.
const LONG_TOKEN: usize = 64;

/// How many merges `bpe_parts_long` makes between looks at `stop`.
const STOP_EVERY: usize = 1 << 12;

/// tiktoken's merging of `token`'s bytes using only ranks below `max_rank`:
/// repeatedly join the adjacent pair whose bytes have the lowest rank (the
/// leftmost of equal ones). Leaves in `starts` where the parts begin;
/// `pair_ranks` is scratch. False when `stop` was set first (`starts` then
/// holds nothing of use).
fn bpe_parts(
    ranks: &Index,
    token: &[u8],
    max_rank: u32,
    starts: &mut Vec<usize>,
    pair_ranks: &mut Vec<u32>,
    stop: &AtomicBool,
) -> bool {
    if token.len() > LONG_TOKEN {
        return bpe_parts_long(ranks, token, max_rank, starts, stop);
    }
    bpe_parts_short(ranks, token, max_rank, starts, pair_ranks);
    true
}

/// `bpe_parts` by scanning every pair for each merge.
fn bpe_parts_short(
    ranks: &Index,
    token: &[u8],
    max_rank: u32,
    starts: &mut Vec<usize>,
    pair_ranks: &mut Vec<u32>,
) {
    starts.clear();
    starts.extend(0..token.len());
    // The rank of parts i and i + 1 joined (MAX: none usable).
    let pair_rank = |starts: &[usize], i: usize| -> u32 {
        if i + 1 >= starts.len() {
            return u32::MAX;
        }
        let end = starts.get(i + 2).copied().unwrap_or(token.len());
        match ranks.rank(&token[starts[i]..end]) {
            r if r < max_rank => r,
            _ => u32::MAX,
        }
    };
    pair_ranks.clear();
    pair_ranks.extend((0..starts.len()).map(|i| pair_rank(starts, i)));
    loop {
        work(pair_ranks.len());
        let mut best = (u32::MAX, 0);
        for (i, &r) in pair_ranks.iter().enumerate() {
            if r < best.0 {
                best = (r, i);
            }
        }
        if best.0 == u32::MAX {
            return;
        }
        let at = best.1;
        starts.remove(at + 1);
        pair_ranks.remove(at + 1);
        pair_ranks[at] = pair_rank(starts, at);
        if at > 0 {
            pair_ranks[at - 1] = pair_rank(starts, at - 1);
        }
    }
}

/// `bpe_parts` for a long token, in O(n log n) merges' work rather than the
/// rescanning loop's O(n) a merge: a token can be a whole document's run of
/// one pattern (400 kB), and the loop, which finds each merge by a scan of
/// every pair and shifts the arrays after it, took minutes on such a file.
/// Parts are linked by where they start; pairs wait in a heap by (rank,
/// start), which pops the lowest rank, leftmost first, as the scan picks.
/// A heap entry is stale once its part merged away or its pair changed: it
/// is dropped when its rank is no longer the part's.
fn bpe_parts_long(
    ranks: &Index,
    token: &[u8],
    max_rank: u32,
    starts: &mut Vec<usize>,
    stop: &AtomicBool,
) -> bool {
    let n = token.len();
    // next[i]: where the part after the one at i starts (n: none);
    // prev[i]: where the one before starts (only read for live parts i > 0);
    // rank[i]: the rank of the part at i joined to the next (MAX: none, or
    // the part is merged away).
    let mut next: Vec<usize> = (1..=n).collect();
    let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
    let mut rank = vec![u32::MAX; n];
    let pair_rank = |next: &[usize], i: usize| -> u32 {
        let j = next[i];
        if j >= n {
            return u32::MAX;
        }
        let end = next[j];
        if end - i > ranks.longest {
            return u32::MAX; // no token is that long: no need to hash it
        }
        match ranks.rank(&token[i..end]) {
            r if r < max_rank => r,
            _ => u32::MAX,
        }
    };
    let mut first = Vec::with_capacity(n);
    for (i, r) in rank.iter_mut().enumerate() {
        *r = pair_rank(&next, i);
        if *r != u32::MAX {
            first.push(Reverse((*r, i)));
        }
    }
    // Four children a node: fewer levels, each in fewer cache lines.
    let mut heap = QuaternaryHeap::from(first);
    let mut merged = 0usize;
    while let Some(Reverse((r, i))) = heap.pop() {
        work(1);
        if rank[i] != r {
            continue;
        }
        merged += 1;
        if merged.is_multiple_of(STOP_EVERY) && stop.load(Ordering::Relaxed) {
            return false;
        }
        let j = next[i];
        next[i] = next[j];
        if next[i] < n {
            prev[next[i]] = i;
        }
        rank[j] = u32::MAX;
        rank[i] = pair_rank(&next, i);
        if rank[i] != u32::MAX {
            heap.push(Reverse((rank[i], i)));
        }
        if i > 0 {
            let p = prev[i];
            rank[p] = pair_rank(&next, p);
            if rank[p] != u32::MAX {
                heap.push(Reverse((rank[p], p)));
            }
        }
    }
    starts.clear();
    let mut i = 0;
    while i < n {
        starts.push(i);
        i = next[i];
    }
    true
}

/// What a ranks table implies: its merges, the ids they yield, and each
/// byte's id (None when a byte has no token).
#[derive(Debug, PartialEq)]
pub struct Derived {
    pub merges: Vec<(u32, u32)>,
    pub merge_ids: Vec<u32>,
    pub byte_ids: Option<Vec<u32>>,
}

/// One merge per multi-byte token, in rank order: the two tokens that BPE
/// over the lower ranks splits it into; the merge yields that token. A
/// token that splits into more parts gets no merge (whole-word lookup still
/// reaches it), as in the Python reference. `vocab[r]` is the token of rank
/// r (None: no token). `Error::Stopped` once `stop` is set (a signal came):
/// it is looked at between tokens and every few thousand merges of a long
/// one, so that it ends a derivation of any size within milliseconds.
pub fn derive_merges(vocab: &[Option<&[u8]>], stop: &AtomicBool) -> Result<Derived> {
    let ranks = Index::new(vocab)?;
    let found: Vec<Option<(u32, u32)>> = vocab
        .par_iter()
        .enumerate()
        .map_init(
            || (Vec::new(), Vec::new()),
            |(starts, scratch), (rank, token)| match token {
                Some(token) if token.len() > 1 => {
                    if stop.load(Ordering::Relaxed)
                        || !bpe_parts(&ranks, token, rank as u32, starts, scratch, stop)
                    {
                        return None;
                    }
                    // A part of one byte may be no token (a file that lacks
                    // the byte): then the token is not split into two tokens.
                    match starts[..] {
                        [_, mid] => match (ranks.rank(&token[..mid]), ranks.rank(&token[mid..])) {
                            (u32::MAX, _) | (_, u32::MAX) => None,
                            pair => Some(pair),
                        },
                        _ => None,
                    }
                }
                _ => None,
            },
        )
        .collect();
    if stop.load(Ordering::Relaxed) {
        return Err(Error::Stopped);
    }
    let mut derived = Derived {
        merges: Vec::with_capacity(found.len()),
        merge_ids: Vec::with_capacity(found.len()),
        byte_ids: (0..=255u8).map(|b| ranks.find(&[b])).collect(),
    };
    for (rank, merge) in found.into_iter().enumerate() {
        if let Some(merge) = merge {
            derived.merges.push(merge);
            derived.merge_ids.push(rank as u32);
        }
    }
    Ok(derived)
}

/// The merges transformers' TikTokenConverter writes for a ranks table
/// (`vocab[r]`: the token of rank r): every split of each multi-byte token
/// into two tokens, the tokens in rank order and each token's splits in the
/// order of their parts' ranks.
pub fn every_split(vocab: &[Option<&[u8]>]) -> Result<Vec<(u32, u32)>> {
    let index = Index::new(vocab)?;
    let splits: Vec<Vec<(u32, u32)>> = vocab
        .par_iter()
        .map(|token| match token {
            Some(token) if token.len() > 1 => {
                let mut pairs: Vec<(u32, u32)> = (1..token.len())
                    .filter_map(|mid| {
                        Some((index.find(&token[..mid])?, index.find(&token[mid..])?))
                    })
                    .collect();
                pairs.sort_unstable();
                pairs
            }
            _ => Vec::new(),
        })
        .collect();
    Ok(splits.concat())
}

/// The id of each of the 256 bytes and the id each merge yields (the token
/// whose bytes are the left's then the right's), for an explicit table
/// (`vocab[i]`: the bytes of id i, None for a special token or a gap).
/// Errors: two ids with the same bytes, a byte with no token, a merge of
/// ids outside the table or whose joined bytes are no token.
pub fn table_ids(vocab: &[Option<&[u8]>], merges: &[(u32, u32)]) -> Result<(Vec<u32>, Vec<u32>)> {
    let index = Index::new(vocab)?;
    let byte_ids = (0..=255u8)
        .map(|b| {
            index.find(&[b]).ok_or_else(|| {
                Error::Vocabulary(format!("the vocabulary has no token for byte 0x{b:02x}"))
            })
        })
        .collect::<Result<Vec<u32>>>()?;
    // An empty token joins nothing (as in the Python reference, where b"" is false).
    let token = |i: u32| {
        vocab
            .get(i as usize)
            .copied()
            .flatten()
            .filter(|t| !t.is_empty())
    };
    let merge_ids = merges
        .par_iter()
        .enumerate()
        .map_init(Vec::new, |joined, (k, &(a, b))| {
            let no_token = || {
                Error::Vocabulary(format!(
                    "merge {k} ({a}, {b}) does not join two tokens into a token of the vocabulary"
                ))
            };
            let (left, right) = (
                token(a).ok_or_else(no_token)?,
                token(b).ok_or_else(no_token)?,
            );
            joined.clear();
            joined.extend_from_slice(left);
            joined.extend_from_slice(right);
            index.find(joined).ok_or_else(no_token)
        })
        .collect::<Result<Vec<u32>>>()?;
    Ok((byte_ids, merge_ids))
}

/// An imported byte-level vocabulary as the encoder takes it: the bytes of
/// each id (None: a special token's id, or a gap), the merges in rank
/// order, the id each yields, and each byte's id (None when a byte has no
/// token: the Python side refuses such a table, naming the byte). Built
/// here from a file's bytes, it never exists as 200k Python objects unless
/// Python asks for them.
#[derive(Debug, PartialEq)]
pub struct Imported {
    pub tokens: ByteTable,
    pub merges: Vec<(u32, u32)>,
    pub merge_ids: Vec<u32>,
    pub byte_ids: Option<Vec<u32>>,
}

/// The entries of a table as slices.
pub fn views(tokens: &ByteTable) -> Vec<Option<&[u8]>> {
    tokens.iter().map(|v| v.as_deref()).collect()
}

impl Imported {
    /// A canonical .tiktoken file: its table (`parse_tiktoken`) and the
    /// merges its ranks imply (`derive_merges`, stopped by `stop`).
    pub fn from_tiktoken(data: &[u8], stop: &AtomicBool) -> Result<Self> {
        let tokens = parse_tiktoken(data)?;
        let derived = derive_merges(&views(&tokens), stop)?;
        Ok(Imported {
            tokens,
            merges: derived.merges,
            merge_ids: derived.merge_ids,
            byte_ids: derived.byte_ids,
        })
    }

    /// An explicit table and its merges (id pairs), checked by `table_ids`.
    pub fn from_table(tokens: ByteTable, merges: Vec<(u32, u32)>) -> Result<Self> {
        let (byte_ids, merge_ids) = table_ids(&views(&tokens), &merges)?;
        Ok(Imported {
            tokens,
            merges,
            merge_ids,
            byte_ids: Some(byte_ids),
        })
    }

    /// The table read as a .tiktoken file's ranks (`from_tiktoken`'s
    /// merges), when its merges are exactly those a conversion of such a
    /// file lists (`every_split`); None otherwise.
    pub fn as_ranks(&self, stop: &AtomicBool) -> Result<Option<Self>> {
        let views = views(&self.tokens);
        if every_split(&views)? != self.merges {
            return Ok(None);
        }
        let derived = derive_merges(&views, stop)?;
        Ok(Some(Imported {
            tokens: self.tokens.clone(),
            merges: derived.merges,
            merge_ids: derived.merge_ids,
            byte_ids: derived.byte_ids,
        }))
    }

    /// How many ids hold a token.
    pub fn n_tokens(&self) -> usize {
        self.tokens.iter().filter(|v| v.is_some()).count()
    }
}

/// A merge list that merging by rank reads otherwise than Hugging Face's
/// BPE, which ranks a merge listed twice by its last place and merges a
/// pair as soon as it appears, whatever the rank of the merge that made it.
pub enum MergeFault {
    /// Merge `k` repeats merge `first`.
    Repeats { k: usize, first: usize },
    /// Merge `k` joins a token that only merge `maker` (>= k) makes.
    Early { k: usize, maker: usize },
}

/// The first fault of `merges` (id pairs, in rank order, merge k making
/// `merge_ids[k]`), if any.
pub fn merge_fault(merges: &[(u32, u32)], merge_ids: &[u32]) -> Option<MergeFault> {
    let size = merge_ids.iter().max().map_or(0, |&m| m as usize + 1);
    let mut made_by = vec![usize::MAX; size];
    for (k, &id) in merge_ids.iter().enumerate().rev() {
        made_by[id as usize] = k;
    }
    let mut seen: FxHashMap<(u32, u32), usize> = FxHashMap::default();
    seen.reserve(merges.len());
    for (k, &(left, right)) in merges.iter().enumerate() {
        if let Some(&first) = seen.get(&(left, right)) {
            return Some(MergeFault::Repeats { k, first });
        }
        seen.insert((left, right), k);
        for side in [left, right] {
            let maker = made_by.get(side as usize).copied().unwrap_or(usize::MAX);
            if maker != usize::MAX && maker >= k {
                return Some(MergeFault::Early { k, maker });
            }
        }
    }
    None
}

/// The byte a character of GPT-2's byte-to-unicode alphabet stands for
/// (tokenizer.json files write token bytes in it): printable Latin-1 stands
/// for itself, U+0100 onwards for the other bytes in order; None for any
/// other character.
fn byte_of(c: char) -> Option<u8> {
    const fn printable(b: u32) -> bool {
        matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
    }
    let c = c as u32;
    if printable(c) {
        return Some(c as u8);
    }
    let n = c.checked_sub(0x100)?;
    // The n-th byte (in byte order) that is not printable.
    (0..=255u32)
        .filter(|&b| !printable(b))
        .nth(n as usize)
        .map(|b| b as u8)
}

/// The character of each byte in GPT-2's byte-to-unicode alphabet.
pub fn byte_level_chars() -> [char; 256] {
    let mut chars = ['\0'; 256];
    for (c, b) in byte_level_alphabet() {
        chars[usize::from(b)] = c;
    }
    chars
}

/// The bytes a byte-level string stands for; None if a character is not in
/// the alphabet.
pub fn from_byte_level(text: &str, table: &FxHashMap<char, u8>) -> Option<Vec<u8>> {
    text.chars().map(|c| table.get(&c).copied()).collect()
}

/// Character -> byte of GPT-2's byte-to-unicode alphabet.
pub fn byte_level_alphabet() -> FxHashMap<char, u8> {
    (0..0x200u32)
        .filter_map(|c| {
            let c = char::from_u32(c)?;
            Some((c, byte_of(c)?))
        })
        .collect()
}

/// The tables of a tokenizer.json's BPE model: `texts[k]` (byte-level) has
/// id `ids[k]`; ids in `specials` are special tokens' (their entries are
/// left None); merges name two tokens each. Returns the bytes of each id
/// (None for specials and gaps) and the merges as id pairs. Ids must be
/// checked (in proportion to the tokens) before: the table has max + 1 ids.
/// Errors: a text not in the alphabet, two tokens with one id, a merge
/// naming a token not in the vocabulary.
pub fn byte_level_tables(
    texts: &[&str],
    ids: &[u32],
    specials: &FxHashSet<u32>,
    merges: &[(&str, &str)],
) -> Result<(ByteTable, Vec<(u32, u32)>)> {
    let alphabet = byte_level_alphabet();
    let fault = |what: String| Error::Vocabulary(what);
    // A special token listed in the model's vocabulary (as tokenizers wants
    // it, to keep its id) is no model token: the table ends at the last of those.
    let size = ids
        .iter()
        .filter(|id| !specials.contains(id))
        .max()
        .map_or(0, |&m| m as usize + 1);
    let decoded: Vec<Option<Vec<u8>>> = texts
        .par_iter()
        .zip(ids)
        .map(|(text, id)| {
            if specials.contains(id) {
                return Ok(None);
            }
            from_byte_level(text, &alphabet)
                .map(Some)
                .ok_or_else(|| fault(format!("token {text:?} is not byte-level")))
        })
        .collect::<Result<_>>()?;
    let mut vocab: ByteTable = vec![None; size];
    for (value, &id) in decoded.into_iter().zip(ids) {
        if let Some(value) = value {
            if vocab[id as usize].replace(value).is_some() {
                return Err(fault(format!("two tokens have id {id}")));
            }
        }
    }
    let mut index: FxHashMap<&str, u32> = FxHashMap::default();
    index.reserve(texts.len());
    index.extend(texts.iter().copied().zip(ids.iter().copied()));
    let merges = merges
        .par_iter()
        .enumerate()
        .map(
            |(k, (left, right))| match (index.get(left), index.get(right)) {
                (Some(&a), Some(&b)) => Ok((a, b)),
                _ => Err(fault(format!(
                    "merge {k} names a token not in the vocabulary"
                ))),
            },
        )
        .collect::<Result<_>>()?;
    Ok((vocab, merges))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(tokens: &[&[u8]]) -> Vec<Option<&'static [u8]>> {
        tokens
            .iter()
            .map(|t| Some(&*Box::leak(t.to_vec().into_boxed_slice())))
            .collect()
    }

    fn bytes_then(extra: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        v.extend(extra.iter().map(|t| t.to_vec()));
        v
    }

    #[test]
    fn parses_the_canonical_form() {
        let vocab = parse_tiktoken(b"QQ== 1\nQg== 0\nQUI= 3\n").unwrap();
        assert_eq!(
            vocab,
            vec![
                Some(b"B".to_vec()),
                Some(b"A".to_vec()),
                None,
                Some(b"AB".to_vec())
            ]
        );
        assert!(parse_tiktoken(b"QQ== 0").is_ok());
    }

    #[test]
    fn refuses_what_is_not_canonical_or_not_consistent() {
        for bad in [
            &b""[..],
            b"\n",
            b"QQ== 0\n\nQg== 1\n",
            b"QQ==  0\n",
            b"QQ==\t0\n",
            b"QQ== 0\r\n",
            b"QQ 0\n",
            b"QR== 0\n",
            b"QQ== -1\n",
            b"QQ== x\n",
            b"QQ== 0\nQQ== 1\n",
            b"QQ== 0\nQg== 0\n",
            b"QQ== 1026\n",
            b"QQ== 99999999999\n",
        ] {
            assert!(parse_tiktoken(bad).is_err(), "{bad:?}");
        }
        assert!(parse_tiktoken(b"QQ== 1025\n").is_ok());
    }

    #[test]
    fn derives_one_merge_per_token_split_in_two() {
        let owned = bytes_then(&[b"ab", b"bc", b"abc", b"abcd", b"cd"]);
        let vocab: Vec<Option<&[u8]>> = owned.iter().map(|v| Some(&v[..])).collect();
        let (a, b, c, d) = (97, 98, 99, 100);
        // "abc": "ab" (256) then "c"; "abcd" splits into "abc" "d" (its own
        // rank 259 is not below it; "cd" is above); "cd" into c, d.
        let derived = derive_merges(&vocab, &Default::default()).unwrap();
        assert_eq!(
            derived.merges,
            vec![(a, b), (b, c), (256, c), (258, d), (c, d)]
        );
        assert_eq!(derived.merge_ids, vec![256, 257, 258, 259, 260]);
        assert_eq!(derived.byte_ids, Some((0..256).collect()));
    }

    #[test]
    fn a_token_in_three_parts_gets_no_merge() {
        let owned = bytes_then(&[b"abc"]);
        let vocab: Vec<Option<&[u8]>> = owned.iter().map(|v| Some(&v[..])).collect();
        assert_eq!(
            derive_merges(&vocab, &Default::default()).unwrap().merges,
            vec![]
        );
    }

    #[test]
    fn a_token_of_bytes_that_are_no_tokens_gets_no_merge() {
        let vocab: Vec<Option<&[u8]>> = vec![Some(b"ab"), Some(b"a")];
        let derived = derive_merges(&vocab, &Default::default()).unwrap();
        assert_eq!(derived.merges, vec![]);
        assert_eq!(derived.byte_ids, None);
    }

    #[test]
    fn equal_pairs_merge_leftmost_first() {
        // "aaa": "aa" at 0 or at 1; the leftmost wins, leaving "aa" "a".
        let owned = bytes_then(&[b"aa", b"aaa"]);
        let vocab: Vec<Option<&[u8]>> = owned.iter().map(|v| Some(&v[..])).collect();
        assert_eq!(
            derive_merges(&vocab, &Default::default()).unwrap().merges,
            vec![(97, 97), (256, 97)]
        );
        assert_eq!(
            derive_merges(&vocab[1..], &Default::default())
                .unwrap()
                .byte_ids,
            None
        );
    }

    /// The parts of `token` by BPE over the ranks below `max_rank` of
    /// `vocab`, by the long path (or the short one), and the work it took.
    fn parts(
        vocab: &[Option<&[u8]>],
        token: &[u8],
        max_rank: u32,
        long: bool,
    ) -> (Vec<usize>, usize) {
        let index = Index::new(vocab).unwrap();
        let mut starts = Vec::new();
        WORK.with(|w| w.set(0));
        if long {
            assert!(bpe_parts_long(
                &index,
                token,
                max_rank,
                &mut starts,
                &AtomicBool::new(false)
            ));
        } else {
            bpe_parts_short(&index, token, max_rank, &mut starts, &mut Vec::new());
        }
        (starts, WORK.with(|w| w.get()))
    }

    /// Byte tokens, then "ab", "abab", ... doubling up to `n` bytes: what
    /// training on one long run of "ab" learns.
    fn doubling(n: usize) -> Vec<Vec<u8>> {
        let mut v = bytes_then(&[]);
        let mut len = 2;
        while len <= n {
            v.push(b"ab".repeat(len / 2));
            len *= 2;
        }
        v
    }

    #[test]
    fn a_long_token_splits_in_near_linear_work() {
        // 64 kB of "ab": the rescanning loop scans every pair for each of
        // its 32k merges (2 * 10^9 steps); the long path about 20 a byte.
        let owned = doubling(1 << 16);
        let vocab: Vec<Option<&[u8]>> = owned.iter().map(|v| Some(&v[..])).collect();
        let token = owned.last().unwrap();
        let (starts, steps) = parts(&vocab, token, owned.len() as u32 - 1, true);
        assert_eq!(starts, vec![0, 1 << 15]);
        assert!(
            steps < 64 * token.len(),
            "{steps} steps for {} bytes",
            token.len()
        );
        let derived = derive_merges(&vocab, &AtomicBool::new(false)).unwrap();
        assert_eq!(
            derived.merges.last(),
            Some(&(owned.len() as u32 - 2, owned.len() as u32 - 2))
        );
    }

    #[test]
    fn the_long_path_splits_as_the_short_one() {
        // Random tokens over a few letters, and long words of them: their
        // parts by each path, under every rank limit the derivation uses.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..40 {
            let letters = 2 + next(3) as u8;
            let mut owned = bytes_then(&[]);
            let mut seen: FxHashSet<Vec<u8>> = owned.iter().cloned().collect();
            while owned.len() < 256 + 60 {
                let len = 2 + next(if round % 2 == 0 { 4 } else { 12 }) as usize;
                let t: Vec<u8> = (0..len)
                    .map(|_| b'a' + next(u64::from(letters)) as u8)
                    .collect();
                if seen.insert(t.clone()) {
                    owned.push(t);
                }
            }
            let vocab: Vec<Option<&[u8]>> = owned.iter().map(|v| Some(&v[..])).collect();
            for _ in 0..10 {
                let len = 1 + next(200) as usize;
                let word: Vec<u8> = (0..len)
                    .map(|_| b'a' + next(u64::from(letters)) as u8)
                    .collect();
                let max_rank = next(owned.len() as u64 + 1) as u32;
                assert_eq!(
                    parts(&vocab, &word, max_rank, true).0,
                    parts(&vocab, &word, max_rank, false).0,
                    "{word:?} below {max_rank}"
                );
            }
        }
    }

    #[test]
    fn a_stop_ends_the_derivation() {
        let owned = doubling(1 << 12);
        let vocab: Vec<Option<&[u8]>> = owned.iter().map(|v| Some(&v[..])).collect();
        assert!(matches!(
            derive_merges(&vocab, &AtomicBool::new(true)),
            Err(Error::Stopped)
        ));
        let index = Index::new(&vocab).unwrap();
        let token = b"ab".repeat(1 << 14);
        let stopped = bpe_parts_long(
            &index,
            &token,
            u32::MAX,
            &mut Vec::new(),
            &AtomicBool::new(true),
        );
        assert!(!stopped);
    }

    #[test]
    fn byte_level_alphabet_is_gpt2s() {
        let alphabet = byte_level_alphabet();
        assert_eq!(alphabet.len(), 256);
        assert_eq!(from_byte_level("Ġthe", &alphabet), Some(b" the".to_vec()));
        assert_eq!(from_byte_level("Ċ", &alphabet), Some(b"\n".to_vec()));
        assert_eq!(from_byte_level("\u{143}", &alphabet), Some(vec![0xAD]));
        assert_eq!(from_byte_level("", &alphabet), Some(vec![]));
        for bad in [" ", "\n", "\u{144}", "\u{AD}", "é\u{7F}"] {
            assert_eq!(from_byte_level(bad, &alphabet), None, "{bad:?}");
        }
    }

    #[test]
    fn byte_level_tables_of_a_model() {
        let specials: FxHashSet<u32> = [3].into_iter().collect();
        let (vocab, merges) = byte_level_tables(
            &["a", "Ġ", "Ġa", "<s>"],
            &[0, 1, 2, 3],
            &specials,
            &[("Ġ", "a")],
        )
        .unwrap();
        // The special token's entry is no model token: the table ends before it.
        assert_eq!(
            vocab,
            vec![
                Some(b"a".to_vec()),
                Some(b" ".to_vec()),
                Some(b" a".to_vec())
            ]
        );
        assert_eq!(merges, vec![(1, 0)]);
        let none = FxHashSet::default();
        assert!(byte_level_tables(&["a", "b"], &[0, 0], &none, &[]).is_err());
        assert!(byte_level_tables(&["a", " "], &[0, 1], &none, &[]).is_err());
        assert!(byte_level_tables(&["a"], &[0], &none, &[("a", "b")]).is_err());
    }

    #[test]
    fn table_ids_of_a_consistent_table() {
        let owned = bytes_then(&[b"ab"]);
        let mut vocab: Vec<Option<&[u8]>> = owned.iter().map(|v| Some(&v[..])).collect();
        vocab.insert(0, None);
        let (bytes, merges) = table_ids(&vocab, &[(98, 99)]).unwrap();
        assert_eq!(bytes[0], 1);
        assert_eq!(bytes[255], 256);
        assert_eq!(merges, vec![257]);
    }

    #[test]
    fn table_ids_refuses_inconsistent_tables() {
        let owned = bytes_then(&[b"ab"]);
        let vocab: Vec<Option<&[u8]>> = owned.iter().map(|v| Some(&v[..])).collect();
        assert!(table_ids(&vocab, &[(97, 99)]).is_err());
        assert!(table_ids(&vocab, &[(97, 9999)]).is_err());
        assert!(table_ids(&vocab[1..], &[]).is_err());
        let twice = table(&[b"x", b"x"]);
        assert!(table_ids(&twice, &[]).is_err());
    }

    #[test]
    fn every_split_lists_each_tokens_splits_by_their_parts_ranks() {
        // "aaa" (258) ranked after "aa" (256) and "aaaa" (257) before "aaa".
        let owned = bytes_then(&[b"aa", b"aaaa", b"aaa"]);
        let vocab: Vec<Option<&[u8]>> = owned.iter().map(|v| Some(&v[..])).collect();
        let splits = every_split(&vocab).unwrap();
        assert_eq!(
            splits,
            vec![
                (97, 97),
                (97, 258),
                (256, 256),
                (258, 97),
                (97, 256),
                (256, 97)
            ]
        );
        let converted = Imported::from_table(owned.iter().cloned().map(Some).collect(), splits)
            .unwrap()
            .as_ranks(&AtomicBool::new(false))
            .unwrap()
            .unwrap();
        // The merges a ranks file implies: one a token.
        assert_eq!(converted.merges, vec![(97, 97), (256, 256), (256, 97)]);
        assert_eq!(converted.merge_ids, vec![256, 257, 258]);
        let trained = Imported::from_table(
            owned.iter().cloned().map(Some).collect(),
            vec![(97, 97), (256, 256), (256, 97)],
        )
        .unwrap();
        assert!(trained.as_ranks(&AtomicBool::new(false)).unwrap().is_none());
    }
}
