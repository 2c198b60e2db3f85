"""Conformance: ``put`` writes all or nothing."""

from __future__ import annotations

import pytest

from coniti.errors import DuplicateRecord
from coniti.memory import GetRequest, MemoryBackend, PutRequest
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import count, exact, ids, put, record, scan_all

__all__ = ["PutTests"]


class PutTests(BackendFixtures):
    """``put``: written count, DuplicateRecord for existing or repeated ids, nothing written on failure."""

    def test_put_returns_written_count(self, backend: MemoryBackend) -> None:
        """put reports how many records it wrote."""
        result = put(backend, record("a", 1.0), record("b", 2.0), record("c", 3.0))
        assert result.written == 3

    def test_put_empty_list_writes_nothing(self, backend: MemoryBackend) -> None:
        """put of no records writes nothing and reports 0."""
        assert backend.put(PutRequest(records=[])).written == 0
        assert count(backend) == 0

    @pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
    def test_put_then_get_is_bit_for_bit(self, backend: MemoryBackend, dtype: str) -> None:
        """A record read back equals the one written bit for bit, vector dtype included."""
        original = record(
            "a",
            -0.0,
            vector=[1 / 3, -2.5e-5, 6.0e4, 0.0],
            dtype=dtype,
            metadata={"n": 1, "f": 1.0, "b": True, "nested": {"l": [None, "x", 0.1]}},
            embedding_id="emb-1",
            text="line one\nline two\x00 ünïcode",
        )
        put(backend, original)
        got = backend.get(GetRequest(ids=["a"])).records
        assert [exact(r) for r in got] == [exact(original)]

    def test_put_existing_id_raises_duplicate(self, backend: MemoryBackend) -> None:
        """put of an id that already exists in the namespace raises DuplicateRecord."""
        put(backend, record("a", 1.0))
        with pytest.raises(DuplicateRecord):
            put(backend, record("a", 2.0))

    def test_put_existing_id_writes_nothing(self, backend: MemoryBackend) -> None:
        """When one id of a call already exists, none of the call's records are written."""
        put(backend, record("a", 1.0))
        with pytest.raises(DuplicateRecord):
            put(backend, record("b", 0.5), record("a", 2.0), record("c", 3.0))
        assert ids(scan_all(backend)) == ["a"]
        assert backend.get(GetRequest(ids=["a"])).records[0].note.timestamp == 1.0

    def test_put_repeated_id_in_one_call_raises_duplicate(self, backend: MemoryBackend) -> None:
        """An id repeated within one put call raises DuplicateRecord."""
        with pytest.raises(DuplicateRecord):
            put(backend, record("a", 1.0), record("a", 2.0))

    def test_put_repeated_id_in_one_call_writes_nothing(self, backend: MemoryBackend) -> None:
        """A put with a repeated id writes none of its records, not even the first occurrence."""
        with pytest.raises(DuplicateRecord):
            put(backend, record("x", 0.0), record("a", 1.0), record("a", 2.0))
        assert count(backend) == 0

    def test_put_same_id_in_other_namespace_allowed(self, backend: MemoryBackend) -> None:
        """The same id may exist in different namespaces (separate calls)."""
        put(backend, record("a", 1.0))
        put(backend, record("a", 2.0, namespace=("alice",)))
        put(backend, record("a", 3.0, namespace=("alice", "work")))
        assert count(backend) == 1
        assert count(backend, ("alice",)) == 1
        assert count(backend, ("alice", "work")) == 1

    def test_put_same_id_in_two_namespaces_in_one_call_allowed(self, backend: MemoryBackend) -> None:
        """One call may write the same id into two different namespaces."""
        result = put(backend, record("a", 1.0, namespace=("x",)), record("a", 1.0, namespace=("y",)))
        assert result.written == 2
        assert ids(scan_all(backend, ("x",))) == ["a"]
        assert ids(scan_all(backend, ("y",))) == ["a"]

    def test_put_spanning_namespaces_is_all_or_nothing(self, backend: MemoryBackend) -> None:
        """A duplicate in one namespace stops the records of every namespace in the call."""
        put(backend, record("a", 1.0, namespace=("y",)))
        with pytest.raises(DuplicateRecord):
            put(backend, record("b", 1.0, namespace=("x",)), record("a", 2.0, namespace=("y",)))
        assert count(backend, ("x",)) == 0
        assert count(backend, ("y",)) == 1

    def test_put_after_delete_reuses_id(self, backend: MemoryBackend) -> None:
        """Once deleted, an id can be written again."""
        put(backend, record("a", 1.0, text="old"))
        backend.delete(backend.delete_request(["a"]))
        put(backend, record("a", 2.0, text="new"))
        assert [r.note.text for r in scan_all(backend)] == ["new"]

    def test_failed_put_leaves_later_puts_working(self, backend: MemoryBackend) -> None:
        """After a refused put, the same records can be written once the conflict is gone."""
        put(backend, record("a", 1.0))
        with pytest.raises(DuplicateRecord):
            put(backend, record("b", 2.0), record("a", 3.0))
        assert put(backend, record("b", 2.0)).written == 1
        assert ids(scan_all(backend)) == ["a", "b"]
