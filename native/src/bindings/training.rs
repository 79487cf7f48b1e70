//! Training: merges learned from a count table, by BPE or by superword tokens' two stages.

use super::*;

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
    reporting(py, progress.as_ref(), |stop, done| {
        let (table, base_size) = train::symbolize(&words, &counts, alphabet.as_deref())?;
        // Ids are u32: the base tokens and merges must all have one.
        if base_size as u64 + num_merges as u64 > 1 << 32 {
            return Err(Error::Train(format!(
                "{base_size} base tokens + {num_merges} merges: more ids than 32 bits hold"
            )));
        }
        train::Trainer::new(table, base_size).train(num_merges, counter(done), stop)
    })
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
    let counts = u64s(&counts, lens.len())?;
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
    reporting(py, progress.as_ref(), |stop, done| {
        let table = train::Words::from_symbols(&symbols, &lens, &counts)?;
        let mut texts = extend::TokenTexts::new(texts);
        train::Trainer::new(table, base_size).train_where(
            num_merges,
            counter(done),
            |pair| texts.admit(pair),
            stop,
        )
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

/// A trainer's progress kept in `done`, which `reporting` hands to Python.
fn counter(done: &AtomicUsize) -> impl FnMut(usize) + '_ {
    |k| done.store(k, Ordering::Relaxed)
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
/// `progress` raises stops it, and is raised.
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
    let trained = reporting(py, progress.as_ref(), |stop, done| {
        superword::Stage1Trained::train(&words, &counts, stage1, counter(done), stop)
    })?;
    Ok(SuperwordStage1(Some(trained)))
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
    reporting(py, progress.as_ref(), |stop, done| {
        trained.stage2(
            split,
            &words,
            &superwords,
            &superword_counts,
            total,
            max_words,
            counter(done),
            stop,
        )
    })
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(char_alphabet, m)?)?;
    m.add_function(wrap_pyfunction!(train_merges, m)?)?;
    m.add_function(wrap_pyfunction!(train_segmented, m)?)?;
    m.add_function(wrap_pyfunction!(superword_stage1, m)?)?;
    m.add_function(wrap_pyfunction!(superword_split, m)?)?;
    m.add_function(wrap_pyfunction!(superword_stage2, m)?)?;
    m.add_class::<SuperwordStage1>()?;
    m.add_class::<SuperwordSplit>()?;
    Ok(())
}
