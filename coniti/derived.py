"""Derived state on disk: snapshots of the engine's indexes, tagged with the event they reflect.

This module is the one place that knows the on-disk layout of derived state (``log/DERIVED.md``
describes it for readers of the store). Derived state is never authoritative: a snapshot that fails
any check is not used, and the engine rebuilds it from memory. What it holds and how it is checked:

* A **snapshot** is one manifest plus a data directory holding one file of arrays
  (:data:`ARRAYS_FILE`: every array's bytes in C order at an offset that is a multiple of
  :data:`ALIGN`), under a name the caller chooses (the engine: one per namespace and engine
  configuration). The manifest ``<name>.json`` records the format (:data:`FORMAT`), the store's
  id, the caller's ``key`` (what must match for the snapshot to apply: embedding id, structures
  and their options), the sequence number ``seq`` the state reflects and the hash of the event at
  ``seq``, the file and its size, and per array its offset, dtype (numpy's ``dtype.str``, byte
  order explicit), shape, size in bytes, its ``checksum`` (:data:`CHECKSUM`, CRC-32C; an entry
  without one was written with zlib's CRC-32, and is checked with it) and that checksum of each 16
  MiB block of its data. The bytes between arrays (zeros) are never read. A snapshot of format 2
  (one numpy ``.npy`` file per array, the entry naming its file and the file's size) is still
  read, with the same checks.
* **Parts.** A snapshot holds named parts, each a dict of named arrays: the engine writes
  ``structure.0``, ``structure.1`` ... from :meth:`~coniti.structure.Structure.derived_state`.
  Another derived index (a keyword index, say) adds its own part: it must give its whole state as
  arrays that reflect exactly the events up to ``seq``, and be able to catch up from the events
  after ``seq`` (the engine's event feed) once restored. Bytes go in as ``uint8`` arrays.
* **Writing** (:meth:`DerivedDir.save`) is crash-safe: the arrays go to a fresh directory
  ``<name>.<random>`` (the file fsynced, then the directory), then the manifest is replaced atomically
  (temporary file, fsync, rename, directory fsync); only then are older directories of the name
  removed. A kill at any point leaves the previous snapshot or the new one, never a mix; leftovers
  are removed by the next save. Saves of one name are serialised by an ``flock`` on ``<name>.lock``.
* **Reading** (:meth:`DerivedDir.load`) refuses, with :class:`StaleSnapshot` naming the reason, a
  manifest that is missing, unreadable or of another format, another store's id, another key, a
  ``seq`` beyond the head or whose event hash differs (a store rebuilt, swapped or rolled back), a
  file missing, of another size or a symbolic link, and an array entry whose dtype, shape, size or
  offset does not fit the file. The file is memory mapped read-only once (each array a view of the
  map, ``np.frombuffer``) and the arrays' checksum blocks checked at load, except the arrays the
  caller names in ``defer`` that span several blocks: those come with a :class:`BlockCheck`, and
  their owner checks each block on first touch, before any of its bytes is read (a full-range
  search checks the next blocks on a thread pool while it scores the ones already checked). A
  block that fails raises :class:`StaleSnapshot` then, and at every later touch. CRC-32C (the
  ``crc32c`` package, SSE 4.2 instructions) costs about 0.07 s of CPU per GB here, zlib's CRC-32
  of older snapshots about 0.7 s (it was the largest part of an open at 1M rows).

Symbolic links are never followed: a directory of snapshots that is a symbolic link (``derived/`` of
a store pointing elsewhere) is refused with :class:`~coniti.errors.StoreError` when a
:class:`DerivedDir` is made and at every save, load and drop, as the store refuses symlinked store
files; a link under it is refused too (a manifest, data directory or array file that is one is not
read: :class:`StaleSnapshot`; a lock file that is one is not opened: ``StoreError``), and a save
replaces a linked manifest by renaming over it, never writing through it.

Thread-safety: a :class:`DerivedDir` holds no state beyond its path; concurrent saves of one name
from several processes are serialised by the lock, and a reader racing a save sees the old or the
new snapshot (or, if the old directory was removed meanwhile, a refusal, never a mix; a mapped file
stays readable after a save unlinks it). A :class:`BlockCheck` is not thread-safe: its owner
serialises the calls (the engine's lock); only the CRCs run on other threads.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import mmap
import os
import secrets
import shutil
import stat
import zlib
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from coniti.atomicfile import atomic_writer, fsync_dir
from coniti.errors import EngineError, StoreError
from coniti.packed import PackedStrings

__all__ = [
    "CHECKSUM",
    "CRC_BLOCK",
    "FORMAT",
    "BlockCheck",
    "DerivedDir",
    "Loaded",
    "StaleSnapshot",
    "pack_strings",
    "snapshot_name",
    "unpack_strings",
]

FORMAT = 3
"""The manifest format this module writes: every array of a snapshot in one file
(:data:`ARRAYS_FILE`). Format 2 (one ``.npy`` file per array) is still read; format 1, the layout of
format 2, is refused (the engine rebuilds from the log once): code that wrote it could save wrong
structure rows (after a merge of restored rows, a removed id pointed at another note's row and a
later write of it ended that row; or a merge that failed left the rows moved and their ids not, and
a later save kept that). ``log/DERIVED.md`` says more."""

_FORMAT_FILES = 2
"""The older format still read: one ``.npy`` file per array in the data directory."""

ARRAYS_FILE = "arrays"
"""The one file of a format-3 snapshot's data directory: each array's bytes (C order) at its
manifest entry's ``offset``, a multiple of :data:`ALIGN`, zeros between them."""

ALIGN = 64
"""Where a format-3 snapshot's arrays start: at multiples of this many bytes."""

CHECKSUM = "crc32c"
"""The checksum of the blocks a save writes (a manifest entry's ``checksum``): CRC-32C (Castagnoli),
from the ``crc32c`` package, about ten times zlib's CRC-32 on this machine."""

CRC_BLOCK = 1 << 24
"""Bytes per checksum block of the arrays a save writes (16 MiB; each manifest entry records its
own, ``crc32_block``): blocks are checksummed on several threads (both checksums release the GIL),
and a deferred check reads only the blocks that are touched."""

_FORMAT1_BLOCK = 1 << 24
"""The block of a manifest entry without ``crc32_block`` (written before it was recorded)."""

_FORMAT1_CHECKSUM = "crc32"
"""The checksum of a manifest entry without ``checksum`` (written before it was recorded)."""

_POOL_SIZE = max(1, min(8, os.cpu_count() or 1))


class StaleSnapshot(EngineError):
    """A snapshot that must not be used (missing, torn, stale or another store's); the message
    names why. The engine rebuilds the state instead; nothing is ever read from such a snapshot."""


@dataclass(frozen=True)
class Loaded:
    """A snapshot that passed the checks of :meth:`DerivedDir.load`: the event it reflects, its
    parts' arrays (mapped) and, per ``part/field`` whose checksum check was deferred, its
    :class:`BlockCheck` (its owner must run it before reading the array's bytes)."""

    seq: int
    parts: dict[str, dict[str, np.ndarray]]
    checks: dict[str, BlockCheck] = field(default_factory=dict)

    def part_checks(self, part: str) -> dict[str, BlockCheck]:
        """The deferred checks of ``part``'s arrays, by field."""
        prefix = f"{part}/"
        return {k[len(prefix) :]: c for k, c in self.checks.items() if k.startswith(prefix)}


class BlockCheck:
    """The checksum check of one mapped array, done block by block on first touch.

    Rows are the array's first axis. :meth:`rows` checks every block holding a byte of rows
    ``[a, b)``; :meth:`spans` yields ``[a, b)`` in row spans, each after its blocks passed, while the
    blocks still ahead are checked on a thread pool (so a caller reading the spans in order overlaps
    its work with the checks); :meth:`all` checks what is left. A block that fails raises
    :class:`StaleSnapshot` (naming the file) and the check stays failed: every later call raises.
    Passed blocks are never read again."""

    def __init__(
        self,
        name: str,
        file: str,
        array: np.ndarray,
        crcs: list[int],
        block: int,
        checksum: str,
    ) -> None:
        self._what = f"snapshot {name}: {file}"
        self._checksum = _CHECKSUMS[checksum]
        self._bytes = array.reshape(-1).view(np.uint8)  # a view of the map: nothing is read here
        self._rows = array.shape[0] if array.ndim else 1
        self._row_bytes = self._bytes.shape[0] // self._rows if self._rows else 0
        self._crcs = crcs
        self._block = block
        self._passed = np.zeros(len(crcs), dtype=bool)
        self._left = len(crcs)
        self.failure: str | None = None
        """The reason the check failed (None while every block touched so far passed)."""

    def __repr__(self) -> str:
        return f"BlockCheck({self._what!r}, {self._left} of {len(self._crcs)} blocks unchecked)"

    @property
    def done(self) -> bool:
        """Every block passed: the array can be read freely."""
        return self._left == 0

    @property
    def blocks(self) -> int:
        """How many checksum blocks the array has."""
        return len(self._crcs)

    def all(self) -> None:
        """Check every block not yet checked (on the pool)."""
        self.rows(0, self._rows)

    def rows(self, a: int, b: int) -> None:
        """Check the blocks holding rows ``[a, b)`` (those not yet checked, on the pool)."""
        for _ in self.spans(a, b):
            pass

    def passed(self, a: int, b: int) -> bool:
        """Whether every block holding a byte of rows ``[a, b)`` has passed already (rows ``[a, b)``
        can be read without a check; False once the check failed)."""
        if self.failure is not None:
            return False
        if b <= a or self._left == 0 or self._row_bytes == 0:
            return True
        first, last = self._blocks_of(a, b)
        return bool(self._passed[first:last].all())

    def _blocks_of(self, a: int, b: int) -> tuple[int, int]:
        """The blocks ``[first, last)`` holding a byte of rows ``[a, b)`` (``a < b``)."""
        return a * self._row_bytes // self._block, -(-b * self._row_bytes // self._block)

    def spans(self, a: int, b: int) -> Iterator[tuple[int, int]]:
        """Rows ``[a, b)`` as consecutive spans, each yielded once its blocks passed."""
        if self.failure is not None:
            raise StaleSnapshot(self.failure)
        if b <= a:
            return
        if self._left == 0 or self._row_bytes == 0:
            yield a, b
            return
        first, last = self._blocks_of(a, b)  # last: one past the last block touched
        todo = [i for i in range(first, last) if not self._passed[i]]
        if not todo:
            yield a, b
            return
        with contextlib.ExitStack() as stack:
            futures: dict[int, Future[int]] = {}
            if len(todo) > 1:
                pool = stack.enter_context(
                    ThreadPoolExecutor(max_workers=min(_POOL_SIZE, len(todo)))
                )  # fmt: skip
                futures = {i: pool.submit(self._checksum, self._block_bytes(i)) for i in todo}
                stack.callback(lambda: [f.cancel() for f in futures.values()])
            start = a
            for i in range(first, last):
                if not self._passed[i]:
                    found = futures[i].result() if futures else self._checksum(self._block_bytes(i))
                    self._settle(i, found)
                stop = b if i == last - 1 else min(b, (i + 1) * self._block // self._row_bytes)
                if stop > start:
                    yield start, stop
                    start = stop

    def _block_bytes(self, i: int) -> np.ndarray:
        return self._bytes[i * self._block : (i + 1) * self._block]

    def _settle(self, i: int, found: int) -> None:
        if found != self._crcs[i]:
            self.failure = f"{self._what} fails its checksum (torn or altered)"
            raise StaleSnapshot(self.failure)
        self._passed[i] = True
        self._left -= 1


def pack_strings(values: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as two arrays: their UTF-8 bytes one after another (``uint8``) and where each ends
    (``int64``): how a snapshot holds ids and keys."""
    encoded = [v.encode("utf-8", "surrogatepass") for v in values]
    ends = np.cumsum(np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded)))
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), ends.astype(np.int64)


def unpack_strings(raw: np.ndarray, ends: np.ndarray) -> list[str]:
    """The strings of :func:`pack_strings`. Raises ``ValueError`` for arrays that do not fit."""
    return PackedStrings(raw, ends).tolist()


def snapshot_name(namespace: tuple[str, ...], key: Mapping[str, Any]) -> str:
    """The file name of the snapshot of ``namespace`` under ``key`` (a hash: any namespace fits)."""
    text = json.dumps([list(namespace), key], sort_keys=True, separators=(",", ":"))
    return "ns-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _crc32(data: np.ndarray) -> int:
    """zlib's CRC-32 of a 1-d ``uint8`` array (releases the GIL): snapshots written before
    :data:`CHECKSUM` was recorded."""
    return zlib.crc32(data.data)


def _crc32c(data: np.ndarray) -> int:
    """The CRC-32C of a 1-d ``uint8`` array (``crc32c`` releases the GIL on large buffers;
    imported on first use: an engine that keeps no snapshot never loads it)."""
    import crc32c

    return crc32c.crc32c(data.data)


_CHECKSUMS: dict[str, Callable[[np.ndarray], int]] = {"crc32": _crc32, "crc32c": _crc32c}
"""A manifest entry's ``checksum`` -> the function computing it (called through this table, so a
benchmark can wrap its entries to time them)."""


def _crcs(array: np.ndarray) -> list[int]:
    """The :data:`CHECKSUM` of each :data:`CRC_BLOCK` bytes of the array's data, on a thread pool."""
    checksum = _CHECKSUMS[CHECKSUM]
    flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    blocks = [flat[a : a + CRC_BLOCK] for a in range(0, flat.shape[0], CRC_BLOCK)]
    if len(blocks) <= 1:
        return [checksum(b) for b in blocks]
    with ThreadPoolExecutor(max_workers=min(_POOL_SIZE, len(blocks))) as pool:
        return list(pool.map(checksum, blocks))


def _refuse_link(path: Path) -> None:
    """Raise :class:`StoreError` if the snapshot directory ``path`` is a symbolic link or exists
    and is not a directory."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise StoreError(
            f"{path} is a symbolic link: an engine keeps its derived state in a real directory "
            f"(a planted link would make it write through it). Remove it: rm {path}"
        )
    if not stat.S_ISDIR(mode):
        raise StoreError(f"{path} is not a directory; remove it")


class DerivedDir:
    """Snapshots of derived state in ``path`` (created 0700) for the store ``store_id``. Raises
    :class:`~coniti.errors.StoreError` if ``path`` is a symbolic link (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str], store_id: str) -> None:
        self.path = Path(path)
        self.store_id = store_id
        _refuse_link(self.path)

    def __repr__(self) -> str:
        return f"DerivedDir({str(self.path)!r})"

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        _refuse_link(self.path)
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        _refuse_link(self.path)
        lock = self.path / f"{name}.lock"
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise StoreError(f"{lock} is a symbolic link; remove it: rm {lock}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def save(
        self,
        name: str,
        *,
        seq: int,
        seq_hash: str,
        key: Mapping[str, Any],
        parts: Mapping[str, Mapping[str, np.ndarray]],
    ) -> None:
        """Write a snapshot of ``parts`` reflecting event ``seq`` (whose hash is ``seq_hash``),
        replacing the previous one of ``name`` atomically (see the module docstring)."""
        with self._locked(name):
            token = secrets.token_hex(8)
            data = self.path / f"{name}.{token}"
            data.mkdir(mode=0o700)
            try:
                entries, size = _write_arrays(data / ARRAYS_FILE, parts)
                fsync_dir(data)
                manifest = {
                    "format": FORMAT,
                    "store_id": self.store_id,
                    "key": dict(key),
                    "seq": seq,
                    "seq_hash": seq_hash,
                    "data": data.name,
                    "file": ARRAYS_FILE,
                    "bytes": size,
                    "arrays": entries,
                }
                with atomic_writer(self.path / f"{name}.json") as out:
                    out.write(json.dumps(manifest, sort_keys=True).encode("utf-8"))
            except BaseException:
                shutil.rmtree(data, ignore_errors=True)
                raise
            for old in self.path.glob(f"{name}.*"):
                if old.is_dir() and old.name != data.name:
                    shutil.rmtree(old, ignore_errors=True)

    def load(
        self,
        name: str,
        *,
        key: Mapping[str, Any],
        head: int,
        hash_at: Callable[[int], str],
        defer: Collection[str] = (),
    ) -> Loaded:
        """The snapshot ``name`` if it passes every check, else :class:`StaleSnapshot`.

        ``head``: the store's last sequence number; ``hash_at(seq)``: the hash of event ``seq`` in
        the store now (both from the backend). ``defer``: the ``part/field`` labels whose checksum
        check the caller runs itself, on first touch (:attr:`Loaded.checks`); an array of one block
        is checked here all the same."""
        _refuse_link(self.path)
        manifest_path = self.path / f"{name}.json"
        if os.path.islink(manifest_path):
            raise StaleSnapshot(f"snapshot {name}: the manifest is a symbolic link")
        try:
            manifest = json.loads(manifest_path.read_bytes())
        except FileNotFoundError:
            raise StaleSnapshot(f"no snapshot {name}") from None
        except (OSError, ValueError) as exc:
            raise StaleSnapshot(f"snapshot {name}: unreadable manifest ({exc})") from None
        fmt = manifest.get("format") if isinstance(manifest, dict) else None
        if fmt not in (FORMAT, _FORMAT_FILES) or isinstance(fmt, bool):
            raise StaleSnapshot(f"snapshot {name}: format {fmt!r}, not {FORMAT}")
        if manifest.get("store_id") != self.store_id:
            raise StaleSnapshot(f"snapshot {name}: written for another store")
        if manifest.get("key") != json.loads(json.dumps(dict(key))):
            raise StaleSnapshot(f"snapshot {name}: written for another configuration")
        seq = manifest.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0 or seq > head:
            raise StaleSnapshot(f"snapshot {name}: seq {seq!r} is not in the log (head {head})")
        if manifest.get("seq_hash") != hash_at(seq):
            raise StaleSnapshot(f"snapshot {name}: event {seq} has another hash in the store")
        data_name = str(manifest.get("data"))
        data = self.path / data_name
        if os.path.basename(data_name) != data_name or data_name in (".", "..") or os.path.islink(data):
            raise StaleSnapshot(f"snapshot {name}: its data directory is not a directory beside it")
        parts: dict[str, dict[str, np.ndarray]] = {}
        checks: dict[str, BlockCheck] = {}
        arrays = manifest.get("arrays")
        if not isinstance(arrays, dict):
            raise StaleSnapshot(f"snapshot {name}: no array table")
        mapped = _map_arrays(name, data, manifest) if fmt == FORMAT else None
        for label, entry in arrays.items():
            part, _, field_name = str(label).partition("/")
            if mapped is None:
                array, check = _load_array(name, data, entry)
            else:
                array, check = _view_array(name, mapped, str(label), entry)
            if check.blocks > 1 and label in defer:
                checks[label] = check
            else:
                check.all()
            parts.setdefault(part, {})[field_name] = array
        return Loaded(seq, parts, checks)

    def drop(self, name: str) -> None:
        """Remove the snapshot ``name`` (its manifest first, then its directories)."""
        with self._locked(name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path / f"{name}.json")
            for old in self.path.glob(f"{name}.*"):
                if old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)


def _mapped(file: Path) -> np.ndarray:
    """The array of the ``.npy`` file ``file``, read-only and memory mapped, as
    ``np.load(file, mmap_mode="r", allow_pickle=False)`` gives it, without numpy's ``memmap``
    subclass and its resolution of the path (about 0.4 ms less an array here, and a snapshot has
    about 33 arrays a namespace). Raises ValueError for an object dtype, Fortran order or a file
    shorter than its header says; a header version other than 1.0 and 2.0 goes through ``np.load``."""
    with open(file, "rb") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            loaded: np.ndarray = np.load(file, mmap_mode="r", allow_pickle=False)
            return loaded
        if dtype.hasobject:
            raise ValueError(f"{file.name} holds Python objects")
        if fortran:
            raise ValueError(f"{file.name} is in Fortran order")
        offset = f.tell()
        count = 1
        for side in shape:
            count *= int(side)
        if count == 0:
            empty = np.empty(shape, dtype)
            empty.flags.writeable = False
            return empty
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    if len(mapped) < offset + count * dtype.itemsize:
        raise ValueError(f"{file.name} is shorter than its header says")
    return np.frombuffer(mapped, dtype=dtype, count=count, offset=offset).reshape(shape)


def _write_arrays(
    path: Path, parts: Mapping[str, Mapping[str, np.ndarray]]
) -> tuple[dict[str, dict[str, Any]], int]:
    """Write every array of ``parts`` into the new file ``path`` (format 3: C order, each at an
    offset that is a multiple of :data:`ALIGN`), fsynced; returns the manifest's array table and
    the file's size. Raises ``ValueError`` for an array of Python objects."""
    entries: dict[str, dict[str, Any]] = {}
    offset = 0
    with open(path, "xb", opener=lambda p, flags: os.open(p, flags, 0o600)) as out:
        for part, arrays in parts.items():
            for field_name, array in arrays.items():
                # np.require keeps a 0-d array 0-d (ascontiguousarray makes it 1-d)
                held = np.require(array, requirements="C")
                if held.dtype.hasobject or held.dtype.fields is not None:
                    raise ValueError(f"{part}/{field_name}: a snapshot holds plain arrays only")
                pad = -offset % ALIGN
                out.write(bytes(pad))
                offset += pad
                out.write(held.reshape(-1).view(np.uint8).data)
                entries[f"{part}/{field_name}"] = {
                    "offset": offset,
                    "dtype": held.dtype.str,
                    "shape": list(held.shape),
                    "bytes": held.nbytes,
                    "checksum": CHECKSUM,
                    "crc32_block": CRC_BLOCK,
                    "crc32_blocks": _crcs(held),
                }
                offset += held.nbytes
        out.flush()
        os.fsync(out.fileno())
    return entries, offset


def _map_arrays(name: str, data: Path, manifest: dict[str, Any]) -> mmap.mmap | bytes:
    """The format-3 file of the snapshot ``name`` mapped read-only (``b""`` when empty), after its
    name, kind (a regular file, not a symbolic link) and size are checked against ``manifest``."""
    file = manifest.get("file")
    size = manifest.get("bytes")
    if not isinstance(file, str) or os.path.basename(file) != file or file in ("", ".", ".."):
        raise StaleSnapshot(f"snapshot {name}: its arrays file is not a file name")
    if isinstance(size, bool) or not isinstance(size, int):
        raise StaleSnapshot(f"snapshot {name}: no size of its arrays file")
    try:
        fd = os.open(data / file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        why = "is a symbolic link" if exc.errno == errno.ELOOP else f"is unreadable ({exc})"
        raise StaleSnapshot(f"snapshot {name}: {file} {why}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StaleSnapshot(f"snapshot {name}: {file} is not a regular file")
        if info.st_size != size:
            raise StaleSnapshot(f"snapshot {name}: {file} has another size (torn?)")
        if size == 0:
            return b""
        try:
            return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise StaleSnapshot(f"snapshot {name}: {file} cannot be mapped ({exc})") from None
    finally:
        os.close(fd)


def _view_array(
    name: str, mapped: mmap.mmap | bytes, label: str, entry: Any
) -> tuple[np.ndarray, BlockCheck]:
    """The array ``label`` of a format-3 snapshot: a read-only view of the mapped file at the
    entry's offset, after its dtype, shape, size and place are checked, and the check of its
    checksum blocks (not run yet)."""
    try:
        offset, shape, size = entry["offset"], entry["shape"], entry["bytes"]
        dtype = np.dtype(str(entry["dtype"]))
        if dtype.str != entry["dtype"] or dtype.hasobject or dtype.fields is not None:
            raise ValueError(f"dtype {entry['dtype']!r} is not a plain one")
        if not isinstance(shape, list) or not all(
            isinstance(side, int) and not isinstance(side, bool) and side >= 0 for side in shape
        ):
            raise ValueError(f"shape {shape!r}")
        count = 1
        for side in shape:
            count *= side
        if (
            any(isinstance(v, bool) or not isinstance(v, int) for v in (offset, size))
            or size != count * dtype.itemsize or offset < 0 or offset % ALIGN
            or offset + size > len(mapped)
        ):  # fmt: skip
            raise ValueError(f"offset {offset!r} and size {size!r} are not in the file")
    except (KeyError, TypeError, ValueError) as exc:
        raise StaleSnapshot(f"snapshot {name}: unreadable array {label} ({exc})") from None
    if count == 0:
        array = np.empty(shape, dtype)
        array.flags.writeable = False
    else:
        array = np.frombuffer(mapped, dtype=dtype, count=count, offset=offset).reshape(shape)
    return array, _block_check(name, label, array, entry)


def _block_check(name: str, what: str, array: np.ndarray, entry: dict[str, Any]) -> BlockCheck:
    """The check of ``array``'s checksum blocks as ``entry`` lists them (not run yet); raises
    :class:`StaleSnapshot` for a list that cannot be its checks (``what`` names the array)."""
    block, crcs = entry.get("crc32_block", _FORMAT1_BLOCK), entry.get("crc32_blocks")
    checksum = entry.get("checksum", _FORMAT1_CHECKSUM)
    if not isinstance(checksum, str) or checksum not in _CHECKSUMS:
        raise StaleSnapshot(f"snapshot {name}: {what} has an unknown checksum {checksum!r}")
    if (
        isinstance(block, bool) or not isinstance(block, int) or block < 1
        or not isinstance(crcs, list) or len(crcs) != -(-array.nbytes // block)
        or not all(isinstance(c, int) and not isinstance(c, bool) for c in crcs)
    ):  # fmt: skip
        raise StaleSnapshot(f"snapshot {name}: {what} has no valid checksum list")
    return BlockCheck(name, what, array, crcs, block, checksum)


def _load_array(name: str, data: Path, entry: Any) -> tuple[np.ndarray, BlockCheck]:
    """One array of a manifest, mapped, after its size, dtype and shape are checked, and the
    check of its checksum blocks (not run yet)."""
    try:
        file = data / str(entry["file"])
        if os.path.basename(str(entry["file"])) != str(entry["file"]):
            raise ValueError("a file name with a directory")
        if os.path.islink(file):
            raise ValueError(f"{entry['file']} is a symbolic link")
        if file.stat().st_size != int(entry["bytes"]):
            raise StaleSnapshot(f"snapshot {name}: {entry['file']} has another size (torn?)")
        array = _mapped(file)
    except StaleSnapshot:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StaleSnapshot(f"snapshot {name}: unreadable array ({exc})") from None
    if str(array.dtype) != entry.get("dtype") or list(array.shape) != entry.get("shape"):
        raise StaleSnapshot(f"snapshot {name}: {entry['file']} has another dtype or shape")
    check = _block_check(name, str(entry["file"]), array, entry)
    if not array.flags.c_contiguous:
        raise StaleSnapshot(f"snapshot {name}: {entry['file']} is not in C order")
    return array, check
