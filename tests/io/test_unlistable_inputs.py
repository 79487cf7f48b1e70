"""A folder under a local DATA that cannot be told apart or listed (a link to
a folder behind one this user may not enter; an entry whose kind only a
refused stat could tell) stops the run in one line naming it, as a file it
cannot read does: its files could be neither read nor listed as not read."""

from __future__ import annotations

import errno
import os

import pytest
from conftest import write_shard
from runs import tokenmill_here

from tokenmill.io import inputs

RUN = ("--vocab-size", "300", "--workers", "1")


class Refused:
    """A directory entry whose kind only a stat could tell, and the stat is refused."""

    def __init__(self, entry: os.DirEntry) -> None:
        self.name, self.path, self._entry = entry.name, entry.path, entry

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        raise PermissionError(errno.EACCES, "Permission denied", self.path)

    is_file = is_dir

    def is_symlink(self) -> bool:
        return self._entry.is_symlink()


@pytest.mark.parametrize("how", ["link", "folder", "chmod"])
def test_a_folder_that_cannot_be_told_or_listed_stops_the_run(tmp_path, monkeypatch, how):
    data = tmp_path / "data"
    write_shard(data / "a.jsonl", ["a document"])
    behind = tmp_path / "behind"
    write_shard(behind / "inside" / "b.jsonl", ["another document"])
    if how == "folder":
        (behind / "inside").rename(data / "locked")
    else:
        (data / "locked").symlink_to(behind / "inside")
    if how == "chmod":
        behind.chmod(0)
        try:
            os.stat(behind / "inside")
        except PermissionError:
            pass
        else:  # root, with its capabilities: the other cases refuse the stat
            behind.chmod(0o755)
            pytest.skip("chmod cannot stop a stat here")
    else:
        scandir = os.scandir

        def refusing(path):
            if os.fspath(path) != os.fspath(data):
                return scandir(path)
            return [Refused(e) if e.name == "locked" else e for e in scandir(path)]

        monkeypatch.setattr(inputs.os, "scandir", refusing)
    try:
        result = tokenmill_here("run", data, tmp_path / "out", *RUN, check=False)
    finally:
        behind.chmod(0o755)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"Error: {data / 'locked'}: cannot read (Permission denied)"
    )
