"""Conformance: ``scan`` order, half-open time ranges and exact paging."""

from __future__ import annotations

import pytest

from coniti.actor import TimeRange
from coniti.memory import MemoryBackend, ScanRequest
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import ids, pages, put, record, scan_all

__all__ = ["ScanTests"]


def _fill(backend: MemoryBackend, n: int) -> list[str]:
    """Write ``n`` records ``r0..`` with timestamps 0, 1, ...; returns their ids in order."""
    records = [record(f"r{i}", float(i)) for i in range(n)]
    put(backend, *records)
    return ids(records)


class ScanTests(BackendFixtures):
    """``scan``: (timestamp, write order), half-open ranges, exact pages, next_cursor at the end."""

    def test_scan_empty_backend(self, backend: MemoryBackend) -> None:
        """A scan of an empty backend returns no records and no cursor."""
        page = backend.scan(ScanRequest(limit=5))
        assert page.records == []
        assert page.next_cursor is None

    def test_scan_orders_by_timestamp(self, backend: MemoryBackend) -> None:
        """Records come back by timestamp, whatever order they were written in."""
        put(backend, record("c", 3.0), record("a", -1.5))
        put(backend, record("b", 2.25))
        assert ids(scan_all(backend)) == ["a", "b", "c"]

    def test_scan_equal_timestamps_keep_write_order_across_calls(
        self, backend: MemoryBackend
    ) -> None:
        """Records with equal timestamps come back in the order their puts happened."""
        for name in ["z", "m", "a", "q"]:
            put(backend, record(name, 5.0))
        assert ids(scan_all(backend)) == ["z", "m", "a", "q"]

    def test_scan_equal_timestamps_keep_list_order_within_a_call(
        self, backend: MemoryBackend
    ) -> None:
        """Within one put, records with equal timestamps keep their order in the list."""
        put(backend, record("z", 5.0), record("m", 5.0), record("a", 5.0))
        assert ids(scan_all(backend)) == ["z", "m", "a"]

    def test_scan_write_order_breaks_ties_only(self, backend: MemoryBackend) -> None:
        """A later write with an earlier timestamp still comes first."""
        put(backend, record("late", 2.0))
        put(backend, record("early", 1.0), record("late2", 2.0))
        assert ids(scan_all(backend)) == ["early", "late", "late2"]

    def test_scan_range_includes_start(self, backend: MemoryBackend) -> None:
        """A record at exactly start is inside the range."""
        _fill(backend, 5)
        assert ids(scan_all(backend, time_range=TimeRange(start=2.0)))[0] == "r2"

    def test_scan_range_excludes_end(self, backend: MemoryBackend) -> None:
        """A record at exactly end is outside the range."""
        _fill(backend, 5)
        assert ids(scan_all(backend, time_range=TimeRange(end=3.0))) == ["r0", "r1", "r2"]

    def test_scan_closed_range_is_half_open(self, backend: MemoryBackend) -> None:
        """[start, end) with both bounds returns start..end-excluded."""
        _fill(backend, 6)
        got = ids(scan_all(backend, time_range=TimeRange(start=1.0, end=4.0)))
        assert got == ["r1", "r2", "r3"]

    def test_scan_range_between_records(self, backend: MemoryBackend) -> None:
        """Fractional bounds select the records strictly between them."""
        _fill(backend, 6)
        got = ids(scan_all(backend, time_range=TimeRange(start=0.5, end=3.5)))
        assert got == ["r1", "r2", "r3"]

    def test_scan_empty_range_returns_nothing(self, backend: MemoryBackend) -> None:
        """start == end selects nothing, even with a record at that time."""
        _fill(backend, 3)
        page = backend.scan(ScanRequest(time_range=TimeRange(start=1.0, end=1.0), limit=2))
        assert page.records == []
        assert page.next_cursor is None

    def test_scan_range_with_equal_timestamps(self, backend: MemoryBackend) -> None:
        """Every record at the start time is included, every record at the end time excluded."""
        put(backend, *[record(f"s{i}", 1.0) for i in range(3)], *[record(f"e{i}", 2.0) for i in range(3)])
        assert ids(scan_all(backend, time_range=TimeRange(start=1.0, end=2.0))) == ["s0", "s1", "s2"]

    def test_scan_without_limit_is_one_page(self, backend: MemoryBackend) -> None:
        """limit=None returns the whole range in one page with next_cursor None."""
        expected = _fill(backend, 25)
        page = backend.scan(ScanRequest())
        assert ids(page.records) == expected
        assert page.next_cursor is None

    @pytest.mark.parametrize("limit", [1, 2, 3, 4, 6, 7, 12, 13, 100])
    def test_paging_equals_full_scan(self, backend: MemoryBackend, limit: int) -> None:
        """Following cursors at any page size yields exactly the full scan, without repeats."""
        expected = _fill(backend, 12)
        got = [i for page in pages(backend, limit) for i in ids(page.records)]
        assert got == expected

    @pytest.mark.parametrize("limit", [1, 2, 3, 4, 5, 7, 11, 12, 13])
    def test_pages_are_exactly_limit_long(self, backend: MemoryBackend, limit: int) -> None:
        """Every page but the last holds exactly limit records; the last holds the rest."""
        n = 12
        _fill(backend, n)
        sizes = [len(p.records) for p in pages(backend, limit)]
        full, rest = divmod(n, limit)
        assert sizes == [limit] * full + ([rest] if rest else [])

    @pytest.mark.parametrize("limit", [1, 2, 3, 4, 6, 12])
    def test_next_cursor_none_exactly_at_end(self, backend: MemoryBackend, limit: int) -> None:
        """When the range ends exactly at a page boundary, that page has next_cursor None."""
        _fill(backend, 12)
        got = pages(backend, limit)
        assert len(got) == 12 // limit
        assert [p.next_cursor is None for p in got] == [False] * (len(got) - 1) + [True]

    def test_limit_beyond_range_is_one_page(self, backend: MemoryBackend) -> None:
        """A limit larger than the range returns it all with next_cursor None."""
        expected = _fill(backend, 4)
        page = backend.scan(ScanRequest(limit=5))
        assert ids(page.records) == expected
        assert page.next_cursor is None

    @pytest.mark.parametrize("limit", [1, 2, 3, 5])
    def test_paging_inside_a_time_range(self, backend: MemoryBackend, limit: int) -> None:
        """Paging a time range yields exactly the range, never records outside it."""
        _fill(backend, 10)
        window = TimeRange(start=2.0, end=7.0)
        got = [i for p in pages(backend, limit, time_range=window) for i in ids(p.records)]
        assert got == ["r2", "r3", "r4", "r5", "r6"]

    @pytest.mark.parametrize("limit", [1, 2, 3])
    def test_paging_through_equal_timestamps(self, backend: MemoryBackend, limit: int) -> None:
        """Page boundaries inside a run of equal timestamps lose and repeat nothing."""
        records = [record(f"r{i}", float(i // 4)) for i in range(10)]
        put(backend, *records)
        got = [i for p in pages(backend, limit) for i in ids(p.records)]
        assert got == ids(records)

    def test_scan_of_unknown_namespace_is_empty(self, backend: MemoryBackend) -> None:
        """A namespace nothing was written to scans as empty."""
        _fill(backend, 3)
        page = backend.scan(ScanRequest(namespace=("nobody",), limit=10))
        assert page.records == []
        assert page.next_cursor is None
