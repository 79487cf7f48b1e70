"""The state of a benchmark run that every phase takes: the scratch folder,
the corpus, the options of run.py, the corpora made once per run; and the
rounds in which contenders run, each in a fresh child process.

A phase is a function of a Context returning (rows, notes, extra): its rows
of the report, its notes under the table, and what it adds to --json.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from measure import Measurement, run_child, wait_for_quiet
from report import Row
from vocab import VOCABULARIES


@dataclass
class Context:
    tmp: Path
    corpus: Path  # symlinks to the input's Parquet shards only
    n_bytes: int
    vocab_size: int
    workers: int  # tokenmill --workers (0: one per core)
    repeat: int = 1  # runs per contender; the fastest counts
    quiet_wait: float = 0.0  # seconds to wait, at most, for other load to stop
    vocabularies: Path = VOCABULARIES  # o200k_base.tiktoken, cl100k_base.tiktoken
    big: Path | None = None  # the large corpus of C (bench/build_linux.py)
    multilingual: Path | None = None  # bench/build_multilingual.py's corpus
    workers_list: list[int] = field(default_factory=lambda: [1, 2])  # the encode rows' workers
    corpora: dict = field(default_factory=dict)  # bench/corpora.py's, by name, made once

    @property
    def tokenizer(self) -> str:
        return str(self.tmp / "tokenizer.json")

    @property
    def env(self) -> dict:
        return child_env()

    def run(self, name: str, env: dict | None = None, repeat: int = 0, **params) -> Measurement:
        """Run contender `name` `repeat` times (default: self.repeat), each in a
        fresh child; keep the fastest run (the least disturbed by other load)."""
        return self.rounds([(name, params)], env, repeat)[0]

    def rounds(
        self, contenders: list[tuple[str, dict]], env: dict | None = None, repeat: int = 0
    ) -> list[Measurement]:
        """Run each (name, params) `repeat` times (default: self.repeat), one
        round after another (A B C, A B C, ...), each run in a fresh child, and
        keep each one's fastest run. Taking turns makes a slow spell of a
        shared machine fall on every contender alike, which keeps the ratios fair."""
        return [fastest(done) for done in self.all_rounds(contenders, env, repeat)]

    def all_rounds(
        self, contenders: list[tuple[str, dict]], env: dict | None = None, repeat: int = 0
    ) -> list[list[Measurement]]:
        """As `rounds`, but every run of each contender, in round order."""
        base = {"corpus": str(self.corpus), "tmp": str(self.tmp), "tokenizer": self.tokenizer}
        runs: list[list[Measurement]] = [[] for _ in contenders]
        for i in range(repeat or self.repeat):
            for (name, params), done in zip(contenders, runs, strict=True):
                label = " ".join([name, *(f"{k}={v}" for k, v in params.items())])
                if self.quiet_wait:
                    wait_for_quiet(self.quiet_wait)
                print(f"running {label} (#{i + 1}) ...", file=sys.stderr, flush=True)
                m = run_child(name, base | params, self.tmp, env=env)
                seconds = m.result["seconds"]
                print(f"  {seconds:.2f} s, other load {m.other_cores:.2f} cores", file=sys.stderr)
                done.append(m)
        return runs

    def row(
        self,
        phase: str,
        contender: str,
        m: Measurement,
        baseline: Row | None = None,
        n_bytes: int | None = None,
    ) -> Row:
        return Row(
            phase,
            contender,
            m.result["seconds"],
            m.peak_rss,
            m.tree_rss,
            m.result.get("bytes", self.n_bytes) if n_bytes is None else n_bytes,
            baseline,
            cpu_seconds=m.cpu_seconds,
            process_seconds=m.process_seconds,
            other_cores=m.other_cores,
        )


def fastest(runs: list[Measurement]) -> Measurement:
    """The run least disturbed by other load."""
    return min(runs, key=lambda m: m.result["seconds"])


def child_env() -> dict:
    """The environment, less a thread-count override that would skew the
    contenders. NumPy (which PyArrow imports) would otherwise start an idle
    OpenBLAS thread per core that spins beside every contender; none of them
    does linear algebra."""
    env = {k: v for k, v in os.environ.items() if k != "RAYON_NUM_THREADS"}
    return env | {"OPENBLAS_NUM_THREADS": "1"}
