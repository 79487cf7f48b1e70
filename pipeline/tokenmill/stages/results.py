"""What each stage returns: a small record of what it did, which describes
itself in the one line the command prints when the stage ends.

Per-shard records (`ShardStageResult.shards`, `PackResult.shards`, ...) stay
plain dicts: they are what the shard outputs record in their metadata and
what the manifest lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tokenmill.errors import TokenmillError, escaped

if TYPE_CHECKING:
    import pyarrow as pa

    from tokenmill.tokenizer import Tokenizer


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def skipped_documents(skipped: list[dict]) -> str:
    """The documents `skipped` lists, as the manifest's documents_skipped counts
    them, and the skips they come from: whole files (unreadable) and rows."""
    documents = sum(s.get("documents", 0) for s in skipped)
    at_least = "at least " if any(s.get("lower_bound") for s in skipped) else ""
    line = f"{at_least}{plural(documents, 'document')} skipped"
    files = sum(s.get("row") is None for s in skipped)
    if files:
        rows = len(skipped) - files
        line += f" ({plural(files, 'whole file')}" + (f", {plural(rows, 'row')})" if rows else ")")
    return line


def skips_line(skipped: list[dict]) -> str:
    """A finished run's skips (the manifest's `skipped`) in a line for stats
    and the report, whose counts leave them out: how many, from which inputs."""
    inputs = list(dict.fromkeys(escaped(x["shard"]) for x in skipped))
    shown = ", ".join(inputs[:3]) + (f" and {len(inputs) - 3} more" if len(inputs) > 3 else "")
    return (
        f"skips: {skipped_documents(skipped)} in {shown}; "
        "not counted here, manifest.json lists each under skipped"
    )


class NothingRead(TokenmillError):
    """Every document that count or encode met was skipped (--on-error skip):
    a run with nothing in it, which must not pass for a successful one."""

    def __init__(self, result: ShardStageResult):
        self.skipped = result.skipped
        first = result.skipped[0]
        more = len(result.skipped) - 1
        super().__init__(
            f"{result.stage}: no document read, every input skipped: {first['shard']}: "
            f"{first['reason']}" + (f" (and {plural(more, 'more skip')})" if more else "")
        )


def check_read(result: ShardStageResult) -> ShardStageResult:
    """`result`, unless its stage read no document: it skipped them all
    (NothingRead), or every input is empty, a corpus of nothing that a
    scheduled job must not take for a success."""
    if result.skipped and not result.documents:
        raise NothingRead(result)
    if not result.documents:
        raise TokenmillError(
            f"{result.stage}: no document in {plural(len(result.shards), 'input')}: "
            "every one is empty (an empty corpus)"
        )
    return result


@dataclass(kw_only=True)
class StageResult:
    stage: str
    seconds: float
    reused: int = 0  # outputs kept (inputs and options unchanged)
    redone: int = 0  # outputs written

    def describe(self) -> str:
        """One line: what the stage did, how much, how fast."""
        return f"{self.stage}: {self.what()} in {self.seconds:.2f} s{self.rate()}"

    def what(self) -> str:
        raise NotImplementedError

    def rate(self) -> str:
        n_bytes = getattr(self, "bytes", 0)
        return f", {n_bytes / 1e6 / self.seconds:.1f} MB/s" if n_bytes and self.seconds > 0 else ""

    def size(self) -> str:
        return f", {self.bytes / 1e6:.1f} MB" if hasattr(self, "bytes") else ""

    def kept(self) -> str:
        if hasattr(self, "shards"):
            return f" ({self.reused} kept, {self.redone} done)"
        return " (kept: inputs unchanged)" if self.reused else ""

    def skips(self) -> str:
        skipped = getattr(self, "skipped", None)
        return f", {skipped_documents(skipped)}" if skipped else ""

    # Read-only mapping access (result["tokens"]), for callers written against the
    # dicts the stages used to return (bench/).
    def __getitem__(self, key: str):
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None

    def get(self, key: str, default=None):
        return getattr(self, key, default)


@dataclass(kw_only=True)
class ShardStageResult(StageResult):
    """count or encode: one output per input shard."""

    shards: list[dict]  # per shard: shard_task's record
    documents: int
    bytes: int
    skipped: list[dict]  # every skipped document or file
    not_read: list[dict] = field(default_factory=list)  # files under DATA that are no input
    tokens: int = 0  # encode
    tokenizer_sha256: str | None = None  # encode
    normalizer: str | None = None  # encode
    split: dict | None = None  # encode --val-fraction: stages/split.total_counts
    read_with: str | None = None  # the stage whose read made these too: its time is theirs

    @classmethod
    def of(cls, stage: str, results: list[dict], seconds: float, **extra) -> ShardStageResult:
        """Totals over the per-shard records: reused vs redone, skips."""
        return cls(
            stage=stage,
            shards=results,
            documents=sum(r.get("documents", 0) for r in results),
            bytes=sum(r.get("bytes", 0) for r in results),
            reused=sum(r["reused"] for r in results),
            redone=sum(not r["reused"] for r in results),
            skipped=[s for r in results for s in r["skipped"]],
            seconds=seconds,
            **extra,
        )

    def describe(self) -> str:
        if self.read_with is None:
            return super().describe()
        return f"{self.stage}: {self.what()}, from {self.read_with}'s read"

    @property
    def written(self) -> list[str]:
        """The output files (kept or written), in input order; none for a skipped file."""
        return [r["output"]["file"] for r in self.shards if r["output"]]

    def what(self) -> str:
        shards, documents = plural(len(self.shards), "shard"), plural(self.documents, "document")
        what = f"{shards}{self.kept()}, {documents}{self.skips()}"
        if self.stage != "encode":
            return what + self.size()
        what += f", {plural(self.tokens, 'token')}{self.size()}"
        if self.split:
            val = self.split["val"]
            what += (
                f" ({plural(val['documents'], 'document')}, "
                f"{plural(val['tokens'], 'token')} for validation)"
            )
        if self.normalizer:
            what += f", text normalized with {self.normalizer}"
        return what


@dataclass(kw_only=True)
class MergeResult(StageResult):
    stage: str = "merge"
    tables: int
    words: int
    occurrences: int
    # run_merge(keep=True): the table merged now (word, count), not read back.
    table: pa.Table | None = field(default=None, repr=False, compare=False)

    def what(self) -> str:
        return (
            f"{plural(self.tables, 'table')}, {plural(self.words, 'distinct word')}, "
            f"{self.occurrences} in all"
            f"{self.kept()}"
        )


@dataclass(kw_only=True)
class TrainResult(StageResult):
    stage: str = "train"
    words: int
    merges: int
    vocab_size: int
    sha256: str
    # --extend: the merges learned on top of the base's, and bytes per token on
    # the word table with the base and with the extended tokenizer.
    extend: dict | None = None
    # --superword-at: the transition point asked for, and the vocabulary size
    # stage 1 reached, below it where stage 1 ran out of pairs (stage 2 then
    # starts there; None where a kept tokenizer's record does not say).
    superword_at: int | None = None
    stage1_vocab_size: int | None = None
    # --vocab-size: more than `vocab_size` where the pairs ran out first, which
    # the line says (else a manifest asking 300 holds a tokenizer of 266).
    vocab_size_asked: int | None = None
    # The tokenizer trained (or kept), as saved: `run` encodes with it.
    tokenizer: Tokenizer | None = field(default=None, repr=False, compare=False)

    def what(self) -> str:
        grown = ""
        if self.extend:
            e = self.extend
            grown = (
                f" ({e['new_merges']} new on the base's {e['base_merges']}; bytes per token "
                f"{e['base_bytes_per_token']} with the base, {e['bytes_per_token']} extended)"
            )
        short = ""
        at, reached = self.superword_at, self.stage1_vocab_size
        if at is not None and reached is not None and reached < at:
            # Else T looks like where stage 2 began, and T = --vocab-size like no stage 2.
            short = (
                f" (stage 1 ran out of pairs at {reached} ids, short of --superword-at {at}: "
                "stage 2 learned the rest)"
            )
        asked = self.vocab_size_asked
        if asked is not None and self.vocab_size < asked:
            short += f" (ran out of pairs at {self.vocab_size} ids, short of --vocab-size {asked})"
        return (
            f"{plural(self.merges, 'merge')}{grown}, vocabulary {self.vocab_size}, "
            f"from {plural(self.words, 'word')}{short}"
            f"{self.kept()}"
        )


@dataclass(kw_only=True)
class PackResult(StageResult):
    stage: str = "pack"
    shards: list[dict]  # per file written: shard, file, documents, sequences, tokens
    # Token shards read: with a split, each writes a file per side it has documents in.
    token_shards: int
    seq_len: int
    sequences: int
    last_rows: dict[str, int]  # per split ("" unsplit; train, val): ids in its last row
    documents: int
    tokens: int

    def what(self) -> str:
        return (
            f"{plural(self.token_shards, 'shard')}, {plural(self.documents, 'document')}, "
            f"{plural(self.tokens, 'token')} -> "
            f"{plural(self.sequences, 'sequence')} of {self.seq_len} ({self.last()})"
        )

    def last(self) -> str:
        """The ids of the last row: of the stream, or of each split's."""
        if list(self.last_rows) == [""]:
            return f"last: {self.last_rows['']}"
        return "last: " + ", ".join(f"{side} {n}" for side, n in self.last_rows.items())


@dataclass(kw_only=True)
class MixResult(StageResult):
    stage: str = "mix"
    summary: dict  # the manifest's "mix": the accounting (stages/mix.py)
    parts: list[dict]  # per part: file (relative to the mix folder), rows, bytes, sha256

    def what(self) -> str:
        s = self.summary
        repeated = sum(line["repeated"]["documents"] for line in s["sources"])
        taken = sum(1 for line in s["sources"] if line["taken"]["documents"])
        order = "input order" if s["shuffle"] is None else f"shuffled with seed {s['shuffle']}"
        val = f", {s['val']['documents']} held out" if s.get("val") else ""
        return (
            f"{plural(taken, 'source')}, {plural(s['documents'], 'document')} "
            f"({repeated} repeated), "
            f"{plural(s['tokens'], 'token')} of {s['budget']} asked{val} -> "
            f"{plural(len(self.parts), 'part')}, {order}{self.kept()}"
        )


@dataclass(kw_only=True)
class StatsResult(StageResult):
    stage: str = "stats"
    stats: dict  # what `tokenmill stats --json` prints

    @property
    def bytes(self) -> int:
        return self.stats["bytes"]

    def what(self) -> str:
        s = self.stats
        return (
            f"{plural(len(s['shards']), 'shard')}, {plural(s['documents'], 'document')}, "
            f"{plural(s['tokens'], 'token')}"
            f"{self.size()}, {s['bytes_per_token'] or 0:.2f} bytes per token, "
            f"{100 * s['utilization']:.1f} % of the vocabulary used"
        )


@dataclass(kw_only=True)
class ReportResult(StageResult):
    stage: str = "report"
    report: str
    documents: int
    tokens: int
    bytes: int

    def what(self) -> str:
        documents = plural(self.documents, "document")
        return f"{documents}, {plural(self.tokens, 'token')}{self.size()} -> {self.report}"


@dataclass(kw_only=True)
class SweepResult(StageResult):
    stage: str = "sweep"
    vocab_sizes: list[int]
    sample: int | None
    all: dict  # name, documents, bytes, text_tokens and bytes_per_token per size
    sources: list[dict]  # the same per source
    tokenizer_sha256: str
    # Superword tokens (--superword-at): the transition point; then each line
    # also has bpe_text_tokens and bpe_bytes_per_token, ordinary BPE's.
    superword_at: int | None = None
    # ... and the size ordinary BPE reached: below the largest size where its
    # pairs ran out, its numbers there None.
    bpe_vocab_size: int | None = None
    held_out: str | None = None  # --held-out: the inputs encoded, not the run's

    def what(self) -> str:
        bpt = self.all["bytes_per_token"]
        bpe = ""
        if self.superword_at is not None:
            last = self.all["bpe_bytes_per_token"][-1]
            stops = bpe_stops(self.bpe_vocab_size)
            bpe = f" (ordinary BPE: {last})" if last is not None else f" ({stops})"
        return (
            f"{plural(len(self.vocab_sizes), 'vocabulary size')} ({self.vocab_sizes[0]} to "
            f"{self.vocab_sizes[-1]}), {plural(self.all['documents'], 'document')}, "
            "bytes per token "
            f"{bpt[0]} to {bpt[-1]}{bpe}"
        )

    def to_json(self) -> dict:
        d = {
            "stage": self.stage,
            "vocab_sizes": self.vocab_sizes,
            "sample": self.sample,
            "all": self.all,
            "sources": self.sources,
            "tokenizer_sha256": self.tokenizer_sha256,
        }
        if self.superword_at is not None:
            d["superword_at"] = self.superword_at
            d["bpe_vocab_size"] = self.bpe_vocab_size
        if self.held_out is not None:
            d["held_out"] = self.held_out
        return d


def bpe_stops(size: int | None) -> str:
    """Why a sweep has no number for ordinary BPE past `size`."""
    return f"ordinary BPE stops at {size} ids: no pair is left to merge"


@dataclass(kw_only=True)
class CheckResult(StageResult):
    stage: str = "check"
    # per layout: name, folder, documents read, read_with (the reader, or why
    # tokenmill's), equal (its documents are the token shards', or the mixture's),
    # readable; listed False: its files are not the manifest's, so it was not read
    layouts: list[dict]
    documents: int  # in the token shards
    sampled: int  # documents decoded and compared with their text
    problems: list[str]
    # With a recipe: the mixture's documents (repeats too), which the layouts hold.
    mixture: int | None = None

    def lines(self) -> list[str]:
        """One line per layout checked."""
        held = "the token shards'" if self.mixture is None else "the mixture's"
        return [
            f"{s['name']}: not read, its files are not those the manifest lists "
            "(its problems below)"
            if not s.get("listed", True)
            else (
                f"{s['name']}: {plural(s['documents'], 'document')} "
                f"{'equal' if s['equal'] else 'not all equal to'} {held}"
                if s.get("readable", True)
                else f"{s['name']}: cannot be read (its problem below)"
            )
            + f" (read with {s['read_with']})"
            for s in self.layouts
        ]

    def what(self) -> str:
        return (
            f"{plural(len(self.layouts), 'layout')}, {self.documents_checked()}, "
            f"{self.sampled} decoded: {plural(len(self.problems), 'problem')}"
        )

    def documents_checked(self) -> str:
        if self.mixture is None:
            return plural(self.documents, "document")
        return f"{plural(self.documents, 'source document')}, {self.mixture} in the mixture"

    def to_json(self) -> dict:
        return {
            "layouts": self.layouts,
            "documents": self.documents,
            **({} if self.mixture is None else {"mixture": self.mixture}),
            "sampled": self.sampled,
            "problems": self.problems,
        }


@dataclass(kw_only=True)
class RunResult(StageResult):
    stage: str = "run"
    manifest: str
    documents: int
    tokens: int
    skipped: list[dict]
    tokenizer: str | None  # relative to OUT when inside it

    def what(self) -> str:
        documents = plural(self.documents, "document")
        return f"{documents}{self.skips()}, {plural(self.tokens, 'token')} -> {self.manifest}"
