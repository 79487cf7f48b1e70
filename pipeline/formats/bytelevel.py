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
def char_to_byte() -> dict[str, int]:
    return {c: b for b, c in enumerate(byte_to_char())}


def to_byte_level(value: bytes) -> str:
    table = byte_to_char()
    return "".join(table[b] for b in value)


def from_byte_level(text: str) -> bytes:
    """The bytes a byte-level string stands for; ValueError if it is not one."""
    table = char_to_byte()
    try:
        return bytes(table[c] for c in text)
    except KeyError as e:
        raise ValueError(f"{text!r} is not in the byte-level alphabet ({e.args[0]!r})") from None
