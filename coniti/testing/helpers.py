"""Building blocks for the conformance suite: record makers, exact comparison, a delegating wrapper.

Everything here uses only the public :class:`~coniti.memory.MemoryBackend` operations, so it works for
any backend.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

import numpy as np

from coniti.actor import Note, TimeRange
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
)

__all__ = [
    "Exact",
    "WrappedBackend",
    "count",
    "exact",
    "ids",
    "pages",
    "put",
    "record",
    "scan_all",
    "state",
    "vector_of",
]

Exact = tuple[str, str, str, str, str | None, bytes | None, str | None, tuple[str, ...], bytes | None]
"""A record reduced to exact, comparable parts: see :func:`exact`."""


def record(
    record_id: str,
    timestamp: float = 0.0,
    *,
    namespace: Sequence[str] = (),
    text: str | None = None,
    vector: Any = None,
    dtype: str = "float64",
    metadata: dict[str, Any] | None = None,
    embedding_id: str | None = None,
    expires_at: float | None = None,
    vectorless: bool = False,
    blob: bytes | None = None,
) -> MemoryRecord:
    """A valid record; ``text`` defaults to one naming the id, ``vector`` to a small fixed one
    (``vectorless=True``: none), ``blob`` to none."""
    values = [1.0, 0.5, -0.25] if vector is None else vector
    return MemoryRecord(
        note=Note(
            id=record_id,
            text=f"text of {record_id}" if text is None else text,
            timestamp=timestamp,
            metadata={} if metadata is None else metadata,
        ),
        vector=None if vectorless else np.asarray(values, dtype=dtype),
        embedding_id=embedding_id,
        namespace=tuple(namespace),
        expires_at=expires_at,
        blob=blob,
    )


def vector_of(r: MemoryRecord) -> np.ndarray:
    """The vector of ``r``, which must have one."""
    assert r.vector is not None, f"record {r.id!r} has no vector"
    return r.vector


def put(backend: MemoryBackend, *records: MemoryRecord) -> PutResult:
    """Write ``records`` in one call."""
    return backend.put(PutRequest(records=list(records)))


def ids(records: Iterable[MemoryRecord]) -> list[str]:
    """The ids of ``records``, in order."""
    return [r.id for r in records]


def count(
    backend: MemoryBackend,
    namespace: Sequence[str] = (),
    time_range: TimeRange | None = None,
    *,
    filter: Any = None,
) -> int:
    """How many records ``namespace`` holds (in ``time_range``, matching ``filter``)."""
    return backend.count(CountRequest(namespace=namespace, time_range=time_range, filter=filter)).count


def scan_all(
    backend: MemoryBackend,
    namespace: Sequence[str] = (),
    time_range: TimeRange | None = None,
    *,
    filter: Any = None,
) -> list[MemoryRecord]:
    """The whole range (records matching ``filter``) in one unlimited page."""
    return backend.scan(ScanRequest(namespace=namespace, time_range=time_range, filter=filter)).records


def pages(
    backend: MemoryBackend,
    limit: int,
    namespace: Sequence[str] = (),
    time_range: TimeRange | None = None,
    max_pages: int = 100_000,
    *,
    filter: Any = None,
) -> list[ScanResult]:
    """Every page of a paged scan (with ``filter``), following cursors; fails if it does not end in
    ``max_pages``."""
    out: list[ScanResult] = []
    cursor: str | None = None
    for _ in range(max_pages):
        page = backend.scan(
            ScanRequest(
                namespace=namespace, time_range=time_range, limit=limit, cursor=cursor, filter=filter
            )
        )
        out.append(page)
        cursor = page.next_cursor
        if cursor is None:
            return out
    raise AssertionError(f"a scan with limit={limit} did not end within {max_pages} pages")


def exact(r: MemoryRecord) -> Exact:
    """``r`` as exact parts: id, text, timestamp bits, metadata JSON, vector dtype and bytes (None
    and None without a vector), embedding id, namespace, blob. Two records with equal parts are
    identical bit for bit (``-0.0 != 0.0``, ``1 != 1.0 != True``)."""
    note = r.note
    vector = r.vector
    return (
        note.id,
        note.text,
        float(note.timestamp).hex(),
        json.dumps(note.metadata, sort_keys=True, allow_nan=False),
        None if vector is None else vector.dtype.str,
        None if vector is None else vector.tobytes(),
        r.embedding_id,
        tuple(r.namespace),
        r.blob,
    )


def state(
    backend: MemoryBackend,
    namespaces: Iterable[Sequence[str]] = ((),),
    meta_keys: Iterable[str] = ("embedding_id",),
) -> dict[tuple[str, ...], tuple[list[Exact], dict[str, Any]]]:
    """Everything observable in ``namespaces``: exact records in scan order and the given meta keys."""
    keys = list(meta_keys)
    out: dict[tuple[str, ...], tuple[list[Exact], dict[str, Any]]] = {}
    for ns in namespaces:
        ns_t = tuple(ns)
        records = [exact(r) for r in scan_all(backend, ns_t)]
        meta = {k: backend.get_meta(MetaGetRequest(key=k, namespace=ns_t)).value for k in keys}
        out[ns_t] = (records, meta)
    return out


Hook = Callable[[int, Any], None]


class WrappedBackend(MemoryBackend):
    """Delegates every operation to ``inner``; a hook runs before each call of ``put`` or ``scan``.

    A hook gets the 1-based call number of that operation and the request. It may raise (to make the
    call fail) or change ``inner`` (to change memory mid-operation). Closing the wrapper does not close
    ``inner``.
    """

    kind: ClassVar[str] = "wrapped"

    def __init__(
        self,
        inner: MemoryBackend,
        *,
        before_put: Hook | None = None,
        before_scan: Hook | None = None,
    ) -> None:
        self.inner = inner
        self.before_put = before_put
        self.before_scan = before_scan
        self.put_calls = 0
        self.scan_calls = 0

    def put(self, request: PutRequest) -> PutResult:
        self.put_calls += 1
        if self.before_put is not None:
            self.before_put(self.put_calls, request)
        return self.inner.put(request)

    def get(self, request: GetRequest) -> GetResult:
        return self.inner.get(request)

    def delete(self, request: DeleteRequest) -> DeleteResult:
        return self.inner.delete(request)

    def scan(self, request: ScanRequest) -> ScanResult:
        self.scan_calls += 1
        if self.before_scan is not None:
            self.before_scan(self.scan_calls, request)
        return self.inner.scan(request)

    def count(self, request: CountRequest) -> CountResult:
        return self.inner.count(request)

    def get_meta(self, request: MetaGetRequest) -> MetaResult:
        return self.inner.get_meta(request)

    def set_meta(self, request: MetaSetRequest) -> MetaResult:
        return self.inner.set_meta(request)

    def clear(self, request: ClearRequest) -> ClearResult:
        return self.inner.clear(request)

    def namespaces(
        self, prefix: Sequence[str] = (), max_depth: int | None = None
    ) -> list[tuple[str, ...]]:
        return self.inner.namespaces(prefix, max_depth)
