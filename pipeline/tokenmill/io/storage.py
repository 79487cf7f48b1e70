"""Where DATA and OUT live: a local path, or the URL of any filesystem fsspec
knows (`s3://bucket/prefix` with `pip install 'tokenmill[cloud]'`; gs://,
az://, hf:// with their fsspec packages).

A local path stays a `pathlib.Path`, so local runs take exactly the code
paths they always did. A URL becomes a `upath.UPath`, which has the same API
(`/`, `.name`, `.parent`, `.open()`, `.exists()`...) over fsspec; the few
things a Path does through the operating system (renaming, walking a tree,
handing a file name to PyArrow) go through the helpers here instead.

Endpoint and credentials come from where the filesystem's own library looks
(for S3, botocore: AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, AWS_PROFILE, ~/.aws), never from
tokenmill options, so a Ray worker node finds them the same way.

Object stores have no rename. An output is written to a local temporary
file and then uploaded under its final key in one PUT (a multipart upload
for large files), which S3 makes visible only once complete: an object is
there whole or not at all, and a killed upload leaves no object (see
`upload`).

Under a remote folder whose lock this process holds (io/lock.py), every
upload, removal, listing and read made here first passes the lock's fence
(`fence`), so that a run that stalled past its lease touches nothing there.
The run's worker processes and Ray tasks pass the same fence, carried to
them (`carrying`), and under a local folder too their writes stop once the
driver holding its lock is gone.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Protocol, Union

from tokenmill.errors import NoSuchPath, StoreError, TokenmillError, WriteError, one_line
from tokenmill.io.stores import bounded, storage_options

if TYPE_CHECKING:
    import pyarrow.parquet as pq
    from fsspec import AbstractFileSystem
    from typing_extensions import TypeIs
    from upath import UPath

# A local path or a URL's UPath: what DATA, OUT and every file under them are.
AnyPath = Union[Path, "UPath"]  # noqa: UP007 (UPath is only a name until imported)

LOCAL_PROTOCOLS = ("", "file", "local")
# fsspec's read-ahead per open remote file: one request brings this much.
REMOTE_BLOCK_BYTES = 8 << 20


def check_path_argument(value: object, method: str) -> None:
    """The library's `path=` of `method`: a str or a path object. The
    operating system's errors name neither the method nor the argument, and
    "" would be the current folder."""
    # A remote UPath is no os.PathLike; nor can it be one unless upath was imported.
    upath = sys.modules.get("upath")
    remote = upath is not None and isinstance(value, upath.UPath)
    if not (remote or isinstance(value, str | os.PathLike)):
        raise TypeError(f"{method}: path= is {type(value).__name__}, not a path or URL")
    if value == "":
        raise TokenmillError(f"{method}: path= is empty, not a path or URL")


def location(value: str | os.PathLike | AnyPath) -> AnyPath:
    """DATA, OUT or any file named on the command line: a Path, or a UPath for a URL."""
    if not isinstance(value, str):
        if is_remote(value):
            return value
        return Path(value)
    protocol, sep, rest = value.partition("://")
    if not sep or protocol in LOCAL_PROTOCOLS:
        return Path(rest if sep else value)
    try:
        from upath import UPath

        path = UPath(value, **storage_options(protocol))
        filesystem(path)  # loads the filesystem's package now, to fail here
    except ImportError as e:
        raise TokenmillError(
            f"{value}: {protocol}:// needs {e.name or 'its fsspec package'} "
            "(pip install 'tokenmill[cloud]' for s3://)"
        ) from None
    except ValueError as e:
        raise TokenmillError(f"{value}: {e}") from None
    if not path.path.strip("/"):
        # A store's root: there is nothing tokenmill may list, read or write.
        raise NoSuchPath(f"{value}: names no bucket")
    return path


def filesystem(path: UPath) -> AbstractFileSystem:
    """`path`'s filesystem, its calls bounded as io/stores.py says. Every
    call tokenmill makes to a store's filesystem takes it from here."""
    return bounded(path.fs)


def is_remote(path: object) -> TypeIs[UPath]:
    """Whether `path` lies on a filesystem other than the local one. To type
    checkers, whether it is a UPath: `location` makes a local one a Path."""
    return getattr(path, "protocol", "") not in LOCAL_PROTOCOLS


class Tap(Protocol):
    """How the reads of one input are seen (io/files.hashed_read): every open of
    it through open_read, in the thread that taps it, is `open`'s file object."""

    def open(self, cache: str) -> IO[bytes]: ...


_tap: ContextVar[tuple[str, Tap] | None] = ContextVar("tokenmill_tap", default=None)


@contextmanager
def tapped(path: AnyPath, tap: Tap) -> Iterator[None]:
    """Send this thread's opens of `path` (open_read; the readers open a tapped
    local file through it too) to `tap` for the block."""
    token = _tap.set((str(path), tap))
    try:
        yield
    finally:
        _tap.reset(token)


def is_tapped(path: AnyPath) -> bool:
    tap = _tap.get()
    return tap is not None and tap[0] == str(path)


def open_read(path: AnyPath, cache: str = "readahead") -> IO[bytes]:
    """A binary file object for reading: local, or remote with read-ahead (so a
    stream is read in large requests). `cache="none"`: every read is one range
    request of exactly its size, for readers that ask for byte ranges themselves
    (Parquet), so that no range is fetched twice and no block is held. A tapped
    path's (`tapped`) is its tap's."""
    tap = _tap.get()
    if tap is not None and tap[0] == str(path):
        return tap[1].open(cache)
    return open_file(path, cache)


def open_file(path: AnyPath, cache: str = "readahead") -> IO[bytes]:
    """open_read's file object, never a tap's."""
    if is_remote(path):
        fence(path, "read")
        with store_errors(path):
            fs = filesystem(path)
            return fs.open(path.path, "rb", block_size=REMOTE_BLOCK_BYTES, cache_type=cache)
    regular_file(path)
    return open(path, "rb")


def regular_file(path: AnyPath) -> None:
    """Refuse a local path that names something other than a regular file
    before it is opened: a FIFO's open waits for a writer for ever, and a
    device (/dev/zero) is read until memory runs out. A missing path or a
    folder is left to the reader, which says what it wanted there."""
    import stat

    if is_remote(path):
        return
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise TokenmillError(f"{path}: not a regular file, where a file is read")


def size(path: AnyPath) -> int:
    with store_errors(path):
        return path.stat().st_size


def identity(path: AnyPath) -> tuple:
    """What changes when a file's content may have: for a local file its
    resolved name, size, mtime and inode; for an object its URL, size and
    ETag (or the filesystem's version of it)."""
    if is_remote(path):
        with store_errors(path):
            info = filesystem(path).info(path.path)
        return (str(path), *_object_identity(info))
    st = Path(path).stat()
    return (str(Path(path).resolve()), st.st_size, st.st_mtime_ns, st.st_ino)


def _object_identity(info: dict) -> tuple:
    tag = info.get("ETag") or info.get("etag") or info.get("md5") or info.get("mtime")
    return info.get("size"), str(tag)


def identities(root: UPath) -> dict[str, tuple]:
    """`identity` of every object under a remote `root`, by its name relative
    to `root`, from one listing (not a request per object)."""
    fs = filesystem(root)
    base = PurePosixPath(root.path)
    fence(root, "listed")
    fs.invalidate_cache(root.path)
    with store_errors(root, action="list"):
        found = fs.find(root.path, withdirs=False, detail=True)
    return {
        PurePosixPath(name).relative_to(base).as_posix(): _object_identity(info)
        for name, info in found.items()
        if not name.endswith("/")
    }


class Fence(Protocol):
    """The lock of a folder, as the I/O under it sees it (io/lock.py)."""

    def confirm(self, path: AnyPath, action: str) -> None:
        """Return once this process may `action` ("written", "read"...) `path`;
        raise a TokenmillError naming `path` if it may not."""

    def fresh(self) -> bool:
        """Whether it may act without confirming first (no I/O)."""


# The folders whose lock this process holds (or, in a worker process or Ray
# task, this run's driver holds), by same_file_key.
_fences: dict[str, Fence] = {}
# A worker's fences, kept from task to task with what they confirmed.
_kept: dict[str, Fence] = {}


@contextmanager
def fenced(folder: AnyPath, lock: Fence) -> Iterator[None]:
    """Make the I/O here under `folder` pass `lock` first, for the block."""
    key = same_file_key(folder)
    _fences[key] = lock
    try:
        yield
    finally:
        _fences.pop(key, None)


def fence_of(path: AnyPath) -> Fence | None:
    """The fence of the held folder that holds `path`, if any."""
    if not _fences:
        return None
    key = same_file_key(path)
    for folder, lock in list(_fences.items()):
        if key == folder or key.startswith(folder + "/"):
            return lock
    return None


def carried_fences() -> list[tuple[str, Fence]]:
    """The fences of the folders this process holds, as the worker processes
    and Ray tasks it starts are to pass them (each lock's `carried`): only
    the driver holds a lock, and a worker's writes must stop when it does."""
    found = [(key, getattr(lock, "carried", None)) for key, lock in list(_fences.items())]
    return [(key, carry()) for key, carry in found if carry is not None]


@contextmanager
def carrying(fences: list[tuple[str, Fence]]) -> Iterator[None]:
    """In a worker process or Ray task: make the I/O here under the driver's
    held folders pass their fences (`carried_fences`) for the block."""
    for key, lock in fences:
        if _kept.get(key) != lock:  # a new run's, or the first task's
            _kept[key] = lock
        _fences[key] = _kept[key]
    try:
        yield
    finally:
        for key, _ in fences:
            _fences.pop(key, None)


def fence(path: AnyPath, action: str) -> None:
    """Before `path` is `action` ("written", "removed", "listed", "read"): pass
    the fence of the held folder holding it, if any."""
    if (lock := fence_of(path)) is not None:
        lock.confirm(path, action)


class _Unconfirmed(Exception):
    """An upload's parts were sent while its folder's lock went unconfirmed."""


UPLOAD_TRIES = 3


def upload(local: Path, dest: UPath) -> None:
    """Put the local file `local` at `dest` (remote) in one visible step, once
    the fence of its folder lets it. A large upload checks the fence again
    after its last part, before the step that makes it visible: if the lock
    went unconfirmed meanwhile, it is confirmed and the file sent again."""
    from fsspec.callbacks import Callback

    lock = fence_of(dest)
    if lock is None:
        filesystem(dest).put_file(str(local), dest.path)
        return

    parts: list[int] = []

    def last_part(size: int | None, value: int, **_) -> None:
        # s3fs reports each part sent; a single PUT reports once, when already
        # visible, so only an upload in parts is checked. On the store
        # client's thread no request can be made: only the check without I/O.
        if size is None or value < size:
            parts.append(value)
        elif any(parts) and not lock.fresh():
            raise _Unconfirmed

    for _ in range(UPLOAD_TRIES):
        lock.confirm(dest, "written")
        parts.clear()
        try:
            filesystem(dest).put_file(
                str(local), dest.path, callback=Callback(hooks={"fence": last_part})
            )
            return
        except _Unconfirmed:
            continue  # s3fs aborted the upload in parts: nothing of it is visible
    raise WriteError(
        f"{dest}: not written: the lock of its folder went unconfirmed during each of "
        f"{UPLOAD_TRIES} uploads; stopping"
    )


def forget_listings() -> None:
    """Drop what this process's remote filesystems cached of listings and
    objects' details: other processes (worker processes, Ray tasks) wrote
    there since, and a listing kept from before hides their outputs from the
    stages after (or names an object's ETag it no longer has)."""
    fsspec = sys.modules.get("fsspec")
    if fsspec is None:
        return  # nothing remote was opened
    classes = [fsspec.AbstractFileSystem]
    while classes:
        cls = classes.pop()
        classes.extend(cls.__subclasses__())
        for fs in list(vars(cls).get("_cache", {}).values()):
            fs.invalidate_cache()


SCRATCH = "tokenmill-scratch"
TMP_MARK = ".tmp-"  # before the pid in a temporary's name


def scratch_folder() -> Path:
    """Where outputs for remote destinations are written before their upload:
    a folder of the local temporary directory (TMPDIR)."""
    import tempfile  # only remote outputs need it: not at the top, for local start-up

    folder = Path(tempfile.gettempdir()) / SCRATCH
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def scratch_file(dest: AnyPath) -> Path:
    """A new local temporary file to write an output for remote `dest` into.
    Its name holds this process's pid, so that one a killed run left behind
    can be told from one a live run is writing (`remove_dead_scratch`)."""
    import tempfile

    fd, name = tempfile.mkstemp(
        prefix=f".{dest.name[:100]}{TMP_MARK}{os.getpid()}-", dir=scratch_folder()
    )
    os.close(fd)
    return Path(name)


def remove_dead_scratch() -> list[Path]:
    """Remove the scratch files of this machine's processes that are gone
    (killed runs: a run that ends removes its own)."""
    removed: list[Path] = []
    try:
        names = os.listdir(scratch_folder())
    except OSError:
        return removed
    for name in names:
        pid = temporary_pid(name)
        if pid is None or process_runs(pid):
            continue
        try:
            (scratch_folder() / name).unlink()
            removed.append(scratch_folder() / name)
        except OSError:
            pass
    return removed


def temporary_pid(name: str) -> int | None:
    """The pid after the last `.tmp-` of a temporary's name (`.NAME.tmp-PID-...`,
    as atomic_path and scratch_file name them); None when it holds none that a
    process could have. ASCII digits only: `int` reads any script's digits, and
    str.isdigit passes `²`, which `int` refuses; at most 10, since `int` refuses
    thousands and os.kill overflows past a C int."""
    head, mark, tail = name.rpartition(TMP_MARK)
    digits = tail.partition("-")[0]
    if not (mark and digits.isascii() and digits.isdigit()) or len(digits) > 10:
        return None
    pid = int(digits)
    return pid if 0 < pid < 2**31 else None


def process_runs(pid: int) -> bool:
    """Whether process `pid` of this machine still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's: running
    return True


def abort_uploads(root: UPath) -> int:
    """Abort the unfinished multipart uploads under remote `root` (S3): a run
    killed mid-upload leaves one, invisible but stored (and billed) until
    aborted. Returns how many; 0 on other filesystems."""
    fs = filesystem(root)
    if not hasattr(fs, "call_s3"):
        return 0
    fence(root, "cleaned of unfinished uploads")
    bucket, key, _ = fs.split_path(root.path)
    prefix = key.rstrip("/") + "/" if key else ""
    with store_errors(root, action="list unfinished uploads"):
        found = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix)
    uploads = [u for u in found.get("Uploads", []) if u["Key"].startswith(prefix)]
    for u in uploads:
        with store_errors(root / u["Key"].removeprefix(prefix), action="abort its upload"):
            fs.call_s3(
                "abort_multipart_upload", Bucket=bucket, Key=u["Key"], UploadId=u["UploadId"]
            )
    return len(uploads)


def is_object(path: UPath) -> bool:
    """Whether the store holds an object at `path`'s own key, asked of the store
    itself: a cached listing of the prefix below it (check_out_folder's walk)
    makes fsspec answer "folder" for a key that is both."""
    fs = filesystem(path)
    fs.invalidate_cache(path.path)
    return fs.isfile(path.path)


def listed(folder: AnyPath, suffix: str) -> list[str]:
    """The files under `folder` whose names end in `suffix`, relative to it and
    sorted; none hidden (temporaries are)."""
    if is_remote(folder):
        names = [name for name, _ in walk_files(folder)]
    else:
        names = [p.relative_to(folder).as_posix() for p in folder.rglob(f"*{suffix}")]
    return sorted(
        n for n in names if n.endswith(suffix) and not any(p.startswith(".") for p in n.split("/"))
    )


def walk_files(root: UPath) -> Iterator[tuple[str, AnyPath]]:
    """(path relative to `root` with '/', path) of every file under a remote
    `root`, in sorted order. Object stores have no links and no empty folders."""
    fs = filesystem(root)
    base = PurePosixPath(root.path)
    fence(root, "listed")
    with store_errors(root, action="list"):
        found = fs.find(root.path, withdirs=False, detail=False)
    for name in sorted(found):
        if name.endswith("/"):  # a folder marker object (S3 consoles make them), not a file
            continue
        relative = PurePosixPath(name).relative_to(base).as_posix()
        if relative != name.removeprefix(f"{base}/"):
            # A key with an empty, "." or ".." part (x//a.txt): a path names
            # another key, so reading by it would fail, or read that one.
            raise TokenmillError(
                f"{root.protocol}://{name}: a key with an empty, '.' or '..' part, "
                "which tokenmill cannot read by its name; copy it to a key without one"
            )
        yield relative, root / relative


# The libraries under fsspec filesystems whose errors mean "the store said no"
# (no bucket, no credentials, endpoint refusing), not a bug of ours.
_STORE_LIBRARIES = ("botocore", "aiobotocore", "aiohttp", "s3fs", "fsspec", "gcsfs", "adlfs")


def is_store_error(e: BaseException) -> bool:
    """Whether `e` is a failure of the filesystem or the object store behind it."""
    if isinstance(e, OSError):
        return True
    return type(e).__module__.partition(".")[0] in _STORE_LIBRARIES


def raised_by_store(e: BaseException) -> bool:
    """Whether `e` comes from a store library, or stands for one's error (s3fs
    raises an OSError with the botocore error as its cause)."""
    seen: BaseException | None = e
    for _ in range(16):  # a chain is short; a cycle must not hang
        if seen is None:
            return False
        if type(seen).__module__.partition(".")[0] in _STORE_LIBRARIES:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


# What the store_errors of this thread say tokenmill was doing, unless told.
_doing: ContextVar[str] = ContextVar("tokenmill_doing", default="read")


@contextmanager
def doing(action: str) -> Iterator[None]:
    """Make the store_errors of this thread say `action` for the block: a read
    that is part of a write ("read back its upload") says so."""
    token = _doing.set(action)
    try:
        yield
    finally:
        _doing.reset(token)


def unreachable(path: AnyPath, e: OSError) -> BaseException | None:
    """The error behind a FileNotFoundError of fsspec's HTTP store, which
    raises one for any URL it could not fetch (a connection refused, a 403,
    a 500); None where the file is missing (a 404) or the store is another."""
    cause = e.__cause__
    if (
        not isinstance(e, FileNotFoundError)
        or not is_remote(path)
        or path.protocol not in ("http", "https")
        or cause is None
        or isinstance(cause, FileNotFoundError)
        or getattr(cause, "status", None) == 404
    ):
        return None
    return cause


@contextmanager
def store_errors(
    path: AnyPath, by_pyarrow: bool = False, action: str | None = None
) -> Iterator[None]:
    """Turn what the object store holding `path` raises while it is read (a
    connection refused or dropped, credentials gone, an object gone) into a
    StoreError naming it: an input's reader, fingerprint or size each meet it
    first. Left as they are: a local path's errors; FileNotFoundError, the
    store's answer that callers ask for (is an output there yet?); and OSErrors
    when PyArrow reads (`by_pyarrow`) that no store library raised: PyArrow
    raises them for a corrupt file too (bad compressed data), which is the
    file's fault, not the store's."""
    try:
        yield
    except TokenmillError:
        raise
    except FileNotFoundError as e:
        cause = unreachable(path, e)
        if cause is None:
            raise
        raise StoreError(f"{path}: cannot {action or _doing.get()} ({one_line(cause)})") from e
    except Exception as e:
        if not is_remote(path) or not is_store_error(e):
            raise
        if by_pyarrow and isinstance(e, OSError) and not raised_by_store(e):
            raise
        raise StoreError(f"{path}: cannot {action or _doing.get()} ({one_line(e)})") from e


@contextmanager
def remote_errors(path: AnyPath) -> Iterator[None]:
    """Turn what an object store raises (a missing bucket or prefix, no
    permission, no credentials, an endpoint refusing) into one line naming
    `path`, as a local OSError is."""
    try:
        yield
    except TokenmillError:
        raise
    except FileNotFoundError:
        raise TokenmillError(f"{path}: no such file or directory") from None
    except PermissionError as e:
        raise TokenmillError(f"{path}: permission denied ({one_line(e)})") from None
    except Exception as e:
        if not is_store_error(e):
            raise
        raise TokenmillError(f"{path}: {one_line(e)}") from None


def delete(path: AnyPath) -> None:
    """Remove a file; a missing one is fine."""
    if is_remote(path):
        fence(path, "removed")
        try:
            with store_errors(path, action="remove"):
                filesystem(path).rm_file(path.path)
        except FileNotFoundError:
            pass
    else:
        Path(path).unlink(missing_ok=True)


def resolved(path: AnyPath) -> str:
    """How DATA or OUT is recorded (manifest, lock) and compared: a local path
    absolute with links resolved, a URL as it is. A link to a file keeps its
    own name (its folder resolved): the input is named after it (its suffix
    says the format), and `latest.jsonl` pointed at new data is the same DATA
    with changed content, not another DATA."""
    path = location(path)
    if is_remote(path):
        return str(path)
    if path.is_symlink() and not path.is_dir():
        return str(path.parent.resolve() / path.name)
    return str(path.resolve())


def same_file_key(path: AnyPath) -> str:
    """A key equal for two spellings of one file (without resolving links, as
    os.path.abspath): to tell whether a file found by walking is one listed."""
    if is_remote(path):
        return f"{path.protocol}://{path.path.rstrip('/')}"
    return os.path.abspath(path)


def relative_name(path: AnyPath, root: AnyPath) -> str:
    """`path` relative to `root` (which holds it), with '/'."""
    # `root` holds `path`: both lie on one filesystem.
    if is_remote(path):
        assert is_remote(root)
        return PurePosixPath(path.path).relative_to(PurePosixPath(root.path)).as_posix()
    assert not is_remote(root)
    return Path(path).relative_to(root).as_posix()


def is_inside(path: AnyPath, folder: AnyPath) -> bool:
    """Whether `path` is `folder` or under it (by name; links resolved locally)."""
    if is_remote(path) or is_remote(folder):
        if not (is_remote(path) and is_remote(folder)) or path.protocol != folder.protocol:
            return False
        p, f = path.path.rstrip("/"), folder.path.rstrip("/")
        return p == f or p.startswith(f + "/")
    p, f = os.path.realpath(path), os.path.realpath(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


@contextmanager
def parquet_file(path: AnyPath, **options) -> Iterator[pq.ParquetFile]:
    """A ParquetFile over a local file, or over an object read by byte ranges
    (the footer, then only the column chunks asked for), closed after the block.
    `options` go to pq.ParquetFile (readers.PARQUET_READ: bounded memory)."""
    # Imported here, not at the top: the command line's paths are made with
    # `location` before a command starts, and a command that loads a
    # vocabulary starts that before PyArrow is imported (formats/prefetch.py).
    import pyarrow.parquet as pq

    # A tapped local file is read through its tap's file object, not by name.
    opened = is_remote(path) or is_tapped(path)
    if not opened:
        regular_file(path)
    source = open_read(path, cache="none") if opened else str(path)
    try:
        with store_errors(path, by_pyarrow=True):
            yield pq.ParquetFile(source, **options)
    finally:
        if not isinstance(source, str):
            source.close()
