"""Conformance: ``get`` reads by id, keeps request order, reports unknown ids."""

from __future__ import annotations

from coniti.memory import DeleteRequest, GetRequest, MemoryBackend
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import ids, put, record

__all__ = ["GetTests"]


class GetTests(BackendFixtures):
    """``get``: missing ids reported, repeats counted once, request order kept."""

    def test_get_returns_the_record(self, backend: MemoryBackend) -> None:
        """get of a stored id returns that record and nothing missing."""
        put(backend, record("a", 1.0, text="hello"))
        result = backend.get(GetRequest(ids=["a"]))
        assert [r.note.text for r in result.records] == ["hello"]
        assert result.missing == []

    def test_get_unknown_ids_are_missing(self, backend: MemoryBackend) -> None:
        """Unknown ids are listed in missing, in request order, and do not raise."""
        put(backend, record("a", 1.0))
        result = backend.get(GetRequest(ids=["zz", "a", "yy"]))
        assert ids(result.records) == ["a"]
        assert result.missing == ["zz", "yy"]

    def test_get_on_empty_backend_reports_all_missing(self, backend: MemoryBackend) -> None:
        """get on an empty backend returns no records and every id as missing."""
        result = backend.get(GetRequest(ids=["a", "b"]))
        assert result.records == []
        assert result.missing == ["a", "b"]

    def test_get_keeps_request_order(self, backend: MemoryBackend) -> None:
        """Records come back in the order the ids were asked for, not timestamp order."""
        put(backend, record("a", 1.0), record("b", 2.0), record("c", 3.0))
        result = backend.get(GetRequest(ids=["c", "a", "b"]))
        assert ids(result.records) == ["c", "a", "b"]

    def test_get_repeated_ids_count_once(self, backend: MemoryBackend) -> None:
        """A repeated id is returned once, at its first occurrence."""
        put(backend, record("a", 1.0), record("b", 2.0))
        result = backend.get(GetRequest(ids=["b", "a", "b", "a", "b"]))
        assert ids(result.records) == ["b", "a"]

    def test_get_repeated_missing_ids_count_once(self, backend: MemoryBackend) -> None:
        """A repeated unknown id is reported missing once, in first-occurrence order."""
        result = backend.get(GetRequest(ids=["y", "x", "y", "x"]))
        assert result.missing == ["y", "x"]

    def test_get_no_ids(self, backend: MemoryBackend) -> None:
        """get of an empty id list returns nothing and reports nothing missing."""
        put(backend, record("a", 1.0))
        result = backend.get(GetRequest(ids=[]))
        assert result.records == []
        assert result.missing == []

    def test_get_deleted_id_is_missing(self, backend: MemoryBackend) -> None:
        """A deleted id is reported missing."""
        put(backend, record("a", 1.0))
        backend.delete(DeleteRequest(ids=["a"]))
        assert backend.get(GetRequest(ids=["a"])).missing == ["a"]

    def test_get_returns_namespace_and_embedding_id(self, backend: MemoryBackend) -> None:
        """A record read back carries its namespace and embedding id."""
        put(backend, record("a", 1.0, namespace=("u", "v"), embedding_id="emb-9"))
        (got,) = backend.get(GetRequest(ids=["a"], namespace=("u", "v"))).records
        assert got.namespace == ("u", "v")
        assert got.embedding_id == "emb-9"
