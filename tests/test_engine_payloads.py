"""ContinuityEngine over memory that holds records without a vector (and blobs): they are in no
structure, so never a hit, and loading, refresh, upsert, snapshot and restore do not trip on them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coniti import ContinuityEngine, DuplicateRecord, Note, Query, TimeRange
from coniti.embedding import LocalHashEmbedder
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.memory import GetRequest, MemoryBackend, MemoryRecord, PutRequest
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure, SegmentTreeStructure

EMBEDDER = LocalHashEmbedder(dim=64)


def _engine(memory: MemoryBackend) -> ContinuityEngine:
    return ContinuityEngine(memory, EMBEDDER, [FlatStructure(), SegmentTreeStructure(leaf_size=2)], DefaultStrategy())


def _bare(rid: str, text: str, t: float, blob: bytes | None = None) -> MemoryRecord:
    return MemoryRecord(note=Note(id=rid, text=text, timestamp=t), vector=None, blob=blob)


def _every_hit(e: ContinuityEngine) -> list[str]:
    return sorted(h.note.id for h in e.ask(Query(time_range=TimeRange(), k=50)).hits)


@pytest.fixture(params=["in_memory", "log"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryBackend]:
    with InMemoryBackend() if request.param == "in_memory" else LogBackend(tmp_path / "store") as backend:
        yield backend


def test_records_without_a_vector_are_never_hits(memory: MemoryBackend) -> None:
    """An engine loading a namespace with records without a vector answers from the others only,
    even for a query that matches their text word for word."""
    memory.put(PutRequest(records=[_bare("cp", "budget checkpoint", 1.0, b"\x00\x01")]))
    e = _engine(memory)
    e.ingest(Note(id="n1", text="budget meeting", timestamp=2.0))
    assert [h.note.id for h in e.ask(Query(text="budget checkpoint", k=5)).hits] == ["n1"]
    assert _every_hit(e) == ["n1"]


def test_a_namespace_of_only_records_without_a_vector_loads_empty(memory: MemoryBackend) -> None:
    """A namespace whose records all lack a vector loads into empty structures without error."""
    memory.put(PutRequest(records=[_bare(f"b{i}", "blob", float(i), bytes([i])) for i in range(5)]))
    assert _every_hit(_engine(memory)) == []


def test_refresh_skips_records_without_a_vector_written_by_another_handle(memory: MemoryBackend) -> None:
    """refresh picks up another writer's records; those without a vector stay out of the answers."""
    e = _engine(memory)
    e.ingest(Note(id="n1", text="first", timestamp=1.0))
    memory.put(PutRequest(records=[_bare("cp", "second", 2.0, b"state")]))
    _engine(memory).ingest(Note(id="n2", text="third", timestamp=3.0))
    e.refresh()
    assert _every_hit(e) == ["n1", "n2"]


def test_an_engine_upsert_over_a_record_without_a_vector_embeds_it(tmp_path: Path) -> None:
    """upsert of an id stored without a vector embeds the note: it becomes a hit."""
    with LogBackend(tmp_path / "store") as memory:
        memory.put(PutRequest(records=[_bare("cp", "budget", 1.0)]))
        e = _engine(memory)
        e.upsert(Note(id="cp", text="budget", timestamp=1.0))
        assert _every_hit(e) == ["cp"]
        (got,) = memory.get(GetRequest(ids=["cp"])).records
        assert got.vector is not None and got.embedding_id == e.spec_id


def test_ingest_of_an_id_held_without_a_vector_is_refused(memory: MemoryBackend) -> None:
    """ingest of a note whose id a record without a vector already holds raises DuplicateRecord
    and leaves the structures as they were."""
    memory.put(PutRequest(records=[_bare("cp", "state", 1.0)]))
    e = _engine(memory)
    with pytest.raises(DuplicateRecord):
        e.ingest(Note(id="cp", text="a note", timestamp=2.0))
    assert _every_hit(e) == []


def test_snapshot_and_restore_keep_records_without_a_vector(memory: MemoryBackend) -> None:
    """A snapshot holds the records without a vector (and their blobs); restoring it elsewhere
    writes them back unembedded and out of the structures."""
    memory.put(PutRequest(records=[_bare("cp", "state", 1.0, b"\xffblob")]))
    e = _engine(memory)
    e.ingest(Note(id="n1", text="a note", timestamp=2.0))
    target = InMemoryBackend()
    restored = _engine(target)
    assert restored.restore(e.snapshot()) == 2
    assert _every_hit(restored) == ["n1"]
    (cp,) = target.get(GetRequest(ids=["cp"])).records
    assert (cp.vector, cp.embedding_id, cp.blob) == (None, None, b"\xffblob")
