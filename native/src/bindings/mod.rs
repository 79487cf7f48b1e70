//! The Python bindings, one file per part of the core; the logic lives in
//! the core's own modules. This file: what they share.

mod encoding;
mod text;
mod training;
mod vocabularies;

use crate::{arrow, count, extend, pool, pretok, superword, train, vocab, vocab_json};

use crate::encode::{whole_words as whole_word_map, Alphabet, Encoder as CoreEncoder};
use crate::error::Error;
use crate::pretok::PreTokenizer;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyList, PyString, PyTuple};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::OnceLock;
use std::time::Duration;

pyo3::create_exception!(
    _native,
    NativeError,
    PyValueError,
    "Any error of the native core: bad input, never a bug (those would panic)."
);

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        match e {
            // Only `stoppable` stops work, and raises the signal's own error.
            Error::Stopped => pyo3::exceptions::PyKeyboardInterrupt::new_err(()),
            e => NativeError::new_err(e.to_string()),
        }
    }
}

/// How often `stoppable` looks for a signal.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// `work` on the native pool with the GIL released, ended early by a signal:
/// Python runs its signal handlers (Ctrl-C's KeyboardInterrupt, the CLI's
/// SIGTERM handler) only when the main thread runs Python code, so a long
/// native call would otherwise hold them off until it returned. This thread
/// waits for `work` on another and runs the handlers every `SIGNAL_POLL`;
/// once one raises, `work` is told to stop (it looks at the flag often) and
/// its exception is raised. On any thread but the main one handlers never
/// run here, and `work` goes to its end.
fn stoppable<R: Send>(
    py: Python<'_>,
    work: impl FnOnce(&AtomicBool) -> Result<R, Error> + Send,
) -> PyResult<R> {
    reporting(py, None, |stop, _| work(stop))
}

/// `stoppable`, and `progress(k)` called on this thread with the count
/// `work` keeps in its `AtomicUsize` (merges made): every `SIGNAL_POLL`
/// where it moved, and once more at the end. Here, not on `work`'s thread,
/// a signal that comes while the callback runs (a progress bar's write
/// blocked, a test's pause) is handled at once, and an error the callback
/// raises stops `work` as a signal does.
fn reporting<R: Send>(
    py: Python<'_>,
    progress: Option<&Py<PyAny>>,
    work: impl FnOnce(&AtomicBool, &AtomicUsize) -> Result<R, Error> + Send,
) -> PyResult<R> {
    let stop = AtomicBool::new(false);
    let done = AtomicUsize::new(0);
    let mut reported = 0;
    let mut report = |py: Python<'_>| -> PyResult<()> {
        py.check_signals()?;
        let k = done.load(Ordering::Relaxed);
        if let Some(cb) = progress.filter(|_| k != reported) {
            reported = k;
            cb.call1(py, (k,))?;
        }
        Ok(())
    };
    let mut failure: Option<PyErr> = None;
    let result = py.detach(|| {
        std::thread::scope(|s| {
            let (tx, rx) = channel();
            let (flag, count) = (&stop, &done);
            s.spawn(move || {
                let _ = tx.send(pool::install(|| work(flag, count)));
            });
            loop {
                match rx.recv_timeout(SIGNAL_POLL) {
                    Ok(result) => return result,
                    Err(RecvTimeoutError::Timeout) if failure.is_none() => {
                        if let Err(e) = Python::attach(&mut report) {
                            failure = Some(e);
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    // `work` panicked: the scope's end raises the panic.
                    Err(RecvTimeoutError::Disconnected) => return Err(Error::Stopped),
                }
            }
        })
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let result = result?;
    report(py)?;
    Ok(result)
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

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    m.add_class::<OwnedBytes>()?;
    text::register(m)?;
    training::register(m)?;
    vocabularies::register(m)?;
    encoding::register(m)?;
    Ok(())
}
