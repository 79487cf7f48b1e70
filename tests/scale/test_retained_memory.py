"""tokenmill's own processes hand back memory freed at the top of glibc's
heap (tokenmill.memory.bound_retained_memory). By default glibc keeps up to
twice the largest block it has unmapped there: in `tokenmill run` that was
tens of MB left from count and train under encode's peak (pool.rs)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest
from click.testing import CliRunner

import tokenmill.memory
from tokenmill.cli import main

MB = 1 << 20

# A 30 MB block mapped and unmapped, which raises glibc's default trim
# threshold to 60 MB; then 48 MB in 1 MB blocks, all freed. Prints how many
# bytes of resident memory the frees gave back.
FREE_AFTER_A_BIG_BLOCK = r"""
import ctypes, sys

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "bound":
    from tokenmill.memory import bound_retained_memory

    bound_retained_memory()


def resident():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024


big = libc.malloc(30 << 20)
ctypes.memset(big, 1, 30 << 20)
libc.free(big)
blocks = [libc.malloc(1 << 20) for _ in range(48)]
for b in blocks:
    ctypes.memset(b, 1, 1 << 20)
before = resident()
for b in reversed(blocks):
    libc.free(b)
print(before - resident())
"""


def returned(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", FREE_AFTER_A_BIG_BLOCK, mode],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's tunables")
def test_freed_memory_goes_back_only_when_bounded():
    # glibc's default keeps the 48 MB; bounded, all but 16 MB at most go back.
    assert returned("default") < 8 * MB
    assert returned("bound") > 30 * MB


def test_the_cli_bounds_its_process(monkeypatch):
    calls = []
    monkeypatch.setattr(tokenmill.memory, "bound_retained_memory", lambda: calls.append(1))
    # The group's callback runs before the subcommand reads its arguments.
    result = CliRunner().invoke(main, ["count"])
    assert result.exit_code == 2, result.output
    assert calls == [1]
