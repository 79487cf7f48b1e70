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
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

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
}

impl<'a> Index<'a> {
    /// An error when two ids have the same bytes.
    fn new(vocab: &[Option<&'a [u8]>]) -> Result<Self> {
        let mut index = Index {
            pairs: vec![u32::MAX; 1 << 16],
            short: FxHashMap::default(),
            long: FxHashMap::default(),
        };
        index.short.reserve(vocab.len());
        for (i, v) in vocab.iter().enumerate() {
            let Some(v) = *v else { continue };
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
        self.find(bytes).unwrap_or(u32::MAX)
    }
}

/// tiktoken's merging of `token`'s bytes using only ranks below `max_rank`:
/// repeatedly join the adjacent pair whose bytes have the lowest rank (the
/// leftmost of equal ones). Leaves in `starts` where the parts begin;
/// `pair_ranks` is scratch.
fn bpe_parts(
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
/// r (None: no token).
pub fn derive_merges(vocab: &[Option<&[u8]>]) -> Result<Derived> {
    let ranks = Index::new(vocab)?;
    let found: Vec<Option<(u32, u32)>> = vocab
        .par_iter()
        .enumerate()
        .map_init(
            || (Vec::new(), Vec::new()),
            |(starts, scratch), (rank, token)| match token {
                Some(token) if token.len() > 1 => {
                    bpe_parts(&ranks, token, rank as u32, starts, scratch);
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
    /// merges its ranks imply (`derive_merges`).
    pub fn from_tiktoken(data: &[u8]) -> Result<Self> {
        let tokens = parse_tiktoken(data)?;
        let derived = derive_merges(&views(&tokens))?;
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
        let derived = derive_merges(&vocab).unwrap();
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
        assert_eq!(derive_merges(&vocab).unwrap().merges, vec![]);
    }

    #[test]
    fn a_token_of_bytes_that_are_no_tokens_gets_no_merge() {
        let vocab: Vec<Option<&[u8]>> = vec![Some(b"ab"), Some(b"a")];
        let derived = derive_merges(&vocab).unwrap();
        assert_eq!(derived.merges, vec![]);
        assert_eq!(derived.byte_ids, None);
    }

    #[test]
    fn equal_pairs_merge_leftmost_first() {
        // "aaa": "aa" at 0 or at 1; the leftmost wins, leaving "aa" "a".
        let owned = bytes_then(&[b"aa", b"aaa"]);
        let vocab: Vec<Option<&[u8]>> = owned.iter().map(|v| Some(&v[..])).collect();
        assert_eq!(
            derive_merges(&vocab).unwrap().merges,
            vec![(97, 97), (256, 97)]
        );
        assert_eq!(derive_merges(&vocab[1..]).unwrap().byte_ids, None);
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
}
