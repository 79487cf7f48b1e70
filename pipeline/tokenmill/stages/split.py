"""--val-fraction F: which documents are held out for validation.

A document is in validation when a 64-bit hash of (its input shard's name,
its row) is below F * 2^64. The hash depends on nothing else: not on the
workers, the executor, batch sizes, how a shard is cut into tasks, or where
DATA lies (the name is relative to it), so the split is the same in every
run over the same inputs, in encode's `split` column and in bin's
train.bin / val.bin alike. Each document is an independent draw, so on n
documents the val share is F give or take sqrt(F (1 - F) / n).

The hash (fixed: changing it would move documents between train and val):
key = the first 8 bytes of sha256(name as UTF-8), little-endian; the
document's hash is splitmix64's finalizer applied to (row XOR key) plus the
golden-ratio increment.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, NoReturn

import numpy as np

from tokenmill.config import VAL_FRACTION_RANGE
from tokenmill.errors import TokenmillError

if TYPE_CHECKING:
    from tokenmill.io.storage import AnyPath
    from tokenmill.stages.tokens import TokenShard

TRAIN = "train"
VAL = "val"
SPLITS = (TRAIN, VAL)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def shard_key(name: str) -> np.uint64:
    return np.uint64(int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little"))


def document_hashes(name: str, rows: np.ndarray) -> np.ndarray:
    """The uint64 hash of each row of shard `name` (splitmix64 over row XOR key)."""
    return splitmix64(np.asarray(rows, np.uint64) ^ shard_key(name))


def splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's step on each uint64 of `x`: the golden-ratio increment, then its finalizer."""
    with np.errstate(over="ignore"):  # arithmetic modulo 2^64 is the point
        x = x + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * _MIX1
        x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


def is_val(name: str, rows: np.ndarray, fraction: float) -> np.ndarray:
    """Whether each row of shard `name` is a validation document."""
    if fraction <= 0:
        return np.zeros(len(rows), bool)
    # fraction * 2^64 is exact in floating point (a power of two); fraction < 1.
    return document_hashes(name, rows) < np.uint64(int(fraction * 2.0**64))


def shard_is_val(shard, rows: np.ndarray, fraction: float) -> np.ndarray:
    """`is_val` for the rows of a token shard (stages/tokens.TokenShard). A
    mixture's part holds documents of one split, chosen by their input's name
    and row before mixing (stages/mix.py), and records it: all its rows are in it."""
    if shard.split:
        return np.full(len(rows), shard.split == VAL)
    return is_val(shard.source, rows, fraction)


def in_split(shard, side: str) -> bool:
    """Whether documents of a token shard can be in split `side` ("": not
    split), hence whether a per-shard layout writes it a file there: any
    shard's, but a mixture's part's only in its own split."""
    return not side or not shard.split or shard.split == side


def split_counts(val: np.ndarray, n_tokens: np.ndarray) -> dict:
    """{"train"|"val": {"documents", "tokens"}} of a batch of documents, given
    which are validation documents (`is_val`) and their token counts."""
    tokens = np.asarray(n_tokens, np.uint64)
    return {
        TRAIN: {"documents": int((~val).sum()), "tokens": int(tokens[~val].sum())},
        VAL: {"documents": int(val.sum()), "tokens": int(tokens[val].sum())},
    }


def add_counts(total: dict, more: dict) -> dict:
    """Sum two split_counts ({} counts as zeros)."""
    return {
        s: {
            k: total.get(s, {}).get(k, 0) + more.get(s, {}).get(k, 0)
            for k in ("documents", "tokens")
        }
        for s in SPLITS
    }


def total_counts(results: list[dict]) -> dict:
    """The split_counts of every shard (encode's per-shard "split")."""
    total: dict = {}
    for r in results:
        total = add_counts(total, r.get("split") or {})
    return total


def check_split_holds(split: dict, fraction: float, where: str = "") -> None:
    """Refuse a --val-fraction that leaves a split without a document: an
    empty validation set is none, and its layout files of no ids are ones
    trainers cannot map. `where`: the recipe (recipe.Recipe.where) whose
    mixture `split` counts, when it is one's."""
    for side, other in ((VAL, TRAIN), (TRAIN, VAL)):
        if not split.get(side, {}).get("documents"):
            n = split.get(other, {}).get("documents", 0)
            raise TokenmillError(
                f"{where + ': ' if where else ''}--val-fraction {fraction} puts none of the "
                f"{n} documents {'it takes ' if where else ''}in {side} (every one in {other}): "
                f"give a {'larger' if side == VAL else 'smaller'} one"
            )


def split_token_shards(
    tokens_dir: AnyPath, fraction: float, names: list[str] | None = None
) -> list[TokenShard]:
    """The token shards of `tokens_dir` (or those `names`) for a standalone pack
    or bin to split by `fraction`, refused when it puts none of their
    documents on a side, or unless encode (or the mix) split them so: rows
    that record their split (encode's --val-fraction) must be those
    `fraction` gives, and a mixture's parts must be split as the mix was, or
    validation documents would go into training data, or be split anew
    (which would put one copy of a repeated document in each split)."""
    import pyarrow.compute as pc

    from tokenmill.stages.tokens import token_shards

    if not 0 <= fraction < 1:  # nan too, which no hash is below
        raise TokenmillError(f"--val-fraction {fraction} is out of range: {VAL_FRACTION_RANGE}")
    shards = token_shards(tokens_dir, names)
    # The documents on each side, to refuse a fraction that leaves one empty
    # before any write, as a run refuses it once encode has split.
    documents = {TRAIN: 0, VAL: 0}
    for shard in shards:
        if shard.mixed:
            recorded = mix_fraction(shard)
            if recorded is None:
                from tokenmill.stages.layout import mix_part

                # Not a fraction of another value: the record itself is gone.
                raise TokenmillError(
                    f"{shard.path.parent / mix_part(0)}: missing or unreadable, and it records "
                    "the --val-fraction the mix split its documents by; run again to rewrite it"
                )
            if recorded == 0 and fraction:
                raise TokenmillError(
                    f"{shard.path}: the mix held out no documents; give no --val-fraction"
                )
            if recorded != fraction:
                refuse_split(shard.path, "the mix", fraction)
            documents[shard.split or TRAIN] += shard.documents
            continue
        if not shard.split_column and not fraction:
            continue
        columns = ("row", "split") if shard.split_column else ("row",)
        for batch in shard.batches(columns=columns):
            rows = batch.column("row").to_numpy()
            val = shard_is_val(shard, rows, fraction)
            if shard.split_column:
                recorded = pc.equal(batch.column("split"), VAL).to_numpy(zero_copy_only=False)
                if not np.array_equal(recorded, val):
                    refuse_split(shard.path, "encode", fraction)
            documents[VAL] += int(val.sum())
            documents[TRAIN] += len(val) - int(val.sum())
    if fraction:
        check_split_holds({side: {"documents": n} for side, n in documents.items()}, fraction)
    return shards


def mix_fraction(shard: TokenShard) -> float | None:
    """The --val-fraction a mixture's part was split by (0: none), as part 0
    of its folder records it; None when that record cannot be read."""
    from tokenmill.io.files import parquet_json_metadata
    from tokenmill.io.metadata import STATE
    from tokenmill.stages.layout import mix_part

    if not shard.split:
        return 0.0
    state = parquet_json_metadata(shard.path.parent / mix_part(0), STATE)
    try:
        return float(state["result"]["mix"]["val"]["fraction"])  # type: ignore[index]
    except (TypeError, LookupError, ValueError):
        return None


def refuse_split(path: AnyPath, stage: str, fraction: float) -> NoReturn:
    given = f"another --val-fraction than {fraction:g}" if fraction else "--val-fraction"
    raise TokenmillError(
        f"{path}: {stage} split its documents by {given}; give the one it ran with"
    )
