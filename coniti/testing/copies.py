"""Conformance: records and metadata values are copied in and out."""

from __future__ import annotations

from typing import Any

from coniti.memory import GetRequest, MemoryBackend, MetaGetRequest, MetaSetRequest, ScanRequest
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import exact, put, record, vector_of

__all__ = ["CopyTests"]


def _stored(backend: MemoryBackend, record_id: str = "a") -> Any:
    (got,) = backend.get(GetRequest(ids=[record_id])).records
    return exact(got)


class CopyTests(BackendFixtures):
    """Mutating what was passed in or handed out never changes memory."""

    def test_mutating_the_put_vector_changes_nothing(self, backend: MemoryBackend) -> None:
        """Changing a written record's vector afterwards does not change the stored vector."""
        original = record("a", 1.0, vector=[1.0, 2.0])
        put(backend, original)
        before = _stored(backend)
        vector_of(original)[0] = 99.0
        assert _stored(backend) == before

    def test_mutating_the_put_metadata_changes_nothing(self, backend: MemoryBackend) -> None:
        """Changing a written record's metadata (top level or nested) does not change memory."""
        original = record("a", 1.0, metadata={"tags": ["x"], "d": {"k": 1}})
        put(backend, original)
        before = _stored(backend)
        original.note.metadata["new"] = True
        original.note.metadata["tags"].append("y")
        original.note.metadata["d"]["k"] = 2
        assert _stored(backend) == before

    def test_mutating_a_got_record_changes_nothing(self, backend: MemoryBackend) -> None:
        """Changing a record returned by get (vector, metadata) does not change memory."""
        put(backend, record("a", 1.0, metadata={"tags": ["x"]}))
        before = _stored(backend)
        (got,) = backend.get(GetRequest(ids=["a"])).records
        vector_of(got)[:] = 0.0
        got.note.metadata["tags"].append("y")
        got.note.metadata["other"] = 1
        assert _stored(backend) == before

    def test_mutating_a_scanned_record_changes_nothing(self, backend: MemoryBackend) -> None:
        """Changing a record returned by scan does not change memory."""
        put(backend, record("a", 1.0, metadata={"tags": ["x"]}))
        before = _stored(backend)
        (got,) = backend.scan(ScanRequest()).records
        vector_of(got)[0] = -7.0
        got.note.metadata["tags"].clear()
        assert _stored(backend) == before

    def test_returned_records_are_independent(self, backend: MemoryBackend) -> None:
        """Two reads of one record return objects that do not share a vector or metadata."""
        put(backend, record("a", 1.0, metadata={"l": [1]}))
        (one,) = backend.get(GetRequest(ids=["a"])).records
        (two,) = backend.get(GetRequest(ids=["a"])).records
        vector_of(one)[0] = 42.0
        one.note.metadata["l"].append(2)
        assert exact(two) == _stored(backend)

    def test_mutating_a_meta_value_after_set_changes_nothing(self, backend: MemoryBackend) -> None:
        """Changing the value object given to set_meta does not change the stored value."""
        value: dict[str, Any] = {"l": [1, 2], "d": {"x": 1}}
        request = MetaSetRequest(key="k", value=value)
        backend.set_meta(request)
        value["l"].append(3)
        request.value["l"].append(4)
        request.value["d"]["x"] = 9
        assert backend.get_meta(MetaGetRequest(key="k")).value == {"l": [1, 2], "d": {"x": 1}}

    def test_mutating_a_returned_meta_value_changes_nothing(self, backend: MemoryBackend) -> None:
        """Changing the value get_meta or set_meta returned does not change the stored value."""
        set_result = backend.set_meta(MetaSetRequest(key="k", value={"l": [1]}))
        set_result.value["l"].append("from set")
        got = backend.get_meta(MetaGetRequest(key="k")).value
        got["l"].append("from get")
        got["new"] = 1
        assert backend.get_meta(MetaGetRequest(key="k")).value == {"l": [1]}
