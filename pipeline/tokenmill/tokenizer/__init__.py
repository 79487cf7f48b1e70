"""The Tokenizer: a BPE vocabulary with train, encode, decode, save and load.

The package's parts, each importing only those above it:

| module      | what                                                              |
| ----------- | ----------------------------------------------------------------- |
| `ids`       | special-token names, modes, patterns, what an id is               |
| `bytelevel` | GPT-2's byte-to-unicode alphabet (the files' way to write bytes)  |
| `modes`     | byte and char mode behind one interface: pre-tokenizer, base      |
|             | vocabulary, decoding, the native encoder                          |
| `vocab`     | the numbering: tokenmill's own or an imported explicit table      |
| `options`   | training options checked without the native core                 |
| `core`      | `Tokenizer` itself, and `word_table` (counting words for training) |
| `extend`    | growing a tokenizer: new merges learned on top of a base's        |
| `superword` | superword tokens (SuperBPE): a second stage across whitespace     |

`tokenmill.formats` (other tools' files) imports this package, never the reverse.
"""

import importlib
from typing import TYPE_CHECKING

from tokenmill.tokenizer.ids import (
    BOS,
    END_OF_WORD,
    ENDOFTEXT,
    FORMAT,
    MAX_VOCAB_SIZE,
    MODES,
    NORMALIZATIONS,
    PATTERNS,
    UNK,
    check_id,
    id_limit,
    is_id,
    show,
)
from tokenmill.tokenizer.options import (
    check_options,
    check_special_names,
    default_special_tokens,
    training_special_tokens,
)

# Loaded on first use (PEP 562): the names, ids and option checks above need no
# native core, so a Config (every command's option check) does not load it.
_CORE = ("Tokenizer", "word_table")

if TYPE_CHECKING:  # what __getattr__ loads, as type checkers see it
    from tokenmill.tokenizer.core import Tokenizer, word_table


def __getattr__(name: str) -> object:
    if name in _CORE:
        return getattr(importlib.import_module("tokenmill.tokenizer.core"), name)
    raise AttributeError(f"module 'tokenmill.tokenizer' has no attribute {name!r}")


__all__ = [
    "BOS",
    "END_OF_WORD",
    "ENDOFTEXT",
    "FORMAT",
    "MAX_VOCAB_SIZE",
    "MODES",
    "NORMALIZATIONS",
    "PATTERNS",
    "UNK",
    "Tokenizer",
    "check_id",
    "check_options",
    "check_special_names",
    "default_special_tokens",
    "id_limit",
    "is_id",
    "show",
    "training_special_tokens",
    "word_table",
]
