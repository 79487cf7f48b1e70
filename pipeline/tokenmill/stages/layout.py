"""The output folder of `run`: where each output goes, which folders are
tokenmill's to write, and keeping them to what the run's manifest lists.

    OUT/counts/<input path>.parquet   one count table per input (output_name)
    OUT/counts.parquet                the merged table
    OUT/superword-counts/..., OUT/superword-counts.parquet
                                      --superword-at: the same, split by stage 2's pattern
    OUT/tokenizer.json
    OUT/tokens/<input path>.parquet   one token shard per input
    OUT/mix/part-NNNNN.parquet        [mix], --shuffle: the mixture (stages/mix.py),
                                      and val-NNNNN.parquet with --val-fraction
    OUT/<layout folder>/...           --pack, --format: each layout's own folder
                                      (packed/, bin/, megatron/, ...: tokenmill.layouts)
    OUT/manifest.json
    OUT/report.html, OUT/sweep.json   views: written by `report` and `sweep` after a run
    OUT/.tokenmill.lock               io/lock.py

Beside each file a run may keep sits its state file `.NAME.state.json`
(stages/state.py).

What a run may delete (docs/guarantees.md, "What tokenmill may delete"):
only in a folder that is tokenmill's (`check_out_folder`: it holds
tokenmill's manifest or lock file, or was new or empty, or --force said
so), and there only what it can tell is its own and not kept: in counts/
and tokens/ `*.parquet`, in a layout's folder the files its `owns` says it
writes; `counts.parquet` and `tokenizer.json`; a view with the state file
`report` or `sweep` wrote beside it; state files; temporaries. Any other
file is kept and named. Nothing is deleted through a link: a link is removed
as a file, and a folder that is a link is never walked, so neither the
sweep nor `verify` sees what lies behind it.

The views are no outputs of a run: the manifest does not list them and
`verify` does not check them. Each records what it was made from (stages/
views.py); a rerun keeps it while that is what the run's manifest lists,
and removes it as stale once the inputs, tokenizer or token shards change.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from tokenmill.errors import TokenmillError
from tokenmill.io import writers
from tokenmill.io.lock import LOCK
from tokenmill.io.storage import (
    AnyPath,
    delete,
    identities,
    identity,
    is_remote,
    location,
    relative_name,
    remote_errors,
    same_file_key,
    walk_files,
)
from tokenmill.io.writers import is_temporary
from tokenmill.stages.state import recorded_state, state_file

if TYPE_CHECKING:
    from tokenmill.layouts import Layout

MANIFEST = "manifest.json"
REPORT = "report.html"  # written by `tokenmill report` after a run
SWEEP = "sweep.json"  # written by `tokenmill sweep` after a run
TOKENIZER = "tokenizer.json"  # beside tokens/
MIX = "mix"  # the mixture's folder
# All theirs is *.parquet (and mix's .buckets/).
STAGE_FOLDERS = ("counts", "superword-counts", "tokens", MIX)
VIEWS = (REPORT, SWEEP)
# A view is tokenmill's by its state file.
OWN_FILES = ("counts.parquet", "superword-counts.parquet", TOKENIZER)
FILES = (*OWN_FILES, *VIEWS)
STATE_SUFFIX = ".state.json"
MIX_PREFIX = ("part", "val")  # of its parts' names, by split: train, then validation


def mix_part(k: int, split: int = 0) -> str:
    """The name of the mixture's part `k` in `split` (0 train, 1 validation):
    part 0 of the training split records the mixture's account."""
    return f"{MIX_PREFIX[split]}-{k:05d}.parquet"


def layouts() -> dict[str, Layout]:
    """Every layout by its folder (whether this run writes it or not: a
    rerun removes what a format no longer asked for left)."""
    from tokenmill.layouts import MODULES, layout

    return {lay.folder: lay for lay in map(layout, MODULES)}


def folders() -> tuple[str, ...]:
    """The folders of OUT that are tokenmill's: the stages' and the layouts'.
    A layout's folder is named as the layout (test_layout_guarantees holds
    them so): known without importing every layout's module, which would be
    a tenth of each run's start-up."""
    from tokenmill.layouts import MODULES

    return (*STAGE_FOLDERS, *MODULES)


def output_paths(out: AnyPath) -> dict[str, AnyPath]:
    out = location(out)
    return {
        "counts_dir": out / "counts",
        "counts_file": out / "counts.parquet",
        "superword_counts_dir": out / "superword-counts",
        "superword_counts_file": out / "superword-counts.parquet",
        "tokenizer": out / TOKENIZER,
        "tokens_dir": out / "tokens",
        "mix_dir": out / MIX,
        "manifest": out / MANIFEST,
    }


def with_state_files(paths: set[AnyPath]) -> set[AnyPath]:
    return paths | {state_file(p) for p in paths}


def is_tokenmill_out(folder: AnyPath) -> bool:
    """Whether `folder` holds tokenmill's lock file or manifest: a folder a
    run or a stage command wrote (a killed first run leaves its lock file)."""
    folder = location(folder)
    if is_remote(folder):
        return (folder / LOCK).exists() or is_tokenmill_manifest(folder / MANIFEST)
    return os.path.lexists(folder / LOCK) or is_tokenmill_manifest(folder / MANIFEST)


def is_tokenmill_manifest(path: AnyPath) -> bool:
    """Whether `path` is a manifest tokenmill wrote (a model folder's or a web
    app's manifest.json is not)."""
    try:
        if not path.is_file():
            return False
        manifest = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(manifest, dict) and "tokenmill_version" in manifest


def check_not_an_out(data: AnyPath) -> None:
    """Refuse a DATA that is a run's OUT: its tables and token shards hold no
    text column, and the run failed on the first of them, naming a column."""
    data = location(data)
    if is_tokenmill_manifest(data / MANIFEST):
        raise TokenmillError(
            f"{data}: DATA is a tokenmill output folder (its {MANIFEST}); give the data "
            "it was made from"
        )


def check_out_folder(out: AnyPath, force: bool = False, *, whole: bool = False) -> None:
    """Before OUT is locked, so that a refusal creates nothing there: refuse
    an OUT inside another tokenmill output folder or holding one, and a
    folder holding files tokenmill did not write (no manifest, no lock file)
    unless `force`. `whole`: every name in the folder may be an output (a
    stage command's folder), so a FIFO or device anywhere is refused too
    (reading it to reuse it would block)."""
    out = location(out)
    with remote_errors(out):  # a missing bucket, no credentials: one line naming OUT
        _check_out_folder(out, force, whole)


def _check_out_folder(out: AnyPath, force: bool, whole: bool) -> None:
    for parent in ancestors(out):
        if is_tokenmill_out(parent):
            raise TokenmillError(
                f"{out}: inside the tokenmill output folder {parent}, whose reruns would "
                "remove it; give a folder of its own"
            )
    if not out.is_dir():
        return  # new, or a file (output_lock says so)
    own = is_tokenmill_out(out)
    for name, kind, path in walk_out(out):
        base = PurePosixPath(name).name
        if "/" in name and (
            base == LOCK or (base == MANIFEST and is_tokenmill_manifest(location(path)))
        ):
            raise TokenmillError(
                f"{out}: holds the tokenmill output folder {location(path).parent}, which "
                "its runs would remove; give a folder of its own"
            )
        if whole and is_special(kind, path):
            raise writers.not_a_file(path)
        if not (own or force or kind in ("dir", "link to dir")):
            raise TokenmillError(
                f"{out}: not a tokenmill output folder (it holds {name}, and no {MANIFEST} "
                f"or {LOCK}); give a new or empty folder, or --force to write into it "
                "(tokenmill then replaces or removes only files named as its outputs)"
            )


def check_writer(out: AnyPath, previous: dict, writes: str, force: bool) -> None:
    """Refuse a folder that holds another command's outputs (the last lock
    holder's `writes`; a run's manifest): `encode` into a run's OUT wrote its
    shards beside counts/ and tokens/, `run` into a `count` folder mixed its
    outputs with the tables, `encode` into a `count` folder replaced them."""
    before = previous.get("writes")
    if before is None and writes != "run" and is_tokenmill_manifest(location(out) / MANIFEST):
        before = "run"
    if before is not None and before != writes and not force:
        raise TokenmillError(
            f"{out}: holds the outputs of `tokenmill {before}`, not `tokenmill {writes}`; "
            "give another folder, or --force to write into it"
        )


def is_special(kind: str, path: AnyPath) -> bool:
    """Whether an entry of walk_out is, or links to, a FIFO, socket or device."""
    if kind != "file" or is_remote(path) or not os.path.islink(path):
        return kind == "other"
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # dangling: a write replaces the link
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def ancestors(out: AnyPath) -> list[AnyPath]:
    """The folders above OUT: by its resolved path, so that a link into
    another output folder is inside it."""
    if is_remote(out):
        return list(out.parents)  # up to the bucket
    return list(Path(os.path.realpath(out)).parents)


def walk_out(folder: AnyPath) -> Iterator[tuple[str, str, AnyPath]]:
    """(name relative to `folder` with '/', kind, path) of every entry under
    it: kind "dir"; "link to dir", never entered; "file", a regular file or a
    link to anything else (a dangling link too); "other", a FIFO, socket or
    device. An object store lists objects only."""
    folder = location(folder)
    if is_remote(folder):
        with remote_errors(folder):
            for name, path in walk_files(folder):
                yield name, "file", path
        return
    stack = [(Path(folder), "")]
    while stack:
        at, prefix = stack.pop()
        try:
            entries = sorted(os.scandir(at), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for e in entries:
            name = prefix + e.name
            if e.is_dir(follow_symlinks=False):
                yield name, "dir", Path(e.path)
                stack.append((Path(e.path), name + "/"))
            elif e.is_symlink():
                yield name, "link to dir" if e.is_dir() else "file", Path(e.path)
            elif e.is_file(follow_symlinks=False):
                yield name, "file", Path(e.path)
            else:
                yield name, "other", Path(e.path)


def check_layout_folder(lay: Layout, folder: AnyPath) -> None:
    """Refuse, before any work, a folder, link to a folder, FIFO or device in
    a layout's folder at a name the layout writes a file at (`owns`): the
    layout names its files by the options, so its folder is walked for them.
    Found only when written, it ended the run after the other outputs."""
    writers.check_folder(folder)
    if is_remote(folder):
        return  # an object store holds objects only
    for name, kind, path in walk_out(folder):
        if lay.owns(name) and (kind in ("dir", "link to dir", "other") or is_special(kind, path)):
            raise writers.not_a_file(path)


def tokenmill_files(out: AnyPath) -> tuple[list[tuple[str, AnyPath]], list[AnyPath]]:
    """(name relative to OUT, path) of every file in tokenmill's folders and
    top-level names of OUT (a folder that is a link is not entered), and the
    other files at OUT's top: yours, kept, but named as those in its folders."""
    out = location(out)
    top = {n for name in FILES for n in (name, state_file(out / name).name)}
    never = {MANIFEST, LOCK}  # the manifest is written anew, the lock held
    own_folders = folders()
    if is_remote(out):
        # One listing of OUT (an object store has no folders to walk).
        listed = list(walk_files(out))
        others = [p for name, p in listed if "/" not in name and name not in top | never]
        return [
            (name, p)
            for name, p in listed
            if ("/" in name and name.split("/", 1)[0] in own_folders) or name in top
        ], others
    found: list[tuple[str, AnyPath]] = [
        (name, out / name)
        for name in sorted(top)
        if (out / name).is_file() or (out / name).is_symlink()  # a FIFO is never tokenmill's
    ]
    for folder in own_folders:
        if not (out / folder).is_symlink():
            found.extend(
                (f"{folder}/{name}", p)
                for name, kind, p in walk_out(out / folder)
                if kind == "file"
            )
    with os.scandir(out) as entries:
        # A link to a folder is one as a folder is: not named.
        others = [Path(e.path) for e in entries if e.name not in top | never and not e.is_dir()]
    return found, sorted(others)


def fingerprint(out: AnyPath) -> dict[str, tuple | None]:
    """Every file of tokenmill's under OUT (but the manifest and the lock) as
    it is now (storage.identity), by name: two equal fingerprints mean that
    nothing there was written, replaced or removed between them."""
    out = location(out)
    if is_remote(out):
        return {n: i for n, i in identities(out).items() if n not in (MANIFEST, LOCK)}
    files, _ = tokenmill_files(out)
    found = {name: _identity(path) for name, path in files}
    # A folder of tokenmill's that is a link (tokens/ on another disk) is
    # never walked to delete, but its files are outputs all the same.
    for folder in folders():
        if (out / folder).is_symlink():
            found.update(_linked_files(out / folder, folder))
    return found


def _identity(path: AnyPath) -> tuple | None:
    try:
        return identity(path)
    except OSError:
        return None  # a dangling link: as it is


def _linked_files(root: Path, name: str) -> dict[str, tuple | None]:
    """Every file under the folder `root` links to, links followed (each
    folder once: a link back up is no loop)."""
    found: dict[str, tuple | None] = {}
    seen: set[tuple[int, int]] = set()
    for at, dirs, files in os.walk(root, followlinks=True):
        st = os.stat(at)
        if (st.st_dev, st.st_ino) in seen:
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        prefix = Path(at).relative_to(root).as_posix()
        for f in files:
            key = f"{name}/{f}" if prefix == "." else f"{name}/{prefix}/{f}"
            found[key] = _identity(Path(at) / f)
    return found


def is_own_file(name: str, path: AnyPath) -> bool:
    """Whether the file `name` (relative to OUT) is one tokenmill wrote, by
    the policy in this module's docstring."""
    base = PurePosixPath(name).name
    if is_temporary(base) or (base.startswith(".") and base.endswith(STATE_SUFFIX)):
        return True
    if "/" not in name:
        # A view is tokenmill's only with the state file `report` or `sweep` wrote.
        return base in OWN_FILES or (base in VIEWS and bool(recorded_state(path)))
    folder, inside = name.split("/", 1)
    if folder in STAGE_FOLDERS:
        # A killed mix's pass-1 files (stages/shuffle.py) are its own too.
        return base.endswith(".parquet") or (folder == "mix" and inside.startswith(".buckets/"))
    return layouts()[folder].owns(inside)


def remove_stale(out: AnyPath, keep: set[AnyPath]) -> tuple[list[AnyPath], list[AnyPath]]:
    """Remove every file of tokenmill's under OUT that is not in `keep` (nor a
    state file of one), then the folders left empty. Returns what was removed,
    and the files there that tokenmill did not write, which it keeps."""
    out = location(out)
    keep_keys = {same_file_key(p) for p in with_state_files(set(keep))}
    files, others = tokenmill_files(out)
    stale = [(n, p) for n, p in files if same_file_key(p) not in keep_keys]
    own = [is_own_file(n, p) for n, p in stale]  # all decided before any state file goes
    removed = [p for (_, p), mine in zip(stale, own, strict=True) if mine]
    for p in removed:
        delete(p)
    theirs = others + [p for (_, p), mine in zip(stale, own, strict=True) if not mine]
    if is_remote(out):
        return removed, theirs  # no folders to remove: a prefix is gone with its last object
    for folder in folders():
        if (Path(out) / folder).is_symlink():
            continue
        for _, kind, path in sorted(walk_out(Path(out) / folder), reverse=True):
            if kind == "dir":
                try:
                    path.rmdir()
                except OSError:
                    pass  # not empty
        try:
            (Path(out) / folder).rmdir()
        except OSError:
            pass
    return removed, theirs


def remove_temporaries(out: AnyPath) -> list[AnyPath]:
    """The temporaries of killed runs in tokenmill's folders and top level
    of OUT (never in a folder of someone else's under OUT)."""
    out = location(out)
    if is_remote(out):
        own = folders()
        return writers.remove_temporaries(
            out, where=lambda name: "/" not in name or name.split("/", 1)[0] in own
        )
    removed: list[AnyPath] = []
    for name in sorted(os.listdir(out)):
        if is_temporary(name) and not (out / name).is_dir():
            (out / name).unlink(missing_ok=True)
            removed.append(out / name)
    for folder in folders():
        if (out / folder).is_dir() and not (out / folder).is_symlink():
            removed.extend(writers.remove_temporaries(out / folder))
    return removed


def all_names(paths: Sequence[AnyPath], out: AnyPath) -> str:
    """Each of `paths` by name, for a line of its own (up to 20, then how many more)."""
    more = f", and {len(paths) - 20} more" if len(paths) > 20 else ""
    return ", ".join(relative_name(p, out) for p in paths[:20]) + more


def temporaries_line(removed: Sequence[AnyPath], out: AnyPath) -> str:
    """The line naming the temporaries a command removed from its folder:
    under its lock each is a killed run's, or a file of yours so named, which
    no manifest lists."""
    many = len(removed) > 1
    return (
        f"removed {len(removed)} temporary file{'s' if many else ''} from {out} by "
        f"{'their names' if many else 'its name'} alone (a killed run's, or yours named "
        "as tokenmill names its temporaries, .NAME.tmp-*): " + all_names(removed, out)
    )
