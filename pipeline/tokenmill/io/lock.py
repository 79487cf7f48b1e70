"""One run per output folder.

A local folder: an exclusive flock on FOLDER/.tokenmill.lock. The lock is the
kernel's, so it goes with the process: a killed run leaves the file but not
the lock, and the next run takes it at once. The file holds who took it last
(pid, host, command, start time, DATA), which names the holder when a second
run is refused and, after a killed first run that wrote no manifest, which
DATA the folder's outputs came from.

A remote folder (a URL): object stores have no locks, so the lock is the
object FOLDER/.tokenmill.lock, holding the same record, and a lease:

- A run creates it with a conditional PUT (S3 `If-None-Match: *`): of two
  runs starting together, exactly one creates it.
- The holder rewrites it every `heartbeat_seconds()` (a daemon thread), each
  time conditional on the ETag it last wrote (`If-Match`), and at the end
  writes it once more marked released (so, as locally, it still says who
  took it last and from which DATA).
- A run that finds the object takes it over, conditional on the ETag it read
  (of two takers one wins), when it is released, when it was not rewritten
  for `stale_seconds()` (TOKENMILL_LOCK_STALE_S, default 300; the age is the
  store's Last-Modified against the Date of its reply, so no clocks need
  agree), or at once when its holder was a process of this machine that is
  gone (a run killed here is resumed without waiting). Otherwise it fails at
  once naming the holder and its last heartbeat.

A holder that stalls (SIGSTOP, a paused VM, swapping) past the stale limit
may have lost the lease without knowing it, and what it writes then lands on
the outputs of the run that took over. So the holder fences its own I/O: it
remembers when the store last *confirmed* its lease (the moment before it
sent its last conditional write that the store accepted), and everything
tokenmill writes, removes, lists or reads under the folder (storage.upload,
delete, walk_files, abort_uploads, open_read and so parquet_file;
files.read_bytes; merge's scan of count tables) first asks
`RemoteLock.confirm`. Confirmed less than `fresh_seconds()` ago (half the
stale limit, less the second that the store's whole-second dates may take
off it), it goes on at once; otherwise it rewrites the lock there and then
(`If-Match`), and if that fails it stops with one line naming the run that
took over (`LockLost`, a WriteError: --on-error skip never skips it). The
time since is the largest by the monotonic, boot and wall clocks, so that a
suspend or a VM pause counts even where one clock misses it.

What this guarantees: a taker needs the store to date our last confirmation
more than the stale limit ago, so an operation that passes the fence has
half the stale limit (150 s by default) before any run can take over. A
request the store receives within that half acts while this run holds the
lease. An upload in parts (S3 multipart: large files) checks again, without
I/O, after its last part and before the request that makes it visible; if
the lease went unconfirmed meanwhile, the upload is dropped, the lease
confirmed, and the file sent again.

What it does not: S3 cannot make a write conditional on another object, so
a stall of more than half the stale limit between the check and the store
receiving the request (or in the middle of sending one PUT's body) can still
land after a takeover. The stale limit makes that rarer, not impossible.
Only the driver holds the lease; its worker processes and Ray tasks pass
the same fence, carried to them (`RunFence`): each reads the lock object,
no more often than the driver confirms it, and acts only while it still
holds the driver's record with a heartbeat the store dates no more than
`fresh_seconds()` ago. State files (stages/state.py) are read
unfenced; what a run decides from one is followed by a fenced read or write
before anything reaches OUT.

Filesystems other than S3 without conditional writes get a best effort: the
object is written, read back, and held only if it still names this run.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import socket
import stat
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tokenmill.environment import LOCK_STALE_S, seconds
from tokenmill.errors import TokenmillError, WriteError, one_line
from tokenmill.io.storage import (
    AnyPath,
    fenced,
    filesystem,
    is_object,
    is_remote,
    is_store_error,
    location,
    resolved,
)

if TYPE_CHECKING:
    from upath import UPath

LOCK = ".tokenmill.lock"
HEARTBEAT_S = 30.0
STALE_S = 300.0
RELEASE_S = 5.0
TAKE_TRIES = 5  # rounds of create-or-take-over lost to other runs before giving up


def stale_seconds() -> float:
    """How long a remote lock may go without a heartbeat before its holder is
    taken for dead (TOKENMILL_LOCK_STALE_S: small in tests)."""
    return seconds(LOCK_STALE_S, STALE_S, zero=True)


def heartbeat_seconds(stale: float | None = None) -> float:
    # Several heartbeats per stale limit: one slow or failed rewrite is no death.
    return max(0.05, min(HEARTBEAT_S, (stale_seconds() if stale is None else stale) / 5))


def last_holder(folder: AnyPath) -> dict:
    """What the lock file says of the run that took it last ({} if nothing)."""
    folder = location(folder)
    try:
        holder = json.loads((folder / LOCK).read_bytes())
    except (OSError, ValueError, RecursionError):
        return {}
    return holder if isinstance(holder, dict) else {}


def holder_record(data: AnyPath | None, writes: str | None = None) -> dict:
    """`writes`: which command's outputs the folder holds ("run", "count", ...):
    another command's are refused there (stages/layout.check_writer)."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": sys.argv,
        "data": resolved(location(data)) if data is not None else None,
        "writes": writes,
    }


def describe_holder(holder: dict) -> str:
    who = f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}"
    if holder.get("started"):
        who += f", started {holder['started']}"
    return who


def writing_now(folder: AnyPath) -> TokenmillError | None:
    """For a command that reads a run's folder and finds it half written (no
    manifest, shards of two tokenizers): the error saying a run is writing
    it now, when the lock file names a process of this host that still runs
    tokenmill; else None. Not asked of the flock itself: a reader taking it,
    however briefly, would refuse a run starting at that moment. Local
    folders only (a lease on a store says nothing of a process here)."""
    folder = location(folder)
    if is_remote(folder):
        return None
    holder = last_holder(folder)
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 0 or holder.get("host") != socket.gethostname():
        return None
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None  # gone, or no /proc to tell: say nothing rather than guess
    if pid == os.getpid() or b"tokenmill" not in command:
        return None
    return TokenmillError(
        f"{folder}: a tokenmill run is writing it now ({describe_holder(holder)}); wait for "
        "it to end"
    )


def in_use(folder: AnyPath, holder: dict, extra: str = "") -> TokenmillError:
    return TokenmillError(
        f"{folder}: in use by another tokenmill run ({describe_holder(holder)}{extra}); "
        "wait for it to end"
    )


@dataclass
class HeldLock:
    fd: int
    folder: Path
    previous: dict  # what the lock file said of the run that took it last
    note: str | None = None  # what the user should know of how the lock was taken

    def record(self, data: AnyPath | None, writes: str) -> None:
        """Name this run in the lock file, once it is sure to write to the folder
        (a refused run leaves the previous holder's record)."""
        record = holder_record(data, writes)
        try:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, (json.dumps(record) + "\n").encode(), 0)
        except OSError as e:
            raise TokenmillError(f"{self.folder / LOCK}: cannot write ({e.strerror})") from None

    def check(self) -> None:
        """Fail if the lock is no longer this run's (a flock cannot be lost)."""

    def confirm(self, path: AnyPath | None = None, action: str = "written") -> None:
        """The fence of a held flock: always passed (it goes only with this process)."""

    def fresh(self) -> bool:
        return True

    def carried(self) -> RunFence:
        """This lock as the run's worker processes and Ray tasks check it."""
        return RunFence(str(self.folder), driver=_this_process())


@contextmanager
def output_lock(folder: AnyPath) -> Iterator[HeldLock | RemoteLock]:
    """Hold FOLDER's lock for the block; refuse at once, naming the holder, if
    another process holds it."""
    folder = location(folder)
    if is_remote(folder):
        with remote_lock(folder) as lock:
            yield lock
        return
    if folder.exists() and not folder.is_dir():
        raise TokenmillError(f"{folder}: exists and is not a folder")
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TokenmillError(f"{folder}: cannot create the output folder ({e.strerror})") from None
    try:
        # Never through a link, nor on a FIFO: the record written here would
        # truncate the link's target, and reading a FIFO blocks.
        fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as e:
        what = "a link, not tokenmill's lock file" if e.errno == errno.ELOOP else e.strerror
        raise TokenmillError(f"{folder / LOCK}: cannot open the lock file ({what})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise TokenmillError(f"{folder / LOCK}: not a regular file; move it away")
    try:
        if not take_flock(fd, folder):
            raise in_use(folder, last_holder(folder))
        _held.add(str(folder))
        try:
            held = HeldLock(fd, folder, last_holder(folder))
            with fenced(folder, held):
                yield held
        except BaseException:
            if created:
                remove_if_bare(folder)
            raise
        finally:
            _held.discard(str(folder))
    finally:
        os.close(fd)  # releases the flock


def remove_if_bare(folder: Path) -> None:
    """Remove FOLDER, which this command made, when it holds nothing but the
    lock file and empty folders: a command that failed before writing
    anything leaves no trace. Called under the flock, so no other run is
    in it; best effort."""
    walked = list(os.walk(folder, topdown=False))
    if [os.path.join(root, f) for root, _, names in walked for f in names] != [str(folder / LOCK)]:
        return
    with suppress(OSError):
        os.unlink(folder / LOCK)
        for root, _, _ in walked:  # bottom up: each is empty once those below are gone
            os.rmdir(root)


# Folders this process holds the flock of now.
_held: set[str] = set()
# How long a lock this process released may still be held by its children.
OWN_RELEASE_S = 2.0


def take_flock(fd: int, folder: Path) -> bool:
    """Take the flock of `fd` (FOLDER's lock file), if no other run holds it.

    A process forked by any thread of this one (a git or worker process
    started by `subprocess`) holds a copy of every descriptor open at that
    moment until it execs: a lock this process has just released may still
    be held so for a moment. When the lock file names this process and it
    holds no lock on the folder, the flock is tried again for a while."""
    deadline = None
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            holder = last_holder(folder)
            ours = holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname()
            if not ours or str(folder) in _held:
                return False
            deadline = deadline or time.monotonic() + OWN_RELEASE_S
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)


# ---- remote folders: a lease on an object (see the module's docstring) ----


class Lost(Exception):
    """A conditional write found the lock object changed by someone else."""


def machine_id() -> str | None:
    """This machine and pid namespace (Linux): where a recorded pid means a
    process that can be looked up here. None elsewhere."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return None


def process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot), or None if there is
    none: with the pid, it names one process even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None  # field 22 of proc(5)


def holder_gone(holder: dict) -> bool:
    """Whether the holder was a process of this machine that no longer runs."""
    machine = machine_id()
    pid = holder.get("pid")
    if machine is None or holder.get("machine") != machine or not isinstance(pid, int):
        return False
    return process_start(pid) != holder.get("process_start")


def precondition_failed(e: BaseException | None) -> bool:
    """Whether a store error is a conditional write that lost (412, or S3's 409
    for two conditional writes at once)."""
    if isinstance(e, FileExistsError):
        return True
    while e is not None:
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (
                409,
                412,
            )
        e = e.__cause__ or e.__context__
    return False


class LockLost(WriteError):
    """This run's lock on a remote folder was taken over by another run (this
    one stalled past the stale limit), or cannot be confirmed: nothing more
    is written, removed or read there."""


def _clocks() -> tuple[float, ...]:
    """Now by every clock that may count a stall: the monotonic clock (never
    set back), the boot clock (counts a suspend, which the monotonic one does
    not: Linux) and the wall clock (set forward after a VM resumes, which may
    count neither)."""
    boot = time.clock_gettime(time.CLOCK_BOOTTIME) if hasattr(time, "CLOCK_BOOTTIME") else 0.0
    return time.monotonic(), boot, time.time()


def _elapsed(since: tuple[float, ...]) -> float:
    return max(now - then for now, then in zip(_clocks(), since, strict=True))


def fresh_seconds(stale: float | None = None) -> float:
    """How long after its last confirmation the lease is taken as held without
    asking the store: half the stale limit, less one second because the
    store's dates (Last-Modified, Date) are whole seconds."""
    return max(0.0, (stale_seconds() if stale is None else stale) / 2 - 1.0)


@dataclass
class RemoteLock:
    folder: UPath
    previous: dict
    note: str | None = None
    record_: dict = field(default_factory=dict)
    etag: str | None = None
    lost: dict | None = None  # the record that replaced ours, once the lock is lost
    # When the store last confirmed the lease: taken just before sending the
    # write it accepted (it dates the write later, which only errs safe).
    confirmed: tuple[float, ...] = (float("-inf"),) * 3
    _mutex: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def path(self) -> UPath:
        return self.folder / LOCK

    def record(self, data: AnyPath | None, writes: str) -> None:
        """Name this run's DATA and command in the lock object."""
        self.record_["data"] = resolved(location(data)) if data is not None else None
        self.record_["writes"] = writes
        try:
            self._rewrite()
        except Lost:
            self.check()
        except Exception as e:
            if not (isinstance(e, OSError) or is_store_error(e)):
                raise
            raise WriteError(f"{self.path}: cannot write ({one_line(e)})") from None

    def fresh(self) -> bool:
        """Whether the lease was confirmed recently enough to act on without
        asking the store (no I/O: safe on the store client's own thread)."""
        return self.lost is None and _elapsed(self.confirmed) < fresh_seconds()

    def confirm(self, path: AnyPath | None = None, action: str = "written") -> None:
        """Before `path` is written, removed or read (`action`): return if the
        lease is fresh, or once a conditional rewrite of the lock confirms it;
        raise LockLost otherwise (see the module's docstring)."""
        if self.fresh():
            return
        what = f"{path}: not {action}: " if path is not None else f"{self.folder}: "
        try:
            self._rewrite(unless_fresh=True)
        except Lost:
            pass
        except Exception as e:
            if not (isinstance(e, OSError) or is_store_error(e)):
                raise
            raise LockLost(
                f"{what}cannot confirm this run's lock on {self.folder} ({one_line(e)}); stopping"
            ) from None
        if self.lost is not None:
            where = "the lock" if path is None else f"the lock of {self.folder}"
            raise LockLost(
                f"{what}{where} was taken over by another tokenmill run "
                f"({describe_holder(self.lost)}) while this one went {stale_seconds():g} s "
                "without a heartbeat; stopping"
            )

    def check(self) -> None:
        """Fail if another run has taken the lock over (this one stalled past the
        stale limit): it must not remove or record anything in the folder."""
        self.confirm()

    def carried(self) -> RunFence:
        """This lease as the run's worker processes and Ray tasks check it."""
        return RunFence(str(self.folder), _this_process(), self.record_["token"], stale_seconds())

    def _body(self, **extra) -> bytes:
        beat = {"heartbeat": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **extra}
        return (json.dumps({**self.record_, **beat}) + "\n").encode()

    def _write(self, *, create: bool = False, timeout: float | None = None, **extra) -> None:
        """Write the lock object, created (`create`) or over `etag`; confirmed
        as of now if the store accepts it."""
        sent = _clocks()
        body = self._body(**extra)
        self.etag = _put(self.path, body, create=create, etag=self.etag, timeout=timeout)
        self.confirmed = sent

    def _rewrite(
        self, *, unless_fresh: bool = False, timeout: float | None = None, **extra
    ) -> None:
        if not self._mutex.acquire(timeout=-1 if timeout is None else timeout):
            raise TimeoutError(f"{self.path}: a rewrite of the lock is still waiting on the store")
        try:
            if self.lost is not None:
                raise Lost
            if unless_fresh and self.fresh():
                return  # the heartbeat confirmed it while we waited for the mutex
            try:
                self._write(timeout=timeout, **extra)
            except Lost:
                self.lost = last_holder(self.folder)
                raise
        finally:
            self._mutex.release()

    def _beat(self) -> None:
        while not self._stop.wait(heartbeat_seconds()):
            try:
                self._rewrite()
            except Lost:
                return
            except Exception:  # noqa: BLE001, S112 (a failed beat is retried; the limit spans several)
                continue

    def start(self) -> None:
        self._thread = threading.Thread(target=self._beat, name="tokenmill-lock", daemon=True)
        self._thread.start()

    def release(self) -> None:
        # The run's end, after Ctrl-C or a store that stopped answering too:
        # it waits RELEASE_S for the heartbeat and for the release, no more.
        # A lock not released goes stale.
        self._stop.set()
        deadline = time.monotonic() + RELEASE_S
        if self._thread is not None:
            self._thread.join(RELEASE_S)
        # Kept, marked released, like the local file: it says which DATA the
        # folder's outputs came from. Not ours any more: left as it is.
        try:
            left = max(0.5, deadline - time.monotonic())
            self._rewrite(released=time.strftime("%Y-%m-%dT%H:%M:%S%z"), timeout=left)
        except Exception:  # noqa: BLE001, S110 (a lock not released goes stale)
            pass


def _this_process() -> dict:
    pid = os.getpid()
    return {"machine": machine_id(), "pid": pid, "process_start": process_start(pid)}


@dataclass
class RunFence:
    """A folder's lock held by this run's driver, as the run's worker processes
    and Ray tasks see it (executors.py carries it to them): what they write,
    remove, list or read under the folder passes `confirm` first, as the
    driver's I/O passes its lock's.

    A local folder's flock goes with the driver: a worker of this machine
    writes only while the driver runs (after a `kill -9` of the driver, its
    workers finish their tasks and a rerun may hold the lock already); on
    another machine (a Ray node sharing the folder) there is no process to
    look up and the write goes on. A remote folder's lease: the lock object
    must still hold the driver's record (its token, not released) and the
    store must date its last heartbeat no more than `fresh_seconds` before
    the request that read it; until it does, the worker
    waits for the driver's next heartbeat (the driver may be stalled, and
    either comes back or has its lock taken over)."""

    folder: str
    driver: dict  # machine, pid, process_start of the driver
    token: str | None = None  # a remote folder's: the token of the driver's record
    stale: float = STALE_S  # the driver's stale limit
    confirmed: tuple[float, ...] = field(default=(float("-inf"),) * 3, compare=False)

    def fresh(self) -> bool:
        # A local folder's is asked at each write: a look at /proc, no I/O on OUT.
        return self.token is not None and _elapsed(self.confirmed) < fresh_seconds(self.stale)

    def confirm(self, path: AnyPath | None = None, action: str = "written") -> None:
        if self.fresh():
            return
        what = f"{path}: not {action}: " if path is not None else f"{self.folder}: "
        if self.token is None:
            if holder_gone(self.driver):
                raise LockLost(f"{what}{self._ended()}")
            return
        folder = location(self.folder)
        assert is_remote(folder)  # a lease is a remote folder's
        while True:
            sent = _clocks()
            try:
                found = _read(folder / LOCK)
            except Exception as e:
                if not (isinstance(e, OSError) or is_store_error(e)):
                    raise
                raise LockLost(
                    f"{what}cannot confirm this run's lock on {self.folder} ({one_line(e)}); "
                    "stopping"
                ) from None
            holder, _, age = found or ({}, None, None)
            if holder.get("token") != self.token:
                taker = f" ({describe_holder(holder)})" if holder else ""
                raise LockLost(
                    f"{what}the lock of {self.folder} was taken over by another tokenmill "
                    f"run{taker}; stopping"
                )
            if holder.get("released") or holder_gone(self.driver):
                raise LockLost(f"{what}{self._ended()}")
            # Not `<`: the store dates in whole seconds, and at a stale limit of
            # 2 s or less no age is below a freshness of 0 (an age of 0 is a
            # beat this second, the freshest the store can tell).
            if age is None or age <= fresh_seconds(self.stale):
                self.confirmed = tuple(t - max(age or 0.0, 0.0) for t in sent)
                return
            time.sleep(heartbeat_seconds(self.stale) / 4)

    def _ended(self) -> str:
        return (
            f"the tokenmill run holding the lock of {self.folder} "
            f"(pid {self.driver.get('pid', '?')}) has ended; stopping"
        )


@contextmanager
def remote_lock(folder: UPath) -> Iterator[RemoteLock]:
    try:
        if is_object(folder):
            raise TokenmillError(f"{folder}: exists and is not a folder")
        lock = _take(folder)
    except TokenmillError:
        raise
    except Exception as e:
        if not (isinstance(e, OSError) or is_store_error(e)):
            raise
        raise TokenmillError(f"{folder / LOCK}: cannot take the lock ({one_line(e)})") from None
    lock.start()
    try:
        with fenced(folder, lock):
            yield lock
    finally:
        lock.release()


def _take(folder: UPath) -> RemoteLock:
    """Create the lock object, or take over a released or dead holder's."""
    path = folder / LOCK
    record = {
        **holder_record(None),
        "machine": machine_id(),
        "process_start": process_start(os.getpid()),
        "token": secrets.token_hex(8),  # tells this run's record from another's
    }
    lock = RemoteLock(folder, previous={}, record_=record)
    holder: dict = {}
    for _ in range(TAKE_TRIES):
        try:
            lock._write(create=True)
            return lock
        except Lost:
            pass
        found = _read(path)
        if found is None:
            continue  # released and removed in between: create it again
        holder, etag, age = found
        stale = age is not None and age > stale_seconds()
        if holder.get("released"):
            note = None
        elif stale:
            note = f"no heartbeat for {age:.0f} s"
        elif holder_gone(holder):
            note = "its process on this machine is gone"
        else:
            extra = f", last heartbeat {max(age, 0):.0f} s ago" if age is not None else ""
            raise in_use(folder, holder, extra)
        # Until `record` names this run's DATA, the object keeps saying which
        # DATA the folder's outputs came from (a refused run must not erase it).
        lock.record_["data"] = holder.get("data")
        lock.etag = etag
        try:
            lock._write()
        except Lost:
            continue  # another run took it first, or the holder beat: look again
        lock.previous = holder
        if note:
            lock.note = (
                f"{folder}: took over the lock of a tokenmill run that ended without "
                f"releasing it ({describe_holder(holder)}; {note})"
            )
        return lock
    raise in_use(folder, holder)


def _read(path: UPath) -> tuple[dict, str | None, float | None] | None:
    """(record, ETag, seconds since last written) of the lock object; None if absent."""
    fs = filesystem(path)
    try:
        if hasattr(fs, "call_s3"):
            bucket, key, _ = fs.split_path(path.path)
            head = fs.call_s3("head_object", Bucket=bucket, Key=key)
            data = fs.cat_file(path.path)
            etag = head.get("ETag")
            # Both times are the store's: no clock of ours is involved.
            date = head.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
            modified = head.get("LastModified")
            age = None
            if date and modified:
                import email.utils  # a store's lease only: not at the top, for local start-up

                age = (email.utils.parsedate_to_datetime(date) - modified).total_seconds()
        else:
            info = fs.info(path.path)
            data = fs.cat_file(path.path)
            etag = info.get("ETag") or info.get("etag") or info.get("md5")
            modified = info.get("mtime") or info.get("LastModified") or info.get("updated")
            age = _age(modified)
    except FileNotFoundError:
        return None
    try:
        holder = json.loads(data)
    except (ValueError, RecursionError):
        holder = {}
    if not isinstance(holder, dict):
        holder = {}
    return holder, etag, age


def _age(modified: object) -> float | None:
    import datetime

    if isinstance(modified, int | float):
        return time.time() - modified
    if isinstance(modified, str):
        try:
            modified = datetime.datetime.fromisoformat(modified)
        except ValueError:
            return None
    if isinstance(modified, datetime.datetime):
        if modified.tzinfo is None:
            modified = modified.replace(tzinfo=datetime.UTC)
        return (datetime.datetime.now(datetime.UTC) - modified).total_seconds()
    return None


def _put(
    path: UPath,
    body: bytes,
    *,
    create: bool = False,
    etag: str | None = None,
    timeout: float | None = None,
) -> str | None:
    """Write the lock object: only if absent (`create`), or only if still at
    `etag`, within `timeout` seconds on S3 (fsspec's FSTimeoutError after).
    Returns the new ETag; raises Lost when the condition fails."""
    fs = filesystem(path)
    if hasattr(fs, "call_s3"):
        condition: dict[str, object] = (
            {"mode": "create"} if create else {"IfMatch": etag} if etag else {}
        )
        if timeout is not None:
            condition["timeout"] = timeout  # taken by fsspec's sync wrapper
        try:
            reply = fs.pipe_file(path.path, body, **condition)
        except OSError as e:
            if precondition_failed(e):
                raise Lost from None
            raise
        return reply.get("ETag") if isinstance(reply, dict) else None
    # Best effort: write, read back, and hold it only if it is still ours.
    if create and fs.exists(path.path):
        raise Lost
    fs.pipe_file(path.path, body)
    time.sleep(0.5)
    found = _read(path)
    token = json.loads(body).get("token")
    if found is None or found[0].get("token") != token:
        raise Lost
    return found[1]
