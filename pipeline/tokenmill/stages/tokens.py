"""Reading the token shards that `encode` writes: their order, their metadata,
and the tokenizer they were encoded with. Used by the layouts
(tokenmill.layouts), stats, report and decode."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from tokenmill.errors import TokenmillError
from tokenmill.formats import load_any
from tokenmill.io.files import parquet_json_metadata
from tokenmill.io.metadata import SPLIT, STATE, TOKENIZER_SHA256, VOCAB_SIZE, recorded_source
from tokenmill.io.storage import AnyPath, is_remote, location, parquet_file, walk_files
from tokenmill.stages.layout import TOKENIZER
from tokenmill.stages.manifest import read_manifest
from tokenmill.tokenizer import PATTERNS, Tokenizer

BATCH_ROWS = 8192


@dataclass(frozen=True)
class TokenShard:
    path: AnyPath
    name: str  # its path relative to its tokens folder (output_name of its source)
    source: str  # the input shard's name (its path relative to DATA)
    sha256: str  # of the tokenizer it was encoded with
    vocab_size: int
    documents: int
    id_dtype: np.dtype  # uint16 or uint32, as in the file
    # A mixture's part of one split ("train", "val"; stages/mix.py), else "": its
    # rows' split is that of their documents (stages/split.shard_is_val).
    split: str = ""

    def batches(self, columns=("row", "ids"), batch_rows: int = BATCH_ROWS):
        """The shard's rows as record batches, in row order (an object by byte
        ranges: one batch in memory, as from a local file)."""
        try:
            with parquet_file(self.path) as pf:
                yield from pf.iter_batches(batch_size=batch_rows, columns=list(columns))
        except (OSError, pa.ArrowException) as e:
            raise TokenmillError(f"{self.path}: cannot read token shard ({e})") from None


def open_token_shard(path: AnyPath, name: str | None = None) -> TokenShard:
    path = location(path)
    try:
        with parquet_file(path) as pf:
            schema, rows = pf.schema_arrow, pf.metadata.num_rows
    except (OSError, pa.ArrowException) as e:
        raise TokenmillError(f"{path}: cannot read token shard ({e})") from None
    meta = schema.metadata or {}
    if TOKENIZER_SHA256 not in meta or "ids" not in schema.names:
        raise TokenmillError(f"{path}: not a token shard written by `tokenmill encode`")
    id_type = schema.field("ids").type.value_type
    return TokenShard(
        path=path,
        name=name or path.name,
        source=recorded_source(meta, path),
        sha256=meta[TOKENIZER_SHA256].decode(),
        vocab_size=int(meta.get(VOCAB_SIZE, b"0")),
        documents=rows,
        # By name ("uint16"): before pyarrow 26, to_pandas_dtype() needs pandas installed.
        id_dtype=np.dtype(str(id_type)),
        split=meta.get(SPLIT, b"").decode(),
    )


def token_shards(tokens_dir: AnyPath, names: list[str] | None = None) -> list[TokenShard]:
    """The token shards of a folder in input order (sorted by input shard name, the
    order `encode` read them in), all encoded with the same tokenizer: exactly
    `names` (paths relative to the folder) when given, else every Parquet file
    under it."""
    tokens_dir = location(tokens_dir)
    if not tokens_dir.is_dir():
        raise TokenmillError(f"{tokens_dir}: no such folder of token shards")
    if names is None:
        if is_remote(tokens_dir):
            found = [name for name, _ in walk_files(tokens_dir) if name.endswith(".parquet")]
        else:
            found = [p.relative_to(tokens_dir).as_posix() for p in tokens_dir.rglob("*.parquet")]
        names = sorted(n for n in found if not any(part.startswith(".") for part in n.split("/")))
    shards = [open_token_shard(tokens_dir / name, name) for name in names]
    if not shards:
        raise TokenmillError(f"{tokens_dir}: no token shards (run `tokenmill encode` first)")
    shards.sort(key=lambda s: s.source)
    if len({s.sha256 for s in shards}) > 1:
        raise TokenmillError(f"{tokens_dir}: the shards were encoded with different tokenizers")
    return shards


def manifest_token_shards(out: AnyPath) -> list[TokenShard]:
    """The token shards a `run` output folder's manifest lists, and only those
    (a stray file in tokens/ is not read; `verify` reports it)."""
    out = location(out)
    manifest = read_manifest(out)
    names = []
    for entry in manifest.get("outputs", []):
        path = Path(entry["path"])
        if path.parts[:1] != ("tokens",):
            raise TokenmillError(f"{out}/manifest.json: output {entry['path']!r} is not in tokens/")
        names.append(path.relative_to("tokens").as_posix())
    if not names:
        raise TokenmillError(f"{out}: the manifest lists no token shards (run `tokenmill run`)")
    return token_shards(out / "tokens", names)


def shard_tokenizer(
    shard: TokenShard, tokenizer_file: AnyPath | None = None, **load_options
) -> Tokenizer:
    """The tokenizer `shard` was encoded with: `tokenizer_file` if given, else the
    tokenizer.json of the `run` output folder holding the shard; either way its
    sha256 must be the one recorded in the shard."""
    if tokenizer_file is None:
        # The `run` folder holding the shard: the parent of the tokens/ it is under.
        folders = [p for p in shard.path.parents if p.name == "tokens"]
        candidates = [p.parent / TOKENIZER for p in folders]
        found = [c for c in candidates if c.is_file()]
        tokenizer_file = found[0] if found else shard.path.parent.parent / TOKENIZER
        if not tokenizer_file.is_file():
            raise TokenmillError(
                f"{shard.path}: no {TOKENIZER} beside its folder; give --tokenizer"
            )
    tok = read_tokenizer(tokenizer_file, sha256=shard.sha256, **load_options)
    if tok.sha256 != shard.sha256:
        raise TokenmillError(
            f"{tokenizer_file}: not the tokenizer {shard.path} was encoded with "
            f"(sha256 {tok.sha256[:12]}..., the shard says {shard.sha256[:12]}...)"
        )
    return tok


def read_tokenizer(
    path: AnyPath,
    *,
    sha256: str | None = None,
    pattern: str | None = None,
    special_tokens: dict[str, int] | None = None,
) -> Tokenizer:
    """A tokenizer file read to turn ids back into text, which needs no
    pre-tokenization pattern. A .tiktoken file holds none: given none (no
    `pattern`, no JSON beside it), it is read with tiktoken's presets in turn
    for the one giving `sha256` (the tokenizer a shard records), else that of
    tiktoken's public encoding of its size, whose special tokens it has (the
    first preset when it is none: decoding never uses the pattern)."""
    from tokenmill.formats.tiktoken import KNOWN_SPECIALS, SUFFIX

    path = location(path)
    settings = path.with_name(path.name + ".json")  # a .tiktoken's pattern, when it has one
    if pattern is not None or not path.name.endswith(SUFFIX) or settings.is_file():
        return load_any(path, pattern=pattern, special_tokens=special_tokens)
    loaded: dict[str, Tokenizer] = {}

    def read(preset: str) -> Tokenizer:
        if preset not in loaded:
            loaded[preset] = load_any(path, pattern=preset, special_tokens=special_tokens)
        return loaded[preset]

    first = read(PATTERNS[0])
    ranks = first.vocab_size - len(first.special_tokens)
    public = [p for p in PATTERNS if (p, ranks) in KNOWN_SPECIALS]
    for preset in [*public, *PATTERNS]:
        if sha256 is None or read(preset).sha256 == sha256:
            return read(preset)
    return first  # not the one: the caller says so


def list_ids(ids: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A list<uint16|uint32> array as (flat ids, int64 offsets from 0), without copying
    the ids when the array is not sliced."""
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    offsets = ids.offsets.to_numpy().astype(np.int64)
    flat = ids.values.to_numpy()[offsets[0] : offsets[-1]]
    return flat, offsets - offsets[0]


def read_row(shard: TokenShard, row: int) -> list[int]:
    """The ids of the document at row `row` of its input shard: the token shard's
    row whose `row` column is `row`, not the row at that position (a skipped
    document leaves a gap). Row groups whose statistics rule it out are not read."""
    import pyarrow.compute as pc

    last = -1  # the highest row seen
    stack = contextlib.ExitStack()
    try:
        pf = stack.enter_context(parquet_file(shard.path))
        meta = pf.metadata
        leaves = [meta.schema.column(i).path for i in range(meta.num_columns)]
        if "row" not in leaves:
            raise TokenmillError(f"{shard.path}: no row column; not a token shard of encode")
        leaf = leaves.index("row")
        for group in range(meta.num_row_groups):
            stats = meta.row_group(group).column(leaf).statistics
            if stats is not None and stats.has_min_max:
                last = max(last, stats.max)
                if not stats.min <= row <= stats.max:
                    continue
            for batch in pf.iter_batches(
                BATCH_ROWS, row_groups=[group], columns=["row", "ids"], use_threads=False
            ):
                rows = batch.column(0)
                if len(rows) == 0:
                    continue
                last = max(last, pc.max(rows).as_py())
                if 0 <= row < 2**64:
                    at = pc.index(rows, pa.scalar(row, rows.type)).as_py()
                    if at >= 0:
                        return batch.column(1)[at].as_py()
    except (OSError, pa.ArrowException) as e:
        raise TokenmillError(f"{shard.path}: cannot read token shard ({e})") from None
    finally:
        stack.close()
    state = parquet_json_metadata(shard.path, STATE)
    result = state.get("result") if isinstance(state, dict) else None
    skips = result.get("skipped") if isinstance(result, dict) else None
    for skip in skips if isinstance(skips, list) else []:
        if isinstance(skip, dict) and skip.get("row") == row:
            raise TokenmillError(
                f"row {row} is not in {shard.path}: it was skipped ({skip.get('reason')})"
            )
    rows = f"rows 0..{last}" if last >= 0 else "it has no rows"
    raise TokenmillError(f"row {row} is not in {shard.path} (skipped, or out of range: {rows})")
