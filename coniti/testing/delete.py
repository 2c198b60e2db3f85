"""Conformance: ``delete`` removes by id and reports unknown ids."""

from __future__ import annotations

from coniti.memory import DeleteRequest, MemoryBackend
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import count, ids, put, record, scan_all

__all__ = ["DeleteTests"]


class DeleteTests(BackendFixtures):
    """``delete``: deleted and missing lists, repeats counted once, other records untouched."""

    def test_delete_removes_the_record(self, backend: MemoryBackend) -> None:
        """A deleted id is reported deleted and no longer scanned or counted."""
        put(backend, record("a", 1.0), record("b", 2.0))
        result = backend.delete(DeleteRequest(ids=["a"]))
        assert result.deleted == ["a"]
        assert result.missing == []
        assert ids(scan_all(backend)) == ["b"]
        assert count(backend) == 1

    def test_delete_unknown_ids_are_missing(self, backend: MemoryBackend) -> None:
        """Unknown ids are listed in missing and do not raise."""
        put(backend, record("a", 1.0))
        result = backend.delete(DeleteRequest(ids=["x", "a", "y"]))
        assert result.deleted == ["a"]
        assert result.missing == ["x", "y"]

    def test_delete_repeated_ids_count_once(self, backend: MemoryBackend) -> None:
        """Repeated ids are reported once each, in first-occurrence order."""
        put(backend, record("a", 1.0), record("b", 2.0))
        result = backend.delete(DeleteRequest(ids=["b", "x", "a", "b", "x", "a"]))
        assert result.deleted == ["b", "a"]
        assert result.missing == ["x"]

    def test_delete_keeps_request_order(self, backend: MemoryBackend) -> None:
        """deleted lists ids in request order, not timestamp order."""
        put(backend, record("a", 1.0), record("b", 2.0), record("c", 3.0))
        assert backend.delete(DeleteRequest(ids=["c", "a", "b"])).deleted == ["c", "a", "b"]

    def test_delete_twice_reports_missing(self, backend: MemoryBackend) -> None:
        """Deleting an id a second time reports it missing."""
        put(backend, record("a", 1.0))
        backend.delete(DeleteRequest(ids=["a"]))
        result = backend.delete(DeleteRequest(ids=["a"]))
        assert result.deleted == []
        assert result.missing == ["a"]

    def test_delete_no_ids(self, backend: MemoryBackend) -> None:
        """delete of an empty id list changes nothing and reports nothing."""
        put(backend, record("a", 1.0))
        result = backend.delete(DeleteRequest(ids=[]))
        assert (result.deleted, result.missing) == ([], [])
        assert count(backend) == 1

    def test_delete_keeps_order_of_the_rest(self, backend: MemoryBackend) -> None:
        """Deleting from the middle leaves the other records in (timestamp, write order)."""
        put(backend, record("a", 1.0), record("b", 1.0), record("c", 1.0), record("d", 0.5))
        backend.delete(DeleteRequest(ids=["b"]))
        assert ids(scan_all(backend)) == ["d", "a", "c"]
