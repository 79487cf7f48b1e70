"""mix: the mixture a data recipe asks for (tokenmill/recipe.py), from the
token shards, written as token shards of its own, OUT/mix/part-NNNNN.parquet,
which the layouts (--pack, --format) then get instead of OUT/tokens/.

Sources. A recipe source is the inputs its `files` glob matches, else
those under the folder of its name, or the input at DATA's top whose name
before its first dot is it (`web.jsonl`). Inputs of no recipe source are
left out (listed in the manifest, none of their documents taken). --shuffle
without a recipe takes every source once.

Choosing. A source of A tokens with a budget of B (recipe.Share.budget)
gives each document B // A copies (whole epochs), then one more to a
deterministic subset of the rest, R = B mod A: the documents in the order
of a seeded 64-bit hash of (input name, row) (ties: input, row), taken until
their tokens reach R. A source's tokens taken are thus within one document
of its budget (above it by less than the last document taken), and every
document taken appears exactly as many times as its copies say.

Order and writing: stages/shuffle.py. The mixture is in a seeded global
order with --shuffle SEED, else in input order, epoch after epoch; either
way it depends on the seed, the input names and rows and the recipe only,
not on --workers, --executor or where DATA lies.

Memory. The driver holds each document's row, tokens and copies (16 bytes a
document) and, while it chooses a source's subset, 40 bytes a document of
that source; a task, one batch of a shard and 64 MB of ids (pass 1), or one
bucket of ~64 MB of ids (pass 2: shuffle.BUCKET_BYTES).

Reuse. Each part records in its Parquet metadata a digest of what the
mixture is made from (the token shards' names and sha256, the recipe, the
seed, the bucket size) and, in part 0, the mixture's accounting; a rerun
keeps the parts when the digest is the same and each still has the sha256
its state file records, so changing only the seed or one budget redoes the
mix and nothing before it. Every part is written whole or not at all, so a
killed mix is redone to the same bytes.
"""

from __future__ import annotations

import json
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from tokenmill.config import Config
from tokenmill.errors import TokenmillError
from tokenmill.executors import run_tasks
from tokenmill.io.files import known_sha256, parquet_json_metadata
from tokenmill.io.inputs import matches_glob
from tokenmill.io.metadata import SOURCE, STATE, TOKENIZER_SHA256, VOCAB_SIZE
from tokenmill.io.storage import AnyPath, location, parquet_file
from tokenmill.io.storage import size as file_size
from tokenmill.recipe import Recipe, Share
from tokenmill.stages.results import MixResult
from tokenmill.stages.shuffle import (
    BUCKET_BYTES,
    BUCKETS,
    MAX_BUCKET_TOKENS,
    GatherTask,
    Order,
    Rule,
    ScatterTask,
    bucket_file,
    digest,
    gather,
    hashes,
    numbers,
    part_schema,
    remove_buckets,
    scatter,
    strings,
)
from tokenmill.stages.state import verified_sha256
from tokenmill.stages.tokens import TokenShard
from tokenmill.tokenizer import Tokenizer

MIX = "mix"  # its folder under OUT
VERSION = 1  # bumped when the same recipe would choose or order otherwise
# The ids of one part (and of what one task of pass 2 holds): tests make it small.
BUCKET_ENV = "TOKENMILL_MIX_BUCKET_BYTES"


def part_name(k: int) -> str:
    return f"part-{k:05d}.parquet"


def default_source(name: str) -> str:
    """The source of input `name` without a recipe's glob: its top folder, or
    for an input at DATA's top its name before the first dot."""
    top, sep, _ = name.partition("/")
    return top if sep else name.split(".", 1)[0]


@dataclass
class Group:
    """A source of the mixture: its recipe entry (None: left out) and inputs."""

    name: str
    share: Share | None
    inputs: list[int] = field(default_factory=list)  # indices into the shards


def groups(shards: list[TokenShard], recipe: Recipe, where: str = "mix") -> list[Group]:
    """The sources the shards make up under `recipe`, in the recipe's order,
    then those left out."""
    if not recipe.sources:  # --shuffle alone: every source once
        names = dict.fromkeys(default_source(s.source) for s in shards)
        recipe = Recipe(tuple(Share(n, epochs=1.0) for n in names))
    taken: dict[str, Group] = {s.name: Group(s.name, s) for s in recipe.sources}
    left: dict[str, Group] = {}
    globbed = [s for s in recipe.sources if s.files]
    for i, shard in enumerate(shards):
        matched = [s.name for s in globbed if matches_glob(shard.source, s.files or "")]
        if len(matched) > 1:
            raise TokenmillError(
                f"{where}: sources {matched[0]!r} and {matched[1]!r} both take {shard.source} "
                "(their files globs overlap)"
            )
        name = matched[0] if matched else default_source(shard.source)
        share = taken[name].share if name in taken else None
        if share is not None and (matched or not share.files):
            taken[name].inputs.append(i)
        else:  # under a folder whose recipe source takes only what its glob matches
            name = f"{name} (left out)" if name in taken else name
            left.setdefault(name, Group(name, None)).inputs.append(i)
    for g in taken.values():
        if not g.inputs:
            share = g.share
            assert share is not None
            how = (
                f"its files glob {share.files!r} matches no input"
                if share.files
                else f"no input is under {g.name}/ or named {g.name}.* at DATA's top"
            )
            known = ", ".join(sorted({default_source(s.source) for s in shards}))
            raise TokenmillError(f"{where}.{g.name}: {how} (sources here: {known})")
    return [*taken.values(), *left.values()]


@dataclass
class Index:
    """One token shard's documents: rows and token counts, in row order."""

    rows: np.ndarray  # uint64
    tokens: np.ndarray  # uint32


def read_index(shard: TokenShard) -> Index:
    rows, tokens = [], []
    for batch in shard.batches(columns=("row", "n_tokens")):
        rows.append(numbers(batch.column("row")))
        tokens.append(numbers(batch.column("n_tokens")))
    return Index(
        np.concatenate(rows) if rows else np.empty(0, np.uint64),
        np.concatenate(tokens) if tokens else np.empty(0, np.uint32),
    )


def choose(g: Group, shards: list[TokenShard], index: list[Index], total: int | None, seed: int):
    """(the Rule of source `g`, its budget) given the documents of its inputs."""
    available = sum(int(index[i].tokens.sum(dtype=np.int64)) for i in g.inputs)
    if g.share is None:
        return Rule(0), 0
    budget = g.share.budget(total, available)
    if budget == 0:
        return Rule(0), 0
    if available == 0:
        raise TokenmillError(f"mix.{g.name}: the source has no tokens to take {budget} of")
    epochs, rest = divmod(budget, available)
    if rest == 0:
        return Rule(epochs), budget
    h = np.concatenate([hashes("select", seed, shards[i].source, index[i].rows) for i in g.inputs])
    where = np.concatenate([np.full(len(index[i].rows), i, np.int64) for i in g.inputs])
    rows = np.concatenate([index[i].rows for i in g.inputs])
    tokens = np.concatenate([index[i].tokens for i in g.inputs])
    order = np.lexsort((rows, where, h))
    # The first document at which the tokens taken reach the rest (rest < available).
    last = order[np.searchsorted(np.cumsum(tokens[order], dtype=np.int64), rest)]
    return Rule(epochs, (int(h[last]), int(where[last]), int(rows[last]))), budget


def counts(copies: np.ndarray, tokens: np.ndarray) -> dict:
    return {
        "documents": int(copies.sum(dtype=np.int64)),
        "tokens": int(np.dot(copies.astype(np.int64), tokens.astype(np.int64))),
    }


def accounting(g: Group, budget: int, copies: dict[int, np.ndarray], index: list[Index]) -> dict:
    """A source's line of the manifest's mix (without its share of the total)."""
    c = np.concatenate([copies[i] for i in g.inputs])
    t = np.concatenate([index[i].tokens for i in g.inputs])
    taken = counts(c, t)
    once = counts(np.minimum(c, 1), t)
    available = counts(np.ones_like(c), t)
    return {
        "name": g.name,
        "asked": g.share.asked() if g.share else None,
        **({"files": g.share.files} if g.share and g.share.files else {}),
        "budget": budget,
        "available": available,
        "taken": taken,
        "repeated": {k: taken[k] - once[k] for k in taken},
        "epochs": round(taken["tokens"] / available["tokens"], 6) if available["tokens"] else 0,
    }


def starts(copies: dict[int, np.ndarray], index: list[Index]) -> dict[int, tuple[int, ...]]:
    """Without --shuffle: where in the stream each epoch's copies of each input start
    (epoch 0 of every input in input order, then epoch 1, ...)."""
    ahead = {}  # input -> tokens of its documents with more than e copies, per epoch e
    for i, c in copies.items():
        per = np.zeros(int(c.max(initial=0)) + 1, np.int64)
        np.add.at(per, c, index[i].tokens)
        ahead[i] = np.cumsum(per[::-1])[::-1][1:]  # tokens of copies beyond e
    result: dict[int, list[int]] = {i: [] for i in copies}
    at, active, epoch = 0, sorted(ahead), 0
    while active:  # each round drops the inputs with no copies beyond it
        for i in active:
            result[i].append(at)
            at += int(ahead[i][epoch])
        epoch += 1
        active = [i for i in active if epoch < len(ahead[i])]
    return {i: tuple(s) for i, s in result.items()}


def bucket_bytes() -> int:
    value = os.environ.get(BUCKET_ENV, "")
    if not value:
        return BUCKET_BYTES
    if not value.isdigit() or int(value) < 1:
        raise TokenmillError(f"{BUCKET_ENV}={value!r}: a number of bytes, at least 1")
    return int(value)


def made_from(shards: list[TokenShard], shas: dict[str, str], config: Config, size: int) -> dict:
    """The key every part records: what the mixture is made from."""
    what = {
        "version": VERSION,
        "recipe": config.mix.to_dict() if config.mix else None,
        "shuffle": config.shuffle,
        "inputs": [[s.source, s.name, shas[s.name]] for s in shards],
        "bucket_bytes": size,
    }
    # eos: the layouts read whether rows end in <|endoftext|> from the key (layouts/stream.py).
    return {"stage": MIX, "eos": config.eos, "made_from": digest(what)}


def kept_parts(folder: AnyPath, key: dict) -> tuple[dict, list[dict]] | None:
    """(the accounting, the parts' records) when the parts in `folder` are
    those `key` makes and unchanged since, else None."""
    first = parquet_json_metadata(folder / part_name(0), STATE)
    if not isinstance(first, dict) or first.get("key") != key:
        return None
    summary = first.get("result", {}).get("mix")
    if not isinstance(summary, dict) or not isinstance(summary.get("parts"), int):
        return None
    records = []
    for k in range(summary["parts"]):
        path = folder / part_name(k)
        state = parquet_json_metadata(path, STATE)
        if not isinstance(state, dict) or state.get("key") != key:
            return None
        sha256 = verified_sha256(path)
        if sha256 is None:
            return None
        with parquet_file(path) as pf:
            rows = pf.metadata.num_rows
        records.append(
            {"file": part_name(k), "rows": rows, "bytes": file_size(path), "sha256": sha256}
        )
    return summary, records


@dataclass(frozen=True)
class Mixture:
    """What the two passes of stages/shuffle.py write: which inputs have
    copies, each input's Rule and source, the order, the parts' key and the
    accounting (recorded in part 0)."""

    chosen: list[int]
    rules: dict[int, Rule]
    sources: list[str]  # by input index ("" when left out)
    seed: int  # of the "select" hashes
    order: Order
    starts: dict[int, tuple[int, ...]]  # unshuffled: shuffle.ScatterTask.starts
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
    written = (sum(r["rows"] for r in records), sum(r["tokens"] for r in records))
    if written != (summary["documents"], summary["tokens"]):
        raise TokenmillError(f"{folder}: the token shards changed while being mixed; rerun")
    return MixResult(seconds=time.monotonic() - start, redone=1, summary=summary, parts=records)


def plan_mixture(shards: list[TokenShard], config: Config, size: int, key: dict) -> Mixture:
    """Read the shards' rows and token counts, choose every source's copies and
    account for them."""
    recipe = config.mix or Recipe()
    seed = config.shuffle if config.shuffle is not None else 0
    found = groups(shards, recipe)
    with ThreadPoolExecutor(max(1, min(config.n_workers, len(shards)))) as pool:
        index = list(pool.map(read_index, shards))
    rules: dict[int, Rule] = {}
    sources = [""] * len(shards)
    copies: dict[int, np.ndarray] = {}
    lines = []
    for g in found:
        rule, budget = choose(g, shards, index, recipe.total, seed)
        for i in g.inputs:
            rules[i] = rule
            sources[i] = g.name if g.share is not None else ""
            copies[i] = rule.copies(seed, i, shards[i].source, index[i].rows).astype(np.uint32)
        lines.append(accounting(g, budget, copies, index))
    total = sum(line["taken"]["tokens"] for line in lines)
    if total == 0:
        raise TokenmillError("mix: the recipe takes no tokens (every budget 0, or empty sources)")
    budgets = sum(line["budget"] for line in lines)
    for line in lines:
        line["share"] = round(line["taken"]["tokens"] / total, 6) if total else 0
        line["asked_share"] = round(line["budget"] / budgets, 6) if budgets else 0
    bucket_tokens = max(1, min(size // shards[0].id_dtype.itemsize, MAX_BUCKET_TOKENS))
    order = Order(config.shuffle, max(1, math.ceil(total / bucket_tokens)), bucket_tokens)
    summary = {
        "shuffle": config.shuffle,
        "documents": sum(line["taken"]["documents"] for line in lines),
        "tokens": total,
        "budget": budgets,
        "parts": order.buckets,
        "sources": lines,
    }
    chosen = [i for i in range(len(shards)) if copies[i].any()]
    placed = starts({i: copies[i] for i in chosen}, index) if order.seed is None else {}
    return Mixture(chosen, rules, sources, seed, order, placed, key, summary)


def write_mixture(
    shards: list[TokenShard], folder: AnyPath, tok: Tokenizer, config: Config, mixture: Mixture
) -> list[dict]:
    """The two passes of stages/shuffle.py; each part's record."""
    scratch = folder / BUCKETS
    remove_buckets(scratch)
    m = mixture
    scattered = run_tasks(
        scatter,
        [
            ScatterTask(
                shards[i],
                i,
                m.rules[i],
                m.seed,
                m.order,
                m.starts.get(i, ()),
                bucket_file(scratch, i),
            )  # fmt: skip
            for i in m.chosen
        ],
        desc=MIX,
        size=lambda t: t.shard.documents,
        workers=config.n_workers,
        executor=config.executor,
        ray_address=config.ray_address,
    )
    with parquet_file(shards[0].path) as pf:
        ids_type = pf.schema_arrow.field("ids").type
    inputs = strings([s.source for s in shards])
    sources = strings(m.sources)
    held: list[dict[int, list[int]]] = []  # per input chosen: its record batches by bucket
    for r in scattered:
        held.append({})
        for n, b in enumerate(r["batches"]):
            held[-1].setdefault(b, []).append(n)
    tasks = []
    for b in range(m.order.buckets):
        pieces = tuple(
            (i, bucket_file(scratch, i), tuple(h[b]))
            for i, h in zip(m.chosen, held, strict=True)
            if b in h
        )
        metadata = {
            SOURCE: f"{MIX}/{part_name(b).removesuffix('.parquet')}".encode(),
            TOKENIZER_SHA256: tok.sha256.encode(),
            VOCAB_SIZE: str(tok.vocab_size).encode(),
        }
        result: dict = {"part": b, "mix": m.summary} if b == 0 else {"part": b}
        state = json.dumps({"key": m.key, "result": result}, sort_keys=True).encode()
        schema = part_schema(ids_type, metadata)
        tasks.append(GatherTask(b, pieces, inputs, sources, schema, state, folder / part_name(b)))
    records = run_tasks(
        gather,
        tasks,
        desc="mix-write",
        workers=config.n_workers,
        executor=config.executor,
        ray_address=config.ray_address,
    )
    remove_buckets(scratch)
    return [{"file": part_name(b), **r} for b, r in enumerate(records)]
