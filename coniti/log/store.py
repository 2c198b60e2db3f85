"""LMDB environment management: one environment per store directory per process, shared by every handle.

Contracts:

* **One environment per path per process.** LMDB forbids opening the same files twice in a process;
  :class:`Store` handles on one directory (by real path) share one :class:`_Shared` environment,
  reference-counted, closed when the last handle closes.
* **Durability.** ``"sync"`` (default): a commit is flushed to disk (data, then meta page) before the
  call returns, so an acknowledged write survives a process or machine crash. ``"nosync"``: commits are
  not flushed; a process crash loses nothing, but an OS crash or power loss may lose the most recent
  commits (LMDB keeps the file consistent when the filesystem preserves write order). Every handle on
  one path in a process shares the first opener's mode; asking for another raises ``ContractError``.
* **Writers** are serialised per environment by a lock, and a write transaction never leaves the
  thread that began it. Other processes' writers are serialised by LMDB's own lock.
* **Monotonic reads.** A read transaction never shows an older state than one an earlier read
  transaction of any process showed (:func:`_begin_read`: LMDB alone can, see there).
* **Growth.** A full map is doubled and the transaction retried (the work function runs again, so it
  must keep its state in the transaction). A map grown by another process is adopted
  (``set_mapsize(0)``) when LMDB reports it. Resizing waits until no transaction of this process is
  open (readers hold a shared gate for the length of one read).
* **Hygiene.** Stale reader slots of dead processes are cleared at open. The directory, and every
  parent created for it, is created 0700 and the files 0600.
* **Trust.** Before LMDB touches a store, :mod:`coniti.log.guard` refuses a directory others may
  write (or, for a writable open, that another user owns, or that is non-empty and holds no store),
  symlinked store files, and a data file shorter than its meta page needs (LMDB would die of
  SIGBUS). The head witness (``head.witness``) is rewritten after every durable commit and checked
  at open: a store that lost acknowledged commits, or holds another store's data file, is refused
  with :class:`StoreCorrupted`.
* **Read-only without the lock file.** A read-only open of a store whose lock file this user may
  not write opens without LMDB's lock (``lock=False``): it reads, but other processes' writers do
  not see this reader, so a writer running meanwhile may reuse pages a long read still walks (such a
  read then fails its checks with :class:`StoreCorrupted` or sees a later state). Read such a store
  while no one writes it.
* **Half-created stores.** A read-only open of a directory whose LMDB environment holds nothing (a
  creation killed before its first commit) reads as the empty store. A handle used in a process other than the one that opened it (after
  ``fork()``) raises :class:`StoreForked`; opening the path anew in the child works.
* **Presence.** Every process holding the store open holds a shared ``flock`` on its directory;
  :meth:`Store.compact` takes it exclusively (refusing with :class:`StoreBusy` when another process
  has the store open) and openers wait while it runs.
* **Errors.** LMDB and OS errors are translated to coniti errors by :func:`translate`, the one
  boundary of this package (used by :func:`lmdb_errors`, read transactions and :meth:`Store.write`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import resource
import secrets
import shutil
import struct
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

import lmdb
import msgpack

from coniti.errors import (
    ContractError,
    ReadOnlyError,
    StoreBusy,
    StoreClosed,
    StoreCorrupted,
    StoreError,
    StoreForked,
    StoreFull,
    StoreVersionError,
)
from coniti.log import guard
from coniti.log.codec import event_hash
from coniti.log.writehook import Replan, WriteHook

__all__ = [
    "DEFAULT_MAP_SIZE",
    "DURABILITIES",
    "LOG_DB",
    "PROJECTION_DBS",
    "RETIRED_DBS",
    "LAYOUT_VERSION",
    "RESEALED_LAYOUT",
    "SYS_DB",
    "SYS_STREAM",
    "Replan",
    "TREE_DB",
    "Store",
    "WriteHook",
    "lmdb_errors",
    "translate",
]

T = TypeVar("T")

DEFAULT_MAP_SIZE = 1 << 30
"""Initial map size (1 GiB of address space; the file grows only as data is written)."""
MAX_GROWTHS = 24
DURABILITIES = ("sync", "nosync")

LOG_DB = b"log"
SYS_DB = b"sys"
TREE_DB = b"tree"
"""The Merkle tree's nodes (layout 6; keys and values in :mod:`coniti.log.layout`)."""
PROJECTION_DBS = (
    b"ns", b"nsn", b"ver", b"tver", b"time", b"meta", b"cnt", b"erx", b"exv", b"opx", b"fbk", TREE_DB,
)
"""Sub-databases derived from the log (see ``log/FORMAT.md``); ``rebuild`` recomputes all of them."""
ALL_DBS = (LOG_DB, SYS_DB, *PROJECTION_DBS)
LATER_DBS = frozenset({b"erx", b"exv", b"opx", b"fbk", TREE_DB})
"""Sub-databases added after the first stores were written. A read-only open of a store that lacks
one does without it (reads stay exact); a writable open creates it, and the store's projections are
then rebuilt once (:attr:`Store.stale_projections`)."""
RETIRED_DBS = (b"atix", b"tmax")
"""Projections of layout 1 that layout 2 no longer keeps; ``rebuild`` deletes them."""
LAYOUT_VERSION = 6
"""The layout version this coniti writes (``sys/format``): which projections a store holds and how
they are encoded. Older stores are read as they are and upgraded by a writable open: layout 4 is
resealed in place (:data:`RESEALED_LAYOUT`) and layout 5 kept, each then given its Merkle tree in
the same transaction (:func:`coniti.log.checks.reseal`); older ones rebuilt from the log. Layout 6
is layout 5 with the Merkle tree's node table (:data:`TREE_DB`), which a coniti of layout 5 would
not keep up: it refuses the store instead of appending events the tree does not cover. Layout 5 computes
every payload CRC and seal with CRC-32C; layout 4 had the same entries with zlib's CRC-32 (it
added the payload CRC of each put and a seal to each ``ver``, ``tver`` and ``time`` value); layout 3
sealed each ``cnt`` and ``exv`` value, layout 2 had no CRC. The encoding of the events themselves is
:data:`coniti.log.codec.EVENT_VERSION`."""
RESEALED_LAYOUT = 4
"""The older layout that a writable open upgrades by resealing its values (:attr:`Store.needs_reseal`)
instead of rebuilding the projections: it holds the same entries as the current one."""

SYS_ID = b"id"
SYS_SECRET = b"secret"
SYS_LAYOUT = b"format"
SYS_HEAD = b"head"
SYS_STREAM = b"stream"
"""Cluster mode: the stream this store copies and how far it folded it (value: :mod:`coniti.log.replica`);
a store holding it takes writes only through its hook (:meth:`Store.replicate`)."""
_U32 = struct.Struct(">I")

_STORAGE_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}
_LOW_SPACE = 64 << 20


def _out_of_space(path: str) -> str | None:
    """Why a write that failed with EIO most likely failed for lack of space, or None.

    LMDB reports a short write as EIO; a file-size limit or a full disk is the usual cause.
    """
    with contextlib.suppress(OSError, ValueError):
        soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        size = os.path.getsize(os.path.join(path, "data.mdb"))
        if soft != resource.RLIM_INFINITY and size + (1 << 20) >= soft:
            return f"the file-size limit ({soft} bytes) was reached"
        st = os.statvfs(path)
        if st.f_bavail * st.f_frsize < _LOW_SPACE:
            return "the disk is full"
    return None


def translate(path: str, exc: BaseException) -> StoreError | ReadOnlyError | None:
    """The coniti error for an LMDB, OS or decoding error raised on store ``path``, or None for
    other errors. Bytes that do not decode (``struct.error``, msgpack's errors, invalid UTF-8) come
    from a damaged store: :class:`StoreCorrupted`."""
    if isinstance(exc, struct.error | msgpack.UnpackException | UnicodeDecodeError):
        return StoreCorrupted(f"store {path} is damaged: stored bytes do not decode ({exc})")
    if isinstance(exc, lmdb.MapFullError | lmdb.DiskError):
        return StoreFull(f"store {path} is full: {exc}")
    if isinstance(
        exc,
        lmdb.CorruptedError
        | lmdb.PageNotFoundError
        | lmdb.PanicError
        | lmdb.BadChecksumError
        | lmdb.InvalidError,
    ):
        return StoreCorrupted(f"store {path} is damaged: {exc}")
    if isinstance(exc, lmdb.VersionMismatchError):
        return StoreVersionError(f"store {path} was written by another LMDB version: {exc}")
    if isinstance(exc, lmdb.ReadonlyError):
        return ReadOnlyError(f"store {path} is read-only: {exc}")
    if isinstance(exc, lmdb.Error | OSError):
        code = exc.errno if isinstance(exc, OSError) else getattr(exc, "code", None)
        if code in _STORAGE_ERRNOS:
            return StoreFull(f"store {path} could not grow: {exc}")
        why = _out_of_space(path) if code == errno.EIO else None
        if why is not None:
            return StoreFull(f"store {path} could not grow: {why} ({exc})")
        return StoreError(f"store {path}: {exc}")
    return None


@contextlib.contextmanager
def lmdb_errors(path: str) -> Iterator[None]:
    """Translate LMDB and OS errors raised inside the block into the most specific coniti error
    (see :func:`translate`); the original is kept as ``__cause__``."""
    try:
        yield
    except (lmdb.Error, OSError) as exc:
        error = translate(path, exc)
        if error is None:
            raise
        raise error from exc


class _Gate:
    """Shared/exclusive gate: transactions hold it shared, a map resize holds it exclusive.

    Waiting exclusive holders block new shared holders (so a resize cannot starve).
    """

    __slots__ = ("_active", "_cond", "_exclusive", "_lock", "_waiting")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._active = 0
        self._waiting = 0
        self._exclusive = False

    def begin(self, begin: Callable[[_Shared], T], shared: _Shared) -> T:
        """``begin(shared)`` (a transaction's begin) run with the gate entered shared, which the
        caller then holds and must :meth:`leave`: the one gate-retry loop of the store (reads,
        writes and :meth:`Store.read_at_rest` begin through it). A map another process grew
        (LMDB's ``MapResizedError``) is adopted under the exclusive gate and ``begin`` runs again;
        any other exception leaves the gate and propagates."""
        while True:
            with self._lock:
                while self._exclusive or self._waiting:
                    self._cond.wait()
                self._active += 1
            try:
                return begin(shared)
            except lmdb.MapResizedError:
                self.leave()
                with self.exclusive():  # no transaction of this process is open
                    shared.env.set_mapsize(0)
            except BaseException:
                self.leave()
                raise

    def leave(self) -> None:
        with self._lock:
            self._active -= 1
            if not self._active and self._waiting:
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._lock:
            self._waiting += 1
            try:
                while self._exclusive or self._active:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._lock:
                self._exclusive = False
                self._cond.notify_all()


class _Shared:
    """One open LMDB environment and what every handle on it shares."""

    def __init__(
        self, path: str, env: lmdb.Environment, read_only: bool, durability: str, lock_fd: int
    ) -> None:
        self.path = path
        self.env = env
        self.lock_fd = lock_fd
        self.read_only = read_only
        self.durability = durability
        self.pid = os.getpid()
        self.forks = _FORKS[0]
        self.refs = 0
        self.write_lock = threading.Lock()
        self.gate = _Gate()
        self.committed = threading.Condition(threading.Lock())
        """Notified after every commit through this environment (wakes in-process followers)."""
        self.dbs: dict[bytes, Any] = {}
        self.store_id = b""
        self.secret = b""
        self.stale_projections = False
        self.needs_reseal = False
        self.layout = LAYOUT_VERSION
        self.witness_fd = -1
        """Where a writable open writes the head witness (-1: not written, a read-only open)."""
        self.witnessed = b""
        """The ``sys/head`` value the witness last named."""
        self.stand_in = ""
        """The temporary directory of the empty environment standing in for a store whose creation
        never committed (read-only opens only), else empty."""
        self.hook: WriteHook | None = None
        """Cluster mode: what replicates each write (:meth:`Store.replicate`); None: none."""
        self.metas: guard.MetaTxnids | None = None
        """The data file's meta pages, which :func:`_begin_read` checks each read against (None for
        a stand-in)."""


_REGISTRY: dict[str, _Shared] = {}
_REGISTRY_LOCK = threading.Lock()
_FORKS = [0]
"""How many times this process image has been forked into a child (a cheap fork check)."""


def _after_fork_in_child() -> None:
    global _REGISTRY_LOCK
    _REGISTRY_LOCK = threading.Lock()
    _FORKS[0] += 1


os.register_at_fork(after_in_child=_after_fork_in_child)


def _prepare_dir(path: str, read_only: bool) -> None:
    """Check an existing store directory (:func:`guard.check_directory`) or create a new one."""
    if os.path.exists(path):
        guard.check_directory(path, read_only)
        return
    if read_only:
        raise StoreError(f"no store at {path} (opened read-only, so none is created)")
    guard.make_private_dirs(path)


def _init_env(shared: _Shared) -> None:
    """Open the sub-databases and read (or create) the system table. The environment is new to
    this process, so a map another process grew meanwhile is adopted on the spot."""
    for _ in range(MAX_GROWTHS):
        try:
            _init_tables(shared)
            return
        except lmdb.MapResizedError:
            shared.env.set_mapsize(0)
    _init_tables(shared)


def _init_tables(shared: _Shared) -> None:
    env = shared.env
    if shared.read_only and not shared.stand_in:
        for name in ALL_DBS:
            try:
                shared.dbs[name] = env.open_db(name, create=False)
            except lmdb.NotFoundError:
                if name in LATER_DBS:
                    continue
                if _never_committed(env):
                    _stand_in(shared)
                    _init_tables(shared)
                    return
                raise StoreError(f"{shared.path} is not a coniti store (no {name.decode()} table)") from None
        sys_db = shared.dbs[SYS_DB]
        with env.begin() as txn:
            fmt, sid, secret = (txn.get(k, db=sys_db) for k in (SYS_LAYOUT, SYS_ID, SYS_SECRET))
    else:
        with env.begin(write=True) as txn:
            added = False
            for name in ALL_DBS:
                if name in LATER_DBS and name != TREE_DB:
                    try:
                        env.open_db(name, txn=txn, create=False)
                    except lmdb.NotFoundError:
                        added = True
                shared.dbs[name] = env.open_db(name, txn=txn, create=True)
            sys_db = shared.dbs[SYS_DB]
            fmt = txn.get(SYS_LAYOUT, db=sys_db)
            found = None if fmt is None else _U32.unpack(fmt)[0]
            older = found is not None and found < RESEALED_LAYOUT
            shared.stale_projections = older or (added and txn.get(SYS_HEAD, db=sys_db) is not None)
            shared.needs_reseal = (
                not shared.stale_projections and found is not None and RESEALED_LAYOUT <= found < LAYOUT_VERSION
            )
            if fmt is None:
                fmt = _U32.pack(LAYOUT_VERSION)
                txn.put(SYS_LAYOUT, fmt, db=sys_db)
                txn.put(SYS_ID, uuid.uuid4().bytes, db=sys_db)
                txn.put(SYS_SECRET, secrets.token_bytes(32), db=sys_db)
            sid = txn.get(SYS_ID, db=sys_db)
            secret = txn.get(SYS_SECRET, db=sys_db)
    if fmt is None or sid is None or secret is None:
        raise StoreError(f"{shared.path} is not a coniti store (system table incomplete)")
    (version,) = _U32.unpack(fmt)
    if version > LAYOUT_VERSION:
        raise StoreVersionError(
            f"store {shared.path} has layout version {version}; this coniti reads up to layout version "
            f"{LAYOUT_VERSION}"
        )
    shared.layout = version
    shared.store_id = bytes(sid)
    shared.secret = bytes(secret)
    problem = witness_problem(shared, guard.Witness.read(shared.path))
    if problem is not None:
        raise StoreCorrupted(problem)


def _never_committed(env: lmdb.Environment) -> bool:
    """Whether ``env`` holds nothing at all: a store whose creation was killed before it committed."""
    return int(env.stat()["entries"]) == 0


def _stand_in(shared: _Shared) -> None:
    """Let an empty private environment (in a temporary directory, removed at close) stand in for a
    store whose creation never committed: it reads as the empty store."""
    shared.env.close()
    shared.stand_in = tempfile.mkdtemp(prefix="coniti-empty-")
    shared.env = lmdb.open(shared.stand_in, max_dbs=len(ALL_DBS) + 4, mode=0o600, sync=False)


def _watch_metas(shared: _Shared) -> None:
    """Map the meta pages of the environment just opened, for :func:`_begin_read`."""
    if not shared.stand_in:
        psize = int(shared.env.stat()["psize"])
        shared.metas = guard.MetaTxnids(os.path.join(shared.path, guard.DATA_FILE), psize)


def _unwatch_metas(shared: _Shared) -> None:
    metas, shared.metas = shared.metas, None
    if metas is not None:
        metas.close()


def _begin_read(shared: _Shared) -> Any:
    """Begin a read transaction on a state no older than any a read transaction began on before.

    LMDB does not promise that by itself. ``mdb_txn_renew0`` loads the last committed txnid ``t``
    from the lock file, then copies the meta page of ``t``'s parity; a writer writes its meta page
    (visible at once through the map; with ``sync`` it stays there, unpublished, for the whole
    O_DSYNC flush) before it publishes its txnid. A reader stalled between the load and the copy
    while commit ``t+1`` lands and commit ``t+2`` writes its meta page (over ``t``'s) reads state
    ``t+2``; a transaction begun next, before ``t+2`` is published, reads ``t+1``: older. So each
    transaction is checked once begun: while the meta pages name nothing past ``t+1`` the page of
    ``t``'s parity still held ``t`` when it was copied, and the transaction reads exactly the
    published state ``t`` (published states only advance, in every process); otherwise it is begun
    again (a retry needs another commit to land during the few instructions of the next begin).
    Limit: a copy made while a writer is midway through writing that very page (its txnid comes
    last) escapes the check; that write is one copy of some 130 bytes.
    """
    metas = shared.metas
    tries = 0
    while True:
        txn = shared.env.begin()
        if metas is None or not metas.past(txn.id() + 1):
            return txn
        txn.abort()
        tries += 1
        if tries > 1:
            time.sleep(0.0002)


def _begin_write(shared: _Shared) -> Any:
    return shared.env.begin(write=True)


def _grow(shared: _Shared) -> None:
    """Double the map of ``shared`` (with no transaction of this process open)."""
    with shared.gate.exclusive():
        size = int(shared.env.info()["map_size"])
        shared.env.set_mapsize(size * 2)


def witness_problem(shared: _Shared, witness: guard.Witness | None) -> str | None:
    """Why the store's current state contradicts ``witness`` (:func:`guard.witness_problem`)."""
    if witness is None:
        return None
    with _begin_read(shared) as txn:
        raw = txn.get(SYS_HEAD, db=shared.dbs[SYS_DB])
        head_seq = 0 if raw is None or len(raw) != 48 else int.from_bytes(raw[:8], "big")
        head_hash = bytes(32) if raw is None else bytes(raw[16:])

        def hash_of(seq: int) -> bytes | None:
            frame = txn.get(seq.to_bytes(8, "big"), db=shared.dbs[LOG_DB])
            if frame is None:
                return None
            try:
                return event_hash(frame)
            except (ValueError, KeyError, TypeError, msgpack.UnpackException):
                return None

        return guard.witness_problem(shared.path, witness, shared.store_id, head_seq, head_hash, hash_of)


def _acquire(path: str, durability: str, map_size: int, read_only: bool) -> _Shared:
    real = os.path.realpath(os.fspath(path))
    with _REGISTRY_LOCK:
        shared = _REGISTRY.get(real)
        if shared is not None and shared.forks != _FORKS[0]:
            # Inherited across fork(): release the parent's handle in this process, open anew.
            del _REGISTRY[real]
            with contextlib.suppress(Exception):
                shared.env.close()
            with contextlib.suppress(OSError):
                os.close(shared.lock_fd)
            shared = None
        if shared is not None:
            if shared.durability != durability:
                raise ContractError(
                    f"durability={durability!r}: store {real} is already open in this process with "
                    f"durability={shared.durability!r}"
                )
            if shared.read_only and not read_only:
                raise StoreError(f"store {real} is already open read-only in this process")
            shared.refs += 1
            return shared
        _prepare_dir(real, read_only)
        lock_fd = _lock_dir(real)
        try:
            truncated = guard.size_problem(os.path.join(real, guard.DATA_FILE))
            if truncated is not None:
                raise StoreCorrupted(truncated)
            with lmdb_errors(real):
                env = _open_env(real, map_size, read_only, durability)
                shared = _Shared(real, env, read_only, durability, lock_fd)
                try:
                    if not read_only:
                        env.reader_check()
                        _remove_leftovers(real)
                    _init_env(shared)
                    _watch_metas(shared)
                    if not read_only:
                        shared.witness_fd = guard.open_witness(real)
                except BaseException:
                    _close_env(shared)
                    raise
        except BaseException:
            os.close(lock_fd)
            raise
        shared.refs = 1
        _REGISTRY[real] = shared
        return shared


def _release(shared: _Shared) -> None:
    with _REGISTRY_LOCK:
        shared.refs -= 1
        if shared.refs > 0:
            return
        if _REGISTRY.get(shared.path) is shared:
            del _REGISTRY[shared.path]
    with shared.write_lock, shared.gate.exclusive():
        try:
            _close_env(shared)
        finally:
            os.close(shared.lock_fd)


def _close_env(shared: _Shared) -> None:
    """Close the environment, the witness and any stand-in directory of ``shared``."""
    try:
        _unwatch_metas(shared)
        shared.env.close()
    finally:
        if shared.witness_fd >= 0:
            os.close(shared.witness_fd)
            shared.witness_fd = -1
        if shared.stand_in:
            shutil.rmtree(shared.stand_in, ignore_errors=True)


def _open_env(real: str, map_size: int, read_only: bool, durability: str) -> lmdb.Environment:
    """Open the LMDB environment; a read-only open whose lock file this user may not write opens
    without LMDB's lock (see the module docstring for what that gives up)."""
    sync = durability == "sync"
    options: dict[str, Any] = {
        "map_size": map_size,
        "subdir": True,
        "readonly": read_only,
        "sync": sync,
        "metasync": sync,
        "mode": 0o700,
        "create": not read_only,
        "max_dbs": len(ALL_DBS) + 4,
        "max_readers": 1024,
        "max_spare_txns": 0,
    }
    try:
        return lmdb.open(real, **options)
    except lmdb.ReadonlyError:
        if not read_only:
            raise
        return lmdb.open(real, lock=False, **options)


def _lock_dir(real: str) -> int:
    """Open the store directory and take a shared ``flock`` on it: every process holding the store
    open holds one, so :meth:`Store.compact` can tell whether it is alone. Waits while a compaction
    holds it exclusively."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise StoreError(f"store {real}: cannot open the directory: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError as exc:
        os.close(fd)
        raise StoreError(f"store {real}: cannot lock the directory: {exc.strerror or exc}") from exc
    return fd


_COMPACT_PREFIX = ".compact-"


def _remove_leftovers(real: str) -> None:
    """Remove what a compaction killed midway left behind (its copy is never the live file)."""
    with contextlib.suppress(OSError):
        for name in os.listdir(real):
            if name.startswith(_COMPACT_PREFIX):
                shutil.rmtree(os.path.join(real, name), ignore_errors=True)


def _fsync_path(path: str, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Read:
    """Context manager of :meth:`Store.read`: begins a read transaction, aborts it on exit."""

    __slots__ = ("_store", "_txn")

    def __init__(self, store: Store) -> None:
        self._store = store
        self._txn: Any = None

    def __enter__(self) -> Any:
        self._txn = self._store.begin_read()
        return self._txn

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self._store.end_read(self._txn)
        if exc is not None:
            error = translate(self._store.path, exc)
            if error is not None:
                raise error from exc


class Store:
    """A handle on a store directory. Thread-safe; share it or open more, they share one environment.

    ``read()`` yields a read transaction; ``write(fn)`` runs ``fn(txn)`` in a write transaction and
    commits it. Neither may be held across calls into user code.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: str = "sync",
        map_size: int = DEFAULT_MAP_SIZE,
        read_only: bool = False,
    ) -> None:
        if durability not in DURABILITIES:
            raise ContractError(
                f"durability must be one of {', '.join(map(repr, DURABILITIES))}, got {durability!r}"
            )
        if not isinstance(map_size, int) or isinstance(map_size, bool) or map_size < 1 << 16:
            raise ContractError(f"map_size must be an integer of at least 65536 bytes, got {map_size!r}")
        self.read_only = read_only
        self._shared: _Shared | None = _acquire(os.fspath(path), durability, map_size, read_only)
        self.path = self._shared.path
        self._gate = self._shared.gate
        self.durability = durability
        self._pid = os.getpid()
        self._forks = _FORKS[0]

    @property
    def stale_projections(self) -> bool:
        """True when this open added a projection sub-database to a store that already holds events
        (written before that projection existed): the projections must be rebuilt."""
        return self._live().stale_projections

    @property
    def needs_reseal(self) -> bool:
        """True when this writable open found a store of :data:`RESEALED_LAYOUT` or layout 5: its
        values must be resealed in the current layout (layout 4) and its Merkle tree built
        (:func:`coniti.log.checks.reseal`)."""
        return self._live().needs_reseal

    def projections_rebuilt(self) -> None:
        """Record that the projections were rebuilt or resealed in the current layout (clears
        :attr:`stale_projections` and :attr:`needs_reseal`; :attr:`layout` is then
        :data:`LAYOUT_VERSION`)."""
        shared = self._live()
        shared.stale_projections = False
        shared.needs_reseal = False
        shared.layout = LAYOUT_VERSION

    @property
    def layout(self) -> int:
        """The store's layout version (``sys/format``) as of this open: :data:`LAYOUT_VERSION`, or an
        older one for a store opened read-only (writable opens upgrade it)."""
        return self._live().layout

    @property
    def store_id(self) -> bytes:
        """16 random bytes naming this store (kept in the system table)."""
        return self._live().store_id

    @property
    def secret(self) -> bytes:
        """32 random bytes of this store, the key for its cursor MACs."""
        return self._live().secret

    @property
    def env(self) -> Any:
        """The shared ``lmdb.Environment`` (for inspection: ``info()``, ``readers()``; never write
        through it)."""
        return self._live().env

    @property
    def dbs(self) -> dict[bytes, Any]:
        """The sub-database handles by name."""
        return self._live().dbs

    def _live(self) -> _Shared:
        shared = self._shared
        if shared is None:
            raise StoreClosed(f"store {self.path} is closed")
        if self.forked:
            raise StoreForked(
                f"store {self.path} was opened in process {self._pid}; this is process "
                f"{os.getpid()} (after fork): open a new LogBackend here"
            )
        return shared

    @property
    def forked(self) -> bool:
        """True in a process forked from the one that opened this handle (where it is unusable).
        The one fork check of the log layer: a counter bumped in the child by ``os.register_at_fork``,
        cheaper than ``os.getpid()``."""
        return _FORKS[0] != self._forks

    def close(self) -> None:
        """Release this handle; the environment closes with the last handle. Idempotent.

        In a forked child the handle is dropped without touching the parent's environment.
        """
        shared, self._shared = self._shared, None
        if shared is not None and not self.forked:
            _release(shared)

    # -- transactions ------------------------------------------------------------------------

    def read(self) -> _Read:
        """A read transaction over one consistent snapshot: ``with store.read() as txn: ...``.
        LMDB errors raised in the block are translated (:func:`translate`)."""
        return _Read(self)

    def begin_read(self) -> Any:
        """Begin a read transaction; the caller MUST pass it to :meth:`end_read` (hot paths use
        this pair instead of :meth:`read`)."""
        shared = self._shared
        if shared is None or _FORKS[0] != self._forks:
            shared = self._live()
        try:
            return shared.gate.begin(_begin_read, shared)
        except BaseException as exc:
            self.raise_translated(exc)

    def raise_translated(self, exc: BaseException) -> NoReturn:
        """Raise the coniti error for ``exc`` raised in a transaction of this store
        (:func:`translate`), or ``exc`` itself when it has none."""
        error = translate(self.path, exc)
        if error is None:
            raise exc
        raise error from exc

    def end_read(self, txn: Any) -> None:
        """End a transaction from :meth:`begin_read`."""
        try:
            txn.abort()
        finally:
            self._gate.leave()

    def write(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn(txn)`` in a write transaction and commit; returns what ``fn`` returned.

        If ``fn`` raises, nothing is written. A full map is grown and ``fn`` runs again in a fresh
        transaction, so ``fn`` must keep its state in the transaction. Raises :class:`StoreFull` when
        the map cannot grow or the disk refuses the write.
        """
        shared = self._live()
        if self.read_only:
            raise ReadOnlyError(f"store {self.path} was opened read-only")
        with shared.write_lock, lmdb_errors(self.path):
            hook = shared.hook
            while True:
                try:
                    return self._commit(shared, fn, hook)
                except Replan:
                    assert hook is not None
                    while self._commit(shared, hook.catch_up, None):
                        pass

    def catch_up(self) -> None:
        """Cluster mode: fold everything the log of record holds beyond this store, in as many
        transactions as the hook takes (each one commits: a catch-up cut short resumes)."""
        shared = self._live()
        hook = shared.hook
        if hook is None:
            return
        with shared.write_lock, lmdb_errors(self.path):
            while self._commit(shared, hook.catch_up, None):
                pass

    @property
    def replicating(self) -> bool:
        """Whether writes on this store run through a replica hook (cluster mode)."""
        return self._live().hook is not None

    def replicate(self, hook: WriteHook | None, *, replacing: WriteHook | None = None) -> None:
        """Run every later write of every handle on this store (in this process) through ``hook``:
        its work, then :meth:`WriteHook.before_commit`, then the commit (None: stop). With
        ``replacing``, only if that is the current hook."""
        shared = self._live()
        if replacing is None or shared.hook is replacing:
            shared.hook = hook

    def _commit(self, shared: _Shared, fn: Callable[[Any], T], hook: WriteHook | None) -> T:
        """One write of ``fn`` (growing a full map and running it again), ``hook`` called before
        its commit; the caller holds the write lock."""
        gate = shared.gate
        growths = 0
        while True:
            txn = gate.begin(_begin_write, shared)
            try:
                try:
                    if shared.hook is None and txn.get(SYS_STREAM, db=shared.dbs[SYS_DB]) is not None:
                        raise ReadOnlyError(f"store {self.path} is a cluster node's copy of a stream: "
                                            "open it with its cluster to write")  # fmt: skip
                    result = fn(txn)
                    if hook is not None:  # None with shared.hook set: the hook's own fold
                        hook.before_commit(txn)
                    head = txn.get(SYS_HEAD, db=shared.dbs[SYS_DB])
                    txn.commit()
                except BaseException:
                    txn.abort()
                    raise
            except lmdb.MapFullError:
                gate.leave()
                growths += 1
                if growths > MAX_GROWTHS:
                    raise
                _grow(shared)
                continue
            except BaseException:
                gate.leave()
                raise
            gate.leave()
            if shared.durability == "sync":
                self._witness(shared, head)
            with shared.committed:
                shared.committed.notify_all()
            return result

    def _witness(self, shared: _Shared, head: bytes | None) -> None:
        """Name the durable head ``head`` (a ``sys/head`` value) in the witness file, if it moved.

        Called only once the commit that wrote ``head`` is flushed, and written without a flush of
        its own: whatever reaches the disk names a durable commit, so after any crash the witness is
        at or behind the store's head, never ahead (a witness write lost or torn by the crash leaves
        the previous one, or one that does not decode and is ignored)."""
        if head is None or head == shared.witnessed or shared.witness_fd < 0 or len(head) != 48:
            return
        witness = guard.Witness(shared.store_id, int.from_bytes(head[:8], "big"), bytes(head[16:]))
        with contextlib.suppress(OSError):  # a witness not written only weakens the next check
            guard.write_witness(shared.witness_fd, witness)
            shared.witnessed = bytes(head)

    def wait_for_commit(self, timeout: float) -> None:
        """Block until a write transaction of this process commits on this store, or ``timeout``
        seconds pass. Commits of other processes do not wake it: poll for those."""
        shared = self._live()
        with shared.committed:
            shared.committed.wait(timeout)

    def map_size(self) -> int:
        """The current map size in bytes."""
        return int(self._live().env.info()["map_size"])

    def sync(self) -> None:
        """Flush every commit to disk now (useful with ``durability="nosync"``)."""
        shared = self._live()
        with self.read() as txn:  # the head first: the flush then covers it
            head = txn.get(SYS_HEAD, db=shared.dbs[SYS_DB])
        with lmdb_errors(self.path):
            shared.env.sync(True)
        self._witness(shared, head)

    def witness_problem(self) -> str | None:
        """Why the store's state contradicts its head witness (it lost acknowledged commits, or
        holds another store's data file), or None."""
        shared = self._live()
        with lmdb_errors(self.path):
            return witness_problem(shared, guard.Witness.read(self.path))

    def compact(self, reopened: Callable[[], None] | None = None) -> tuple[int, int]:
        """Rewrite the data file without free pages; returns its size ``(before, after)`` in bytes.

        LMDB never shrinks its file and leaves the bytes of freed pages in it (an erased payload, for
        one); the compacted copy holds only live pages. The store must be open nowhere else: not in
        another process (:class:`StoreBusy`; detected with the directory lock every process holds
        while it has the store open) and through no other handle of this process (:class:`StoreBusy`).
        Transactions of this process are held off meanwhile, and other processes that open the store
        wait. The copy is written beside the data file, flushed, and renamed over it, so a crash at
        any point leaves either the old file or the new one. The sub-database handles are replaced:
        ``reopened`` is called once the environment is open again, before any other transaction of
        this process may begin, to let the caller fetch :attr:`dbs` values again.
        """
        shared = self._live()
        if self.read_only:
            raise ReadOnlyError(f"store {self.path} was opened read-only")
        with _REGISTRY_LOCK:
            others = shared.refs - 1
        if others:
            raise StoreBusy(
                f"store {self.path} has {others} other open handle(s) in this process; compact() "
                "needs the store alone: close them first"
            )
        data_file = os.path.join(self.path, "data.mdb")
        with shared.write_lock, shared.gate.exclusive():
            try:
                fcntl.flock(shared.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fcntl.flock(shared.lock_fd, fcntl.LOCK_SH)  # the conversion may have dropped it
                raise StoreBusy(
                    f"store {self.path} is open in another process; compact() needs it alone: "
                    "close it there first"
                ) from None
            try:
                before = os.path.getsize(data_file)
                map_size = int(shared.env.info()["map_size"])
                scratch = tempfile.mkdtemp(prefix=_COMPACT_PREFIX, dir=self.path)
                try:
                    copy = os.path.join(scratch, "data.mdb")
                    with lmdb_errors(self.path):
                        shared.env.copy(scratch, compact=True)
                    os.chmod(copy, 0o600)
                    _fsync_path(copy)
                    _unwatch_metas(shared)
                    shared.env.close()
                    try:
                        os.replace(copy, data_file)
                        _fsync_path(self.path)
                    finally:
                        with lmdb_errors(self.path):
                            shared.env = _open_env(self.path, map_size, False, shared.durability)
                            _init_env(shared)
                            _watch_metas(shared)
                        if reopened is not None:
                            reopened()
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
                return before, os.path.getsize(data_file)
            finally:
                fcntl.flock(shared.lock_fd, fcntl.LOCK_SH)

    @contextlib.contextmanager
    def read_at_rest(self, check: Callable[[str], T]) -> Iterator[tuple[T, Any]]:
        """Run ``check(path of data.mdb)`` while every writer of every process is held off, then yield
        ``(check's result, read transaction)`` on exactly the state that was checked.

        Writers are released once the read transaction has begun. On a read-only handle other
        processes' writers cannot be held off. The read transaction is None if ``check`` returned
        something truthy (a damaged file must not be read through LMDB).
        """
        shared = self._live()
        data_file = os.path.join(self.path, "data.mdb")
        read_only = self.read_only

        def begin(shared: _Shared) -> tuple[T, Any]:
            wtxn = None if read_only else _begin_write(shared)
            try:
                result = check(data_file)
                return result, None if result else _begin_read(shared)
            finally:
                if wtxn is not None:
                    wtxn.abort()

        with lmdb_errors(self.path):
            with shared.write_lock:
                result, rtxn = shared.gate.begin(begin, shared)
            try:
                yield result, rtxn
            finally:
                try:
                    if rtxn is not None:
                        rtxn.abort()
                finally:
                    shared.gate.leave()
