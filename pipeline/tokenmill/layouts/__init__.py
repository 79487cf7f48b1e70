"""Training layouts: the files trainers load, written from the token shards.

The Parquet token shards of OUT/tokens/ are the source of truth; each layout
here is one module that turns them into what one family of trainers reads,
in a folder of OUT of its own:

    packed     --pack N      OUT/packed/     fixed-length rows (Parquet)
    bin        --format bin  OUT/bin/        nanoGPT's flat uint16/uint32 arrays
    megatron   --format megatron   OUT/megatron/   Megatron's indexed dataset (.bin + .idx)
    datatrove  --format datatrove  OUT/datatrove/  datatrove/nanotron .ds files
    olmo       --format olmo       OUT/olmo/       OLMo-core's .npy token memmaps

A layout is a module-level object with the `Layout` shape below; adding a
format is one new module and one line in `LAYOUTS`. `run` hands each the same
`LayoutJob` and lists what it returns (`LayoutResult.files`) in the manifest,
so `verify`, resume and stale-file removal cover every layout alike. A
layout writes each file through `io.writers.atomic_path` (a killed run leaves
no half-written file) and its output depends on the token shards and the
job's options only (a rerun writes the same bytes).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from tokenmill.io.storage import AnyPath
from tokenmill.stages.results import StageResult, plural

if TYPE_CHECKING:  # at run time: stages.tokens reads OUT's layout, which lists these layouts
    from tokenmill.stages.tokens import TokenShard
    from tokenmill.tokenizer import Tokenizer


@dataclass(frozen=True)
class LayoutJob:
    """What every layout is given: the token shards in input order (one
    tokenizer, `shards[0].id_dtype` its id width) and the run's options."""

    shards: list[TokenShard]
    folder: AnyPath  # OUT/<layout.folder>: the layout's own
    tokenizer: Tokenizer  # the one the shards were encoded with
    bos: bool = False  # put <|bos|> before each document
    val_fraction: float = 0.0  # > 0: train and val apart (stages/split.py decides)
    per_shard: bool = False  # one set of files per token shard instead of one merged
    seq_len: int = 0  # packed only
    shuffle: int | None = None  # packed only: --shuffle, the rows in a seeded order
    workers: int = 1
    executor: str = "threads"
    ray_address: str | None = None


@dataclass(kw_only=True)
class LayoutResult(StageResult):
    dir: str  # the layout's folder
    files: list[str] = field(default_factory=list)  # written, relative to dir
    rows: dict[str, int] = field(default_factory=dict)  # per file with rows: how many
    documents: int = 0
    tokens: int = 0
    summary: str = ""  # the stage's one line after the counts

    def what(self) -> str:
        notes = [self.summary] if self.summary else []
        if self.reused:
            notes.append("kept: shards and options unchanged")
        said = f" ({'; '.join(notes)})" if notes else ""
        return f"{plural(self.documents, 'document')}, {self.tokens} ids{said}"


@dataclass(frozen=True)
class Document:
    """One document read back from a layout: which split it went to ("" when
    not split), the input shard and row it came from when the layout records
    them (None when not), and its ids as the layout holds them."""

    split: str
    ids: np.ndarray
    source: str | None = None
    row: int | None = None


class TrainerMissing(Exception):
    """`framework_read`: the trainer's reading code does not import; says
    which import failed (megatron-core installed without torch imports none)."""

    def __init__(self, reader: str, error: BaseException):
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        super().__init__(f"{reader} does not import: {message}")


class Layout(Protocol):
    name: str  # its --format value ("packed": --pack)
    folder: str  # its folder under OUT
    reader: str  # whose reading code `framework_read` runs, as pip names it
    # Whether that code reads local files only (a memory map): `check` reads
    # a folder on object storage with tokenmill's reader then, and says why.
    local_only: bool
    # Whether every document ends in <|endoftext|>, added to the rows of shards
    # encoded with --no-eos (layouts/stream.py); else the rows as the shards hold them.
    ends_in_eos: bool

    def owns(self, name: str) -> bool:
        """Whether a file at `name` (relative to the folder) is one this
        layout writes: the only files a rerun may delete there."""
        ...

    def write(self, job: LayoutJob) -> LayoutResult:
        """Write the layout of `job.shards` into `job.folder`."""
        ...

    def read(self, folder: AnyPath, split: bool) -> Iterator[Document]:
        """The documents in `folder`, in the order written, by tokenmill's own
        reading of the format (`tokenmill check` and the tests compare it with
        the token shards and with the trainer's own reader). `split`: whether
        the run wrote train and val apart (--val-fraction). A layout whose files
        do not record their split takes it from the train/ and val/ folders only
        then: unsplit, those are DATA's own folders, of input files."""
        ...

    def framework_read(self, folder: AnyPath, split: bool) -> Iterator[Document]:
        """The documents in `folder` as the trainer's own reading code gives them
        (megatron-core, datatrove, OLMo-core, numpy's memmap for nanoGPT);
        TrainerMissing when that code does not import: `tokenmill check` then
        reads with `read` and says why. `split` as for `read`."""
        ...

    def recorded(self, folder: AnyPath) -> dict[str, str]:
        """What the layout's files record of the tokenizer they were written with
        ("tokenizer_sha256", "vocab_size", "eos_id", "bos_id", "pattern": those the
        format has a place for; empty when it has none). `tokenmill check` compares
        them with OUT's tokenizer."""
        ...


# Bumped when a layout would write other bytes from the same shards and
# options: a rerun then writes every layout anew (stages/layouts_kept.py).
VERSION = 1

# --format values besides "parquet" (the token shards, always written), and
# "packed" (--pack): each the module under layouts/ that defines its LAYOUT.
FORMATS = ("bin", "megatron", "datatrove", "olmo")
MODULES = {
    "packed": "packed",
    "bin": "bin",
    "megatron": "megatron",
    "datatrove": "datatrove",
    "olmo": "olmo",
}


def layout(name: str) -> Layout:
    """The layout of --format `name` (or "packed")."""
    module = importlib.import_module(f"tokenmill.layouts.{MODULES[name]}")
    return module.LAYOUT
