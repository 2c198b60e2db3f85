"""ContinuityEngine's facts that change: get, upsert, update, ingest_many(op_id), Hit.version, expiry."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from coniti import (
    ContinuityEngine,
    ContractError,
    IdempotencyConflict,
    Note,
    NotSupported,
    Query,
    RecordNotFound,
    VersionConflict,
)
from coniti.embedding import LocalHashEmbedder
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.memory import MemoryBackend, WriteRequest, WriteResult
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure, SegmentTreeStructure


class CountingEmbedder(LocalHashEmbedder):
    """Counts the texts it embeds."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.texts: list[str] = []

    def embed(self, texts: Any) -> Any:
        texts = list(texts)
        self.texts.extend(texts)
        return super().embed(texts)


class FailingWrite(InMemoryBackend):
    """An in-memory backend whose write fails while ``fail`` is set."""

    fail = False

    def write(self, request: WriteRequest) -> WriteResult:
        if self.fail:
            raise OSError("injected memory failure")
        return super().write(request)


@pytest.fixture(params=["in_memory", "log"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryBackend]:
    backend: MemoryBackend = InMemoryBackend() if request.param == "in_memory" else LogBackend(tmp_path / "s")
    yield backend
    backend.close()


def make(memory: MemoryBackend, embedder: LocalHashEmbedder | None = None) -> ContinuityEngine:
    return ContinuityEngine(
        memory,
        embedder or LocalHashEmbedder(dim=64),
        [FlatStructure(), SegmentTreeStructure(leaf_size=2)],
        DefaultStrategy(),
    )


def hits(e: ContinuityEngine, text: str, k: int = 5) -> list[str]:
    return [h.note.id for h in e.ask(Query(text=text, k=k)).hits]


def version(e: ContinuityEngine, id_: str) -> int | None:
    [record] = e.get([id_]).records
    return record.version


def test_upsert_creates_then_replaces(memory: MemoryBackend) -> None:
    """upsert writes a new note, then replaces it under a greater version; ask sees the new text."""
    e = make(memory)
    first = e.upsert(Note(id="n1", text="Ana leads the budget", timestamp=1.0))
    second = e.upsert(Note(id="n1", text="Bob leads the harbour project", timestamp=2.0))
    assert version(e, "n1") == second.versions["n1"] > first.versions["n1"]
    [record] = e.get(["n1"]).records
    assert record.note.text == "Bob leads the harbour project"
    assert hits(e, "harbour project", k=1) == ["n1"]
    assert len(e.structures()[0]) == 1


def test_upsert_with_same_text_is_not_re_embedded(memory: MemoryBackend) -> None:
    """An upsert that keeps the text reuses the stored vector (no embedding call)."""
    embedder = CountingEmbedder()
    e = make(memory, embedder)
    e.upsert(Note(id="n1", text="same text", timestamp=1.0))
    embedder.texts.clear()
    e.upsert(Note(id="n1", text="same text", timestamp=5.0, metadata={"k": 1}))
    assert embedder.texts == []
    [record] = e.get(["n1"]).records
    assert record.note.timestamp == 5.0 and record.note.metadata == {"k": 1}


def test_update_keeps_what_is_not_given(memory: MemoryBackend) -> None:
    """update of the metadata keeps text, timestamp and vector, and embeds nothing."""
    embedder = CountingEmbedder()
    e = make(memory, embedder)
    e.ingest(Note(id="n1", text="met Ana", timestamp=3.0, metadata={"a": 1, "b": 2}))
    embedder.texts.clear()
    e.update("n1", metadata_patch={"b": None, "c": 3})
    [record] = e.get(["n1"]).records
    assert (record.note.text, record.note.timestamp, record.note.metadata) == ("met Ana", 3.0, {"a": 1, "c": 3})
    assert embedder.texts == []


def test_update_text_re_embeds_and_reindexes(memory: MemoryBackend) -> None:
    """update of the text embeds the new text once; ask finds the note by its new text."""
    embedder = CountingEmbedder()
    e = make(memory, embedder)
    e.ingest_many([Note(id="n1", text="lunch with Bob", timestamp=1.0), Note(id="n2", text="gym", timestamp=2.0)])
    embedder.texts.clear()
    e.update("n1", text="the Q3 budget review")
    assert embedder.texts == ["the Q3 budget review"]
    assert hits(e, "Q3 budget review", k=1) == ["n1"]


def test_update_with_stale_version_conflicts_and_changes_nothing(memory: MemoryBackend) -> None:
    """A stale expected_version raises VersionConflict; memory and answers are unchanged."""
    e = make(memory)
    e.ingest(Note(id="n1", text="v1", timestamp=1.0))
    v1 = version(e, "n1")
    assert v1 is not None
    e.update("n1", text="v2", expected_version=v1)
    with pytest.raises(VersionConflict) as caught:
        e.update("n1", text="v3", expected_version=v1)
    assert caught.value.expected == v1 and caught.value.actual == version(e, "n1")
    assert e.get(["n1"]).records[0].note.text == "v2"


def test_update_of_missing_id_raises(memory: MemoryBackend) -> None:
    """update of an id that is not stored raises RecordNotFound."""
    with pytest.raises(RecordNotFound):
        make(memory).update("nope", metadata={"k": 1})


def test_upsert_expected_none_refuses_existing(memory: MemoryBackend) -> None:
    """expected_version=None means create only: an existing id conflicts."""
    e = make(memory)
    e.upsert(Note(id="n1", text="a", timestamp=1.0), expected_version=None)
    with pytest.raises(VersionConflict):
        e.upsert(Note(id="n1", text="b", timestamp=1.0), expected_version=None)


def test_bad_expected_version_is_refused(memory: MemoryBackend) -> None:
    """expected_version must be a positive int, None or ...; ContractError names it."""
    with pytest.raises(ContractError, match="expected_version"):
        make(memory).upsert(Note(id="n1", text="a", timestamp=1.0), expected_version=0)


def test_retried_upsert_with_op_id_replays(memory: MemoryBackend) -> None:
    """The same upsert with the same op id replays; another note under it conflicts."""
    e = make(memory)
    note = Note(id="n1", text="a", timestamp=1.0)
    first = e.upsert(note, op_id="step-1")
    again = e.upsert(note, op_id="step-1")
    assert again.replayed and again.versions == first.versions
    with pytest.raises(IdempotencyConflict):
        e.upsert(Note(id="n1", text="b", timestamp=1.0), op_id="step-1")
    assert e.get(["n1"]).records[0].note.text == "a"


RETRIED_WRITES: dict[str, Callable[[ContinuityEngine], WriteResult]] = {
    "upsert": lambda e: e.upsert(Note(id="n1", text="tea at four", timestamp=1.0), op_id="op"),
    "update-text": lambda e: e.update("n1", text="tea at five", op_id="op"),
    "update-same-text": lambda e: e.update("n1", text="tea at noon", op_id="op"),
    "update-text-and-time": lambda e: e.update("n1", text="tea at six", timestamp=9.0, op_id="op"),
    "update-patch": lambda e: e.update("n1", metadata_patch={"k": 1}, op_id="op"),
    "update-metadata": lambda e: e.update("n1", metadata={"k": 2}, op_id="op"),
}


@pytest.mark.parametrize("call", RETRIED_WRITES.values(), ids=RETRIED_WRITES.keys())
def test_every_retried_write_with_an_op_id_replays(
    memory: MemoryBackend, call: Callable[[ContinuityEngine], WriteResult]
) -> None:
    """The same engine write twice under one op id (text re-embedded or not): the retry returns
    the first result with replayed=True and writes nothing."""
    e = make(memory)
    e.ingest(Note(id="n1", text="tea at noon", timestamp=1.0))
    first = call(e)
    stored = e.get(["n1"]).records
    again = call(e)
    assert again.replayed and not first.replayed
    assert again.model_copy(update={"replayed": False}) == first
    assert e.get(["n1"]).records == stored


def test_retried_update_of_text_replays_after_the_note_was_deleted(memory: MemoryBackend) -> None:
    """A retry of update(text=..., op_id=...) replays even when the note went away meanwhile."""
    e = make(memory)
    e.ingest(Note(id="n1", text="tea at noon", timestamp=1.0))
    first = e.update("n1", text="tea at five", op_id="op")
    e.remove(["n1"])
    again = e.update("n1", text="tea at five", op_id="op")
    assert again.replayed and again.versions == first.versions
    assert e.get(["n1"]).missing == ["n1"]


def test_update_under_a_used_op_id_with_other_text_conflicts(memory: MemoryBackend) -> None:
    """update(text=...) under an op id used for another text raises IdempotencyConflict."""
    e = make(memory)
    e.ingest(Note(id="n1", text="tea at noon", timestamp=1.0))
    e.update("n1", text="tea at five", op_id="op")
    with pytest.raises(IdempotencyConflict, match="'op'"):
        e.update("n1", text="tea at six", op_id="op")
    assert e.get(["n1"]).records[0].note.text == "tea at five"


def test_an_expiry_after_year_9999_is_refused_and_writes_nothing(memory: MemoryBackend) -> None:
    """upsert with expires_at past the horizon (years 1 to 9999 UTC) raises ContractError naming
    expires_at, and nothing is written; the last moment of year 9999 is accepted."""
    e = make(memory)
    with pytest.raises(ContractError, match="expires_at must lie in years 1 to 9999 UTC"):
        e.upsert(Note(id="n1", text="a", timestamp=1.0), expires_at=8_639_999_999_913_600.0)
    assert e.get(["n1"]).missing == ["n1"]
    e.upsert(Note(id="n1", text="a", timestamp=1.0), expires_at=253_402_300_799.0)
    assert e.get(["n1"]).records[0].expires_at == 253_402_300_799.0


def test_retried_ingest_many_with_op_id_replays(memory: MemoryBackend) -> None:
    """ingest_many with an op id, retried: the same admissions, nothing written twice."""
    e = make(memory)
    batch = [Note(id="a", text="one", timestamp=1.0), Note(id="b", text=" ", timestamp=2.0)]
    first = e.ingest_many(batch, op_id="run-1")
    count = memory.count(memory.count_request()).count
    again = e.ingest_many(batch, op_id="run-1")
    assert [r.admitted for r in first] == [r.admitted for r in again] == [True, False]
    assert memory.count(memory.count_request()).count == count == 1


def test_ingest_many_op_id_with_other_batch_conflicts(memory: MemoryBackend) -> None:
    """Another batch under a used op id raises IdempotencyConflict."""
    e = make(memory)
    e.ingest_many([Note(id="a", text="one", timestamp=1.0)], op_id="run-1")
    with pytest.raises(IdempotencyConflict):
        e.ingest_many([Note(id="a", text="two", timestamp=1.0)], op_id="run-1")


def test_hits_carry_versions(memory: MemoryBackend) -> None:
    """Every hit names the version of the record it was read from."""
    e = make(memory)
    e.ingest(Note(id="n1", text="budget", timestamp=1.0))
    e.update("n1", timestamp=2.0)
    [hit] = e.ask(Query(text="budget", k=1)).hits
    assert hit.version == version(e, "n1") is not None


def test_expired_note_is_not_answered(memory: MemoryBackend) -> None:
    """ask leaves out a note once it expired, before any sweep."""
    e = make(memory)
    e.upsert(Note(id="gone", text="budget memo", timestamp=1.0), expires_at=time.time() - 1)
    e.upsert(Note(id="kept", text="budget plan", timestamp=2.0))
    assert hits(e, "budget") == ["kept"]


def test_failed_write_changes_nothing() -> None:
    """When memory refuses the write, the structures and memory are as before."""
    memory = FailingWrite()
    e = make(memory)
    e.ingest(Note(id="n1", text="old text", timestamp=1.0))
    memory.fail = True
    with pytest.raises(OSError):
        e.update("n1", text="new words entirely")
    memory.fail = False
    assert e.get(["n1"]).records[0].note.text == "old text"
    assert hits(e, "old text", k=1) == ["n1"] and len(e.structures()[0]) == 1


def test_write_needs_a_backend_with_write() -> None:
    """upsert on a backend without supports_write raises NotSupported."""

    class NoWrite(InMemoryBackend):
        supports_write = False

    with pytest.raises(NotSupported):
        make(NoWrite()).upsert(Note(id="n1", text="a", timestamp=1.0))


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("aupsert", lambda e: e.aupsert(Note(id="n2", text="b", timestamp=2.0))),
        ("aupdate", lambda e: e.aupdate("n1", metadata={"k": 2})),
        ("aget", lambda e: e.aget(["n1"])),
    ],
)
def test_async_twins(memory: MemoryBackend, name: str, call: Callable[[ContinuityEngine], Any]) -> None:
    """aupsert, aupdate and aget do what their sync twins do."""
    e = make(memory)
    e.ingest(Note(id="n1", text="a", timestamp=1.0))
    result = asyncio.run(call(e))
    assert type(result).__name__ == ("GetResult" if name == "aget" else "WriteResult")
    assert e.get(["n1", "n2"]).records
