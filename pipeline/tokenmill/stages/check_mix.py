"""check, for a run with a mixture: each row of its parts (OUT/mix/) against
the token shard row it was copied from (its `shard` and `input_row`).

The layouts are compared with the parts, so a part's row replaced by another
document's ids would pass them all; the parts are held to the token shards
here. The mixture is in any order, so the token shards' rows are not read
again for it: check 3's scan reduces each document to a 64-bit digest of its
ids, kept with its row (16 bytes a document), and each batch of a part is
compared with numpy, a Python step per input it copies, not per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from tokenmill.stages.split import splitmix64
from tokenmill.stages.tokens import TokenShard, list_ids


def digests(flat: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """A 64-bit digest of each document's ids: a sum of a hash of each id and
    its place, so that a changed, moved, added or dropped id changes it."""
    lens = np.diff(offsets)
    place = np.arange(len(flat), dtype=np.uint64) - np.repeat(offsets[:-1], lens).astype(np.uint64)
    x = splitmix64(flat.astype(np.uint64) ^ splitmix64(place))
    with np.errstate(over="ignore"):  # sums modulo 2^64
        sums = np.concatenate([[np.uint64(0)], np.cumsum(x, dtype=np.uint64)])
        return splitmix64((sums[offsets[1:]] - sums[offsets[:-1]]) ^ lens.astype(np.uint64))


@dataclass
class Digests:
    """The token shards' documents by input: each one's rows and digests."""

    shards: dict[str, TokenShard] = field(default_factory=dict)
    rows: dict[str, list[np.ndarray]] = field(default_factory=dict)
    found: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def add(self, shard: TokenShard, rows: np.ndarray, flat: np.ndarray, offsets: np.ndarray):
        self.shards[shard.source] = shard
        self.rows.setdefault(shard.source, []).append(np.asarray(rows, np.uint64))
        self.found.setdefault(shard.source, []).append(digests(flat, offsets))

    def match(self, source: str, rows: np.ndarray, got: np.ndarray) -> np.ndarray:
        """Whether each of `rows` of input `source` is a document whose digest is `got`'s."""
        if source not in self.rows:
            return np.zeros(len(rows), bool)
        if len(self.rows[source]) > 1:  # joined once, on its first use
            self.rows[source] = [np.concatenate(self.rows[source])]
            self.found[source] = [np.concatenate(self.found[source])]
        held, found = self.rows[source][0], self.found[source][0]
        if not len(held):
            return np.zeros(len(rows), bool)
        at = np.minimum(np.searchsorted(held, rows), len(held) - 1)
        return (held[at] == rows) & (found[at] == got)


def part_problems(parts: list[TokenShard], table: Digests) -> list[str]:
    """Each part's rows that are not the token shard rows they name."""
    problems = []
    for part in parts:
        where, rows, differ, first = f"mix/{part.name}", 0, 0, ""
        for batch in part.batches(columns=("row", "ids", "shard", "input_row")):
            flat, offsets = list_ids(batch.column("ids"))
            got = digests(flat, offsets)
            inputs = batch.column("shard")
            if not pa.types.is_dictionary(inputs.type):
                inputs = inputs.dictionary_encode()
            codes = inputs.indices.to_numpy(zero_copy_only=False)
            input_rows = batch.column("input_row").to_numpy()
            ok = np.zeros(len(got), bool)
            names = inputs.dictionary.to_pylist()
            for k, source in enumerate(names):
                at = codes == k
                ok[at] = table.match(source, input_rows[at], got[at])
            if not ok.all() and not first:
                i = int(np.flatnonzero(~ok)[0])
                source, row = names[codes[i]], int(input_rows[i])
                shard = table.shards.get(source)
                what = f"tokens/{shard.name} row {row}" if shard else f"input {source} row {row}"
                first = f"row {batch.column('row')[i]} ({what})"
            differ += int((~ok).sum())
            rows += len(got)
        if differ:
            problems.append(
                f"{where}: {differ} of {rows} rows are not the token shard rows they name "
                f"(shard, input_row); the first: {first}"
            )
    return problems
