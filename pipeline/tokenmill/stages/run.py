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

from tokenmill.config import Config
from tokenmill.errors import TokenmillError
from tokenmill.formats import load_any
from tokenmill.io.inputs import check_overlap, find_inputs
from tokenmill.io.lock import output_lock
from tokenmill.io.storage import (
    AnyPath,
    delete,
    location,
    relative_name,
    remote_errors,
    resolved,
)
from tokenmill.io.writers import remove_temporaries
from tokenmill.stages.binfmt import run_bin
from tokenmill.stages.count import run_count
from tokenmill.stages.encode import run_encode
from tokenmill.stages.layout import MANIFEST, output_paths, remove_stale
from tokenmill.stages.manifest import (
    base_manifest,
    file_entry,
    listed_outputs,
    listed_path,
    read_manifest,
    relative,
    shard_outputs,
    write_manifest,
)
from tokenmill.stages.merge import run_merge
from tokenmill.stages.pack import run_pack
from tokenmill.stages.results import BinResult, PackResult, RunResult, StageResult
from tokenmill.stages.train import load_base, run_train
from tokenmill.tokenizer import Tokenizer

STEPS = ("all", "count", "encode")


def check_previous_data(out: Path, data: Path, previous: dict, force: bool) -> None:
    """Refuse an OUT whose outputs came from another DATA (unless --force):
    a run would otherwise replace them without a word."""
    manifest = location(out) / MANIFEST
    before = None
    if manifest.is_file():
        try:
            before = read_manifest(out)["data"]
        except TokenmillError:
            before = None  # a damaged manifest: the lock file may still say
    before = before or previous.get("data")
    here = resolved(data)
    if before and before != here and not force:
        raise TokenmillError(
            f"{out}: holds the outputs of another DATA ({before}); give another OUT, "
            "or --force to replace them"
        )


def pretraining_steps(
    paths: dict[str, Path], config: Config, tok: Tokenizer, names: list[str]
) -> list:
    """--pack and --format bin: stages after encode, over the token shards `names`
    (paths relative to tokens/) that this run wrote or kept."""
    steps = []
    if config.pack:
        steps.append(
            lambda: run_pack(
                paths["tokens_dir"],
                paths["packed_dir"],
                config.pack,
                bos=config.bos,
                tokenizer=tok,
                names=names,
                val_fraction=config.val_fraction,
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
                names=names,
                val_fraction=config.val_fraction,
            )
        )
    return steps


def pretraining_files(result: PackResult | BinResult, out: Path) -> list[dict]:
    """Manifest entries (checked by verify) for what pack or bin wrote."""
    if isinstance(result, PackResult):
        return [file_entry(location(r["file"]), out, rows=r["sequences"]) for r in result.shards]
    return [file_entry(location(result.dir) / f, out) for f in result.files]


def run_all(
    data: Path,
    out: Path,
    config: Config,
    on_stage=None,
    *,
    steps: str = "all",
    tokenizer: Path | Tokenizer | None = None,
    load_options: dict | None = None,
    on_note=None,
    extend_pattern: str | None = None,
) -> RunResult:
    """The pipeline's `steps`; `on_stage(summary)` is called as each stage ends and
    `on_note(line)` with what the user should know (files not read, stale files
    removed). OUT is locked for the run: a second run into it fails at once.
    With config.extend, training grows that tokenizer (`extend_pattern`
    reads a .tiktoken file), and words are counted as it splits them."""
    if steps not in STEPS:
        raise TokenmillError(f"steps must be one of {', '.join(STEPS)}, not {steps!r}")
    if (steps == "encode") != (tokenizer is not None):
        raise TokenmillError("give a tokenizer to encode only, and only then")
    if config.extend and steps == "encode":
        raise TokenmillError("--extend trains: give it without --tokenizer")
    base, config = load_base(config, extend_pattern)
    data, out = location(data), location(out)
    with remote_errors(data):  # no bucket, no credentials, endpoint refusing: one line
        if not data.exists():
            raise TokenmillError(f"{data}: no such file or directory")
    check_overlap(data, out)
    note = on_note or (lambda _: None)
    with output_lock(out) as lock:
        if lock.note:
            note(lock.note)
        check_previous_data(out, data, lock.previous, config.force)
        lock.record(data)
        tok = tokenizer
        if is_file(tokenizer):
            tok = load_any(tokenizer, **(load_options or {}))
        return _run_locked(
            data, out, config, on_stage, steps, tokenizer, tok, note, lock.check, base
        )


def is_file(tokenizer: AnyPath | str | Tokenizer | None) -> bool:
    """Whether `tokenizer` names a tokenizer file (local or remote)."""
    return tokenizer is not None and not isinstance(tokenizer, Tokenizer)


def _run_locked(
    data, out, config, on_stage, steps, tokenizer, tok, note, check_lock, base=None
) -> RunResult:
    start = time.monotonic()
    paths = output_paths(out)
    inputs = find_inputs(data, config.glob, exclude=(out,))
    if line := inputs.not_read_line():
        note(f"{line}; listed in the manifest under not_read")
    remove_temporaries(out)  # under OUT's lock, every temporary is a killed run's
    # The old manifest no longer describes OUT once any output changes.
    delete(paths["manifest"])
    stages: dict[str, StageResult] = {}

    def stage(result: StageResult) -> StageResult:
        stages[result.stage] = result
        if on_stage:
            on_stage(result)
        return result

    manifest = base_manifest(data, config.to_dict(), steps)
    if steps in ("all", "count"):
        count = stage(run_count(inputs, paths["counts_dir"], config))
        tables = [location(f) for f in count.written]
        merge = stage(
            run_merge(
                paths["counts_dir"],
                paths["counts_file"],
                config.min_count,
                files=tables,
                force=config.force,
            )
        )
        manifest["counts"] = shard_outputs(count.shards, out)
        manifest["files"] = [file_entry(paths["counts_file"], out, rows=merge.words)]
    if steps == "all":
        stage(run_train(paths["counts_file"], paths["tokenizer"], config, base))
        tokenizer = paths["tokenizer"]
        tok = load_any(tokenizer)
    if steps in ("all", "encode"):
        encode = stage(run_encode(inputs, paths["tokens_dir"], tok, config))
        if is_file(tokenizer):
            tokenizer = location(tokenizer)
            manifest["tokenizer"] = file_entry(tokenizer, out)
        manifest["tokenizer_sha256"] = tok.sha256
        manifest["normalizer"] = tok.normalizer
        manifest["outputs"] = shard_outputs(encode.shards, out)
        if encode.split:
            manifest["split"] = {"val_fraction": config.val_fraction, **encode.split}
        names = [relative_name(location(f), paths["tokens_dir"]) for f in encode.written]
        for step in pretraining_steps(paths, config, tok, names):
            manifest.setdefault("files", []).extend(pretraining_files(stage(step()), out))
    reader = stages["encode"] if "encode" in stages else stages["count"]
    manifest["inputs"] = [r["input"] for r in reader.shards]
    manifest["not_read"] = inputs.not_read
    skipped = reader.skipped
    manifest["documents_in"] = reader.documents + sum(s["documents"] for s in skipped)
    manifest["documents"] = reader.documents
    manifest["documents_skipped"] = sum(s["documents"] for s in skipped)
    # A stream that broke mid-file had at least the documents read before it.
    manifest["documents_in_lower_bound"] = any(s.get("lower_bound") for s in skipped)
    manifest["skipped"] = skipped
    if "encode" in stages:
        manifest["tokens"] = stages["encode"].tokens
    manifest["stages"] = {
        name: {
            "seconds": round(s.seconds, 3),
            "reused": s.reused,
            "redone": s.redone,
            **(
                {"reused_shards": [r["shard"] for r in s.shards if r["reused"]]}
                if hasattr(s, "shards")
                else {}
            ),
        }
        for name, s in stages.items()
    }
    check_lock()  # a run whose lock was taken over must not remove or record anything
    keep = {listed_path(out, e["path"]) for e in listed_outputs(manifest)}
    if removed := remove_stale(out, keep):
        note(
            f"removed {len(removed)} stale file{'s' if len(removed) > 1 else ''} from {out} "
            f"(outputs of removed inputs or of stages not run): "
            + ", ".join(relative_name(p, out) for p in removed[:5])
            + (", ..." if len(removed) > 5 else "")
        )
    manifest["seconds"] = round(time.monotonic() - start, 3)
    check_lock()
    path = write_manifest(manifest, out)
    return RunResult(
        manifest=str(path),
        seconds=time.monotonic() - start,
        documents=manifest["documents"],
        tokens=manifest.get("tokens", 0),
        skipped=skipped,
        tokenizer=relative(tokenizer, out) if is_file(tokenizer) else None,
    )
