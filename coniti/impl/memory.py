"""InMemoryBackend: memory in process memory, gone when the process ends.

Per namespace it keeps records in a list sorted by (timestamp, write order) and finds time ranges by
binary search; a metadata filter is tested on each record of the range as the walk reaches it. Cursors are opaque and tied to the instance and the namespace. Every operation holds one
lock, so an instance is safe to share between threads. Records are deep-copied in and out.

A record is held as a tuple of plain values with its metadata dict beside it, not as a
``MemoryRecord``: the garbage collector stops tracking such tuples and dicts (metadata of scalars), so
held notes are not objects the collector tracks (as ``MemoryRecord`` and ``Note`` objects they were
four a note: after an engine ingest of 100,000 notes a full collection took 175 ms, now 60 ms, the
walk of the big dicts and lists that remains). Reads build the records they return.

A record's version is the value of the instance's change counter when it was written (also its
write order), as the result of the put, ``put_batch`` or write that wrote it says; the ``seqs`` of
those results and of a delete are the counter's values for the call's changes. The counter advances
once per change, as a log's sequence numbers do: per record written, per id deleted (also by a
sweep), per metadata write, per clear, per op id recorded and per feedback, so both built-in
backends give the same versions and seqs for the same calls (``put_with_meta`` aside: here its
metadata is counted after the records). Op ids of :meth:`~InMemoryBackend.write` are kept for the life of the instance. Expired
records (``expires_at <= clock()``) are hidden from get, scan and count until :meth:`sweep` deletes
them; ``put`` still refuses their ids and ``delete`` removes them, as for any record the store holds.
Feedback weights (:meth:`~InMemoryBackend.feedback`) are kept per namespace and id, as a log's
``feedback`` events are: they outlive a delete or clear of the record.
"""

from __future__ import annotations

import bisect
import math
import operator
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import numpy as np

from coniti.actor import Facts, Note, TimeRange
from coniti.batch import RecordBatch, check_batch_ids
from coniti.contracts import check_json_value
from coniti.cursor import CursorCodec
from coniti.errors import ContractError, DuplicateRecord, RecordNotFound, namespace_text
from coniti.filters import MetadataFilter, compile_record_filter
from coniti.filters import RecordPredicate as Predicate
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

__all__ = ["InMemoryBackend"]

_put_result = PutResult.constructor()

Key = tuple[float, int]

Row = tuple[
    str, float, str, str | None, np.ndarray | None, bytes | None, int, float | None, str | None, Facts | None
]
"""A held record but its metadata: ``(id, timestamp, text, embedding_id, vector, blob, version,
expires_at, kind, facts)``. Plain values only, so the collector untracks it; the metadata (a dict, which would
keep the tuple holding it tracked) is held beside it, by the same key."""

_ID: Final = 0
_EXPIRES: Final = 7
_KIND: Final = 8


@dataclass
class _Stored:
    """One namespace: sorted keys, held rows and their metadata by key, keys by id, metadata
    values of the namespace."""

    keys: list[Key] = field(default_factory=list)
    by_key: dict[Key, Row] = field(default_factory=dict)
    metadata: dict[Key, dict[str, Any]] = field(default_factory=dict)
    by_id: dict[str, Key] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    expiring: int = 0
    """How many held records have an ``expires_at`` (0: no read needs to check expiry)."""

    def hold(self, key: Key, record: MemoryRecord) -> None:
        """Hold a copy of ``record`` under ``key`` (see :meth:`enter`), placed in ``keys``."""
        bisect.insort(self.keys, key)
        self.enter(key, record)

    def enter(self, key: Key, record: MemoryRecord) -> None:
        """Hold a copy of ``record`` (metadata and vector copied in; the blob is immutable bytes,
        shared) under ``key``, whose second item is its version; ``keys`` is left to the caller."""
        note, vector = record.note, record.vector
        copied = None if vector is None else vector.copy()
        self.by_key[key] = (
            note.id, note.timestamp, note.text, record.embedding_id, copied, record.blob, key[1],
            record.expires_at, note.kind, note.facts(),
        )  # fmt: skip
        self.metadata[key] = check_json_value(note.metadata, "metadata")
        self.by_id[note.id] = key
        if record.expires_at is not None:
            self.expiring += 1

    def hold_many(self, keys: list[Key], rows: list[Row], metadata: list[dict[str, Any]]) -> None:
        """Hold each row with its metadata (rows without expiry, values already copied); keys that
        all sort after the held ones, in order, are appended in one go."""
        after = not self.keys or (keys and keys[0] > self.keys[-1])
        if after and all(map(operator.lt, keys, keys[1:])):
            self.keys.extend(keys)
        else:
            for key in keys:
                bisect.insort(self.keys, key)
        self.by_key.update(zip(keys, rows, strict=True))
        self.metadata.update(zip(keys, metadata, strict=True))
        self.by_id.update(zip(map(operator.itemgetter(_ID), rows), keys, strict=True))

    def drop(self, record_id: str) -> Key | None:
        key = self.by_id.pop(record_id, None)
        if key is not None:
            del self.keys[bisect.bisect_left(self.keys, key)]
            del self.metadata[key]
            if self.by_key.pop(key)[_EXPIRES] is not None:
                self.expiring -= 1
        return key

    def records(
        self, keys: Iterable[Key], namespace: tuple[str, ...], *, copy: bool = True
    ) -> list[MemoryRecord]:
        """The records held under ``keys``: for handing to a caller, their metadata and vector
        copied out (the blob is immutable bytes, shared); with ``copy=False`` sharing what is held,
        for a read inside the backend whose records are never handed out (a write's plan)."""
        by_key, held_metadata = self.by_key, self.metadata
        note, record = Note.trusted, MemoryRecord.trusted
        out = []
        for key in keys:
            rid, ts, text, eid, vector, blob, version, expires_at, kind, facts = by_key[key]
            metadata = held_metadata[key]
            if copy:
                metadata = _copy_metadata(metadata)
                vector = None if vector is None else vector.copy()
            out.append(
                record(note(rid, text, ts, metadata, kind, facts), vector, eid, namespace, version, expires_at, blob)
            )
        return out

    def bounds(self, time_range: TimeRange | None) -> tuple[int, int]:
        lo, hi = 0, len(self.keys)
        if time_range is not None:
            if time_range.start is not None:
                lo = bisect.bisect_left(self.keys, (time_range.start, -1))
            if time_range.end is not None:
                hi = bisect.bisect_left(self.keys, (time_range.end, -1))
        return lo, max(lo, hi)

    def matching(
        self, lo: int, hi: int, match: Callable[[Key], bool], limit: int | None
    ) -> tuple[list[Key], bool]:
        """Keys of ``keys[lo:hi]`` that match, at most ``limit``, and whether another
        match follows them."""
        out: list[Key] = []
        keys = self.keys
        for i in range(lo, hi):  # by index: a page reads only as far as it needs
            key = keys[i]
            if match(key):
                if len(out) == limit:
                    return out, True
                out.append(key)
        return out, False


_SCALARS = frozenset((str, int, float, bool, type(None)))


def _copy_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a metadata dict that is valid JSON already (a batch's, or a held record's on
    its way out): its nested values are copied by :func:`check_json_value`, its scalars shared."""
    out = dict(metadata)
    for key, value in out.items():
        if type(value) not in _SCALARS:
            out[key] = check_json_value(value, "metadata")
    return out


def _copy(space: _Stored | None) -> _Stored:
    """A copy of ``space`` (a new one for None) whose containers can change without touching it."""
    if space is None:
        return _Stored()
    return _Stored(
        list(space.keys), dict(space.by_key), dict(space.metadata), dict(space.by_id),
        dict(space.meta), space.expiring,
    )  # fmt: skip


class InMemoryBackend(MemoryBackend):
    """A :class:`MemoryBackend` in process memory. Thread-safe; nothing is persisted."""

    kind: ClassVar[str] = "in_memory"
    supports_put_with_meta: ClassVar[bool] = True
    supports_put_batches: ClassVar[bool] = True
    supports_write: ClassVar[bool] = True
    supports_feedback: ClassVar[bool] = True

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        """``clock``: epoch seconds now, against which ``expires_at`` is compared."""
        self._lock = threading.RLock()
        self._spaces: dict[tuple[str, ...], _Stored] = {}
        self._order = 0
        self._cursors = CursorCodec(secrets.token_bytes(16))
        self._clock = clock
        self._op_ids: dict[tuple[tuple[str, ...], str], tuple[str, WriteResult]] = {}
        self._feedback: dict[tuple[str, ...], dict[str, list[float]]] = {}

    @staticmethod
    def _visible(row: Row, now: float) -> bool:
        expires_at = row[_EXPIRES]
        return expires_at is None or expires_at > now

    def _space(self, namespace: tuple[str, ...]) -> _Stored | None:
        return self._spaces.get(namespace)

    def _refuse_live(self, records: Sequence[MemoryRecord]) -> None:
        """Raise :class:`DuplicateRecord` for the first record whose id is live (hold the lock)."""
        for record in records:
            space = self._spaces.get(record.namespace)
            if space is not None and record.id in space.by_id:
                raise DuplicateRecord(
                    f"record id {record.id!r} already exists in namespace "
                    f"{namespace_text(record.namespace)}"
                )

    def put(self, request: PutRequest) -> PutResult:
        request = require(request, PutRequest)
        records = request.records
        check_put_ids(records)
        with self._lock:
            self._refuse_live(records)
            versions = [
                self._hold(self._spaces.setdefault(record.namespace, _Stored()), record)
                for record in records
            ]
        return _put_result({"written": len(records), "versions": versions, "seqs": list(versions)})

    def _hold(self, space: _Stored, record: MemoryRecord) -> int:
        """Store a copy of ``record`` under the next version; returns it."""
        self._order += 1
        space.hold((record.note.timestamp, self._order), record)
        return self._order

    def write(self, request: WriteRequest) -> WriteResult:
        """Apply the request under the instance lock (see :class:`WriteRequest`): expectations, then
        every op is checked and planned, then applied; an error in any step writes nothing."""
        request = require(request, WriteRequest)
        namespace = request.namespace
        digest = None if request.op_id is None else request.digest()
        with self._lock:
            if request.op_id is not None:
                seen = self._op_ids.get((namespace, request.op_id))
                if seen is not None:
                    if seen[0] != digest:
                        raise idempotency_conflict(request.op_id, namespace)
                    return seen[1].model_copy(update={"replayed": True}, deep=True)
            now = self._clock()
            space = self._spaces.get(namespace)

            def live(record_id: str) -> MemoryRecord | None:
                key = None if space is None else space.by_id.get(record_id)
                if key is None or space is None:
                    return None
                visible = self._visible(space.by_key[key], now)
                return space.records([key], namespace, copy=False)[0] if visible else None

            def held(record_id: str) -> bool:
                return space is not None and record_id in space.by_id

            plan, result = plan_write(request, live, held)
            for record_id, replacement in plan:
                if space is None:
                    space = self._spaces.setdefault(namespace, _Stored())
                space.drop(record_id)
                if replacement is None:
                    self._order += 1
                else:
                    result.versions[record_id] = self._hold(space, replacement)
                result.seqs.append(self._order)
            if request.op_id is not None and digest is not None:
                self._order += 1
                result.seqs.append(self._order)
                self._op_ids[(namespace, request.op_id)] = (digest, result.model_copy(deep=True))
        return result

    def op_result(self, op_id: str, namespace: Sequence[str] = ()) -> WriteResult | None:
        with self._lock:
            seen = self._op_ids.get((as_namespace(namespace), op_id))
        return None if seen is None else seen[1].model_copy(update={"replayed": True}, deep=True)

    def sweep(self, now: float | None = None) -> SweepResult:
        """Delete every held record with ``expires_at <= now`` (default: the clock), in every
        namespace."""
        deleted = 0
        with self._lock:
            when = self._clock() if now is None else now
            for space in self._spaces.values():
                if not space.expiring:
                    continue
                expired = [r[_ID] for r in space.by_key.values() if not self._visible(r, when)]
                for record_id in expired:
                    space.drop(record_id)
                deleted += len(expired)
            self._order += deleted
        return SweepResult(deleted=deleted)

    def put_with_meta(self, request: PutRequest, meta: MetaSetRequest) -> PutResult:
        """``set_meta`` and ``put`` under the instance lock: the metadata is set only if the put
        succeeds, and no other call sees one without the other."""
        request = require(request, PutRequest)
        meta = require(meta, MetaSetRequest)
        with self._lock:
            result = self.put(request)
            self.set_meta(meta)
            result.seqs.append(self._order)
        return result

    def put_batch(self, batch: RecordBatch, meta: MetaSetRequest | None = None) -> PutResult:
        """:meth:`put` (with ``meta``: :meth:`put_with_meta`) of the batch's records, each stored as
        one copy made from the columns, under the instance lock: the vectors are one read-only copy
        of the batch's matrix, each record's a row of it (the copy lives while any of its records
        is held)."""
        if not isinstance(batch, RecordBatch):
            raise ContractError(f"batch must be a RecordBatch, got {type(batch).__name__}")
        if meta is not None:
            meta = require(meta, MetaSetRequest)
        check_batch_ids(batch)
        ns, eid, vectors = batch.namespace, batch.embedding_id, batch.vectors
        notes = batch.notes
        with self._lock:
            space = self._spaces.get(ns)
            if space is not None:
                for record_id in notes.ids:
                    if record_id in space.by_id:
                        raise DuplicateRecord(
                            f"record id {record_id!r} already exists in namespace {namespace_text(ns)}"
                        )
            space = self._spaces.setdefault(ns, _Stored())
            first = self._order + 1
            self._order += len(notes)
            orders = range(first, first + len(notes))
            stamps = notes.timestamps.tolist()
            rows: list[np.ndarray | None] = [None] * len(notes)
            if vectors is not None:
                matrix = vectors.copy()
                matrix.flags.writeable = False
                rows = list(matrix)
            held: list[Row] = [
                (record_id, ts, text, eid, row, None, order, None, None, None)
                for record_id, text, ts, row, order in zip(
                    notes.ids, notes.texts, stamps, rows, orders, strict=True
                )
            ]  # fmt: skip
            metadata = [_copy_metadata(md) for md in notes.metadata]
            space.hold_many(list(zip(stamps, orders, strict=True)), held, metadata)
            seqs = list(orders)
            if meta is not None:
                self.set_meta(meta)
                seqs.append(self._order)
        return _put_result({"written": len(notes), "versions": list(orders), "seqs": seqs})

    def put_batches(
        self, batches: Iterable[Sequence[MemoryRecord]], meta: MetaSetRequest | None = None
    ) -> int:
        """Every record of ``batches`` (and ``meta``) or nothing: the batches are read first, then,
        under the lock, the touched namespaces are rebuilt as copies and swapped in by one dict
        update, so neither a refusal nor ``KeyboardInterrupt`` can leave a part of the load."""
        records = [record for batch in batches for record in batch]
        check_put_ids(records)
        if meta is not None:
            meta = require(meta, MetaSetRequest)
        with self._lock:
            self._refuse_live(records)
            touched: dict[tuple[str, ...], _Stored] = {}
            for record in records:
                space = touched.get(record.namespace)
                if space is None:
                    space = touched[record.namespace] = _copy(self._spaces.get(record.namespace))
                self._order += 1
                key = (record.note.timestamp, self._order)
                space.keys.append(key)
                space.enter(key, record)
            for space in touched.values():
                space.keys.sort()
            if meta is not None:
                ns = tuple(meta.namespace)
                space = touched.get(ns)
                if space is None:
                    space = touched[ns] = _copy(self._spaces.get(ns))
                space.meta[meta.key] = check_json_value(meta.value, "value")
            self._spaces.update(touched)
        return len(records)

    def get(self, request: GetRequest) -> GetResult:
        request = require(request, GetRequest)
        found: list[Key] = []
        missing: list[str] = []
        with self._lock:
            space = self._space(request.namespace)
            if space is None:
                return GetResult(records=[], missing=unique_ids(request.ids))
            now = self._clock() if space.expiring else None
            for record_id in unique_ids(request.ids):
                key = space.by_id.get(record_id)
                if key is None or (now is not None and not self._visible(space.by_key[key], now)):
                    missing.append(record_id)
                else:
                    found.append(key)
            records = space.records(found, request.namespace)
        return GetResult(records=records, missing=missing)

    def delete(self, request: DeleteRequest) -> DeleteResult:
        request = require(request, DeleteRequest)
        deleted: list[str] = []
        missing: list[str] = []
        with self._lock:
            space = self._space(request.namespace)
            for record_id in unique_ids(request.ids):
                key = space.drop(record_id) if space else None
                (missing if key is None else deleted).append(record_id)
            seqs = list(range(self._order + 1, self._order + 1 + len(deleted)))
            self._order += len(deleted)
        return DeleteResult(deleted=deleted, missing=missing, seqs=seqs)

    def scan(self, request: ScanRequest) -> ScanResult:
        request = require(request, ScanRequest)
        namespace = request.namespace
        after = None if request.cursor is None else self._cursors.decode(request.cursor, namespace)
        with self._lock:
            space = self._space(namespace)
            if space is None:
                return ScanResult(records=[], next_cursor=None)
            lo, hi = space.bounds(request.time_range)
            if after is not None:
                lo = max(lo, bisect.bisect_right(space.keys, after))
            if request.filter is None and not space.expiring:
                stop = hi if request.limit is None else min(hi, lo + request.limit)
                keys = space.keys[lo:stop]
                more = stop < hi
            else:
                keys, more = space.matching(lo, hi, self._shown(space, request.filter), request.limit)
            records = space.records(keys, namespace)
        cursor = self._cursors.encode(namespace, *keys[-1]) if more and keys else None
        return ScanResult(records=records, next_cursor=cursor)

    def count(self, request: CountRequest) -> CountResult:
        request = require(request, CountRequest)
        with self._lock:
            space = self._space(request.namespace)
            if space is None:
                return CountResult(count=0)
            lo, hi = space.bounds(request.time_range)
            if request.filter is None and not space.expiring:
                return CountResult(count=hi - lo)
            shown = self._shown(space, request.filter)
            return CountResult(count=sum(1 for k in space.keys[lo:hi] if shown(k)))

    def _shown(self, space: _Stored, filter: MetadataFilter | None) -> Callable[[Key], bool]:
        """Which keys' records a read shows: unexpired (when any held record has an expiry) and
        matching ``filter``."""
        match: Predicate | None = None if filter is None else compile_record_filter(filter)
        by_key, metadata = space.by_key, space.metadata
        if not space.expiring:
            assert match is not None
            return lambda key: match(metadata[key], by_key[key][_KIND])
        now = self._clock()
        if match is None:
            return lambda key: self._visible(by_key[key], now)
        return lambda key: self._visible(by_key[key], now) and match(metadata[key], by_key[key][_KIND])

    def namespaces(
        self, prefix: Sequence[str] = (), max_depth: int | None = None
    ) -> list[tuple[str, ...]]:
        with self._lock:
            live = [ns for ns, space in self._spaces.items() if space.keys]
        return namespace_listing(live, prefix, max_depth)

    def get_meta(self, request: MetaGetRequest) -> MetaResult:
        request = require(request, MetaGetRequest)
        with self._lock:
            space = self._space(request.namespace)
            value = None if space is None else space.meta.get(request.key)
            return MetaResult(value=check_json_value(value, request.key))

    def set_meta(self, request: MetaSetRequest) -> MetaResult:
        request = require(request, MetaSetRequest)
        with self._lock:
            space = self._spaces.setdefault(request.namespace, _Stored())
            space.meta[request.key] = check_json_value(request.value, request.key)
            self._order += 1
        return MetaResult(value=request.value)

    def feedback(self, request: FeedbackRequest) -> FeedbackResult:
        request = require(request, FeedbackRequest)
        ns = request.namespace
        with self._lock:
            space = self._space(ns)
            key = None if space is None else space.by_id.get(request.id)
            if space is None or key is None or not self._visible(space.by_key[key], self._clock()):
                raise RecordNotFound(f"record {request.id!r} is not live in namespace {namespace_text(ns)}")
            weights = self._feedback.setdefault(ns, {}).setdefault(request.id, [])
            weights.append(float(request.weight))
            self._order += 1
            return FeedbackResult(id=request.id, weight=math.fsum(weights), seq=None)

    def feedback_weights(self, namespace: Sequence[str] = ()) -> dict[str, float]:
        ns = as_namespace(namespace)
        with self._lock:
            held = self._feedback.get(ns, {})
            return {i: math.fsum(w) for i, w in sorted(held.items())}

    def clear(self, request: ClearRequest) -> ClearResult:
        request = require(request, ClearRequest)
        with self._lock:
            self._order += 1
            space = self._space(request.namespace)
            if space is None:
                return ClearResult(deleted=0)
            deleted = len(space.keys)
            space.keys.clear()
            space.by_key.clear()
            space.metadata.clear()
            space.by_id.clear()
            space.expiring = 0
        return ClearResult(deleted=deleted)
