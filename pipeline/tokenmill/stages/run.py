"""run: count, merge, train and encode into one output folder, then write
each training layout asked for (--pack, --format), plus a manifest.

What to do is a `plan.Plan` (the options, parsed once). Every stage keeps
the finished outputs a rerun can reuse (see `state`), so a run that was
interrupted is resumed by running it again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from tokenmill.config import Config
from tokenmill.errors import TokenmillError
from tokenmill.io.files import file_sha256, read_bytes
from tokenmill.io.inputs import Inputs, check_overlap, find_inputs, output_name, require_input
from tokenmill.io.lock import output_lock
from tokenmill.io.storage import (
    AnyPath,
    delete,
    location,
    relative_name,
    resolved,
    same_file_key,
)
from tokenmill.io.writers import atomic_path, check_target, is_temporary
from tokenmill.layouts import LayoutJob, layout
from tokenmill.plan import Plan, make_plan
from tokenmill.stages.count import run_counts
from tokenmill.stages.encode import run_encode
from tokenmill.stages.layout import (
    MANIFEST,
    VIEWS,
    all_names,
    check_layout_folder,
    check_not_an_out,
    check_out_folder,
    check_writer,
    fingerprint,
    output_paths,
    remove_stale,
    remove_temporaries,
    temporaries_line,
    with_state_files,
)
from tokenmill.stages.layouts_kept import kept_layout, layout_key, layout_record
from tokenmill.stages.manifest import (
    base_manifest,
    file_entry,
    git_revision,
    input_entries,
    listed_outputs,
    listed_path,
    read_manifest,
    relative,
    shard_outputs,
    write_manifest,
)
from tokenmill.stages.merge import run_merge
from tokenmill.stages.results import (
    RunResult,
    ShardStageResult,
    StageResult,
    check_read,
)
from tokenmill.stages.split import check_split_holds
from tokenmill.stages.state import state_file
from tokenmill.stages.tokens import TokenShard, token_shards
from tokenmill.stages.train import run_train
from tokenmill.stages.views import current_views
from tokenmill.tokenizer import Tokenizer

if TYPE_CHECKING:
    import pyarrow as pa

S = TypeVar("S", bound=StageResult)


def check_previous_data(out: AnyPath, data: AnyPath, previous: dict, force: bool) -> None:
    """Refuse an OUT whose outputs came from another DATA (unless --force):
    a run would otherwise replace them without a word."""
    manifest = location(out) / MANIFEST
    before = None
    if manifest.is_file():
        try:
            before = read_manifest(out)["data"]
        except TokenmillError:
            before = None  # a damaged manifest: the lock file may still say
    here = resolved(data)
    if not before and previous.get("data") not in (None, here) and fingerprint(out):
        # The lock file's record counts only once that run left outputs: a
        # run that failed before writing any leaves OUT free for any DATA.
        before = previous["data"]
    if before and before != here and not force:
        raise TokenmillError(
            f"{out}: holds the outputs of another DATA ({before}); give another OUT, "
            "or --force to replace them"
        )


def write_layouts(
    out: AnyPath,
    config: Config,
    tok: Tokenizer,
    shards: list[TokenShard],
    stage,
    shas: dict[str, str],
    previous: dict | None,
) -> tuple[list[dict], dict[str, dict]]:
    """Each layout of the run (--pack, --format) from `shards`: the token shards
    this run wrote or kept, or its mixture's parts (`shas`: their sha256 by
    path relative to OUT), kept when the last run's manifest (`previous`)
    says it was made from the same (stages/layouts_kept.py). The manifest
    entries (checked by verify) of their files, and its record of each."""
    if not config.layouts:
        return [], {}
    job = LayoutJob(
        shards=shards,
        folder=out,
        tokenizer=tok,
        bos=config.bos,
        val_fraction=config.val_fraction,
        per_shard=config.per_shard,
        seq_len=config.pack,
        shuffle=config.shuffle,
        workers=config.n_workers,
        executor=config.executor,
        ray_address=config.ray_address,
    )
    entries: list[dict] = []
    records = {}
    for name in config.layouts:
        lay = layout(name)
        folder = location(out) / lay.folder
        key = layout_key(name, job, shas, out, config.eos)
        start = time.monotonic()
        kept = None if config.force else kept_layout(previous, name, lay, key, out)
        if kept is not None:
            result, listed = kept
            result.seconds = time.monotonic() - start
            stage(result)
            entries.extend(listed)
        else:
            result = stage(lay.write(dataclasses.replace(job, folder=folder)))
            for f in result.files:
                rows = {"rows": result.rows[f]} if f in result.rows else {}
                entries.append(file_entry(folder / f, out, **rows))
        if key is not None:
            records[name] = layout_record(key, result)
    return entries, records


# Options of training only: an encode-only run does not use them.
TRAINING_ONLY = ("min_count",)


def encode_only_config(config: Config, tok: Tokenizer, tokenizer_entry: dict | None) -> dict:
    """The options an encode-only run used: the tokenizer given (its file and
    the file's sha256) and its own mode, pattern, vocabulary and special
    tokens (as --special-token NAME=ID), in place of the training options."""
    d = {k: v for k, v in config.to_dict().items() if k not in TRAINING_ONLY}
    if tokenizer_entry is not None:
        d["tokenizer"] = {"path": tokenizer_entry["path"], "sha256": tokenizer_entry["sha256"]}
    d |= {
        "mode": tok.mode,
        "pattern": tok.pattern,
        "lowercase": tok.lowercase,
        "vocab_size": tok.vocab_size,
        "special_tokens": [f"{name}={i}" for name, i in tok.special_map.items()],
    }
    return d


def save_tokenizer(tok: Tokenizer, given: AnyPath | None, path: AnyPath) -> None:
    """OUT/tokenizer.json of an encode-only run: the tokenizer the shards were
    encoded with, in tokenmill's format, so that the commands reading OUT
    (stats, report, sweep, pack, decode) need no --tokenizer or --pattern. Its
    sha256 is the one the shards record: a tokenmill file given is copied as
    it is (its sha256 is its bytes'), any other written by `save`."""
    if path.is_file() and file_sha256(path) == tok.sha256:
        return  # kept, and so is the state file of a `train` that wrote it
    delete(state_file(path))  # it described another tokenizer.json
    data = read_bytes(given, "tokenizer") if given is not None else b""
    if hashlib.sha256(data).hexdigest() == tok.sha256:
        with atomic_path(path) as tmp:
            tmp.write_bytes(data)
    else:
        tok.save(path)


def run_all(
    data: AnyPath,
    out: AnyPath,
    config: Config,
    on_stage=None,
    *,
    steps: str = "all",
    tokenizer: AnyPath | Tokenizer | None = None,
    load_options: dict | None = None,
    on_note=None,
    extend_pattern: str | None = None,
) -> RunResult:
    """`run_plan` of these options (see `plan.make_plan`)."""
    plan = make_plan(
        data,
        out,
        config,
        steps=steps,
        tokenizer=tokenizer,
        load_options=load_options,
        extend_pattern=extend_pattern,
    )
    return run_plan(plan, on_stage, on_note)


def run_plan(plan: Plan, on_stage=None, on_note=None) -> RunResult:
    """The plan's steps; `on_stage(summary)` is called as each stage ends and
    `on_note(line)` with what the user should know (files not read, stale files
    removed). OUT is locked for the run: a second run into it fails at once.
    With config.extend, training grows plan.base, and words are counted as it
    splits them."""
    data, out, config = plan.data, plan.out, plan.config
    require_input(data)
    check_not_an_out(data)
    check_overlap(data, out)
    check_out_folder(out, config.force)
    note = on_note or (lambda _: None)
    # git starts before the lock is taken: a child forked while OUT's lock is
    # open holds the lock until it execs, and a rerun right after a failed run
    # would find it taken.
    revision = git_revision()
    with output_lock(out) as lock:
        if lock.note:
            note(lock.note)
        check_writer(out, lock.previous, "run", config.force)
        check_previous_data(out, data, lock.previous, config.force)
        return _run_locked(plan, on_stage, note, lock, revision)


def count_stage(inputs: Inputs, paths: dict, config: Config, stage):
    """count, and with --superword-at stage 2's word table too, split by its
    pattern, from the same read of each input. Returns the two stages'
    results (the second None without superword tokens)."""
    tables: list[tuple[AnyPath, str | None]] = [(paths["counts_dir"], None)]
    if config.superword_at is not None:
        from tokenmill.tokenizer.superword import PATTERN

        tables.append((paths["superword_counts_dir"], PATTERN))
    count, *more = run_counts(inputs, tables, config)
    count = check_read(stage(count))
    if not more:
        return count, None
    return count, check_read(stage(dataclasses.replace(more[0], stage="superword-count")))


def merge_superwords(
    paths: dict, config: Config, count2: ShardStageResult, stage, keep: bool = True
):
    """--superword-at: stage 2's count tables merged as counts.parquet is; with
    `keep`, the result's table is the one merged now (None when kept), for
    training to take without reading it back."""
    folder, table = paths["superword_counts_dir"], paths["superword_counts_file"]
    files = [location(f) for f in count2.written]
    # Every stage-2 word is kept: most (sentences) occur once.
    merge = run_merge(folder, table, 1, files=files, force=config.force, keep=keep)
    # The stage's record does not hold the table through the rest of the run.
    stage(dataclasses.replace(merge, stage="superword-merge", table=None))
    return merge


def unlisted_before(removed: list[AnyPath], out: AnyPath, previous: bytes | None) -> list[AnyPath]:
    """The `removed` files the manifest OUT had before this run (`previous`)
    did not list, nor their state files, nor a view (report.html)."""
    listed: set[AnyPath] = {out / name for name in VIEWS}
    if previous is not None:
        try:
            entries = listed_outputs(json.loads(previous))
        except (ValueError, AttributeError, TypeError):
            entries = []
        listed |= {listed_path(out, e["path"]) for e in entries if isinstance(e, dict)}
    keys = {same_file_key(p) for p in with_state_files(listed)}
    return [p for p in removed if same_file_key(p) not in keys]


def last_manifest(previous: bytes | None) -> dict | None:
    """The last run's manifest as read at the start, when it parses."""
    try:
        found = json.loads(previous) if previous is not None else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def some_names(paths: list[AnyPath], out: AnyPath) -> str:
    return ", ".join(relative_name(p, out) for p in paths[:5]) + (", ..." if len(paths) > 5 else "")


def check_targets(out: AnyPath, inputs: Inputs, config: Config, steps: str) -> None:
    """Refuse, before any work, a run that would write a file where a folder,
    a FIFO or a device is, or a folder where a file is (writers.check_target)."""
    paths = output_paths(out)
    files = [paths["manifest"]]
    folders = []
    if steps in ("all", "count"):
        files.append(paths["counts_file"])
        folders.append(paths["counts_dir"])
        if config.superword_at is not None:
            files.append(paths["superword_counts_file"])
            folders.append(paths["superword_counts_dir"])
    if steps in ("all", "encode"):
        files.append(paths["tokenizer"])
        folders.append(paths["tokens_dir"])
        if config.mixes:
            check_target(paths["mix_dir"] / "part-00000.parquet")
        # A layout names its files by the options (merged or per shard, split or
        # not): its folder is what is checked.
        for name in config.layouts:
            check_layout_folder(layout(name), location(out) / layout(name).folder)
        if "olmo" in config.layouts:
            from tokenmill.layouts.olmo import refuse_line_breaks

            for shard in inputs.shards:
                refuse_line_breaks(shard.name, shard.path)
    files += [folder / output_name(s.name) for folder in folders for s in inputs.shards]
    for path in files:
        check_target(path)
        check_target(state_file(path))


def _run_locked(plan: Plan, on_stage, note, lock, revision: Callable[[], str | None]) -> RunResult:
    start = time.monotonic()
    data, out, config, steps = plan.data, plan.out, plan.config, plan.steps
    check_lock = lock.check
    paths = output_paths(out)
    inputs = find_inputs(data, config.glob, exclude=(out,))
    check_targets(out, inputs, config, steps)
    if config.mix is not None and steps in ("all", "encode"):
        from tokenmill.stages.sources import check_placed  # pyarrow.compute: not at start-up

        check_placed(config.mix, [s.name for s in inputs.shards])
    lock.record(data, "run")  # sure to write now: a refused run leaves the last holder's record
    if line := inputs.not_read_line():
        note(f"{line}; listed in the manifest under not_read")
    # Under OUT's lock, every temporary there is a killed run's, or a file of
    # yours so named: no manifest lists one, so each is named.
    if temporaries := remove_temporaries(out):
        note(temporaries_line(temporaries, out))
    # The old manifest no longer describes OUT once any output changes; it is
    # put back when the run fails or is stopped before any did.
    previous = read_bytes(paths["manifest"], "manifest") if paths["manifest"].is_file() else None
    before = fingerprint(out) if previous is not None else None
    delete(paths["manifest"])
    try:
        return _run_stages(plan, on_stage, note, check_lock, revision, start, inputs, previous)
    except BaseException:
        if previous is not None:
            put_back(paths["manifest"], previous, before, check_lock)
        raise


def put_back(manifest: AnyPath, previous: bytes, before: dict | None, check_lock) -> None:
    """The manifest of the run before, put back once this run failed or was
    stopped: while every output under OUT is as it was (`before`:
    stages.layout.fingerprint), it still describes OUT. Best effort: what
    fails here leaves OUT without a manifest, as the run's own error says."""
    with contextlib.suppress(Exception):
        if fingerprint(manifest.parent) == before:
            check_lock()  # never over the manifest of a run that took the lock over
            with atomic_path(manifest) as tmp:
                tmp.write_bytes(previous)


def _run_stages(
    plan: Plan,
    on_stage,
    note,
    check_lock: Callable[[], None],
    revision: Callable[[], str | None],
    start: float,
    inputs: Inputs,
    previous: bytes | None,
) -> RunResult:
    data, out, config, steps = plan.data, plan.out, plan.config, plan.steps
    paths = output_paths(out)
    stages: dict[str, StageResult] = {}

    def stage(result: S) -> S:
        stages[result.stage] = result
        if on_stage:
            on_stage(result)
        return result

    tok = plan.tokenizer
    tokenizer_file = plan.tokenizer_file
    given = None  # encode only: the manifest entry of the tokenizer file given
    if steps == "encode" and tokenizer_file is not None:
        given = file_entry(tokenizer_file, out)
    resolved_config = None
    if steps == "encode":
        assert tok is not None  # make_plan: encode only with a tokenizer
        resolved_config = encode_only_config(config, tok, given)
    manifest = base_manifest(data, resolved_config or config.to_dict(), steps)
    # --superword-at: stage 2's table merged (and returned, when merged now)
    merge2: Callable[[], pa.Table | None] | None = None
    if steps in ("all", "count"):
        count, count2 = count_stage(inputs, paths, config, stage)
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
        if count2 is not None:
            manifest["counts"] += shard_outputs(count2.shards, out)
            table, files = paths["superword_counts_file"], manifest["files"]

            def merge2() -> pa.Table | None:
                merged = merge_superwords(paths, config, count2, stage, keep=steps == "all")
                files.append(file_entry(table, out, rows=merged.words))
                return merged.table

            if steps == "count":
                merge2()
    if steps == "all":
        superwords = paths["superword_counts_file"] if config.superword_at is not None else None
        # Stage 2's table is merged while stage 1 trains (run_train).
        train = stage(
            run_train(
                paths["counts_file"],
                paths["tokenizer"],
                config,
                plan.base,
                superwords,
                merge2,
            )
        )
        tokenizer_file, tok = paths["tokenizer"], train.tokenizer
    if steps in ("all", "encode"):
        assert tok is not None
        # What count read of each input: encode must read the same (shards.check_counted).
        counted = {r["shard"]: r["input"] for r in count.shards} if steps == "all" else None
        encode = check_read(
            stage(run_encode(inputs, paths["tokens_dir"], tok, config, counted=counted))
        )
        if steps == "all":
            manifest["tokenizer"] = file_entry(paths["tokenizer"], out)
        else:
            if given is not None:
                manifest["tokenizer"] = given
            save_tokenizer(tok, tokenizer_file, paths["tokenizer"])
            manifest.setdefault("files", []).append(file_entry(paths["tokenizer"], out))
        manifest["tokenizer_sha256"] = tok.sha256
        manifest["normalizer"] = tok._normalizer
        manifest["outputs"] = shard_outputs(encode.shards, out)
        if encode.split:
            check_split_holds(encode.split, config.val_fraction)
            manifest["split"] = {"val_fraction": config.val_fraction, **encode.split}
        names = [relative_name(location(f), paths["tokens_dir"]) for f in encode.written]
        shards = token_shards(paths["tokens_dir"], names)
        if config.mixes:
            # Here, not at the top: mixing's modules (pyarrow.compute among
            # them) would cost every run's start-up.
            from tokenmill.stages.mix import run_mix

            sha256 = {relative_name(location(r["output"]["file"]), paths["tokens_dir"]):
                      r["output"]["sha256"] for r in encode.shards if r["output"]}  # fmt: skip
            mix = stage(run_mix(shards, paths["mix_dir"], tok, config, sha256))
            manifest["mix"] = mix.summary
            parts = [{"path": relative(paths["mix_dir"] / r["file"], out), "rows": r["rows"],
                      "bytes": r["bytes"], "sha256": r["sha256"]} for r in mix.parts]  # fmt: skip
            manifest.setdefault("files", []).extend(parts)
            shards = token_shards(paths["mix_dir"], [r["file"] for r in mix.parts])
        shas = {e["path"]: e["sha256"] for e in [*manifest["outputs"], *manifest.get("files", [])]}
        files, records = write_layouts(
            out, config, tok, shards, stage, shas, last_manifest(previous)
        )
        manifest.setdefault("files", []).extend(files)
        if records:
            manifest["layouts"] = records
    reader = stages["encode"] if "encode" in stages else stages["count"]
    assert isinstance(reader, ShardStageResult)
    manifest["inputs"] = input_entries(stages)
    manifest["not_read"] = inputs.not_read
    skipped = reader.skipped
    manifest["documents_in"] = reader.documents + sum(s["documents"] for s in skipped)
    manifest["documents"] = reader.documents
    manifest["documents_skipped"] = sum(s["documents"] for s in skipped)
    # A stream that broke mid-file had at least the documents read before it.
    manifest["documents_in_lower_bound"] = any(s.get("lower_bound") for s in skipped)
    manifest["skipped"] = skipped
    if "encode" in stages:
        manifest["tokens"] = reader.tokens
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
    keep |= current_views(out, manifest)
    removed, theirs = remove_stale(out, keep)
    # A task that Ray ran again leaves its killed attempt's temporary: no output.
    killed = [p for p in removed if is_temporary(p.name)]
    removed = [p for p in removed if not is_temporary(p.name)]
    if killed:
        note(
            f"removed {len(killed)} temporary file{'s' if len(killed) > 1 else ''} from {out} "
            "(a killed attempt's): " + all_names(killed, out)
        )
    if removed:
        note(
            f"removed {len(removed)} stale file{'s' if len(removed) > 1 else ''} from {out} "
            f"(outputs of removed inputs or of stages not run, views of other outputs): "
            + some_names(removed, out)
        )
    if unlisted := unlisted_before(removed, out, previous):
        # Removed by their names alone (a killed run's, or a user's file named
        # as a layout names its own): each named, not hidden in the list above.
        note(
            f"of those, {len(unlisted)} no earlier manifest listed, removed because a "
            "layout or stage writes files of such names: " + all_names(unlisted, out)
        )
    if theirs:
        note(
            f"kept {len(theirs)} file{'s' if len(theirs) > 1 else ''} in {out} that tokenmill "
            "did not write (verify lists them as extra): " + some_names(theirs, out)
        )
    manifest["git_revision"] = revision()
    manifest["seconds"] = round(time.monotonic() - start, 3)
    check_lock()
    path = write_manifest(manifest, out)
    return RunResult(
        manifest=str(path),
        seconds=time.monotonic() - start,
        documents=manifest["documents"],
        tokens=manifest.get("tokens", 0),
        skipped=skipped,
        tokenizer=relative(tokenizer_file, out) if tokenizer_file is not None else None,
    )
