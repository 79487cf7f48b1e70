//! Unicode NFC as Hugging Face tokenizers applies it (its `NFC` normalizer):
//! by the same crate, and so the same tables (Unicode 9). Newer tables (Arrow's
//! utf8proc, Python's unicodedata) order and compose marks that Unicode 9 did
//! not know, and a tokenizer.json with an NFC normalizer then gave other ids
//! than tokenizers on text holding them.

use unicode_normalization_alignments::UnicodeNormalization;

/// The NFC form of each of `docs`, as a large_string array's offsets and data.
pub fn nfc_all(docs: &[&str]) -> (Vec<i64>, Vec<u8>) {
    let mut offsets = Vec::with_capacity(docs.len() + 1);
    let mut data = Vec::with_capacity(docs.iter().map(|d| d.len()).sum());
    offsets.push(0);
    let mut utf8 = [0u8; 4];
    for doc in docs {
        if doc.is_ascii() {
            data.extend_from_slice(doc.as_bytes()); // NFC leaves ASCII as it is
        } else {
            for (c, _) in doc.nfc() {
                data.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            }
        }
        offsets.push(data.len() as i64);
    }
    (offsets, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composes_as_unicode_9_does() {
        let (offsets, data) = nfc_all(&["e\u{301}", "abc", "a\u{c3c}\u{301}"]);
        assert_eq!(offsets, vec![0, 2, 5, 11]);
        assert_eq!(&data[..2], "é".as_bytes());
        // U+0C3C (Telugu nukta, Unicode 14) has no class in Unicode 9's tables:
        // not reordered after U+0301, as newer tables would.
        assert_eq!(std::str::from_utf8(&data[5..]).unwrap(), "a\u{c3c}\u{301}");
    }
}
