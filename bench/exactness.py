"""Do tokenmill's ids (read back from its token shards) equal the peers' on
every document? Shard by shard, so memory stays at one shard's worth."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
from corpus import parquet_shards, shard_texts
from vocab import duplicate_values, hf_tokenizer, tiktoken_encoding

SOURCE_KEY = b"tokenmill.source"


def token_shards(tokens_dir: Path) -> dict[str, Path]:
    """tokenmill's token shards by the relative name of their input shard."""
    shards = {}
    for path in Path(tokens_dir).glob("*.parquet"):
        meta = pq.read_schema(path).metadata or {}
        shards[meta[SOURCE_KEY].decode()] = path
    return shards


def tokenmill_ids(path: Path) -> list[list[int]]:
    values, offsets = flat_ids(path)
    return [values[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def first_difference(a: list[int], b: list[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def describe(shard: str, row: int, text: str, ours: list[int], theirs: list[int]) -> dict:
    at = first_difference(ours, theirs)
    return {
        "shard": shard,
        "row": row,
        "position": at,
        "tokenmill": ours[max(0, at - 3) : at + 5],
        "peer": theirs[max(0, at - 3) : at + 5],
        "text_start": text[:80],
    }


class Tally:
    def __init__(self) -> None:
        self.mismatches = 0
        self.first: dict | None = None

    def add(self, shard: str, texts: list[str], ours: list, theirs: list) -> None:
        for row, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            if a != b:
                self.mismatches += 1
                if self.first is None:
                    self.first = describe(shard, row, texts[row], a, b)

    def result(self) -> dict:
        return {"mismatched_documents": self.mismatches, "first_mismatch": self.first}


def compare(corpus: Path, tokens_dir: Path, tokenizer_file: Path) -> dict:
    from tokenmill.tokenizer import Tokenizer

    enc = tiktoken_encoding(tokenizer_file)
    hf = hf_tokenizer(tokenizer_file)
    ours = token_shards(tokens_dir)
    tiktoken_tally, hf_tally = Tally(), Tally()
    documents = 0
    for path in parquet_shards(corpus):
        name = path.relative_to(corpus).as_posix()
        texts = shard_texts(path)
        ids = tokenmill_ids(ours[name])
        if len(ids) != len(texts):
            raise SystemExit(f"{name}: {len(ids)} token rows for {len(texts)} documents")
        tiktoken_ids = enc.encode_ordinary_batch(texts, num_threads=os.cpu_count())
        tiktoken_tally.add(name, texts, ids, tiktoken_ids)
        hf_ids = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
        hf_tally.add(name, texts, ids, hf_ids)
        documents += len(texts)
    return {
        "documents": documents,
        "duplicate_token_bytes": duplicate_values(Tokenizer.load(tokenizer_file)),
        "tiktoken": tiktoken_tally.result(),
        "tokenizers": hf_tally.result(),
    }


def flat_ids(path: Path):
    """tokenmill's ids of one token shard in row order: (values, offsets) as
    NumPy, a document over several rows (more than a million ids: the rows
    repeat its `row`, in order; Arrow's sort is stable) joined back."""
    import numpy as np

    table = pq.read_table(path, columns=["row", "ids"]).sort_by("row")
    values, offsets = flat(table.column("ids"))
    rows = np.asarray(table.column("row"))
    starts = np.concatenate([[True], rows[1:] != rows[:-1], [True]])
    return values, offsets[starts]


def flat(ids):
    """A list column of ids as (values, offsets) NumPy arrays, offsets from 0."""
    import numpy as np
    import pyarrow as pa

    ids = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    offsets = np.asarray(ids.offsets, dtype=np.int64)
    return np.asarray(ids.values, dtype=np.int64)[offsets[0] :], offsets - offsets[0]


class FlatTally(Tally):
    def add_flat(self, shard: str, texts: list[str], ours, theirs) -> None:
        """As `add`, for (values, offsets) pairs: a document differs when its slice does."""
        import numpy as np

        (a, ao), (b, bo) = ours, theirs
        if np.array_equal(ao, bo) and np.array_equal(a, b):
            return  # every document alike: no need to look at each
        for row in range(len(texts)):
            x, y = a[ao[row] : ao[row + 1]], b[bo[row] : bo[row + 1]]
            if not np.array_equal(x, y):
                self.mismatches += 1
                if self.first is None:
                    self.first = describe(shard, row, texts[row], x.tolist(), y.tolist())


def compare_flat(corpus: Path, tokens_dir: Path, ranks: str, pattern: str) -> dict:
    """tokenmill's token shards against fastokens and tiktoken loading the
    .tiktoken `ranks` with `pattern`, document by document."""
    import fastokens
    import numpy as np
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    fast = fastokens.Tokenizer.from_tiktoken(ranks, pattern=pattern, special_tokens={})
    ranks_dict = load_tiktoken_bpe(ranks)
    enc = tiktoken.Encoding(
        name="bench", pat_str=pattern, mergeable_ranks=ranks_dict, special_tokens={}
    )
    ours = token_shards(tokens_dir)
    tallies = {"fastokens": FlatTally(), "tiktoken": FlatTally()}
    documents = 0
    for path in parquet_shards(corpus):
        name = path.relative_to(corpus).as_posix()
        texts = shard_texts(path)
        mine = flat_ids(ours[name])
        if len(mine[1]) != len(texts) + 1:
            raise SystemExit(f"{name}: {len(mine[1]) - 1} token rows for {len(texts)} documents")
        ids, offsets = fast.encode_batch_flat(texts)
        fast_ids = (np.frombuffer(ids, "<u4").astype(np.int64), np.frombuffer(offsets, "<u8"))
        tallies["fastokens"].add_flat(name, texts, mine, fast_ids)
        lists = enc.encode_ordinary_batch(texts, num_threads=os.cpu_count())
        tik_offsets = np.concatenate([[0], np.cumsum([len(x) for x in lists])])
        tik_ids = np.fromiter((i for x in lists for i in x), np.int64, tik_offsets[-1])
        tallies["tiktoken"].add_flat(name, texts, mine, (tik_ids, tik_offsets))
        documents += len(texts)
    return {"documents": documents, **{k: t.result() for k, t in tallies.items()}}


def written_ids(path: Path):
    """The `ids` column of a Parquet file that a peer wrote, one row per
    document in input order: (values, offsets) as NumPy."""
    return flat(pq.ParquetFile(path).read(columns=["ids"]).column("ids"))


def compare_written(corpus: Path, tokens_dir: Path, peer_dir: Path, peer="gigatoken") -> dict:
    """tokenmill's token shards against the ids a peer wrote for the same
    shards (under the same relative names in `peer_dir`), document by document."""
    ours = token_shards(tokens_dir)
    tally, documents = FlatTally(), 0
    for path in parquet_shards(corpus):
        name = path.relative_to(corpus).as_posix()
        mine, theirs = flat_ids(ours[name]), written_ids(peer_dir / name)
        if len(mine[1]) != len(theirs[1]):
            raise SystemExit(
                f"{name}: {len(mine[1]) - 1} rows from tokenmill, {len(theirs[1]) - 1} from {peer}"
            )
        texts = shard_texts(path)
        tally.add_flat(name, texts, mine, theirs)
        documents += len(texts)
    return {"documents": documents, peer: tally.result()}


def differences(check: dict, peers: tuple[str, ...]) -> list[str]:
    """One phrase per peer: how many documents differ from it, and the first."""
    parts = []
    for peer in peers:
        r = check[peer]
        text = f"{r['mismatched_documents']} of {check['documents']} documents differ from {peer}"
        if r["first_mismatch"]:
            text += f" (first: {json.dumps(r['first_mismatch'], ensure_ascii=False)})"
        parts.append(text)
    return parts
