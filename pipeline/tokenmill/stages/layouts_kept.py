"""Keeping a training layout (--pack, --format) a rerun would write again
byte for byte.

A layout is a function of the shards it is made from (their names, sources
and sha256s, in order), the tokenizer and the layout's options. The run's
manifest records, per layout, the key of those (`layouts` in manifest.json)
beside the sha256 of every file written (`files`). A rerun keeps a layout
when the last run's manifest holds its key, equal to the current one, and
every file it listed under the layout's folder still hashes to its recorded
sha256: its files are not written again, so a nightly rerun that finds
nothing new leaves them (and their mtimes, which sync tools go by) as they
were. Anything else, or --force, writes it anew. A layout written but not
recorded (a run killed before its manifest) is written again.
"""

from __future__ import annotations

from tokenmill.io.storage import AnyPath, location
from tokenmill.layouts import VERSION, Layout, LayoutJob, LayoutResult
from tokenmill.stages.manifest import changed_from, listed_path, relative
from tokenmill.stages.state import digest


def layout_key(
    name: str, job: LayoutJob, shas: dict[str, str], out: AnyPath, eos: bool
) -> str | None:
    """What layout `name` of `job` is made from, as one digest; None when a
    shard's sha256 is not in `shas` (by its path relative to OUT, as the
    manifest lists it): such a layout is never kept."""
    names = [relative(s.path, out) for s in job.shards]
    if any(n not in shas for n in names):
        return None
    what = {
        "layout": name,
        "version": VERSION,
        "shards": [[n, s.source, shas[n]] for n, s in zip(names, job.shards, strict=True)],
        "tokenizer": job.tokenizer.sha256,
        "eos": eos,
        "bos": job.bos,
        "val_fraction": job.val_fraction,
        "per_shard": job.per_shard,
        # The packed layout's own options: the others' bytes do not change with them.
        **({"seq_len": job.seq_len, "shuffle": job.shuffle} if name == "packed" else {}),
    }
    return digest(what)


def kept_layout(
    previous: dict | None, name: str, lay: Layout, key: str | None, out: AnyPath
) -> tuple[LayoutResult, list[dict]] | None:
    """(the stage's result, the manifest entries of its files) when the last
    run's manifest (`previous`) recorded layout `name` made from `key` and
    its files are unchanged since; else None."""
    if key is None or not isinstance(previous, dict):
        return None
    record = (previous.get("layouts") or {}).get(name)
    if not isinstance(record, dict) or record.get("key") != key:
        return None
    prefix = f"{lay.folder}/"
    entries = [e for e in previous.get("files", []) if isinstance(e, dict)
               and str(e.get("path", "")).startswith(prefix)]  # fmt: skip
    if not entries or not all(isinstance(e.get("sha256"), str) for e in entries):
        return None
    # An empty file is one an older version wrote for a shard of no ids, which
    # numpy's memmap cannot open: `check` says to rerun, and the rerun writes it anew.
    if any(e.get("bytes") == 0 for e in entries):
        return None
    for entry in entries:
        path = listed_path(out, entry["path"])
        if not path.is_file() or changed_from(entry, path):
            return None
    files = [e["path"][len(prefix) :] for e in entries]
    result = LayoutResult(
        stage=record.get("stage", name),
        dir=str(location(out) / lay.folder),
        files=files,
        rows={f: e["rows"] for f, e in zip(files, entries, strict=True) if "rows" in e},
        documents=record.get("documents", 0),
        tokens=record.get("tokens", 0),
        summary=record.get("summary", ""),
        seconds=0.0,
        reused=len(files),
    )
    return result, entries


def layout_record(key: str, result: LayoutResult) -> dict:
    """What the manifest records of a layout written now, for the next run."""
    return {
        "key": key,
        "stage": result.stage,
        "documents": result.documents,
        "tokens": result.tokens,
        "summary": result.summary,
    }
