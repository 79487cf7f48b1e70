"""The views of a run's outputs, OUT/report.html and OUT/sweep.json
(stages/layout.py): each records, in its state file, what it was made from,
so that a rerun keeps it exactly while it still describes the run's outputs."""

from __future__ import annotations

import hashlib
import json

from tokenmill.io.storage import AnyPath, location
from tokenmill.stages.layout import MANIFEST, VIEWS
from tokenmill.stages.manifest import read_manifest
from tokenmill.stages.state import record_file, reusable_file


def made_from(manifest: dict) -> dict:
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
    digest = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()
    return {"stage": "view", "made_from": digest}


def record_view(path: AnyPath) -> None:
    """After `report` or `sweep` wrote `path` into OUT: what it was made from
    (nothing for a folder without a manifest: a run removes such a view)."""
    out = location(path).parent
    if (out / MANIFEST).is_file():
        record_file(path, made_from(read_manifest(out)))


def current_views(out: AnyPath, manifest: dict) -> set[AnyPath]:
    """The views in OUT made from what `manifest` lists, and unchanged since."""
    key = made_from(manifest)
    return {out / name for name in VIEWS if reusable_file(out / name, key)}
