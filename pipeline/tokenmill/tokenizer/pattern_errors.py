r"""The native core's messages about a custom pre-tokenization pattern, as a
user reads them: the core quotes the pattern as Rust does, each backslash
doubled (`"a*|[\\s\\S]"`), so the message showed another pattern than the
one given; and it advises ending the pattern with `|[\s\S]`, which cannot
help a pattern that matches empty text there (`a*`): the empty match wins,
and the branch after it is never tried.

>>> print(pattern_message(r'invalid pre-tokenization pattern "(\\d": Parsing error'))
invalid pre-tokenization pattern '(\d': Parsing error
"""

from __future__ import annotations

from tokenmill import _native
from tokenmill.errors import TokenmillError, escaped

_HEAD = 'pre-tokenization pattern "'
ADVICE = r"end the pattern with |[\s\S] to make each such character a piece of its own"
EMPTY_ADVICE = (
    r"it matches empty text there, and then no later branch is tried (so |[\s\S] "
    r"cannot help): make every branch take at least one character (a+, not a* or \b), "
    r"then end the pattern with |[\s\S]"
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}


def quoted(pattern: str) -> str:
    """`pattern` as written, in quotes: backslashes single, control characters
    escaped (which a regex reads alike)."""
    return f"'{escaped(pattern)}'"


def _rust_string(text: str, start: int) -> tuple[str, int] | None:
    """(the string Rust's Debug quoting at text[start] stands for, the index
    past its closing quote), or None where it is not such a quoting."""
    out: list[str] = []
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == '"':
            return "".join(out), i + 1
        if c != "\\":
            out.append(c)
            i += 1
            continue
        esc = text[i + 1 : i + 2]
        if esc in _ESCAPES:
            out.append(_ESCAPES[esc])
            i += 2
        elif esc == "u" and text[i + 2 : i + 3] == "{":
            close = text.find("}", i)
            try:
                out.append(chr(int(text[i + 3 : close], 16)))
            except ValueError:
                return None
            i = close + 1
        else:
            return None
    return None


def _or_any_character_covers(pattern: str) -> bool:
    try:
        _native.Counter.byte(f"(?:{pattern})|[\\s\\S]")  # compiles it, and tries it
    except _native.NativeError:
        return False
    return not pattern.endswith(r"|[\s\S]")  # else it missed text despite the branch


def refuse_pattern(pattern: str) -> None:
    """Refuse a custom pattern the core cannot split byte-mode text with (no
    regex, or one that leaves text unmatched), in `pattern_message`'s words,
    before a tokenizer is built with it: a caller's bad argument is told
    apart from a bad file."""
    try:
        _native.Counter.byte(pattern)  # compiles it, and tries it on a probe text
    except _native.NativeError as e:
        raise TokenmillError(pattern_message(str(e), pattern)) from None


def pattern_message(message: str, written: str | None = None) -> str:
    """`message` of the core with the pattern it names as `written` (default:
    as the core compiled it) in quotes, its backslashes single, and with advice
    that works for it."""
    start = message.find(_HEAD)
    if start < 0:
        return message
    start += len(_HEAD) - 1
    parsed = _rust_string(message, start)
    if parsed is None:
        return message
    compiled, end = parsed
    shown = written if written is not None else compiled
    text = message[:start] + quoted(shown) + message[end:]
    if text.endswith(ADVICE) and not _or_any_character_covers(compiled):
        text = text[: -len(ADVICE)] + EMPTY_ADVICE
    return text
