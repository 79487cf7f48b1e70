"""A shard holding one 200 MB document goes through the whole pipeline:
readers cut a line into blocks without copying it over and over, and memory
follows the batch (here: the one document), not the shard."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pyarrow.parquet as pq
from runs import manifest

from tokenmill.tokenizer import Tokenizer

SIZE = 200 << 20
# The whole run's peak memory, a generous bound: some copies of the document,
# its pre-token spans and its ids. Reading the shard twice over would exceed it.
MAX_RSS_BYTES = 24 * SIZE

RSS_WRAPPER = """
import resource, sys
from tokenmill.cli import main
try:
    main()
finally:
    print("maxrss_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def test_a_200_mb_document(tmp_path):
    rng = random.Random(0)
    words = "the cat sat on a mat καλημέρα κόσμε привіт 東京 naïve café self.x = 42;".split()
    chunk = " ".join(rng.choice(words) for _ in range(100_000)).encode() + b" "
    data = tmp_path / "data"
    data.mkdir()
    with open(data / "one.txt", "wb") as f:
        for _ in range(SIZE // len(chunk) + 1):
            f.write(chunk)
        f.write(b"end\n")
    size = (data / "one.txt").stat().st_size
    assert size > SIZE
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-c", RSS_WRAPPER, "run", data, out, "--vocab-size", "300"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    m = manifest(out)
    assert m["documents"] == 1 and m["inputs"][0]["bytes"] == size
    table = pq.read_table(out / "tokens" / "one.txt.parquet")
    assert table.num_rows == 1
    ids = table["ids"][0].values
    assert len(ids) == table["n_tokens"][0].as_py() == m["tokens"]
    tok = Tokenizer.load(out / "tokenizer.json")
    assert ids[-1].as_py() == tok.eos_id
    head = tok.decode(ids[:200].to_pylist())
    assert chunk.decode().startswith(head)
    assert tok.decode(ids[-40:-1].to_pylist()).endswith(" end")
    peak = int(result.stderr.rsplit("maxrss_kb", 1)[1].split()[0]) * 1024
    assert peak < MAX_RSS_BYTES, f"peak memory {peak / 1e9:.1f} GB"


def test_a_json_line_longer_than_a_read_block(tmp_path):
    """JSON Lines are cut into blocks at line ends, so a line longer than a
    block (16 MB) is read whole, as a block of its own."""
    from tokenmill.io.readers import TEXT_BLOCK_BYTES, read_batches

    doc = "word καλημέρα " * (TEXT_BLOCK_BYTES // 10)
    path = tmp_path / "long.jsonl"
    path.write_text(
        json.dumps({"text": "first"})
        + "\n"
        + json.dumps({"text": doc})
        + "\n"
        + json.dumps({"text": "last"})
        + "\n",
        encoding="utf-8",
    )
    assert path.stat().st_size > 2 * TEXT_BLOCK_BYTES
    rows, docs = [], []
    for r, d in read_batches(path):
        rows += r.to_pylist()
        docs += [len(x) for x in d.to_pylist()]
    assert rows == [0, 1, 2]
    assert docs == [5, len(doc), 4]


def test_parquet_batches_hold_a_few_megabytes_of_large_documents(tmp_path):
    """Rows per batch follow the documents' size: 8192 source files of 20 KB
    would be 160 MB of text per batch and per worker."""
    import pyarrow as pa

    from tokenmill.io.readers import BATCH_ROWS, PARQUET_BATCH_BYTES, read_batches

    doc = "x = 1;\n" * (20_000 // 7)
    n = 2000
    path = tmp_path / "code.parquet"
    docs = [f"{i}\n{doc}" for i in range(n)]  # distinct, as files are: no dictionary
    pq.write_table(pa.table({"text": docs}), path, row_group_size=n)
    batches = [len(docs) for _, docs in read_batches(path, "text")]
    assert sum(batches) == n
    assert max(batches) * len(doc) <= 2 * PARQUET_BATCH_BYTES
    small = tmp_path / "lines.parquet"
    pq.write_table(pa.table({"text": ["short line"] * (3 * BATCH_ROWS)}), small)
    assert [len(d) for _, d in read_batches(small, "text")] == [BATCH_ROWS] * 3
