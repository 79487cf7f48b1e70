"""GPT-2's byte-to-unicode alphabet; it lives in `tokenmill.tokenizer.bytelevel`
(the tokenizer file format uses it too), re-exported here for the formats."""

from tokenmill.tokenizer.bytelevel import byte_to_char, from_byte_level, to_byte_level

__all__ = ["byte_to_char", "from_byte_level", "to_byte_level"]
