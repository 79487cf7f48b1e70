//! Python bindings only; the logic lives in the other modules.

mod arrow;
pub mod count;
pub mod encode;
pub mod error;
pub mod pool;
pub mod pretok;
pub mod scanner;
pub mod sharedcache;
pub mod train;
pub mod wordmap;

use encode::{Alphabet, Encoder as CoreEncoder};
use error::Error;
use pretok::PreTokenizer;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

pyo3::create_exception!(
    _native,
    NativeError,
    PyValueError,
    "Any error of the native core: bad input, never a bug (those would panic)."
);

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        NativeError::new_err(e.to_string())
    }
}

/// The bytes of a buffer, which must be one C-contiguous run: a strided view
/// (`memoryview(b)[::2]`) would otherwise be read as if it were contiguous.
fn bytes_of<'a>(buf: &'a PyBuffer<u8>, what: &'static str) -> Result<&'a [u8], Error> {
    if !buf.is_c_contiguous() {
        return Err(Error::NotContiguous { what });
    }
    // SAFETY: the buffer is C-contiguous bytes (checked above; PyBuffer<u8>
    // checked the item type) and stays alive (and is read-only to us) for as
    // long as `buf` is borrowed.
    Ok(unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const u8, buf.len_bytes()) })
}

/// The `n` strings of a large_string array given as its buffers.
fn strings<'a>(
    offsets: &'a PyBuffer<u8>,
    data: &'a PyBuffer<u8>,
    start: usize,
    n: usize,
) -> Result<Vec<&'a str>, Error> {
    arrow::string_views(
        bytes_of(offsets, "offsets")?,
        bytes_of(data, "data")?,
        start,
        n,
    )
}

/// How text splits into words: byte mode's regex (a preset name or a
/// pattern), or char mode's whitespace split.
enum Splitter<'a> {
    Byte { pattern: &'a str },
    Char { lowercase: bool },
}

impl Splitter<'_> {
    fn build(&self) -> Result<PreTokenizer, Error> {
        match *self {
            Splitter::Byte { pattern } => PreTokenizer::for_pattern(pattern),
            Splitter::Char { lowercase } => Ok(PreTokenizer::whitespace(lowercase)),
        }
    }
}

/// The pre-tokens of `text` under byte mode's `pattern`, a preset or a regex
/// (for tests and inspection).
#[pyfunction]
#[pyo3(signature = (text, pattern="cl100k"))]
fn pretokenize(text: &str, pattern: &str) -> PyResult<Vec<String>> {
    Ok(Splitter::Byte { pattern }.build()?.words(text)?)
}

/// The words of `text` as char mode splits them (for tests and inspection).
#[pyfunction]
#[pyo3(signature = (text, lowercase=false))]
fn char_words(text: &str, lowercase: bool) -> PyResult<Vec<String>> {
    Ok(Splitter::Char { lowercase }.build()?.words(text)?)
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

impl Counter {
    fn new(splitter: Splitter) -> PyResult<Self> {
        Ok(Counter {
            pretok: splitter.build()?,
            counter: Some(Default::default()),
        })
    }
}

#[pymethods]
impl Counter {
    /// Byte mode: words are the matches of `pattern` (a preset name or a regex).
    #[staticmethod]
    #[pyo3(signature = (pattern="cl100k"))]
    fn byte(pattern: &str) -> PyResult<Self> {
        Counter::new(Splitter::Byte { pattern })
    }

    /// Char mode: words are split at whitespace (and lowercased when asked).
    #[staticmethod]
    #[pyo3(signature = (lowercase=false))]
    fn char(lowercase: bool) -> PyResult<Self> {
        Counter::new(Splitter::Char { lowercase })
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
        let texts = strings(&offsets, &data, start, n)?;
        let counter = self.counter.as_mut().ok_or(Error::Finished)?;
        let pretok = &self.pretok;
        py.detach(|| pool::install_if(parallel, |p| counter.add(pretok, &texts, first_row, p)))?;
        Ok(())
    }

    /// (word offsets, word data, counts u64, first keys u64, number of words), sorted by first key.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<CountedWords<'py>> {
        let counter = self.counter.take().ok_or(Error::Finished)?;
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
    let words = strings(&offsets, &data, start, n)?;
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
    let words = strings(&offsets, &data, start, n)?;
    let counts = bytes_of(&counts, "counts")?;
    if counts.len() != n * 8 {
        return Err(Error::Arrow(format!(
            "{} bytes of u64 counts for {n} words",
            counts.len()
        ))
        .into());
    }
    let counts: Vec<u64> = counts
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect();
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
            let (table, base_size) = train::symbolize(&words, &counts, alphabet.as_deref())?;
            // Ids are u32: the base tokens and merges must all have one.
            if base_size as u64 + num_merges as u64 > 1 << 32 {
                return Err(Error::Train(format!(
                    "{base_size} base tokens + {num_merges} merges: more ids than 32 bits hold"
                ))
                .into());
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

/// A merge as the Python side gives it: (left id, right id, id it makes).
type MergeTriple = (u32, u32, u32);

impl Encoder {
    fn new(
        splitter: Splitter,
        alphabet: Alphabet,
        merges: Vec<MergeTriple>,
        whole_words: Option<Vec<(Vec<u8>, u32)>>,
    ) -> PyResult<Self> {
        let pretok = splitter.build()?;
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
}

#[pymethods]
impl Encoder {
    /// Byte mode. `pattern`: a preset name or a regex; `merges`: (left, right,
    /// new id) in rank order; `byte_ids`: each byte's id (default: the byte
    /// value); `whole_words`: tokens (bytes, id) a whole word maps to directly.
    #[staticmethod]
    #[pyo3(signature = (pattern, merges, *, byte_ids=None, whole_words=None))]
    fn byte(
        pattern: &str,
        merges: Vec<MergeTriple>,
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
        Encoder::new(Splitter::Byte { pattern }, alphabet, merges, whole_words)
    }

    /// Char mode. `alphabet`: the base tokens (characters and the end-of-word
    /// marker at id `end_of_word`), ids in list order; characters outside it
    /// become `unk`; `merges` as for `byte`; words split at whitespace.
    #[staticmethod]
    #[pyo3(signature = (merges, alphabet, *, end_of_word, unk, lowercase=false))]
    fn char(
        merges: Vec<MergeTriple>,
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
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let texts = strings(&offsets, &data, start, n)?;
        let (parts, lens) =
            py.detach(|| pool::install_if(parallel, |p| self.inner.encode_batch(&texts, eos, p)))?;
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
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    m.add_function(wrap_pyfunction!(pretokenize, m)?)?;
    m.add_function(wrap_pyfunction!(char_words, m)?)?;
    m.add_function(wrap_pyfunction!(preset_regex, m)?)?;
    m.add_function(wrap_pyfunction!(set_threads, m)?)?;
    m.add_function(wrap_pyfunction!(release_memory, m)?)?;
    m.add_function(wrap_pyfunction!(char_alphabet, m)?)?;
    m.add_function(wrap_pyfunction!(train_merges, m)?)?;
    m.add_class::<Counter>()?;
    m.add_class::<Encoder>()?;
    Ok(())
}
