"""How a token shows as text, in `tokenize --pieces`, `stats` and the report:
its bytes decoded, and bytes that are not whole UTF-8 characters (the pieces
of a split character) as `<0xe6>`, so that they stay visible and cannot be
taken for text that holds a backslash. Char mode's end-of-word symbol shows
as `</w>`; a `<` of the token's own that starts `</w>` (char mode) or `<0x`
shows as `<0x3c>`, so that neither form is ever the token's own characters."""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING

from tokenmill.tokenizer.ids import END_OF_WORD

if TYPE_CHECKING:
    from tokenmill.tokenizer import Tokenizer


def _hex_bytes(e: UnicodeError) -> tuple[str, int]:
    assert isinstance(e, UnicodeDecodeError)  # used for decoding only
    return "".join(f"<0x{b:02x}>" for b in e.object[e.start : e.end]), e.end


HEX_BYTES = "tokenmill-hex-bytes"
codecs.register_error(HEX_BYTES, _hex_bytes)
LESS_THAN = "<0x3c>"


def piece(value: bytes | str | None) -> str:
    """A token's value (`Tokenizer.token_values`) as text: char mode's string and
    a special token's name as they are, an unused id as ""."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors=HEX_BYTES)
    return value


def token_pieces(tok: Tokenizer, ids: list[int]) -> list[str]:
    """The tokens `ids` of `tok` as text, each shown as the module says."""
    specials = set(tok.special_map.values())
    values, texts = tok.token_values, tok.text_values
    shown = []
    for i in ids:
        value = values[i]
        if value is None or i in specials:
            shown.append(piece(value))
        elif isinstance(value, bytes):
            shown.append(piece(value.replace(b"<0x", f"{LESS_THAN}0x".encode())))
        else:
            # The end-of-word symbol is a space in text_values: no word holds one.
            text = texts[i]
            assert isinstance(text, str)  # char mode's, as its token_values
            text = text.replace("<0x", f"{LESS_THAN}0x")
            text = text.replace(END_OF_WORD, f"{LESS_THAN}/w>")
            shown.append(text.replace(" ", END_OF_WORD))
    return shown
