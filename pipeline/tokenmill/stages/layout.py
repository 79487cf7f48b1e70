"""The output folder of `run`: where each output goes, and keeping the folder
to exactly what the run's manifest lists.

    OUT/counts/<input path>.parquet   one count table per input (output_name)
    OUT/counts.parquet                the merged table
    OUT/tokenizer.json
    OUT/tokens/<input path>.parquet   one token shard per input
    OUT/packed/<input path>.parquet   --pack
    OUT/packed/{train,val}/<input path>.parquet   --pack --val-fraction
    OUT/bin/<input path>.bin, .idx.npy, index.json   --format bin
    OUT/bin/{train,val}.bin, {train,val}.idx.npy, index.json   --format bin --val-fraction
    OUT/manifest.json
    OUT/report.html, OUT/sweep.json   written by `report` and `sweep` after a run
    OUT/.tokenmill.lock               io/lock.py

Beside each file a run may keep sits its state file `.NAME.state.json`
(stages/state.py). Anything else in tokenmill's folders is stale (the
output of an input since removed, of a stage not run this time, or a
temporary of a killed run) and is removed by the run.
"""

from __future__ import annotations

import os
from pathlib import Path

from tokenmill.io.storage import AnyPath, delete, is_remote, location, same_file_key, walk_files
from tokenmill.stages.state import state_file

MANIFEST = "manifest.json"
REPORT = "report.html"  # written by `tokenmill report` after a run
SWEEP = "sweep.json"  # written by `tokenmill sweep` after a run
TOKENIZER = "tokenizer.json"  # beside tokens/
FOLDERS = ("counts", "tokens", "packed", "bin")
FILES = ("counts.parquet", TOKENIZER, REPORT, SWEEP)


def output_paths(out: AnyPath) -> dict[str, AnyPath]:
    out = location(out)
    return {
        "counts_dir": out / "counts",
        "counts_file": out / "counts.parquet",
        "tokenizer": out / TOKENIZER,
        "tokens_dir": out / "tokens",
        "packed_dir": out / "packed",
        "bin_dir": out / "bin",
        "manifest": out / MANIFEST,
    }


def with_state_files(paths: set[AnyPath]) -> set[AnyPath]:
    return paths | {state_file(p) for p in paths}


def tokenmill_files(out: AnyPath) -> list[AnyPath]:
    """Every file in tokenmill's folders and top-level names of OUT."""
    out = location(out)
    if is_remote(out):
        # One listing of OUT (an object store has no folders to walk).
        top = {n for name in FILES for n in (name, state_file(out / name).name)}
        return [
            p
            for name, p in walk_files(out)
            if ("/" in name and name.split("/", 1)[0] in FOLDERS) or name in top
        ]
    found = []
    for name in FILES:
        for p in (out / name, state_file(out / name)):
            if p.is_file() or p.is_symlink():
                found.append(p)
    for folder in FOLDERS:
        for root, _, files in os.walk(out / folder):
            found.extend(Path(root) / f for f in files)
    return found


def remove_stale(out: AnyPath, keep: set[AnyPath]) -> list[AnyPath]:
    """Remove every file of tokenmill's under OUT that is not in `keep` (nor a
    state file of one), then the folders left empty. Returns what was removed."""
    out = location(out)
    keep_keys = {same_file_key(p) for p in with_state_files(set(keep))}
    removed = []
    for p in tokenmill_files(out):
        if same_file_key(p) not in keep_keys:
            delete(p)
            removed.append(p)
    if is_remote(out):
        return removed  # no folders to remove: a prefix is gone with its last object
    for folder in FOLDERS:
        for root, dirs, _ in os.walk(Path(out) / folder, topdown=False):
            for d in dirs:
                try:
                    (Path(root) / d).rmdir()
                except OSError:
                    pass  # not empty
        try:
            (Path(out) / folder).rmdir()
        except OSError:
            pass
    return removed
