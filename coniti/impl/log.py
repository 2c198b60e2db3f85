"""LogBackend: durable memory on an append-only, hash-chained event log in LMDB.

Every accepted change is one event in the log (``put`` per record, ``delete`` per deleted id, ``meta``
per metadata write, ``clear`` per namespace clear), appended and folded into the projections in one
LMDB write transaction, so a call is all or nothing; a failed call appends nothing, nor does a delete
of ids that are not live. A clear is always recorded, even of an empty namespace.
Reads are index walks over one snapshot; record bytes live once, in the put event. See
``log/FORMAT.md`` for the on-disk format and :mod:`coniti.log` for the engine.

Contracts:

* **Durability**: with ``durability="sync"`` (default) a write is flushed to disk before it returns;
  ``"nosync"`` gives up durability across an OS crash or power loss (not across a process crash).
* **Sharing**: every LogBackend on one directory in a process shares one LMDB environment; several
  processes may read and write one store at once (LMDB serialises writers). Instances are
  thread-safe. A LogBackend used in a forked child raises :class:`StoreForked`: open a new one there.
* **Cursors** are opaque, MAC-authenticated with a secret kept in the store, and tied to the store and
  the namespace; they resume after a (timestamp, write order) position, so they stay valid across
  writes, reopening, and views of the same store.
* **Ids and namespaces** of any length work (long ones are keyed by hash, checked on read).
* **Time travel and audit**: :meth:`LogBackend.at` views, :meth:`~LogBackend.events`,
  :meth:`~LogBackend.history`, :meth:`~LogBackend.diff`, :meth:`~LogBackend.follow` and durable
  subscriptions (:mod:`coniti.impl.log_audit`), the ``coniti-log`` export (:mod:`coniti.logfile`),
  :meth:`~LogBackend.erase` and :meth:`~LogBackend.compact`.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import datetime
from typing import IO, Any, ClassVar, NoReturn

from coniti.actor import Note, to_timestamp
from coniti.cursor import CursorCodec
from coniti.errors import ContractError, ReadOnlyError
from coniti.events import Diff, EraseResult, Event
from coniti.impl import log_audit as _audit
from coniti.impl.log_audit import Subscription
from coniti.log import DEFAULT_MAP_SIZE, EventLog, PutItem, Row, VerifyReport
from coniti.log import rebuild as _rebuild
from coniti.log import verify as _verify
from coniti.log.keys import Namespace
from coniti.memory import (
    ClearRequest,
    ClearResult,
    CountRequest,
    CountResult,
    DeleteRequest,
    DeleteResult,
    GetRequest,
    GetResult,
    MemoryBackend,
    MemoryRecord,
    MetaGetRequest,
    MetaResult,
    MetaSetRequest,
    PutRequest,
    PutResult,
    ScanRequest,
    ScanResult,
    as_namespace,
    check_put_ids,
    require,
    unique_ids,
)

__all__ = ["LogBackend", "LogView", "VerifyReport"]

_Stamps = tuple[tuple[str, str | None, str | None], ...]
_AUDIT: contextvars.ContextVar[_Stamps] = contextvars.ContextVar("coniti_log_audit", default=())
"""Active :meth:`LogBackend.audit` blocks, innermost last: ``(store path, actor, reason)``."""


_note = Note._constructor()
_memory_record = MemoryRecord._constructor()
_get_result = GetResult._constructor()
_scan_result = ScanResult._constructor()


def _record(row: Row, namespace: Namespace) -> MemoryRecord:
    """``MemoryRecord.trusted(Note.trusted(...), ...)`` of a row the store wrote, inlined (once per
    record returned by a read)."""
    rid, timestamp, (text, metadata, embedding_id, vector) = row
    return _memory_record(
        {
            "note": _note({"id": rid, "text": text, "timestamp": timestamp, "metadata": metadata}),
            "vector": vector,
            "embedding_id": embedding_id,
            "namespace": namespace,
        }
    )


class _Reads:
    """Reads shared by the store and its views; ``_as_of`` None means the current state."""

    _log: EventLog
    _cursors: CursorCodec
    _as_of: int | None

    def get(self, request: GetRequest) -> GetResult:
        if type(request) is not GetRequest:
            request = require(request, GetRequest)
        ns = request.namespace
        ids = request.ids
        rows, missing = self._log.get(ns, ids if len(ids) == 1 else unique_ids(ids), self._as_of)
        return _get_result({"records": [_record(r, ns) for r in rows], "missing": missing})

    def scan(self, request: ScanRequest) -> ScanResult:
        request = require(request, ScanRequest)
        ns = request.namespace
        after = None if request.cursor is None else self._cursors.decode(request.cursor, ns)
        tr = request.time_range
        rows, position = self._log.scan(
            ns,
            None if tr is None else tr.start,
            None if tr is None else tr.end,
            after,
            request.limit,
            self._as_of,
        )
        cursor = None if position is None else self._cursors.encode(ns, *position)
        return _scan_result({"records": [_record(r, ns) for r in rows], "next_cursor": cursor})

    def count(self, request: CountRequest) -> CountResult:
        request = require(request, CountRequest)
        tr = request.time_range
        n = self._log.count(
            request.namespace,
            None if tr is None else tr.start,
            None if tr is None else tr.end,
            self._as_of,
        )
        return CountResult._construct({"count": n})

    def get_meta(self, request: MetaGetRequest) -> MetaResult:
        request = require(request, MetaGetRequest)
        return MetaResult._construct(
            {"value": self._log.get_meta(request.namespace, request.key, self._as_of)}
        )


class LogBackend(_Reads, MemoryBackend):
    """A :class:`MemoryBackend` on the event log in directory ``path`` (created 0700 if missing).

    ``durability``: ``"sync"`` (default) or ``"nosync"``, see the module docstring; handles on one
    path in a process must agree. ``actor``: recorded on every event written outside an
    :meth:`audit` block. ``map_size``: initial LMDB map size (it grows when full). ``read_only``: open
    an existing store for reading only; writes raise :class:`ReadOnlyError`. ``group_commit``
    (default True): writes that threads or async tasks make concurrently on this handle share one
    transaction and one flush, each still all or nothing and acknowledged only once flushed (see
    :mod:`coniti.log.group`); False commits every call on its own.
    """

    kind: ClassVar[str] = "log"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: str = "sync",
        actor: str | None = None,
        map_size: int = DEFAULT_MAP_SIZE,
        read_only: bool = False,
        group_commit: bool = True,
    ) -> None:
        if actor is not None and not isinstance(actor, str):
            raise ContractError(f"actor must be a string or None, got {type(actor).__name__}")
        self._log = EventLog(
            path, durability=durability, map_size=map_size, read_only=read_only,
            group_commit=group_commit,
        )
        self._cursors = CursorCodec(self._log.store.secret)
        self._as_of = None
        self.actor = actor
        self.read_only = read_only

    def __repr__(self) -> str:
        return f"LogBackend({self.path!r}, durability={self.durability!r})"

    @property
    def path(self) -> str:
        """The store directory (real path)."""
        return self._log.path

    @property
    def durability(self) -> str:
        return self._log.store.durability

    @property
    def store_id(self) -> str:
        """The store's id (hex), kept in the store: the same for every handle and after reopening."""
        return self._log.store.store_id.hex()

    @property
    def _env(self) -> Any:
        """The shared ``lmdb.Environment`` behind this handle, for white-box tests and tools."""
        return self._log.store.env

    @property
    def head(self) -> int:
        """Sequence number of the last event (0 when the store is empty)."""
        return self._log.head().seq

    @property
    def head_hash(self) -> str:
        """Hash (hex) of the last event, the head of the hash chain (64 zeros when empty)."""
        return self._log.head().hash.hex()

    def namespaces(self) -> list[tuple[str, ...]]:
        """Every namespace a record or metadata was ever written to, in order of first use (cleared
        ones included)."""
        return self._log.namespaces()

    def close(self) -> None:
        """Release this handle (the environment closes with the last handle). Idempotent."""
        self._log.close()

    def sync(self) -> None:
        """Flush every commit to disk now (for ``durability="nosync"``)."""
        self._log.store.sync()

    # -- audit stamping ------------------------------------------------------------------------

    @contextlib.contextmanager
    def audit(self, actor: str | None = None, reason: str | None = None) -> Iterator[None]:
        """Stamp ``actor`` and ``reason`` on every event this context writes to this store (any
        handle on its path). Context-local: safe across threads and asyncio tasks, and carried
        into the async twins' worker threads."""
        token = _AUDIT.set((*_AUDIT.get(), (self.path, actor, reason)))
        try:
            yield
        finally:
            _AUDIT.reset(token)

    def _stamp(self) -> tuple[str | None, str | None]:
        path = self.path
        for stamp_path, actor, reason in reversed(_AUDIT.get()):
            if stamp_path == path:
                return actor, reason
        return self.actor, None

    # -- writes --------------------------------------------------------------------------------

    def put(self, request: PutRequest) -> PutResult:
        request = require(request, PutRequest)
        records = request.records
        check_put_ids(records)
        actor, reason = self._stamp()
        items = [
            PutItem(
                r.namespace, r.note.id, r.note.text, r.note.timestamp, r.note.metadata,
                r.embedding_id, r.vector,
            )
            for r in records
        ]
        return PutResult._construct({"written": self._log.put(items, actor=actor, reason=reason)})

    def delete(self, request: DeleteRequest) -> DeleteResult:
        request = require(request, DeleteRequest)
        actor, reason = self._stamp()
        deleted, missing = self._log.delete(
            request.namespace, unique_ids(request.ids), actor=actor, reason=reason
        )
        return DeleteResult._construct({"deleted": deleted, "missing": missing})

    def set_meta(self, request: MetaSetRequest) -> MetaResult:
        request = require(request, MetaSetRequest)
        actor, reason = self._stamp()
        self._log.set_meta(request.namespace, request.key, request.value, actor=actor, reason=reason)
        return MetaResult(value=request.value)

    def clear(self, request: ClearRequest) -> ClearResult:
        request = require(request, ClearRequest)
        actor, reason = self._stamp()
        n = self._log.clear(request.namespace, actor=actor, reason=reason)
        return ClearResult._construct({"deleted": n})

    # -- time travel, maintenance -------------------------------------------------------------

    def at(self, seq: int | None = None, *, time: float | datetime | None = None) -> LogView:
        """A read-only view of memory right after event ``seq``, or after the last event recorded at
        or before ``time`` (epoch seconds or an aware datetime). With neither, the current head.

        Raises :class:`ContractError` for both, a negative ``seq`` or one beyond the head.
        """
        if seq is not None and time is not None:
            raise ContractError("give seq or time, not both")
        head = self.head
        if time is not None:
            try:
                when = to_timestamp(time, "time")
            except ValueError as exc:
                raise ContractError(str(exc)) from None
            seq = self._log.seq_at_time(when)
        elif seq is None:
            seq = head
        elif not isinstance(seq, int) or isinstance(seq, bool):
            raise ContractError(f"seq must be an integer, got {type(seq).__name__}")
        elif seq < 0 or seq > head:
            raise ContractError(f"seq must be between 0 and the head ({head}), got {seq}")
        return LogView(self, seq)

    def rebuild(self) -> int:
        """Recompute every projection from the log alone (one transaction); returns the number of
        events folded. Raises :class:`StoreCorrupted` and changes nothing if the log is damaged."""
        try:
            return _rebuild(self._log.store)
        finally:
            self._log.forget_namespaces()

    def verify(self, *, structure: bool = True) -> VerifyReport:
        """Check the data file's structure (``structure=True``), every event (decodes, gap-free,
        hash chain) and that the projections equal a fresh fold of the log. Returns a report; never
        raises on a problem it can describe. Holds writers off while the file structure is read."""
        return _verify(self._log.store, structure=structure)

    # -- audit trail, history, diff, change feed (coniti/impl/log_audit.py) ---------------------

    def events(
        self,
        after: int = 0,
        *,
        until: int | None = None,
        namespace: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> Iterator[Event]:
        """The audit trail: events with ``after < seq <= until`` (``until`` None: to the head), of
        ``namespace`` only when given (``()`` is the root namespace), at most ``limit``, in sequence
        order. Lazy; reads in batches, holding no transaction between them."""
        return _audit.events(self._log, after, until, namespace, limit)

    def history(self, id: str, namespace: Sequence[str] = ()) -> list[Event]:
        """Every event that touched record ``id`` of ``namespace``, oldest first: each put of it and
        the delete, clear or erase that ended each version. Empty if it never existed."""
        return _audit.history(self._log, id, namespace)

    def diff(self, a: int, b: int, *, namespace: Sequence[str] = ()) -> Diff:
        """Record ids added, removed and changed in ``namespace`` between the memory right after event
        ``a`` and right after event ``b`` (each ``0..head``)."""
        return _audit.diff(self._log, a, b, namespace)

    def follow(
        self,
        after: int | None = None,
        *,
        timeout: float | None = None,
        namespace: Sequence[str] | None = None,
    ) -> Iterator[Event]:
        """A live tail: the events after ``after`` (None: the current head) as they commit, from any
        handle or process; stops once ``timeout`` seconds pass without a new event (None: never)."""
        return _audit.follow(self._log, after, timeout, namespace)

    def afollow(
        self,
        after: int | None = None,
        *,
        timeout: float | None = None,
        namespace: Sequence[str] | None = None,
    ) -> AsyncIterator[Event]:
        """The async :meth:`follow`: reads on worker threads, waits with ``asyncio.sleep``."""
        return _audit.afollow(self._log, after, timeout, namespace)

    def subscription(self, name: str, *, start: int = 0) -> Subscription:
        """The durable subscription ``name`` (created at position ``start`` if new; an existing one
        keeps its position). See :class:`~coniti.impl.log_audit.Subscription`."""
        return _audit.subscription(self._log, name, start)

    def subscriptions(self) -> dict[str, int]:
        """Every subscription of the store and its position."""
        return _audit.subscriptions(self._log)

    # -- erasure and compaction ------------------------------------------------------------------

    def erase(
        self, ids: Sequence[str], *, namespace: Sequence[str] = (), reason: str
    ) -> EraseResult:
        """Erase the text, vector and metadata of every version of records ``ids`` of ``namespace``
        from the log and from every read: current reads, views of any point, ``history``,
        ``events``, ``dump`` and ``export_log``. Each put event keeps its envelope (id, timestamp,
        who, when) and its payload digest, so the hash chain and ``verify()`` stay clean; one
        ``erase`` event per id, stamped with ``reason`` (required) and the current actor, is the
        receipt and removes the record if it is live. All ids in one transaction. Ids the namespace
        never held are reported ``missing`` and get no event.

        The freed bytes can stay in the data file until :meth:`compact`.
        """
        if isinstance(ids, str) or not isinstance(ids, Sequence):
            raise ContractError(f"ids must be a list of record ids, got {type(ids).__name__}")
        for i, rid in enumerate(ids):
            if not isinstance(rid, str) or not rid:
                raise ContractError(f"ids[{i}] must be a non-empty string, got {rid!r}")
        if not isinstance(reason, str) or not reason.strip():
            raise ContractError("reason must be a non-empty string: an erasure is always explained")
        ns = as_namespace(namespace)
        actor, _ = self._stamp()
        erased, missing, receipts = self._log.erase(ns, unique_ids(ids), actor=actor, reason=reason)
        return EraseResult._construct({"erased": erased, "missing": missing, "receipts": receipts})

    def compact(self) -> tuple[int, int]:
        """Rewrite the store's data file without free pages, so that no byte of erased content
        remains in the store's files; returns the file's size ``(before, after)`` in bytes.

        Needs the store alone: raises :class:`StoreBusy` if another process has it open or another
        handle of this process does (views of this handle are fine). Other processes that open the
        store meanwhile wait. Crash-safe: the compacted copy is flushed, then renamed over the file.
        """
        return self._log.compact()

    # -- the log export (coniti/logfile.py) ----------------------------------------------------

    def export_log(self, target: str | os.PathLike[str] | IO[str]) -> int:
        """Write the whole history, every event up to the current head, as a ``coniti-log`` JSONL
        file; returns the number of events. Atomic for a path (``.partial`` then rename; ``.gz``
        selects gzip). See :mod:`coniti.logfile`."""
        from coniti import logfile

        return logfile.export_log(self, target)

    @classmethod
    def import_log(
        cls,
        source: str | os.PathLike[str] | IO[str],
        path: str | os.PathLike[str],
        *,
        durability: str = "sync",
        actor: str | None = None,
        map_size: int = DEFAULT_MAP_SIZE,
    ) -> LogBackend:
        """A new store at ``path`` (absent or an empty directory) with exactly the events of a
        ``coniti-log`` file: same sequence numbers, hashes and head hash. Everything is checked before
        the store appears; a rejection raises :class:`MemoryFileError` naming the line and creates
        nothing at ``path``. Returns the opened store."""
        from coniti import logfile

        return logfile.import_log(
            source, path, durability=durability, actor=actor, map_size=map_size
        )


class LogView(_Reads, MemoryBackend):
    """Memory exactly as it was right after event :attr:`seq` of a :class:`LogBackend`.

    ``get``, ``scan`` (with cursors), ``count``, ``get_meta``, ``iter_all`` and ``dump`` work and read
    the version history (index walks, never a replay); writes raise :class:`ReadOnlyError`. The view
    shares its store's handle: closing the view does nothing, closing the store ends the view.
    """

    kind: ClassVar[str] = "log_view"
    read_only = True

    def __init__(self, store: LogBackend, seq: int) -> None:
        self._store = store
        self._log = store._log
        self._cursors = store._cursors
        self._as_of = seq

    @property
    def seq(self) -> int:
        """The event this view shows the memory right after (0: the empty memory)."""
        assert self._as_of is not None
        return self._as_of

    def __repr__(self) -> str:
        return f"LogView({self._store.path!r}, seq={self.seq})"

    def _refuse(self) -> NoReturn:
        raise ReadOnlyError(f"the view at seq {self.seq} of {self._store.path} is read-only")

    def put(self, request: PutRequest) -> PutResult:
        require(request, PutRequest)
        self._refuse()

    def delete(self, request: DeleteRequest) -> DeleteResult:
        require(request, DeleteRequest)
        self._refuse()

    def set_meta(self, request: MetaSetRequest) -> MetaResult:
        require(request, MetaSetRequest)
        self._refuse()

    def clear(self, request: ClearRequest) -> ClearResult:
        require(request, ClearRequest)
        self._refuse()
