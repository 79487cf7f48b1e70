//! Python bindings only; the logic lives in the other modules.

mod arrow;
pub mod atoms;
pub mod count;
pub mod encode;
pub mod error;
pub mod extend;
pub mod pool;
pub mod pretok;
pub mod scanner;
pub mod sharedcache;
pub mod superword;
pub mod train;
pub mod vocab;
pub mod vocab_json;
pub mod wordmap;

use encode::{whole_words as whole_word_map, Alphabet, Encoder as CoreEncoder};
use error::Error;
use pretok::PreTokenizer;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyList, PyString, PyTuple};
use std::sync::OnceLock;

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

/// `n` little-endian u64 counts.
fn u64s(counts: &PyBuffer<u8>, n: usize) -> Result<Vec<u64>, Error> {
    let counts = bytes_of(counts, "counts")?;
    if counts.len() != n * 8 {
        return Err(Error::Arrow(format!(
            "{} bytes of u64 counts for {n} words",
            counts.len()
        )));
    }
    Ok(counts
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
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
    let counts = u64s(&counts, n)?;
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

/// Little-endian u32 or u64 values of a buffer.
fn u32s(buf: &PyBuffer<u8>, what: &'static str) -> Result<Vec<u32>, Error> {
    let b = bytes_of(buf, what)?;
    if !b.len().is_multiple_of(4) {
        return Err(Error::Arrow(format!(
            "{what}: {} bytes is no whole number of u32",
            b.len()
        )));
    }
    Ok(b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Continue training on words already segmented into token ids (extending a
/// tokenizer): `symbols` (u32) holds `lens[i]` (u32) ids for word i, words in
/// first-occurrence order with `counts` (u64); `texts[i]` is id i's bytes
/// (None: a special token or a gap), `len(texts)` the first new id. A merge
/// whose bytes a token has already is not learned (see `extend`). Returns the
/// merges; merge k yields id `len(texts) + k`.
#[pyfunction]
#[pyo3(signature = (symbols, lens, counts, texts, num_merges, progress=None))]
#[allow(clippy::too_many_arguments)]
fn train_segmented(
    py: Python<'_>,
    symbols: PyBuffer<u8>,
    lens: PyBuffer<u8>,
    counts: PyBuffer<u8>,
    texts: Vec<Option<Vec<u8>>>,
    num_merges: usize,
    progress: Option<Py<PyAny>>,
) -> PyResult<Vec<(u32, u32)>> {
    let symbols = u32s(&symbols, "symbols")?;
    let lens = u32s(&lens, "lens")?;
    let counts = bytes_of(&counts, "counts")?;
    if counts.len() != lens.len() * 8 {
        return Err(Error::Arrow(format!(
            "{} bytes of u64 counts for {} words",
            counts.len(),
            lens.len()
        ))
        .into());
    }
    let counts: Vec<u64> = counts
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect();
    let base_size = u32::try_from(texts.len())
        .map_err(|_| Error::Train(format!("{} base ids: more than 32 bits hold", texts.len())))?;
    if let Some(&bad) = symbols.iter().find(|&&s| s >= base_size) {
        return Err(
            Error::Train(format!("symbol {bad} is beyond the {base_size} base ids")).into(),
        );
    }
    if base_size as u64 + num_merges as u64 > 1 << 32 {
        return Err(Error::Train(format!(
            "{base_size} base ids + {num_merges} merges: more ids than 32 bits hold"
        ))
        .into());
    }
    py.detach(|| {
        pool::install(|| {
            let table = train::Words::from_symbols(&symbols, &lens, &counts)?;
            let mut texts = extend::TokenTexts::new(texts);
            let mut failure = None;
            let merges = train::Trainer::new(table, base_size).train_where(
                num_merges,
                |k| {
                    if failure.is_none() && (k.is_multiple_of(256) || k == num_merges) {
                        if let Some(cb) = &progress {
                            failure = Python::attach(|py| cb.call1(py, (k,)).map(|_| ())).err();
                        }
                    }
                },
                |pair| texts.admit(pair),
            );
            match failure {
                Some(e) => Err(e),
                None => Ok(merges),
            }
        })
    })
}

/// Stage 1 of a superword tokenizer, trained (`superword_stage1`): taken
/// by `superword_stage2`.
#[pyclass]
struct SuperwordStage1(Option<superword::Stage1Trained>);

/// Stage 2's words split into stage 1's (`superword_split`): taken by
/// `superword_stage2`.
#[pyclass]
struct SuperwordSplit(Option<superword::Split>);

/// `progress(k)` every 256 merges and at `last`, until it raises: then
/// `failure` holds its error.
fn reporter<'a>(
    progress: &'a Option<Py<PyAny>>,
    last: usize,
    failure: &'a mut Option<PyErr>,
) -> impl FnMut(usize) + Send + 'a {
    move |k| {
        if failure.is_none() && (k.is_multiple_of(256) || k == last) {
            if let Some(cb) = progress {
                *failure = Python::attach(|py| cb.call1(py, (k,)).map(|_| ())).err();
            }
        }
    }
}

/// Every id of 256 bytes and `merges` merges fits a u32.
fn merge_ids(merges: usize) -> Result<(), Error> {
    if 256 + merges as u64 > 1 << 32 {
        return Err(Error::Train(format!(
            "256 base ids + {merges} merges: more than 32 bits hold"
        )));
    }
    Ok(())
}

/// Stage 1 of a superword tokenizer (`superword::Stage1Trained`): `stage1`
/// merges on a word table (a large_string array's buffers, `start` its
/// offset, and u64 `counts`) in first-occurrence order. An error
/// `progress` raises is raised once it is done.
#[pyfunction]
#[pyo3(signature = (offsets, data, start, n, counts, stage1, progress=None))]
#[allow(clippy::too_many_arguments)]
fn superword_stage1(
    py: Python<'_>,
    offsets: PyBuffer<u8>,
    data: PyBuffer<u8>,
    start: usize,
    n: usize,
    counts: PyBuffer<u8>,
    stage1: usize,
    progress: Option<Py<PyAny>>,
) -> PyResult<SuperwordStage1> {
    let words = strings(&offsets, &data, start, n)?;
    let counts = u64s(&counts, n)?;
    merge_ids(stage1)?;
    py.detach(|| {
        pool::install(|| {
            let mut failure = None;
            let trained = superword::Stage1Trained::train(
                &words,
                &counts,
                stage1,
                reporter(&progress, stage1, &mut failure),
            )?;
            match failure {
                Some(e) => Err(e),
                None => Ok(SuperwordStage1(Some(trained))),
            }
        })
    })
}

/// Stage 2's words (`offsets2` ... `n2`) split into stage 1's (`offsets` ...
/// `n`, stage 1's table) by `pattern` (None, or one that does not compile:
/// not split, which only spares work).
#[pyfunction]
#[pyo3(signature = (offsets, data, start, n, pattern, offsets2, data2, start2, n2))]
#[allow(clippy::too_many_arguments)]
fn superword_split(
    py: Python<'_>,
    offsets: PyBuffer<u8>,
    data: PyBuffer<u8>,
    start: usize,
    n: usize,
    pattern: Option<&str>,
    offsets2: PyBuffer<u8>,
    data2: PyBuffer<u8>,
    start2: usize,
    n2: usize,
) -> PyResult<SuperwordSplit> {
    let words = strings(&offsets, &data, start, n)?;
    let superwords = strings(&offsets2, &data2, start2, n2)?;
    let pretok = pattern.and_then(|p| PreTokenizer::for_pattern(p).ok());
    let split =
        py.detach(|| pool::install(|| superword::Split::new(&superwords, &words, pretok.as_ref())));
    Ok(SuperwordSplit(Some(split)))
}

/// Stage 2 of a superword tokenizer from `stage1`: up to `total` merges in
/// all, on stage 2's table (`offsets2` ... `counts2`, split by `split`), at
/// most `max_words` words a token (None: any number); stage 1's table
/// (`offsets` ... `n`) as both were given. Returns the merges and how many
/// are stage 1's. Takes `stage1` and `split`: they are spent.
#[pyfunction]
#[pyo3(signature = (stage1, split, offsets, data, start, n, offsets2, data2, start2, n2, counts2, total, max_words=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn superword_stage2(
    py: Python<'_>,
    mut stage1: PyRefMut<'_, SuperwordStage1>,
    mut split: PyRefMut<'_, SuperwordSplit>,
    offsets: PyBuffer<u8>,
    data: PyBuffer<u8>,
    start: usize,
    n: usize,
    offsets2: PyBuffer<u8>,
    data2: PyBuffer<u8>,
    start2: usize,
    n2: usize,
    counts2: PyBuffer<u8>,
    total: usize,
    max_words: Option<u32>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(Vec<(u32, u32)>, usize)> {
    let words = strings(&offsets, &data, start, n)?;
    let superwords = strings(&offsets2, &data2, start2, n2)?;
    let superword_counts = u64s(&counts2, n2)?;
    merge_ids(total)?;
    let (Some(trained), Some(split)) = (stage1.0.take(), split.0.take()) else {
        return Err(Error::Train("stage 1 or the split given to stage 2 was spent".into()).into());
    };
    py.detach(|| {
        pool::install(|| {
            let mut failure = None;
            let merges = trained.stage2(
                split,
                &words,
                &superwords,
                &superword_counts,
                total,
                max_words,
                reporter(&progress, total, &mut failure),
            )?;
            match failure {
                Some(e) => Err(e),
                None => Ok(merges),
            }
        })
    })
}

/// A table of token bytes as Python gives it (a list of bytes or None),
/// borrowed: only exact `bytes` and None are taken, anything else is an
/// error (the Python reference then names it).
fn byte_table<'a>(items: &'a [Bound<'_, PyAny>]) -> Result<Vec<Option<&'a [u8]>>, Error> {
    items
        .iter()
        .map(|item| {
            if item.is_none() {
                Ok(None)
            } else {
                item.cast_exact::<PyBytes>()
                    .map(|b| Some(b.as_bytes()))
                    .map_err(|_| Error::Vocabulary("vocab entries are bytes or None".into()))
            }
        })
        .collect()
}

/// Merges as Python gives them: a list of 2-tuples (or 2-lists) of exact
/// ints that u32 holds; anything else (a bool, a float) is an error.
fn id_pairs(merges: &Bound<'_, PyList>) -> Result<Vec<(u32, u32)>, Error> {
    let bad = || Error::Vocabulary("merges are pairs of integer ids".into());
    let id = |v: Bound<'_, PyAny>| -> Result<u32, Error> {
        if !v.is_exact_instance_of::<PyInt>() {
            return Err(bad());
        }
        v.extract::<u32>().map_err(|_| bad())
    };
    merges
        .iter()
        .map(|m| {
            if let Ok(t) = m.cast_exact::<PyTuple>() {
                if t.len() == 2 {
                    return Ok((
                        id(t.get_item(0).map_err(|_| bad())?)?,
                        id(t.get_item(1).map_err(|_| bad())?)?,
                    ));
                }
            } else if let Ok(l) = m.cast_exact::<PyList>() {
                if l.len() == 2 {
                    return Ok((
                        id(l.get_item(0).map_err(|_| bad())?)?,
                        id(l.get_item(1).map_err(|_| bad())?)?,
                    ));
                }
            }
            Err(bad())
        })
        .collect()
}

/// Whether `merges` keep the rules a tokenizer file's merges must (see
/// `vocab::merges_valid`); False too for anything but a list of 2-tuples of
/// exact ints: the Python reference then checks.
#[pyfunction]
fn merges_valid(
    py: Python<'_>,
    merges: &Bound<'_, PyAny>,
    base: u32,
    made: &Bound<'_, PyAny>,
    specials: &Bound<'_, PyAny>,
) -> bool {
    // Tuples only, as a Tokenizer holds them: the reference would fail on
    // a list (unhashable) rather than pass it.
    let Ok(merges) = merges.cast::<PyList>() else {
        return false;
    };
    if !merges.iter().all(|m| m.is_exact_instance_of::<PyTuple>()) {
        return false;
    }
    let Ok(pairs) = id_pairs(merges) else {
        return false;
    };
    let made: Option<Vec<u32>> = if made.is_none() {
        None
    } else {
        match made.extract() {
            Ok(m) => Some(m),
            Err(_) => return false,
        }
    };
    let Ok(specials) = specials.extract::<Vec<u32>>() else {
        return false;
    };
    py.detach(|| vocab::merges_valid(&pairs, base, made.as_deref(), &specials))
}

/// `[[a,b],...]`: `merges` as `json.dumps` with compact separators writes
/// them (NativeError for anything but pairs of ids).
#[pyfunction]
fn merges_json<'py>(py: Python<'py>, merges: &Bound<'py, PyList>) -> PyResult<Bound<'py, PyBytes>> {
    let pairs = id_pairs(merges)?;
    let mut out = String::new();
    py.detach(|| vocab_json::write_merges(&mut out, &pairs));
    Ok(PyBytes::new(py, out.as_bytes()))
}

/// The tokens of a .tiktoken file's bytes, as a list indexed by rank (None
/// where no line has the rank). Canonical files only: NativeError for
/// anything else, which the Python reader then reads (or names the fault of).
#[pyfunction]
fn parse_tiktoken<'py>(py: Python<'py>, data: PyBuffer<u8>) -> PyResult<Bound<'py, PyList>> {
    let data = bytes_of(&data, "data")?;
    let vocab = py.detach(|| pool::install(|| vocab::parse_tiktoken(data)))?;
    bytes_list(py, &vocab)
}

/// (merges, the id each yields, each byte's id or None if a byte has no
/// token) of `vocab` (the token bytes of each rank, or None): one merge
/// (left id, right id) per multi-byte token that BPE over the lower ranks
/// splits in two, in rank order, yielding that token. The merges a ranks
/// file implies.
#[pyfunction]
fn derive_merges(py: Python<'_>, vocab: &Bound<'_, PyList>) -> PyResult<DerivedTables> {
    let items: Vec<Bound<'_, PyAny>> = vocab.iter().collect();
    let table = byte_table(&items)?;
    let d = py.detach(|| pool::install(|| vocab::derive_merges(&table)))?;
    Ok((d.merges, d.merge_ids, d.byte_ids))
}

/// (the id of each byte, the id each merge yields) of an explicit table
/// (`vocab`: each id's bytes or None); NativeError when a byte has no token,
/// two ids the same bytes, or a merge joins into no token.
#[pyfunction]
fn table_ids(
    py: Python<'_>,
    vocab: &Bound<'_, PyList>,
    merges: &Bound<'_, PyList>,
) -> PyResult<(Vec<u32>, Vec<u32>)> {
    let items: Vec<Bound<'_, PyAny>> = vocab.iter().collect();
    let table = byte_table(&items)?;
    let merges = id_pairs(merges)?;
    Ok(py.detach(|| pool::install(|| vocab::table_ids(&table, &merges)))?)
}

/// The merges of a tokenizer.json as Python gives them: "left right" (one
/// space), or 2-lists or 2-tuples of strings. Owned: list items may be
/// temporaries.
fn merge_names(merges: &Bound<'_, PyList>) -> Result<Vec<(String, String)>, Error> {
    let bad = || Error::Vocabulary("merges are \"left right\" or [left, right]".into());
    let text = |v: Bound<'_, PyAny>| -> Result<String, Error> {
        Ok(v.cast::<PyString>()
            .map_err(|_| bad())?
            .to_str()
            .map_err(|_| bad())?
            .to_owned())
    };
    merges
        .iter()
        .map(|m| {
            if let Ok(s) = m.cast::<PyString>() {
                let s = s.to_str().map_err(|_| bad())?;
                let mut parts = s.split(' ');
                return match (parts.next(), parts.next(), parts.next()) {
                    (Some(l), Some(r), None) => Ok((l.to_owned(), r.to_owned())),
                    _ => Err(bad()),
                };
            }
            let pair = if let Ok(t) = m.cast_exact::<PyTuple>() {
                (t.len() == 2).then(|| (t.get_item(0), t.get_item(1)))
            } else if let Ok(l) = m.cast_exact::<PyList>() {
                (l.len() == 2).then(|| (l.get_item(0), l.get_item(1)))
            } else {
                None
            };
            match pair {
                Some((Ok(l), Ok(r))) => Ok((text(l)?, text(r)?)),
                _ => Err(bad()),
            }
        })
        .collect()
}

/// (the bytes of each id, None for special tokens' ids and gaps; the merges
/// as id pairs) of a tokenizer.json's BPE model: `texts[k]`, written in
/// GPT-2's byte-to-unicode alphabet, has id `ids[k]`; `special_ids` are the
/// added tokens' ids; `merges` name two tokens each: a list of "left right"
/// strings or [left, right] pairs, or the strings joined by newlines. The ids must be checked
/// first (the table has max + 1 entries). NativeError for any fault (the
/// Python reference then names it).
#[pyfunction]
fn byte_level_tables<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyList>,
    ids: Vec<u32>,
    special_ids: Vec<u32>,
    merges: &Bound<'py, PyAny>,
) -> PyResult<ModelTables<'py>> {
    let items: Vec<Bound<'_, PyAny>> = texts.iter().collect();
    let texts: Vec<&str> = items
        .iter()
        .map(|t| t.cast::<PyString>().ok().and_then(|s| s.to_str().ok()))
        .collect::<Option<_>>()
        .ok_or_else(|| Error::Vocabulary("vocabulary tokens are strings".into()))?;
    if texts.len() != ids.len() {
        return Err(Error::Vocabulary("texts and ids differ in length".into()).into());
    }
    let owned;
    let joined;
    let names: Vec<(&str, &str)> = if let Ok(text) = merges.cast::<PyString>() {
        // "left right" lines joined by newlines: one string to read, not 200k.
        joined = text.clone();
        let bad = || Error::Vocabulary("merges are \"left right\" lines".into());
        let text = joined.to_str().map_err(|_| bad())?;
        // Not one empty line: "" is one merge, which is at fault.
        text.split('\n')
            .map(|line| {
                let mut parts = line.split(' ');
                match (parts.next(), parts.next(), parts.next()) {
                    (Some(l), Some(r), None) => Ok((l, r)),
                    _ => Err(bad()),
                }
            })
            .collect::<Result<_, Error>>()?
    } else {
        let list = merges
            .cast::<PyList>()
            .map_err(|_| Error::Vocabulary("merges are a list or newline-joined lines".into()))?;
        owned = merge_names(list)?;
        owned.iter().map(|(l, r)| (&l[..], &r[..])).collect()
    };
    let specials = special_ids.into_iter().collect();
    let (vocab, merges) =
        py.detach(|| pool::install(|| vocab::byte_level_tables(&texts, &ids, &specials, &names)))?;
    Ok((bytes_list(py, &vocab)?, merges))
}

/// The first fault of a merge list (id pairs in rank order, merge k making
/// `merge_ids[k]`): ("repeats", k, first) or ("early", k, maker), or None.
#[pyfunction]
fn merge_fault(
    merges: Vec<(u32, u32)>,
    merge_ids: Vec<u32>,
) -> Option<(&'static str, usize, usize)> {
    fault_tuple(vocab::merge_fault(&merges, &merge_ids))
}

fn fault_tuple(fault: Option<vocab::MergeFault>) -> Option<(&'static str, usize, usize)> {
    Some(match fault? {
        vocab::MergeFault::Repeats { k, first } => ("repeats", k, first),
        vocab::MergeFault::Early { k, maker } => ("early", k, maker),
    })
}

/// A list of each id's bytes (None for an id with none).
fn bytes_list<'py>(py: Python<'py>, table: &[Option<Vec<u8>>]) -> PyResult<Bound<'py, PyList>> {
    let items = table.iter().map(|v| match v {
        Some(v) => PyBytes::new(py, v).into_any(),
        None => py.None().into_bound(py),
    });
    PyList::new(py, items)
}

/// An imported byte-level vocabulary held by the core (`vocab::Imported`):
/// made from a file's bytes and read as it is by the encoder, so that a
/// 200k-token table becomes Python objects only when Python asks for them.
#[pyclass(frozen)]
struct Vocabulary {
    inner: vocab::Imported,
    /// `file_tables`' text, written once: the loader's thread writes it
    /// beside the encoder build, and the tokenizer's hash then takes it.
    file_text: OnceLock<String>,
}

impl Vocabulary {
    fn new(inner: vocab::Imported) -> Self {
        Vocabulary {
            inner,
            file_text: OnceLock::new(),
        }
    }
}

#[pymethods]
impl Vocabulary {
    /// A canonical .tiktoken file's table and the merges its ranks imply;
    /// NativeError for any other file (the Python reader then reads it, or
    /// names its fault).
    #[staticmethod]
    fn from_tiktoken(py: Python<'_>, data: PyBuffer<u8>) -> PyResult<Self> {
        let data = bytes_of(&data, "data")?;
        let inner = py.detach(|| pool::install(|| vocab::Imported::from_tiktoken(data)))?;
        Ok(Vocabulary::new(inner))
    }

    /// The ids the table spans: its largest id + 1.
    #[getter]
    fn size(&self) -> usize {
        self.inner.tokens.len()
    }

    /// How many ids hold a token.
    #[getter]
    fn n_tokens(&self) -> usize {
        self.inner.n_tokens()
    }

    /// The bytes of id `i` (None: no token, or beyond the table).
    fn token<'py>(&self, py: Python<'py>, i: usize) -> Option<Bound<'py, PyBytes>> {
        let token = self.inner.tokens.get(i)?.as_ref()?;
        Some(PyBytes::new(py, token))
    }

    /// Each id's bytes, None where an id has none.
    fn tokens<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        bytes_list(py, &self.inner.tokens)
    }

    /// The merges, (left id, right id) in rank order.
    fn merges(&self) -> Vec<(u32, u32)> {
        self.inner.merges.clone()
    }

    /// The id each merge yields.
    fn merge_ids(&self) -> Vec<u32> {
        self.inner.merge_ids.clone()
    }

    /// The first fault of the merges (`merge_fault`), if any.
    fn merge_fault(&self) -> Option<(&'static str, usize, usize)> {
        fault_tuple(vocab::merge_fault(
            &self.inner.merges,
            &self.inner.merge_ids,
        ))
    }

    /// Each byte's id; None when some byte has no token.
    fn byte_ids(&self) -> Option<Vec<u32>> {
        self.inner.byte_ids.clone()
    }

    /// `"vocab":[...],"merges":[...]` of the tokenmill file, UTF-8, as
    /// Python's json.dumps writes them there. Written on the first call
    /// (a caller meanwhile waits for it) and kept.
    fn file_tables<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let text = py.detach(|| {
            self.file_text
                .get_or_init(|| vocab_json::write_tables(&self.inner.tokens, &self.inner.merges))
        });
        PyBytes::new(py, text.as_bytes())
    }
}

/// A tokenmill file's merges, read by the core (`vocab_json::split_merges`).
#[pyclass(frozen)]
struct FileMerges {
    pairs: Vec<train::Pair>,
}

#[pymethods]
impl FileMerges {
    /// (the merges, the file's bytes with `[]` in their place: the rest,
    /// for Python to read). NativeError for a file the core does not take.
    #[staticmethod]
    fn split<'py>(py: Python<'py>, data: PyBuffer<u8>) -> PyResult<(Self, Bound<'py, PyBytes>)> {
        let data = bytes_of(&data, "data")?;
        let (pairs, rest) = py.detach(|| vocab_json::split_merges(data))?;
        Ok((FileMerges { pairs }, PyBytes::new(py, &rest)))
    }

    /// The merges, (left, right) in rank order.
    fn pairs(&self) -> Vec<train::Pair> {
        self.pairs.clone()
    }
}

/// The model vocab and merges of a tokenizer.json, read by the core.
#[pyclass(frozen)]
struct ModelJson {
    inner: vocab_json::Model,
}

#[pymethods]
impl ModelJson {
    /// (the model's vocab and merges, the file's bytes with `{}` and `[]`
    /// in their place: the rest, for Python to read). NativeError for a
    /// file the core does not take (see `vocab_json::split_model`).
    #[staticmethod]
    fn split<'py>(py: Python<'py>, data: PyBuffer<u8>) -> PyResult<(Self, Bound<'py, PyBytes>)> {
        let data = bytes_of(&data, "data")?;
        let (inner, rest) = py.detach(|| vocab_json::split_model(data))?;
        Ok((ModelJson { inner }, PyBytes::new(py, &rest)))
    }

    /// The vocabulary, given the added (special) tokens' ids; NativeError
    /// for any fault (the Python reader then names it).
    fn vocabulary(&self, py: Python<'_>, special_ids: Vec<u32>) -> PyResult<Vocabulary> {
        let inner = py.detach(|| pool::install(|| self.inner.imported(&special_ids)))?;
        Ok(Vocabulary::new(inner))
    }
}

/// (each id's bytes, merges as id pairs) of a tokenizer.json's model.
type ModelTables<'py> = (Bound<'py, PyList>, Vec<(u32, u32)>);

/// (merges, merge ids, byte ids) of a ranks table.
type DerivedTables = (Vec<(u32, u32)>, Vec<u32>, Option<Vec<u32>>);

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

/// Token ids, or a count table's columns, handed to Python without a copy: a
/// read-only buffer of their little-endian bytes, which PyArrow wraps as the
/// values of a column (a `bytes` object was a copy of every id, into pages
/// freshly faulted in).
#[pyclass(frozen)]
struct OwnedBytes {
    bytes: Owned,
}

enum Owned {
    Wide(Vec<u32>),
    Narrow(Vec<u16>),
    Long(Vec<u64>),
    Signed(Vec<i64>),
    Bytes(Vec<u8>),
}

impl OwnedBytes {
    fn bytes(&self) -> &[u8] {
        let (ptr, len) = match &self.bytes {
            Owned::Wide(v) => (v.as_ptr().cast::<u8>(), v.len() * 4),
            Owned::Narrow(v) => (v.as_ptr().cast::<u8>(), v.len() * 2),
            Owned::Long(v) => (v.as_ptr().cast::<u8>(), v.len() * 8),
            Owned::Signed(v) => (v.as_ptr().cast::<u8>(), v.len() * 8),
            Owned::Bytes(v) => (v.as_ptr(), v.len()),
        };
        // SAFETY: the vector's elements are `len` initialized bytes, borrowed
        // for as long as `self`.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

#[pymethods]
impl OwnedBytes {
    /// The length in bytes.
    fn __len__(&self) -> usize {
        self.bytes().len()
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: std::os::raw::c_int,
    ) -> PyResult<()> {
        let bytes = slf.get().bytes();
        // SAFETY: `view` is the caller's; the view holds a reference to
        // `slf`, whose bytes never change, for as long as it lives.
        let filled = unsafe {
            pyo3::ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                bytes.as_ptr().cast_mut().cast(),
                bytes.len() as pyo3::ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        match filled {
            0 => Ok(()),
            _ => Err(PyErr::fetch(slf.py())),
        }
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    m.add_function(wrap_pyfunction!(pretokenize, m)?)?;
    m.add_function(wrap_pyfunction!(merge_fault, m)?)?;
    m.add_function(wrap_pyfunction!(char_words, m)?)?;
    m.add_function(wrap_pyfunction!(preset_regex, m)?)?;
    m.add_function(wrap_pyfunction!(valid_utf8, m)?)?;
    m.add_function(wrap_pyfunction!(set_threads, m)?)?;
    m.add_function(wrap_pyfunction!(release_memory, m)?)?;
    m.add_function(wrap_pyfunction!(bound_retained_memory, m)?)?;
    m.add_function(wrap_pyfunction!(char_alphabet, m)?)?;
    m.add_function(wrap_pyfunction!(train_merges, m)?)?;
    m.add_function(wrap_pyfunction!(train_segmented, m)?)?;
    m.add_function(wrap_pyfunction!(parse_tiktoken, m)?)?;
    m.add_function(wrap_pyfunction!(derive_merges, m)?)?;
    m.add_function(wrap_pyfunction!(table_ids, m)?)?;
    m.add_function(wrap_pyfunction!(merges_valid, m)?)?;
    m.add_function(wrap_pyfunction!(merges_json, m)?)?;
    m.add_function(wrap_pyfunction!(byte_level_tables, m)?)?;
    m.add_function(wrap_pyfunction!(superword_stage1, m)?)?;
    m.add_function(wrap_pyfunction!(superword_split, m)?)?;
    m.add_function(wrap_pyfunction!(superword_stage2, m)?)?;
    m.add_class::<Counter>()?;
    m.add_class::<Encoder>()?;
    m.add_class::<OwnedBytes>()?;
    m.add_class::<Vocabulary>()?;
    m.add_class::<ModelJson>()?;
    m.add_class::<FileMerges>()?;
    m.add_class::<SuperwordStage1>()?;
    m.add_class::<SuperwordSplit>()?;
    Ok(())
}
