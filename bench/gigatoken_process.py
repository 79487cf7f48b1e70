"""gigatoken encoding a corpus as one whole process, as a user would run it.

    RAYON_NUM_THREADS=N python bench/gigatoken_process.py RANKS PRETOKENIZER CORPUS [OUT]

Loads the .tiktoken RANKS with gigatoken's pre-tokenizer PRETOKENIZER ("o200k",
"gpt4") and no special tokens, and encodes the `text` column of every
Parquet shard under CORPUS in one encode_files call (gigatoken reads the
Parquet in Rust, on its rayon pool of RAYON_NUM_THREADS threads). Prints
{"tokens": N}.

Without OUT the ids are left in memory: what gigatoken alone costs. With OUT,
the same job as `tokenmill encode`: the ids are written as Parquet, one file
per input shard under the same relative name, a column `ids` of
list<uint32>, zstd, through PyArrow, shards written on RAYON_NUM_THREADS
threads at once (PyArrow writes outside the GIL) with the writer settings
tokenmill uses (no dictionary).

Like bench/standalone.py it imports nothing it does not need (not tokenmill).
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def shards(corpus: Path) -> list[Path]:
    """In tokenmill's reading order (bench/corpus.py's parquet_shards)."""
    return sorted(corpus.rglob("*.parquet"), key=lambda p: p.relative_to(corpus).as_posix())


def write(ids, corpus: Path, paths: list[Path], out: Path, threads: int) -> None:
    """The ids of all documents (an Arrow list array, in reading order) as
    one Parquet file per shard."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    column = ids.cast(pa.list_(pa.uint32()))
    bounds = [0]
    for path in paths:
        bounds.append(bounds[-1] + pq.ParquetFile(path).metadata.num_rows)
    if bounds[-1] != len(column):
        raise SystemExit(f"gigatoken gave {len(column)} rows for {bounds[-1]} documents")

    def one(i: int) -> None:
        target = out / paths[i].relative_to(corpus)
        target.parent.mkdir(parents=True, exist_ok=True)
        table = pa.table({"ids": column.slice(bounds[i], bounds[i + 1] - bounds[i])})
        pq.write_table(table, target, compression="zstd", use_dictionary=False)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(len(paths))))


def main() -> None:
    ranks, pretokenizer, corpus, *out = sys.argv[1:]
    import awkward as ak
    import gigatoken

    tok = gigatoken.Tokenizer.from_tiktoken(ranks, pretokenizer=pretokenizer, special_tokens={})
    paths = shards(Path(corpus))
    ids = tok.encode_files(gigatoken.ParquetFileSource([str(p) for p in paths], column="text"))
    if out:
        threads = int(os.environ.get("RAYON_NUM_THREADS") or os.cpu_count())
        column = ak.to_arrow(ids, extensionarray=False)  # no copy of the ids
        write(column, Path(corpus), paths, Path(out[0]), threads)
    print(json.dumps({"tokens": int(ak.count(ids, axis=None))}))


if __name__ == "__main__":
    main()
