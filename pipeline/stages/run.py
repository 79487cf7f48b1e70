"""run: count, merge, train and encode into one output folder, plus a manifest."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from pipeline import __version__
from pipeline.config import Config
from pipeline.io.readers import list_shards, shard_name
from pipeline.io.writers import write_json
from pipeline.stages.binfmt import run_bin
from pipeline.stages.count import run_count
from pipeline.stages.encode import run_encode
from pipeline.stages.merge import run_merge
from pipeline.stages.pack import run_pack
from pipeline.stages.train import run_train


def output_paths(out: Path) -> dict[str, Path]:
    out = Path(out)
    return {
        "counts_dir": out / "counts",
        "counts_file": out / "counts.parquet",
        "tokenizer": out / "tokenizer.json",
        "tokens_dir": out / "tokens",
        "packed_dir": out / "packed",
        "bin_dir": out / "bin",
        "manifest": out / "manifest.json",
    }


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def pretraining_steps(paths: dict[str, Path], config: Config) -> list:
    """--pack and --format bin: stages after encode, over the token shards."""
    steps = []
    if config.pack:
        steps.append(
            lambda: run_pack(
                paths["tokens_dir"],
                paths["packed_dir"],
                config.pack,
                bos=config.bos,
                tokenizer=paths["tokenizer"],
            )
        )
    if config.format == "bin":
        steps.append(
            lambda: run_bin(
                paths["tokens_dir"],
                paths["bin_dir"],
                workers=config.n_workers,
                executor=config.executor,
            )
        )
    return steps


def run_all(data: Path, out: Path, config: Config, on_stage=None) -> dict:
    """The whole pipeline; `on_stage(summary)` is called as each stage ends."""
    start = time.monotonic()
    paths = output_paths(out)
    shards = list_shards(data, config.glob)
    stages = []
    steps = [
        lambda: run_count(data, paths["counts_dir"], config),
        lambda: run_merge(paths["counts_dir"], paths["counts_file"], config.min_count),
        lambda: run_train(paths["counts_file"], paths["tokenizer"], config),
        lambda: run_encode(data, paths["tokens_dir"], paths["tokenizer"], config),
    ]
    steps += pretraining_steps(paths, config)
    for step in steps:
        summary = step()
        stages.append(summary)
        if on_stage:
            on_stage(summary)
    encode = stages[3]
    manifest = {
        "tokenmill_version": __version__,
        "config": config.to_dict(),
        "data": str(Path(data).resolve()),
        "inputs": [{"path": shard_name(p, data), "bytes": p.stat().st_size} for p in shards],
        "tokenizer_sha256": file_sha256(paths["tokenizer"]),
        "outputs": [{k: s[k] for k in ("shard", "documents", "tokens")} for s in encode["shards"]],
        "documents": encode["documents"],
        "tokens": encode["tokens"],
        "seconds": {s["stage"]: round(s["seconds"], 3) for s in stages},
    }
    write_json(manifest, paths["manifest"])
    return {
        "stage": "run",
        "manifest": str(paths["manifest"]),
        "seconds": time.monotonic() - start,
        **{k: manifest[k] for k in ("documents", "tokens")},
    }
