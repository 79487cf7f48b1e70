"""GPT-2's byte-to-unicode alphabet: how byte-level vocabularies write bytes as text.

Each byte maps to one printable character (printable ASCII and Latin-1 map to
themselves, the rest to U+0100 onwards), so a token's bytes become a string
that JSON can hold and a person can read: b" the" is "Ġthe".
"""

from __future__ import annotations

from functools import cache


@cache
def byte_to_char() -> tuple[str, ...]:
    """The character of each byte value."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return tuple(chars[b] for b in range(256))


@cache
def _decode_table() -> dict[int, str]:
    """str.translate table: each byte-level character to the latin-1 character
    of its byte; other characters below U+0100 to one latin-1 cannot encode,
    so that anything outside the alphabet fails the encode that follows."""
    table = {i: "\uffff" for i in range(256)}
    table.update({ord(c): chr(b) for b, c in enumerate(byte_to_char())})
    return table


# translate + latin-1 run in C: loading a 100k-token vocabulary this way takes
# a few milliseconds, where a Python loop per character took tens.
def to_byte_level(value: bytes) -> str:
    # The tuple indexed by ordinal is itself a translate table.
    return value.decode("latin-1").translate(byte_to_char())


def from_byte_level(text: str) -> bytes:
    """The bytes a byte-level string stands for; ValueError if it is not one."""
    try:
        return text.translate(_decode_table()).encode("latin-1")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"{text!r} is not in the byte-level alphabet ({text[e.start]!r})"
        ) from None
