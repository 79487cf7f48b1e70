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
"""

from __future__ import annotations

import errno
import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pipeline.errors import TokenmillError
from pipeline.io.readers import KNOWN_INPUTS, shard_format

NAME_MAX = 255  # bytes in one path component on every filesystem we write to
DATASETS_METADATA = "datasets metadata"


@dataclass(frozen=True)
class Shard:
    path: Path  # where to read it
    name: str  # its path relative to DATA, POSIX style: its identity in every output


@dataclass
class Inputs:
    root: Path
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


def _same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _inside(path: Path, folder: Path) -> bool:
    p, f = os.path.realpath(path), os.path.realpath(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


def check_overlap(data: Path, out: Path, out_option: str = "OUT") -> None:
    """DATA inside or equal to OUT is refused (a run would rewrite its own
    inputs); OUT inside DATA is fine: find_inputs leaves it out."""
    if _inside(data, out):
        raise TokenmillError(
            f"{data}: DATA is {'' if _same(data, out) else 'inside '}{out_option} {out}; "
            f"give {out_option} a folder of its own"
        )


def datasets_folder(folder: Path) -> list[str] | None:
    """The data files of a folder written by `datasets.Dataset.save_to_disk`, in
    the order its state.json lists them; None if `folder` is no such folder."""
    state = folder / "state.json"
    if not (state.is_file() and (folder / "dataset_info.json").is_file()):
        return None
    try:
        files = [f["filename"] for f in json.loads(state.read_bytes())["_data_files"]]
    except (OSError, ValueError, LookupError, TypeError) as e:
        raise TokenmillError(f"{state}: not a state.json of datasets ({e!r})") from None
    for name in files:
        # Only a file of the folder itself: a name is never a way out of it.
        if not isinstance(name, str) or name != Path(name).name or name.startswith("."):
            raise TokenmillError(f"{state}: {name!r} is not a file name of the folder")
        if not (folder / name).is_file():
            raise TokenmillError(f"{folder / name}: listed in {state} but missing")
    if len(set(files)) < len(files):
        raise TokenmillError(f"{state}: lists a data file twice")
    return files


def is_dataset_dict(path: Path) -> bool:
    """Whether `path` is the dataset_dict.json of `datasets.DatasetDict.save_to_disk`."""
    if path.name != "dataset_dict.json":
        return False
    try:
        return isinstance(json.loads(path.read_bytes()).get("splits"), list)
    except (OSError, ValueError, AttributeError):
        return False


def find_inputs(data: Path, glob: str = "**/*", exclude: tuple[Path, ...] = ()) -> Inputs:
    """The input shards under `data` (or `data` itself), sorted by name (a
    dataset's files in its own order), and every other file under it with the
    reason it is not read. Folders in `exclude` (the output folder) are left out."""
    data = Path(data)
    if data.is_file():
        if shard_format(data) is None:
            raise TokenmillError(f"{data}: not a known input format ({KNOWN_INPUTS})")
        return Inputs(data, [Shard(data, data.name)])
    if not data.is_dir():
        raise TokenmillError(f"{data}: no such file or directory")
    excluded = {os.path.realpath(e) for e in exclude}
    inputs = Inputs(data, [])
    sort_key: dict[str, str] = {}  # a shard's name, unless it is a dataset's file

    def skip(name: str, reason: str) -> None:
        inputs.not_read.append({"path": name, "reason": reason})

    def walk(folder: Path, prefix: str, ancestors: frozenset[str]) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as e:
            skip(prefix or ".", f"cannot list folder ({e.strerror})")
            return
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
            except OSError:
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
            elif data_files is not None and entry.name not in data_files:
                metadata = entry.name in ("state.json", "dataset_info.json")
                skip(name, DATASETS_METADATA if metadata else "not in the dataset's state.json")
            elif is_dataset_dict(path):
                skip(name, DATASETS_METADATA)
            elif shard_format(path) is None:
                skip(name, "unknown suffix")
            elif not matches_glob(name, glob):
                skip(name, f"not matching --glob {glob!r}")
            else:
                inputs.shards.append(Shard(path, name))
        if data_files is not None:
            # The dataset's files take the places their sorted names would, in
            # the order state.json gives them.
            read = {s.name for s in inputs.shards}
            ordered = [prefix + f for f in data_files if prefix + f in read]
            sort_key.update(zip(ordered, sorted(ordered), strict=True))

    walk(data, "", frozenset({os.path.realpath(data)}))
    if not inputs.shards:
        detail = f"; {inputs.not_read_line()}" if inputs.not_read else ""
        raise TokenmillError(f"{data}: no input shards matching {glob!r} ({KNOWN_INPUTS}){detail}")
    inputs.shards.sort(key=lambda s: sort_key.get(s.name, s.name))
    check_output_names(inputs)
    return inputs


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


def check_output_names(inputs: Inputs) -> None:
    """Refuse inputs whose outputs would collide (`a.jsonl` beside a Parquet
    `a.jsonl.parquet`; a file `x.txt.parquet` beside a folder of that name) or
    whose output names are too long for the filesystem."""
    seen: dict[str, str] = {}
    for shard in inputs.shards:
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
