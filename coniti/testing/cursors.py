"""Conformance: cursors resume correctly and foreign or malformed cursors raise InvalidCursor."""

from __future__ import annotations

import pytest

from coniti.actor import TimeRange
from coniti.errors import InvalidCursor
from coniti.memory import DeleteRequest, MemoryBackend, ScanRequest
from coniti.testing.fixtures import BackendFactory, BackendFixtures
from coniti.testing.helpers import ids, put, record

__all__ = ["CursorTests"]


def _first_page(backend: MemoryBackend, n: int = 6, limit: int = 2) -> str:
    """Write ``r0..r{n-1}`` at times 0, 10, 20, ...; scan one page of ``limit``; return its cursor."""
    put(backend, *[record(f"r{i}", 10.0 * i) for i in range(n)])
    page = backend.scan(ScanRequest(limit=limit))
    assert page.next_cursor is not None
    return page.next_cursor


def _rest(backend: MemoryBackend, cursor: str) -> list[str]:
    return ids(backend.scan(ScanRequest(cursor=cursor)).records)


class CursorTests(BackendFixtures):
    """Cursors: resume across deletes and inserts; malformed/empty/foreign cursors are refused."""

    def test_cursor_is_a_nonempty_string(self, backend: MemoryBackend) -> None:
        """A page that is not the last carries a non-empty string cursor."""
        cursor = _first_page(backend)
        assert isinstance(cursor, str) and cursor

    def test_cursor_can_be_reused(self, backend: MemoryBackend) -> None:
        """The same cursor gives the same page twice."""
        cursor = _first_page(backend)
        first = backend.scan(ScanRequest(limit=2, cursor=cursor))
        again = backend.scan(ScanRequest(limit=2, cursor=cursor))
        assert ids(first.records) == ids(again.records) == ["r2", "r3"]

    def test_cursor_resumes_after_deleting_last_returned(self, backend: MemoryBackend) -> None:
        """Deleting the record a cursor points at does not lose or repeat the rest."""
        cursor = _first_page(backend)
        backend.delete(DeleteRequest(ids=["r1"]))
        assert _rest(backend, cursor) == ["r2", "r3", "r4", "r5"]

    def test_cursor_resumes_after_deleting_upcoming(self, backend: MemoryBackend) -> None:
        """Records deleted after the page are simply not returned."""
        cursor = _first_page(backend)
        backend.delete(DeleteRequest(ids=["r2", "r4"]))
        assert _rest(backend, cursor) == ["r3", "r5"]

    def test_cursor_resumes_after_deleting_everything_before(self, backend: MemoryBackend) -> None:
        """Deleting every record up to and including the cursor position changes nothing ahead."""
        cursor = _first_page(backend)
        backend.delete(DeleteRequest(ids=["r0", "r1"]))
        assert _rest(backend, cursor) == ["r2", "r3", "r4", "r5"]

    def test_cursor_sees_inserts_after_position(self, backend: MemoryBackend) -> None:
        """A record inserted after the cursor's position appears when resuming."""
        cursor = _first_page(backend)
        put(backend, record("new", 25.0))
        assert _rest(backend, cursor) == ["r2", "new", "r3", "r4", "r5"]

    def test_cursor_skips_inserts_before_position(self, backend: MemoryBackend) -> None:
        """A record inserted before the cursor's position does not appear when resuming."""
        cursor = _first_page(backend)
        put(backend, record("old", 5.0))
        assert _rest(backend, cursor) == ["r2", "r3", "r4", "r5"]

    def test_cursor_sees_later_write_at_same_timestamp(self, backend: MemoryBackend) -> None:
        """A record written later with the cursor record's timestamp comes after it, so it appears."""
        cursor = _first_page(backend)
        put(backend, record("tie", 10.0))
        assert _rest(backend, cursor) == ["tie", "r2", "r3", "r4", "r5"]

    def test_cursor_works_with_another_time_range(self, backend: MemoryBackend) -> None:
        """A cursor resumes strictly after its position even under a different time range."""
        cursor = _first_page(backend)
        page = backend.scan(ScanRequest(cursor=cursor, time_range=TimeRange(end=40.0)))
        assert ids(page.records) == ["r2", "r3"]
        assert page.next_cursor is None

    def test_cursor_before_a_range_start_jumps_to_start(self, backend: MemoryBackend) -> None:
        """A cursor positioned before the range's start resumes at the start."""
        cursor = _first_page(backend)
        page = backend.scan(ScanRequest(cursor=cursor, time_range=TimeRange(start=40.0)))
        assert ids(page.records) == ["r4", "r5"]

    @pytest.mark.parametrize(
        "bad",
        ["x", "not a cursor", "a.b.c", "....", "%%%%", "AAAA.AAAA", "\x00", "é" * 40, "0" * 5000],
    )
    def test_malformed_cursor_raises(self, backend: MemoryBackend, bad: str) -> None:
        """A malformed cursor raises InvalidCursor."""
        _first_page(backend)
        with pytest.raises(InvalidCursor):
            backend.scan(ScanRequest(cursor=bad))

    def test_empty_cursor_raises(self, backend: MemoryBackend) -> None:
        """The empty string is not a cursor: InvalidCursor (not 'start from the beginning')."""
        _first_page(backend)
        with pytest.raises(InvalidCursor):
            backend.scan(ScanRequest(cursor=""))

    def test_cursor_from_other_instance_raises(self, make_backend: BackendFactory) -> None:
        """A cursor issued by another backend instance holding the same data is refused."""
        first, second = make_backend(), make_backend()
        cursor = _first_page(first)
        _first_page(second)
        with pytest.raises(InvalidCursor):
            second.scan(ScanRequest(cursor=cursor))

    @pytest.mark.parametrize(
        ("issued", "used"),
        [((), ("a",)), (("a",), ()), (("a",), ("b",)), (("a",), ("a", "b")), (("a", "b"), ("a",))],
    )
    def test_cursor_from_other_namespace_raises(
        self, backend: MemoryBackend, issued: tuple[str, ...], used: tuple[str, ...]
    ) -> None:
        """A cursor issued for one namespace is refused in any other namespace."""
        put(backend, *[record(f"r{i}", float(i), namespace=issued) for i in range(4)])
        put(backend, *[record(f"r{i}", float(i), namespace=used) for i in range(4)])
        cursor = backend.scan(ScanRequest(namespace=issued, limit=1)).next_cursor
        assert cursor is not None
        with pytest.raises(InvalidCursor):
            backend.scan(ScanRequest(namespace=used, cursor=cursor))

    def test_cursor_from_other_namespace_raises_when_empty(self, backend: MemoryBackend) -> None:
        """A foreign-namespace cursor is refused even if the namespace used holds nothing."""
        cursor = _first_page(backend)
        with pytest.raises(InvalidCursor):
            backend.scan(ScanRequest(namespace=("empty",), cursor=cursor))
