"""What each source of a data recipe takes (stages/mix.py), and the account
of what was taken.

Choosing. A source of A tokens with a budget of B (recipe.Share.budget)
gives each document B // A copies (whole epochs), then one more to a
deterministic subset of the rest, R = B mod A: the documents in the order
of a seeded 64-bit hash of (input name, row) (ties: input, row), taken until
their tokens reach R. A source's tokens taken are thus within one document
of its budget (above it by less than the last document taken), and every
document taken appears exactly as many times as its copies say. What a
source takes is one shuffle.Rule, which the tasks apply to each document.

Validation (--val-fraction F). Documents are held out before anything is
chosen, by the hash of (input name, row) that splits a run without a mix
(stages/split.py), so no copy of a held-out document can be in train. The
budgets are met from the train documents; the validation set takes of each
recipe source its held-out documents, each once: of a source given in
epochs E, min(E, 1) of their tokens (all of them from one epoch up), of a
budget or weight B, B * F / (1 - F) tokens met as a budget is (at least
that, within one document; all of them when fewer): the mixture's
proportions, on documents never trained on. A source
F holds out whole is refused: it has nothing to train on; so is a
validation set of no document, whose layout files would hold no ids.

A document's class is group * splits + split: its source (stages/sources.py)
and, with F, its split (0 train, 1 validation).

Memory: while it chooses a source's subset, under 50 bytes a document of that
source (its documents' input, row and tokens, their hashes, their order and
the running sum of their tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenmill.errors import TokenmillError
from tokenmill.recipe import MAX_EPOCHS, Recipe, Share
from tokenmill.stages.shuffle import Rule, hashes
from tokenmill.stages.sources import Group, Index
from tokenmill.stages.split import TRAIN, VAL, check_split_holds
from tokenmill.stages.tokens import TokenShard


@dataclass(frozen=True)
class Documents:
    """The documents of one class, in input order: each one's input (its index
    in input order), row and tokens."""

    where: np.ndarray  # int32
    rows: np.ndarray  # uint64
    tokens: np.ndarray  # uint32

    @property
    def available(self) -> int:
        return int(self.tokens.sum(dtype=np.int64))


def documents(c: int, classes: list[np.ndarray], index: list[Index]) -> Documents:
    """The documents of class `c` (counted first, so that each is copied once)."""
    counts = [int(np.count_nonzero(cls == c)) for cls in classes]
    n = sum(counts)
    docs = Documents(np.empty(n, np.int32), np.empty(n, np.uint64), np.empty(n, np.uint32))
    at = 0
    for i, (cls, ix, k) in enumerate(zip(classes, index, counts, strict=True)):
        if k:
            mine = cls == c
            docs.where[at : at + k] = i
            docs.rows[at : at + k] = ix.rows[mine]
            docs.tokens[at : at + k] = ix.tokens[mine]
            at += k
    return docs


def choose(key: str, budget: int, docs: Documents, shards: list[TokenShard], seed: int) -> Rule:
    """The Rule taking `budget` tokens of the documents `docs`, of the source
    the recipe's `key` (`job.toml: mix.code`) asks them of."""
    available = docs.available
    if budget == 0:
        return Rule(0)
    if available == 0:
        raise TokenmillError(f"{key}: the source has no tokens to take {budget} of")
    epochs, rest = divmod(budget, available)
    if epochs >= MAX_EPOCHS:
        raise TokenmillError(
            f"{key}: {budget} tokens of a source of {available} is {epochs} epochs, "
            f"{MAX_EPOCHS:,} or more: a typo in its budget or unit?"
        )
    if rest == 0:
        return Rule(epochs)
    h = np.empty(len(docs.rows), np.uint64)
    cuts = [0, *(np.flatnonzero(np.diff(docs.where)) + 1), len(docs.rows)]
    for start, end in zip(cuts[:-1], cuts[1:], strict=True):
        source = shards[docs.where[start]].source
        h[start:end] = hashes("select", seed, source, docs.rows[start:end])
    order = np.lexsort((docs.rows, docs.where, h))
    # The first document at which the tokens taken reach the rest (rest < available).
    last = order[np.searchsorted(np.cumsum(docs.tokens[order], dtype=np.int64), rest)]
    return Rule(epochs, (int(h[last]), int(docs.where[last]), int(docs.rows[last])))


def choose_all(
    groups: list[Group],
    classes: list[np.ndarray],
    index: list[Index],
    shards: list[TokenShard],
    recipe: Recipe,
    seed: int,
    fraction: float,
) -> tuple[list[Rule], list[tuple[int, int]]]:
    """Each class's Rule and each group's (train, validation) budgets."""
    splits = 2 if fraction > 0 else 1
    rules = [Rule(0)] * (len(groups) * splits)
    budgets: list[tuple[int, int]] = []
    for k, g in enumerate(groups):
        if g.share is None:
            budgets.append((0, 0))
            continue
        key = f"{recipe.where}.{g.name}"
        docs = documents(k * splits, classes, index)
        held = documents(k * splits + 1, classes, index) if splits > 1 else None
        if (
            held is not None
            and not len(docs.rows)
            and not (g.share.asks_nothing() or recipe.implied)
        ):
            raise TokenmillError(
                f"{key}: --val-fraction {fraction} holds out all {len(held.rows)} of its "
                "documents, leaving none to train on (give a smaller --val-fraction)"
            )
        budget = g.share.budget(recipe.total, docs.available)
        rules[k * splits] = choose(key, budget, docs, shards, seed)
        del docs
        val = 0
        if held is not None:
            val = val_budget(g.share, budget, held.available, fraction)
            rules[k * splits + 1] = choose(key, val, held, shards, seed)
        budgets.append((budget, val))
    return rules, budgets


def val_budget(share: Share, budget: int, held: int, fraction: float) -> int:
    """The validation tokens of a source of train budget `budget` and `held`
    held-out tokens, each document at most once: epochs are the held-out
    documents' (all of them from one epoch up: --shuffle without a recipe
    holds out what a run without a mix does); a budget or weight, in the
    proportion of the fraction."""
    if share.epochs is not None:
        return round(min(share.epochs, 1.0) * held)
    return min(held, round(budget * fraction / (1 - fraction)))


class Tally:
    """Documents and tokens by class, summed over inputs."""

    def __init__(self, classes: int):
        self.n = classes
        self.sums = np.zeros((6, classes), np.int64)

    def add(self, cls: np.ndarray, tokens: np.ndarray, copies: np.ndarray) -> None:
        once = np.minimum(copies, 1)
        for k, w in enumerate((None, tokens, copies, copies * tokens, once, once * tokens)):
            counted = np.bincount(cls, None if w is None else w.astype(np.float64), self.n)
            self.sums[k] += np.rint(counted).astype(np.int64)  # exact below 2^53

    def counts(self, c: int, what: str) -> dict:
        at = {"available": 0, "taken": 2, "once": 4}[what]
        return {"documents": int(self.sums[at, c]), "tokens": int(self.sums[at + 1, c])}


def account(
    groups: list[Group],
    budgets: list[tuple[int, int]],
    tally: Tally,
    splits: int,
    fraction: float,
    shuffle: int | None,
    where: str = "mix",
) -> dict:
    """The manifest's mix: per source, asked against taken (train documents;
    with --val-fraction, `val` the held-out ones). `where` names the recipe
    in an error (Recipe.where)."""
    lines: list[dict[str, Any]] = []
    for k, g in enumerate(groups):
        c = k * splits
        taken, once = tally.counts(c, "taken"), tally.counts(c, "once")
        available = tally.counts(c, "available")
        line: dict[str, Any] = {
            "name": g.name,
            "asked": g.share.asked() if g.share else None,
            **({"files": g.share.files} if g.share and g.share.files else {}),
            "budget": budgets[k][0],
            "available": available,
            "taken": taken,
            "repeated": {x: taken[x] - once[x] for x in taken},
            "epochs": round(taken["tokens"] / available["tokens"], 6) if available["tokens"] else 0,
        }
        if splits > 1:
            line["val"] = {
                "budget": budgets[k][1],
                "available": tally.counts(c + 1, "available"),
                "taken": tally.counts(c + 1, "taken"),
            }
        lines.append(line)
    total = sum(line["taken"]["tokens"] for line in lines)
    if total == 0:
        raise TokenmillError(
            f"{where}: the recipe takes no tokens (every budget 0, or empty sources)"
        )
    asked = sum(line["budget"] for line in lines)
    for line in lines:
        line["share"] = round(line["taken"]["tokens"] / total, 6)
        line["asked_share"] = round(line["budget"] / asked, 6) if asked else 0
    summary: dict[str, Any] = {
        "shuffle": shuffle,
        "documents": sum(line["taken"]["documents"] for line in lines),
        "tokens": total,
        "budget": asked,
        "parts": 0,
        "sources": lines,
    }
    if splits > 1:
        summary["val"] = {
            "fraction": fraction,
            "documents": sum(line["val"]["taken"]["documents"] for line in lines),
            "tokens": sum(line["val"]["taken"]["tokens"] for line in lines),
            "parts": 0,
        }
        # The corpus may hold out documents while the recipe takes none of
        # them (its sources' held-out share, or a budget's, rounds to 0).
        check_split_holds({TRAIN: summary, VAL: summary["val"]}, fraction, where)
    return summary
