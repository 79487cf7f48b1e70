"""Reading the token shards that `encode` writes: their order, their metadata,
their documents, and the tokenizer they were encoded with. Used by the
layouts (tokenmill.layouts), stats, report and decode.

A document of more than ROW_IDS ids is written as consecutive rows of at most
ROW_IDS ids each, all with the document's `row`, each row a row group of its
own (`RowWriter`): Parquet writers build a row's ids into one data page, at
about 20 bytes an id, and readers decode it whole. `TokenShard.batches` joins
such rows back, so that every reader sees one row per document.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from tokenmill import environment
from tokenmill.environment import whole
from tokenmill.errors import NoSuchPath, TokenmillError
from tokenmill.formats import load_any
from tokenmill.io.arrow import from_numpy, numbers, one_array
from tokenmill.io.files import parquet_json_metadata
from tokenmill.io.lock import writing_now
from tokenmill.io.metadata import (
    CONTINUED,
    SEQ_LEN,
    SPLIT,
    STATE,
    TOKENIZER_SHA256,
    VOCAB_SIZE,
    recorded_source,
)
from tokenmill.io.storage import AnyPath, is_remote, location, parquet_file, walk_files
from tokenmill.stages.layout import TOKENIZER
from tokenmill.tokenizer import PATTERNS, Tokenizer

if TYPE_CHECKING:
    import pyarrow.parquet as pq

BATCH_ROWS = 8192
# Ids in one row of a token shard, at most (a longer document takes several);
# TOKENMILL_ROW_IDS sets it (tests: a tiny one).
DEFAULT_ROW_IDS = 1 << 20
ROW_IDS = whole(environment.ROW_IDS, DEFAULT_ROW_IDS, "ids")


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
    # Whether each row records its document's split (encode with --val-fraction).
    split_column: bool = False
    # A mixture's part (stages/mix.py): its rows are copies of other shards' rows.
    mixed: bool = False
    # The documents written over several rows: row -> (rows, ids).
    continued: dict[int, tuple[int, int]] = field(default_factory=dict, hash=False)

    def batches(self, columns=("row", "ids"), batch_rows: int = BATCH_ROWS, first_group: int = 0):
        """The shard's documents as record batches of `batch_rows` documents, in
        row order, one row each (a document written over several rows joined
        back), from the first document starting in row group `first_group` on
        (an object by byte ranges: one batch in memory, as from a local file)."""
        try:
            with parquet_file(self.path) as pf:
                if not self.continued:
                    groups = range(first_group, pf.metadata.num_row_groups) if first_group else None
                    yield from pf.iter_batches(batch_rows, groups, list(columns))
                else:
                    yield from joined(self, pf, list(columns), batch_rows, first_group)
        except (OSError, pa.ArrowException) as e:
            raise TokenmillError(f"{self.path}: cannot read token shard ({e})") from None

    def group_documents(self) -> np.ndarray:
        """The number of documents starting in each row group."""
        try:
            with parquet_file(self.path) as pf:
                meta = pf.metadata
                counts = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
                if not self.continued:
                    return np.array(counts, np.int64)
                rows = Rows.of(self, pf)
        except (OSError, pa.ArrowException) as e:
            raise TokenmillError(f"{self.path}: cannot read token shard ({e})") from None
        group = np.searchsorted(rows.group_start, rows.starts, side="right") - 1
        return np.bincount(group, minlength=len(counts)).astype(np.int64)


@dataclass(frozen=True)
class Rows:
    """Where a shard's documents are among its rows: read from its row and
    n_tokens columns, checked against the documents its metadata lists."""

    lens: np.ndarray  # int64 ids of each row
    first: np.ndarray  # bool: each row starts a document
    starts: np.ndarray  # the row each document starts at
    ends: np.ndarray  # and ends before
    doc_lens: np.ndarray  # int64 ids of each document
    group_start: np.ndarray  # the first row of each row group, then the number of rows

    @classmethod
    def of(cls, shard: TokenShard, pf: pq.ParquetFile) -> Rows:
        index = pf.read(columns=["row", "n_tokens"], use_threads=False)
        rows = numbers(index["row"])
        lens = numbers(index["n_tokens"]).astype(np.int64)
        first = np.ones(len(rows), bool)
        first[1:] = rows[1:] != rows[:-1]
        starts = np.flatnonzero(first)
        ends = np.append(starts[1:], len(rows)).astype(np.int64)
        doc_lens = np.add.reduceat(lens, starts) if len(starts) else lens[:0]
        many = ends - starts > 1
        found = dict(
            zip(
                rows[starts[many]].tolist(),
                zip((ends - starts)[many].tolist(), doc_lens[many].tolist(), strict=True),
                strict=True,
            )
        )
        if found != shard.continued:
            raise TokenmillError(
                f"{shard.path}: its documents written over several rows are not "
                f"those its metadata lists ({CONTINUED.decode()}); encode it again"
            )
        meta = pf.metadata
        sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        group_start = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        return cls(lens, first, starts, ends, doc_lens, group_start)


def joined(
    shard: TokenShard, pf: pq.ParquetFile, names: list[str], batch_rows: int, first_group: int
) -> Iterator[pa.RecordBatch]:
    """`TokenShard.batches` of a shard with documents written over several
    rows: each batch's ids copied into one buffer as its rows are read, a row
    group at a time (each of a long document's rows is a group of its own), so
    that a batch of a long document holds its ids once and one of its rows."""
    at = Rows.of(shard, pf)
    schema = pf.schema_arrow
    others = [n for n in names if n != "ids"]

    def read() -> Iterator[tuple[int, pa.RecordBatch]]:
        first_row = int(at.starts[first_doc]) if first_doc < len(at.starts) else 0
        group = int(np.searchsorted(at.group_start, first_row, side="right")) - 1
        for g in range(group, len(at.group_start) - 1):
            row = int(at.group_start[g])
            for batch in pf.iter_batches(batch_rows, [g], names, use_threads=False):
                yield row, batch
                row += batch.num_rows

    first_doc = int(np.searchsorted(at.starts, at.group_start[first_group]))
    source = read()
    row, batch = 0, None
    for d0 in range(first_doc, len(at.starts), batch_rows):
        d1 = min(d0 + batch_rows, len(at.starts))
        r0, r1 = int(at.starts[d0]), int(at.ends[d1 - 1])
        offsets = np.concatenate([[0], np.cumsum(at.lens[r0:r1])]).astype(np.int64)
        ids = np.empty(offsets[-1] if "ids" in names else 0, shard.id_dtype)
        heads = []
        r = r0
        while r < r1:
            while batch is None or row + batch.num_rows <= r:
                row, batch = next(source)
            n = min(r1, row + batch.num_rows) - r
            part = batch.slice(r - row, n)
            if "ids" in names:
                flat, _ = list_ids(part.column("ids"))
                ids[offsets[r - r0] : offsets[r - r0 + n]] = flat
            if others:
                starting = from_numpy(np.flatnonzero(at.first[r : r + n]))
                heads.append(part.select(others).take(starting))
            r += n
        head = pa.Table.from_batches(heads).combine_chunks() if others else None
        doc_offsets = np.concatenate([[0], np.cumsum(at.doc_lens[d0:d1])]).astype(np.int64)
        columns = []
        for name in names:
            if name == "ids":
                bounds, values = from_numpy(doc_offsets), from_numpy(ids)
                ids_type = schema.field("ids").type
                columns.append(pa.LargeListArray.from_arrays(bounds, values, type=ids_type))
            elif name == "n_tokens":
                columns.append(from_numpy(at.doc_lens[d0:d1].astype(np.uint32)))
            else:
                assert head is not None  # read whenever a column but ids is asked for
                columns.append(one_array(head[name]))
        yield pa.RecordBatch.from_arrays(
            columns, schema=pa.schema([schema.field(n) for n in names])
        )


class RowWriter:
    """Writes a token shard's tables to `writer`, a document of more than
    ROW_IDS ids as consecutive rows of at most ROW_IDS ids, each a row group of
    its own; `metadata` then lists them. Shards without one are written as the
    tables are."""

    def __init__(self, writer: pq.ParquetWriter):
        self.writer = writer
        self.continued: list[list[int]] = []

    def write_table(self, table: pa.Table) -> None:
        lengths = numbers(table["n_tokens"])
        long = np.flatnonzero(lengths > ROW_IDS).tolist()
        start = 0
        for at in long:
            if at > start:
                self.writer.write_table(table.slice(start, at - start))
            self.write_long(table.slice(at, 1))
            start = at + 1
        if start == 0:
            self.writer.write_table(table)
        elif start < table.num_rows:
            self.writer.write_table(table.slice(start))

    def write_long(self, row: pa.Table) -> None:
        flat, _ = list_ids(one_array(row["ids"]))
        ids_type = row.schema.field("ids").type
        cuts = range(0, len(flat), ROW_IDS)
        for a in cuts:
            piece = from_numpy(flat[a : a + ROW_IDS])
            bounds = from_numpy(np.array([0, len(piece)], np.int64))
            replaced = {
                "ids": pa.LargeListArray.from_arrays(bounds, piece, type=ids_type),
                "n_tokens": from_numpy(np.array([len(piece)], np.uint32)),
            }
            columns = [replaced.get(name, row[name]) for name in row.schema.names]
            self.writer.write_table(pa.Table.from_arrays(columns, schema=row.schema))
        number = row["row"][0].as_py()
        self.continued.append([number, len(cuts), len(flat)])

    def metadata(self) -> dict[bytes, str]:
        return {CONTINUED: json.dumps(self.continued)} if self.continued else {}


def open_token_shard(path: AnyPath, name: str | None = None) -> TokenShard:
    path = location(path)
    try:
        with parquet_file(path) as pf:
            schema, rows = pf.schema_arrow, pf.metadata.num_rows
            file_meta = pf.metadata.metadata or {}
    except FileNotFoundError:
        raise NoSuchPath(f"{path}: no such token shard") from None
    except (OSError, pa.ArrowException) as e:
        raise TokenmillError(f"{path}: cannot read token shard ({e})") from None
    meta = schema.metadata or {}
    if not is_token_shard(schema):
        packed = " (packed sequences, written by --pack)" if SEQ_LEN in meta else ""
        raise TokenmillError(f"{path}: not a token shard written by `tokenmill encode`{packed}")
    id_type = schema.field("ids").type.value_type
    continued = read_continued(path, file_meta)
    return TokenShard(
        path=path,
        name=name or path.name,
        source=recorded_source(meta, path),
        sha256=meta[TOKENIZER_SHA256].decode(),
        vocab_size=int(meta.get(VOCAB_SIZE, b"0")),
        documents=documents_in(rows, continued),
        # By name ("uint16"): before pyarrow 26, to_pandas_dtype() needs pandas installed.
        id_dtype=np.dtype(str(id_type)),
        split=meta.get(SPLIT, b"").decode(),
        split_column="split" in schema.names,
        mixed="input_row" in schema.names,
        continued=continued,
    )


def is_token_shard(schema: pa.Schema) -> bool:
    """Whether a Parquet schema is a token shard's (encode's, or a mixture's
    part): packed shards carry the same metadata and ids and n_tokens, and
    were read as a document per row before; their SEQ_LEN and missing row
    column tell them apart."""
    import pyarrow.types as pat

    meta = schema.metadata or {}
    if TOKENIZER_SHA256 not in meta or SEQ_LEN in meta:
        return False
    types = {f.name: f.type for f in schema}
    ids = types.get("ids")
    return (
        pat.is_integer(types.get("row", pa.null()))
        and pat.is_integer(types.get("n_tokens", pa.null()))
        and ids is not None
        and (pat.is_list(ids) or pat.is_large_list(ids))
        and ids.value_type in (pa.uint16(), pa.uint32())
    )


def documents_in(rows: int, continued: dict[int, tuple[int, int]]) -> int:
    """The documents of a shard of `rows` rows: one written over several rows
    (`read_continued`) counts once."""
    return rows - sum(n - 1 for n, _ in continued.values())


def read_continued(path: AnyPath, meta: dict[bytes, bytes]) -> dict[int, tuple[int, int]]:
    """A shard's documents written over several rows, from its metadata."""
    if CONTINUED not in meta:
        return {}
    try:
        listed = json.loads(meta[CONTINUED])
        found = {int(row): (int(rows), int(ids)) for row, rows, ids in listed}
    except (ValueError, TypeError):
        found = None
    if not found or any(rows < 1 or ids < 0 for rows, ids in found.values()):
        raise TokenmillError(f"{path}: unreadable {CONTINUED.decode()} metadata; encode it again")
    return found


def token_shards(tokens_dir: AnyPath, names: list[str] | None = None) -> list[TokenShard]:
    """The token shards of a folder in input order (sorted by input shard name, the
    order `encode` read them in), all encoded with the same tokenizer: exactly
    `names` (paths relative to the folder) when given, else every Parquet file
    under it."""
    tokens_dir = location(tokens_dir)
    # OUT/tokens (or OUT/mix) of a run at work: old and new shards side by
    # side, of one tokenizer or two (the run itself is no other process).
    if (running := writing_now(tokens_dir.parent)) is not None:
        raise running
    if not tokens_dir.is_dir():
        what = "a file, not a" if tokens_dir.exists() else "no such"
        raise TokenmillError(f"{tokens_dir}: {what} folder of token shards")
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
    # Here: the manifest's module (importlib.metadata) is no cost of encode's start-up.
    from tokenmill.stages.manifest import read_manifest

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
    ids = one_array(ids)
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
            if row in shard.continued:  # its rows joined
                for batch in shard.batches(("row", "ids"), first_group=group):
                    at = pc.index(batch.column(0), pa.scalar(row, pa.uint64())).as_py()
                    if at >= 0:
                        return batch.column(1)[at].as_py()
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
