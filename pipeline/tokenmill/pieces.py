"""How a token shows as text, in `tokenize --pieces`, `stats` and the report:
its bytes decoded, and bytes that are not whole UTF-8 characters (the pieces
of a split character) as `<0xe6>`, so that they stay visible and cannot be
taken for text that holds a backslash."""

from __future__ import annotations

import codecs


def _hex_bytes(e: UnicodeError) -> tuple[str, int]:
    assert isinstance(e, UnicodeDecodeError)  # used for decoding only
    return "".join(f"<0x{b:02x}>" for b in e.object[e.start : e.end]), e.end


HEX_BYTES = "tokenmill-hex-bytes"
codecs.register_error(HEX_BYTES, _hex_bytes)


def piece(value: bytes | str | None) -> str:
    """A token's value (`Tokenizer.token_values`) as text: char mode's string and
    a special token's name as they are, an unused id as ""."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors=HEX_BYTES)
    return value
