"""The options every stage shares, resolved once and recorded in the manifest."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass

from tokenmill.errors import OptionError, TokenmillError
from tokenmill.recipe import Recipe, parse_recipe
from tokenmill.tokenizer.ids import BOS, MAX_VOCAB_SIZE
from tokenmill.tokenizer.options import (
    DEFAULT_PATTERN,
    SUPERWORD_MAX_WORDS,
    check_options,
    check_superword,
    training_special_tokens,
)

ON_ERROR = ("fail", "skip")
EXECUTORS = ("threads", "processes", "ray")  # see pipeline/tokenmill/executors.py
# --format: "parquet", the token shards (always written), and the training
# layouts (tokenmill.layouts.FORMATS), in this order in a run's config.
OUTPUT_FORMATS = ("parquet", "bin", "megatron", "datatrove", "olmo")
# The layouts --per-shard acts on: bin writes a pair of arrays per token shard
# anyway (one train and one val pair with --val-fraction, --per-shard or not).
PER_SHARD_FORMATS = ("megatron", "datatrove", "olmo")
TXT_UNITS = ("line", "paragraph", "file")  # what one document of a .txt shard is
MAX_VOCAB = MAX_VOCAB_SIZE  # ids are uint32
MAX_SEQ_LEN = 2**32 - 1  # a packed row's n_tokens is uint32
MAX_MIN_COUNT = 2**63 - 1  # a word table's counts are int64
WORKERS_PER_CORE = 8  # more threads than this per core only add switching
MAX_RAY_WORKERS = 100_000
# --val-fraction's range, said alike by every command that takes it.
VAL_FRACTION_RANGE = "0 (no split) to below 1"
# `run` options not spelled as their Config field with - for _.
OPTION_NAMES = {"special_tokens": "--special-token"}


def option_name(key: str) -> str:
    """The `run` option setting the Config field `key`."""
    return OPTION_NAMES.get(key, "--" + key.replace("_", "-"))


def default_workers() -> int:
    """--workers 0: one per core this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def check_workers(workers: int, executor: str) -> int:
    """`workers` if it is sane for `executor`: threads and processes at most
    WORKERS_PER_CORE per core of this machine (each worker is a thread or a
    process, and all start at once); Ray tasks spread over a cluster."""
    limit = MAX_RAY_WORKERS if executor == "ray" else WORKERS_PER_CORE * default_workers()
    if not 0 <= workers <= limit:
        raise OptionError(
            f"--workers {workers} is out of range: 0 (one per core) to {limit}"
            + ("" if executor == "ray" else f" ({WORKERS_PER_CORE} per core on this machine)")
        )
    return workers


@dataclass(frozen=True)
class Config:
    mode: str = "byte"
    pattern: str = DEFAULT_PATTERN
    lowercase: bool = False
    text_column: str = "text"  # a dotted path (meta.content) names a nested field
    txt_unit: str = "line"  # .txt documents: one per line, per blank-line paragraph, per file
    glob: str = "**/*"  # which files under DATA are inputs
    vocab_size: int = 32768
    min_count: int = 1
    eos: bool = True
    workers: int = 0  # 0: one per core
    executor: str = "threads"
    ray_address: str | None = None  # --executor ray: an existing cluster; None: a local Ray
    on_error: str = "fail"  # fail: stop at the first bad input; skip: skip it and list it
    force: bool = False  # redo every output, even those a rerun could keep
    # train: extra special tokens; ids after the merges and <|endoftext|> (see
    # tokenizer.training_special_tokens)
    special_tokens: tuple[str, ...] = ()
    pack: int = 0  # > 0: also write sequences of exactly this many ids (stages/pack.py)
    bos: bool = False  # pack: put <|bos|> before each document (train reserves it)
    # --format: the token shards and the layouts to write from them (tokenmill.layouts);
    # given as "megatron,bin" or a sequence, held as ("parquet", ...) in OUTPUT_FORMATS order
    format: tuple[str, ...] = ("parquet",)
    # the layouts: one set of files per token shard rather than one merged set
    per_shard: bool = False
    # > 0: this share of documents goes to validation, by a hash of shard and row
    val_fraction: float = 0.0
    # train: grow this tokenizer (any file formats.load_any reads) instead of
    # starting from the base vocabulary; mode, pattern and lowercase are its own
    extend: str | None = None
    # --extend, char mode: characters the base never saw get ids (else <unk>)
    extend_alphabet: bool = False
    # train: superword tokens from this vocabulary size on (tokenizer/superword.py),
    # 0 or None: none; at most this many words a token (0: no limit)
    superword_at: int | None = None
    superword_max_words: int = SUPERWORD_MAX_WORDS
    # [mix] / --mix FILE: the tokens of each source the layouts get (stages/mix.py);
    # a dict is read as a [mix] table
    mix: Recipe | None = None
    # --shuffle SEED: the layouts get the documents in a seeded global order
    shuffle: int | None = None

    def __post_init__(self) -> None:
        check_options(self.mode, self.pattern, cli=True)
        if self.on_error not in ON_ERROR:
            raise TokenmillError(
                f"--on-error must be one of {', '.join(ON_ERROR)}, not {self.on_error!r}"
            )
        if self.executor not in EXECUTORS:
            raise TokenmillError(
                f"--executor must be one of {', '.join(EXECUTORS)}, not {self.executor!r}"
            )
        object.__setattr__(self, "special_tokens", tuple(self.special_tokens))
        if self.superword_at == 0:  # as --pack 0: how the command line switches a job's off
            object.__setattr__(self, "superword_at", None)
        check_workers(self.workers, self.executor)
        if not 1 <= self.vocab_size <= MAX_VOCAB:
            raise TokenmillError(
                f"--vocab-size {self.vocab_size} is out of range: 1 to {MAX_VOCAB} (ids are uint32)"
            )
        if not 1 <= self.min_count <= MAX_MIN_COUNT:
            raise TokenmillError(
                f"--min-count {self.min_count} is out of range: 1 to {MAX_MIN_COUNT}"
            )
        specials = len(self.train_special_tokens)
        # Byte mode's base is known up front, so a hopeless size fails before any work.
        # (With --extend the mode and the base are the base tokenizer's: `extend` checks.)
        if self.mode == "byte" and not self.extend and self.vocab_size < 256 + specials:
            raise TokenmillError(
                f"--vocab-size {self.vocab_size} is below the base vocabulary: 256 byte tokens "
                f"+ {specials} special token{'s' if specials > 1 else ''}"
            )
        object.__setattr__(self, "format", output_formats(self.format))
        if not self.text_column:
            # An unset variable's value, most likely: no input has a nameless text
            # column, and the run would fail at its first row. A dotted name that is
            # no path (".", "a..b") may still be a column's or key's own name.
            raise TokenmillError(
                "--text-column is empty: give the column or JSON field holding the text"
            )
        if self.txt_unit not in TXT_UNITS:
            raise TokenmillError(
                f"--txt-unit must be one of {', '.join(TXT_UNITS)}, not {self.txt_unit!r}"
            )
        if not 0 <= self.val_fraction < 1:
            raise TokenmillError(
                f"--val-fraction {self.val_fraction} is out of range: {VAL_FRACTION_RANGE}"
            )
        if self.lowercase and self.mode == "byte" and not self.extend:
            raise TokenmillError(
                "--lowercase is char mode's (--mode char): byte mode keeps every byte"
            )
        if self.extend_alphabet and not self.extend:
            raise TokenmillError("--extend-alphabet goes with --extend (a char-mode base)")
        self._check_unused()
        self._check_superword(specials)
        if self.mix is not None:
            object.__setattr__(self, "mix", parse_recipe(self.mix))
        if self.shuffle is not None and not 0 <= self.shuffle < 2**64:
            raise TokenmillError(f"--shuffle {self.shuffle} is out of range: a seed of 0 to 2^64-1")
        if not 0 <= self.pack <= MAX_SEQ_LEN:
            raise TokenmillError(
                f"--pack {self.pack} is out of range: 0 (none), or a sequence length of 1 to "
                f"{MAX_SEQ_LEN}"
            )

    def _check_unused(self) -> None:
        """Refuse an option that nothing else given acts on: dropped, it would
        leave a run other than the one asked for."""
        if self.mode != "byte" and self.pattern != DEFAULT_PATTERN:
            raise TokenmillError(
                f"--pattern {self.pattern} is byte mode's: char mode splits at whitespace"
            )
        if self.superword_at is None and self.superword_max_words != SUPERWORD_MAX_WORDS:
            raise TokenmillError("--superword-max-words goes with --superword-at")
        if self.ray_address is not None and self.executor != "ray":
            raise TokenmillError(
                f"--ray-address goes with --executor ray, not --executor {self.executor}"
            )
        if self.per_shard and not set(self.format) & set(PER_SHARD_FORMATS):
            why = (
                "--format bin writes a pair of arrays per shard already"
                if "bin" in self.format
                else "a layout to write one set of files per shard of"
            )
            raise TokenmillError(
                f"--per-shard goes with --format {', '.join(PER_SHARD_FORMATS[:-1])} or "
                f"{PER_SHARD_FORMATS[-1]} ({why})"
            )

    def check_given(self, given: Collection[str]) -> None:
        """Refuse an option of `given` (the fields set on the command line or
        by a job file) that nothing else set acts on. Its value cannot tell:
        `--mode char --pattern cl100k` gives the default pattern, which char
        mode leaves alone where nobody asked for one."""
        if "pattern" in given and self.mode != "byte" and not self.extend:
            raise TokenmillError(
                f"--pattern {self.pattern} is byte mode's: char mode splits at whitespace"
            )
        if "superword_max_words" in given and self.superword_at is None:
            raise TokenmillError("--superword-max-words goes with --superword-at")

    def _check_superword(self, specials: int) -> None:
        if self.superword_at is None:
            return
        if self.extend:
            raise TokenmillError(
                "--superword-at does not go with --extend: a superword tokenizer is "
                "trained from the bytes up, both stages in one run (drop --extend)"
            )
        if not 0 <= self.superword_max_words < 2**32:
            raise TokenmillError(
                f"--superword-max-words {self.superword_max_words}: want a whole number from 1 "
                f"to {2**32 - 1} (0: no limit)"
            )
        check_superword(self.superword_at, self.max_words, self.mode)
        if not 256 + specials <= self.superword_at <= self.vocab_size:
            raise TokenmillError(
                f"--superword-at {self.superword_at} is out of range: {256 + specials} (256 "
                f"bytes + {specials} special token{'s' if specials > 1 else ''}) to "
                f"--vocab-size {self.vocab_size}"
            )

    @property
    def max_words(self) -> int | None:
        """--superword-max-words as training takes it (None: no limit)."""
        return self.superword_max_words or None

    @property
    def train_special_tokens(self) -> list[str]:
        """The special tokens `train` reserves, in id order (see training_special_tokens)."""
        extra = list(self.special_tokens)
        if self.bos and BOS not in extra:
            extra.append(BOS)
        return training_special_tokens(self.mode, extra)

    @property
    def layouts(self) -> tuple[str, ...]:
        """The layouts to write after encode, in order: "packed" (--pack), then --format's."""
        return ("packed",) * bool(self.pack) + self.format[1:]

    def token_shard_options(self) -> list[str]:
        """The options set here that act on token shards (a mix, the layouts),
        which counting alone has none of: refused with it (plan.py, jobs.py)."""
        given = {
            "mix": self.mix is not None,
            "shuffle": self.shuffle is not None,
            "pack": self.pack > 0,
            "format": len(self.format) > 1,
            "val_fraction": self.val_fraction > 0,
            "bos": self.bos,
            "per_shard": self.per_shard,
            "eos": not self.eos,  # --no-eos: encode appends no <|endoftext|>
        }
        return [key for key, on in given.items() if on]

    @property
    def mixes(self) -> bool:
        """Whether the layouts get a mixture (stages/mix.py) rather than the token shards."""
        return self.mix is not None or self.shuffle is not None

    @property
    def n_workers(self) -> int:
        return self.workers or default_workers()

    def to_dict(self) -> dict:
        d = asdict(self)
        if d["extend"] is None:
            del d["extend"]  # manifests of runs that extend nothing stay as they were
        if not d["extend_alphabet"]:
            del d["extend_alphabet"]
        if d["superword_at"] is None:  # nor those of runs without superword tokens
            del d["superword_at"], d["superword_max_words"]
        for key in ("mix", "shuffle"):  # manifests of runs that mix nothing stay as they were
            if d[key] is None:
                del d[key]
        if self.mix is not None:
            d["mix"] = self.mix.to_dict()
        d["workers"] = self.n_workers
        d["special_tokens"] = list(self.special_tokens)
        d["format"] = list(self.format)
        return d


def output_formats(value: str | Iterable[str]) -> tuple[str, ...]:
    """--format's value ("megatron,bin", or names in a list, each maybe such a
    list: --format given twice) as the Config holds it: "parquet" first, then
    each layout once, in OUTPUT_FORMATS order."""
    values = [value] if isinstance(value, str) else list(value)
    names = [n for v in values for n in (v.split(",") if isinstance(v, str) else [v])]
    for name in names:
        if not isinstance(name, str) or name.strip() not in OUTPUT_FORMATS:
            raise TokenmillError(
                f"--format: unknown format {name!r}; choose from {', '.join(OUTPUT_FORMATS)} "
                "(several separated by commas)"
            )
    given = {name.strip() for name in names}
    return ("parquet", *(f for f in OUTPUT_FORMATS[1:] if f in given))
