"""Conformance: ``iter_all`` follows cursors over the whole range."""

from __future__ import annotations

import pytest

from coniti.actor import TimeRange
from coniti.memory import MemoryBackend
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import ids, put, record, scan_all

__all__ = ["IterAllTests"]


class IterAllTests(BackendFixtures):
    """``iter_all``: every record of the range and namespace, in scan order, at any page size."""

    @pytest.mark.parametrize("page_size", [1, 2, 3, 9, 10, 500])
    def test_iter_all_yields_the_full_scan(self, backend: MemoryBackend, page_size: int) -> None:
        """iter_all yields exactly what one unlimited scan returns, in the same order."""
        put(backend, *[record(f"r{i}", float(i % 4)) for i in range(9)])
        assert ids(backend.iter_all(page_size=page_size)) == ids(scan_all(backend))

    def test_iter_all_of_empty_backend(self, backend: MemoryBackend) -> None:
        """iter_all of an empty backend yields nothing."""
        assert list(backend.iter_all()) == []

    def test_iter_all_respects_range_and_namespace(self, backend: MemoryBackend) -> None:
        """iter_all yields only the namespace and half-open time range asked for."""
        put(backend, *[record(f"r{i}", float(i), namespace=("n",)) for i in range(6)])
        put(backend, *[record(f"o{i}", float(i)) for i in range(6)])
        got = backend.iter_all(TimeRange(start=1.0, end=4.0), namespace=("n",), page_size=2)
        assert ids(got) == ["r1", "r2", "r3"]
