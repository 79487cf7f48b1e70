"""Ctrl-C or SIGTERM while `tokenmill train` learns merges (ordinary BPE,
--extend, stage 1 of superword tokens): the native training held the signal
off until it had learned every merge, minutes on a large vocabulary. Now it
stops within a merge of the signal, in the one line and status of any stage,
leaving no tokenizer file."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from runs import HANG_GUARD_S

from tokenmill import Tokenizer

# Far fewer merges than 200,000 random ten-letter words allow (about 600,000),
# so that training lasts a good while: its first merges, each of a pair met in
# most words, come in ms (about a hundred in the first poll's 50 ms).
VOCAB = 300_000

# `tokenmill` whose progress callback prints the merges made so far: when
# training has begun, and how far it got.
CHILD = (
    "import tokenmill.faults\n"
    "tokenmill.faults.checkpoint = lambda stage, step: print(step, flush=True)\n"
    "from tokenmill.entry import main\n"
    "main()\n"
)


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> Path:
    """A word table, a small stage-2 table, and a small base tokenizer."""
    folder = tmp_path_factory.mktemp("tables")
    n, length = 200_000, 10
    rng = np.random.default_rng(0)
    letters = rng.integers(ord("a"), ord("z") + 1, size=n * length, dtype=np.uint8)
    offsets = np.arange(0, n * length + 1, length, dtype=np.int64)
    words = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(letters))
    counts = pa.array(rng.integers(1, 50, size=n, dtype=np.uint64))
    pq.write_table(pa.table({"word": words, "count": counts}), folder / "counts.parquet")
    stage2 = {"word": [" ab cd", " ef gh"], "count": pa.array([3, 2], pa.uint64())}
    pq.write_table(pa.table(stage2), folder / "stage2.parquet")
    Tokenizer.train(["abcd efgh"], vocab_size=262).save(folder / "base.json")
    return folder


@pytest.mark.parametrize(
    ("options", "signum", "line"),
    [
        ((), signal.SIGINT, "interrupted"),
        (("--extend", "base.json"), signal.SIGTERM, "terminated (SIGTERM)"),
        (
            ("--superword-at", VOCAB - 100, "--superword-counts", "stage2.parquet"),
            signal.SIGTERM,
            "terminated (SIGTERM)",
        ),
    ],
    ids=["bpe", "extend", "superword"],
)
def test_a_signal_stops_training_within_a_merge(tables, tmp_path, options, signum, line):
    tokenizer = tmp_path / "tokenizer.json"
    options = [tables / o if str(o).endswith((".json", ".parquet")) else o for o in options]
    args = ["train", tables / "counts.parquet", tokenizer, "--vocab-size", VOCAB, *options]
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    begun = proc.stdout.readline()
    assert begun.strip().isdigit(), proc.communicate(timeout=HANG_GUARD_S)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert (proc.returncode, err) == (128 + signum, f"{line}\n")
    reached = max(int(k) for k in [begun, *out.split()])
    assert reached < VOCAB // 10, "stopped only once training ended"
    assert list(tmp_path.iterdir()) == []
