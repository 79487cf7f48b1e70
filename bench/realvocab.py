"""Contenders of the whole-process encode rows, each run inside its own fresh child process:
encoding as whole processes with real vocabularies, loading a vocabulary,
and the floor under encode (I/O alone, the pre-tokenizer alone).

Parameters name the vocabulary by `ranks` (a .tiktoken file, or tokenmill's
tokenizer.json for tokenmill), `preset` (tokenmill's pattern preset, or None
for its own file) and `pattern` (the same regex, verbatim, for the peers).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from contenders import did_work, fresh, timed
from corpus import TEXT, parquet_shards, shard_texts

STANDALONE = Path(__file__).with_name("standalone.py")


def tokenmill_command() -> str:
    """The console script of the interpreter running the benchmark (its venv)."""
    return str(Path(sys.executable).with_name("tokenmill"))


def process(cmd: list[str], env: dict | None = None) -> tuple[str, dict]:
    """Run `cmd` to completion; its stdout, and its wall time (start-up
    included) and CPU time (user + system, its own and its children's) as
    {"seconds", "cpu_seconds"}: the cores it used is their quotient."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return done.stdout, {"seconds": seconds, "cpu_seconds": cpu}


def token_count(tokens_dir: Path) -> int:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    total = 0
    for path in Path(tokens_dir).glob("*.parquet"):
        total += pc.sum(pq.read_table(path, columns=["n_tokens"])["n_tokens"]).as_py() or 0
    return total


# ---- whole processes -----------------------------------------------------


def compiled_package() -> None:
    """tokenmill's modules compiled to bytecode, as `pip install` leaves an
    installed package (the peers are installed packages). The venv's editable
    install runs the source tree, where, with PYTHONDONTWRITEBYTECODE in the
    environment, every timed process would compile ~40 modules again
    (~50 ms) that no installed tokenmill compiles. Untimed; a no-op once done."""
    import compileall

    import tokenmill

    compileall.compile_dir(Path(tokenmill.__file__).parent, quiet=1)


def process_tokenmill(p: dict) -> dict:
    """`tokenmill encode` as a user runs it: start-up, loading the vocabulary,
    Parquet in and out."""
    compiled_package()
    fresh(p["tokens"])
    cmd = [tokenmill_command(), "encode", p["corpus"], p["tokens"], "--tokenizer", p["ranks"]]
    cmd += ["--no-eos", "--workers", str(p["workers"])]
    if p["preset"]:
        cmd += ["--pattern", p["preset"]]
    _, timing = process(cmd)
    return timing | {"tokens": token_count(Path(p["tokens"]))}


def process_peer(p: dict) -> dict:
    """fastokens or tiktoken in bench/standalone.py, start to exit, on
    p["threads"] threads (fastokens' rayon pool, tiktoken's num_threads)."""
    cmd = [sys.executable, str(STANDALONE), p["peer"], p["ranks"], p["pattern"], p["corpus"]]
    threads = str(p.get("threads") or os.cpu_count())
    out, timing = process([*cmd, threads], os.environ | {"RAYON_NUM_THREADS": threads})
    return timing | json.loads(out)


# ---- loading a vocabulary -----------------------------------------------


def load_tokenmill(p: dict) -> dict:
    """Ready to encode: the first encode builds the native encoder."""
    from tokenmill.formats import load_any

    start = time.perf_counter()
    load_any(Path(p["ranks"]), pattern=p["preset"]).encode("a")
    return {"seconds": time.perf_counter() - start}


def load_fastokens(p: dict) -> dict:
    import fastokens

    start = time.perf_counter()
    tok = fastokens.Tokenizer.from_tiktoken(p["ranks"], pattern=p["pattern"], special_tokens={})
    tok.encode("a")
    return {"seconds": time.perf_counter() - start}


def load_tiktoken(p: dict) -> dict:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    start = time.perf_counter()
    ranks = load_tiktoken_bpe(p["ranks"])
    enc = tiktoken.Encoding(
        name="bench", pat_str=p["pattern"], mergeable_ranks=ranks, special_tokens={}
    )
    enc.encode_ordinary("a")
    return {"seconds": time.perf_counter() - start}


# ---- the floor, on one core ----------------------------------------------


def one_core() -> None:
    """This process on one core: fastokens starts threads of its own whatever
    RAYON_NUM_THREADS says (its one-thread row used 1.6 cores before this)."""
    import os

    import pyarrow as pa

    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)


def floor_io(p: dict) -> dict:
    """PyArrow reading each shard's text and writing tokenmill's own token table
    of that shard (read beforehand) as tokenmill writes it: the same number of
    ids, the same values, no tokenizer."""
    import pyarrow.parquet as pq
    from exactness import token_shards

    one_core()
    tables = {k: pq.read_table(v) for k, v in token_shards(Path(p["tokens"])).items()}
    out = Path(p["tmp"]) / "floor-io"
    fresh(out)
    out.mkdir()
    corpus = Path(p["corpus"])
    start = time.perf_counter()
    for shard in parquet_shards(corpus):
        pq.ParquetFile(shard).read(columns=[TEXT], use_threads=False)
        table = tables[shard.relative_to(corpus).as_posix()]
        # The writer settings of pipeline/tokenmill/stages/encode.py.
        pq.write_table(
            table,
            out / shard.name,
            use_dictionary=False,
            compression="zstd",
            write_statistics=["row", "n_tokens"],
        )
    return {"seconds": time.perf_counter() - start}


def floor_pretokenize(p: dict) -> dict:
    """tokenmill's native pre-tokenizer over every document, text already in
    memory; each piece comes back as a Python str, which costs more than the
    split itself (floor_counter does without)."""
    from tokenmill import _native

    texts = [t for s in parquet_shards(p["corpus"]) for t in shard_texts(s)]
    _native.pretokenize("a", p["preset"])  # compile the regex before the timer
    start = time.perf_counter()
    for text in texts:
        _native.pretokenize(text, p["preset"])
    return {"seconds": time.perf_counter() - start}


def floor_counter(p: dict) -> dict:
    """The pre-tokenizer and a word count in native code alone (count's inner
    loop, one thread, no Python object per piece), text already in memory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tokenmill import _native
    from tokenmill.io.arrow import arrow_buffers

    arrays = [
        pq.read_table(s, columns=[TEXT])[TEXT].cast(pa.large_string()).combine_chunks()
        for s in parquet_shards(p["corpus"])
    ]
    start = time.perf_counter()
    for arr in arrays:
        counter = _native.Counter.byte(p["preset"])
        counter.add(*arrow_buffers(arr), 0, parallel=False)
        counter.finish()
    return {"seconds": time.perf_counter() - start}


def floor_encode(p: dict) -> dict:
    """tokenmill's encode stage with one worker, the vocabulary loaded beforehand."""
    from tokenmill.config import Config
    from tokenmill.formats import load_any
    from tokenmill.stages.encode import run_encode

    one_core()
    tok = load_any(Path(p["ranks"]), pattern=p["preset"])
    tok.encode("a")
    fresh(p["tokens"])
    config = Config(workers=1, eos=False)
    summary, seconds = timed(run_encode, Path(p["corpus"]), Path(p["tokens"]), tok, config)
    did_work(summary)
    return {"seconds": seconds, "tokens": summary["tokens"]}


def floor_fastokens(p: dict) -> dict:
    """The peer on one core, for comparison: fastokens reading the text with
    PyArrow and encoding it on one core, the vocabulary loaded before."""
    import os

    os.environ["RAYON_NUM_THREADS"] = "1"  # read when rayon's pool starts, on first use
    import fastokens

    one_core()
    tok = fastokens.Tokenizer.from_tiktoken(p["ranks"], pattern=p["pattern"], special_tokens={})
    tok.encode("a")
    start = time.perf_counter()
    for shard in parquet_shards(p["corpus"]):
        tok.encode_batch_flat(shard_texts(shard))
    return {"seconds": time.perf_counter() - start}


# ---- exactness ---------------------------------------------------------


def verify_peers(p: dict) -> dict:
    """tokenmill's ids (from its token shards) against fastokens' and tiktoken's
    with the same .tiktoken file and pattern, document by document."""
    from exactness import compare_flat

    result, seconds = timed(
        compare_flat, Path(p["corpus"]), Path(p["tokens"]), p["peer_ranks"], p["pattern"]
    )
    return {"seconds": seconds, **result}


CONTENDERS = {
    f.__name__: f
    for f in (
        process_tokenmill,
        process_peer,
        load_tokenmill,
        load_fastokens,
        load_tiktoken,
        floor_io,
        floor_pretokenize,
        floor_counter,
        floor_encode,
        floor_fastokens,
        verify_peers,
    )
}
