"""Contenders for gigatoken and for start-up, each run inside its own fresh
child process: gigatoken encoding as a whole process (the same job as
`tokenmill encode`, or writing nothing), its ids against tokenmill's,
gigatoken on one core, and start-up as whole processes.

Parameters name the vocabulary by `ranks` (a .tiktoken file), `preset`
(tokenmill's pattern preset) and `pretokenizer` (gigatoken's name for the
same pattern).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from contenders import fresh, timed
from corpus import TEXT, parquet_shards
from realvocab import compiled_package, one_core, process, tokenmill_command

GIGATOKEN = Path(__file__).with_name("gigatoken_process.py")


def process_gigatoken(p: dict) -> dict:
    """bench/gigatoken_process.py, start to exit, on p["threads"] threads;
    with p["out"], writing its ids there (the same job as tokenmill's)."""
    cmd = [sys.executable, str(GIGATOKEN), p["ranks"], p["pretokenizer"], p["corpus"]]
    if p.get("out"):
        fresh(p["out"])
        cmd.append(p["out"])
    out, timing = process(cmd, os.environ | {"RAYON_NUM_THREADS": str(p["threads"])})
    return timing | json.loads(out)


def verify_gigatoken(p: dict) -> dict:
    """tokenmill's token shards against the ids gigatoken wrote, document by document."""
    from exactness import compare_written

    result, seconds = timed(compare_written, Path(p["corpus"]), Path(p["tokens"]), Path(p["out"]))
    return {"seconds": seconds, **result}


def loaded(p: dict):
    """gigatoken's tokenizer for p's vocabulary, ready to encode."""
    import gigatoken

    tok = gigatoken.Tokenizer.from_tiktoken(
        p["ranks"], pretokenizer=p["pretokenizer"], special_tokens={}
    )
    tok.encode("a")
    return tok


def encode_files(tok, corpus: str) -> tuple[int, float]:
    """gigatoken encoding every shard of `corpus` (it reads the Parquet
    itself): the tokens, and the seconds it took."""
    import awkward as ak
    import gigatoken

    paths = [str(s) for s in parquet_shards(corpus)]
    ids, seconds = timed(tok.encode_files, gigatoken.ParquetFileSource(paths, column=TEXT))
    return int(ak.count(ids, axis=None)), seconds


def encode_gigatoken(p: dict) -> dict:
    """In process, on every core, as the encode phase's other peers: the
    vocabulary loaded before, the ids left in memory."""
    tokens, seconds = encode_files(loaded(p), p["corpus"])
    return {"seconds": seconds, "tokens": tokens}


def floor_gigatoken(p: dict) -> dict:
    """gigatoken on one core for comparison, writing nothing."""
    os.environ["RAYON_NUM_THREADS"] = "1"  # read when rayon's pool starts, on first use
    one_core()
    _, seconds = encode_files(loaded(p), p["corpus"])
    return {"seconds": seconds}


def load_gigatoken(p: dict) -> dict:
    """In process, as the load rows of the other peers: ready to encode."""
    import gigatoken  # noqa: F401 (imports are not part of the load rows)

    _, seconds = timed(loaded, p)
    return {"seconds": seconds}


# ---- start-up ---------------------------------------------------------------

# What each start-up row's process runs after the interpreter starts: the
# imports and the vocabulary load until it can encode, nothing else.
STARTUP = {
    "python": "pass",
    "tokenmill": "import tokenmill\n"
    "tokenmill.load({ranks!r}, pattern={preset!r}, special_tokens={{}}).encode('a')",
    "gigatoken": "import gigatoken\n"
    "gigatoken.Tokenizer.from_tiktoken({ranks!r}, pretokenizer={pretokenizer!r}, "
    "special_tokens={{}}).encode('a')",
}


def startup(p: dict) -> dict:
    """A whole process of `python -c` with STARTUP[p["who"]], start to exit."""
    compiled_package()
    code = STARTUP[p["who"]].format(**p)
    _, timing = process([sys.executable, "-c", code])
    return timing


def startup_cli(p: dict) -> dict:
    """`tokenmill encode` of a corpus of one one-word document, start to
    exit: the fixed cost in every whole-process encode row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    compiled_package()
    tmp = Path(p["tmp"])
    corpus, tokens = tmp / "one-document", tmp / "one-document-tokens"
    corpus.mkdir(exist_ok=True)
    pq.write_table(pa.table({TEXT: ["a"]}), corpus / "one.parquet")
    fresh(tokens)
    cmd = [tokenmill_command(), "encode", str(corpus), str(tokens), "--tokenizer", p["ranks"]]
    _, timing = process([*cmd, "--pattern", p["preset"], "--no-eos", "--workers", "1"])
    return timing


CONTENDERS = {
    f.__name__: f
    for f in (
        process_gigatoken,
        verify_gigatoken,
        encode_gigatoken,
        floor_gigatoken,
        load_gigatoken,
        startup,
        startup_cli,
    )
}
