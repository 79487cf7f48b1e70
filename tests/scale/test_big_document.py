"""One large document through each stage, each stage in a process of its
own: its peak memory, less that of the same command on a tiny document (the
imports, the threads), is bounded by the document's size (docs/memory.md).
Readers hold the document once, not a copy per step, and a stage holds no
reader's buffers while it works."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenmill.io.arrow import one_array
from tokenmill.stages.encode import after_the_next
from tokenmill.stages.tokens import open_token_shard
from tokenmill.tokenizer import Tokenizer

SIZE = 64 << 20
# One word is merged whole, the slowest document to encode: half the size shows
# the same memory per byte of it (encode 5.4 S at 32 MB, 5.3 S at 64; count 3.0 S).
WORD_SIZE = 32 << 20
# encode, per byte of the document (3.5 bytes a token here): it holds the
# text while it encodes it, and its ids at 4 bytes a token at most (32-bit
# values narrowed to 16-bit as they go: 2.4 measured); the text is freed
# before the ids are written, a row of at most ROW_IDS ids at a time
# (stages/tokens.py), so that Parquet's writer builds no page of the whole
# document. A JSON line's block is freed once parsed (2.95 measured). A
# Parquet row written by pyarrow (a dictionary page, snappy) peaks while the
# reader holds its page decompressed, the dictionary's copy of it and the
# array it is copied into, beside the compressed page that PyArrow's
# allocator keeps once freed (3.55 measured; count 3.6).
ENCODE_PER_BYTE = {".txt": 2.6, ".jsonl": 3.25, ".parquet": 3.75}
# pack and bin: the document's ids joined back into one buffer, and a copy
# (2.05 and 1.9 measured).
LAYOUT_PER_BYTE = 3.0
# encode, a document of one word: the text, 4 bytes a symbol and the queue
# of positions to merge, 4 bytes each (a symbol is a byte, or a character of
# two or three bytes here: 5.3 measured; two links a symbol more took 8.1).
WORD_PER_BYTE = 6.5
SEQ = ["--seq-len", 2048]
# Letters of several scripts, of two to three UTF-8 bytes as well as one.
LETTERS = "abcdefghijklmnopqrstuvwxyzαβγδεζηθικλμνξοπρστυφχψωабвгдежзийклмнопрстуфх東京大阪中国語"

# Peak resident memory from /proc: a child's ru_maxrss may also count what it
# shared with pytest before it started.
PEAK = r"""
import atexit, re, sys

def peak():
    status = open("/proc/self/status").read()
    print("peak_kb", re.search(r"VmHWM:\s*(\d+)", status).group(1), file=sys.stderr)

atexit.register(peak)
sys.argv[0] = "tokenmill"
from tokenmill.entry import main

main()
"""

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="peak memory from /proc")


def peak(*args) -> int:
    """Peak resident bytes of `tokenmill ARGS`."""
    result = subprocess.run(
        [sys.executable, "-c", PEAK, *map(str, args)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return int(re.findall(r"peak_kb (\d+)", result.stderr)[-1]) * 1024


def growth(stage: str, big: list, tiny: list) -> int:
    """Peak of `tokenmill STAGE BIG...` less that of `tokenmill STAGE TINY...`."""
    return peak(stage, *big) - peak(stage, *tiny)


def words_text(size: int) -> str:
    """About `size` bytes of words of several scripts, 50,000 of them drawn
    Zipf-like, so that the word table is a corpus's, not a handful of words."""
    rng = random.Random(0)
    words = ["".join(rng.choices(LETTERS, k=rng.randint(1, 10))) for _ in range(50_000)]
    weights = [1 / (i + 1) for i in range(len(words))]
    chunks = [" ".join(rng.choices(words, weights, k=200_000)) + ".\n" for _ in range(3)]
    parts, n = [], 0
    while n < size:
        parts.append(chunks[len(parts) % len(chunks)])
        n += len(parts[-1].encode())
    return "".join(parts)


@pytest.fixture(scope="module")
def document(tmp_path_factory) -> tuple[str, Path]:
    """The large document, and a folder for the tiny one's inputs."""
    tiny = tmp_path_factory.mktemp("tiny")
    (tiny / "doc.txt").write_text("a tiny document\n", encoding="utf-8")
    return words_text(SIZE), tiny


def shard_ids(tokens: Path) -> pa.Array:
    """The document's ids, written over several rows of its token shard."""
    (path,) = tokens.glob("*.parquet")
    shard = open_token_shard(path)
    assert shard.documents == 1 and len(shard.continued) == 1
    (batch,) = shard.batches(columns=("ids",))
    return batch.column("ids")[0].values


def test_each_stage_holds_a_large_text_document_once(document, tmp_path):
    text, tiny = document
    path = tmp_path / "doc.txt"
    path.write_text(text, encoding="utf-8")
    size = path.stat().st_size
    big, small = tmp_path / "big", tmp_path / "tiny"
    unit = ["--txt-unit", "file"]
    count = growth(
        "count", [path, big / "counts", *unit], [tiny / "doc.txt", small / "counts", *unit]
    )
    merge = growth(
        "merge",
        [big / "counts", big / "counts.parquet"],
        [small / "counts", small / "counts.parquet"],
    )
    vocab = ["--vocab-size", 1000]
    train = growth(
        "train",
        [big / "counts.parquet", big / "tokenizer.json", *vocab],
        [small / "counts.parquet", small / "tokenizer.json", *vocab],
    )
    # Both encoded with the large one, which the layouts find beside tokens/.
    shutil.copy(big / "tokenizer.json", small / "tokenizer.json")
    tok = ["--tokenizer", big / "tokenizer.json", *unit]
    encode = growth(
        "encode", [path, big / "tokens", *tok], [tiny / "doc.txt", small / "tokens", *tok]
    )
    pack = growth(
        "pack", [big / "tokens", big / "packed", *SEQ], [small / "tokens", small / "packed", *SEQ]
    )
    bin_ = growth("bin", [big / "tokens", big / "bin"], [small / "tokens", small / "bin"])
    ids = shard_ids(big / "tokens")
    sizes = f"{size >> 20} MB, {len(ids)} tokens: count {count >> 20} MB, merge {merge >> 20} MB, "
    sizes += f"train {train >> 20} MB, encode {encode >> 20} MB, pack {pack >> 20} MB, "
    sizes += f"bin {bin_ >> 20} MB"
    # The file read once, as one buffer (joining its pieces held it twice).
    assert count <= 1.5 * size, sizes
    assert merge <= 3 * size and train <= 3 * size, sizes
    assert encode <= ENCODE_PER_BYTE[".txt"] * size, sizes
    assert pack <= LAYOUT_PER_BYTE * size and bin_ <= LAYOUT_PER_BYTE * size, sizes
    tokenizer = Tokenizer.load(big / "tokenizer.json")
    assert ids[-1].as_py() == tokenizer.eos_id
    assert text.startswith(tokenizer.decode(ids[:200].to_pylist()))
    assert text.endswith(tokenizer.decode(ids[-40:-1].to_pylist()))


def test_a_json_line_or_parquet_row_as_large(document, tmp_path):
    """A JSON line is read into one buffer (its blocks joined held it twice)
    and not split into a copy; Arrow's parser then holds the line and its
    text twice while it parses it, and the line is freed before the text is
    encoded. A Parquet reader keeps its last page,
    decoded and not, until closed: it is closed once the last row is read,
    before the row is encoded."""
    text, tiny = document
    jsonl, parquet = tmp_path / "doc.jsonl", tmp_path / "doc.parquet"
    jsonl.write_text(json.dumps({"id": 1, "text": text}, ensure_ascii=False) + "\n", "utf-8")
    pq.write_table(pa.table({"text": pa.array([text], pa.large_string())}), parquet)
    (tiny / "doc.jsonl").write_text(json.dumps({"text": "tiny"}) + "\n", encoding="utf-8")
    pq.write_table(pa.table({"text": ["tiny"]}), tiny / "doc.parquet")
    size = len(text.encode())
    Tokenizer.train([text[: 1 << 20]], vocab_size=1000).save(tmp_path / "tok.json")
    tok = ["--tokenizer", tmp_path / "tok.json"]
    count = growth("count", [jsonl, tmp_path / "c"], [tiny / "doc.jsonl", tmp_path / "tc"])
    parquet_count = growth(
        "count", [parquet, tmp_path / "pc"], [tiny / "doc.parquet", tmp_path / "tpc"]
    )
    encoded = {}
    for path in (jsonl, parquet):
        out = tmp_path / f"{path.suffix[1:]}-tokens"
        tiny_out = tmp_path / f"tiny-{path.suffix[1:]}-tokens"
        encode = growth("encode", [path, out, *tok], [tiny / path.name, tiny_out, *tok])
        encoded[path.suffix] = ids = shard_ids(out)
        sizes = f"{path.name}: {size >> 20} MB, {len(ids)} tokens: encode {encode >> 20} MB"
        assert encode <= ENCODE_PER_BYTE[path.suffix] * size, sizes
    assert count <= 4 * size, f"{size >> 20} MB: count {count >> 20} MB"
    counted = f"{size >> 20} MB: count of a Parquet row {parquet_count >> 20} MB"
    assert parquet_count <= ENCODE_PER_BYTE[".parquet"] * size, counted
    assert encoded[".jsonl"].equals(encoded[".parquet"])


def test_encode_writes_a_batch_once_the_reader_has_moved_on():
    """The reader's generators hold a batch's text until asked for the next:
    each batch's ids are written after that, the last once the reader is
    done, so a document's text and its ids' Parquet page are not held at once."""
    events = []

    def batches():
        for i in range(3):
            events.append(f"read {i}")
            yield i
        events.append("reader done")

    for i in after_the_next(batches()):
        events.append(f"write {i}")
    assert events == ["read 0", "read 1", "write 0", "read 2", "write 1", "reader done", "write 2"]


def test_a_word_as_large_as_the_document(tmp_path):
    """A document without a space is one word: counted, it is the count
    table's one entry, written without min/max statistics, which copied the
    word twice more. Encoded, it is merged whole (a merge can reach across
    all of it): a symbol costs its id and its place in the queue, not two
    links more (docs/memory.md)."""
    piece = "".join(random.Random(0).choices(LETTERS, k=1 << 20))
    path = tmp_path / "word.txt"
    path.write_bytes(piece.encode() * (WORD_SIZE // len(piece.encode()) + 1))
    (tmp_path / "tiny.txt").write_text("tiny", encoding="utf-8")
    size = path.stat().st_size
    unit = ["--txt-unit", "file"]
    count = growth(
        "count", [path, tmp_path / "c", *unit], [tmp_path / "tiny.txt", tmp_path / "tc", *unit]
    )
    (shard,) = (tmp_path / "c").glob("*.parquet")
    assert pq.read_table(shard)["count"].to_pylist() == [1]
    assert count <= 3.5 * size, f"{size >> 20} MB: count {count >> 20} MB"

    chunks = [piece[i : i + 64] for i in range(0, len(piece), 64)]
    Tokenizer.train(chunks, vocab_size=1000).save(tmp_path / "tok.json")
    tok = ["--tokenizer", tmp_path / "tok.json", *unit]
    encode = growth(
        "encode", [path, tmp_path / "e", *tok], [tmp_path / "tiny.txt", tmp_path / "te", *tok]
    )
    ids = shard_ids(tmp_path / "e")
    assert Tokenizer.load(tmp_path / "tok.json").decode(ids[:-1].to_pylist()) == path.read_text()
    assert encode <= WORD_PER_BYTE * size, f"{size >> 20} MB, {len(ids)} tokens: {encode >> 20} MB"


def test_one_chunk_is_not_copied_into_one_array():
    """A reader's column of one chunk (Arrow's JSON parser gives one) is taken
    as it is: combine_chunks copies even a lone chunk, which held a large
    document twice for as long as the parsed table lived."""
    chunk = pa.array(["a document", "another"], pa.large_string())
    one = one_array(pa.chunked_array([chunk]))
    assert one.buffers()[2].address == chunk.buffers()[2].address
    assert one_array(chunk) is chunk
    two = one_array(pa.chunked_array([chunk, chunk]))
    assert two.to_pylist() == chunk.to_pylist() * 2


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
