//! Pre-tokenizing and counting: the words of text, and count tables.

use super::*;

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

/// Whether every string `start..start + n` of a large_string array (offsets,
/// data buffers) is UTF-8, checked as the hot loops will take them.
#[pyfunction]
fn valid_utf8(
    py: Python<'_>,
    offsets: PyBuffer<u8>,
    data: PyBuffer<u8>,
    start: usize,
    n: usize,
) -> bool {
    py.detach(|| strings(&offsets, &data, start, n).is_ok())
}

/// The NFC form (Hugging Face tokenizers' tables) of the strings
/// `start..start + n` of a large_string array: (offsets, data) of a new one.
#[pyfunction]
fn nfc<'py>(
    py: Python<'py>,
    offsets: PyBuffer<u8>,
    data: PyBuffer<u8>,
    start: usize,
    n: usize,
) -> PyResult<(Bound<'py, OwnedBytes>, Bound<'py, OwnedBytes>)> {
    let (offsets, data) = {
        let docs = strings(&offsets, &data, start, n)?;
        py.detach(|| crate::normalize::nfc_all(&docs))
    };
    Ok((
        Bound::new(
            py,
            OwnedBytes {
                bytes: Owned::Signed(offsets),
            },
        )?,
        Bound::new(
            py,
            OwnedBytes {
                bytes: Owned::Bytes(data),
            },
        )?,
    ))
}

/// The regex source of a pattern preset (gpt2, cl100k, o200k), or None.
#[pyfunction]
fn preset_regex(name: &str) -> Option<&'static str> {
    pretok::preset_regex(name)
}

/// (word offsets, word data, counts, first keys, number of words) as Arrow
/// buffers, handed over without a copy.
type CountedWords<'py> = (
    Bound<'py, OwnedBytes>,
    Bound<'py, OwnedBytes>,
    Bound<'py, OwnedBytes>,
    Bound<'py, OwnedBytes>,
    usize,
);

/// Run the hot loops on `threads` worker threads (0: one per core).
#[pyfunction]
fn set_threads(threads: usize) {
    pool::set_threads(threads)
}

/// Have this process return freed memory as it goes (glibc's tunables).
#[pyfunction]
fn bound_retained_memory() {
    pool::bound_retained_memory()
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
        let t = py.detach(|| {
            let mut t = counter.finish();
            t.offsets.iter_mut().for_each(|v| *v = v.to_le());
            t.counts.iter_mut().for_each(|v| *v = v.to_le());
            t.firsts.iter_mut().for_each(|v| *v = v.to_le());
            t
        });
        let n = t.len();
        let buffer = |bytes| Bound::new(py, OwnedBytes { bytes });
        Ok((
            buffer(Owned::Signed(t.offsets))?,
            buffer(Owned::Bytes(t.data))?,
            buffer(Owned::Long(t.counts))?,
            buffer(Owned::Long(t.firsts))?,
            n,
        ))
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pretokenize, m)?)?;
    m.add_function(wrap_pyfunction!(char_words, m)?)?;
    m.add_function(wrap_pyfunction!(preset_regex, m)?)?;
    m.add_function(wrap_pyfunction!(valid_utf8, m)?)?;
    m.add_function(wrap_pyfunction!(nfc, m)?)?;
    m.add_function(wrap_pyfunction!(set_threads, m)?)?;
    m.add_function(wrap_pyfunction!(release_memory, m)?)?;
    m.add_function(wrap_pyfunction!(bound_retained_memory, m)?)?;
    m.add_class::<Counter>()?;
    Ok(())
}
