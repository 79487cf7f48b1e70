"""A corpus's Parquet shards rewritten with the same row groups, either
uncompressed (`pack`: xz then packs the text far tighter than Parquet's
snappy pages, so that three corpora fit the 64 MiB a lent machine takes
along) or back with snappy (`unpack`, as bench/build_*.py write them).

    python pack_corpus.py pack|unpack SRC DST [FIRST_N_SHARDS]
"""

import sys
from pathlib import Path

import pyarrow.parquet as pq


def main(mode: str, src: Path, dst: Path, limit: int) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    compression = "none" if mode == "pack" else "snappy"
    for shard in sorted(src.glob("*.parquet"))[:limit]:
        f = pq.ParquetFile(shard)
        with pq.ParquetWriter(dst / shard.name, f.schema_arrow, compression=compression) as w:
            for i in range(f.num_row_groups):
                w.write_table(f.read_row_group(i), row_group_size=1 << 40)
    for about in src.glob("*.txt"):
        (dst / about.name).write_bytes(about.read_bytes())


if __name__ == "__main__":
    limit = int(sys.argv[4]) if len(sys.argv) > 4 else 1 << 30
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), limit)
