"""The examples in the docstrings of the public Python API run, as tests: a
documented example that stopped working fails `make test` (as tiktoken's
core.py examples do). The modules are listed rather than collected with
--doctest-modules, which would import every module of the package (Ray's
executor among them)."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # the examples read vocabularies/ from here

MODULES = [
    "tokenmill",
    "tokenmill.errors",
    "tokenmill.tokenizer",
    "tokenmill.tokenizer.core",
    "tokenmill.tokenizer.ids",
    "tokenmill.tokenizer.options",
    "tokenmill.tokenizer.modes",
    "tokenmill.tokenizer.pattern_errors",
    "tokenmill.tokenizer.vocab",
    "tokenmill.tokenizer.bytelevel",
    "tokenmill.tokenizer.superword",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    module = importlib.import_module(name)
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"


def test_the_api_has_examples():
    """Each method the README names for the Python API shows how it is used."""
    import tokenmill
    from tokenmill import Tokenizer

    public = [
        "train",
        "train_from_word_counts",
        "load",
        "encode",
        "encode_ordinary",
        "encode_batch",
        "encode_ordinary_batch",
        "decode",
        "save",
    ]
    for method in public:
        assert ">>>" in getattr(Tokenizer, method).__doc__, method
    assert ">>>" in Tokenizer.__doc__
    assert ">>>" in tokenmill.load.__doc__


def test_package_exports_tokenizer_lazily():
    """`import tokenmill` stays cheap (the CLI's entry point); the name loads on use."""
    import subprocess
    import sys

    code = (
        "import sys, tokenmill\n"
        "from tokenmill import TokenmillError, load\n"
        "assert 'pyarrow' not in sys.modules and 'tokenmill.tokenizer' not in sys.modules\n"
        "from tokenmill import Tokenizer\n"
        "from tokenmill.tokenizer import Tokenizer as T\n"
        "assert Tokenizer is T\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
