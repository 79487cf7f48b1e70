"""A program that imports tokenmill keeps its environment and its allocator
settings: only tokenmill's own processes (the console script, its workers)
set them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GPT2 = Path(__file__).resolve().parents[2] / "vocabularies" / "gpt2.tiktoken"

LIBRARY_USE = """
import os, sys
import polars, pyarrow  # polars sets its allocator's variable on import: not tokenmill's doing
before = dict(os.environ)
import tokenmill._native as native
calls = []
native.bound_retained_memory = lambda: calls.append("bound_retained_memory")

import tokenmill
from tokenmill import Tokenizer
tok = Tokenizer.train(["hello world, hello tokens"] * 20, vocab_size=300)
tok.encode_batch(["hello", "world"])
enc = tokenmill.load(sys.argv[1])
assert enc.decode(enc.encode("hi there")) == "hi there"
changed = {k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)}
assert not changed, changed
assert not calls, calls
print("ok")
"""

CLI_USE = """
import os, sys
from tokenmill.entry import _set_process_environment
_set_process_environment()
print(os.environ["OPENBLAS_NUM_THREADS"], "_RJEM_MALLOC_CONF" in os.environ,
      os.environ["MIMALLOC_PURGE_DELAY"])
"""


def clean_env() -> dict[str, str]:
    import os

    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENBLAS_NUM_THREADS", "_RJEM_MALLOC_CONF", "MIMALLOC_PURGE_DELAY")
    }


def test_importing_and_using_tokenmill_changes_no_environment_variable_or_allocator():
    result = subprocess.run(
        [sys.executable, "-c", LIBRARY_USE, str(GPT2)],
        capture_output=True,
        text=True,
        env=clean_env(),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_the_console_script_sets_them_for_its_own_process():
    result = subprocess.run(
        [sys.executable, "-c", CLI_USE], capture_output=True, text=True, env=clean_env()
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "True", "1000"]
