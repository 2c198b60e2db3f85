"""Conformance: ``count`` with and without half-open time ranges."""

from __future__ import annotations

import pytest

from coniti.actor import TimeRange
from coniti.memory import CountRequest, DeleteRequest, MemoryBackend
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import count, put, record, scan_all

__all__ = ["CountTests"]


def _fill(backend: MemoryBackend) -> None:
    """Ten records at times 0..4, two per time."""
    put(backend, *[record(f"r{i}", float(i // 2)) for i in range(10)])


class CountTests(BackendFixtures):
    """``count``: totals, half-open ranges, agreement with scan."""

    def test_fresh_backend_counts_zero(self, backend: MemoryBackend) -> None:
        """A backend from the factory is empty."""
        assert backend.count(CountRequest()).count == 0

    def test_count_all(self, backend: MemoryBackend) -> None:
        """Without a range, count is the number of records."""
        _fill(backend)
        assert count(backend) == 10

    def test_count_includes_start_excludes_end(self, backend: MemoryBackend) -> None:
        """Records at start count, records at end do not."""
        _fill(backend)
        assert count(backend, time_range=TimeRange(start=1.0, end=3.0)) == 4

    def test_count_empty_range_is_zero(self, backend: MemoryBackend) -> None:
        """start == end counts nothing, even with records at that time."""
        _fill(backend)
        assert count(backend, time_range=TimeRange(start=2.0, end=2.0)) == 0

    @pytest.mark.parametrize(
        ("start", "end"),
        [(None, None), (None, 2.0), (2.0, None), (0.5, 3.5), (-10.0, 0.0), (4.0, 100.0), (5.0, 9.0)],
    )
    def test_count_equals_scan_length(
        self, backend: MemoryBackend, start: float | None, end: float | None
    ) -> None:
        """count over a range equals the number of records scan returns for it."""
        _fill(backend)
        window = TimeRange(start=start, end=end)
        assert count(backend, time_range=window) == len(scan_all(backend, time_range=window))

    def test_count_after_delete(self, backend: MemoryBackend) -> None:
        """Deleted records are no longer counted."""
        _fill(backend)
        backend.delete(DeleteRequest(ids=["r0", "r5", "missing"]))
        assert count(backend) == 8
