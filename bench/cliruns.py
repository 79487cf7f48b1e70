"""Contenders that run the `tokenmill` CLI as whole processes and measure them
from inside the child: wall time, and the peak RSS of tokenmill's own process
tree. The child's interpreter (with PyArrow, ~100 MB) is left out: it is the
harness, not tokenmill, and a peer's row would not carry it twice."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from contenders import fresh
from corpus import corpus_stats, parquet_shards
from measure import TreeSampler, busy_seconds, wait_for_quiet
from realvocab import tokenmill_command
from report import Row

STAGES = ("count", "merge", "train", "encode")


def measured(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    """Run `cmd` (in `env`, else this environment); its wall seconds, CPU
    seconds, ru_maxrss (its largest single process) and the largest sum of
    RSS over its tree, sampled."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        sampler.done.set()
        sampler.join()
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-3000:]
            raise SystemExit(f"{cmd[1:3]} failed (exit {status}):\n{tail}")
    peak = usage.ru_maxrss * 1024
    return {
        "seconds": seconds,
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
        "peak_rss": peak,
        "tree_rss": max(sampler.peak, peak),
    }


def staged_run(cmd: list[str], out: Path, quiet_wait: float = 0.0) -> dict:
    """`measured` of a `tokenmill run` into `out` (once other load has stopped,
    waiting `quiet_wait` s at most), with the other cores' load meanwhile,
    each stage's seconds ("stages") and the manifest ("manifest")."""
    if quiet_wait:
        wait_for_quiet(quiet_wait)
    busy = busy_seconds()
    result = measured(cmd)
    result["other_cores"] = max(
        0.0, (busy_seconds() - busy - result["cpu_seconds"]) / result["seconds"]
    )
    result["manifest"] = json.loads((out / "manifest.json").read_text())
    result["stages"] = {k: v["seconds"] for k, v in result["manifest"]["stages"].items()}
    return result


def stage_row(
    phase: str, ctx, contender: str, seconds: float, run: dict, ratio: float | None = None
) -> Row:
    """A row of `phase` for one stage of a `staged_run`, timed `seconds`."""
    return Row(
        phase,
        contender,
        seconds,
        run["peak_rss"],
        run["tree_rss"],
        ctx.n_bytes,
        cpu_seconds=run["cpu_seconds"],
        process_seconds=run["seconds"],
        other_cores=run["other_cores"],
        ratio=ratio,
    )


def against_encode(
    ctx, phase: str, runs: dict[int, list[dict]], stages: dict[str, str]
) -> tuple[list[Row], list[str], dict]:
    """The rows of a phase that times stages against the encode stage of the
    same `staged_run`s (`runs` by --workers): per worker count, encode's fastest
    round, then each stage (its name in the rows -> its name in the manifest)
    at its fastest, with the median over the rounds of encode's seconds over
    its; the spans of those ratios ("NAME --workers W LOW to HIGH"), and each
    one's ratios by "NAME_W"."""
    rows, spans, extra = [], [], {}
    for w, done in runs.items():
        fastest = min(done, key=lambda r: r["stages"]["encode"])
        label = f"tokenmill encode --workers {w}"
        rows.append(stage_row(phase, ctx, label, fastest["stages"]["encode"], fastest))
        for name, stage in stages.items():
            ratios = sorted(r["stages"]["encode"] / r["stages"][stage] for r in done)
            best = min(done, key=lambda r: r["stages"][stage])
            median = statistics.median(ratios)
            label = f"tokenmill {name} --workers {w}"
            rows.append(stage_row(phase, ctx, label, best["stages"][stage], best, median))
            spans.append(f"{name} --workers {w} {ratios[0]:.2f} to {ratios[-1]:.2f}")
            extra[f"{name}_{w}"] = {"median": median, "ratios": ratios}
    return rows, spans, extra


def distinct_words(counts_file: Path) -> int:
    import pyarrow.parquet as pq

    return pq.read_metadata(counts_file).num_rows


def run_tokenmill(p: dict) -> dict:
    """`tokenmill run DATA OUT --vocab-size N`: count, merge, train and encode,
    one process; the stage times from its manifest. OUT is removed after (the
    token shards of a large corpus are large)."""
    out = Path(p["out"])
    fresh(out)
    cmd = [tokenmill_command(), "run", p["corpus"], str(out)]
    cmd += ["--vocab-size", str(p["vocab_size"]), "--workers", str(p["workers"])]
    result = measured(cmd)
    manifest = json.loads((out / "manifest.json").read_text())
    result["stages"] = {k: v["seconds"] for k, v in manifest["stages"].items()}
    result["tokens"] = manifest["tokens"]
    result["words"] = distinct_words(out / "counts.parquet")
    shutil.rmtree(out)
    return result


def stages_tokenmill(p: dict) -> dict:
    """The same work as `run`, each stage its own `tokenmill` process, so that
    each has its own peak RSS: what bounds each stage's memory."""
    out = Path(p["out"])
    fresh(out)
    out.mkdir(parents=True)
    counts, table, tokenizer = out / "counts", out / "counts.parquet", out / "tokenizer.json"
    workers = ["--workers", str(p["workers"])]
    commands = {
        "count": ["count", p["corpus"], counts, *workers],
        "merge": ["merge", counts, table],
        "train": ["train", table, tokenizer, "--vocab-size", p["vocab_size"]],
        "encode": ["encode", p["corpus"], out / "tokens", "--tokenizer", tokenizer, *workers],
    }
    stages = {
        stage: measured([tokenmill_command(), *map(str, args)]) for stage, args in commands.items()
    }
    words = distinct_words(table)
    shutil.rmtree(out)
    return {
        "seconds": sum(s["seconds"] for s in stages.values()),
        "stages": stages,
        "words": words,
    }


CONTENDERS = {f.__name__: f for f in (run_tokenmill, stages_tokenmill)}


def standalone(
    doc: str,
    phase: Callable[[argparse.Namespace, argparse.Namespace], tuple[list[Row], list[str], dict]],
    *,
    rounds: int,
    options: Callable[[argparse.ArgumentParser], None] = lambda ap: None,
    context: Callable[[argparse.Namespace, Path], dict] = lambda args, tmp: {},
    line: Callable[[Row], str] = lambda r: f"{r.contender}: {r.seconds:.2f} s",
) -> None:
    """A phase's module run alone: `python bench/X.py [CORPUS] [--rounds N]
    [--tmp DIR] ...`; `phase(ctx, args)` on a scratch context (the corpus,
    `context`'s entries), its rows printed with `line`, then its notes."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("corpus", type=Path, nargs="?", default=Path("/tmp/corpus"))
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--tmp", type=Path, help="scratch folder (default: a new temporary one)")
    options(ap)
    args = ap.parse_args()
    tmp = args.tmp or Path(tempfile.mkdtemp(prefix="tokenmill-bench-"))
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        n_bytes = corpus_stats(parquet_shards(args.corpus))["bytes"]
        given = {"tmp": tmp, "corpus": args.corpus, "n_bytes": n_bytes, "repeat": 1}
        ctx = argparse.Namespace(**{**given, "quiet_wait": 0.0, **context(args, tmp)})
        rows, notes, _ = phase(ctx, args)
    finally:
        if args.tmp is None:
            shutil.rmtree(tmp, ignore_errors=True)
    for r in rows:
        print(line(r))
    print(*notes, sep="\n\n")
