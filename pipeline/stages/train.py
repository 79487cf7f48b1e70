"""train: a BPE tokenizer from the merged word table."""

from __future__ import annotations

import time
from pathlib import Path

from tqdm import tqdm

from pipeline.config import Config
from pipeline.errors import TokenmillError
from pipeline.faults import checkpoint
from pipeline.io.files import file_sha256
from pipeline.io.storage import location, parquet_file
from pipeline.stages.results import TrainResult
from pipeline.stages.state import record_file, reusable_file
from pipeline.tokenizer import Tokenizer


def run_train(counts_file: Path, tokenizer_file: Path, config: Config) -> TrainResult:
    start = time.monotonic()
    counts_file = location(counts_file)
    try:
        # ParquetFile, not read_table: read_table would import pyarrow.dataset.
        with parquet_file(counts_file) as pf:
            table = pf.read(columns=["word", "count"], use_threads=False)
    except (OSError, ValueError) as e:
        raise TokenmillError(f"{counts_file}: cannot read word table ({e})") from None
    if table.num_rows == 0:
        raise TokenmillError(f"{counts_file}: the word table is empty (empty corpus?)")
    key = {
        "stage": "train",
        "counts_sha256": file_sha256(counts_file),
        "mode": config.mode,
        "pattern": config.pattern,
        "lowercase": config.lowercase,
        "vocab_size": config.vocab_size,
        "special_tokens": config.train_special_tokens,
    }
    if reusable_file(tokenizer_file, key, config.force):
        tok = Tokenizer.load(tokenizer_file)
        return summary(table.num_rows, tok, start, reused=True)
    with tqdm(desc="train", unit="merge", disable=None, leave=False) as bar:

        def progress(k: int) -> None:
            bar.update(k - bar.n)
            checkpoint("train", k)

        tok = Tokenizer.train_from_word_arrays(
            table["word"],
            table["count"],
            mode=config.mode,
            pattern=config.pattern,
            lowercase=config.lowercase,
            vocab_size=config.vocab_size,
            special_tokens=config.train_special_tokens,
            progress=progress,
        )
    tok.save(tokenizer_file)
    record_file(tokenizer_file, key)
    return summary(table.num_rows, tok, start, reused=False)


def summary(words: int, tok: Tokenizer, start: float, reused: bool) -> TrainResult:
    return TrainResult(
        words=words,
        merges=len(tok.merges),
        vocab_size=tok.vocab_size,
        sha256=tok.sha256,
        reused=int(reused),
        redone=int(not reused),
        seconds=time.monotonic() - start,
    )
