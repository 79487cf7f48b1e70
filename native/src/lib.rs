//! Python bindings only; the logic lives in the other modules.

mod arrow;
pub mod count;
pub mod encode;
pub mod pool;
pub mod pretok;
pub mod scanner;
pub mod sharedcache;
pub mod train;
pub mod wordmap;

use encode::{Alphabet, Encoder as CoreEncoder};
use pretok::PreTokenizer;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

fn bytes_of(buf: &PyBuffer<u8>) -> &[u8] {
    // SAFETY: the buffer is C-contiguous bytes and stays alive (and is
    // read-only to us) for as long as `buf` is borrowed.
    unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const u8, buf.len_bytes()) }
}

fn value_error(msg: String) -> PyErr {
    PyValueError::new_err(msg)
}

fn pretokenizer(mode: &str, pattern: &str, lowercase: bool) -> PyResult<PreTokenizer> {
    match mode {
        "byte" => PreTokenizer::for_pattern(pattern).map_err(value_error),
        "char" => Ok(PreTokenizer::whitespace(lowercase)),
        other => Err(value_error(format!("unknown mode {other:?}"))),
    }
}

/// The words of `text` as `mode` splits them (for tests and inspection).
#[pyfunction]
#[pyo3(signature = (text, mode="byte", pattern="cl100k", lowercase=false))]
fn pretokenize(text: &str, mode: &str, pattern: &str, lowercase: bool) -> PyResult<Vec<String>> {
    pretokenizer(mode, pattern, lowercase)?
        .words(text)
        .map_err(value_error)
}

/// The regex source of a pattern preset (gpt2, cl100k, o200k), or None.
#[pyfunction]
fn preset_regex(name: &str) -> Option<&'static str> {
    pretok::preset_regex(name)
}

/// (word offsets, word data, counts, first keys, number of words) as Arrow buffers.
type CountedWords<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    usize,
);

/// Run the hot loops on `threads` worker threads (0: one per core).
#[pyfunction]
fn set_threads(threads: usize) {
    pool::set_threads(threads)
}

/// Return memory freed by the hot loops to the operating system.
#[pyfunction]
fn release_memory(py: Python<'_>) {
    py.detach(pool::release_memory)
}

/// Counts the words of one shard, batch by batch.
#[pyclass]
struct Counter {
    pretok: PreTokenizer,
    counter: Option<count::Counter>,
}

#[pymethods]
impl Counter {
    #[new]
    #[pyo3(signature = (mode="byte", pattern="cl100k", lowercase=false))]
    fn new(mode: &str, pattern: &str, lowercase: bool) -> PyResult<Self> {
        Ok(Counter {
            pretok: pretokenizer(mode, pattern, lowercase)?,
            counter: Some(Default::default()),
        })
    }

    /// Add `n` documents of a large_string array (offsets, data buffers; `start` = array offset),
    /// on the thread pool when `parallel`, else on the calling thread.
    #[pyo3(signature = (offsets, data, start, n, first_row, parallel=true))]
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        py: Python<'_>,
        offsets: PyBuffer<u8>,
        data: PyBuffer<u8>,
        start: usize,
        n: usize,
        first_row: u64,
        parallel: bool,
    ) -> PyResult<()> {
        let texts = arrow::string_views(bytes_of(&offsets), bytes_of(&data), start, n)
            .map_err(value_error)?;
        let counter = self
            .counter
            .as_mut()
            .ok_or_else(|| value_error("counter already finished".into()))?;
        let pretok = &self.pretok;
        py.detach(|| pool::install_if(parallel, |p| counter.add(pretok, &texts, first_row, p)))
            .map_err(value_error)
    }

    /// (word offsets, word data, counts u64, first keys u64, number of words), sorted by first key.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<CountedWords<'py>> {
        let counter = self
            .counter
            .take()
            .ok_or_else(|| value_error("counter already finished".into()))?;
        let (offs, data, counts, firsts, n) = py.detach(|| {
            let t = counter.finish();
            let offs = arrow::le_bytes(&t.offsets, i64::to_le_bytes);
            let counts = arrow::le_bytes(&t.counts, u64::to_le_bytes);
            let firsts = arrow::le_bytes(&t.firsts, u64::to_le_bytes);
            let n = t.len();
            (offs, t.data, counts, firsts, n)
        });
        Ok((
            PyBytes::new(py, &offs),
            PyBytes::new(py, &data),
            PyBytes::new(py, &counts),
            PyBytes::new(py, &firsts),
            n,
        ))
    }
}

/// Characters of the words, sorted, plus the end-of-word marker: char mode's base vocabulary.
#[pyfunction]
fn char_alphabet(
    py: Python<'_>,
    offsets: PyBuffer<u8>,
    data: PyBuffer<u8>,
    start: usize,
    n: usize,
) -> PyResult<Vec<String>> {
    let words =
        arrow::string_views(bytes_of(&offsets), bytes_of(&data), start, n).map_err(value_error)?;
    Ok(py.detach(|| pool::install(|| train::char_alphabet(&words))))
}

/// Train merges on a word table (words in first-occurrence order).
/// `alphabet` is None for byte mode. Returns the merges as (left, right) id pairs.
#[pyfunction]
#[pyo3(signature = (offsets, data, start, n, counts, alphabet, num_merges, progress=None))]
#[allow(clippy::too_many_arguments)]
fn train_merges(
    py: Python<'_>,
    offsets: PyBuffer<u8>,
    data: PyBuffer<u8>,
    start: usize,
    n: usize,
    counts: PyBuffer<u8>,
    alphabet: Option<Vec<String>>,
    num_merges: usize,
    progress: Option<Py<PyAny>>,
) -> PyResult<Vec<(u32, u32)>> {
    let words =
        arrow::string_views(bytes_of(&offsets), bytes_of(&data), start, n).map_err(value_error)?;
    let counts: Vec<u64> = bytes_of(&counts)
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    if counts.len() != n {
        return Err(value_error(format!(
            "{} counts for {n} words",
            counts.len()
        )));
    }
    let report = |k: usize| {
        if let Some(cb) = &progress {
            if k.is_multiple_of(256) || k == num_merges {
                Python::attach(|py| cb.call1(py, (k,)).map(|_| ()))
            } else {
                Ok(())
            }
        } else {
            Ok(())
        }
    };
    py.detach(|| {
        pool::install(|| {
            let (table, base_size) =
                train::symbolize(&words, &counts, alphabet.as_deref()).map_err(value_error)?;
            // Ids are u32: the base tokens and merges must all have one.
            if base_size as u64 + num_merges as u64 > 1 << 32 {
                return Err(value_error(format!(
                    "{base_size} base tokens + {num_merges} merges: more ids than 32 bits hold"
                )));
            }
            let mut failure = None;
            let merges = train::Trainer::new(table, base_size).train(num_merges, |k| {
                if failure.is_none() {
                    failure = report(k).err();
                }
            });
            match failure {
                Some(e) => Err(e),
                None => Ok(merges),
            }
        })
    })
}

/// Applies a trained tokenizer to documents.
#[pyclass(frozen)]
struct Encoder {
    inner: CoreEncoder,
}

#[pymethods]
impl Encoder {
    /// `merges` are (left, right, new id) in rank order. Byte mode: `byte_ids`
    /// maps each byte to its id (default: the byte value), `whole_words` lists
    /// tokens (bytes, id) that a whole word maps to directly. Char mode:
    /// `alphabet`, `end_of_word` and `unk`.
    #[new]
    #[pyo3(signature = (mode, pattern, lowercase, merges, alphabet=None, end_of_word=None, unk=None, byte_ids=None, whole_words=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        mode: &str,
        pattern: &str,
        lowercase: bool,
        merges: Vec<(u32, u32, u32)>,
        alphabet: Option<Vec<String>>,
        end_of_word: Option<u32>,
        unk: Option<u32>,
        byte_ids: Option<Vec<u32>>,
        whole_words: Option<Vec<(Vec<u8>, u32)>>,
    ) -> PyResult<Self> {
        let pretok = pretokenizer(mode, pattern, lowercase)?;
        let alphabet = match (alphabet, end_of_word, unk) {
            (None, _, _) => match byte_ids {
                None => Alphabet::identity_bytes(),
                Some(ids) => {
                    let ids: [u32; 256] = ids.try_into().map_err(|v: Vec<u32>| {
                        value_error(format!("byte_ids has {} entries, not 256", v.len()))
                    })?;
                    Alphabet::Bytes { ids: Box::new(ids) }
                }
            },
            (Some(chars), Some(end_of_word), Some(unk)) => {
                let ids = chars
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
                Alphabet::Chars {
                    ids,
                    end_of_word,
                    unk,
                }
            }
            _ => {
                return Err(value_error(
                    "char mode needs alphabet, end_of_word and unk".into(),
                ))
            }
        };
        let merges: Vec<((u32, u32), u32)> =
            merges.into_iter().map(|(a, b, id)| ((a, b), id)).collect();
        let whole_words = whole_words.map(|w| {
            w.into_iter()
                .map(|(b, id)| (b.into_boxed_slice(), id))
                .collect()
        });
        Ok(Encoder {
            inner: CoreEncoder::new(pretok, alphabet, &merges, whole_words),
        })
    }

    /// Token ids of one text.
    #[pyo3(signature = (text, eos=None))]
    fn encode(&self, py: Python<'_>, text: &str, eos: Option<u32>) -> PyResult<Vec<u32>> {
        let mut out = Vec::new();
        py.detach(|| self.inner.encode_text(text, eos, &mut out))
            .map_err(value_error)?;
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
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let texts = arrow::string_views(bytes_of(&offsets), bytes_of(&data), start, n)
            .map_err(value_error)?;
        let (parts, lens) = py
            .detach(|| pool::install_if(parallel, |p| self.inner.encode_batch(&texts, eos, p)))
            .map_err(value_error)?;
        // Written straight into the Python object: no intermediate buffer.
        let width = if wide { 4 } else { 2 };
        let total: usize = parts.iter().map(Vec::len).sum();
        let ids = PyBytes::new_with(py, total * width, |buf| {
            let mut out = buf.chunks_exact_mut(width);
            for (v, dst) in parts.iter().flatten().zip(&mut out) {
                if wide {
                    dst.copy_from_slice(&v.to_le_bytes());
                } else {
                    dst.copy_from_slice(&(*v as u16).to_le_bytes());
                }
            }
            Ok(())
        })?;
        Ok((
            ids,
            PyBytes::new(py, &arrow::le_bytes(&lens, u32::to_le_bytes)),
        ))
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pretokenize, m)?)?;
    m.add_function(wrap_pyfunction!(preset_regex, m)?)?;
    m.add_function(wrap_pyfunction!(set_threads, m)?)?;
    m.add_function(wrap_pyfunction!(release_memory, m)?)?;
    m.add_function(wrap_pyfunction!(char_alphabet, m)?)?;
    m.add_function(wrap_pyfunction!(train_merges, m)?)?;
    m.add_class::<Counter>()?;
    m.add_class::<Encoder>()?;
    Ok(())
}
