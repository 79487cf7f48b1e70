"""run: count, merge, train and encode into one output folder, plus a manifest.

Steps: "all" (count, merge, train, encode), "count" (count and merge: the
daily job that adds new shards' counts to the merged table) or "encode"
(encode with an existing tokenizer). Every stage keeps the finished outputs
a rerun can reuse (see `state`), so a run that was interrupted is resumed by
running it again.
"""

from __future__ import annotations

import time
from pathlib import Path

from pipeline.config import Config
from pipeline.errors import TokenmillError
from pipeline.formats import load_any
from pipeline.io.readers import list_shards, shard_name
from pipeline.stages.binfmt import INDEX, run_bin
from pipeline.stages.count import output_name, run_count
from pipeline.stages.encode import run_encode
from pipeline.stages.manifest import (
    base_manifest,
    file_entry,
    relative,
    shard_outputs,
    write_manifest,
)
from pipeline.stages.merge import run_merge
from pipeline.stages.pack import run_pack
from pipeline.stages.train import run_train
from pipeline.tokenizer import Tokenizer

STEPS = ("all", "count", "encode")


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


def remove_stale_outputs(folder: Path, keep: set[str]) -> list[str]:
    """Shard outputs in `folder` whose input shard is gone (or was skipped)."""
    removed = []
    if folder.is_dir():
        for p in sorted(folder.glob("*.parquet")):
            if p.name not in keep and not p.name.startswith("."):
                p.unlink()
                removed.append(p.name)
    return removed


def pretraining_steps(paths: dict[str, Path], config: Config, tok: Tokenizer) -> list:
    """--pack and --format bin: stages after encode, over the token shards."""
    steps = []
    if config.pack:
        steps.append(
            lambda: run_pack(
                paths["tokens_dir"],
                paths["packed_dir"],
                config.pack,
                bos=config.bos,
                tokenizer=tok,
            )
        )
    if config.format == "bin":
        steps.append(
            lambda: run_bin(
                paths["tokens_dir"],
                paths["bin_dir"],
                workers=config.n_workers,
                executor=config.executor,
                ray_address=config.ray_address,
            )
        )
    return steps


def pretraining_files(summary: dict, out: Path) -> list[dict]:
    """Manifest entries (checked by verify) for what pack or bin wrote."""
    if summary["stage"] == "pack":
        return [file_entry(Path(r["file"]), out, rows=r["sequences"]) for r in summary["shards"]]
    folder = Path(summary["dir"])
    files = [folder / r[kind] for r in summary["shards"] for kind in ("bin", "index")]
    return [file_entry(f, out) for f in [*files, folder / INDEX]]


def run_all(
    data: Path,
    out: Path,
    config: Config,
    on_stage=None,
    *,
    steps: str = "all",
    tokenizer: Path | None = None,
) -> dict:
    """The pipeline's `steps`; `on_stage(summary)` is called as each stage ends."""
    start = time.monotonic()
    if steps not in STEPS:
        raise TokenmillError(f"steps must be one of {', '.join(STEPS)}, not {steps!r}")
    if (steps == "encode") != (tokenizer is not None):
        raise TokenmillError("give a tokenizer to encode only, and only then")
    paths = output_paths(out)
    Path(out).mkdir(parents=True, exist_ok=True)
    shards = list_shards(data, config.glob)
    names = {output_name(s) for s in (shard_name(p, data) for p in shards)}
    stages: dict[str, dict] = {}

    def stage(summary: dict) -> dict:
        stages[summary["stage"]] = summary
        if on_stage:
            on_stage(summary)
        return summary

    manifest = base_manifest(data, config.to_dict(), steps)
    if steps in ("all", "count"):
        count = stage(run_count(data, paths["counts_dir"], config))
        remove_stale_outputs(paths["counts_dir"], names)
        tables = [Path(r["output"]["file"]) for r in count["shards"] if r["output"]]
        merge = stage(
            run_merge(
                paths["counts_dir"],
                paths["counts_file"],
                config.min_count,
                files=tables,
                force=config.force,
            )
        )
        manifest["counts"] = shard_outputs(count, out)
        manifest["files"] = [file_entry(paths["counts_file"], out, rows=merge["words"])]
    if steps == "all":
        stage(run_train(paths["counts_file"], paths["tokenizer"], config))
        tokenizer = paths["tokenizer"]
    if steps in ("all", "encode"):
        tok = load_any(tokenizer)
        encode = stage(run_encode(data, paths["tokens_dir"], tok, config))
        remove_stale_outputs(paths["tokens_dir"], names)
        manifest["tokenizer"] = file_entry(tokenizer, out)
        manifest["tokenizer_sha256"] = tok.sha256
        manifest["outputs"] = shard_outputs(encode, out)
        for step in pretraining_steps(paths, config, tok):
            manifest.setdefault("files", []).extend(pretraining_files(stage(step()), out))
        if config.pack:
            remove_stale_outputs(paths["packed_dir"], names)
    reader = stages["encode"] if "encode" in stages else stages["count"]
    manifest["inputs"] = [r["input"] for r in reader["shards"]]
    skipped = reader["skipped"]
    manifest["documents_in"] = reader["documents"] + sum(s["documents"] for s in skipped)
    manifest["documents"] = reader["documents"]
    manifest["documents_skipped"] = sum(s["documents"] for s in skipped)
    manifest["skipped"] = skipped
    if "encode" in stages:
        manifest["tokens"] = stages["encode"]["tokens"]
    manifest["stages"] = {
        name: {
            "seconds": round(s["seconds"], 3),
            "reused": s.get("reused", 0),
            "redone": s.get("redone", 0),
            **(
                {"reused_shards": [r["shard"] for r in s["shards"] if r["reused"]]}
                if "shards" in s
                else {}
            ),
        }
        for name, s in stages.items()
    }
    manifest["seconds"] = round(time.monotonic() - start, 3)
    path = write_manifest(manifest, out)
    return {
        "stage": "run",
        "manifest": str(path),
        "seconds": time.monotonic() - start,
        "documents": manifest["documents"],
        "tokens": manifest.get("tokens", 0),
        "skipped": skipped,
        "tokenizer": relative(tokenizer, out) if tokenizer else None,
    }
