//! o200k (also o200k_harmony), the `|`-join of:
//! ```text
//! [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! \p{N}{1,3}
//!  ?[^\s\p{L}\p{N}]+[\r\n/]*
//! \s*[\r\n]+
//! \s+(?!\S)
//! \s+
//! ```
//! None of these quantifiers is possessive, so the scanner reproduces the
//! backtracking order of the first two alternatives exactly; see [`word_body_1`].
//! Below, "UPPER" is `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]` and "LOWER" is
//! `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`; they overlap on Lm, Lo and M.

use super::cl100k::up_to_three_numbers;
use super::classes::{
    class_at, contraction_ci, is_other, is_prefix, run_bytes, run_fast, space_run, Window, LOWER,
    NUMBER, UPPER,
};

/// `UPPER*LOWER+` at `t`, with the backtracking of a regex engine: `UPPER*`
/// first takes the maximal run `t..k`; if the character at `k` is LOWER,
/// `LOWER+` takes the run from `k`. Otherwise `UPPER*` gives back characters
/// until `LOWER+` can start, i.e. at the last character of `t..k` that is also
/// LOWER (Lm, Lo or M); `LOWER+` then stops right after it, because what
/// follows it inside `t..k` is Lu/Lt only, and the character at `k` is not
/// LOWER.
#[inline(always)]
fn word_body_1(b: &[u8], t: usize) -> Option<usize> {
    let mut i = t;
    let mut past_last_lower = None;
    while i < b.len() {
        let (class, len) = class_at(b, i);
        if class & UPPER == 0 {
            if class & LOWER != 0 {
                return Some(lower_run(b, i + len));
            }
            break;
        }
        i += len;
        if class & LOWER != 0 {
            past_last_lower = Some(i);
        }
    }
    past_last_lower
}

/// `UPPER+LOWER*` at `t`: no backtracking is ever needed.
#[inline(always)]
fn word_body_2(b: &[u8], t: usize) -> Option<usize> {
    let k = run_fast(b, t, |w| w.upper, |c| c & UPPER != 0);
    (k > t).then(|| lower_run(b, k))
}

/// End of the run of LOWER characters from `i`.
#[inline(always)]
fn lower_run(b: &[u8], i: usize) -> usize {
    run_fast(b, i, |w| w.lower, |c| c & LOWER != 0)
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` at `i`.
#[inline]
fn contraction_suffix(b: &[u8], i: usize) -> usize {
    if b.get(i) == Some(&b'\'') {
        contraction_ci(b, i + 1).unwrap_or(i)
    } else {
        i
    }
}

/// The first two alternatives, in the order a backtracking engine tries them:
/// alternative 1 with the optional prefix taken, then without it, then the
/// same for alternative 2. (A prefix character can itself be a mark, which is
/// both a prefix and UPPER/LOWER, so dropping the prefix matters.)
#[inline]
fn word(b: &[u8], s: usize, class: u8, s1: usize) -> Option<usize> {
    let prefixed = is_prefix(class) && s1 < b.len();
    let word_start = class & (UPPER | LOWER) != 0;
    let attempt = |body: fn(&[u8], usize) -> Option<usize>| {
        let with_prefix = if prefixed { body(b, s1) } else { None };
        with_prefix.or_else(|| if word_start { body(b, s) } else { None })
    };
    let end = attempt(word_body_1).or_else(|| attempt(word_body_2))?;
    Some(contraction_suffix(b, end))
}

/// End of the piece starting at `s` (`s < b.len()`).
#[inline]
pub fn next_end(b: &[u8], s: usize) -> usize {
    let (class, len) = class_at(b, s);
    let s1 = s + len;

    if let Some(end) = word(b, s, class, s1) {
        return end;
    }

    // \p{N}{1,3}
    if class & NUMBER != 0 {
        return up_to_three_numbers(b, s);
    }

    // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
    let tail = |c: u8| c == b'\r' || c == b'\n' || c == b'/';
    if b[s] == b' ' && s1 < b.len() && is_other(class_at(b, s1).0) {
        return run_bytes(b, run_fast(b, s1, Window::other, is_other), tail);
    }
    if is_other(class) {
        return run_bytes(b, run_fast(b, s, Window::other, is_other), tail);
    }

    // Whitespace at `s`.
    let run = space_run(b, s);
    if let Some(end) = run.past_last_newline {
        // \s*[\r\n]+: `\s*` backtracks to the last newline of the run, and
        // `[\r\n]+` cannot extend past it (the run's later characters are not
        // newlines, and the character after the run is not whitespace).
        end
    } else if run.end == b.len() || run.last_start == s {
        // \s+(?!\S) at the end of the text, or \s+ for a single character.
        run.end
    } else {
        // \s+(?!\S)
        run.last_start
    }
}
