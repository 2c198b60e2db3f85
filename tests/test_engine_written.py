"""After an update, an upsert or an ingest with an op id, the engine folds the records the write
reported (``MemoryBackend.write_changes``) into the namespace's index without reading its events
back, when nobody else wrote in between; otherwise it folds the events. Either way the index is
what a fold of the log gives (``engine.verify``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from coniti import ContinuityEngine, Note, Query
from coniti.embedding import LocalHashEmbedder
from coniti.events import Event
from coniti.impl.log import LogBackend
from coniti.memory import (
    Change,
    DeleteOp,
    MemoryRecord,
    PatchOp,
    PutRequest,
    UpsertOp,
    WriteRequest,
    WriteResult,
)
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure

EMBEDDER = LocalHashEmbedder(dim=32)
SPACES = [("a",), ("b",)]


class Feeds(LogBackend):
    """A log backend that counts the reads of its event feed and, while ``other`` is set, has
    another handle on its path put a note into namespace ``other`` just ``before`` (else just
    after) each write, inside the call."""

    calls = 0
    other: tuple[str, ...] | None = None
    before = True
    neighbours = 0

    def events(
        self,
        after: int = 0,
        *,
        until: int | None = None,
        namespace: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> Iterator[Event]:
        self.calls += 1
        return super().events(after, until=until, namespace=namespace, limit=limit)

    def _neighbour(self) -> None:
        if self.other is None:
            return
        self.neighbours += 1
        note = Note(id=f"other-{self.neighbours}", text=f"another writer's plan {self.neighbours}", timestamp=1.0)
        other = LogBackend(self.path)
        try:
            vector = EMBEDDER.embed([note.text])[0]
            other.put(PutRequest(records=[MemoryRecord.trusted(note, vector, EMBEDDER.spec_id, self.other)]))
        finally:
            other.close()

    def write_changes(self, request: WriteRequest) -> tuple[WriteResult, list[Change] | None]:
        if self.before:
            self._neighbour()
        out = super().write_changes(request)
        if not self.before:
            self._neighbour()
        return out


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Feeds]:
    backend = Feeds(tmp_path / "s", retention=timedelta(days=30))
    yield backend
    backend.close()


def _engine(memory: LogBackend) -> ContinuityEngine:
    e = ContinuityEngine(memory, EMBEDDER, [FlatStructure()], DefaultStrategy())
    for j, ns in enumerate(SPACES):
        for i in range(3):
            e.ingest(Note(id=f"n{i}", text=f"budget plan {i} of team {j}", timestamp=float(i)), namespace=ns)
    return e


def _writes(e: ContinuityEngine) -> None:
    """Every kind of write that goes through ``memory.write``, over both namespaces."""
    a, b = SPACES
    e.update("n0", text="a revised budget plan", namespace=a)
    e.update("n1", metadata={"thread": "t1", "user": "u"}, namespace=b)  # no text: same vector
    e.update("n2", timestamp=9.0, metadata_patch={"k": 1}, namespace=a, op_id="op-update")
    e.upsert(Note(id="n3", text="a new note by upsert", timestamp=3.0), namespace=b)
    e.upsert(Note(id="n0", text="budget plan 0 of team 1", timestamp=4.0), namespace=b)  # same text
    e.upsert(Note(id="n1", text="replaced whole", timestamp=5.0), namespace=a, expected_version=...)
    e.upsert(Note(id="n4", text="expires soon", timestamp=6.0), namespace=a, expires_at=2e9, op_id="op-upsert")
    notes = [Note(id=f"m{i}", text=f"ingested with an op id {i}", timestamp=float(i)) for i in range(3)]
    e.ingest_many(notes, namespace=b, op_id="op-ingest")
    e.ingest_many(notes, namespace=b, op_id="op-ingest")  # a replay: writes nothing


def _agrees(e: ContinuityEngine, memory: LogBackend) -> None:
    """Every namespace's index is a fold of the log, and answers as a fresh engine does."""
    query = Query(text="budget plan", k=20, strategy="semantic")
    fresh = ContinuityEngine(LogBackend(memory.path), EMBEDDER, [FlatStructure()], DefaultStrategy())
    for ns in SPACES:
        report = e.verify(ns)
        assert report.ok, report.problems
        assert [(h.note.id, h.note.text) for h in e.ask(query, namespace=ns).hits] == [
            (h.note.id, h.note.text) for h in fresh.ask(query, namespace=ns).hits
        ]
    fresh.memory.close()


def test_writes_fold_their_records_without_reading_the_feed(memory: Feeds) -> None:
    """Updates (text, metadata, timestamp; with an op id), upserts (new, same text, replacing,
    with an expiry from the call or from the store's retention) and an ingest with an op id, with
    nobody else writing, read no event: the index is made from what the write reported, and is
    what a fold of the log gives."""
    e = _engine(memory)
    memory.calls = 0
    _writes(e)
    assert memory.calls == 0
    _agrees(e, memory)


@pytest.mark.parametrize("other", SPACES, ids=["same namespace", "other namespace"])
def test_another_writer_just_before_each_write_is_folded(memory: Feeds, other: tuple[str, ...]) -> None:
    """When another handle appends an event between the catch-up and the write (in the written
    namespace or another), the write's events do not follow the index: the namespace's events are
    folded instead (the feed is read), and every index is what a fold of the log gives, the other
    writer's notes among them."""
    e = _engine(memory)
    memory.other, memory.before = other, True
    memory.calls = 0
    _writes(e)
    assert memory.calls > 0
    _agrees(e, memory)
    ids = {h.note.id for h in e.ask(Query(text="another writer's plan", k=50), namespace=other).hits}
    assert {f"other-{i}" for i in range(1, memory.neighbours + 1)} <= ids


def test_another_writer_just_after_each_write_is_folded_later(memory: Feeds) -> None:
    """Another handle's event right after the write leaves the write's own records folded from
    what it reported; the other event is folded by the next catch-up: every index is what a fold
    of the log gives."""
    e = _engine(memory)
    memory.other, memory.before = SPACES[0], False
    _writes(e)
    _agrees(e, memory)
    ids = {h.note.id for h in e.ask(Query(text="another writer's plan", k=50), namespace=SPACES[0]).hits}
    assert {f"other-{i}" for i in range(1, memory.neighbours + 1)} <= ids


class Overrides(LogBackend):
    """A log backend whose ``write`` is overridden (it counts the calls)."""

    writes = 0

    def write(self, request: WriteRequest) -> WriteResult:
        self.writes += 1
        return super().write(request)


def test_a_backend_that_overrides_write_is_written_through_it(tmp_path: Path) -> None:
    """``write_changes`` of a LogBackend whose subclass overrides ``write`` calls that ``write``
    and reports no changes: the engine then folds the events, and its index is a fold of the log."""
    memory = Overrides(tmp_path / "s")
    e = _engine(memory)
    result, changes = memory.write_changes(WriteRequest(ops=[], namespace=SPACES[0]))
    assert (memory.writes, changes, result.seqs) == (1, None, [])
    e.update("n0", text="a revised budget plan", namespace=SPACES[0])
    assert memory.writes == 2
    _agrees(e, memory)
    memory.close()


def test_write_changes_reports_the_records_written(tmp_path: Path) -> None:
    """``LogBackend.write_changes`` returns the write's result and, in the order of its seqs, each
    record as its put event holds it (a delete: None); the op id's receipt is none of them."""
    memory = LogBackend(tmp_path / "s")
    vector = np.ones(4, dtype=np.float32)
    memory.put(PutRequest(records=[
        MemoryRecord.trusted(Note(id=i, text="one", timestamp=1.0), vector, "e", ()) for i in ("x", "z")
    ]))  # fmt: skip
    request = WriteRequest(
        ops=[
            PatchOp(id="x", text="two", vector=vector * 2),
            UpsertOp(record=MemoryRecord.trusted(Note(id="y", text="new", timestamp=2.0), vector, "e", ())),
            DeleteOp(id="z"),
        ],
        op_id="op",
    )
    result, changes = memory.write_changes(request)
    assert changes is not None
    assert len(result.seqs) == len(changes) + 1
    events = {ev.seq: ev for ev in memory.events(after=result.seqs[0] - 1)}
    for seq, (id_, record) in zip(result.seqs, changes, strict=False):
        event = events[seq]
        assert event.id == id_
        if record is None:
            assert event.kind == "delete"
        else:
            assert event.kind == "put" and event.record is not None
            assert event.record.note == record.note
            assert event.record.vector is not None and record.vector is not None
            assert event.record.vector.tobytes() == record.vector.tobytes()
            assert (event.record.expires_at, event.record.embedding_id) == (record.expires_at, record.embedding_id)
    assert events[result.seqs[-1]].kind == "op"
    memory.close()
