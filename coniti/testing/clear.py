"""Conformance: ``clear`` removes every record of a namespace and keeps its metadata."""

from __future__ import annotations

from coniti.memory import ClearRequest, GetRequest, MemoryBackend, MetaGetRequest, MetaSetRequest
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import count, ids, put, record, scan_all

__all__ = ["ClearTests"]


class ClearTests(BackendFixtures):
    """``clear``: deleted count, records gone, metadata kept, ids reusable."""

    def test_clear_returns_deleted_count(self, backend: MemoryBackend) -> None:
        """clear reports how many records it removed."""
        put(backend, *[record(f"r{i}", float(i)) for i in range(4)])
        assert backend.clear(ClearRequest()).deleted == 4

    def test_clear_removes_every_record(self, backend: MemoryBackend) -> None:
        """After clear, scan, count and get find nothing."""
        put(backend, *[record(f"r{i}", float(i)) for i in range(4)])
        backend.clear(ClearRequest())
        assert scan_all(backend) == []
        assert count(backend) == 0
        assert backend.get(GetRequest(ids=["r0"])).missing == ["r0"]

    def test_clear_keeps_meta(self, backend: MemoryBackend) -> None:
        """clear keeps the namespace's metadata."""
        backend.set_meta(MetaSetRequest(key="embedding_id", value="emb-1"))
        put(backend, record("a", 1.0))
        backend.clear(ClearRequest())
        assert backend.get_meta(MetaGetRequest(key="embedding_id")).value == "emb-1"

    def test_clear_of_empty_namespace_is_zero(self, backend: MemoryBackend) -> None:
        """clear of a namespace with no records removes nothing and reports 0."""
        assert backend.clear(ClearRequest(namespace=("nobody",))).deleted == 0

    def test_clear_twice_reports_zero(self, backend: MemoryBackend) -> None:
        """A second clear finds nothing to remove."""
        put(backend, record("a", 1.0))
        backend.clear(ClearRequest())
        assert backend.clear(ClearRequest()).deleted == 0

    def test_clear_counts_only_live_records(self, backend: MemoryBackend) -> None:
        """Deleted records are not counted again by clear."""
        put(backend, record("a", 1.0), record("b", 2.0))
        backend.delete(backend.delete_request(["a"]))
        assert backend.clear(ClearRequest()).deleted == 1

    def test_ids_are_reusable_after_clear(self, backend: MemoryBackend) -> None:
        """After clear, the old ids can be written again."""
        put(backend, record("a", 1.0))
        backend.clear(ClearRequest())
        put(backend, record("a", 2.0), record("b", 0.5))
        assert ids(scan_all(backend)) == ["b", "a"]
