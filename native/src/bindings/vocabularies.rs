//! Vocabularies: .tiktoken and tokenizer.json tables, the merges they imply, and their checks.

use super::*;

/// A table of token bytes as Python gives it (a list of bytes or None),
/// borrowed: only exact `bytes` and None are taken, anything else is an
/// error (the Python reference then names it).
pub(super) fn byte_table<'a>(
    items: &'a [Bound<'_, PyAny>],
) -> Result<Vec<Option<&'a [u8]>>, Error> {
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
pub(super) fn id_pairs(merges: &Bound<'_, PyList>) -> Result<Vec<(u32, u32)>, Error> {
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
    let d = stoppable(py, |stop| vocab::derive_merges(&table, stop))?;
    Ok((d.merges, d.merge_ids, d.byte_ids))
}

/// The merges a conversion of the ranks table `vocab` lists
/// (`vocab::every_split`): every split of each token into two tokens.
#[pyfunction]
fn every_split(py: Python<'_>, vocab: &Bound<'_, PyList>) -> PyResult<Vec<(u32, u32)>> {
    let items: Vec<Bound<'_, PyAny>> = vocab.iter().collect();
    let table = byte_table(&items)?;
    Ok(py.detach(|| pool::install(|| vocab::every_split(&table)))?)
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
pub(super) struct Vocabulary {
    pub(super) inner: vocab::Imported,
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
        let inner = stoppable(py, |stop| vocab::Imported::from_tiktoken(data, stop))?;
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

    /// How many merges the table has (`merge_ids` without the copy).
    #[getter]
    fn n_merges(&self) -> usize {
        self.inner.merges.len()
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

    /// The table as a .tiktoken file's ranks, when its merges are every
    /// split of each token, as a conversion of such a file lists them
    /// (`vocab::Imported::as_ranks`); None otherwise.
    fn as_ranks(&self, py: Python<'_>) -> PyResult<Option<Vocabulary>> {
        let inner = stoppable(py, |stop| self.inner.as_ranks(stop))?;
        Ok(inner.map(Vocabulary::new))
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
pub(super) struct FileMerges {
    pub(super) pairs: Vec<train::Pair>,
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

    /// (the number of entries of the model's vocab, the id of each of
    /// `texts` there or None): how tokenizers numbers added tokens.
    fn lookup(&self, texts: Vec<String>) -> (usize, Vec<Option<u32>>) {
        self.inner.lookup(&texts)
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

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(merge_fault, m)?)?;
    m.add_function(wrap_pyfunction!(parse_tiktoken, m)?)?;
    m.add_function(wrap_pyfunction!(derive_merges, m)?)?;
    m.add_function(wrap_pyfunction!(every_split, m)?)?;
    m.add_function(wrap_pyfunction!(table_ids, m)?)?;
    m.add_function(wrap_pyfunction!(merges_valid, m)?)?;
    m.add_function(wrap_pyfunction!(merges_json, m)?)?;
    m.add_function(wrap_pyfunction!(byte_level_tables, m)?)?;
    m.add_class::<Vocabulary>()?;
    m.add_class::<ModelJson>()?;
    m.add_class::<FileMerges>()?;
    Ok(())
}
