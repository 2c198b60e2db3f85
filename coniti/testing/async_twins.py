"""Conformance: the async twins give the same results as the sync operations."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from coniti.actor import TimeRange
from coniti.errors import DuplicateRecord, InvalidCursor
from coniti.memory import (
    ClearRequest,
    CountRequest,
    DeleteRequest,
    GetRequest,
    MemoryBackend,
    MetaGetRequest,
    MetaSetRequest,
    PutRequest,
    ScanRequest,
)
from coniti.testing.fixtures import BackendFactory, BackendFixtures
from coniti.testing.helpers import exact, ids, put, record, scan_all, state

__all__ = ["AsyncTests"]

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to completion in a new event loop."""
    return asyncio.run(coroutine)


def assert_ascan_pages_match(backend: MemoryBackend, **fields: Any) -> None:
    """Page through ``ScanRequest(**fields)`` with scan and with ascan, each following its own
    cursors: the pages hold the same records and end at the same page."""
    cursor_sync: str | None = None
    cursor_async: str | None = None
    while True:
        page_sync = backend.scan(ScanRequest(**fields, cursor=cursor_sync))
        page_async = run(backend.ascan(ScanRequest(**fields, cursor=cursor_async)))
        assert [exact(r) for r in page_async.records] == [exact(r) for r in page_sync.records]
        assert (page_async.next_cursor is None) == (page_sync.next_cursor is None)
        cursor_sync, cursor_async = page_sync.next_cursor, page_async.next_cursor
        if cursor_sync is None:
            return


def _records() -> list[Any]:
    return [
        record("a", 1.0, metadata={"k": [1]}),
        record("b", 1.0, dtype="float32"),
        record("c", 0.5, namespace=("x",)),
        record("d", 3.0, dtype="float16", embedding_id="emb"),
    ]


class AsyncTests(BackendFixtures):
    """aput, aget, adelete, ascan, acount, aget_meta, aset_meta, aclear equal their sync twins."""

    def test_aput_matches_put(self, make_backend: BackendFactory) -> None:
        """aput returns what put returns and leaves the same state."""
        sync, asy = make_backend(), make_backend()
        assert run(asy.aput(PutRequest(records=_records()))) == sync.put(
            PutRequest(records=_records())
        )
        namespaces = [(), ("x",)]
        assert state(asy, namespaces) == state(sync, namespaces)

    def test_aget_matches_get(self, backend: MemoryBackend) -> None:
        """aget returns the same records and missing ids as get."""
        put(backend, *_records())
        request = GetRequest(ids=["d", "zz", "a", "d", "b"])
        got_async, got_sync = run(backend.aget(request)), backend.get(request)
        assert [exact(r) for r in got_async.records] == [exact(r) for r in got_sync.records]
        assert got_async.missing == got_sync.missing

    def test_adelete_matches_delete(self, make_backend: BackendFactory) -> None:
        """adelete returns what delete returns and leaves the same state."""
        sync, asy = make_backend(), make_backend()
        put(sync, *_records())
        put(asy, *_records())
        request = DeleteRequest(ids=["b", "zz", "b", "a"])
        assert run(asy.adelete(request)) == sync.delete(request)
        assert state(asy) == state(sync)

    @pytest.mark.parametrize("limit", [None, 1, 2, 5])
    def test_ascan_matches_scan(self, backend: MemoryBackend, limit: int | None) -> None:
        """ascan pages hold the same records as scan pages, and end at the same page."""
        put(backend, *_records(), *[record(f"r{i}", float(i)) for i in range(6)])
        assert_ascan_pages_match(backend, time_range=TimeRange(start=0.75), limit=limit)

    def test_async_cursor_resumes_a_sync_scan(self, backend: MemoryBackend) -> None:
        """A cursor from ascan resumes scan exactly where the async page stopped."""
        put(backend, *[record(f"r{i}", float(i)) for i in range(5)])
        first = run(backend.ascan(ScanRequest(limit=2)))
        assert first.next_cursor is not None
        rest = backend.scan(ScanRequest(cursor=first.next_cursor))
        assert ids(first.records) + ids(rest.records) == [f"r{i}" for i in range(5)]

    def test_acount_matches_count(self, backend: MemoryBackend) -> None:
        """acount returns what count returns, with and without a range."""
        put(backend, *_records())
        for request in [CountRequest(), CountRequest(time_range=TimeRange(end=1.0))]:
            assert run(backend.acount(request)) == backend.count(request)

    def test_aset_meta_matches_set_meta(self, make_backend: BackendFactory) -> None:
        """aset_meta returns what set_meta returns and stores the same value."""
        sync, asy = make_backend(), make_backend()
        request = MetaSetRequest(key="k", value={"l": [1, 2.5, None]}, namespace=("x",))
        assert run(asy.aset_meta(request)) == sync.set_meta(request)
        get = MetaGetRequest(key="k", namespace=("x",))
        assert asy.get_meta(get) == sync.get_meta(get)

    def test_aget_meta_matches_get_meta(self, backend: MemoryBackend) -> None:
        """aget_meta returns what get_meta returns, for set and unset keys."""
        backend.set_meta(MetaSetRequest(key="k", value=[1, "two"]))
        for key in ["k", "unset"]:
            request = MetaGetRequest(key=key)
            assert run(backend.aget_meta(request)) == backend.get_meta(request)

    def test_aclear_matches_clear(self, make_backend: BackendFactory) -> None:
        """aclear returns what clear returns and leaves the same state."""
        sync, asy = make_backend(), make_backend()
        put(sync, *_records())
        put(asy, *_records())
        assert run(asy.aclear(ClearRequest())) == sync.clear(ClearRequest())
        namespaces = [(), ("x",)]
        assert state(asy, namespaces) == state(sync, namespaces)
        assert scan_all(asy) == []

    def test_aput_duplicate_raises(self, backend: MemoryBackend) -> None:
        """aput of an existing id raises DuplicateRecord and writes nothing."""
        put(backend, record("a", 1.0))
        with pytest.raises(DuplicateRecord):
            run(backend.aput(PutRequest(records=[record("b", 1.0), record("a", 2.0)])))
        assert ids(scan_all(backend)) == ["a"]

    def test_ascan_invalid_cursor_raises(self, backend: MemoryBackend) -> None:
        """ascan with a malformed cursor raises InvalidCursor."""
        put(backend, record("a", 1.0))
        with pytest.raises(InvalidCursor):
            run(backend.ascan(ScanRequest(cursor="not a cursor")))
