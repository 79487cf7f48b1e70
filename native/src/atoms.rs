//! Characters that byte-level BPE provably forms whole before anything else
//! touches their bytes, so encoding may start from them as single symbols:
//! a cold Cyrillic or CJK word then starts from a third to a half as many
//! symbols, and most of its merges and lookups are gone. (The idea is
//! fastokens' "char atoms", here without its cutting of words into
//! segments or its merge table of atoms alone.)
//!
//! A multi-byte character `c` that is a token may start as one symbol
//! where it occurs when
//! 1. BPE over `c`'s bytes alone yields `[c]`;
//! 2. every merge forming it ranks before every merge that has `c` as an
//!    operand;
//! 3. no token holds a proper part of this occurrence of `c` together with
//!    the bytes beside it: no token is the bytes before `c` (some of them)
//!    then a proper prefix of `c`, or a proper suffix of `c` then the bytes
//!    after it (some of them). Only the tokens merges make count.
//!
//! By 3, no merge crosses `c`'s boundaries while `c` is in pieces (its
//! product would be such a token), so `c`'s own merges run as they would
//! alone and commute with every other merge; by 1 they make `[c]`; by 2 no
//! merge using `c` is due before they are all done, and each merge between
//! them ranks below theirs, so it is the merge the pre-formed word takes
//! too. So the merges, hence the ids, are the same as from `c`'s bytes.
//! (DESIGN.md has the longer argument.)
//!
//! Condition 3 is checked per occurrence, since a vocabulary nearly always
//! has tokens such as " \xd0" (a space and a Cyrillic lead byte): `c` after
//! a space is not pre-formed, `c` inside a word is.

use crate::train::Pair;
use rustc_hash::FxHashMap;

const NONE: u32 = u32::MAX;

/// An atom: its token id and which `Rule` guards its boundaries.
#[derive(Clone, Copy)]
struct Entry {
    id: u32,
    rule: u32,
}

const NO_ENTRY: Entry = Entry { id: NONE, rule: 0 };

/// The tokens that could hold part of a character with its neighbours:
/// `heads`, bytes that, right before it, complete such a token; `tails`,
/// bytes that do so right after it. The bit sets hold the heads' last bytes
/// and the tails' first, so nearly every occurrence is cleared by one test.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
struct Rule {
    before: [u64; 4],
    after: [u64; 4],
    heads: Vec<Box<[u8]>>,
    tails: Vec<Box<[u8]>>,
}

fn has(bits: &[u64; 4], b: u8) -> bool {
    bits[usize::from(b >> 6)] >> (b & 63) & 1 == 1
}

fn set(bits: &mut [u64; 4], b: u8) {
    bits[usize::from(b >> 6)] |= 1 << (b & 63);
}

impl Rule {
    /// Whether the character at `word[start..end]` may start whole.
    #[inline(always)]
    fn allows(&self, word: &[u8], start: usize, end: usize) -> bool {
        let (left, right) = (&word[..start], &word[end..]);
        let blocked_left = left.last().is_some_and(|&b| has(&self.before, b))
            && self.heads.iter().any(|h| left.ends_with(h));
        let blocked_right = right.first().is_some_and(|&b| has(&self.after, b))
            && self.tails.iter().any(|t| right.starts_with(t));
        !(blocked_left || blocked_right)
    }
}

/// Code point -> atom, and the rules guarding them.
pub struct Atoms {
    /// The Basic Multilingual Plane, one load per character.
    bmp: Box<[Entry]>,
    astral: FxHashMap<char, Entry>,
    /// `rules[0]` is empty: nothing can cross the character.
    rules: Vec<Rule>,
}

impl Atoms {
    /// How many characters have an atom (a scan of the whole table: for tests).
    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.bmp.iter().filter(|e| e.id != NONE).count() + self.astral.len()
    }

    /// The atom of the character `c` at `word[start..]`, if it has one and
    /// may start whole there.
    #[inline(always)]
    pub fn at(&self, word: &[u8], start: usize, c: char) -> Option<u32> {
        let e = match self.bmp.get(c as usize) {
            Some(&e) => e,
            None => *self.astral.get(&c)?,
        };
        if e.id == NONE {
            return None;
        }
        let allowed =
            e.rule == 0 || self.rules[e.rule as usize].allows(word, start, start + c.len_utf8());
        allowed.then_some(e.id)
    }

    /// The atoms of a byte-level vocabulary given as each byte's id and its
    /// merges in rank order (`(pair, id it makes)`); `index` maps each
    /// merge's pair to its (rank, id). None when it has none.
    pub fn build(
        byte_ids: &[u32; 256],
        merges: &[(Pair, u32)],
        index: &FxHashMap<Pair, (u32, u32)>,
    ) -> Option<Atoms> {
        let tokens = TokenBytes::new(byte_ids, merges);
        // Proper prefix of a character -> the bytes before it in a token;
        // proper suffix -> the bytes after it.
        let mut heads: FxHashMap<&[u8], Vec<&[u8]>> = FxHashMap::default();
        let mut tails: FxHashMap<&[u8], Vec<&[u8]>> = FxHashMap::default();
        for &(_, id) in merges {
            let Some(t) = tokens.get(id) else { continue };
            let lead = t.iter().take_while(|&&b| is_continuation(b)).count().min(3);
            if lead > 0 && lead < t.len() {
                tails.entry(&t[..lead]).or_default().push(&t[lead..]);
            }
            if let Some(p) = t.iter().rposition(|&b| !is_continuation(b)) {
                if p > 0 && t.len() - p < utf8_len(t[p]) {
                    heads.entry(&t[p..]).or_default().push(&t[..p]);
                }
            }
        }
        // The first rank at which each token is an operand.
        let mut min_operand = vec![NONE; tokens.spans.len()];
        for (rank, &((a, b), _)) in merges.iter().enumerate().rev() {
            for t in [a, b] {
                if let Some(m) = min_operand.get_mut(t as usize) {
                    *m = rank as u32;
                }
            }
        }
        let mut atoms = Atoms {
            bmp: vec![NO_ENTRY; 0x10000].into_boxed_slice(),
            astral: FxHashMap::default(),
            rules: vec![Rule::default()],
        };
        let mut rule_ids: FxHashMap<Rule, u32> = FxHashMap::default();
        rule_ids.insert(Rule::default(), 0);
        let mut found = false;
        for &(_, id) in merges {
            let Some(bytes) = tokens.get(id) else {
                continue;
            };
            let Some(c) = single_char(bytes) else {
                continue;
            };
            let used = min_operand.get(id as usize).copied().unwrap_or(NONE);
            if !matches!(forms(index, byte_ids, bytes), Some((made, last)) if made == id && last < used)
            {
                continue;
            }
            let mut rule = Rule::default();
            for k in 1..bytes.len() {
                for &h in heads.get(&bytes[..k]).into_iter().flatten() {
                    set(&mut rule.before, h[h.len() - 1]);
                    rule.heads.push(h.into());
                }
                for &t in tails.get(&bytes[k..]).into_iter().flatten() {
                    set(&mut rule.after, t[0]);
                    rule.tails.push(t.into());
                }
            }
            let next = atoms.rules.len() as u32;
            let rule = *rule_ids.entry(rule).or_insert_with_key(|r| {
                atoms.rules.push(r.clone());
                next
            });
            let entry = Entry { id, rule };
            match atoms.bmp.get_mut(c as usize) {
                Some(slot) => *slot = entry,
                None => {
                    atoms.astral.insert(c, entry);
                }
            }
            found = true;
        }
        found.then_some(atoms)
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// The length of the UTF-8 sequence a lead byte starts (1 for anything else).
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

/// The character `bytes` spell, when they are exactly one of 2 to 4 bytes.
fn single_char(bytes: &[u8]) -> Option<char> {
    // Most tokens fail on the lead byte, before any UTF-8 validation.
    let lead = *bytes.first()?;
    if bytes.len() < 2 || utf8_len(lead) != bytes.len() {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.chars().next()
}

/// BPE over `bytes` alone: the one token it makes and the highest rank it
/// used, or None when it makes more than one.
fn forms(
    index: &FxHashMap<Pair, (u32, u32)>,
    byte_ids: &[u32; 256],
    bytes: &[u8],
) -> Option<(u32, u32)> {
    let mut symbols: Vec<u32> = bytes.iter().map(|&b| byte_ids[b as usize]).collect();
    let mut last = 0;
    while symbols.len() > 1 {
        let (at, (rank, id)) = symbols
            .windows(2)
            .enumerate()
            .filter_map(|(i, w)| Some((i, *index.get(&(w[0], w[1]))?)))
            .min_by_key(|&(i, (rank, _))| (rank, i))?;
        symbols[at] = id;
        symbols.remove(at + 1);
        last = last.max(rank);
    }
    Some((symbols[0], last))
}

/// The bytes of every token the merges make, in one buffer.
struct TokenBytes {
    buf: Vec<u8>,
    /// id -> (start, end) in `buf`; (0, 0) for an id with no bytes.
    spans: Vec<(u32, u32)>,
}

impl TokenBytes {
    fn new(byte_ids: &[u32; 256], merges: &[(Pair, u32)]) -> Self {
        let top = (byte_ids.iter().copied())
            .chain(merges.iter().map(|&(_, id)| id))
            .max()
            .unwrap_or(0);
        let mut t = TokenBytes {
            buf: Vec::new(),
            spans: vec![(0, 0); top as usize + 1],
        };
        for (b, &id) in byte_ids.iter().enumerate() {
            t.spans[id as usize] = (t.buf.len() as u32, t.buf.len() as u32 + 1);
            t.buf.push(b as u8);
        }
        for &((a, b), id) in merges {
            let start = t.buf.len();
            for part in [a, b] {
                match t.spans.get(part as usize) {
                    Some(&(s, e)) if e > s => t.buf.extend_from_within(s as usize..e as usize),
                    _ => {
                        t.buf.truncate(start);
                        break;
                    }
                }
            }
            if t.buf.len() > start {
                t.spans[id as usize] = (start as u32, t.buf.len() as u32);
            }
        }
        t
    }

    fn get(&self, id: u32) -> Option<&[u8]> {
        let &(s, e) = self.spans.get(id as usize)?;
        (e > s).then(|| &self.buf[s as usize..e as usize])
    }
}
