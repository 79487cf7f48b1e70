"""The views of a run's outputs, OUT/report.html and OUT/sweep.json
(stages/layout.py): each records, in its state file, what it was made from,
so that a rerun keeps it exactly while it still describes the run's outputs."""

from __future__ import annotations

from tokenmill.io.storage import AnyPath, location
from tokenmill.stages.layout import MANIFEST, VIEWS
from tokenmill.stages.manifest import read_manifest, view_key
from tokenmill.stages.state import record_file, reusable_file


def record_view(path: AnyPath) -> None:
    """After `report` or `sweep` wrote `path` into OUT: what it was made from
    (nothing for a folder without a manifest: a run removes such a view)."""
    out = location(path).parent
    if (out / MANIFEST).is_file():
        record_file(path, view_key(read_manifest(out)))


def current_views(out: AnyPath, manifest: dict) -> set[AnyPath]:
    """The views in OUT made from what `manifest` lists, and unchanged since."""
    key = view_key(manifest)
    return {out / name for name in VIEWS if reusable_file(out / name, key)}
