"""OUT/manifest.json: what a run read, how, and what it wrote, with hashes;
and `verify`, which checks a folder against its manifest."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from tokenmill import __version__
from tokenmill.errors import TokenmillError
from tokenmill.io.files import file_sha256, parquet_footer, parquet_json_metadata, read_json
from tokenmill.io.lock import LOCK, writing_now
from tokenmill.io.metadata import STATE, TOKENIZER_SHA256
from tokenmill.io.storage import (
    AnyPath,
    is_inside,
    is_remote,
    location,
    relative_name,
    resolved,
    same_file_key,
    size,
    walk_files,
)
from tokenmill.io.writers import write_json
from tokenmill.stages.layout import MANIFEST, MIX, VIEWS, mix_part, with_state_files
from tokenmill.stages.state import digest, recorded_state, reusable_file

# The mixture's part that records its account.
MIX_ACCOUNT = f"{MIX}/{mix_part(0)}"


def git_revision() -> Callable[[], str | None]:
    """The commit tokenmill runs from (with "-dirty" for local changes), when
    it runs from a git checkout of its own (not from a package installed
    inside some other repository), as a call that waits for the answer: git
    runs beside the run's stages (its dirty check reads the whole checkout,
    tens of ms), and never when there is no checkout to ask."""
    root = Path(__file__).resolve().parents[3]
    if not (root / ".git").exists():
        return lambda: None
    answer: list[str | None] = [None]

    def ask() -> None:
        try:
            answer[0] = (
                subprocess.run(
                    ["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=40"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                    check=True,
                ).stdout.strip()
                or None
            )
        except (OSError, subprocess.SubprocessError):
            pass

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()

    def result() -> str | None:
        asking.join()
        return answer[0]

    return result


def relative(path: AnyPath | str, out: AnyPath) -> str:
    """`path` relative to OUT when inside it, else absolute (a URL as it is).
    Outputs are recorded relative to OUT wherever OUT is, so a folder copied
    between a disk and a bucket still verifies."""
    path, out = location(path), location(out)
    if is_remote(path) or is_remote(out):
        return relative_name(path, out) if is_inside(path, out) else resolved(path)
    # By name first, as the sweep and verify walk OUT: an output under a
    # linked folder (OUT/tokens on another disk) is still tokens/NAME.
    named = os.path.relpath(os.path.abspath(path), os.path.abspath(out))
    if named != os.pardir and not named.startswith(os.pardir + os.sep):
        return Path(named).as_posix()
    path = path.resolve()
    try:
        return path.relative_to(Path(out).resolve()).as_posix()
    except ValueError:
        return str(path)


def shard_outputs(shards: list[dict], out: AnyPath) -> list[dict]:
    """Manifest entries for the outputs of count's or encode's per-shard records."""
    entries = []
    for r in shards:
        if r["output"] is None:
            continue
        entry = {"shard": r["shard"], "path": relative(r["output"]["file"], out)}
        entry["rows"] = r["output"]["rows"]
        entry |= {k: r[k] for k in ("documents", "tokens", "words") if k in r}
        entry["bytes"] = r["output"]["bytes"]
        entry["sha256"] = r["output"]["sha256"]
        entries.append(entry)
    return entries


def input_entries(stages: dict) -> list[dict]:
    """Manifest entries of the inputs: the fingerprint of each as the outputs
    were made from it (encode's read, or count's when only count ran), and under
    "read_by" the sha256 each stage of the run read it as (count: the counts,
    and so the tokenizer, were made from it; encode: the tokens), which verify
    holds against the input as it is."""
    count, encode = stages.get("count"), stages.get("encode")
    counted = {r["shard"]: r["input"]["sha256"] for r in count.shards} if count else {}
    reader = encode or count
    assert reader is not None  # a run counts or encodes
    entries = []
    for r in reader.shards:
        read_by = {"count": counted[r["shard"]]} if r["shard"] in counted else {}
        if encode:
            read_by["encode"] = r["input"]["sha256"]
        entries.append({**r["input"], "read_by": read_by})
    return entries


def changed_from(entry: dict, path: AnyPath) -> bool:
    """Whether the file at `path` is no longer the one `entry` records: its
    size first (no read), then its sha256."""
    if "bytes" in entry and size(path) != entry["bytes"]:
        return True
    return file_sha256(path) != entry["sha256"]


def file_entry(path: AnyPath, out: AnyPath, **extra) -> dict:
    path = location(path)
    return {"path": relative(path, out), **extra, "bytes": size(path), "sha256": file_sha256(path)}


def write_manifest(manifest: dict, out: AnyPath) -> AnyPath:
    path = location(out) / MANIFEST
    write_json(manifest, path)
    return path


def base_manifest(data: AnyPath, config_dict: dict, steps: str) -> dict:
    """The manifest's first fields; "git_revision" is filled in when it is
    written (`git_revision`)."""
    return {
        "tokenmill_version": __version__,
        "git_revision": None,
        "steps": steps,
        "data": resolved(data),
        "config": config_dict,
    }


def read_manifest(out: AnyPath) -> dict:
    """OUT/manifest.json, checked to have the shape `run` writes: one line names
    the file and what is wrong otherwise."""
    path = location(out) / MANIFEST
    if not path.is_file() and (running := writing_now(out)) is not None:
        raise running
    manifest = read_json(path, "manifest")
    if not isinstance(manifest, dict) or not isinstance(manifest.get("data"), str):
        raise TokenmillError(f'{path}: not a tokenmill manifest (no "data" folder)')
    for group in ("inputs", "outputs", "counts", "files"):
        entries = manifest.get(group, [])
        if not isinstance(entries, list) or not all(_is_entry(e) for e in entries):
            raise TokenmillError(
                f"{path}: not a tokenmill manifest ({group!r} is not a list of "
                "entries with a path and a sha256)"
            )
    for entry in manifest.get("inputs", []):
        read_by = entry.get("read_by", {})  # none in a manifest from before it
        if not isinstance(read_by, dict) or not all(isinstance(v, str) for v in read_by.values()):
            raise TokenmillError(
                f"{path}: not a tokenmill manifest (input {entry['path']!r}: 'read_by' is "
                "not a sha256 by stage)"
            )
    if "tokenizer" in manifest and not _is_entry(manifest["tokenizer"]):
        raise TokenmillError(f"{path}: not a tokenmill manifest (bad 'tokenizer' entry)")
    return manifest


def manifest_if_any(out: AnyPath) -> dict:
    """OUT's manifest, or {} for a folder without one (given --data), unless a
    run is writing OUT now: its manifest is gone until the run ends."""
    if (location(out) / MANIFEST).is_file():
        return read_manifest(out)
    if (running := writing_now(out)) is not None:
        raise running
    return {}


def _is_entry(entry: object) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("path"), str)
        and isinstance(entry.get("sha256"), str)
        and isinstance(entry.get("bytes", 0), int)
    )


def listed_path(out: AnyPath, name: str) -> AnyPath:
    """Where a manifest entry's path points: under OUT when relative; an
    absolute path or a URL (a tokenizer given from elsewhere) stays itself."""
    where = location(name)
    # Joined by hand: a UPath, unlike a Path, puts an absolute path under OUT.
    return where if is_remote(where) or where.is_absolute() else out / name


def listed_outputs(manifest: dict) -> list[dict]:
    """Every output entry of a manifest (token shards, count tables, files, tokenizer)."""
    outputs = [e for group in ("outputs", "counts", "files") for e in manifest.get(group, [])]
    if "tokenizer" in manifest:
        outputs.append(manifest["tokenizer"])
    return outputs


def verify(out: AnyPath) -> tuple[int, list[str]]:
    """(number of files checked, what differs) for OUT against OUT/manifest.json:
    inputs and outputs missing or changed, and files under OUT it does not list."""
    out = location(out)
    manifest = read_manifest(out)
    data = location(manifest["data"])
    checks = []
    inputs = manifest.get("inputs", [])
    # DATA a file: its one input is named after it. Gone (moved, removed), it
    # is told apart the same way, and a folder's inputs are missing under it.
    one_file = data.is_file() or (
        not data.exists() and len(inputs) == 1 and inputs[0]["path"] == data.name
    )
    for entry in inputs:
        path = data if one_file else data / entry["path"]
        checks.append(("input", entry["path"], path, entry))
    # The views are no outputs of the run (stages/layout.py).
    listed = {out / MANIFEST, out / LOCK, *(out / name for name in VIEWS)}
    for entry in listed_outputs(manifest):
        path = listed_path(out, entry["path"])
        checks.append(("output", entry["path"], path, entry))
        listed.add(path)
    differences = []
    for kind, name, path, entry in checks:
        if not path.is_file():
            differences.append(f"{kind} {name}: missing ({path})")
            continue
        found = size(path)
        if "bytes" in entry and found != entry["bytes"]:
            differences.append(f"{kind} {name}: changed, {found} bytes, was {entry['bytes']}")
            continue
        sha = file_sha256(path)
        if sha != entry["sha256"]:
            differences.append(f"{kind} {name}: changed, sha256 {sha}, was {entry['sha256']}")
            continue
        # An input must be what every stage read: else its outputs do not follow from it.
        for stage, read in sorted(entry.get("read_by", {}).items()):
            if read != sha:
                differences.append(f"{kind} {name}: read by {stage} as sha256 {read}, now {sha}")
    known = {same_file_key(p) for p in with_state_files(listed)}
    for relative_path, path in files_under(out, data):
        if same_file_key(path) not in known:
            differences.append(f"extra {relative_path}: not in the manifest")
    if not differences:  # the numbers are read from outputs just found intact
        differences += accounting_differences(manifest, out)
    key = view_key(manifest)
    for name in VIEWS:  # not listed (made after the run), but held to their state
        view = out / name
        if view.is_file() and recorded_state(view) and not reusable_file(view, key):
            differences.append(
                f"view {name}: changed since it was written, or of other outputs (write it again)"
            )
    differences += unlisted_inputs(manifest, data, out)
    return len(checks), differences


def view_key(manifest: dict) -> dict:
    """A view's state key: one sha256 of what it reads, as the manifest lists
    it (the inputs, the tokenizer and the token shards)."""
    what = {
        "inputs": [[e["path"], e["sha256"]] for e in manifest.get("inputs", [])],
        "tokenizer_sha256": manifest.get("tokenizer_sha256"),
        "outputs": [[e["path"], e["sha256"]] for e in manifest.get("outputs", [])],
    }
    files = manifest.get("files", [])
    mixture = [[e["path"], e["sha256"]] for e in files if e["path"].startswith("mix/")]
    if mixture:  # the report shows the recipe asked against the mixture written
        what["mix"] = mixture
    return {"stage": "view", "made_from": digest(what)}


def recorded_counts(manifest: dict) -> list[tuple[str, object]]:
    """(where, value) of every number the manifest's accounting adds up."""
    found: list[tuple[str, object]] = [
        (key, manifest[key])
        for key in ("documents", "tokens", "documents_in", "documents_skipped")
        if key in manifest
    ]
    for group in ("outputs", "counts", "skipped"):
        for entry in manifest.get(group, []):
            for key in ("documents", "tokens"):
                if isinstance(entry, dict) and entry.get(key) is not None:
                    found.append(
                        (f"{group} {entry.get('path', entry.get('shard'))} {key}", entry[key])
                    )
    return found


def unlisted_inputs(manifest: dict, data: AnyPath, out: AnyPath) -> list[str]:
    """Inputs now under DATA that the manifest names nowhere (read, skipped or
    not read): added since the run, so OUT no longer follows from DATA."""
    from tokenmill.io.inputs import find_inputs

    if not data.exists():
        return []  # every input it lists is reported missing
    config = manifest.get("config")
    glob = config.get("glob") if isinstance(config, dict) else None
    found = find_inputs(data, glob or "**/*", exclude=(out,))
    named = {e.get("path") for e in manifest.get("inputs", []) if isinstance(e, dict)}
    for group, key in (("not_read", "path"), ("skipped", "shard")):
        named |= {e.get(key) if isinstance(e, dict) else e for e in manifest.get(group, [])}
    return [
        f"input {s.name}: under DATA but not in the manifest (added since the run: run again)"
        for s in found.shards
        if s.name not in named
    ]


def accounting_differences(manifest: dict, out: AnyPath) -> list[str]:
    """Where the manifest's own numbers do not follow from its outputs: each
    shard output's documents and tokens against what the output records of
    itself, the input it was made from against the inputs listed, and the
    totals against the sums. The files' hashes cannot show these: the
    manifest is the record they are checked against."""
    inputs = {e["path"]: e for e in manifest.get("inputs", [])}
    not_counts = [
        f"manifest {where}: {value!r} is not a count"
        for where, value in recorded_counts(manifest)
        if type(value) is not int or value < 0
    ]
    if not_counts:
        return not_counts  # the sums below would mean nothing
    differences = []
    for group, stage in (("outputs", "encode"), ("counts", "count")):
        for entry in manifest.get(group, []):
            state = parquet_json_metadata(listed_path(out, entry["path"]), STATE)
            if not isinstance(state, dict):
                continue  # no record of its own (a layout's file)
            source: dict = state["input"] if isinstance(state.get("input"), dict) else {}
            made_from = source.get("path")
            listed_input = inputs.get(made_from)
            read = listed_input and listed_input.get("read_by", {}).get(stage)
            read = read or (listed_input and listed_input["sha256"])
            if listed_input is None or source.get("sha256") != read:
                differences.append(
                    f"output {entry['path']}: made from input {made_from}, which the "
                    "manifest does not list as it was read"
                )
            for key in ("documents", "tokens", "words"):
                result: dict = state["result"] if isinstance(state.get("result"), dict) else {}
                recorded = result.get(key)
                if key in entry and entry[key] != recorded:
                    differences.append(
                        f"output {entry['path']}: {entry[key]} {key} in the manifest, "
                        f"{recorded} in the output"
                    )
    shards = manifest.get("outputs") or manifest.get("counts", [])
    totals = {"documents": shards, "tokens": manifest.get("outputs", [])}
    for key, entries in totals.items():
        if key in manifest and entries and manifest[key] != sum(e.get(key, 0) for e in entries):
            differences.append(
                f"manifest {key}: {manifest[key]}, its outputs hold "
                f"{sum(e.get(key, 0) for e in entries)}"
            )
    if "documents_in" in manifest and manifest["documents_in"] != manifest.get(
        "documents", 0
    ) + manifest.get("documents_skipped", 0):
        differences.append("manifest documents_in: not documents + documents_skipped")
    listed = [e.get("documents") for e in manifest.get("skipped", []) if isinstance(e, dict)]
    counted = [n for n in listed if isinstance(n, int)]
    # A skipped file whose documents could not be counted lists none.
    skipped = manifest.get("documents_skipped", 0)
    if len(counted) == len(listed) and skipped != sum(counted):
        differences.append(f"manifest documents_skipped: {skipped}, its skips list {sum(counted)}")
    differences += footer_differences(manifest, out)
    split = manifest.get("split")
    if isinstance(split, dict) and "outputs" in manifest:
        for key in ("documents", "tokens"):
            sides = [split.get(side, {}).get(key) for side in ("train", "val")]
            if not all(type(n) is int for n in sides) or sum(sides) != manifest.get(key):
                differences.append(
                    f"manifest split: train and val {key} {sides} do not add up to its "
                    f"{manifest.get(key)}"
                )
    if isinstance(manifest.get("mix"), dict):
        # A mixture's account is recorded in its first part too (stages/mix.py).
        state = parquet_json_metadata(listed_path(out, MIX_ACCOUNT), STATE)
        account = state.get("result") if isinstance(state, dict) else None
        if not isinstance(account, dict) or account.get("mix") != manifest["mix"]:
            differences.append(f"manifest mix: not the account {MIX_ACCOUNT} records")
    return differences


def footer_differences(manifest: dict, out: AnyPath) -> list[str]:
    """The rows the manifest gives each Parquet file it lists against the
    file's footer, and its tokenizer_sha256 against the one each token shard
    was encoded with (written in the shard)."""
    differences = []
    sha = manifest.get("tokenizer_sha256")
    other: dict[str, list[str]] = {}  # tokenizer sha256 -> the files encoded with it
    for entry in listed_outputs(manifest):
        path = entry.get("path")
        if not isinstance(path, str) or not path.endswith(".parquet"):
            continue
        footer = parquet_footer(listed_path(out, path))
        if footer is None:
            continue  # not Parquet: a layout's file, checked by its hash
        rows, meta = footer
        if "rows" in entry and entry["rows"] != rows:
            differences.append(f"output {path}: {entry['rows']} rows in the manifest, {rows} in it")
        recorded = meta.get(TOKENIZER_SHA256)
        if sha is not None and recorded is not None and recorded.decode() != sha:
            other.setdefault(recorded.decode(), []).append(path)
    for encoded_with, paths in other.items():
        shown = ", ".join(paths[:3]) + (", ..." if len(paths) > 3 else "")
        differences.append(
            f"manifest tokenizer_sha256: {sha}, but {len(paths)} outputs were encoded "
            f"with {encoded_with} ({shown})"
        )
    return differences


def files_under(out: AnyPath, data: AnyPath) -> list[tuple[str, AnyPath]]:
    """(path relative to OUT, path) of every file under OUT, in sorted order,
    leaving out DATA when it lies inside (run refuses that; never list inputs
    as extras)."""
    if is_remote(out):
        return [(name, p) for name, p in walk_files(out) if not is_inside(p, data)]
    found: list[tuple[str, AnyPath]] = []
    data_root = None if is_remote(data) else os.path.realpath(data)
    for root, dirs, files in os.walk(out):
        if os.path.realpath(root) == data_root:
            dirs.clear()
            continue
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            found.append((path.relative_to(out).as_posix(), path))
    return found
