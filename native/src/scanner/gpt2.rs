//! r50k / p50k / gpt2:
//! `'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s`

use super::classes::{
    class_at, contraction_cs, is_other, run_fast, space_run, Window, LETTER, NUMBER, SPACE,
};

/// End of the piece starting at `s` (`s < b.len()`).
#[inline]
pub fn next_end(b: &[u8], s: usize) -> usize {
    // '(?:[sdmt]|ll|ve|re)
    if b[s] == b'\'' {
        if let Some(end) = contraction_cs(b, s + 1) {
            return end;
        }
    }

    // ` ?\p{L}++ | ` ?\p{N}++ | ` ?[^\s\p{L}\p{N}]++`: the optional space is
    // only useful when a non-space follows; otherwise (a space followed by
    // whitespace or the end) all three fail and we fall through.
    let (mut class, _) = class_at(b, s);
    let mut start = s;
    if b[s] == b' ' && s + 1 < b.len() {
        let (next, _) = class_at(b, s + 1);
        if next & SPACE == 0 {
            class = next;
            start = s + 1;
        }
    }
    if class & LETTER != 0 {
        return run_fast(b, start, Window::letter, |c| c & LETTER != 0);
    }
    if class & NUMBER != 0 {
        return run_fast(b, start, |w| w.digit, |c| c & NUMBER != 0);
    }
    if is_other(class) {
        return run_fast(b, start, Window::other, is_other);
    }

    // Whitespace at `s`.
    let run = space_run(b, s);
    if run.end == b.len() {
        // \s++$ (possessive, so `$` before a final "\n" never comes into play).
        run.end
    } else if run.last_start > s {
        // \s+(?!\S): back off one character so the last space can prefix the
        // next piece.
        run.last_start
    } else {
        // \s
        run.end
    }
}
