"""What a store's files must be before LMDB may touch them, and the head witness.

LMDB trusts its files: it maps ``data.mdb`` and reads whatever the meta pages point at, and it
opens ``lock.mdb`` for writing wherever it leads. This module is the check in front of it, run by
:mod:`coniti.log.store` at every open and by ``verify``:

* **The directory** (:func:`check_directory`). A store directory others may write (group- or
  world-writable) is refused, as ssh refuses loose key permissions: whoever may write it may plant
  a ``lock.mdb`` symlink (LMDB then overwrites the link's target) or swap ``data.mdb``. A writable
  open also refuses a directory owned by another user; a read-only open accepts one (reading
  another user's store is what read-only opens are for: their owner is trusted, no one else). The
  store's files must be regular files, not symbolic links, and not writable by group or others. A
  writable open of a non-empty directory that holds no store is refused (no LMDB files are written
  next to a user's files).
* **The data file's length** (:func:`size_problem`). LMDB's two meta pages (pages 0 and 1) name the
  last page a state uses (``mm_last_pg``); a file shorter than ``(last page + 1) × page size`` would
  make LMDB read past its end, which kills the process with SIGBUS. Such a file is refused.
* **The head witness** (:class:`Witness`), a small file ``head.witness`` beside ``data.mdb`` naming the
  store id and the head (sequence number, hash) of a commit known to be durable. It is rewritten
  after each durable commit (without a flush of its own), so it can lag the store's head but never
  run ahead of it; a store whose head is behind its witness, or whose event at the witness's
  sequence number has another hash, or whose id differs, lost acknowledged commits or is another
  store's file: refused (:func:`witness_problem`). See ``log/FORMAT.md`` §12 for exactly what this
  detects and what it cannot.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import stat
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from coniti.errors import StoreError

__all__ = [
    "DATA_FILE",
    "MetaTxnids",
    "STORE_FILES",
    "WITNESS_FILE",
    "Witness",
    "check_directory",
    "check_files",
    "make_private_dirs",
    "open_witness",
    "size_problem",
    "witness_problem",
    "write_witness",
]

DATA_FILE = "data.mdb"
LOCK_FILE = "lock.mdb"
WITNESS_FILE = "head.witness"
STORE_FILES = (DATA_FILE, LOCK_FILE, WITNESS_FILE)
"""The files of a store directory (besides a compaction's leftover ``.compact-*`` directories)."""

_LOOSE = stat.S_IWGRP | stat.S_IWOTH


def _owner(uid: int) -> str:
    with contextlib.suppress(KeyError, ImportError):
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    return f"uid {uid}"


def _refuse_loose(st: os.stat_result, what: str, fix: str) -> None:
    """Refuse ``what`` (its ``st``) if its group or others may write it, saying ``fix``."""
    if st.st_mode & _LOOSE:
        raise StoreError(
            f"{what} is writable by its group or others (mode {stat.S_IMODE(st.st_mode):04o}): "
            f"they could replace the store's files. Fix it with: {fix}"
        )


def make_private_dirs(path: str) -> None:
    """Create ``path`` and every missing parent with mode 0700 (whatever the umask)."""
    missing = []
    head = path
    while head and not os.path.exists(head):
        missing.append(head)
        head = os.path.dirname(head)
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, 0o700)
        os.chmod(d, 0o700)


def check_directory(path: str, read_only: bool) -> None:
    """Refuse a store directory that others may write, or (``read_only`` False) that belongs to
    another user or is a non-empty directory holding no store. Raises :class:`StoreError` saying how
    to fix it."""
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise StoreError(f"store path {path} exists and is not a directory")
    _refuse_loose(st, f"store directory {path}", f"chmod 700 {path}")
    me = os.geteuid()
    if not read_only and st.st_uid != me:
        raise StoreError(
            f"store directory {path} is owned by {_owner(st.st_uid)}, not by you ({_owner(me)}): a "
            f"store is written only by its owner. Open it read-only, or give it to yourself with: "
            f"chown -R {me} {path}"
        )
    if not read_only and not os.path.lexists(os.path.join(path, DATA_FILE)):
        others = [n for n in os.listdir(path) if n not in STORE_FILES]
        if others:
            raise StoreError(
                f"{path} is not empty and holds no coniti store (it has {others[0]!r}"
                f"{' and more' if len(others) > 1 else ''}): choose a new or empty directory"
            )
    check_files(path)


def check_files(path: str) -> None:
    """Refuse store files that are symbolic links, not regular files, or writable by others."""
    for name in STORE_FILES:
        full = os.path.join(path, name)
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode):
            raise StoreError(
                f"{full} is a symbolic link: a store's files must be regular files in its directory "
                f"(a planted link would make LMDB write through it). Remove it: rm {full}"
            )
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(f"{full} is not a regular file; remove it")
        _refuse_loose(st, full, f"chmod 600 {full}")


# -- the data file against its meta pages --------------------------------------------------------

# LMDB 0.9 on a 64-bit build (mdb.c): a page begins with a 16-byte header (pgno, pad, flags u16,
# lower, upper); a meta page's MDB_meta follows: magic u32, version u32, address, mapsize, then two
# MDB_db of 48 bytes (the first one's u32 md_pad is the page size), last_pg, txnid.
_MAGIC = 0xBEEFC0DE
_P_META = 0x08
_META = struct.Struct("<8x2xH4xII8x8xI44x48xQQ")
"""(page flags, magic, version, page size, last page, txnid) of a meta page's first 152 bytes."""


def _meta(raw: bytes) -> tuple[int, int, int] | None:
    """(page size, last page, txnid) of a valid meta page, else None."""
    if len(raw) < _META.size:
        return None
    flags, magic, version, psize, last_pg, txnid = _META.unpack_from(raw)
    if not flags & _P_META or magic != _MAGIC or version != 1 or psize < 512 or psize & (psize - 1):
        return None
    return psize, last_pg, txnid


_TXNID_AT = _META.size - 8
"""Where a meta page's txnid (a native 64-bit word) lies in its page: the last field of :data:`_META`."""


class MetaTxnids:
    """The txnids the two meta pages of a data file name now, read through a read-only shared map
    of those two pages (a commit's meta page write shows there as soon as it is made, before LMDB
    publishes the commit in its lock file). The file must hold both pages (LMDB writes them when it
    creates the file)."""

    __slots__ = ("_first", "_map", "_second", "_words")

    def __init__(self, data_file: str, psize: int) -> None:
        fd = os.open(data_file, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            self._map = mmap.mmap(fd, 2 * psize, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        self._words = memoryview(self._map).cast("Q")
        self._first = _TXNID_AT // 8
        self._second = (psize + _TXNID_AT) // 8

    def past(self, txnid: int) -> bool:
        """Whether either meta page names a commit after ``txnid``."""
        words = self._words
        return words[self._first] > txnid or words[self._second] > txnid

    def close(self) -> None:
        self._words.release()
        self._map.close()


def size_problem(data_file: str) -> str | None:
    """Why ``data_file`` is shorter than its newest valid meta page needs (truncated), or None (also
    None when there is no file or it is empty: LMDB makes a new one)."""
    try:
        fd = os.open(data_file, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return None
        first = os.pread(fd, _META.size, 0)
        m0 = _meta(first)
        psize = m0[0] if m0 is not None else 4096
        m1 = _meta(os.pread(fd, _META.size, psize))
        # The length once the meta pages are read: a commit writes its pages (growing the file)
        # before its meta page, so a length taken before them may miss a commit they name.
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    metas = [m for m in (m0, m1) if m is not None]
    if not metas:
        return (
            f"{data_file} is truncated or damaged: neither of its LMDB meta pages is valid "
            f"({size} bytes)"
        )
    psize, last_pg, _ = max(metas, key=lambda m: m[2])
    need = (last_pg + 1) * psize
    if size < need:
        return (
            f"{data_file} is truncated: its LMDB meta page names page {last_pg} of {psize} bytes, "
            f"so the file needs {need} bytes, but it has {size}"
        )
    return None


# -- the head witness ------------------------------------------------------------------------------

_WITNESS = struct.Struct(">8s16sQ32sI")
_WITNESS_MAGIC = b"cnt-head"


@dataclass(frozen=True)
class Witness:
    """A durable commit the store must still hold: its store id, head sequence number and hash."""

    store_id: bytes
    seq: int
    hash: bytes

    def encode(self) -> bytes:
        body = _WITNESS_MAGIC + self.store_id + struct.pack(">Q", self.seq) + self.hash
        return body + struct.pack(">I", zlib.crc32(body))

    @classmethod
    def decode(cls, raw: bytes) -> Witness | None:
        """The witness in ``raw``, or None when it is not a whole one (a write torn by a crash)."""
        if len(raw) != _WITNESS.size:
            return None
        magic, sid, seq, h, crc = _WITNESS.unpack(raw)
        if magic != _WITNESS_MAGIC or zlib.crc32(raw[:-4]) != crc:
            return None
        return cls(sid, seq, h)

    @classmethod
    def read(cls, path: str) -> Witness | None:
        """The witness of store directory ``path``; None if there is none, it cannot be read (a
        reader without permission) or it is torn."""
        try:
            fd = os.open(os.path.join(path, WITNESS_FILE), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            return cls.decode(os.pread(fd, _WITNESS.size + 1, 0))
        finally:
            os.close(fd)


def open_witness(path: str) -> int:
    """A file descriptor for writing the witness of store directory ``path`` (created 0600)."""
    return os.open(
        os.path.join(path, WITNESS_FILE),
        os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
        0o600,
    )


def write_witness(fd: int, witness: Witness) -> None:
    """Overwrite the witness in place (one small write, no flush: it may lag, never lead)."""
    os.pwrite(fd, witness.encode(), 0)


def witness_problem(
    path: str,
    witness: Witness | None,
    store_id: bytes,
    head_seq: int,
    head_hash: bytes,
    hash_of: Callable[[int], bytes | None],
) -> str | None:
    """Why the store's state contradicts its witness, or None. ``hash_of(seq)`` gives the hash of
    event ``seq`` of the log (None when the log lacks it)."""
    if witness is None:
        return None
    fix = (f"if this store was restored or copied on purpose, accept its state by deleting "
           f"{os.path.join(path, WITNESS_FILE)}")
    if witness.store_id != store_id:
        return (f"store {path}: data.mdb is another store's file (id {store_id.hex()}); this "
                f"directory's head witness names store {witness.store_id.hex()}; {fix}")
    if head_seq < witness.seq:
        return (f"store {path} lost acknowledged commits: its log ends at event {head_seq}, but "
                f"event {witness.seq} was acknowledged as durable (LMDB rolled back to an older "
                f"meta page, or data.mdb was replaced by an older copy); {fix}")
    found = head_hash if head_seq == witness.seq else hash_of(witness.seq)
    if found != witness.hash:
        return (f"store {path}: event {witness.seq} is not the one acknowledged as durable (its "
                f"hash differs from the head witness): the log was rewritten or replaced; {fix}")
    return None
