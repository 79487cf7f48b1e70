"""A small tmpfs mounted for one test, to fill a disk (CI runs as root)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


def root_only():
    return pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


class Tmpfs:
    """A tmpfs of `size_kb` at `path`, unmounted by close() or at the end of a with block."""

    def __init__(self, path: Path, size_kb: int):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", path], check=True
        )

    def resize(self, size_kb: int, readonly: bool = False) -> None:
        opts = f"remount,size={size_kb}k" + (",ro" if readonly else ",rw")
        subprocess.run(["mount", "-o", opts, self.path], check=True)

    def close(self) -> None:
        subprocess.run(["umount", self.path], check=True)

    def __enter__(self) -> Tmpfs:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
