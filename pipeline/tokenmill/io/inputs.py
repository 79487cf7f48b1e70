"""Which files under DATA are inputs, and why each other file is not.

Every file under DATA is accounted for: it is an input shard, or it is listed
in `Inputs.not_read` with its reason (hidden, unknown suffix, not matching
--glob, a dangling link, a symlink loop, the output folder, the metadata of
a Hugging Face `datasets` folder). Nothing is dropped without a word.

A folder written by `datasets`' `save_to_disk` (a `state.json` beside a
`dataset_info.json`) is read as the dataset: the `.arrow` files its
state.json lists, in that order, which is the dataset's row order; its JSON
files are metadata, never documents. A `DatasetDict` is a folder of such
folders (one per split, read in path order like any folders) and a
`dataset_dict.json`.

Symlink policy: a link is followed, to a file or a folder, wherever it
points, and read under its own path (its name under DATA is its identity in
the outputs, so two links to one file are two inputs). A link whose target
is missing is listed as a dangling link; a link to a folder that is already
being walked (an ancestor of the link) is listed as a symlink loop. Hidden
files and folders (a name starting with ".") are listed, not read: a folder
once, not file by file.

A name that is not UTF-8 (Latin-1 bytes, which Python holds as lone
surrogates) is listed in `printable` form; an input so named is refused,
since every output is named after its input and recorded in JSON.
"""

from __future__ import annotations

import errno
import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from tokenmill.errors import TokenmillError, one_line
from tokenmill.io.lock import LOCK
from tokenmill.io.readers import KNOWN_INPUTS, shard_format
from tokenmill.io.storage import (
    AnyPath,
    filesystem,
    is_inside,
    is_remote,
    remote_errors,
    same_file_key,
    store_errors,
    walk_files,
)

if TYPE_CHECKING:
    from upath import UPath

NAME_MAX = 255  # bytes in one path component on every filesystem we write to
DATASETS_METADATA = "datasets metadata"


@dataclass(frozen=True)
class Shard:
    path: AnyPath  # where to read it (a UPath for an object of a remote DATA)
    name: str  # its path relative to DATA, POSIX style: its identity in every output


@dataclass
class Inputs:
    root: AnyPath
    shards: list[Shard]
    not_read: list[dict] = field(default_factory=list)  # {"path", "reason"}

    def not_read_line(self) -> str | None:
        """One line: how many files were read, and how many not, by reason; None
        if every file was read."""
        return not_read_line(len(self.shards), self.not_read)


def not_read_line(read: int, not_read: list[dict]) -> str | None:
    if not not_read:
        return None
    reasons: dict[str, int] = {}
    for entry in not_read:
        reasons[entry["reason"]] = reasons.get(entry["reason"], 0) + 1
    parts = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items(), key=lambda x: -x[1]))
    return f"inputs: {read} read, {len(not_read)} not read ({parts})"


def output_name(shard: str) -> str:
    """The path, relative to counts/, tokens/ or packed/, of a shard's output:
    the input's relative path mirrored, with `.parquet` appended unless the
    input is already Parquet (`code/stdlib.parquet`, `web/part-0.jsonl.gz.parquet`)."""
    if shard.lower().endswith(".parquet"):
        return shard[: -len(".parquet")] + ".parquet"
    return shard + ".parquet"


@lru_cache(maxsize=64)
def _glob_regex(pattern: str) -> re.Pattern:
    """A --glob pattern as a regex over POSIX relative paths, with Path.glob's
    meaning: `*`, `?` and `[...]` stay within one folder, `**` spans folders."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) > 0:
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def matches_glob(name: str, pattern: str) -> bool:
    return _glob_regex(pattern).match(name) is not None


def require_input(data: AnyPath) -> None:
    """A command's input exists: checked before its output folder is made and
    locked, so that a mistyped DATA leaves nothing behind."""
    with remote_errors(data):  # no bucket, no credentials, endpoint refusing: one line
        if not data.exists():
            if is_remote(data):
                try:  # exists() is False for any failure of an HTTP store: say which
                    with store_errors(data, action="read"):
                        filesystem(data).info(data.path)
                except FileNotFoundError:
                    pass
            raise TokenmillError(f"{data}: no such file or directory")


def check_overlap(
    data: AnyPath, out: AnyPath, out_option: str = "OUT", data_option: str = "DATA"
) -> None:
    """DATA inside or equal to OUT is refused (a run would rewrite its own
    inputs); OUT inside DATA is fine: find_inputs leaves it out. A URL and a
    local path are different filesystems: never one inside the other. The
    options: the command's own names of its input and output."""
    if is_inside(data, out):
        same = is_inside(out, data)
        raise TokenmillError(
            f"{data}: {data_option} is {'' if same else 'inside '}{out_option} {out}; "
            f"give {out_option} a folder of its own"
        )


def datasets_folder(folder: AnyPath, known: set[str] | None = None) -> list[str] | None:
    """The data files of a folder written by `datasets.Dataset.save_to_disk`, in
    the order its state.json lists them; None if `folder` is no such folder.
    `known`: the names of the folder's files when already known (a remote
    listing), so that no object is asked for but state.json."""

    def is_file(name: str) -> bool:
        return name in known if known is not None else (folder / name).is_file()

    state = folder / "state.json"
    if not (is_file("state.json") and is_file("dataset_info.json")):
        return None
    try:
        files = [f["filename"] for f in json.loads(state.read_bytes())["_data_files"]]
    except (OSError, ValueError, LookupError, TypeError) as e:
        raise TokenmillError(f"{state}: not a state.json of datasets ({e!r})") from None
    for name in files:
        # Only a file of the folder itself: a name is never a way out of it.
        if not isinstance(name, str) or name != Path(name).name or name.startswith("."):
            raise TokenmillError(f"{state}: {name!r} is not a file name of the folder")
        if not is_file(name):
            raise TokenmillError(f"{folder / name}: listed in {state} but missing")
    if len(set(files)) < len(files):
        raise TokenmillError(f"{state}: lists a data file twice")
    return files


def is_dataset_dict(path: AnyPath) -> bool:
    """Whether `path` is the dataset_dict.json of `datasets.DatasetDict.save_to_disk`."""
    if path.name != "dataset_dict.json":
        return False
    try:
        return isinstance(json.loads(path.read_bytes()).get("splits"), list)
    except (OSError, ValueError, AttributeError):
        return False


def find_inputs(data: AnyPath, glob: str = "**/*", exclude: tuple[AnyPath, ...] = ()) -> Inputs:
    """The input shards under `data` (or `data` itself), sorted by name (a
    dataset's files in its own order), and every other file under it with the
    reason it is not read. Folders in `exclude` (the output folder) are left out."""
    if is_remote(data):
        with remote_errors(data):
            return _find_remote_inputs(data, glob, exclude)
    data = Path(data)
    if printable(real := os.path.realpath(data)) != real:
        raise TokenmillError(
            f"{printable(real)}: DATA's path is not UTF-8, and the manifest records it; rename it"
        )
    if data.is_file():
        if shard_format(data) is None:
            raise TokenmillError(f"{data}: not a known input format ({KNOWN_INPUTS})")
        return _checked(Inputs(data, [Shard(data, data.name)]))
    if not data.is_dir():
        why = "not a regular file or folder" if data.exists() else "no such file or directory"
        raise TokenmillError(f"{data}: {why}")
    # A remote output folder is never inside a local DATA.
    excluded = {os.path.realpath(e) for e in exclude if not is_remote(e)}
    inputs = Inputs(data, [])
    sort_key: dict[str, str] = {}  # a shard's name, unless it is a dataset's file

    def skip(name: str, reason: str) -> None:
        inputs.not_read.append({"path": printable(name), "reason": reason})

    def walk(folder: Path, prefix: str, ancestors: frozenset[str]) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as e:
            # Its files cannot be accounted for, so none of them can be said to be
            # read or not: the run stops, as for an input file it cannot read.
            raise TokenmillError(
                f"{printable(str(folder))}: cannot list folder ({e.strerror or one_line(e)})"
            ) from None
        data_files = datasets_folder(folder)
        for entry in entries:
            name = prefix + entry.name
            path = Path(entry.path)
            if entry.name.startswith("."):
                skip(name + ("/" if entry.is_dir() else ""), "hidden")
                continue
            try:
                is_dir = entry.is_dir()  # follows links
                is_file = entry.is_file()
            except OSError as e:
                if e.errno != errno.ELOOP:
                    # A folder behind a link it may not follow, or an entry only a
                    # refused stat could tell: as a folder it cannot list, its files
                    # could be neither read nor listed as not read.
                    raise TokenmillError(
                        f"{printable(str(path))}: cannot read ({e.strerror or one_line(e)})"
                    ) from None
                is_dir = is_file = False
            if entry.is_symlink() and not (is_dir or is_file):
                skip(name, _broken_link(path))
                continue
            if is_dir:
                real = os.path.realpath(path)
                if real in excluded:
                    skip(name + "/", "the output folder")
                elif real in ancestors:
                    skip(name, "symlink loop")
                else:
                    walk(path, name + "/", ancestors | {real})
            elif not is_file:
                skip(name, "not a regular file")
            elif (reason := _not_input(name, path, data_files, glob)) is not None:
                skip(name, reason)
            else:
                inputs.shards.append(Shard(path, name))
        if data_files is not None:
            _dataset_order(inputs, prefix, data_files, sort_key)

    walk(data, "", frozenset({os.path.realpath(data)}))
    return _finish(inputs, glob, sort_key)


def _not_input(name: str, path: AnyPath, data_files: list[str] | None, glob: str) -> str | None:
    """Why the file `name` (relative to DATA) of a folder whose dataset files are
    `data_files` (None: no datasets folder) is not an input; None if it is one."""
    base = name.rsplit("/", 1)[-1]
    if data_files is not None and base not in data_files:
        metadata = base in ("state.json", "dataset_info.json")
        return DATASETS_METADATA if metadata else "not in the dataset's state.json"
    if is_dataset_dict(path):
        return DATASETS_METADATA
    if shard_format(path) is None:
        return "unknown suffix"
    if not matches_glob(name, glob):
        return f"not matching --glob {glob!r}"
    return None


def _dataset_order(inputs: Inputs, prefix: str, data_files: list[str], sort_key: dict) -> None:
    """The dataset's files take the places their sorted names would, in the
    order state.json gives them."""
    read = {s.name for s in inputs.shards}
    ordered = [prefix + f for f in data_files if prefix + f in read]
    sort_key.update(zip(ordered, sorted(ordered), strict=True))


def _finish(inputs: Inputs, glob: str, sort_key: dict[str, str]) -> Inputs:
    if not inputs.shards:
        detail = f"; {inputs.not_read_line()}" if inputs.not_read else ""
        raise TokenmillError(
            f"{inputs.root}: no input shards matching {glob!r} ({KNOWN_INPUTS}){detail}"
        )
    inputs.shards.sort(key=lambda s: sort_key.get(s.name, s.name))
    return _checked(inputs)


def _checked(inputs: Inputs) -> Inputs:
    check_output_names(inputs)
    check_no_output_inside(inputs)
    return inputs


def check_no_output_inside(inputs: Inputs) -> None:
    """Refuse inputs inside a folder under DATA that holds tokenmill's lock
    file (another run's OUT, kept beside the data): its count tables and token
    shards would be read as text, and its JSON files as JSON Lines."""
    outs = [e["path"][: -len(LOCK)] for e in inputs.not_read if e["path"].split("/")[-1] == LOCK]
    for folder in outs:
        inside = next((s.name for s in inputs.shards if s.name.startswith(folder)), None)
        if inside is None:
            continue
        if not folder:
            raise TokenmillError(
                f"{inputs.root}: DATA is a tokenmill output folder (it holds {LOCK}); give "
                "the data it was made from"
            )
        raise TokenmillError(
            f"{inputs.root}/{folder.rstrip('/')}: a tokenmill output folder inside DATA (it "
            f"holds {LOCK}; {inside} would be read as an input); move it out of DATA, or "
            "leave it out with --glob"
        )


def _find_remote_inputs(data: UPath, glob: str, exclude: tuple[AnyPath, ...]) -> Inputs:
    """find_inputs for a URL: one listing of every object under it, judged as
    the local walk judges files, in the same order (a folder's entries by name,
    depth first), with the same not_read entries."""
    kind = filesystem(data).info(data.path).get("type")
    if kind == "file":
        if shard_format(data) is None:
            raise TokenmillError(f"{data}: not a known input format ({KNOWN_INPUTS})")
        return _checked(Inputs(data, [Shard(data, data.name)]))
    excluded = {same_file_key(e) for e in exclude if is_remote(e)}
    inputs = Inputs(data, [])
    sort_key: dict[str, str] = {}
    # Sorting by components is the local walk's order: a folder `a`'s files
    # come before a file `a.b`, though "/" sorts after ".".
    files = sorted(walk_files(data), key=lambda f: f[0].split("/"))
    in_folder: dict[str, set[str]] = {}
    for name, _ in files:
        folder, _, base = name.rpartition("/")
        in_folder.setdefault(folder, set()).add(base)
    datasets: dict[str, list[str] | None] = {}
    reported: set[str] = set()  # hidden and output folders, listed once
    for name, path in files:
        parts = name.split("/")
        left_out = None
        for depth in range(len(parts) - 1):
            folder = "/".join(parts[: depth + 1])
            if parts[depth].startswith("."):
                left_out = (folder + "/", "hidden")
            elif same_file_key(data / folder) in excluded:
                left_out = (folder + "/", "the output folder")
            if left_out:
                break
        if left_out:
            if left_out[0] not in reported:
                reported.add(left_out[0])
                inputs.not_read.append({"path": left_out[0], "reason": left_out[1]})
            continue
        if parts[-1].startswith("."):
            inputs.not_read.append({"path": name, "reason": "hidden"})
            continue
        prefix = name[: len(name) - len(parts[-1])]
        folder = prefix.rstrip("/")
        if folder not in datasets:
            where = data / folder if folder else data
            datasets[folder] = datasets_folder(where, in_folder[folder])
        reason = _not_input(name, path, datasets[folder], glob)
        if reason is None:
            inputs.shards.append(Shard(path, name))
        else:
            inputs.not_read.append({"path": name, "reason": reason})
    for folder, data_files in datasets.items():
        if data_files is not None:
            _dataset_order(inputs, folder + "/" if folder else "", data_files, sort_key)
    return _finish(inputs, glob, sort_key)


def _broken_link(path: Path) -> str:
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "symlink loop"
        if e.errno == errno.ENOENT:
            return "dangling link"
        return f"unreadable link ({e.strerror})"
    return "not a regular file"


def printable(name: str) -> str:
    """A file name as it can be shown and written to JSON: the bytes of a local
    name that are not UTF-8 (lone surrogates, as os.fsdecode holds them) as
    \\xNN escapes; any other name as it is."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def check_output_names(inputs: Inputs) -> None:
    """Refuse inputs whose outputs would collide (`a.jsonl` beside a Parquet
    `a.jsonl.parquet`; a file `x.txt.parquet` beside a folder of that name) or
    whose output names are too long for the filesystem."""
    seen: dict[str, str] = {}
    for shard in inputs.shards:
        if printable(shard.name) != shard.name:
            raise TokenmillError(
                f"{printable(str(shard.path))}: file name is not UTF-8, and its outputs are "
                "named after it; rename it"
            )
        out = output_name(shard.name)
        for part in out.split("/"):
            if len(part.encode()) > NAME_MAX - 40:  # room for the temporary's suffix
                raise TokenmillError(
                    f"{shard.path}: file name too long for its output ({len(part.encode())} "
                    f"bytes; at most {NAME_MAX - 40}); rename it"
                )
        if out in seen:
            raise TokenmillError(
                f"{inputs.root}: inputs {seen[out]!r} and {shard.name!r} would both write "
                f"{out!r}; rename one"
            )
        seen[out] = shard.name
    folders = {out.rsplit("/", 1)[0] for out in seen if "/" in out}
    for folder in folders:
        parts = folder.split("/")
        for k in range(1, len(parts) + 1):
            clash = "/".join(parts[:k])
            if clash in seen:
                raise TokenmillError(
                    f"{inputs.root}: the output {clash!r} of input {seen[clash]!r} is also a "
                    f"folder of outputs; rename that input"
                )
