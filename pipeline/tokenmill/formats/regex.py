"""Pre-tokenization regexes between the two engines in play.

tokenmill and tiktoken run patterns with fancy-regex (Rust); Hugging Face
tokenizers runs them with Oniguruma (Ruby syntax). The character classes the
presets use (\\s, \\p{L}, \\p{N}, ...) mean the same in both, but a few
constructs do not, and are rewritten so that a pattern splits text the same
way in either engine:

| construct      | fancy-regex                  | Oniguruma (Ruby syntax)              |
| -------------- | ---------------------------- | ------------------------------------ |
| `X{n,m}+`      | possessive: `(?>X{n,m})`     | `(?:X{n,m})+` (repeat the interval)  |
| `$`            | end of text: `\\z`            | end of a line: `(?m:$)`              |
| `^`            | start of text: `\\A`          | start of a line: `(?m:^)`            |
| `{,m}`         | (not accepted)               | `{0,m}`                              |

Constructs whose meaning differs and that have no simple rewrite (\\w, \\b,
\\h, \\K, back-references, inline flags other than i, ...) raise
TokenmillError rather than being approximated.
"""

from __future__ import annotations

import re

from tokenmill.errors import TokenmillError
from tokenmill.tokenizer.ids import PATTERNS
from tokenmill.tokenizer.pattern_errors import pattern_message, quoted

FANCY = "fancy-regex"
ONIG = "oniguruma"

# Escapes that mean the same in both engines (the letter after the backslash).
_SAME_ESCAPES = set("sSdDnrtfvpPxuAz\\.^$|?*+()[]{}-/'\" #&~,:;<>=!@%`_")
_INTERVAL = re.compile(r"\{(\d*)(,?)(\d*)\}")
_GROUP_OPENERS = ("(?:", "(?=", "(?!", "(?<=", "(?<!", "(?>")
_FLAG_GROUP = re.compile(r"\(\?(-?i)(:|\))")
_NAMED_GROUP = re.compile(r"\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>")

# The regex of tokenizers' ByteLevel(use_regex=true) (its byte_level.rs).
BYTE_LEVEL_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

# Presets as other tools spell them in tokenizer.json (Oniguruma patterns),
# each split exactly as the preset splits: tests/formats/test_preset_spellings.py
# runs tokenizers' own splitting over every code point in several contexts.
# The preset's own spellings (tiktoken's, tokenmill's export) are `preset_name`'s.
ONIG_SPELLINGS = {
    BYTE_LEVEL_REGEX: "gpt2",
    # tiktoken's r50k pattern, as transformers' TikTokenConverter writes it:
    # Oniguruma's `$` ends a line, but after `\s++` only the text's end is left.
    r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s": "gpt2",
}

# Spellings that split otherwise than the preset they look like, and why.
NOT_PRESETS = {
    # tiktoken's cl100k pattern, as transformers' TikTokenConverter writes it.
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
    r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s": "cl100k's as tiktoken writes it, but Oniguruma reads "
    "\\p{N}{1,3}+ as one piece per run of digits, not pieces of three",
    # transformers' TikTokenConverter's default: cl100k's older spelling.
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+": "cl100k's older spelling, but it splits the spaces after "
    "a text's last newline from it, which cl100k keeps in one piece",
}


def fancy_to_onig(pattern: str) -> str:
    """A fancy-regex pattern (tokenmill's, tiktoken's) as Oniguruma reads it."""
    return _translate(pattern, FANCY)


def onig_to_fancy(pattern: str) -> str:
    """An Oniguruma pattern (from a tokenizer.json) as fancy-regex reads it."""
    return _translate(pattern, ONIG)


def covering(pattern: str) -> str:
    """`pattern` plus a last branch that matches each maximal run of text the
    pattern does not match, so that finding all matches (fancy-regex, which
    drops unmatched text) gives the pieces of Hugging Face's Split with
    behavior "isolated" (which keeps unmatched text as pieces). A pattern of
    that form already is returned as it is, so exporting and importing it
    again keeps it (and `[\\s\\S]`, unlike `(?s:.)`, Oniguruma reads alike)."""
    # The covered pattern is the first of the two copies of it.
    inner = pattern[3 : 3 + (len(pattern) - len(_covering(""))) // 2]
    if pattern == _covering(inner):
        return pattern
    return _covering(pattern)


def _covering(pattern: str) -> str:
    return f"(?:{pattern})|(?:(?!(?:{pattern}))[\\s\\S])+"


def _unsupported(what: str, pattern: str) -> TokenmillError:
    return TokenmillError(
        f"pre-tokenization pattern uses {what}, which Oniguruma (Hugging Face) and "
        f"fancy-regex (tokenmill, tiktoken) read differently: {quoted(pattern)}"
    )


def _escape_end(pattern: str, i: int) -> int:
    """Index just past the escape sequence starting at pattern[i] == '\\'."""
    if i + 1 >= len(pattern):
        raise TokenmillError(f"pre-tokenization pattern ends with a backslash: {quoted(pattern)}")
    c = pattern[i + 1]
    if c in "pPxu" and i + 2 < len(pattern) and pattern[i + 2] == "{":
        close = pattern.find("}", i + 2)
        if close < 0:
            raise TokenmillError(f"unclosed {{ in pre-tokenization pattern {quoted(pattern)}")
        return close + 1
    if c in "pP":
        return i + 3
    if c == "x":
        return i + 4
    if c == "u":
        return i + 6
    return i + 2


def _check_escape(esc: str, pattern: str) -> None:
    c = esc[1]
    if c in "pP" and "=" in esc:  # \p{Script=Greek}: Oniguruma knows \p{Greek} only
        raise _unsupported(f"the property {esc} (write it without its key: \\p{{Greek}})", pattern)
    if c == "u" and esc.startswith("\\u{"):  # fancy-regex's; both read \x{...}
        raise _unsupported(f"the escape {esc} (write it \\x{esc[2:]})", pattern)
    if c.isalnum() and c not in _SAME_ESCAPES:
        raise _unsupported(f"the escape {esc}", pattern)
    if c.isdigit():
        raise _unsupported(f"the back-reference {esc}", pattern)


def _class_end(pattern: str, i: int) -> int:
    """Index just past the character class starting at pattern[i] == '['."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1  # a leading ] is a literal
    while j < len(pattern):
        c = pattern[j]
        if c == "\\":
            end = _escape_end(pattern, j)
            _check_escape(pattern[j:end], pattern)
            j = end
        elif c == "[":
            if pattern.startswith("[:", j):
                raise _unsupported("a POSIX bracket class", pattern)
            j = _class_end(pattern, j)
        elif c == "]":
            return j + 1
        elif pattern.startswith(("--", "~~"), j):  # Rust's class difference; Oniguruma's ranges
            raise _unsupported(f"the class operation {pattern[j : j + 2]}", pattern)
        else:
            j += 1
    raise TokenmillError(f"unclosed [ in pre-tokenization pattern {quoted(pattern)}")


def _translate(pattern: str, source: str) -> str:
    out: list[str] = []
    atom_start: int | None = None  # index in `out` of the atom a quantifier applies to
    groups: list[int] = []  # indices in `out` of open groups
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            end = _escape_end(pattern, i)
            esc = pattern[i:end]
            _check_escape(esc, pattern)
            atom_start = len(out)
            out.append(esc)
            i = end
        elif c == "[":
            end = _class_end(pattern, i)
            atom_start = len(out)
            out.append(pattern[i:end])
            i = end
        elif c == "(":
            opener = next((o for o in _GROUP_OPENERS if pattern.startswith(o, i)), None)
            flag = _FLAG_GROUP.match(pattern, i)
            named = _NAMED_GROUP.match(pattern, i)
            if opener:
                text = opener
            elif flag and flag.group(2) == ":":
                text = flag.group(0)
            elif flag:  # (?i) to the end of the enclosing group
                out.append(flag.group(0))
                atom_start = None
                i = flag.end()
                continue
            elif named:
                text = named.group(0)
            elif pattern.startswith("(?", i):
                raise _unsupported(f"the group syntax {pattern[i : i + 4]}...", pattern)
            else:
                text = "("
            groups.append(len(out))
            out.append(text)
            atom_start = None
            i += len(text)
        elif c == ")":
            if not groups:
                raise TokenmillError(f"unbalanced ) in pre-tokenization pattern {quoted(pattern)}")
            out.append(")")
            atom_start = groups.pop()
            i += 1
        elif c == "|":
            out.append(c)
            atom_start = None
            i += 1
        elif c in "^$":
            if source == FANCY:
                out.append(r"\A" if c == "^" else r"\z")
            else:
                out.append(f"(?m:{c})")
            atom_start = None
            i += 1
        elif c in "*+?" or (c == "{" and _INTERVAL.match(pattern, i)):
            if atom_start is None:
                raise TokenmillError(
                    f"quantifier {c!r} follows nothing in pre-tokenization pattern "
                    + quoted(pattern)
                )
            if c == "{":
                m = _INTERVAL.match(pattern, i)
                assert m is not None  # it matched just above
                lo, comma, hi = m.groups()
                if not lo and not hi:
                    raise _unsupported(f"the interval {m.group(0)}", pattern)
                quant = f"{{{lo or 0}{comma}{hi}}}"
                i = m.end()
                if i < n and pattern[i] == "+":
                    atom = out[atom_start:]
                    if source == FANCY:  # possessive interval
                        out[atom_start:] = ["(?>", *atom, quant, ")"]
                    else:  # the interval, repeated
                        out[atom_start:] = ["(?:", *atom, quant, ")", "+"]
                    i += 1
                    atom_start = None
                    continue
            else:
                quant = c
                i += 1
            if i < n and pattern[i] in "?+":  # lazy or possessive: same in both engines
                quant += pattern[i]
                i += 1
            out.append(quant)
            atom_start = None
        else:
            atom_start = len(out)
            out.append(c)
            i += 1
    if groups:
        raise TokenmillError(f"unclosed ( in pre-tokenization pattern {quoted(pattern)}")
    return "".join(out)


def literal(text: str) -> str:
    """A pattern matching `text` literally (both engines)."""
    return "".join("\\" + c if c in r"\.+*?()|[]{}^$#&-~" else c for c in text)


def matches_empty(pattern: str, written: str) -> bool:
    """Whether `pattern` (`written`, as its file has it) matches the empty
    string (pieces would be lost)."""
    from tokenmill import _native

    # A first branch that matches any character: the core refuses a pattern
    # that leaves text unmatched, and this one leaves none.
    try:
        return _native.pretokenize("", rf"[\s\S]|(?:{pattern})") == [""]
    except _native.NativeError as e:  # named as written, not as wrapped here
        raise TokenmillError(pattern_message(str(e), written)) from None


def why_not_preset(pattern: str) -> str | None:
    """Why a pattern imported from tokenizer.json (`covering` an Oniguruma
    pattern read by `onig_to_fancy`) is not the preset it looks like."""
    for spelling, why in NOT_PRESETS.items():
        if pattern == covering(onig_to_fancy(spelling)):
            return f"it is {why}"
    return None


def preset_name(pattern: str) -> str | None:
    """The preset (gpt2, cl100k, o200k) that a fancy-regex pattern is, verbatim
    or as it comes back from Oniguruma (`onig_to_fancy(fancy_to_onig(...))`)."""
    from tokenmill import _native

    for name in PATTERNS:
        source = _native.preset_regex(name)
        assert source is not None  # every preset has its regex
        if pattern in (name, source, onig_to_fancy(fancy_to_onig(source))):
            return name
    return None
