"""Conformance: namespaces are isolated for every operation."""

from __future__ import annotations

from coniti.memory import (
    ClearRequest,
    DeleteRequest,
    GetRequest,
    MemoryBackend,
    MetaGetRequest,
    MetaSetRequest,
)
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import count, ids, put, record, scan_all

__all__ = ["NamespaceTests"]

A = ("alice",)
B = ("bob",)
AB = ("alice", "bob")


def _fill(backend: MemoryBackend) -> None:
    """The same ids in (), ('alice',), ('bob',) and ('alice', 'bob'), with texts naming the namespace."""
    for ns in [(), A, B, AB]:
        label = "/".join(ns) or "-"
        put(backend, *[record(f"r{i}", float(i), namespace=ns, text=f"{label}:{i}") for i in range(3)])


class NamespaceTests(BackendFixtures):
    """Isolation of scan, get, delete, count, meta and clear between namespaces."""

    def test_scan_sees_only_its_namespace(self, backend: MemoryBackend) -> None:
        """scan returns only the records of the namespace asked for."""
        _fill(backend)
        assert [r.note.text for r in scan_all(backend, A)] == ["alice:0", "alice:1", "alice:2"]
        assert [r.note.text for r in scan_all(backend)] == ["-:0", "-:1", "-:2"]

    def test_scan_of_a_parent_excludes_children(self, backend: MemoryBackend) -> None:
        """A namespace is not a prefix: ('alice',) does not include ('alice', 'bob')."""
        put(backend, record("child", 1.0, namespace=AB))
        assert scan_all(backend, A) == []

    def test_records_carry_their_namespace(self, backend: MemoryBackend) -> None:
        """Every record scanned from a namespace says that namespace."""
        _fill(backend)
        assert {r.namespace for r in scan_all(backend, AB)} == {AB}

    def test_get_sees_only_its_namespace(self, backend: MemoryBackend) -> None:
        """get resolves ids within its namespace only."""
        _fill(backend)
        put(backend, record("only-bob", 9.0, namespace=B))
        result = backend.get(GetRequest(ids=["r1", "only-bob"], namespace=A))
        assert [r.note.text for r in result.records] == ["alice:1"]
        assert result.missing == ["only-bob"]

    def test_delete_touches_only_its_namespace(self, backend: MemoryBackend) -> None:
        """delete removes the id from its namespace and leaves the same id elsewhere."""
        _fill(backend)
        assert backend.delete(DeleteRequest(ids=["r0"], namespace=A)).deleted == ["r0"]
        assert ids(scan_all(backend, A)) == ["r1", "r2"]
        for ns in [(), B, AB]:
            assert ids(scan_all(backend, ns)) == ["r0", "r1", "r2"]

    def test_delete_reports_ids_of_other_namespaces_missing(self, backend: MemoryBackend) -> None:
        """An id that exists only in another namespace is missing for delete."""
        put(backend, record("x", 1.0, namespace=B))
        result = backend.delete(DeleteRequest(ids=["x"], namespace=A))
        assert result.missing == ["x"]
        assert count(backend, B) == 1

    def test_count_per_namespace(self, backend: MemoryBackend) -> None:
        """count counts only the namespace asked for."""
        _fill(backend)
        put(backend, record("extra", 5.0, namespace=B))
        assert [count(backend, ns) for ns in [(), A, B, AB, ("nobody",)]] == [3, 3, 4, 3, 0]

    def test_meta_per_namespace(self, backend: MemoryBackend) -> None:
        """A meta key set in one namespace is unset in the others."""
        backend.set_meta(MetaSetRequest(key="k", value="alice's", namespace=A))
        backend.set_meta(MetaSetRequest(key="k", value="bob's", namespace=B))
        assert backend.get_meta(MetaGetRequest(key="k", namespace=A)).value == "alice's"
        assert backend.get_meta(MetaGetRequest(key="k", namespace=B)).value == "bob's"
        assert backend.get_meta(MetaGetRequest(key="k")).value is None
        assert backend.get_meta(MetaGetRequest(key="k", namespace=AB)).value is None

    def test_clear_touches_only_its_namespace(self, backend: MemoryBackend) -> None:
        """clear empties its namespace and leaves the others, children included, untouched."""
        _fill(backend)
        assert backend.clear(ClearRequest(namespace=A)).deleted == 3
        assert [count(backend, ns) for ns in [(), A, B, AB]] == [3, 0, 3, 3]

    def test_clear_keeps_meta_of_other_namespaces(self, backend: MemoryBackend) -> None:
        """clear of one namespace leaves other namespaces' metadata alone."""
        backend.set_meta(MetaSetRequest(key="k", value=1, namespace=B))
        backend.clear(ClearRequest(namespace=A))
        assert backend.get_meta(MetaGetRequest(key="k", namespace=B)).value == 1
