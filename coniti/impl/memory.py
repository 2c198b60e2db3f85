"""InMemoryBackend: memory in process memory, gone when the process ends.

Per namespace it keeps records in a list sorted by (timestamp, write order) and finds time ranges by
binary search; a metadata filter is tested on each record of the range as the walk reaches it. Cursors are opaque and tied to the instance and the namespace. Every operation holds one
lock, so an instance is safe to share between threads. Records are deep-copied in and out.
"""

from __future__ import annotations

import bisect
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from coniti.actor import TimeRange
from coniti.contracts import check_json_value
from coniti.cursor import CursorCodec
from coniti.errors import DuplicateRecord
from coniti.filters import Predicate, compile_filter
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
    check_put_ids,
    namespace_listing,
    require,
    unique_ids,
)

__all__ = ["InMemoryBackend"]

Key = tuple[float, int]


@dataclass
class _Stored:
    """One namespace: sorted keys, records by id, metadata."""

    keys: list[Key] = field(default_factory=list)
    by_key: dict[Key, MemoryRecord] = field(default_factory=dict)
    by_id: dict[str, Key] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def bounds(self, time_range: TimeRange | None) -> tuple[int, int]:
        lo, hi = 0, len(self.keys)
        if time_range is not None:
            if time_range.start is not None:
                lo = bisect.bisect_left(self.keys, (time_range.start, -1))
            if time_range.end is not None:
                hi = bisect.bisect_left(self.keys, (time_range.end, -1))
        return lo, max(lo, hi)

    def matching(self, lo: int, hi: int, match: Predicate, limit: int | None) -> tuple[list[Key], bool]:
        """Keys of ``keys[lo:hi]`` whose record's metadata matches, at most ``limit``, and whether
        another match follows them."""
        out: list[Key] = []
        keys, by_key = self.keys, self.by_key
        for i in range(lo, hi):  # by index: a page reads only as far as it needs
            key = keys[i]
            if match(by_key[key].note.metadata):
                if len(out) == limit:
                    return out, True
                out.append(key)
        return out, False


class InMemoryBackend(MemoryBackend):
    """A :class:`MemoryBackend` in process memory. Thread-safe; nothing is persisted."""

    kind: ClassVar[str] = "in_memory"
    supports_put_with_meta: ClassVar[bool] = True

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._spaces: dict[tuple[str, ...], _Stored] = {}
        self._order = 0
        self._cursors = CursorCodec(secrets.token_bytes(16))

    def _space(self, namespace: tuple[str, ...]) -> _Stored | None:
        return self._spaces.get(namespace)

    def put(self, request: PutRequest) -> PutResult:
        request = require(request, PutRequest)
        records = request.records
        check_put_ids(records)
        with self._lock:
            for record in records:
                space = self._spaces.get(record.namespace)
                if space is not None and record.id in space.by_id:
                    raise DuplicateRecord(
                        f"record id {record.id!r} already exists in namespace {record.namespace!r}"
                    )
            for record in records:
                space = self._spaces.setdefault(record.namespace, _Stored())
                self._order += 1
                key = (record.note.timestamp, self._order)
                bisect.insort(space.keys, key)
                space.by_key[key] = record.copy_out()
                space.by_id[record.id] = key
        return PutResult(written=len(records))

    def put_with_meta(self, request: PutRequest, meta: MetaSetRequest) -> PutResult:
        """``set_meta`` and ``put`` under the instance lock: the metadata is set only if the put
        succeeds, and no other call sees one without the other."""
        request = require(request, PutRequest)
        meta = require(meta, MetaSetRequest)
        with self._lock:
            result = self.put(request)
            self.set_meta(meta)
        return result

    def get(self, request: GetRequest) -> GetResult:
        request = require(request, GetRequest)
        found: list[MemoryRecord] = []
        missing: list[str] = []
        with self._lock:
            space = self._space(request.namespace)
            for record_id in unique_ids(request.ids):
                key = space.by_id.get(record_id) if space else None
                if key is None or space is None:
                    missing.append(record_id)
                else:
                    found.append(space.by_key[key].copy_out())
        return GetResult(records=found, missing=missing)

    def delete(self, request: DeleteRequest) -> DeleteResult:
        request = require(request, DeleteRequest)
        deleted: list[str] = []
        missing: list[str] = []
        with self._lock:
            space = self._space(request.namespace)
            for record_id in unique_ids(request.ids):
                key = space.by_id.pop(record_id, None) if space else None
                if key is None or space is None:
                    missing.append(record_id)
                    continue
                del space.keys[bisect.bisect_left(space.keys, key)]
                del space.by_key[key]
                deleted.append(record_id)
        return DeleteResult(deleted=deleted, missing=missing)

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
            if request.filter is None:
                stop = hi if request.limit is None else min(hi, lo + request.limit)
                keys = space.keys[lo:stop]
                more = stop < hi
            else:
                keys, more = space.matching(lo, hi, compile_filter(request.filter), request.limit)
            records = [space.by_key[k].copy_out() for k in keys]
        cursor = self._cursors.encode(namespace, *keys[-1]) if more and keys else None
        return ScanResult(records=records, next_cursor=cursor)

    def count(self, request: CountRequest) -> CountResult:
        request = require(request, CountRequest)
        with self._lock:
            space = self._space(request.namespace)
            if space is None:
                return CountResult(count=0)
            lo, hi = space.bounds(request.time_range)
            if request.filter is None:
                return CountResult(count=hi - lo)
            match = compile_filter(request.filter)
            by_key = space.by_key
            return CountResult(count=sum(1 for k in space.keys[lo:hi] if match(by_key[k].note.metadata)))

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
        return MetaResult(value=request.value)

    def clear(self, request: ClearRequest) -> ClearResult:
        request = require(request, ClearRequest)
        with self._lock:
            space = self._space(request.namespace)
            if space is None:
                return ClearResult(deleted=0)
            deleted = len(space.keys)
            space.keys.clear()
            space.by_key.clear()
            space.by_id.clear()
        return ClearResult(deleted=deleted)
