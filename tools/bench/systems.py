"""The systems ``tools/bench.py`` measures, behind one small adapter interface.

* ``log``      coniti's :class:`~coniti.impl.log.LogBackend` (durability ``"sync"``), public API only.
* ``memory``   coniti's :class:`~coniti.impl.memory.InMemoryBackend`, public API only.
* ``lmdb``     raw LMDB, the minimum work coniti's design needs, written here with ``lmdb`` + ``msgpack``:
               per record one msgpack event appended to a log sub-database (u64 big-endian sequence keys,
               ``append=True``), an id index ``(namespace id, record id) -> seq`` and a time index
               ``(namespace id, timestamp, seq)``, all in one durable write transaction (``sync=True``,
               the LMDB default). No hash chain, no counters, no version history, no validation: it is
               the floor coniti is measured against. ``get`` = id index -> log entry -> decode to a full
               record; ``scan`` = time index walk with keyset paging; ``count`` walks the time index.
               ``dump_file`` / ``load_file``: the floor of the memory file (see their docstrings).
* ``sqlite``   ``sqlite3``: one table, WAL, ``synchronous=FULL``, a unique ``(ns, id)`` index and an
               ``(ns, ts)`` index (rowid is the write order), keyset paging on ``(ts, rowid)``; metadata
               in msgpack, the vector as a blob, like the LMDB baseline.

"Full record back" means every field decoded to Python values and the vector to a numpy array: a
``MemoryRecord`` for coniti, a :class:`bench.workload.Raw` tuple for the baselines.

The adapters prepare their input (coniti: validated ``MemoryRecord`` objects, as a caller builds them)
outside the timed section; encoding for storage happens inside it, as it does in coniti.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import struct
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lmdb
import msgpack
import numpy as np
import orjson

from coniti.actor import Note, TimeRange
from coniti.memory import (
    CountRequest,
    GetRequest,
    MemoryBackend,
    MemoryRecord,
    PutRequest,
    ScanRequest,
)

from .workload import EMBEDDING_ID, Raw

__all__ = [
    "SYSTEMS",
    "ConitiSystem",
    "LogNoGroupSystem",
    "LogSystem",
    "MemorySystem",
    "RawLMDB",
    "SQLite",
    "System",
    "make_system",
    "scan_page_of",
]

Namespace = tuple[str, ...]
MAP_SIZE = 1 << 36  # 64 GiB of address space; the file only grows as pages are written


def disk_bytes(path: Path) -> int:
    """Bytes of every regular file under ``path`` except lock files (LMDB's lock.mdb, sqlite's shm)."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for p in path.rglob("*"):
        if p.is_file() and not p.name.endswith(("lock.mdb", "-shm", ".lock")):
            total += p.stat().st_size
    return total


class System(ABC):
    """One store under test. ``open`` may be called again after ``close`` (reopen)."""

    key: str
    label: str
    persistent: bool = True

    def __init__(self, path: Path) -> None:
        self.path = path

    @abstractmethod
    def open(self) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def prepare(self, raws: Sequence[Raw]) -> Any:
        """The system's input for one put call of ``raws`` (untimed)."""

    @abstractmethod
    def put(self, prepared: Any) -> None:
        """One durable put call of a prepared batch."""

    @abstractmethod
    def get(self, namespace: Namespace, record_id: str) -> Any:
        """The full record, or raise KeyError."""

    @abstractmethod
    def scan_page(
        self, namespace: Namespace, cursor: Any, limit: int, start: float | None = None
    ) -> tuple[list[Any], Any]:
        """One page in (timestamp, write order) from ``start`` (or the beginning) after ``cursor``."""

    @abstractmethod
    def count(self, namespace: Namespace, start: float, end: float) -> int: ...

    def disk_bytes(self) -> int:
        return disk_bytes(self.path)

    def destroy(self) -> None:
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)
        if self.path.is_file():
            self.path.unlink()

    def scan_all(self, namespace: Namespace, limit: int = 500) -> int:
        """Read every record of ``namespace`` page by page; returns how many."""
        n = 0
        cursor: Any = None
        while True:
            records, cursor = self.scan_page(namespace, cursor, limit)
            n += len(records)
            if cursor is None:
                return n


# -- coniti ------------------------------------------------------------------------------------


def to_memory_record(raw: Raw) -> MemoryRecord:
    """A validated MemoryRecord, built the way a caller builds one."""
    return MemoryRecord(
        note=Note(id=raw.id, text=raw.text, timestamp=raw.timestamp, metadata=raw.metadata),
        vector=raw.vector,
        embedding_id=EMBEDDING_ID,
        namespace=raw.namespace,
    )


class ConitiSystem(System):
    """A coniti MemoryBackend through its public request API."""

    backend: MemoryBackend | None = None

    @abstractmethod
    def _make(self) -> MemoryBackend: ...

    @property
    def b(self) -> MemoryBackend:
        if self.backend is None:
            raise RuntimeError(f"{self.key} is not open")
        return self.backend

    def open(self) -> None:
        self.backend = self._make()

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()
            self.backend = None

    def prepare(self, raws: Sequence[Raw]) -> list[MemoryRecord]:
        return [to_memory_record(r) for r in raws]

    def put(self, prepared: list[MemoryRecord]) -> None:
        self.b.put(PutRequest(records=prepared))

    def get(self, namespace: Namespace, record_id: str) -> MemoryRecord:
        result = self.b.get(GetRequest(ids=[record_id], namespace=namespace))
        if not result.records:
            raise KeyError(record_id)
        return result.records[0]

    def scan_page(
        self, namespace: Namespace, cursor: Any, limit: int, start: float | None = None
    ) -> tuple[list[Any], Any]:
        return scan_page_of(self.b, namespace, cursor, limit, start)

    def count(self, namespace: Namespace, start: float, end: float) -> int:
        return self.b.count(
            CountRequest(time_range=TimeRange(start=start, end=end), namespace=namespace)
        ).count


def scan_page_of(
    backend: MemoryBackend,
    namespace: Namespace,
    cursor: Any,
    limit: int,
    start: float | None = None,
) -> tuple[list[Any], Any]:
    """One page of ``backend.scan`` (any MemoryBackend, including a time-travel view)."""
    time_range = None if start is None else TimeRange(start=start)
    page = backend.scan(
        ScanRequest(time_range=time_range, namespace=namespace, limit=limit, cursor=cursor)
    )
    return page.records, page.next_cursor


class LogSystem(ConitiSystem):
    key = "log"
    label = "coniti LogBackend"

    def _make(self) -> MemoryBackend:
        from coniti.impl.log import LogBackend

        backend: MemoryBackend = LogBackend(self.path, durability="sync")
        return backend


class LogNoGroupSystem(LogSystem):
    """LogBackend with group commit off: every write call commits (and flushes) on its own. Not in
    :data:`SYSTEMS`: the concurrent phase runs it beside ``log``, on a copy of its store."""

    key = "log_nogc"
    label = "coniti LogBackend, group commit off"

    def _make(self) -> MemoryBackend:
        from coniti.impl.log import LogBackend

        return LogBackend(self.path, durability="sync", group_commit=False)


class MemorySystem(ConitiSystem):
    key = "memory"
    label = "coniti InMemoryBackend"
    persistent = False

    def _make(self) -> MemoryBackend:
        from coniti.impl.memory import InMemoryBackend

        return InMemoryBackend()

    def open(self) -> None:
        if self.backend is None:
            self.backend = self._make()

    def close(self) -> None:
        """Keeps the records: an in-memory store has nothing to reopen. ``destroy`` drops them."""

    def destroy(self) -> None:
        self.backend = None

    def disk_bytes(self) -> int:
        return 0


# -- raw LMDB ----------------------------------------------------------------------------------

_U64 = struct.Struct(">Q")
_F64 = struct.Struct(">d")
_SIGN = 1 << 63
_ALL = (1 << 64) - 1


def encode_ts(t: float) -> bytes:
    """8 bytes whose byte order is the numeric order of the float64 ``t``."""
    (u,) = _U64.unpack(_F64.pack(t))
    return _U64.pack(u ^ _ALL if u & _SIGN else u | _SIGN)


def decode_raw_event(data: bytes, namespace: Namespace) -> Raw:
    ev = msgpack.unpackb(data, raw=False)
    vector = np.frombuffer(ev["b"], dtype=ev["d"]).copy()
    return Raw(ev["i"], ev["x"], ev["t"], ev["m"], vector, namespace)


_LINE = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE
_FLOAT_DTYPES = {name: np.dtype(name) for name in ("float16", "float32", "float64")}


def _line_of(r: Raw) -> bytes:
    """A record's memory-file line as coniti writes it (same dict shape, so the same bytes)."""
    vector = r.vector
    data: dict[str, Any] = {
        "note": {"id": r.id, "text": r.text, "timestamp": r.timestamp, "metadata": r.metadata},
        "vector": vector,
        "embedding_id": EMBEDDING_ID,
        "namespace": list(r.namespace),
    }
    char = vector.dtype.char
    if char == "f":
        data["dtype"] = "float32"
    elif char == "e":
        data["vector"] = vector.astype(np.float32)
        data["dtype"] = "float16"
    return orjson.dumps(data, option=_LINE)


_PACKERS: dict[tuple[str, int], struct.Struct] = {}


def _array_of(values: list[float], dtype: str) -> np.ndarray:
    """A parsed vector as an array: float32/float64 through ``struct`` (about half the time of
    ``np.array`` on a list; coniti's reader casts the same way), float16 through ``np.array``."""
    if dtype == "float16":
        return np.array(values, dtype=np.float16)
    key = (dtype, len(values))
    packer = _PACKERS.get(key)
    if packer is None:
        packer = _PACKERS[key] = struct.Struct(f"={len(values)}{'f' if dtype == 'float32' else 'd'}")
    return np.frombuffer(packer.pack(*values), dtype=_FLOAT_DTYPES[dtype]).copy()


class RawLMDB(System):
    """The LMDB baseline; see the module docstring."""

    key = "lmdb"
    label = "raw LMDB"

    env: lmdb.Environment | None = None

    def open(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.env = env = lmdb.open(str(self.path), map_size=MAP_SIZE, max_dbs=8)
        self.log = env.open_db(b"log")
        self.ids = env.open_db(b"ids")
        self.time = env.open_db(b"time")
        self.nsdb = env.open_db(b"ns")
        self._lock = threading.Lock()
        self.ns_ids: dict[Namespace, bytes] = {}
        with env.begin() as txn:
            for k, v in txn.cursor(db=self.nsdb):
                self.ns_ids[tuple(msgpack.unpackb(k))] = bytes(v)
            cur = txn.cursor(db=self.log)
            self.head = _U64.unpack(cur.key())[0] if cur.last() else 0

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None

    def prepare(self, raws: Sequence[Raw]) -> Sequence[Raw]:
        return raws

    def _ns_id(
        self, txn: lmdb.Transaction, namespace: Namespace, pending: dict[Namespace, bytes]
    ) -> bytes:
        nid = self.ns_ids.get(namespace) or pending.get(namespace)
        if nid is None:
            nid = struct.pack(">I", len(self.ns_ids) + len(pending) + 1)
            txn.put(msgpack.packb(list(namespace)), nid, db=self.nsdb)
            pending[namespace] = nid
        return nid

    def put(self, prepared: Sequence[Raw]) -> None:
        env = self.env
        assert env is not None
        with self._lock:  # one writer's head at a time (LMDB serialises the transactions anyway)
            pending: dict[Namespace, bytes] = {}
            seq = self.head
            with env.begin(write=True) as txn:
                log, ids, time_db = self.log, self.ids, self.time
                for r in prepared:
                    seq += 1
                    skey = _U64.pack(seq)
                    nid = self._ns_id(txn, r.namespace, pending)
                    if not txn.put(nid + r.id.encode(), skey, db=ids, overwrite=False):
                        raise KeyError(f"duplicate id {r.id!r}")  # aborts the transaction
                    vec = r.vector
                    event = {
                        "v": 1,
                        "k": "put",
                        "i": r.id,
                        "x": r.text,
                        "t": r.timestamp,
                        "m": r.metadata,
                        "d": vec.dtype.str,
                        "b": vec.tobytes(),
                        "e": EMBEDDING_ID,
                        "n": nid,
                    }
                    txn.put(skey, msgpack.packb(event), db=log, append=True)
                    txn.put(nid + encode_ts(r.timestamp) + skey, b"", db=time_db)
            self.head = seq
            self.ns_ids.update(pending)

    def get(self, namespace: Namespace, record_id: str) -> Raw:
        env = self.env
        assert env is not None
        nid = self.ns_ids[namespace]
        with env.begin() as txn:
            skey = txn.get(nid + record_id.encode(), db=self.ids)
            if skey is None:
                raise KeyError(record_id)
            return decode_raw_event(txn.get(skey, db=self.log), namespace)

    def scan_page(
        self, namespace: Namespace, cursor: Any, limit: int, start: float | None = None
    ) -> tuple[list[Any], Any]:
        env = self.env
        assert env is not None
        nid = self.ns_ids[namespace]
        first = nid + (encode_ts(start) if start is not None else b"")
        out: list[Raw] = []
        last = None
        with env.begin() as txn:
            cur = txn.cursor(db=self.time)
            found = cur.set_range(cursor + b"\x00" if cursor is not None else first)
            log = self.log
            while found:
                key = cur.key()
                if not key.startswith(nid):
                    break
                if len(out) == limit:
                    return out, last
                out.append(decode_raw_event(txn.get(key[-8:], db=log), namespace))
                last = key
                found = cur.next()
        return out, None

    def dump_file(self, namespace: Namespace, path: Path) -> int:
        """The floor of a memory-file dump: a header line, then every record of ``namespace`` read
        from the store (time index, pages of 500, decoded to a full record) and written as the line
        coniti writes (orjson of the same dict shape), a page per write, then one fsync. No
        ``.partial`` + rename, no count check."""
        n = 0
        with open(path, "wb") as f:
            header = {"format": "coniti-memory", "version": "1.0.0", "namespace": list(namespace)}
            f.write(orjson.dumps(header, option=_LINE))
            cursor: Any = None
            while True:
                records, cursor = self.scan_page(namespace, cursor, 500)
                f.write(b"".join([_line_of(r) for r in records]))
                n += len(records)
                if cursor is None:
                    break
            f.flush()
            os.fsync(f.fileno())
        return n

    def load_file(self, path: Path) -> int:
        """The floor of a memory-file load: every record line read (binary, line by line) and
        parsed (orjson), its vector made an array of its dtype (:func:`_array_of`), and the records
        put in durable batches of 500 (:meth:`put`). No validation, no existence check, no rollback."""
        n = 0
        batch: list[Raw] = []
        with open(path, "rb") as f:
            f.readline()  # the header
            for line in f:
                d = orjson.loads(line)
                note = d["note"]
                vector = _array_of(d["vector"], d.get("dtype", "float64"))
                batch.append(
                    Raw(note["id"], note["text"], note["timestamp"], note["metadata"], vector,
                        tuple(d["namespace"]))
                )  # fmt: skip
                if len(batch) == 500:
                    self.put(batch)
                    n += len(batch)
                    batch = []
        if batch:
            self.put(batch)
            n += len(batch)
        return n

    def count(self, namespace: Namespace, start: float, end: float) -> int:
        env = self.env
        assert env is not None
        nid = self.ns_ids[namespace]
        stop = nid + encode_ts(end)
        n = 0
        with env.begin() as txn:
            cur = txn.cursor(db=self.time)
            if not cur.set_range(nid + encode_ts(start)):
                return 0
            for key in cur.iternext(values=False):
                if key >= stop:
                    break
                n += 1
        return n


# -- sqlite ------------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY,
    ns TEXT NOT NULL,
    id TEXT NOT NULL,
    ts REAL NOT NULL,
    text TEXT NOT NULL,
    meta BLOB NOT NULL,
    dtype TEXT NOT NULL,
    vec BLOB NOT NULL,
    emb TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS records_id ON records (ns, id);
CREATE INDEX IF NOT EXISTS records_ts ON records (ns, ts);
"""

_INSERT = (
    "INSERT INTO records (ns, id, ts, text, meta, dtype, vec, emb) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_COLS = "id, ts, text, meta, dtype, vec"


def _ns_key(namespace: Namespace) -> str:
    return "\x1f".join(namespace)


class SQLite(System):
    """The sqlite baseline; see the module docstring. One connection per thread."""

    key = "sqlite"
    label = "sqlite3 (WAL, FULL)"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self.is_open = False

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if not self.is_open:
                raise RuntimeError("sqlite is not open")
            conn = sqlite3.connect(
                self.path / "records.db", isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA busy_timeout=60000")
            self._local.conn = conn
            with self._conns_lock:
                self._conns.append(conn)
        return conn

    def open(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self.is_open = True
        self._conn().executescript(_SCHEMA)

    def close(self) -> None:
        with self._conns_lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
        self._local = threading.local()
        self.is_open = False

    def disk_bytes(self) -> int:
        if self.is_open:
            self._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return disk_bytes(self.path)

    def prepare(self, raws: Sequence[Raw]) -> Sequence[Raw]:
        return raws

    def put(self, prepared: Sequence[Raw]) -> None:
        conn = self._conn()
        rows = [
            (
                _ns_key(r.namespace),
                r.id,
                r.timestamp,
                r.text,
                msgpack.packb(r.metadata),
                r.vector.dtype.str,
                r.vector.tobytes(),
                EMBEDDING_ID,
            )
            for r in prepared
        ]
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(_INSERT, rows)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @staticmethod
    def _row(row: tuple[Any, ...], namespace: Namespace) -> Raw:
        rid, ts, text, meta, dtype, vec = row
        return Raw(
            rid, text, ts, msgpack.unpackb(meta), np.frombuffer(vec, dtype=dtype).copy(), namespace
        )

    def get(self, namespace: Namespace, record_id: str) -> Raw:
        row = (
            self._conn()
            .execute(
                f"SELECT {_COLS} FROM records WHERE ns = ? AND id = ?",
                (_ns_key(namespace), record_id),
            )
            .fetchone()
        )
        if row is None:
            raise KeyError(record_id)
        return self._row(row, namespace)

    def scan_page(
        self, namespace: Namespace, cursor: Any, limit: int, start: float | None = None
    ) -> tuple[list[Any], Any]:
        conn = self._conn()
        ns = _ns_key(namespace)
        if cursor is None:
            rows = conn.execute(
                f"SELECT seq, {_COLS} FROM records WHERE ns = ? AND ts >= ? ORDER BY ts, seq LIMIT ?",
                (ns, float("-inf") if start is None else start, limit + 1),
            ).fetchall()
        else:
            rows = conn.execute(
                f"SELECT seq, {_COLS} FROM records WHERE ns = ? AND (ts, seq) > (?, ?) "
                "ORDER BY ts, seq LIMIT ?",
                (ns, cursor[0], cursor[1], limit + 1),
            ).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        records = [self._row(row[1:], namespace) for row in rows]
        next_cursor = (rows[-1][2], rows[-1][0]) if more else None
        return records, next_cursor

    def count(self, namespace: Namespace, start: float, end: float) -> int:
        row = (
            self._conn()
            .execute(
                "SELECT count(*) FROM records WHERE ns = ? AND ts >= ? AND ts < ?",
                (_ns_key(namespace), start, end),
            )
            .fetchone()
        )
        return int(row[0])


SYSTEMS: dict[str, type[System]] = {
    "log": LogSystem,
    "memory": MemorySystem,
    "lmdb": RawLMDB,
    "sqlite": SQLite,
}


def make_system(key: str, path: Path) -> System:
    return SYSTEMS[key](path)
