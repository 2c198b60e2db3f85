"""Conformance: the optional capabilities a backend class declares agree with what it does.

:class:`~coniti.memory.MemoryBackend` declares ``supports_time_travel``, ``supports_event_feed`` and
``supports_put_with_meta`` and ``supports_put_batches`` as class attributes (False by default). The engine reads only these
declarations; these tests check each one both ways: a declared capability works as documented, and an
undeclared one is absent (no ``at``/``events``/``head`` attribute; ``put_with_meta`` and
``put_batches`` raise :class:`~coniti.errors.NotSupported` and change nothing).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coniti.errors import DuplicateRecord, NotSupported
from coniti.memory import (
    ClearRequest,
    DeleteRequest,
    MemoryBackend,
    MemoryRecord,
    MetaGetRequest,
    MetaSetRequest,
    PutRequest,
    UpsertOp,
    WriteRequest,
    event_feed,
    time_travel,
)
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import count, ids, put, record, scan_all

__all__ = ["CapabilityTests"]


def _meta(backend: MemoryBackend, key: str = "embedding_id") -> object:
    return backend.get_meta(MetaGetRequest(key=key)).value


class CapabilityTests(BackendFixtures):
    """Declared capabilities (class attributes of the backend) agree with its methods."""

    def test_declarations_are_booleans(self, backend: MemoryBackend) -> None:
        """Every capability declaration, and ``read_only``, is a bool; a fresh backend is writable."""
        for name in (
            "supports_time_travel", "supports_event_feed", "supports_put_with_meta",
            "supports_put_batches", "supports_write", "supports_feedback",
        ):
            assert type(getattr(type(backend), name)) is bool, name
        assert backend.read_only is False

    def test_time_travel_agrees_with_the_declaration(self, backend: MemoryBackend) -> None:
        """Declared: ``at()`` is a read-only view that does not see later writes. Else: no ``at``."""
        past = time_travel(backend)
        if past is None:
            assert not hasattr(backend, "at")
            return
        put(backend, record("a", 1.0))
        view = past.at()
        put(backend, record("b", 2.0))
        assert isinstance(view, MemoryBackend) and view.read_only
        assert ids(scan_all(view)) == ["a"]

    def test_event_feed_agrees_with_the_declaration(self, backend: MemoryBackend) -> None:
        """Declared: one event per record put, per id deleted, per meta write and per clear, read
        back by ``events(after=...)``. Else: neither ``head`` nor ``events``."""
        feed = event_feed(backend)
        if feed is None:
            assert not hasattr(backend, "head") and not hasattr(backend, "events")
            return
        start = feed.head
        put(backend, record("a", 1.0), record("b", 2.0), record("c", 3.0))
        assert feed.head == start + 3
        backend.delete(DeleteRequest(ids=["a", "b", "nope"]))
        assert feed.head == start + 5
        backend.set_meta(MetaSetRequest(key="k", value=1))
        assert feed.head == start + 6
        backend.clear(ClearRequest())
        assert feed.head == start + 7
        kinds = [e.kind for e in feed.events(after=start)]
        assert kinds == ["put"] * 3 + ["delete"] * 2 + ["meta", "clear"]

    def test_event_feed_says_which_namespaces_were_written(self, backend: MemoryBackend) -> None:
        """Declared: ``written(namespace)`` is False for a namespace no event names (the engine
        then folds none of its events) and True once a put or a meta write named it, and stays
        True after its records are deleted or cleared."""
        feed = event_feed(backend)
        if feed is None:
            pytest.skip("the backend does not declare supports_event_feed")
        puts, metas = ("w", "puts"), ("w", "metas")
        assert not feed.written(puts) and not feed.written(metas)
        put(backend, record("a", 1.0, namespace=puts))
        backend.set_meta(MetaSetRequest(key="k", value=1, namespace=metas))
        assert feed.written(puts) and feed.written(metas)
        assert not feed.written(("w",)) and not feed.written(("w", "other"))
        backend.delete(DeleteRequest(ids=["a"], namespace=puts))
        backend.clear(ClearRequest(namespace=metas))
        assert feed.written(puts) and feed.written(metas)

    def test_put_with_meta_writes_both(self, backend: MemoryBackend) -> None:
        """Declared: ``put_with_meta`` sets the metadata and writes the records (with an event feed,
        the meta event first). Else: NotSupported, nothing written."""
        request = PutRequest(records=[record("a", 1.0), record("b", 2.0)])
        meta = MetaSetRequest(key="embedding_id", value="emb-x")
        if not backend.supports_put_with_meta:
            with pytest.raises(NotSupported):
                backend.put_with_meta(request, meta)
            assert count(backend) == 0 and _meta(backend) is None
            return
        feed = event_feed(backend)
        start = None if feed is None else feed.head
        assert backend.put_with_meta(request, meta).written == 2
        assert ids(scan_all(backend)) == ["a", "b"] and _meta(backend) == "emb-x"
        if feed is not None and start is not None:
            assert [e.kind for e in feed.events(after=start)] == ["meta", "put", "put"]

    def test_refused_put_with_meta_changes_nothing(self, backend: MemoryBackend) -> None:
        """Declared: a put_with_meta whose put is refused leaves the metadata unset and (with an
        event feed) records no event."""
        if not backend.supports_put_with_meta:
            pytest.skip("the backend does not declare supports_put_with_meta")
        put(backend, record("a", 1.0))
        feed = event_feed(backend)
        head = None if feed is None else feed.head
        request = PutRequest(records=[record("b", 2.0), record("a", 3.0)])
        with pytest.raises(DuplicateRecord):
            backend.put_with_meta(request, MetaSetRequest(key="embedding_id", value="emb-x"))
        assert _meta(backend) is None and ids(scan_all(backend)) == ["a"]
        if feed is not None:
            assert feed.head == head

    def test_put_batches_writes_every_batch_and_the_metadata(self, backend: MemoryBackend) -> None:
        """Declared: ``put_batches`` writes the records of every batch and the metadata. Else:
        NotSupported, nothing written."""
        batches = [[record("a", 1.0), record("b", 2.0)], [record("c", 3.0)]]
        meta = MetaSetRequest(key="embedding_id", value="emb-x")
        if not backend.supports_put_batches:
            with pytest.raises(NotSupported):
                backend.put_batches(batches, meta)
            assert count(backend) == 0 and _meta(backend) is None
            return
        assert backend.put_batches(batches, meta) == 3
        assert ids(scan_all(backend)) == ["a", "b", "c"] and _meta(backend) == "emb-x"

    def test_refused_put_batches_changes_nothing(self, backend: MemoryBackend) -> None:
        """Declared: a duplicate id in a later batch (of the store or of an earlier batch) refuses
        the whole call: no record of any batch, no metadata, no event."""
        if not backend.supports_put_batches:
            pytest.skip("the backend does not declare supports_put_batches")
        put(backend, record("a", 1.0))
        feed = event_feed(backend)
        head = None if feed is None else feed.head
        meta = MetaSetRequest(key="embedding_id", value="emb-x")
        for later in ("a", "b"):
            batches = [[record("b", 2.0), record("c", 3.0)], [record(later, 4.0)]]
            with pytest.raises(DuplicateRecord):
                backend.put_batches(batches, meta)
            assert _meta(backend) is None and ids(scan_all(backend)) == ["a"]
            if feed is not None:
                assert feed.head == head

    def test_put_batches_failing_midway_changes_nothing(self, backend: MemoryBackend) -> None:
        """Declared: an error raised while the batches are read (here after the first batch) leaves
        nothing written."""
        if not backend.supports_put_batches:
            pytest.skip("the backend does not declare supports_put_batches")

        def batches() -> Iterator[list[MemoryRecord]]:
            yield [record("a", 1.0)]
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            backend.put_batches(batches())
        assert count(backend) == 0

    def test_write_agrees_with_the_declaration(self, backend: MemoryBackend) -> None:
        """Declared: ``write`` upserts and ``sweep`` runs. Else: both raise NotSupported, nothing
        is written."""
        request = WriteRequest(ops=[UpsertOp(record=record("a", 1.0))])
        if not backend.supports_write:
            with pytest.raises(NotSupported):
                backend.write(request)
            with pytest.raises(NotSupported):
                backend.sweep()
            assert count(backend) == 0
            return
        assert list(backend.write(request).versions) == ["a"]
        assert backend.sweep().deleted == 0
        assert ids(scan_all(backend)) == ["a"]
