"""The real model vocabularies the encode rows use (o200k_base, cl100k_base
from --vocabularies, and the vocabulary tokenmill learned), and the rows of
loading one: in process (`load`), and as a whole process from start to exit
(`startup`).

Each phase takes a Context (context.py) and returns (rows, notes, extra).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vocab import CL100K, REAL, write_tiktoken

from tokenmill import _native

LOAD_TARGET = 0.3  # seconds for tokenmill to load a real vocabulary, imports excluded
STARTUP_TARGET = 0.25  # seconds for a process to start, import tokenmill and load o200k_base
STARTUP_VOCAB = "o200k_base"


@dataclass(frozen=True)
class Vocab:
    name: str
    ranks: str  # what tokenmill reads: a .tiktoken file or its own tokenizer.json
    preset: str | None  # tokenmill's --pattern (None: the file has its own)
    peer_ranks: str  # the same vocabulary as a .tiktoken file, for the peers
    pattern: str  # the same pattern as a regex, for the peers
    pretokenizer: str  # gigatoken's name for the same pattern

    def tokenmill(self) -> dict:
        return {"ranks": self.ranks, "preset": self.preset}

    def peer(self) -> dict:
        return {"ranks": self.peer_ranks, "pattern": self.pattern}

    def gigatoken(self) -> dict:
        return {"ranks": self.peer_ranks, "pretokenizer": self.pretokenizer}


# tokenmill's pattern preset -> gigatoken's name for the same pattern
GIGATOKEN_PRETOKENIZER = {"o200k": "o200k", "cl100k": "gpt4"}


def real_vocabs(folder: Path) -> list[Vocab]:
    vocabs = []
    for name, (file, preset) in REAL.items():
        path = folder / file
        if not path.exists():
            raise SystemExit(f"{path} is missing (vocabularies/README.md says where it comes from)")
        regex = _native.preset_regex(preset)
        giga = GIGATOKEN_PRETOKENIZER[preset]
        vocabs.append(Vocab(name, str(path), preset, str(path), regex, giga))
    return vocabs


def own_vocab(ctx) -> Vocab:
    """tokenmill's vocabulary learned in the training phase; the peers get it as
    a .tiktoken file (the same ranks)."""
    ranks = ctx.tmp / f"tokenmill-{ctx.vocab_size}.tiktoken"
    write_tiktoken(Path(ctx.tokenizer), ranks)
    name = f"own {ctx.vocab_size // 1024}k"
    return Vocab(name, ctx.tokenizer, None, str(ranks), CL100K, GIGATOKEN_PRETOKENIZER["cl100k"])


def vocabs(ctx) -> list[Vocab]:
    """The real vocabularies, and tokenmill's own where the run trained one."""
    own = [own_vocab(ctx)] if Path(ctx.tokenizer).exists() else []
    return [*real_vocabs(ctx.vocabularies), *own]


# ---- loading --------------------------------------------------------------


def loading(ctx) -> tuple[list, list, dict]:
    rows, seconds = [], {}
    for v in real_vocabs(ctx.vocabularies):
        ours, giga, fast, tik = ctx.rounds(
            [
                ("load_tokenmill", v.tokenmill()),
                ("load_gigatoken", v.gigatoken()),
                ("load_fastokens", v.peer()),
                ("load_tiktoken", v.peer()),
            ],
            ctx.env,
        )
        phase = f"load {v.name}"
        base = ctx.row(phase, "tokenmill load_any (.tiktoken)", ours, n_bytes=0)
        rows += [
            base,
            ctx.row(phase, "gigatoken Tokenizer.from_tiktoken", giga, base, n_bytes=0),
            ctx.row(phase, "fastokens Tokenizer.from_tiktoken", fast, base, n_bytes=0),
            ctx.row(phase, "tiktoken load_tiktoken_bpe + Encoding", tik, base, n_bytes=0),
        ]
        seconds[v.name] = ours.result["seconds"]
    note = (
        "load rows: a fresh process loading the .tiktoken file until it can encode (the "
        "first encode of 'a' included), imports excluded; tokenmill with its pattern preset, "
        "the peers with the same regex. Target: tokenmill under "
        f"{LOAD_TARGET} s: " + ", ".join(f"{k} {s:.2f} s" for k, s in seconds.items()) + "."
    )
    return rows, [note], {"load_seconds": seconds}


# ---- start-up -------------------------------------------------------------


def startup(ctx) -> tuple[list, list, dict]:
    """Whole processes that start, import and load o200k_base until they can
    encode, timed from start to exit: the fixed cost of every whole-process
    encode row, which a corpus of 100 MB must dwarf."""
    v = next(v for v in real_vocabs(ctx.vocabularies) if v.name == STARTUP_VOCAB)
    params = v.tokenmill() | v.gigatoken()
    ours, giga, python, cli = ctx.rounds(
        [
            ("startup", params | {"who": "tokenmill"}),
            ("startup", params | {"who": "gigatoken"}),
            ("startup", {"who": "python"}),
            ("startup_cli", params),
        ],
        ctx.env,
    )
    phase = f"startup {v.name}"
    base = ctx.row(phase, "tokenmill: python, import tokenmill, load, encode 'a'", ours, None, 0)
    rows = [
        base,
        ctx.row(
            phase, "gigatoken: python, import gigatoken, from_tiktoken, encode 'a'", giga, base, 0
        ),
        ctx.row(phase, "python -c pass (the interpreter alone)", python, None, 0),
        ctx.row(phase, "tokenmill encode CLI, one one-word document, --workers 1", cli, None, 0),
    ]
    seconds = ours.result["seconds"]
    note = (
        f"startup rows: whole processes timed from start to exit by their parent, {v.name} "
        "with no special tokens; `python -c` of the imports and the load and a first encode; "
        "the CLI row is `tokenmill encode` of a one-document corpus (its writing included). "
        f"Target: tokenmill under {STARTUP_TARGET} s: {seconds:.2f} s "
        f"({'met' if seconds < STARTUP_TARGET else 'NOT met'})."
    )
    return rows, [note], {"startup_seconds": seconds}
