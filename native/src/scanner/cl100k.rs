//! cl100k:
//! `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|`
//! ` ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s`

use super::classes::{
    class_at, contraction_ci, is_other, is_prefix, run_bytes, run_fast, space_run, Window, LETTER,
    NUMBER,
};

/// End of at most three `\p{N}` characters starting at `s` (which is one).
#[inline]
pub fn up_to_three_numbers(b: &[u8], s: usize) -> usize {
    let mut end = s;
    for _ in 0..3 {
        if end >= b.len() {
            break;
        }
        let (class, len) = class_at(b, end);
        if class & NUMBER == 0 {
            break;
        }
        end += len;
    }
    end
}

/// End of the piece starting at `s` (`s < b.len()`).
#[inline]
pub fn next_end(b: &[u8], s: usize) -> usize {
    // '(?i:[sdmt]|ll|ve|re)
    if b[s] == b'\'' {
        if let Some(end) = contraction_ci(b, s + 1) {
            return end;
        }
    }

    let (class, len) = class_at(b, s);
    let s1 = s + len;

    // [^\r\n\p{L}\p{N}]?+\p{L}++
    if class & LETTER != 0 {
        return run_fast(b, s, Window::letter, |c| c & LETTER != 0);
    }
    if is_prefix(class) && s1 < b.len() && class_at(b, s1).0 & LETTER != 0 {
        return run_fast(b, s1, Window::letter, |c| c & LETTER != 0);
    }

    // \p{N}{1,3}+
    if class & NUMBER != 0 {
        return up_to_three_numbers(b, s);
    }

    // ` ?[^\s\p{L}\p{N}]++[\r\n]*+`
    let newlines = |c: u8| c == b'\r' || c == b'\n';
    if b[s] == b' ' && s1 < b.len() && is_other(class_at(b, s1).0) {
        return run_bytes(b, run_fast(b, s1, Window::other, is_other), newlines);
    }
    if is_other(class) {
        return run_bytes(b, run_fast(b, s, Window::other, is_other), newlines);
    }

    // Whitespace at `s`.
    let run = space_run(b, s);
    if run.end == b.len() {
        // \s++$
        run.end
    } else if let Some(end) = run.past_last_newline {
        // \s*[\r\n]: `\s*` backtracks to the last newline of the run.
        end
    } else if run.last_start > s {
        // \s+(?!\S)
        run.last_start
    } else {
        // \s
        run.end
    }
}
