"""pack: the token shards of a folder as fixed-length training sequences
(`tokenmill pack`); the format is layouts/packed.py's, its writing
layouts/packed_write.py's."""

from __future__ import annotations

import time

from tokenmill.errors import TokenmillError
from tokenmill.io.storage import AnyPath
from tokenmill.layouts.packed_write import pack_shards
from tokenmill.layouts.rows import Packer, document_stream
from tokenmill.stages.results import PackResult
from tokenmill.stages.split import split_token_shards
from tokenmill.stages.tokens import TokenShard, shard_tokenizer
from tokenmill.tokenizer import Tokenizer

# Named here too for the callers that import them from the stage.
__all__ = ["Packer", "document_stream", "run_pack"]


def run_pack(
    tokens_dir: AnyPath,
    packed_dir: AnyPath,
    seq_len: int,
    *,
    bos: bool = False,
    tokenizer: AnyPath | Tokenizer | None = None,
    names: list[str] | None = None,
    val_fraction: float = 0.0,
    shuffle: int | None = None,
    workers: int = 1,
    shards: list[TokenShard] | None = None,
) -> PackResult:
    """Pack every token shard of `tokens_dir` (or those `names`, relative to it)
    into `packed_dir` (same relative paths), with `workers` threads, split by
    `val_fraction` as encode split them (else refused); `shuffle`: the full
    rows in the order that seed gives, as `run --shuffle` packs them.

    `tokenizer`: the one the shards were encoded with (a Tokenizer or a file);
    default: tokenizer.json beside `tokens_dir`. `shards`: those of
    `split_token_shards(tokens_dir, val_fraction, names)`, already opened.
    """
    start = time.monotonic()
    if seq_len < 1:
        raise TokenmillError(f"--pack/--seq-len must be at least 1, not {seq_len}")
    if shards is None:
        shards = split_token_shards(tokens_dir, val_fraction, names)
    if isinstance(tokenizer, Tokenizer):
        tok = tokenizer
        if tok.sha256 != shards[0].sha256:
            raise TokenmillError(f"{tokens_dir}: encoded with another tokenizer")
    else:
        tok = shard_tokenizer(shards[0], tokenizer)
    result = pack_shards(
        shards,
        tok,
        packed_dir,
        seq_len,
        bos=bos,
        val_fraction=val_fraction,
        shuffle=shuffle,
        workers=workers,
    )
    result.seconds = time.monotonic() - start
    return result
