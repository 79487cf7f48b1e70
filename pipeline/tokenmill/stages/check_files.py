"""check, before any layout is read: the layouts OUT has, and each one's
files against those the manifest lists for it.

A listed file missing, or a file of the layout's kind the run did not write
(a copy, another run's), makes the layout's documents differ in number and
order from the token shards': the comparison would name a document, not the
file. So a layout whose files are not the manifest's is named by its files
and not read.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from tokenmill.io.storage import AnyPath
from tokenmill.layouts import MODULES, layout
from tokenmill.stages.layout import MANIFEST, walk_out


def layouts_of(manifest: dict) -> tuple[list[str], list[str]]:
    """The layouts OUT has (files of their folder in the manifest), and the
    problem of each the run asked for but has none."""
    config = manifest.get("config", {})
    files = [e["path"] for e in manifest.get("files", [])]
    present = [n for n in MODULES if any(f.startswith(f"{layout(n).folder}/") for f in files)]
    asked = set(config.get("format", [])) | ({"packed"} if config.get("pack") else set())
    missing = [
        f"{layout(n).folder}/: the run wrote it, but the manifest lists none of its files"
        for n in MODULES
        if n in asked and n not in present
    ]
    # Older versions wrote a layout file of no ids for a shard that held none
    # in a split; numpy's memmap, which nanoGPT and Megatron-LM read with,
    # refuses an empty file, so the trainer would stop at it.
    folders = tuple(f"{layout(n).folder}/" for n in present)
    empty = [
        f"{e['path']}: an empty file, which numpy's memmap (nanoGPT, Megatron-LM) cannot "
        "open; rerun `tokenmill run` to write the layout again"
        for e in manifest.get("files", [])
        if e["path"].startswith(folders) and e.get("bytes") == 0
    ]
    return present, missing + empty


def file_problems(out: AnyPath, manifest: dict, name: str) -> list[str]:
    """The files of layout `name` the manifest lists but OUT lacks, and those
    of its kind OUT holds but the manifest does not list."""
    lay = layout(name)
    prefix = f"{lay.folder}/"
    listed = {e["path"] for e in manifest.get("files", []) if e["path"].startswith(prefix)}
    found = {
        prefix + inside
        for inside, kind, _ in walk_out(out / lay.folder)
        if kind == "file"
        # Dot names are no layout's: temporaries, state files, a killed
        # shuffled packing's buckets; the trainers' readers pass them by.
        and not any(part.startswith(".") for part in PurePosixPath(inside).parts)
        and lay.owns(inside)
    }
    return [f"{path}: missing, though {MANIFEST} lists it" for path in sorted(listed - found)] + [
        f"{path}: not listed in {MANIFEST} (not written by this run)"
        for path in sorted(found - listed)
    ]
