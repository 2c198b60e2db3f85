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
* **Filters** (:mod:`coniti.filters`) are tested above the log, on the decoded records, so a
  filtered read costs what the unfiltered read of its range costs. A filtered ``count`` or
  unlimited ``scan`` reads its range in one snapshot. A filtered page reads chunks, each one
  snapshot (see ``_filtered_page``): every record it returns was live together with the records
  around it in its chunk, and its cursor is the position of its last record, as unfiltered.
* **Time travel and audit**: :meth:`LogBackend.at` views, :meth:`~LogBackend.events`,
  :meth:`~LogBackend.history`, :meth:`~LogBackend.diff`, :meth:`~LogBackend.follow` and durable
  subscriptions (:mod:`coniti.impl.log_audit`), the ``coniti-log`` export (:mod:`coniti.log.logfile`),
  :meth:`~LogBackend.erase` and :meth:`~LogBackend.compact`.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from types import EllipsisType
from typing import IO, TYPE_CHECKING, Any, ClassVar, NoReturn

import numpy as np

from coniti.actor import Note, to_timestamp
from coniti.batch import RecordBatch, check_batch_ids
from coniti.cursor import CursorCodec
from coniti.errors import (
    ContractError,
    ReadOnlyError,
    RecordNotFound,
    namespace_text,
)
from coniti.events import EraseResult
from coniti.filters import RecordPredicate as Predicate
from coniti.filters import compile_record_filter as compile_filter
from coniti.impl.log_audit import AuditTrail
from coniti.impl.log_cluster import ClusterNode
from coniti.impl.log_retention import (
    configure_retention,
    policy_now,
    retained_columns,
    retained_items,
    retained_write,
    stored_policy,
)
from coniti.impl.proving import Proving, extends
from coniti.jsonl import MAX_STAMP_CHARS
from coniti.log import DEFAULT_MAP_SIZE, EventLog, PutItem, Row, VerifyReport, logfile
from coniti.log import rebuild as _rebuild
from coniti.log import verify as _verify
from coniti.log.codec import DELETE as DELETE_KIND
from coniti.log.codec import OP as OP_KIND
from coniti.log.codec import PUT as PUT_KIND
from coniti.log.eventlog import Change, WriteView
from coniti.log.keys import Namespace
from coniti.memory import (
    ClearRequest,
    ClearResult,
    CountRequest,
    CountResult,
    DeleteRequest,
    DeleteResult,
    FeedbackRequest,
    FeedbackResult,
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
    SweepResult,
    WriteRequest,
    WriteResult,
    as_namespace,
    check_put_ids,
    idempotency_conflict,
    namespace_listing,
    plan_write,
    require,
    unique_ids,
)
from coniti.retention import Retention
from coniti.text import check_text

if TYPE_CHECKING:
    from coniti.cluster import Cluster

__all__ = ["LogBackend", "LogView", "VerifyReport"]

_Stamps = tuple[tuple[str, str | None, str | None], ...]
_AUDIT: contextvars.ContextVar[_Stamps] = contextvars.ContextVar("coniti_log_audit", default=())
"""Active :meth:`LogBackend.audit` blocks, innermost last: ``(store path, actor, reason)``."""


_note = Note.trusted
_memory_record = MemoryRecord.trusted
_get_result = GetResult.constructor()
_scan_result = ScanResult.constructor()
_count_result = CountResult.constructor()
_meta_result = MetaResult.constructor()
_put_result = PutResult.constructor()
_delete_result = DeleteResult.constructor()
_clear_result = ClearResult.constructor()
_erase_result = EraseResult.constructor()


def _erasure(
    *,
    erased: list[str] | None = None,
    missing: list[str] | None = None,
    erased_keys: list[str] | None = None,
    missing_keys: list[str] | None = None,
    receipts: list[int],
) -> EraseResult:
    """The :class:`EraseResult` of what the log erased (absent lists are empty)."""
    return _erase_result({
        "erased": erased or [], "missing": missing or [], "receipts": receipts,
        "erased_keys": erased_keys or [], "missing_keys": missing_keys or [],
    })


def _check_names(names: Sequence[str], field: str, what: str) -> None:
    """``names`` must be a list of non-empty strings (:class:`ContractError` naming ``field``)."""
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise ContractError(f"{field} must be a list of {what}, got {type(names).__name__}")
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise ContractError(f"{field}[{i}] must be a non-empty string, got {name!r}")


def _check_stamp(value: str | None, field: str) -> None:
    """An audit stamp (actor or reason): None or a string of valid Unicode, of at most
    :data:`~coniti.jsonl.MAX_STAMP_CHARS` characters."""
    if value is None:
        return
    if not isinstance(value, str):
        raise ContractError(f"{field} must be a string or None, got {type(value).__name__}")
    if len(value) > MAX_STAMP_CHARS:
        raise ContractError(f"{field} is {len(value):,} characters; at most {MAX_STAMP_CHARS:,} allowed")
    try:
        check_text(value, field)
    except ValueError as exc:
        raise ContractError(str(exc)) from None


def _check_reason(reason: str) -> None:
    if not isinstance(reason, str) or not reason.strip():
        raise ContractError("reason must be a non-empty string: an erasure is always explained")
    _check_stamp(reason, "reason")


def _record(row: Row, namespace: Namespace) -> MemoryRecord:
    """The record of a row the store wrote (once per record a read returns); its version is the
    seq of the put that wrote it."""
    text, metadata, embedding_id, vector, blob, kind, facts = row[2]
    return _memory_record(
        _note(row[0], text, row[1], metadata, kind, facts), vector, embedding_id, namespace, row[3], row[4], blob
    )


_records = MemoryRecord.trusted_rows
""":func:`_record` of each row (a log :class:`Row` is a :data:`~coniti.memory.StoredRow`): the hot
loop of every page a read returns."""


def _put_written(seqs: range, metas: int) -> PutResult:
    """The result of a put whose events are ``seqs``, the first ``metas`` of them meta events: a
    record's version is the seq of its put event."""
    versions = list(seqs[metas:])
    return _put_result({"written": len(versions), "versions": versions, "seqs": list(seqs)})


def _put_item(r: MemoryRecord) -> PutItem:
    note = r.note
    return PutItem(
        r.namespace, note.id, note.text, note.timestamp, note.metadata, r.embedding_id, r.vector,
        r.expires_at, r.blob, note.kind, note.facts(),
    )


def _put_items(records: Sequence[MemoryRecord]) -> list[PutItem]:
    return [_put_item(r) for r in records]


_Columns = tuple[Namespace, list[str], list[str], np.ndarray, list[dict[str, Any]], str | None, np.ndarray]


def _put_columns(records: Sequence[MemoryRecord]) -> _Columns | None:
    """The records of a put call as the columns of :meth:`~coniti.log.EventLog.put_columns`
    ``(namespace, ids, texts, timestamps, metadata, embedding id, vectors)`` when they are the usual
    kind, whose events it appends exactly as :meth:`~coniti.log.EventLog.put` does: two or more, all
    in one namespace with one embedding id and vectors of one dtype and shape, none with an expiry,
    a blob, a kind, a valid time or sources. Else None (the caller puts them as items)."""
    if len(records) < 2:
        return None
    first = records[0]
    ns, emb, v0 = first.namespace, first.embedding_id, first.vector
    if v0 is None:
        return None
    dtype, shape = v0.dtype, v0.shape
    ids: list[str] = []
    texts: list[str] = []
    stamps: list[float] = []
    metadata: list[dict[str, Any]] = []
    vectors: list[np.ndarray] = []
    for r in records:
        note, v = r.note, r.vector
        if (
            v is None or v.dtype != dtype or v.shape != shape or r.namespace != ns or r.embedding_id != emb
            or r.expires_at is not None or r.blob is not None or note.kind is not None
            or note.valid_from is not None or note.valid_to is not None or note.derived_from
        ):  # fmt: skip
            return None
        ids.append(note.id)
        texts.append(note.text)
        stamps.append(note.timestamp)
        metadata.append(note.metadata)
        vectors.append(v)
    return ns, ids, texts, np.array(stamps, dtype=np.float64), metadata, emb, np.stack(vectors)


TTL_ACTOR = "coniti-ttl"
"""The actor of the delete events a :meth:`LogBackend.sweep` writes (reason ``expired``)."""


def _replayed(receipt: dict[str, Any], op_seq: int) -> WriteResult:
    """The result an op id recorded (its ``op`` event ``op_seq`` holds ``receipt``), replayed: with
    the seqs of that first write, its events up to the op event (one per record it wrote or
    deleted, all in one transaction, so they end at the op event)."""
    appended = len(receipt["versions"]) - len(receipt["unchanged"]) + len(receipt["deleted"])
    seqs = list(range(op_seq - appended, op_seq + 1))
    return WriteResult.from_dict({**receipt, "replayed": True, "seqs": seqs})


def _decide(request: WriteRequest, digest: str | None) -> Callable[[WriteView], tuple[list[Change], WriteResult]]:
    """The decision of one :meth:`LogBackend.write`, made inside its write transaction: the op id's
    replay, the expectations, then each op planned against the live state."""
    ns = request.namespace
    op_id = request.op_id

    def decide(view: WriteView) -> tuple[list[Change], WriteResult]:
        if op_id is not None:
            seen = view.op(op_id)
            if seen is not None:
                if seen[0] != digest:
                    raise idempotency_conflict(op_id, ns)
                return [], _replayed(seen[1], seen[2])

        def live(record_id: str) -> MemoryRecord | None:
            row = view.live(record_id)
            return None if row is None else _record(row, ns)

        plan, planned = plan_write(request, live, lambda record_id: view.held(record_id) is not None)
        changes: list[Change] = []
        versions = dict(planned.versions)
        for record_id, new in plan:
            if new is None:
                changes.append(Change(DELETE_KIND, id=record_id))
            else:
                changes.append(Change(PUT_KIND, item=_put_item(new), replaces=view.held(record_id)))
                versions[record_id] = view.next_seq + len(changes) - 1
        unchanged, deleted, missing = planned.unchanged, planned.deleted, planned.missing
        result = {"versions": versions, "unchanged": unchanged, "deleted": deleted, "missing": missing}
        if op_id is not None:
            changes.append(Change(OP_KIND, op_id=op_id, digest=digest, receipt=result))
        seqs = list(range(view.next_seq, view.next_seq + len(changes)))  # the receipt has none
        return changes, WriteResult.from_dict({**result, "seqs": seqs})

    return decide


_CHUNK_MAX = 1024
"""The most records a filtered page reads in one snapshot."""

Position = tuple[float, int]
_Read = Callable[[Position | None, int], tuple[list[Row], Position | None]]
"""``read(after, limit)``: one :meth:`EventLog.scan` of a filtered page's range and view."""


def _filtered_page(
    log: EventLog,
    ns: Namespace,
    start: float | None,
    end: float | None,
    after: Position | None,
    limit: int,
    as_of: int | None,
    match: Predicate,
) -> tuple[list[Row], Position | None]:
    """Up to ``limit`` rows matching ``match`` after position ``after``, and the position of the last
    of them when another match follows (else None), read through :meth:`EventLog.scan`.

    The walk reads chunks (each one snapshot), at most :data:`_CHUNK_MAX` rows: the first of
    ``limit`` rows, each next one sized by the share of matches seen so far to hold about half the
    matches still needed. When the last match needed is not a chunk's last row and more matches
    follow, the chunk's head is read again to learn that match's position (:meth:`EventLog.scan`
    gives the position of a read's last row only); halving keeps that chunk, and so the re-read,
    small. If a write changed the rows in between, the page is read again from the start.
    """

    def read(pos: Position | None, size: int) -> tuple[list[Row], Position | None]:
        return log.scan(ns, start, end, pos, size, as_of)

    while True:
        page = _try_page(read, after, limit, match)
        if page is not None:
            return page


def _try_page(
    read: _Read, after: Position | None, limit: int, match: Predicate
) -> tuple[list[Row], Position | None] | None:
    """One attempt of :func:`_filtered_page`; None when a write landed between two reads."""
    rows: list[Row] = []
    pos, size = after, limit
    seen = found = 0
    while True:
        need = limit - len(rows)
        chunk, nxt = read(pos, size)
        hits = [i for i, row in enumerate(chunk) if match(row.data[1], row.data[5])]
        seen, found = seen + len(chunk), found + len(hits)
        if len(hits) < need or hits[need - 1] == len(chunk) - 1:  # every match of the chunk fits
            rows.extend(chunk[i] for i in hits)
            if nxt is None:
                return rows, None
            pos = nxt
            if len(rows) == limit:
                return rows, (pos if _more(read, pos, _span(1, seen, found), match) else None)
            size = _span((limit - len(rows) + 1) // 2, seen, found)
            continue
        last = hits[need - 1]
        rows.extend(chunk[i] for i in hits[:need])
        if len(hits) == need and (nxt is None or not _more(read, nxt, _span(1, seen, found), match)):
            return rows, None
        again, position = read(pos, last + 1)
        if position is None or [r.id for r in again] != [r.id for r in chunk[: last + 1]]:
            return None
        return rows, position


def _more(read: _Read, pos: Position, size: int, match: Predicate) -> bool:
    """Whether a row matching ``match`` follows position ``pos``."""
    while True:
        chunk, nxt = read(pos, size)
        if any(match(row.data[1], row.data[5]) for row in chunk):
            return True
        if nxt is None:
            return False
        pos, size = nxt, min(2 * size, _CHUNK_MAX)


def _span(need: int, seen: int, found: int) -> int:
    """How many rows likely hold ``need`` more matches, by the share of matches among the ``seen``
    rows so far (twice as many rows as seen while none matched), within ``[1, _CHUNK_MAX]``."""
    if found == 0:
        return min(_CHUNK_MAX, max(need, 2 * seen))
    return min(_CHUNK_MAX, max(need, -(-need * seen // found)))


class _Items:
    """Batches of records as batches of put items, re-iterable when the batches are."""

    def __init__(self, batches: Iterable[Sequence[MemoryRecord]], policy: Retention | None = None) -> None:
        self._batches = batches
        self._policy = policy

    def __iter__(self) -> Iterator[list[PutItem]]:
        for batch in self._batches:
            check_put_ids(batch)
            yield retained_items(_put_items(batch), batch, self._policy)


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
        return _get_result({"records": _records(rows, ns), "missing": missing})

    def scan(self, request: ScanRequest) -> ScanResult:
        request = require(request, ScanRequest)
        ns = request.namespace
        after = None if request.cursor is None else self._cursors.decode(request.cursor, ns)
        tr = request.time_range
        start = None if tr is None else tr.start
        end = None if tr is None else tr.end
        limit = request.limit
        if request.filter is None:
            rows, position = self._log.scan(ns, start, end, after, limit, self._as_of)
        elif limit is None:
            match = compile_filter(request.filter)
            rows = [r for r in self._log.scan(ns, start, end, after, None, self._as_of)[0] if match(r.data[1], r.data[5])]
            position = None
        else:
            match = compile_filter(request.filter)
            rows, position = _filtered_page(self._log, ns, start, end, after, limit, self._as_of, match)
        cursor = None if position is None else self._cursors.encode(ns, *position)
        return _scan_result({"records": _records(rows, ns), "next_cursor": cursor})

    def count(self, request: CountRequest) -> CountResult:
        request = require(request, CountRequest)
        tr = request.time_range
        start = None if tr is None else tr.start
        end = None if tr is None else tr.end
        if request.filter is None:
            n = self._log.count(request.namespace, start, end, self._as_of)
        else:
            match = compile_filter(request.filter)
            rows = self._log.scan(request.namespace, start, end, None, None, self._as_of)[0]
            n = sum(1 for r in rows if match(r.data[1], r.data[5]))
        return _count_result({"count": n})

    def namespaces(self, prefix: Sequence[str] = (), max_depth: int | None = None) -> list[Namespace]:
        """The live namespaces under ``prefix`` (see :meth:`MemoryBackend.namespaces`); a view
        answers as of its point."""
        return namespace_listing(self._log.live_namespaces(self._as_of), prefix, max_depth)

    def get_meta(self, request: MetaGetRequest) -> MetaResult:
        request = require(request, MetaGetRequest)
        return _meta_result(
            {"value": self._log.get_meta(request.namespace, request.key, self._as_of)}
        )

    def feedback_weights(self, namespace: Sequence[str] = ()) -> dict[str, float]:
        """See :meth:`MemoryBackend.feedback_weights`: an index walk of ``fbk`` (a view: as of
        its point)."""
        return self._log.feedback_weights(as_namespace(namespace), self._as_of)


class LogBackend(ClusterNode, _Reads, AuditTrail, Proving, MemoryBackend):
    """A :class:`MemoryBackend` on the event log in directory ``path`` (created 0700 if missing).

    ``durability``: ``"sync"`` (default) or ``"nosync"``, see the module docstring; handles on one
    path in a process must agree. ``actor``: recorded on every event written outside an
    :meth:`audit` block. ``map_size``: initial LMDB map size (it grows when full). ``read_only``: open
    an existing store for reading only; writes raise :class:`ReadOnlyError`. ``group_commit``
    (default True): writes that threads or async tasks make concurrently on this handle share one
    transaction and one flush, each still all or nothing and acknowledged only once flushed (see
    :mod:`coniti.log.group`); False commits every call on its own. ``retention`` (a positive
    :class:`~datetime.timedelta`, or None: none) and ``kind_retention`` (kind -> timedelta or None):
    the expiry of records written without one, recorded in the store (:mod:`coniti.retention`);
    not given: the store keeps what it holds.

    ``cluster`` (a :class:`~coniti.cluster.Cluster`): cluster mode, this store a node's copy of the
    cluster's stream (:class:`~coniti.impl.log_cluster.ClusterNode`, ``docs/cluster.md``).
    """

    kind: ClassVar[str] = "log"
    supports_time_travel: ClassVar[bool] = True
    supports_event_feed: ClassVar[bool] = True
    supports_put_with_meta: ClassVar[bool] = True
    supports_put_batches: ClassVar[bool] = True
    supports_write: ClassVar[bool] = True
    supports_derived_state: ClassVar[bool] = True
    supports_feedback: ClassVar[bool] = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: str = "sync",
        actor: str | None = None,
        map_size: int = DEFAULT_MAP_SIZE,
        read_only: bool = False,
        group_commit: bool = True,
        retention: timedelta | None | EllipsisType = ...,
        kind_retention: Mapping[str, timedelta | None] | None | EllipsisType = ...,
        cluster: Cluster | None = None,
    ) -> None:
        _check_stamp(actor, "actor")
        Retention.make(retention, kind_retention, Retention(None, {}))  # bad input: nothing opened
        if cluster is not None and read_only:
            raise ContractError("cluster mode folds the stream into the store: it cannot be read_only")
        self._log = EventLog(
            path, durability=durability, map_size=map_size, read_only=read_only,
            group_commit=group_commit,
        )
        self._cursors = CursorCodec(self._log.store.secret)
        self._as_of = None
        self.actor = actor
        self.read_only = read_only
        self.cluster = cluster
        """The cluster this store is a node of (None: a single store)."""
        self._transport: Any = None
        self._replica: Any = None
        try:
            if cluster is not None:
                self._join(cluster)  # first: the policy is read from (written to) the stream's copy
            self._retention = stored_policy(self._log)
            if retention is not ... or kind_retention is not ...:
                self._retention = configure_retention(self, retention, kind_retention)
        except BaseException:
            self.close()
            raise

    @property
    def retention(self) -> Retention:
        """The retention this handle's writes apply (:mod:`coniti.retention`; read from the store
        when it opened): ``.default`` and ``.kinds`` in seconds, ``.timedelta(kind)`` for one kind."""
        return self._retention

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

    @property
    def derived_path(self) -> str:
        """``derived/`` inside the store directory: where engines keep their index snapshots
        (``coniti.derived``); never read by the store itself, safe to delete."""
        return os.path.join(self.path, "derived")

    def event_hash(self, seq: int) -> str:
        """The hash (hex) of event ``seq`` (64 zeros for 0). Raises :class:`ContractError` for a
        seq beyond the head."""
        if seq == 0:
            return "0" * 64
        for event in self.events(after=seq - 1, until=seq):
            return event.hash
        raise ContractError(f"seq must be between 0 and the head ({self.head}), got {seq}")

    def close(self) -> None:
        """Release this handle (the environment closes with the last handle) and, in cluster mode,
        its connection to the cluster. Idempotent."""
        self._leave()
        self._log.close()

    def sync(self) -> None:
        """Flush every commit to disk now (for ``durability="nosync"``)."""
        self._log.store.sync()

    # -- audit stamping ------------------------------------------------------------------------

    @contextlib.contextmanager
    def audit(self, actor: str | None = None, reason: str | None = None) -> Iterator[None]:
        """Stamp ``actor`` and ``reason`` on every event this context writes to this store (any
        handle on its path). Context-local: safe across threads and asyncio tasks, and carried
        into the async twins' worker threads. ``actor`` and ``reason``: strings of valid Unicode
        (:func:`~coniti.contracts.check_text`) or None, else :class:`ContractError`."""
        _check_stamp(actor, "actor")
        _check_stamp(reason, "reason")
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
        policy = policy_now(self._retention)
        columns = None if policy is not None else _put_columns(records)
        if columns is not None:  # the usual records: encoded from columns, the same events
            seqs = self._log.put_columns(*columns, actor=actor, reason=reason)
        else:
            seqs = self._log.put(retained_items(_put_items(records), records, policy), actor=actor, reason=reason)
        return _put_written(seqs, 0)

    def write(self, request: WriteRequest) -> WriteResult:
        """One atomic write (see :class:`~coniti.memory.WriteRequest`), decided and appended in one
        LMDB write transaction: a replace is one ``put`` event naming the version it replaces
        (``pv``), a delete a ``delete`` event, and a request with an op id ends with one ``op``
        event holding the request's digest and result (also when it wrote nothing else). Every
        event carries the call's audit stamp. Op ids are kept as long as the log: export, import,
        rebuild and compaction keep them."""
        request = require(request, WriteRequest)
        digest = None if request.op_id is None else request.digest()  # of the request as given
        request = retained_write(request, policy_now(self._retention))
        actor, reason = self._stamp()
        return self._log.transact(
            request.namespace, _decide(request, digest), actor=actor, reason=reason
        )

    def op_result(self, op_id: str, namespace: Sequence[str] = ()) -> WriteResult | None:
        found = self._log.op_result(as_namespace(namespace), op_id)
        return None if found is None else _replayed(found[1], found[2])

    def sweep(self, now: float | None = None) -> SweepResult:
        """Delete every live record expired at ``now`` (default: the write's recorded time), one
        ``delete`` event each with actor ``coniti-ttl`` and reason ``expired``, in one transaction
        (so concurrent sweeps from several processes delete each record once)."""
        if now is not None:
            now = to_timestamp(now, "now")
        deleted = self._log.sweep(now, actor=TTL_ACTOR, reason="expired")
        return SweepResult(deleted=deleted)

    def put_with_meta(self, request: PutRequest, meta: MetaSetRequest) -> PutResult:
        """The meta event, then one put event per record, in one transaction: a refused put
        records nothing."""
        request = require(request, PutRequest)
        meta = require(meta, MetaSetRequest)
        records = request.records
        check_put_ids(records)
        actor, reason = self._stamp()
        seqs = self._log.put(
            retained_items(_put_items(records), records, policy_now(self._retention)), actor=actor, reason=reason,
            meta=(meta.namespace, meta.key, meta.value),
        )
        return _put_written(seqs, 1)

    def put_batch(self, batch: RecordBatch, meta: MetaSetRequest | None = None) -> PutResult:
        """The events :meth:`put` (or, with ``meta``, :meth:`put_with_meta`) appends for the batch's
        records, encoded from its columns (:meth:`coniti.log.EventLog.put_columns`)."""
        if not isinstance(batch, RecordBatch):
            raise ContractError(f"batch must be a RecordBatch, got {type(batch).__name__}")
        if meta is not None:
            meta = require(meta, MetaSetRequest)
        notes = batch.notes
        check_batch_ids(batch)
        expiries = retained_columns(notes, policy_now(self._retention))
        actor, reason = self._stamp()
        seqs = self._log.put_columns(
            batch.namespace, notes.ids, notes.texts, notes.timestamps, notes.metadata,
            batch.embedding_id, batch.vectors, actor=actor, reason=reason,
            meta=None if meta is None else (meta.namespace, meta.key, meta.value), expiries=expiries,
        )  # fmt: skip
        return _put_written(seqs, meta is not None)

    def put_batches(
        self, batches: Iterable[Sequence[MemoryRecord]], meta: MetaSetRequest | None = None
    ) -> int:
        """The meta event (if any), then one put event per record of every batch, in one write
        transaction (see :meth:`coniti.log.EventLog.put_batches`): a load is all or nothing, also
        under SIGKILL or Ctrl-C, and a failed one leaves no event."""
        if meta is not None:
            meta = require(meta, MetaSetRequest)
        actor, reason = self._stamp()
        items = _Items(batches, policy_now(self._retention))
        return self._log.put_batches(
            items, actor=actor, reason=reason,
            meta=None if meta is None else (meta.namespace, meta.key, meta.value),
        )

    def delete(self, request: DeleteRequest) -> DeleteResult:
        request = require(request, DeleteRequest)
        actor, reason = self._stamp()
        deleted, missing, seqs = self._log.delete(
            request.namespace, unique_ids(request.ids), actor=actor, reason=reason
        )
        return _delete_result({"deleted": deleted, "missing": missing, "seqs": list(seqs)})

    def set_meta(self, request: MetaSetRequest) -> MetaResult:
        request = require(request, MetaSetRequest)
        actor, reason = self._stamp()
        self._log.set_meta(request.namespace, request.key, request.value, actor=actor, reason=reason)
        return MetaResult(value=request.value)

    def clear(self, request: ClearRequest) -> ClearResult:
        request = require(request, ClearRequest)
        actor, reason = self._stamp()
        n = self._log.clear(request.namespace, actor=actor, reason=reason)
        return _clear_result({"deleted": n})

    def feedback(self, request: FeedbackRequest) -> FeedbackResult:
        """One ``feedback`` event (kind of event version 3), stamped with the request's reason
        (else the :meth:`audit` one) and the current actor."""
        request = require(request, FeedbackRequest)
        actor, reason = self._stamp()
        ns = request.namespace
        seq = self._log.feedback(
            ns, request.id, request.weight, actor=actor,
            reason=request.reason if request.reason is not None else reason,
        )
        if seq is None:
            raise RecordNotFound(f"record {request.id!r} is not live in namespace {namespace_text(ns)}")
        total = self._log.feedback_weights(ns, seq).get(request.id, 0.0)
        return FeedbackResult(id=request.id, weight=total, seq=seq)

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

    # -- erasure and compaction ------------------------------------------------------------------

    def erase(
        self, ids: Sequence[str], *, namespace: Sequence[str] = (), reason: str
    ) -> EraseResult:
        """Erase the text, vector, metadata and blob of every version of records ``ids`` of ``namespace``
        from the log and from every read: current reads, views of any point, ``history``,
        ``events``, ``dump`` and ``export_log``. Each put event keeps its envelope (id, timestamp,
        who, when) and its payload digest, so the hash chain and ``verify()`` stay clean; one
        ``erase`` event per id, stamped with ``reason`` (required) and the current actor, is the
        receipt and removes the record if it is live. All ids in one transaction. Ids the namespace
        never held are reported ``missing`` and get no event.

        The freed bytes can stay in the data file until :meth:`compact`.
        """
        _check_names(ids, "ids", "record ids")
        _check_reason(reason)
        ns = as_namespace(namespace)
        actor, _ = self._stamp()
        erased, missing, receipts = self._log.erase(ns, unique_ids(ids), actor=actor, reason=reason)
        return _erasure(erased=erased, missing=missing, receipts=receipts)

    def erase_meta(
        self, keys: Sequence[str], *, namespace: Sequence[str] = (), reason: str
    ) -> EraseResult:
        """Erase every value metadata keys ``keys`` of ``namespace`` ever had, from the log and from
        every read: ``get_meta`` gives None for them now and in views of any point, ``events`` and
        ``history`` show their meta events as erased, and ``export_log`` carries no value. Each meta
        event keeps its envelope (key, who, when) and its payload digest, so the hash chain and
        ``verify()`` stay clean; one ``erase`` event per key (naming it), stamped with ``reason``
        (required) and the current actor, is the receipt. All keys in one transaction; keys the
        namespace never held are reported in ``missing_keys`` and get no event. A key set again
        afterwards holds its new value. The freed bytes can stay in the data file until
        :meth:`compact`."""
        _check_names(keys, "keys", "metadata keys")
        _check_reason(reason)
        ns = as_namespace(namespace)
        actor, _ = self._stamp()
        erased, missing, receipts = self._log.erase_meta(ns, unique_ids(keys), actor=actor, reason=reason)
        return _erasure(erased_keys=erased, missing_keys=missing, receipts=receipts)

    def erase_namespace(self, namespace: Sequence[str], *, reason: str) -> EraseResult:
        """Erase a whole namespace: every record (every version, as :meth:`erase`) and every
        metadata key (every value, as :meth:`erase_meta`) that still holds content, in one
        transaction, with one ``erase`` receipt per record and per key, stamped with ``reason``
        (required) and the current actor. Afterwards the namespace reads as empty now and at every
        point, and :meth:`compact` removes the freed bytes. What stays is what the hash chain
        needs: ids, keys, the namespace's name, timestamps, who and when, and the op ids of write
        requests with their results (ids and versions, no content). Ids and keys already fully
        erased get no second receipt; a namespace never used appends nothing."""
        _check_reason(reason)
        ns = as_namespace(namespace)
        actor, _ = self._stamp()
        erased, keys, receipts = self._log.erase_namespace(ns, actor=actor, reason=reason)
        return _erasure(erased=erased, erased_keys=keys, receipts=receipts)

    def compact(self) -> tuple[int, int]:
        """Rewrite the store's data file without free pages, so that no byte of erased content
        remains in the store's files; returns the file's size ``(before, after)`` in bytes.

        Needs the store alone: raises :class:`StoreBusy` if another process has it open or another
        handle of this process does (views of this handle are fine). Other processes that open the
        store meanwhile wait. Crash-safe: the compacted copy is flushed, then renamed over the file.
        The derived state in :attr:`derived_path` (which may still hold erased versions' vectors) is
        removed too; engines rebuild it at their next open.
        """
        sizes = self._log.compact()
        shutil.rmtree(self.derived_path, ignore_errors=True)
        return sizes

    # -- the log export (coniti/log/logfile.py) ------------------------------------------------

    def export_log(self, target: str | os.PathLike[str] | IO[str]) -> int:
        """Write the whole history, every event up to the current head, as a ``coniti-log`` JSONL
        file; returns the number of events. Atomic for a path (``.partial`` then rename; ``.gz``
        selects gzip). See :mod:`coniti.log.logfile`."""
        return logfile.export_log(self._log, target)

    def fork(
        self, path: str | os.PathLike[str], *, at: int | None = None, durability: str = "sync"
    ) -> LogBackend:
        """A new store at ``path`` (absent or an empty directory) whose log is this store's events
        1 to ``at`` (default: the head), frame for frame: the same hashes and the same Merkle root
        at every size up to ``at`` (a consistency proof from ``at`` holds between the two), and a
        new store id; from there the two diverge. Built beside ``path`` and renamed into place, so
        a failure creates nothing. Raises :class:`ContractError` for an ``at`` past the head.
        Returns the new store, opened."""
        logfile.fork_log(self._log, path, self.head if at is None else at)
        return type(self)(path, durability=durability, actor=self.actor)

    @classmethod
    def import_log(
        cls,
        source: str | os.PathLike[str] | IO[str],
        path: str | os.PathLike[str],
        *,
        durability: str = "sync",
        actor: str | None = None,
        map_size: int = DEFAULT_MAP_SIZE,
        checkpoint: str | None = None,
        verifier: str | None = None,
    ) -> LogBackend:
        """A new store at ``path`` (absent or an empty directory) with exactly the events of a
        ``coniti-log`` file: same sequence numbers, hashes and head hash. Everything is checked before
        the store appears; a rejection raises :class:`MemoryFileError` naming the line and creates
        nothing at ``path`` (nor the parent directories it made); a disk too full for the store
        raises :class:`StoreFull` (the file was not at fault). Returns the opened store.

        ``checkpoint`` (a signed checkpoint note) with ``verifier`` (its verifier key): the history
        must extend that checkpoint (:meth:`verify_checkpoint`, without the origin check: an
        imported store's origin is its checkpoints'), else :class:`CheckpointError` naming both
        sizes, and nothing is created."""
        check = None
        if checkpoint is not None or verifier is not None:
            if checkpoint is None or verifier is None:
                raise ContractError("import_log: checkpoint and verifier are given together")
            from coniti.checkpoint import (
                verify_checkpoint as open_checkpoint,  # cryptography: on use
            )

            expected = open_checkpoint(checkpoint, verifier)
            check = functools.partial(extends, checkpoint=expected)
        logfile.import_log(source, path, check)
        return cls(path, durability=durability, actor=actor, map_size=map_size)


class LogView(_Reads, MemoryBackend):
    """Memory exactly as it was right after event :attr:`seq` of a :class:`LogBackend`.

    ``get``, ``scan`` (with cursors), ``count``, ``get_meta``, ``iter_all`` and ``dump`` work and read
    the version history (index walks, never a replay); writes raise :class:`ReadOnlyError`. The view
    shares its store's handle: closing the view does nothing, closing the store ends the view.
    """

    kind: ClassVar[str] = "log_view"
    read_only = True
    supports_feedback: ClassVar[bool] = True
    """Feedback weights read as of the view's point; :meth:`feedback` refuses, as every write."""

    def __init__(self, store: LogBackend, seq: int) -> None:
        self._store = store
        self._log = store._log
        self._cursors = store._cursors
        self._as_of = seq
        self.as_of = seq

    @property
    def seq(self) -> int:
        """The event this view shows the memory right after (0: the empty memory); also
        :attr:`~coniti.memory.MemoryBackend.as_of`."""
        assert self._as_of is not None
        return self._as_of

    def __repr__(self) -> str:
        return f"LogView({self._store.path!r}, seq={self.seq})"

    def _refuse(self) -> NoReturn:
        raise ReadOnlyError(f"the view at seq {self.seq} of {self._store.path} is read-only")

    def put(self, request: PutRequest) -> PutResult:
        require(request, PutRequest)
        self._refuse()

    def write(self, request: WriteRequest) -> WriteResult:
        require(request, WriteRequest)
        self._refuse()

    def sweep(self, now: float | None = None) -> SweepResult:
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

    def feedback(self, request: FeedbackRequest) -> FeedbackResult:
        require(request, FeedbackRequest)
        self._refuse()
