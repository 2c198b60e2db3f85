"""The engine knows its own events by the seqs memory returns (PutResult, DeleteResult), not by
the head it reads after the write: another writer's event right after the engine's costs no
re-read, and one right before it is folded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from coniti import ContinuityEngine, Note, Query
from coniti.batch import RecordBatch
from coniti.embedding import LocalHashEmbedder
from coniti.events import Event
from coniti.impl.log import LogBackend
from coniti.memory import (
    DeleteRequest,
    DeleteResult,
    MemoryRecord,
    MetaSetRequest,
    PutRequest,
    PutResult,
)
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure

EMBEDDER = LocalHashEmbedder(dim=32)


class _Neighbour(LogBackend):
    """A LogBackend on which another writer appends one event just before (``lead``) or just
    after (``trail``) every put_batch and delete, inside the call; it counts the event reads."""

    lead = False
    trail = False
    reads = 0

    def _other(self, when: bool) -> None:
        if when:
            records = [
                MemoryRecord.trusted(
                    Note.create(f"another writer's note {self.head}"), np.ones(32), EMBEDDER.spec_id, ()
                )
            ]
            LogBackend.put(self, PutRequest(records=records))

    def put_batch(self, batch: RecordBatch, meta: MetaSetRequest | None = None) -> PutResult:
        self._other(self.lead)
        result = super().put_batch(batch, meta)
        self._other(self.trail)
        return result

    def delete(self, request: DeleteRequest) -> DeleteResult:
        self._other(self.lead)
        result = super().delete(request)
        self._other(self.trail)
        return result

    def events(self, *args: Any, **kwargs: Any) -> Iterator[Event]:
        self.reads += 1
        return super().events(*args, **kwargs)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[_Neighbour]:
    backend = _Neighbour(tmp_path / "s")
    yield backend
    backend.close()


def _engine(store: _Neighbour) -> ContinuityEngine:
    engine = ContinuityEngine(store, EMBEDDER, [FlatStructure()], DefaultStrategy())
    engine.ingest(Note.create("a first note, so the namespace is claimed"))
    store.reads = 0
    return engine


def test_an_ingest_followed_by_another_writer_reads_no_event_back(store: _Neighbour) -> None:
    """When another writer appends right after an ingest's put, the engine keeps the rows it added
    (their seqs are the ones the put returned) and reads no event; the state equals a fresh build."""
    engine = _engine(store)
    store.trail = True
    engine.ingest_many([Note.create("first of two"), Note.create("second of two")])
    assert store.reads == 0
    assert engine.verify().ok


def test_a_remove_followed_by_another_writer_reads_no_event_back(store: _Neighbour) -> None:
    """When another writer appends right after a remove's delete, the engine ends the rows at the
    seqs the delete returned and reads no event; the state equals a fresh build."""
    engine = _engine(store)
    kept = engine.ingest(Note.create("to be removed")).id
    store.trail = True
    store.reads = 0
    assert engine.remove([kept]).deleted == [kept]
    assert store.reads == 0
    assert engine.verify().ok


def test_an_ingest_after_another_writers_event_folds_it(store: _Neighbour) -> None:
    """When another writer appends between the engine's catch-up and its put (the put's seqs then
    do not follow the engine's last seq), the engine folds the events: the other writer's note is
    found and the state equals a fresh build."""
    engine = _engine(store)
    store.lead = True
    engine.ingest(Note.create("mine"))
    assert store.reads > 0
    texts = [h.note.text for h in engine.ask(Query(text="another writer's note", k=10)).hits]
    assert any(t.startswith("another writer's note") for t in texts)
    assert engine.verify().ok


def test_a_remove_after_another_writers_event_folds_it(store: _Neighbour) -> None:
    """When another writer appends just before a remove's delete, the engine folds the events;
    the state equals a fresh build."""
    engine = _engine(store)
    kept = engine.ingest(Note.create("to be removed")).id
    store.lead = True
    assert engine.remove([kept]).deleted == [kept]
    assert engine.verify().ok
