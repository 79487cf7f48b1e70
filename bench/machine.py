"""What the benchmark ran on: CPU, cores, memory, software versions."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "tokenmill",
    "rustbpe",
    "tiktoken",
    "tokenizers",
    "fastokens",
    "gigatoken",
    "pyarrow",
    "polars",
)


def _first_value(path: str, key: str) -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key:
                return value.strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    return _first_value("/proc/cpuinfo", "model name") or platform.processor() or "unknown"


def ram_gib() -> float:
    kib = _first_value("/proc/meminfo", "MemTotal") or "0 kB"
    return int(kib.split()[0]) / (1 << 20)


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def tokenmill_build() -> dict[str, str]:
    """The git commit and the native library's hash: others may rebuild it mid-run."""
    import tokenmill

    # The library this interpreter imports, which PYTHONPATH may take from elsewhere.
    native = sorted(Path(tokenmill.__file__).parent.glob("_native*.so"))
    digest = hashlib.sha256(native[0].read_bytes()).hexdigest()[:12] if native else "missing"
    try:
        commit = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", ""
    return {"commit": commit + ("+dirty" if dirty else ""), "native_sha256": digest}


def describe() -> dict:
    return {
        "cpu": cpu_model(),
        "cores": usable_cores(),
        "ram_gib": round(ram_gib(), 1),
        "os": f"{platform.system()} {platform.release()}",
        "versions": versions(),
        "tokenmill_build": tokenmill_build(),
    }
