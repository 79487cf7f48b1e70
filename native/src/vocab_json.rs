//! The big parts of tokenizer files as JSON: a Hugging Face tokenizer.json's
//! model vocab and merges read (everything else of the file is small, and
//! Python reads it), and a tokenmill file's vocab and merges written (the
//! text the file's sha256 is taken of). A 200k-token vocabulary is 400k
//! strings: in Python, parsing or writing them is most of loading one.
//!
//! Like `vocab`, this accepts only what the Python reader accepts, with its
//! results; anything else is an error, and the Python side then reads the
//! file itself, naming the fault.

use crate::error::{Error, Result};
use crate::train::Pair;
use crate::vocab::{self, ByteTable, Imported};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::fmt;
use std::ops::Range;

fn fault(what: &str) -> Error {
    Error::Vocabulary(format!("tokenizer.json: {what}"))
}

/// Strings end to end in one buffer: one allocation, not one per string.
#[derive(Default)]
pub struct Strings {
    text: String,
    ends: Vec<usize>,
}

impl Strings {
    fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(self.text.len());
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }
}

/// A tokenizer.json's `model.vocab` and `model.merges`: `texts[k]` has id
/// `ids[k]`; merge k names `names[2k]` and `names[2k + 1]`.
#[derive(Default)]
pub struct Model {
    pub texts: Strings,
    pub ids: Vec<u32>,
    pub names: Strings,
}

/// The document's keys that matter here, each a raw span of the file.
#[derive(Deserialize)]
struct Document<'a> {
    #[serde(borrow)]
    model: ModelSpans<'a>,
}

#[derive(Deserialize)]
struct ModelSpans<'a> {
    #[serde(borrow)]
    vocab: &'a RawValue,
    #[serde(borrow, default)]
    merges: Option<&'a RawValue>,
}

/// (the model's vocab and merges, the file with them left out: `{}` and
/// `[]` in their place). An error for a file that is not UTF-8 JSON with
/// an object `model.vocab` of token -> integer id (each token once) and a
/// list `model.merges` of "left right" strings or [left, right] pairs, or
/// that names a key twice (Python keeps the last; this keeps none).
pub fn split_model(data: &[u8]) -> Result<(Model, Vec<u8>)> {
    let text = std::str::from_utf8(data).map_err(|_| fault("not UTF-8"))?;
    let doc: Document = serde_json::from_str(text).map_err(|e| fault(&e.to_string()))?;
    let mut model = Model::default();
    let json = |e: serde_json::Error| fault(&e.to_string());
    let mut de = serde_json::Deserializer::from_str(doc.model.vocab.get());
    VocabSeed(&mut model).deserialize(&mut de).map_err(json)?;
    let mut spans = vec![(span(text, doc.model.vocab), &b"{}"[..])];
    if let Some(merges) = doc.model.merges {
        let mut de = serde_json::Deserializer::from_str(merges.get());
        MergesSeed(&mut model.names)
            .deserialize(&mut de)
            .map_err(json)?;
        spans.push((span(text, merges), &b"[]"[..]));
    }
    spans.sort_by_key(|(s, _)| s.start);
    let mut rest = Vec::new();
    let mut at = 0;
    for (s, empty) in spans {
        rest.extend_from_slice(&data[at..s.start]);
        rest.extend_from_slice(empty);
        at = s.end;
    }
    rest.extend_from_slice(&data[at..]);
    Ok((model, rest))
}

/// A tokenmill file's merges, the one big key of the file.
#[derive(Deserialize)]
struct OwnFile<'a> {
    #[serde(borrow)]
    merges: &'a RawValue,
}

/// (a tokenmill file's `merges`, the file with `[]` in their place). An
/// error for a file that is not UTF-8 JSON with a list `merges` of
/// [left, right] pairs of ids that u32 holds, or that names a key twice
/// (the Python reader then reads it, and names any fault).
pub fn split_merges(data: &[u8]) -> Result<(Vec<Pair>, Vec<u8>)> {
    let fault = |what: &str| Error::Vocabulary(format!("tokenizer file: {what}"));
    let text = std::str::from_utf8(data).map_err(|_| fault("not UTF-8"))?;
    let doc: OwnFile = serde_json::from_str(text).map_err(|e| fault(&e.to_string()))?;
    let merges: Vec<Pair> =
        serde_json::from_str(doc.merges.get()).map_err(|e| fault(&e.to_string()))?;
    let at = span(text, doc.merges);
    let mut rest = Vec::with_capacity(data.len() - at.len() + 2);
    rest.extend_from_slice(&data[..at.start]);
    rest.extend_from_slice(b"[]");
    rest.extend_from_slice(&data[at.end..]);
    Ok((merges, rest))
}

/// Where a raw value borrowed from `text` lies in it.
fn span(text: &str, raw: &RawValue) -> Range<usize> {
    let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
    start..start + raw.get().len()
}

impl Model {
    /// The number of entries of the model's vocabulary, and the id of each of
    /// `texts` there (None where it is not an entry).
    pub fn lookup(&self, texts: &[String]) -> (usize, Vec<Option<u32>>) {
        let wanted: FxHashMap<&str, usize> = texts
            .iter()
            .enumerate()
            .map(|(k, t)| (t.as_str(), k))
            .collect();
        let mut found = vec![None; texts.len()];
        for (k, &id) in self.ids.iter().enumerate() {
            if let Some(&j) = wanted.get(self.texts.get(k)) {
                found[j] = Some(id);
            }
        }
        (self.texts.len(), found)
    }

    /// The table and merges of the model, given the added (special)
    /// tokens' ids, as the Python reader builds them: ids in proportion to
    /// the tokens, the entries of special ids left empty, every text in
    /// the byte-level alphabet, every merge naming two tokens; then each
    /// byte's id and each merge's (`Imported::from_table`).
    pub fn imported(&self, special_ids: &[u32]) -> Result<Imported> {
        let every: FxHashSet<u32> = self.ids.iter().chain(special_ids).copied().collect();
        if let Some(&top) = every.iter().max() {
            if u64::from(top) >= vocab::id_limit(every.len()) {
                return Err(fault("ids out of proportion to the tokens"));
            }
        }
        let texts: Vec<&str> = (0..self.texts.len()).map(|k| self.texts.get(k)).collect();
        let merges: Vec<(&str, &str)> = (0..self.names.len() / 2)
            .map(|k| (self.names.get(2 * k), self.names.get(2 * k + 1)))
            .collect();
        let specials = special_ids.iter().copied().collect();
        let (tokens, merges) = vocab::byte_level_tables(&texts, &self.ids, &specials, &merges)?;
        Imported::from_table(tokens, merges)
    }
}

/// Pushes a JSON string onto `Strings`, escapes resolved.
struct StrSeed<'a>(&'a mut Strings);

impl<'de> DeserializeSeed<'de> for StrSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for StrSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<(), E> {
        self.0.push(s);
        Ok(())
    }
}

/// An id: a JSON integer that u32 holds (not 1.0, not true: Python's
/// reader wants an int).
struct Id;

impl Visitor<'_> for Id {
    type Value = u32;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer id")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<u32, E> {
        u32::try_from(v).map_err(|_| E::custom("id beyond u32"))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<u32, E> {
        u32::try_from(v).map_err(|_| E::custom("negative id"))
    }
}

/// `model.vocab`: {token: id}, each token once.
struct VocabSeed<'a>(&'a mut Model);

impl<'de> DeserializeSeed<'de> for VocabSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for VocabSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of token -> id")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        let model = self.0;
        while map.next_key_seed(StrSeed(&mut model.texts))?.is_some() {
            struct IdSeed;
            impl<'de> DeserializeSeed<'de> for IdSeed {
                type Value = u32;
                fn deserialize<D: Deserializer<'de>>(
                    self,
                    d: D,
                ) -> std::result::Result<u32, D::Error> {
                    d.deserialize_u64(Id)
                }
            }
            model.ids.push(map.next_value_seed(IdSeed)?);
        }
        // Python's dict would keep one entry of a token named twice.
        let mut seen: FxHashSet<&str> = FxHashSet::default();
        seen.reserve(model.texts.len());
        for k in 0..model.texts.len() {
            if !seen.insert(model.texts.get(k)) {
                return Err(de::Error::custom("a token is listed twice"));
            }
        }
        Ok(())
    }
}

/// `model.merges`: "left right" strings (one space) or [left, right] pairs.
struct MergesSeed<'a>(&'a mut Strings);

impl<'de> DeserializeSeed<'de> for MergesSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for MergesSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of merges")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        while seq.next_element_seed(MergeSeed(&mut *self.0))?.is_some() {}
        Ok(())
    }
}

struct MergeSeed<'a>(&'a mut Strings);

impl<'de> DeserializeSeed<'de> for MergeSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MergeSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("\"left right\" or [left, right]")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<(), E> {
        let mut parts = s.split(' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(left), Some(right), None) => {
                self.0.push(left);
                self.0.push(right);
                Ok(())
            }
            _ => Err(E::custom("a merge is two tokens and one space")),
        }
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        let two = seq.next_element_seed(StrSeed(&mut *self.0))?.is_some()
            && seq.next_element_seed(StrSeed(&mut *self.0))?.is_some()
            && seq.next_element::<IgnoredAny>()?.is_none();
        if !two {
            return Err(de::Error::custom("a merge is a pair of tokens"));
        }
        Ok(())
    }
}

/// `"vocab":[...],"merges":[[a,b],...]` of a tokenmill file, byte for byte
/// as Python's `json.dumps(..., ensure_ascii=False, separators=(",", ":"))`
/// writes them: each token in GPT-2's byte-level alphabet, None as null.
pub fn write_tables(tokens: &ByteTable, merges: &[(u32, u32)]) -> String {
    let chars = vocab::byte_level_chars();
    let mut out = String::with_capacity(tokens.len() * 12 + merges.len() * 16);
    out.push_str("\"vocab\":[");
    for (i, token) in tokens.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match token {
            None => out.push_str("null"),
            Some(bytes) => {
                out.push('"');
                for &b in bytes {
                    // The alphabet has no control character: only these two
                    // of json.dumps's escapes can occur.
                    match chars[usize::from(b)] {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
        }
    }
    out.push_str("],\"merges\":");
    write_merges(&mut out, merges);
    out
}

/// `[[a,b],...]`, as `json.dumps(..., separators=(",", ":"))` writes a list
/// of id pairs: a trained tokenizer's file is its header and this.
pub fn write_merges(out: &mut String, merges: &[(u32, u32)]) {
    use std::fmt::Write;
    out.reserve(merges.len() * 14 + 2);
    out.push('[');
    for (k, (a, b)) in merges.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        // Writing to a String cannot fail.
        let _ = write!(out, "[{a},{b}]");
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_the_merges_out_of_a_tokenmill_file() {
        let data = br#"{"format": "tokenmill", "merges": [[97, 98], [256, 99]], "x": [1]}"#;
        let (merges, rest) = split_merges(data).unwrap();
        assert_eq!(merges, vec![(97, 98), (256, 99)]);
        let rest = std::str::from_utf8(&rest).unwrap();
        assert_eq!(rest, r#"{"format": "tokenmill", "merges": [], "x": [1]}"#);
        for bad in [
            &br#"{"merges": [[97, 98]], "merges": []}"#[..],
            br#"{"merges": [[97.0, 98]]}"#,
            br#"{"merges": [[true, 98]]}"#,
            br#"{"merges": [[-1, 98]]}"#,
            br#"{"merges": [[4294967296, 98]]}"#,
            br#"{"merges": [[97, 98, 99]]}"#,
            br#"{"merges": [[97]]}"#,
            br#"{"vocab": []}"#,
            br#"[[97, 98]]"#,
        ] {
            assert!(
                split_merges(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn splits_the_model_out_of_the_file() {
        let data = br#"{"a": 1, "model": {"type": "BPE", "merges": ["a b", ["a", "\u0120"]], "vocab": {"a": 0, "b": 1, "\u0120": 2}}}"#;
        let (model, rest) = split_model(data).unwrap();
        assert_eq!(
            std::str::from_utf8(&rest).unwrap(),
            r#"{"a": 1, "model": {"type": "BPE", "merges": [], "vocab": {}}}"#
        );
        assert_eq!(model.ids, vec![0, 1, 2]);
        assert_eq!(model.texts.get(2), "Ġ");
        assert_eq!(
            (0..4).map(|k| model.names.get(k)).collect::<Vec<_>>(),
            ["a", "b", "a", "Ġ"]
        );
    }

    #[test]
    fn refuses_what_python_reads_otherwise() {
        for bad in [
            &br#"{"model": {"vocab": {"a": 0, "a": 1}}}"#[..],
            br#"{"model": {"vocab": {"a": 0}}, "model": {"vocab": {"a": 0}}}"#,
            br#"{"model": {"vocab": {"a": 1.0}}}"#,
            br#"{"model": {"vocab": {"a": true}}}"#,
            br#"{"model": {"vocab": {"a": -1}}}"#,
            br#"{"model": {"vocab": {"a": 4294967296}}}"#,
            br#"{"model": {"vocab": {"a": 0}, "merges": ["a  a"]}}"#,
            br#"{"model": {"vocab": {"a": 0}, "merges": [["a"]]}}"#,
            br#"{"model": {"vocab": {"a": 0}, "merges": [["a", "a", "a"]]}}"#,
            br#"{"model": {"vocab": {"a": 0}, "merges": [1]}}"#,
            br#"{"model": {"vocab": ["a"]}}"#,
            br#"{"model": {}}"#,
            br#"{"vocab": {"a": 0}}"#,
            br#"{"model": {"vocab": {"a": 0}}} x"#,
            br#"{"model": {"vocab": {"\ud800": 0}}}"#,
            b"\xef\xbb\xbf{\"model\": {\"vocab\": {}}}",
            b"{\"model\": {\"vocab\": {\"\xff\": 0}}}",
        ] {
            assert!(
                split_model(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn builds_the_table_of_a_model() {
        let mut json = String::from(r#"{"model": {"vocab": {"#);
        for b in 0..=255u8 {
            let c = vocab::byte_level_chars()[usize::from(b)];
            json.push_str(&format!("{:?}: {b}, ", c.to_string()));
        }
        json.push_str(r#""ab": 256}, "merges": ["a b"]}}"#);
        let (model, _) = split_model(json.as_bytes()).unwrap();
        let imported = model.imported(&[257]).unwrap();
        assert_eq!(imported.tokens[256], Some(b"ab".to_vec()));
        assert_eq!(imported.merges, vec![(97, 98)]);
        assert_eq!(imported.merge_ids, vec![256]);
        // Ids beyond what 257 tokens number.
        assert!(model.imported(&[2000]).is_err());
    }

    #[test]
    fn writes_tables_as_python_json_does() {
        let tokens: ByteTable = vec![Some(b" \"\\a".to_vec()), None, Some(vec![0xff])];
        assert_eq!(
            write_tables(&tokens, &[(0, 2), (2, 0)]),
            r#""vocab":["Ġ\"\\a",null,"ÿ"],"merges":[[0,2],[2,0]]"#
        );
    }
}
