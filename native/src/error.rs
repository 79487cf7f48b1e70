//! The core's errors: one typed enum for everything user input can get wrong.
//! The Python bindings map every variant to the one exception
//! `tokenmill._native.NativeError` (a ValueError); nothing user input can
//! reach panics.

/// What went wrong, by kind; the message is the user-facing text.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A pre-tokenization pattern that does not compile, or one that hit the
    /// regex engine's backtracking limit on some text.
    #[error("{0}")]
    Pattern(String),
    /// Arrow buffers (offsets, data, counts) that do not describe the array
    /// they claim to.
    #[error("{0}")]
    Arrow(String),
    /// A buffer the core cannot read as one run of bytes.
    #[error("{what} is not a C-contiguous buffer (strided or non-contiguous memory)")]
    NotContiguous { what: &'static str },
    /// A word table training cannot hold, or an alphabet that does not cover it.
    #[error("{0}")]
    Train(String),
    /// Encoder tables that do not fit together.
    #[error("{0}")]
    Vocabulary(String),
    /// Work given up because a signal came (Ctrl-C, SIGTERM): the bindings
    /// raise the signal's own exception instead.
    #[error("stopped")]
    Stopped,
    /// A Counter used after `finish`.
    #[error("counter already finished")]
    Finished,
}

pub type Result<T> = std::result::Result<T, Error>;
