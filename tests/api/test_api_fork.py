"""A process forked after its parent used the native thread pool (training,
encode_batch, loading a .tiktoken file) encodes and trains: the pool it
inherits has no threads, and it builds its own (native/src/pool.rs). Before,
the child waited forever; the timeouts guard against that, not a speed."""

from __future__ import annotations

import multiprocessing
import sys

import pytest
from realtext import GPT2_FILE

import tokenmill
from tokenmill import Tokenizer

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the fork start method")

HANG = 60  # seconds: far more than the work takes


def train_small(texts: list[str]) -> list[tuple[int, int]]:
    return Tokenizer.train(texts, vocab_size=260).merges


def test_a_forked_child_encodes_and_trains_after_the_parent_used_the_pool():
    tok = Tokenizer.train(["hello world"] * 10, vocab_size=300)
    want = tok.encode_batch(["hello", "world"])  # the parent's pool, in use
    with multiprocessing.get_context("fork").Pool(2) as pool:
        got = pool.map_async(tok.encode_batch, [["hello"], ["world"]]).get(timeout=HANG)
        assert got == [want[:1], want[1:]]
        merges = pool.apply_async(train_small, (["ab ab ab"] * 3,)).get(timeout=HANG)
        assert merges == train_small(["ab ab ab"] * 3)


def test_a_forked_child_encodes_with_a_loaded_tiktoken_file():
    enc = tokenmill.load(GPT2_FILE)  # read on the pool
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply_async(enc.encode_batch, (["hello world"] * 3,)).get(timeout=HANG)
    assert got == [[31373, 995]] * 3
