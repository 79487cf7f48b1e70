"""encode: every input shard to a token-ID Parquet shard.

Columns: row (the document's index in its input shard), ids
(list<uint16> when the vocabulary fits 16 bits, else list<uint32>), n_tokens,
with --val-fraction, split ("train" or "val", see stages/split.py), and when
the run's recipe takes sources from a column ([mix] column = "source"),
source: each document's value there (dictionary-encoded; null when it has
none), which the mix groups documents by (stages/mix.py). A document of more
than ROW_IDS ids takes several consecutive rows of its `row`, which every
reader joins back (stages/tokens.py).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.config import Config
from tokenmill.errors import TokenmillError
from tokenmill.executors import run_tasks
from tokenmill.formats import load_any
from tokenmill.io.arrow import text_bytes
from tokenmill.io.columns import RowColumn
from tokenmill.io.inputs import Inputs, find_inputs, output_name
from tokenmill.io.metadata import SOURCE, STATE, TOKENIZER_SHA256, VOCAB_SIZE
from tokenmill.io.readers import OnSkip, read_batches
from tokenmill.io.storage import AnyPath, location
from tokenmill.stages import tokens
from tokenmill.stages.results import ShardStageResult
from tokenmill.stages.shards import check_outputs, shard_size, shard_task, split_shards
from tokenmill.stages.split import TRAIN, VAL, add_counts, is_val, split_counts, total_counts
from tokenmill.stages.state import encode_key
from tokenmill.stages.tokens import RowWriter
from tokenmill.tokenizer import ENDOFTEXT, Tokenizer

T = TypeVar("T")

# The page layout that holds least of a row's ids while they are written.
# pyarrow 23 and later build a record's values into one data page whatever the
# settings (~20 bytes a token, docs/memory.md), hence rows of at most ROW_IDS
# ids (stages/tokens.py): v2 pages, whose levels are not compressed with the
# values, spare a copy of the page. Older pyarrow cuts v1 pages within a
# record, 1 MB at a time; v2 pages must start at a record.
ONE_PAGE_A_RECORD = int(pa.__version__.split(".")[0]) >= 23
DATA_PAGE_VERSION = "2.0" if ONE_PAGE_A_RECORD else "1.0"


# A token shard's per-document source (a recipe's `column`): few distinct values.
SOURCE_TYPE = pa.dictionary(pa.int32(), pa.string())


def token_schema(
    tok: Tokenizer, source: str, split: bool = False, labels: bool = False
) -> pa.Schema:
    return pa.schema(
        [
            pa.field("row", pa.uint64(), nullable=False),
            pa.field("ids", tok._ids_type, nullable=False),
            pa.field("n_tokens", pa.uint32(), nullable=False),
            *([pa.field("split", pa.string(), nullable=False)] if split else []),
            *([pa.field("source", SOURCE_TYPE)] if labels else []),
        ],
        metadata={
            SOURCE: source,
            TOKENIZER_SHA256: tok.sha256,
            VOCAB_SIZE: str(tok.vocab_size),
        },
    )


@dataclass(frozen=True)
class EncodeTask:
    shard: AnyPath
    name: str
    out: AnyPath
    tokenizer: Tokenizer
    config: Config
    split: bool = True  # see split_shards
    counted: dict | None = None  # what count read of the shard in this run (shards.shard_task)


def encode_shard(task: EncodeTask) -> dict:
    tok = task.tokenizer
    c = task.config
    fraction = c.val_fraction
    column = source_column(c)
    schema = token_schema(tok, task.name, split=fraction > 0, labels=column is not None)

    def write(tmp: Path, on_skip: OnSkip | None, stats: dict, state: Callable) -> dict:
        result: dict[str, Any] = {"documents": 0, "tokens": 0, "bytes": 0}
        if fraction > 0:
            result["split"] = add_counts({}, {})

        def tables() -> Iterator[pa.Table]:
            # Read along, a batch at most ahead: a second read of the shard (the
            # same open file, hashed once), of one column.
            labels = RowColumn(task.shard, column) if column is not None else None
            for rows, docs in read_batches(
                task.shard, c.text_column, on_skip=on_skip, stats=stats, txt_unit=c.txt_unit
            ):
                rows, docs, (ids, n_tokens) = encoded(
                    tok, task.shard, rows, docs, on_skip, eos=c.eos, parallel=task.split
                )
                columns = [rows, ids, n_tokens]
                if fraction > 0:
                    val = is_val(task.name, rows.to_numpy(), fraction)
                    columns.append(pa.array(np.where(val, VAL, TRAIN)))
                    counts = split_counts(val, n_tokens.to_numpy())
                    result["split"] = add_counts(result["split"], counts)
                if labels is not None:
                    values = labels.take(rows.to_numpy()).cast(pa.string())
                    columns.append(values.dictionary_encode())
                result["documents"] += len(docs)
                result["tokens"] += len(ids.values)
                result["bytes"] += text_bytes(docs)
                yield pa.Table.from_arrays(columns, schema=schema)

        # Token ids gain nothing from dictionary pages or min/max statistics
        # (which cost a fifth of the write); zstd shrinks them by a third.
        # Tables are written one behind (after_the_next): the last batch's
        # text is freed before its ids are written.
        with pq.ParquetWriter(
            tmp,
            schema,
            use_dictionary=[n for n in ("split", "source") if n in schema.names] or False,
            compression="zstd",
            write_statistics=["row", "n_tokens"],
            data_page_version=DATA_PAGE_VERSION,
        ) as writer:
            rows = RowWriter(writer)
            made = after_the_next(tables())
            for table in made_ahead(made) if task.split else made:
                rows.write_table(table)
            writer.add_key_value_metadata({STATE: state(result), **rows.metadata()})
        return result

    row_ids = tokens.ROW_IDS  # read here: tests set it on the module
    key = encode_key(c, tok.sha256, None if row_ids == tokens.DEFAULT_ROW_IDS else row_ids)
    return shard_task(task.shard, task.name, task.out, c, key, write, task.counted)


def encoded(
    tok: Tokenizer,
    shard: AnyPath,
    rows: pa.UInt64Array,
    docs: pa.LargeStringArray,
    on_skip: OnSkip | None,
    *,
    eos: bool,
    parallel: bool,
) -> tuple[pa.UInt64Array, pa.LargeStringArray, tuple[pa.Array, pa.Array]]:
    """(rows, documents, their ids and n_tokens) of one batch. A document the
    tokenizer cannot encode (a custom pattern past the regex engine's limits
    on its text) is a bad document: its error names the shard and row, and
    under --on-error skip it alone is left out."""
    try:
        return rows, docs, tok.encode_arrow(docs, eos=eos, parallel=parallel)
    except TokenmillError as e:
        error = e
    # The core says what failed, not in which document: each one on its own.
    bad: dict[int, str] = {}
    for i in range(len(docs)):
        try:
            tok.encode_arrow(docs.slice(i, 1), eos=eos, parallel=False)
        except TokenmillError as e:
            bad[i] = str(e)
            if on_skip is None:
                break
    if not bad:
        raise error  # the batch's, not a document's
    for i, reason in bad.items():
        where = f"row {rows[i].as_py()}"
        if on_skip is None:
            raise TokenmillError(f"{shard}: {where}: {reason}") from None
        on_skip({"row": rows[i].as_py(), "reason": f"{where}: {reason}", "documents": 1})
    keep = pa.array([i not in bad for i in range(len(docs))])
    rows, docs = rows.filter(keep), docs.filter(keep)
    return rows, docs, tok.encode_arrow(docs, eos=eos, parallel=parallel)


def source_column(config: Config) -> str | None:
    """The column a run's recipe takes each document's source from, if any."""
    return config.mix.column if config.mix is not None else None


def after_the_next(items: Iterator[T]) -> Iterator[T]:
    """Each item once the next is made, the last once `items` is exhausted. A
    batch's text lives in the reader's suspended generators until they move
    on: written one batch behind, the last batch (one huge document, say) is
    written after its text is freed, not beside it."""
    held: list[T] = []
    for item in items:
        yield from held
        held = [item]
    yield from held


def made_ahead(items: Iterator[T]) -> Iterator[T]:
    """`items`, made on a thread of their own while the caller writes the one
    before: a task that splits its batches over the native pool (fewer shards
    than workers) otherwise leaves the pool idle while it reads and writes.
    Reading, encoding and PyArrow's writing all release the GIL. At most one
    item waits between the two: beside what `after_the_next` holds, at most
    two more batches' ids (the one waiting, the one being written), never a
    batch's text once it is written."""
    slot: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def hand(last: bool, value: Any) -> bool:
        while not stop.is_set():
            try:
                slot.put((last, value), timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def make() -> None:
        try:
            for item in items:
                if not hand(False, item):
                    return
            hand(True, None)
        except BaseException as error:  # raised again where the items are taken
            hand(True, error)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    maker = threading.Thread(target=make, name="tokenmill-encode-ahead", daemon=True)
    maker.start()
    try:
        while True:
            last, value = slot.get()
            if last:
                if value is not None:
                    raise value
                return
            yield value
    finally:
        stop.set()
        maker.join()


def run_encode(
    data: AnyPath | Inputs,
    tokens_dir: AnyPath,
    tokenizer: AnyPath | Tokenizer,
    config: Config,
    counted: dict[str, dict] | None = None,
) -> ShardStageResult:
    """Encode every input of `data` (a folder or file, or the Inputs found in it).
    `tokenizer`: a Tokenizer, or a tokenizer file of any format `load_any` reads.
    `counted`: the fingerprint of each input (by name) that count read earlier in
    the run; an input that reads otherwise now fails the run (InputChanged)."""
    start = time.monotonic()
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else load_any(tokenizer)
    if config.eos and ENDOFTEXT not in tok.special_tokens:
        raise TokenmillError(
            f"{tokenizer if isinstance(tokenizer, Path) else 'the tokenizer'} has no "
            f"{ENDOFTEXT} special token to end each document with (use --no-eos)"
        )
    if not isinstance(data, Inputs):
        data = find_inputs(data, config.glob, exclude=(location(tokens_dir),))
    split = split_shards(data.shards, config)
    counted = counted or {}
    tasks = [
        EncodeTask(
            s.path,
            s.name,
            location(tokens_dir) / output_name(s.name),
            tok,
            config,
            split,
            counted.get(s.name),
        )
        for s in data.shards
    ]
    check_outputs([t.out for t in tasks])
    results = run_tasks(
        encode_shard,
        tasks,
        workers=config.n_workers,
        executor=config.executor,
        ray_address=config.ray_address,
        desc="encode",
        size=shard_size,
    )
    return ShardStageResult.of(
        "encode",
        results,
        time.monotonic() - start,
        tokens=sum(r.get("tokens", 0) for r in results),
        tokenizer_sha256=tok.sha256,
        normalizer=tok._normalizer,
        not_read=data.not_read,
        split=total_counts(results) if config.val_fraction > 0 else None,
    )
