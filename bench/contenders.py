"""What each contender does, run inside its own fresh child process.

Every function takes the parameters the parent sent (a dict) and returns a
dict with at least `seconds`: the wall time of the measured work, Parquet
reading included, library imports and vocabulary conversion excluded.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from corpus import TEXT, iter_texts, parquet_shards, read_texts, shard_texts
from vocab import CL100K, GPT2_RANKS, hf_pre_tokenizer, hf_tokenizer, tiktoken_encoding


def timed(fn, *args, **kwargs) -> tuple[object, float]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def fresh(*paths: Path) -> None:
    """Remove earlier outputs: tokenmill keeps outputs a rerun could reuse.
    Then sync, so the file system's work for the removal (journal commit,
    discards) is done before the timer starts rather than during the run."""
    for path in map(Path, paths):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    os.sync()


def did_work(*summaries: dict) -> None:
    """Fail if a tokenmill stage reused an output instead of doing the work."""
    for s in summaries:
        if s.get("reused"):
            raise SystemExit(f"tokenmill {s.get('stage')} reused outputs: timing would be void")


# ---- training ----------------------------------------------------------


def train_tokenmill(p: dict) -> dict:
    """count + merge + train through the stage functions `tokenmill run` uses."""
    from tokenmill.config import Config
    from tokenmill.stages.count import run_count
    from tokenmill.stages.merge import run_merge
    from tokenmill.stages.train import run_train

    tmp = Path(p["tmp"])
    # tokenmill's --vocab-size also counts <|endoftext|>: one more for the same merges.
    config = Config(pattern="cl100k", workers=p["workers"], vocab_size=p["vocab_size"] + 1)
    fresh(tmp / "counts", tmp / "counts.parquet", p["tokenizer"])
    start = time.perf_counter()
    count = run_count(Path(p["corpus"]), tmp / "counts", config)
    merge = run_merge(tmp / "counts", tmp / "counts.parquet")
    train = run_train(tmp / "counts.parquet", Path(p["tokenizer"]), config)
    seconds = time.perf_counter() - start
    did_work(count, merge, train)
    return {
        "seconds": seconds,
        "merges": train["merges"],
        "words": merge["words"],
        "stages": {s["stage"]: s["seconds"] for s in (count, merge, train)},
    }


def train_rustbpe(p: dict) -> dict:
    import rustbpe

    tok = rustbpe.Tokenizer()
    texts = iter_texts(parquet_shards(p["corpus"]))
    _, seconds = timed(tok.train_from_iterator, texts, vocab_size=p["vocab_size"], pattern=CL100K)
    # rustbpe's vocab_size is 256 + merges; it adds no special tokens.
    return {"seconds": seconds, "merges": tok.vocab_size - 256}


def train_tokenizers(p: dict) -> dict:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = hf_pre_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=p["vocab_size"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = iter_texts(parquet_shards(p["corpus"]))
    _, seconds = timed(tok.train_from_iterator, texts, trainer)
    # The 256 byte characters are the base; no special tokens were asked for.
    return {"seconds": seconds, "merges": len(tok.get_vocab()) - 256}


# ---- encoding ----------------------------------------------------------


def encode_tokenmill(p: dict) -> dict:
    from tokenmill.config import Config
    from tokenmill.stages.encode import run_encode

    config = Config(workers=p["workers"], eos=False)
    fresh(p["tokens"])
    summary, seconds = timed(
        run_encode, Path(p["corpus"]), Path(p["tokens"]), Path(p["tokenizer"]), config
    )
    did_work(summary)
    return {"seconds": seconds, "tokens": summary["tokens"]}


def encode_tiktoken(p: dict) -> dict:
    enc = tiktoken_encoding(p["tokenizer"])
    shards = parquet_shards(p["corpus"])
    start = time.perf_counter()
    ids = enc.encode_ordinary_batch(read_texts(shards), num_threads=os.cpu_count())
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "tokens": sum(map(len, ids))}


def encode_tokenizers(p: dict) -> dict:
    hf = hf_tokenizer(p["tokenizer"])
    shards = parquet_shards(p["corpus"])
    start = time.perf_counter()
    encodings = hf.encode_batch(read_texts(shards), add_special_tokens=False)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "tokens": sum(len(e.ids) for e in encodings)}


# ---- scaling -----------------------------------------------------------


def count_tokenmill(p: dict) -> dict:
    from tokenmill.config import Config
    from tokenmill.stages.count import run_count

    config = Config(pattern="cl100k", workers=p["workers"])
    fresh(p["counts"])
    summary, seconds = timed(run_count, Path(p["corpus"]), Path(p["counts"]), config)
    did_work(summary)
    return {"seconds": seconds}


def _on_threads(fn, items: list, workers: int) -> float:
    """Wall seconds to apply `fn` to every item, in order, on `workers` threads."""
    from concurrent.futures import ThreadPoolExecutor

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(fn, items))
    return time.perf_counter() - start


def reference_parquet(p: dict) -> dict:
    """The machine's scaling on work like the I/O half of encode, with no
    tokenmill code: PyArrow reads each shard's text and writes it back with
    zstd, a shard per thread (PyArrow releases the GIL)."""
    import pyarrow.parquet as pq

    out = Path(p["tmp"]) / "reference-parquet"
    fresh(out)
    out.mkdir()

    def round_trip(shard: Path) -> None:
        table = pq.ParquetFile(shard).read(columns=[TEXT], use_threads=False)
        pq.write_table(table, out / shard.name, compression="zstd")

    shards = sorted(parquet_shards(p["corpus"]), key=lambda s: -s.stat().st_size)
    return {"seconds": _on_threads(round_trip, shards, p["workers"])}


SHA256_PASSES = 8


def reference_sha256(p: dict) -> dict:
    """The machine's scaling on compute that stays in a core's own caches:
    SHA-256 over each shard's text, a shard per thread (hashlib releases the
    GIL), SHA256_PASSES times."""
    import hashlib

    shards = ["\n".join(shard_texts(s)).encode() for s in parquet_shards(p["corpus"])]
    texts = sorted(shards * SHA256_PASSES, key=len, reverse=True)
    seconds = _on_threads(lambda b: hashlib.sha256(b).digest(), texts, p["workers"])
    return {"seconds": seconds, "bytes": sum(map(len, texts))}


# ---- limits --------------------------------------------------------------


def gpt2_match(p: dict) -> dict:
    """The real GPT-2 vocabulary imported by tokenmill vs tiktoken with the same
    file, document by document over the corpus."""
    import pyarrow as pa
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from tokenmill import _native
    from tokenmill.formats import load_any

    tok = load_any(GPT2_RANKS, pattern="gpt2")
    enc = tiktoken.Encoding(
        name="gpt2",
        pat_str=_native.preset_regex("gpt2"),
        mergeable_ranks=load_tiktoken_bpe(str(GPT2_RANKS)),
        special_tokens={},
    )
    texts = read_texts(parquet_shards(p["corpus"]))
    (ids, _), seconds = timed(tok.encode_arrow, pa.array(texts, pa.large_string()), eos=False)
    ours = ids.to_pylist()
    theirs = enc.encode_ordinary_batch(texts, num_threads=os.cpu_count())
    same = sum(a == b for a, b in zip(ours, theirs, strict=True))
    return {"seconds": seconds, "documents": len(texts), "identical": same}


def long_words(p: dict) -> dict:
    """Encoding time of 10 MB documents with no pre-token boundary to speak of."""
    import random

    from tokenmill.tokenizer import Tokenizer

    tok = Tokenizer.load(p["tokenizer"])
    rng = random.Random(0)
    cases = {
        "one 10 MB word (one letter)": "a" * 10_000_000,
        "one 10 MB word (random letters)": "".join(rng.choices("etaoinshrdlu", k=10_000_000)),
        "10 MB without whitespace (code)": ("x=f(a,b)[i];" * 900_000)[:10_000_000],
    }
    seconds = {}
    for name, text in cases.items():
        ids, seconds[name] = timed(tok.encode, text)
        assert tok.decode(ids) == text
    total = sum(len(t.encode()) for t in cases.values())
    return {"seconds": sum(seconds.values()), "cases": seconds, "bytes": total}


# ---- exactness ---------------------------------------------------------


def verify(p: dict) -> dict:
    from exactness import compare

    result, seconds = timed(compare, Path(p["corpus"]), Path(p["tokens"]), Path(p["tokenizer"]))
    return {"seconds": seconds, **result}


CONTENDERS = {
    f.__name__: f
    for f in (
        train_tokenmill,
        train_rustbpe,
        train_tokenizers,
        encode_tokenmill,
        encode_tiktoken,
        encode_tokenizers,
        count_tokenmill,
        reference_parquet,
        reference_sha256,
        gpt2_match,
        long_words,
        verify,
    )
}
