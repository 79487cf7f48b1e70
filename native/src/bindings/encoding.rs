//! The encoder: documents to ids, and ids narrowed to 16 bits.

use super::vocabularies::{byte_table, id_pairs, FileMerges, Vocabulary};
use super::*;

/// Applies a trained tokenizer to documents.
#[pyclass(frozen)]
struct Encoder {
    inner: CoreEncoder,
}

/// Merges as the Python side holds them, (left, right) pairs in rank order,
/// with the id each makes: one list of `((left, right), id)`.
fn ranked_merges(
    merges: &Bound<'_, PyList>,
    merge_ids: Vec<u32>,
) -> Result<Vec<(train::Pair, u32)>, Error> {
    let pairs = id_pairs(merges)?;
    if pairs.len() != merge_ids.len() {
        return Err(Error::Vocabulary(format!(
            "{} merges but {} merge ids",
            pairs.len(),
            merge_ids.len()
        )));
    }
    Ok(pairs.into_iter().zip(merge_ids).collect())
}

impl Encoder {
    fn new(
        splitter: Splitter,
        alphabet: Alphabet,
        merges: Vec<(train::Pair, u32)>,
        whole_words: Option<Vec<(Vec<u8>, u32)>>,
    ) -> PyResult<Self> {
        let pretok = splitter.build()?;
        let whole_words =
            whole_words.map(|w| whole_word_map(w.iter().map(|(b, id)| (&b[..], *id))));
        Ok(Encoder {
            inner: CoreEncoder::new(pretok, alphabet, &merges, whole_words),
        })
    }
}

#[pymethods]
impl Encoder {
    /// Byte mode. `pattern`: a preset name or a regex; `merges`: (left,
    /// right) pairs in rank order, making `merge_ids`; `byte_ids`: each
    /// byte's id (default: the byte value); `whole_words`: tokens (bytes, id)
    /// a whole word maps to directly.
    #[staticmethod]
    #[pyo3(signature = (pattern, merges, merge_ids, *, byte_ids=None, whole_words=None))]
    fn byte(
        pattern: &str,
        merges: &Bound<'_, PyList>,
        merge_ids: Vec<u32>,
        byte_ids: Option<Vec<u32>>,
        whole_words: Option<Vec<(Vec<u8>, u32)>>,
    ) -> PyResult<Self> {
        let alphabet = match byte_ids {
            None => Alphabet::identity_bytes(),
            Some(ids) => {
                let ids: [u32; 256] = ids.try_into().map_err(|v: Vec<u32>| {
                    Error::Vocabulary(format!("byte_ids has {} entries, not 256", v.len()))
                })?;
                Alphabet::Bytes { ids: Box::new(ids) }
            }
        };
        let merges = ranked_merges(merges, merge_ids)?;
        Encoder::new(Splitter::Byte { pattern }, alphabet, merges, whole_words)
    }

    /// Byte mode over the merges of a file the core read, merge k making id
    /// `first_id + k`, each byte its own id, no whole-word lookup: what
    /// `byte` builds from that file's merges as Python holds them, built
    /// without the GIL (so while other modules import).
    #[staticmethod]
    fn file_merges(
        py: Python<'_>,
        pattern: &str,
        merges: &Bound<'_, FileMerges>,
        first_id: u32,
    ) -> PyResult<Self> {
        let pairs = &merges.get().pairs;
        let top = u64::from(first_id) + pairs.len() as u64;
        if top > u64::from(u32::MAX) + 1 {
            return Err(Error::Vocabulary(format!("{top} ids do not fit 32 bits")).into());
        }
        let pretok = Splitter::Byte { pattern }.build()?;
        let inner = py.detach(|| {
            let ranked: Vec<(train::Pair, u32)> = (pairs.iter().copied()).zip(first_id..).collect();
            CoreEncoder::new(pretok, Alphabet::identity_bytes(), &ranked, None)
        });
        Ok(Encoder { inner })
    }

    /// Byte mode with an explicit table (an imported vocabulary), taken as
    /// the Python side holds it: `vocab[i]` the bytes of id i (None: a
    /// special token or a gap), `merges` (left, right) pairs in rank order
    /// yielding `merge_ids`, `byte_ids` each byte's id; with `whole_words`,
    /// a word that is a token of `vocab` maps straight to its id. Saves
    /// building 200k tuples in Python for `byte`.
    #[staticmethod]
    #[pyo3(signature = (pattern, vocab, merges, merge_ids, byte_ids, *, whole_words))]
    fn byte_table(
        pattern: &str,
        vocab: &Bound<'_, PyList>,
        merges: &Bound<'_, PyList>,
        merge_ids: Vec<u32>,
        byte_ids: Vec<u32>,
        whole_words: bool,
    ) -> PyResult<Self> {
        let merges = ranked_merges(merges, merge_ids)?;
        let ids: [u32; 256] = byte_ids.try_into().map_err(|v: Vec<u32>| {
            Error::Vocabulary(format!("byte_ids has {} entries, not 256", v.len()))
        })?;
        let words = if whole_words {
            let items: Vec<Bound<'_, PyAny>> = vocab.iter().collect();
            let table = byte_table(&items)?;
            Some(whole_word_map(
                (table.iter().enumerate()).filter_map(|(i, v)| Some((v.as_deref()?, i as u32))),
            ))
        } else {
            None
        };
        Ok(Encoder {
            inner: CoreEncoder::new(
                Splitter::Byte { pattern }.build()?,
                Alphabet::Bytes { ids: Box::new(ids) },
                &merges,
                words,
            ),
        })
    }

    /// Byte mode with a vocabulary the core holds; with `whole_words`, a
    /// word that is one of its tokens maps straight to its id. NativeError
    /// when a byte has no token.
    #[staticmethod]
    #[pyo3(signature = (pattern, vocabulary, *, whole_words))]
    fn from_vocabulary(
        py: Python<'_>,
        pattern: &str,
        vocabulary: &Bound<'_, Vocabulary>,
        whole_words: bool,
    ) -> PyResult<Self> {
        let v = &vocabulary.get().inner;
        let ids: [u32; 256] = v
            .byte_ids
            .clone()
            .and_then(|ids| ids.try_into().ok())
            .ok_or_else(|| Error::Vocabulary("a byte has no token".into()))?;
        let pretok = Splitter::Byte { pattern }.build()?;
        let inner = py.detach(|| {
            let merges: Vec<((u32, u32), u32)> = v
                .merges
                .iter()
                .copied()
                .zip(v.merge_ids.iter().copied())
                .collect();
            let words = whole_words.then(|| {
                whole_word_map(
                    (v.tokens.iter().enumerate())
                        .filter_map(|(i, t)| Some((&t.as_ref()?[..], i as u32))),
                )
            });
            CoreEncoder::new(
                pretok,
                Alphabet::Bytes { ids: Box::new(ids) },
                &merges,
                words,
            )
        });
        Ok(Encoder { inner })
    }

    /// Char mode. `alphabet`: the base tokens (characters and the end-of-word
    /// marker at id `end_of_word`), ids in list order; characters outside it
    /// become `unk`; `merges` and `merge_ids` as for `byte`; words split at
    /// whitespace.
    #[staticmethod]
    #[pyo3(signature = (merges, merge_ids, alphabet, *, end_of_word, unk, lowercase=false))]
    fn char(
        merges: &Bound<'_, PyList>,
        merge_ids: Vec<u32>,
        alphabet: Vec<String>,
        end_of_word: u32,
        unk: u32,
        lowercase: bool,
    ) -> PyResult<Self> {
        let ids = alphabet
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let mut it = s.chars();
                match (it.next(), it.next()) {
                    (Some(c), None) => Some((c, i as u32)),
                    _ => None,
                }
            })
            .collect();
        let alphabet = Alphabet::Chars {
            ids,
            end_of_word,
            unk,
        };
        let merges = ranked_merges(merges, merge_ids)?;
        Encoder::new(Splitter::Char { lowercase }, alphabet, merges, None)
    }

    /// Token ids of one text.
    #[pyo3(signature = (text, eos=None))]
    fn encode(&self, py: Python<'_>, text: &str, eos: Option<u32>) -> PyResult<Vec<u32>> {
        let mut out = Vec::new();
        py.detach(|| self.inner.encode_text(text, eos, &mut out))?;
        Ok(out)
    }

    /// Encode `n` documents of a large_string array, on the thread pool when
    /// `parallel`, else on the calling thread. Returns (ids as little-endian
    /// u16 or u32 bytes, per-document token counts as u32 bytes).
    #[pyo3(signature = (offsets, data, start, n, eos=None, wide=true, parallel=true))]
    #[allow(clippy::too_many_arguments)]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        offsets: PyBuffer<u8>,
        data: PyBuffer<u8>,
        start: usize,
        n: usize,
        eos: Option<u32>,
        wide: bool,
        parallel: bool,
    ) -> PyResult<(Bound<'py, OwnedBytes>, Bound<'py, PyBytes>)> {
        let texts = strings(&offsets, &data, start, n)?;
        let ids = py.detach(|| {
            let (mut parts, lens) =
                pool::install_if(parallel, |p| self.inner.encode_batch(&texts, eos, p))?;
            let ids = if wide {
                // One part (a batch encoded on one thread) is handed over as it is.
                let mut ids = match parts.len() {
                    1 => parts.pop().unwrap_or_default(),
                    _ => parts.concat(),
                };
                ids.shrink_to_fit();
                ids.iter_mut().for_each(|id| *id = id.to_le());
                Owned::Wide(ids)
            } else {
                Owned::Narrow(narrow(parts))
            };
            Ok::<_, Error>((ids, lens))
        });
        let (ids, lens) = ids?;
        Ok((
            Bound::new(py, OwnedBytes { bytes: ids })?,
            PyBytes::new(py, &arrow::le_bytes(&lens, u32::to_le_bytes)),
        ))
    }
}

/// Ids taken this many at a time from the end of a part when narrowed.
const NARROW_STEP: usize = 1 << 20;

/// The ids of consecutive `parts` as 16-bit values. Each part is narrowed
/// from its end, NARROW_STEP ids at a time, and shrunk as it goes (a large
/// part's freed tail goes back to the system), into a zeroed buffer whose
/// pages come in as they are written: a long document's ids are held at 4
/// bytes a token at most, not at 32 and 16 bits at once (6 bytes a token).
fn narrow(parts: Vec<Vec<u32>>) -> Vec<u16> {
    let mut end: usize = parts.iter().map(Vec::len).sum();
    let mut out = vec![0u16; end];
    for mut part in parts.into_iter().rev() {
        while !part.is_empty() {
            let keep = part.len().saturating_sub(NARROW_STEP);
            let start = end - (part.len() - keep);
            for (o, &id) in out[start..end].iter_mut().zip(&part[keep..]) {
                *o = (id as u16).to_le();
            }
            end = start;
            part.truncate(keep);
            part.shrink_to_fit();
        }
    }
    out
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Encoder>()?;
    Ok(())
}
