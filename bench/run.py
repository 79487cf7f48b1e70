"""tokenmill against rustbpe, tokenizers, tiktoken, fastokens and gigatoken, in one run.

    python bench/run.py CORPUS [--vocab-size 32768] [--workers 0] [--workers-list 1,2]
                        [--repeat 1] [--quiet-wait S] [--markdown PATH] [--summary PATH]
                        [--json PATH] [--tmp DIR] [--keep] [--vocabularies DIR]
                        [--big CORPUS] [--multilingual CORPUS] [--skip PHASE ...]
                        [--only PHASE,...] [--no-scaling]

CORPUS is a folder of Parquet shards with a `text` column (bench/build_corpus.py
builds the one `make bench` uses). Every contender runs in its own fresh child
process, one at a time; with --repeat N the contenders of a phase take turns
(N rounds) and each keeps its fastest run. The phases, in order (`--skip NAME`
leaves one out, `--only` keeps those named):

- `train`: training (cl100k pattern) against rustbpe and tokenizers;
- `encode`: encoding in process with the vocabulary tokenmill learned, against
  tiktoken, tokenizers and gigatoken, and an exactness check of tokenmill's ids
  (both bench/peerrows.py);
- `scaling`: tokenmill's --workers 1 against 2 (bench/scalingrows.py);
- `limits`: a large vocabulary, long documents, the GPT-2 vocabulary
  (bench/limitrows.py);
- `real`, `slice`, `code`, `multilingual` (bench/encoderows.py): encoding as
  whole processes against gigatoken (the same job, and writing nothing),
  fastokens and tiktoken, with o200k_base, cl100k_base (from DIR, default
  vocabularies/) and the learned vocabulary, at each worker count of
  --workers-list, on the corpus, its multilingual slice, ~500 MB of C (--big,
  bench/build_linux.py) and the multilingual corpus (--multilingual,
  bench/build_multilingual.py); ids compared on every document;
- `train-slice`: training on the slice against rustbpe (bench/trainrows.py);
- `startup` and `load`: start-up as whole processes, and loading the
  vocabularies in process (bench/realrows.py);
- `floor`: the floor under encode on one core, on each corpus (bench/floorrows.py);
- `memory`, `size`: `tokenmill run` against rustbpe's streaming training on
  ~500 MB of C, and on a quarter, a half and all of it (bench/trainrows.py);
- `merge-many`: count and merge of 100,000 one-line inputs (bench/mergerows.py);
- `layouts`: each training layout against encode in the same `tokenmill run`
  (bench/layoutrows.py);
- `recipes`: a data recipe's mix and shuffle against encode in the same
  `tokenmill run` (bench/reciperows.py);
- `superword`: superword training against ordinary training of the same size,
  and the tokens each saves on held-out text (bench/superwordrows.py).

Each phase is a function of a Context (bench/context.py) returning its rows,
notes and JSON; this file holds the options, PHASES and the report. The
report has a table of the whole-process encode rows by worker count
(`--workers-list 1,2,4,8,16` on a machine with 16 cores: scaling in one run),
and the one measured on a machine with 16 cores, kept in bench/many-cores/
with superword training at 2 to 16 workers (bench/manycorerows.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

import encoderows
import floorrows
import layoutrows
import limitrows
import machine
import manycorerows
import mergerows
import peerrows
import realrows
import reciperows
import scalingrows
import superwordrows
import trainrows
from context import Context
from corpus import corpus_stats, link_corpus
from report import Row, check_summary_markers, render, summary, write_summary
from vocab import VOCABULARIES

LOAD_WARN = 0.25  # cores of CPU used by other processes worth warning about


# Every phase, in order; `--skip NAME` leaves one out, `--only` keeps those named.
PHASES = {
    "train": peerrows.training,
    "encode": peerrows.encoding,
    "scaling": scalingrows.scaling,
    "limits": limitrows.limits,
    "real": encoderows.real_encoding,
    "slice": encoderows.slice_encoding,
    "code": encoderows.code_encoding,
    "multilingual": encoderows.multilingual_encoding,
    "train-slice": trainrows.slice_training,
    "startup": realrows.startup,
    "load": realrows.loading,
    "floor": floorrows.floor,
    "memory": trainrows.memory,
    "size": trainrows.sizes,
    "merge-many": mergerows.many_tables,
    "layouts": layoutrows.layouts,
    "recipes": reciperows.recipes,
    "superword": superwordrows.superword,
}
REAL_VOCAB_PHASES = {"encode", "real", "slice", "code", "multilingual", "startup", "load", "floor"}
NEEDS_TRAINING = {"encode", "scaling", "limits", "layouts"}  # they use the learned vocabulary
BIG_PHASES = {"memory", "size", "code"}
MULTILINGUAL_PHASES = {"multilingual"}
BIG = Path("/tmp/corpus-linux")
MULTILINGUAL = Path("/tmp/corpus-multilingual")


# ---- the run -----------------------------------------------------------


def general_notes() -> list[str]:
    return [
        "wall s: the measured work inside the contender's own child process, Parquet reading "
        "(and tokenmill's Parquet writing) included; interpreter start-up, imports and "
        "converting the vocabulary for tiktoken/tokenizers excluded. MB = 10^6 bytes of UTF-8 "
        "text. peak RSS: ru_maxrss of the child from wait4, i.e. the largest single process in "
        "its tree; tree RSS: the largest sum over the child and its worker processes, sampled "
        "every 50 ms. tokenmill speed × = peer wall ÷ tokenmill wall (above 1: tokenmill is "
        "faster); tokenmill RSS × = tokenmill tree RSS ÷ peer tree RSS (below 1: tokenmill "
        "uses less).",
        "Pre-tokenization is tiktoken's cl100k_base pattern everywhere. tokenizers uses "
        "Split(cl100k, 'isolated') + ByteLevel(use_regex=False) for training and encoding, "
        "with `\\p{N}{1,3}+` written `\\p{N}{1,3}`: Oniguruma reads `{1,3}+` as a repetition, "
        "not as possessive. Encoding peers use tokenmill's learned vocabulary (tiktoken "
        "mergeable_ranks; tokenizers BPE vocab + merges in GPT-2's byte alphabet); tiktoken "
        "encodes all documents in one encode_ordinary_batch(num_threads=cores), tokenizers in "
        "one encode_batch (rayon, all cores); tokenmill encodes with --no-eos.",
    ]


def load_note(rows: list[Row]) -> str:
    busy = [f"{r.contender} ({r.other_cores:.2f})" for r in rows if r.other_cores > LOAD_WARN]
    worst = max(r.other_cores for r in rows)
    if not busy:
        return f"Other processes used at most {worst:.2f} cores during any measurement."
    return (
        "Measured while other processes were busy (their CPU use in cores): "
        + ", ".join(busy)
        + ". Timings of those rows are pessimistic; run again on a quiet machine."
    )


def build_warnings(before: dict, after: dict) -> list[str]:
    """Others work in the same checkout: say if tokenmill changed under the run."""
    warnings = []
    if before["native_sha256"] != after["native_sha256"]:
        warnings.append(
            f"WARNING: tokenmill's native library changed during the run "
            f"({before['native_sha256']} → {after['native_sha256']})."
        )
    if before["commit"] != after["commit"]:
        warnings.append(
            f"WARNING: the checkout moved during the run ({before['commit']} → {after['commit']})."
        )
    return warnings


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path, nargs="?", default=Path("/tmp/corpus"))
    ap.add_argument("--vocab-size", type=int, default=32768, help="256 bytes + merges")
    ap.add_argument("--workers", type=int, default=0, help="tokenmill --workers (0: per core)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per contender, fastest kept")
    ap.add_argument(
        "--quiet-wait",
        type=float,
        default=0.0,
        metavar="S",
        help="before each run, wait up to S seconds for other processes to go idle "
        "(for shared machines)",
    )
    ap.add_argument("--markdown", type=Path, help="also write the report here")
    ap.add_argument(
        "--summary",
        type=Path,
        metavar="PATH",
        help="write the summary rows between PATH's bench-summary markers (README.md), "
        "linking to the --markdown report",
    )
    ap.add_argument("--json", type=Path, help="write machine-readable results here")
    ap.add_argument("--tmp", type=Path, help="scratch folder (default: a new temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary scratch folder")
    ap.add_argument(
        "--vocabularies",
        type=Path,
        default=VOCABULARIES,
        metavar="DIR",
        help="where o200k_base.tiktoken and cl100k_base.tiktoken are (default: vocabularies/)",
    )
    ap.add_argument(
        "--big",
        type=Path,
        default=BIG,
        metavar="CORPUS",
        help=f"the large corpus of C for the code, memory and size phases (default {BIG}; "
        "bench/build_linux.py builds it)",
    )
    ap.add_argument(
        "--multilingual",
        type=Path,
        default=MULTILINGUAL,
        metavar="CORPUS",
        help=f"the multilingual corpus (default {MULTILINGUAL}; "
        "bench/build_multilingual.py builds it)",
    )
    ap.add_argument(
        "--workers-list",
        type=workers_list,
        default=[1, 2],
        metavar="N,N,...",
        help="the worker counts of the whole-process encode rows (default 1,2; "
        "those above this machine's cores are left out)",
    )
    ap.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=PHASES,
        metavar="PHASE",
        help=f"leave a phase out (repeatable): {', '.join(PHASES)}",
    )
    ap.add_argument(
        "--only",
        type=phase_list,
        metavar="PHASE,...",
        help="run these phases alone, e.g. real,code,multilingual",
    )
    ap.add_argument("--no-scaling", action="store_true", help="as --skip scaling")
    args = ap.parse_args(argv)
    if args.no_scaling:
        args.skip.append("scaling")
    if args.only:
        args.skip += [k for k in PHASES if k not in args.only]
    needing = sorted(NEEDS_TRAINING - set(args.skip))
    if "train" in args.skip and needing:
        ap.error(f"{', '.join(needing)} need the train phase's vocabulary: skip them too")
    return args


def workers_list(text: str) -> list[int]:
    """`1,2,4` as [1, 2, 4]: distinct counts of at least 1, in order."""
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of integers like 1,2,4") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: worker counts are at least 1")
    return sorted(set(counts))


def phase_list(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [n for n in names if n not in PHASES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown phase {', '.join(unknown) or text!r}; phases: {', '.join(PHASES)}"
        )
    return names


def machine_workers(asked: list[int], cores: int) -> tuple[list[int], str]:
    """The asked worker counts this machine has cores for (at least the
    smallest asked), and a note naming those left out."""
    kept = [w for w in asked if w <= cores] or asked[:1]
    dropped = [w for w in asked if w not in kept]
    if not dropped:
        return kept, ""
    return kept, (
        f"--workers-list: {', '.join(map(str, dropped))} left out, more than this machine's "
        f"{cores} cores."
    )


def make_context(args: argparse.Namespace) -> Context:
    tmp = args.tmp or Path(tempfile.mkdtemp(prefix="tokenmill-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    corpus = tmp / "corpus"
    if corpus.exists():
        shutil.rmtree(corpus)
    if not link_corpus(args.corpus, corpus):
        raise SystemExit(f"{args.corpus}: no Parquet shards")
    return Context(
        tmp=tmp,
        corpus=corpus,
        n_bytes=0,
        vocab_size=args.vocab_size,
        workers=args.workers,
        repeat=max(1, args.repeat),
        quiet_wait=args.quiet_wait,
        vocabularies=args.vocabularies,
        big=args.big,
        multilingual=args.multilingual,
        workers_list=machine_workers(args.workers_list, os.cpu_count() or 1)[0],
    )


def check_corpora(args: argparse.Namespace) -> None:
    """Missing inputs of the phases asked for: fail now, not an hour in."""
    asked = set(PHASES) - set(args.skip)
    if asked & REAL_VOCAB_PHASES:
        realrows.real_vocabs(args.vocabularies)
    wanted = [
        (asked & BIG_PHASES, args.big, "build_linux.py"),
        (asked & MULTILINGUAL_PHASES, args.multilingual, "build_multilingual.py"),
    ]
    for phases, folder, builder in wanted:
        if phases and not any(folder.glob("*.parquet")):
            skips = " ".join(f"--skip {p}" for p in sorted(phases))
            raise SystemExit(
                f"{folder}: no Parquet shards; build it with bench/{builder} {folder} "
                f"--install, or {skips}"
            )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.summary:
        check_summary_markers(args.summary)  # a missing block: fail now, not after the run
    command = shlex.join([Path(sys.executable).name, *sys.argv])
    ctx = make_context(args)
    stats = corpus_stats(sorted(ctx.corpus.rglob("*.parquet")))
    ctx.n_bytes = stats["bytes"]
    info = machine.describe()
    rows, notes, extra, durations = [], general_notes(), {}, {}
    phases = [f for k, f in PHASES.items() if k not in args.skip]
    check_corpora(args)
    dropped = machine_workers(args.workers_list, os.cpu_count() or 1)[1]
    notes += [dropped] if dropped else []
    try:
        for phase in phases:
            start = time.monotonic()
            phase_rows, phase_notes, phase_extra = phase(ctx)
            durations[phase.__name__] = time.monotonic() - start
            rows += phase_rows
            notes += phase_notes
            extra |= phase_extra
    finally:
        if args.tmp is None and not args.keep:
            shutil.rmtree(ctx.tmp, ignore_errors=True)
    notes.append(load_note(rows))
    notes.append(
        "Each phase took (minutes, every run and check included): "
        + ", ".join(f"{k} {v / 60:.1f}" for k, v in durations.items())
        + f"; {sum(durations.values()) / 60:.0f} in all."
    )
    notes += encoderows.targets_note(rows)
    notes += trainrows.targets_note(rows)
    notes += build_warnings(info["tokenmill_build"], machine.tokenmill_build())
    corpus = {"path": str(args.corpus), **stats}
    date = time.strftime("%Y-%m-%d", time.gmtime())
    sections = [
        (WORKERS_TITLE, encoderows.workers_table(rows)),
        manycorerows.section(),
        manycorerows.superword_section(),
    ]
    lines = floorrows.per_core_line(rows)
    text = render(info, command, corpus, rows, notes, date, sections, lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.summary:
        link = os.path.relpath(args.markdown, args.summary.parent) if args.markdown else ""
        write_summary(args.summary, summary(info, corpus, rows, date, link, lines))
    if args.json:
        results = {"date": date, "command": command, "machine": info, "corpus": corpus}
        results |= {"notes": notes}
        results |= {"rows": [r.to_dict() for r in rows], "phase_seconds": durations, **extra}
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    if mismatches(extra):
        raise SystemExit("tokenmill's ids differ from a peer's: see the exactness note")


WORKERS_TITLE = (
    "Encode at each worker count (wall s; in brackets, tokenmill speed ×: the peer's wall "
    "over tokenmill's)"
)


def mismatches(extra: dict) -> int:
    return peerrows.mismatches(extra) + encoderows.mismatches(extra)


if __name__ == "__main__":
    main()
