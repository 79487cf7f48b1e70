//! The core's modules, and the Python module: its bindings are in `bindings/`,
//! which holds no logic of its own.

mod arrow;
pub mod atoms;
pub mod count;
pub mod encode;
pub mod error;
pub mod extend;
pub mod longword;
pub mod normalize;
pub mod pool;
pub mod pretok;
pub mod scanner;
pub mod sharedcache;
pub mod superword;
pub mod train;
pub mod vocab;
pub mod vocab_json;
pub mod wordmap;

mod bindings;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    bindings::register(m)
}
