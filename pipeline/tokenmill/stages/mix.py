"""mix: the mixture a data recipe asks for (tokenmill/recipe.py), from the
token shards, written as token shards of its own, OUT/mix/part-NNNNN.parquet,
which the layouts (--pack, --format) then get instead of OUT/tokens/.

Sources: stages/sources.py (a `files` glob, the recipe's `column`, or the
input's folder or name). Documents of no recipe source are left out (listed
in the manifest, none taken). --shuffle without a recipe takes every source
once.

What each source takes, and the account of it: stages/budgets.py (whole
epochs, then a seeded subset, within one document of each budget; with
--val-fraction, documents held out before anything is chosen, and a
validation set in the budgets' proportions, written as
OUT/mix/val-NNNNN.parquet in the same order as the train parts).

Order and writing: stages/shuffle.py. The mixture is in a seeded global
order with --shuffle SEED, else in input order, epoch after epoch; either
way it depends on the seed, the input names and rows and the recipe only,
not on --workers, --executor or where DATA lies.

Memory. The driver holds each document's row, tokens, class (source and
split) and copies, 20 bytes a document (and while it finds the sources, 4
more for a `column`'s value: stages/sources.py) and, while it chooses a
source's subset, under 50 bytes a document of that source (stages/budgets.py);
a task, one batch of a shard and 64 MB of ids (pass 1), or one bucket of
at most ~64 MB of ids (pass 2: shuffle.BUCKET_BYTES).

Reuse. Each part records in its Parquet metadata a digest of what the
mixture is made from (the token shards' names and sha256, the recipe, the
seed, the split, the bucket size) and, in part 0, the mixture's accounting;
a rerun keeps the parts when the digest is the same and each still has the
sha256 its state file records, so changing only the seed or one budget
redoes the mix and nothing before it. Every part is written whole or not
at all, so a killed mix is redone to the same bytes.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from tokenmill import environment
from tokenmill.config import Config
from tokenmill.environment import whole
from tokenmill.errors import TokenmillError
from tokenmill.executors import run_tasks
from tokenmill.io.files import known_sha256, parquet_json_metadata
from tokenmill.io.metadata import SOURCE, SPLIT, STATE, TOKENIZER_SHA256, VOCAB_SIZE
from tokenmill.io.storage import AnyPath, location, parquet_file
from tokenmill.io.storage import size as file_size
from tokenmill.recipe import Recipe, Share
from tokenmill.stages.budgets import Tally, account, choose_all
from tokenmill.stages.layout import MIX, mix_part
from tokenmill.stages.results import MixResult
from tokenmill.stages.shuffle import (
    BUCKET_BYTES,
    BUCKETS,
    GatherTask,
    Order,
    Rule,
    ScatterTask,
    bucket_file,
    by_bucket,
    gather,
    part_schema,
    remove_buckets,
    scatter,
    strings,
)
from tokenmill.stages.sources import Membership, assign, default_source, read_index
from tokenmill.stages.split import SPLITS, is_val
from tokenmill.stages.state import digest, verified_sha256
from tokenmill.stages.tokens import TokenShard, documents_in, read_continued
from tokenmill.tokenizer import Tokenizer

VERSION = 2  # bumped when the same recipe would choose or order otherwise


# The ids of one part (and of what one task of pass 2 holds): tests make it small.
BUCKET_ENV = environment.MIX_BUCKET_BYTES


def starts(copies: dict[int, np.ndarray], tokens: dict[int, np.ndarray]) -> dict[int, tuple]:
    """Without --shuffle: where in the stream each epoch's copies of each input start
    (epoch 0 of every input in input order, then epoch 1, ...)."""
    ahead = {}  # input -> tokens of its documents with more than e copies, per epoch e
    for i, c in copies.items():
        per = np.zeros(int(c.max(initial=0)) + 1, np.int64)
        np.add.at(per, c, tokens[i])
        ahead[i] = np.cumsum(per[::-1])[::-1][1:]  # tokens of copies beyond e
    result: dict[int, list[int]] = {i: [] for i in copies}
    at, active, epoch = 0, sorted(i for i in ahead if len(ahead[i])), 0
    while active:  # each round drops the inputs with no copies beyond it
        for i in active:
            result[i].append(at)
            at += int(ahead[i][epoch])
        epoch += 1
        active = [i for i in active if epoch < len(ahead[i])]
    return {i: tuple(s) for i, s in result.items()}


def bucket_bytes() -> int:
    return whole(BUCKET_ENV, BUCKET_BYTES, "bytes")


def made_from(shards: list[TokenShard], shas: dict[str, str], config: Config, size: int) -> dict:
    """The key every part records: what the mixture is made from."""
    what = {
        "version": VERSION,
        "recipe": config.mix.to_dict() if config.mix else None,
        "shuffle": config.shuffle,
        "inputs": [[s.source, s.name, shas[s.name]] for s in shards],
        "bucket_bytes": size,
        **({"val_fraction": config.val_fraction} if config.val_fraction > 0 else {}),
    }
    # eos: the layouts read whether rows end in <|endoftext|> from the key (layouts/stream.py).
    return {"stage": MIX, "eos": config.eos, "made_from": digest(what)}


def part_names(summary: dict) -> list[str]:
    """The parts a mixture's accounting says it has: train's, then validation's."""
    val = summary.get("val", {}).get("parts", 0)
    return [mix_part(k) for k in range(summary["parts"])] + [mix_part(k, 1) for k in range(val)]


def kept_parts(folder: AnyPath, key: dict) -> tuple[dict, list[dict]] | None:
    """(the accounting, the parts' records) when the parts in `folder` are
    those `key` makes and unchanged since, else None."""
    first = parquet_json_metadata(folder / mix_part(0), STATE)
    if not isinstance(first, dict) or first.get("key") != key:
        return None
    summary = first.get("result", {}).get("mix")
    if not isinstance(summary, dict) or not isinstance(summary.get("parts"), int):
        return None
    records = []
    for name in part_names(summary):
        path = folder / name
        state = parquet_json_metadata(path, STATE)
        if not isinstance(state, dict) or state.get("key") != key:
            return None
        sha256 = verified_sha256(path)
        if sha256 is None:
            return None
        with parquet_file(path) as pf:
            rows, meta = pf.metadata.num_rows, pf.metadata.metadata or {}
        documents = documents_in(rows, read_continued(path, meta))
        records.append({"file": name, "rows": rows, "documents": documents,
                        "bytes": file_size(path), "sha256": sha256})  # fmt: skip
    return summary, records


@dataclass(frozen=True)
class Mixture:
    """What the two passes of stages/shuffle.py write: which inputs have
    copies, how to find each copy's group and Rule, the order, the parts' key
    and the accounting (recorded in part 0)."""

    chosen: list[int]
    members: list[Membership]  # by input index
    rules: tuple[Rule, ...]  # by class: group * splits + split
    names: list[str]  # the groups' names
    fraction: float
    seed: int  # of the "select" hashes
    orders: tuple[Order, ...]  # by split
    first: tuple[int, ...]  # by split: its first bucket
    starts: dict[int, tuple[tuple[int, ...], ...]]  # unshuffled: shuffle.ScatterTask.starts
    key: dict
    summary: dict


def run_mix(
    shards: list[TokenShard],
    folder: AnyPath,
    tok: Tokenizer,
    config: Config,
    shard_sha256: dict[str, str] | None = None,
) -> MixResult:
    """The mixture of `shards` (token shards in input order) that config.mix and
    config.shuffle ask for, written into `folder`. `shard_sha256`: each shard's
    sha256 by name, when known (else hashed)."""
    start = time.monotonic()
    folder = location(folder)
    size = bucket_bytes()
    known = shard_sha256 or {}
    shas = {s.name: known.get(s.name) or known_sha256(s.path)[1] for s in shards}
    key = made_from(shards, shas, config, size)
    kept = None if config.force else kept_parts(folder, key)
    if kept is not None:
        summary, records = kept
        return MixResult(seconds=time.monotonic() - start, reused=1, summary=summary,
                         parts=records)  # fmt: skip
    mixture = plan_mixture(shards, config, size, key)
    summary = mixture.summary
    records = write_mixture(shards, folder, tok, config, mixture)
    written = (sum(r["documents"] for r in records), sum(r["tokens"] for r in records))
    val = summary.get("val", {})
    if written != (summary["documents"] + val.get("documents", 0),
                   summary["tokens"] + val.get("tokens", 0)):  # fmt: skip
        raise TokenmillError(f"{folder}: the token shards changed while being mixed; rerun")
    return MixResult(seconds=time.monotonic() - start, redone=1, summary=summary, parts=records)


def every_source(shards: list[TokenShard]) -> Recipe:
    """--shuffle without a recipe: every source once."""
    names = dict.fromkeys(default_source(s.source) for s in shards)
    return Recipe(tuple(Share(n, epochs=1.0) for n in names), implied=True)


def plan_mixture(shards: list[TokenShard], config: Config, size: int, key: dict) -> Mixture:
    """Read the shards' rows and token counts, choose every source's copies and
    account for them."""
    recipe = config.mix or every_source(shards)
    seed = config.shuffle if config.shuffle is not None else 0
    fraction = config.val_fraction
    splits = 2 if fraction > 0 else 1
    with ThreadPoolExecutor(max(1, min(config.n_workers, len(shards)))) as pool:
        index = list(pool.map(lambda s: read_index(s, recipe.column is not None), shards))
    found = assign(shards, recipe, index)
    classes = [
        (g * splits + (is_val(s.source, ix.rows, fraction) if splits > 1 else 0)).astype(np.int32)
        for s, g, ix in zip(shards, found.group_of, index, strict=True)
    ]
    found.group_of.clear()
    for ix in index:
        ix.labels = ix.codes = None
    rules, budgets = choose_all(found.groups, classes, index, shards, recipe, seed, fraction)
    copies = []
    tally = Tally(len(rules))
    for i, (cls, ix) in enumerate(zip(classes, index, strict=True)):
        n = np.zeros(len(cls), np.uint32)
        for c in np.unique(cls):
            at = cls == c
            n[at] = rules[c].copies(seed, i, shards[i].source, ix.rows[at])
        copies.append(n)
        tally.add(cls, ix.tokens, n.astype(np.int64))
    summary = account(found.groups, budgets, tally, splits, fraction, config.shuffle, recipe.where)
    totals = [summary["tokens"], summary.get("val", {}).get("tokens", 0)][:splits]
    itemsize = shards[0].id_dtype.itemsize
    orders = tuple(Order.sized(config.shuffle, t, itemsize, size) for t in totals)
    summary["parts"] = orders[0].buckets
    if splits > 1:
        summary["val"]["parts"] = orders[1].buckets
    chosen = [i for i in range(len(shards)) if copies[i].any()]
    placed: dict[int, tuple] = {i: () for i in chosen}
    if config.shuffle is None:
        per_split = []
        for s in range(splits):
            mine = {i: np.where(classes[i] % splits == s, copies[i], 0) for i in chosen}
            per_split.append(starts(mine, {i: index[i].tokens for i in chosen}))
        placed = {i: tuple(p.get(i, ()) for p in per_split) for i in chosen}
    return Mixture(
        chosen=chosen,
        members=found.members,
        rules=tuple(rules),
        names=[g.name for g in found.groups],
        fraction=fraction,
        seed=seed,
        orders=orders,
        first=(0, orders[0].buckets)[:splits],
        starts=placed,
        key=key,
        summary=summary,
    )


def write_mixture(
    shards: list[TokenShard], folder: AnyPath, tok: Tokenizer, config: Config, mixture: Mixture
) -> list[dict]:
    """The two passes of stages/shuffle.py; each part's record."""
    scratch = folder / BUCKETS
    remove_buckets(scratch)
    m = mixture
    tasks = [
        ScatterTask(
            shard=shards[i],
            index=i,
            member=m.members[i],
            rules=m.rules,
            fraction=m.fraction,
            seed=m.seed,
            orders=m.orders,
            first=m.first,
            starts=m.starts[i],
            out=bucket_file(scratch, i),
        )
        for i in m.chosen
    ]
    scattered = run_tasks(
        scatter,
        tasks,
        desc=MIX,
        size=lambda t: file_size(t.shard.path),  # its ids, more or less: not its documents
        workers=config.n_workers,
        executor=config.executor,
        ray_address=config.ray_address,
    )
    with parquet_file(shards[0].path) as pf:
        ids_type = pf.schema_arrow.field("ids").type
    inputs = strings([s.source for s in shards])
    sources = strings(m.names)
    held = [by_bucket(r["batches"]) for r in scattered]  # per input chosen
    gathers = []
    for split, order in enumerate(m.orders):
        for k in range(order.buckets):
            b = m.first[split] + k
            pieces = tuple(
                (i, bucket_file(scratch, i), tuple(h[b]))
                for i, h in zip(m.chosen, held, strict=True)
                if b in h
            )
            name = mix_part(k, split)
            metadata = {
                SOURCE: f"{MIX}/{name.removesuffix('.parquet')}".encode(),
                TOKENIZER_SHA256: tok.sha256.encode(),
                VOCAB_SIZE: str(tok.vocab_size).encode(),
                **({SPLIT: SPLITS[split].encode()} if len(m.orders) > 1 else {}),
            }
            result: dict = {"part": b, "mix": m.summary} if b == 0 else {"part": b}
            state = json.dumps({"key": m.key, "result": result}, sort_keys=True).encode()
            schema = part_schema(ids_type, metadata)
            gathers.append(GatherTask(b, pieces, inputs, sources, schema, state, folder / name))
    records = run_tasks(
        gather,
        gathers,
        desc="mix-write",
        workers=config.n_workers,
        executor=config.executor,
        ray_address=config.ray_address,
    )
    remove_buckets(scratch)
    return [{"file": t.out.name, **r} for t, r in zip(gathers, records, strict=True)]
