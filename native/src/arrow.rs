//! Views over Arrow `large_string` buffers handed over from PyArrow, so
//! documents reach the core without becoming Python objects.

use crate::error::{Error, Result};

/// The strings `start..start + n` of a large_string array given its raw
/// offsets (little-endian i64) and data buffers.
pub fn string_views<'a>(
    offsets: &[u8],
    data: &'a [u8],
    start: usize,
    n: usize,
) -> Result<Vec<&'a str>> {
    let offset_at = |i: usize| -> Result<usize> {
        let bytes = offsets
            .get(i * 8..i * 8 + 8)
            .ok_or_else(|| Error::Arrow("offsets buffer too short".into()))?;
        Ok(i64::from_le_bytes(bytes.try_into().unwrap()) as usize)
    };
    if n == 0 {
        return Ok(Vec::new());
    }
    let (lo, hi) = (offset_at(start)?, offset_at(start + n)?);
    let text = data
        .get(lo..hi)
        .ok_or_else(|| Error::Arrow("data buffer too short".into()))?;
    // Validated once per batch; simdutf8 does it several times faster than std.
    let text = simdutf8::compat::from_utf8(text)
        .map_err(|e| Error::Arrow(format!("invalid UTF-8: {e}")))?;
    let mut views = Vec::with_capacity(n);
    let mut a = lo;
    for i in start + 1..=start + n {
        let b = offset_at(i)?;
        let s = text
            .get(a - lo..b - lo)
            .ok_or_else(|| Error::Arrow(format!("offset {b} is not on a character boundary")))?;
        views.push(s);
        a = b;
    }
    Ok(views)
}

/// Little-endian bytes of a slice of plain integers.
pub fn le_bytes<T: Copy, const N: usize>(values: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * N);
    for &v in values {
        out.extend_from_slice(&to(v));
    }
    out
}
