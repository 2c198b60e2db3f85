"""ContinuityEngine: the handshake, atomic ingest, the embedding-id guard, snapshots, following a log."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti import (
    AnchorNotFound,
    Answer,
    ContinuityEngine,
    ContractError,
    DuplicateRecord,
    EmbeddingMismatch,
    IngestResult,
    Note,
    NotSupported,
    Query,
    ReadOnlyError,
    Snapshot,
    TimeRange,
)
from coniti.batch import RecordBatch
from coniti.embedding import LocalHashEmbedder, RandomProjectionEmbedder
from coniti.errors import StructureError
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.memory import MemoryBackend, MemoryRecord, MetaSetRequest, PutRequest, PutResult
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure, SegmentTreeStructure, Structure

EMBEDDER = LocalHashEmbedder(dim=64)
SPEC = EMBEDDER.spec_id
ROOT = Path(__file__).resolve().parent.parent


def engine(memory: MemoryBackend | None = None, *structures: Structure) -> ContinuityEngine:
    return ContinuityEngine(
        memory if memory is not None else InMemoryBackend(),
        EMBEDDER,
        list(structures) or [FlatStructure(), SegmentTreeStructure(leaf_size=2)],
        DefaultStrategy(),
    )


def note(id_: str, text: str, t: float, **metadata: Any) -> Note:
    return Note(id=id_, text=text, timestamp=t, metadata=metadata)


DIARY = [
    note("d1", "budget meeting with Ana", 10.0, project="q3"),
    note("d2", "lunch with Bob", 20.0),
    note("d3", "the budget is approved", 30.0),
    note("d4", "gym session", 40.0),
    note("d5", "Ana sent the budget spreadsheet", 50.0),
]


def ids(answer: Any) -> list[str]:
    return [h.note.id for h in answer.hits]


def count(memory: MemoryBackend, namespace: Sequence[str] = ()) -> int:
    return memory.count(memory.count_request(namespace=namespace)).count


def meta(memory: MemoryBackend, namespace: Sequence[str] = ()) -> Any:
    return memory.get_meta(memory.meta_get_request("embedding_id", namespace)).value


class CountingEmbedder(LocalHashEmbedder):
    """local_hash that counts its embed calls."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return super().embed(texts)


class FailingStructure(FlatStructure):
    """A flat structure whose add fails when the batch holds the id 'boom'."""

    def _add(self, ids: list[str], unit: np.ndarray, times: np.ndarray, born: np.ndarray) -> None:
        if "boom" in ids:
            raise StructureError("injected structure failure")
        super()._add(ids, unit, times, born)


class FailingPut(InMemoryBackend):
    """An in-memory backend whose put (and columnar put_batch, the engine's ingest) fails while
    ``fail`` is set."""

    fail = False

    def put(self, request: PutRequest) -> PutResult:
        if self.fail:
            raise OSError("injected memory failure")
        return super().put(request)

    def put_batch(self, batch: RecordBatch, meta: MetaSetRequest | None = None) -> PutResult:
        if self.fail:
            raise OSError("injected memory failure")
        return super().put_batch(batch, meta)


# -- the handshake ------------------------------------------------------------------------------


def test_ingest_then_ask_returns_best_first() -> None:
    """Ingested notes come back as Hits with note and score, most similar first."""
    e = engine()
    e.ingest_many(DIARY)
    answer = e.ask(Query(text="budget", k=3))
    assert ids(answer) == ["d3", "d1", "d5"]
    assert answer.hits[0].note == DIARY[2]
    scores = [h.score for h in answer.hits]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0


def test_ingest_result_reports_admission() -> None:
    """IngestResult carries admitted, the note's id and the reason for a refusal."""
    e = engine()
    first = e.ingest(DIARY[0])
    again = e.ingest(note("copy", DIARY[0].text, DIARY[0].timestamp, project="q3"))
    assert (first.admitted, first.id, first.reason) == (True, "d1", None)
    assert (again.admitted, again.id, again.reason) == (False, "copy", "duplicate of stored note 'd1'")


def test_refused_notes_are_not_written() -> None:
    """Only admitted notes reach memory."""
    memory = InMemoryBackend()
    results = engine(memory).ingest_many([DIARY[0], note("b", "  ", 1.0), DIARY[1]])
    assert [r.admitted for r in results] == [True, False, True]
    assert count(memory) == 2


def test_ingest_many_embeds_in_one_call() -> None:
    """A batch of notes is embedded with a single embed call."""
    embedder = CountingEmbedder()
    e = ContinuityEngine(InMemoryBackend(), embedder, FlatStructure(), DefaultStrategy())
    e.ingest_many([note(f"n{i}", f"note number {i}", float(i)) for i in range(50)])
    assert embedder.calls == 1


def test_records_carry_embedding_id_and_meta_is_set() -> None:
    """Written records carry the spec id, and the namespace's embedding_id meta is set."""
    memory = InMemoryBackend()
    engine(memory).ingest(DIARY[0], namespace=("alice",))
    [record] = memory.iter_all(namespace=("alice",))
    assert record.embedding_id == SPEC
    assert meta(memory, ("alice",)) == SPEC
    assert meta(memory) is None


def test_results_round_trip_through_json() -> None:
    """IngestResult and Answer are contracts: to_json/from_json give equal objects."""
    e = engine()
    [result] = e.ingest_many(DIARY[:1])
    answer = e.ask(Query(text="budget", time_range=TimeRange(start=0.0), k=3))
    assert IngestResult.from_json(result.to_json()) == result
    assert Answer.from_json(answer.to_json()) == answer


def test_strings_are_accepted_as_notes_and_queries() -> None:
    """ingest('text') creates a note; ask('text') is a text query."""
    e = engine()
    result = e.ingest("remember the milk")
    assert ids(e.ask("milk")) == [result.id]


def test_time_only_query_gives_recent_notes() -> None:
    """A query with only a time range returns the newest notes in it."""
    e = engine()
    e.ingest_many(DIARY)
    assert ids(e.ask(Query(time_range=TimeRange(end=40.0), k=2))) == ["d3", "d2"]


def test_near_query_recalls_around_the_anchor() -> None:
    """near without text gives the notes closest in time, without the anchor."""
    e = engine()
    e.ingest_many(DIARY)
    assert ids(e.ask(Query(near="d3", k=2))) == ["d4", "d2"]


def test_near_unknown_note_raises() -> None:
    """A near id that is not stored raises AnchorNotFound."""
    e = engine()
    e.ingest_many(DIARY)
    with pytest.raises(AnchorNotFound, match="'ghost'"):
        e.ask(Query(near="ghost"))


def test_namespaces_are_isolated() -> None:
    """Notes of one namespace never answer in another."""
    e = engine()
    e.ingest(DIARY[0], namespace=("alice",))
    e.ingest(DIARY[1], namespace=("bob",))
    assert ids(e.ask(Query(text="budget"), namespace=("bob",))) == ["d2"]
    assert ids(e.ask(Query(text="budget"), namespace=("alice",))) == ["d1"]


def test_remove_deletes_from_memory_and_answers() -> None:
    """remove deletes the notes, reports unknown ids, and they no longer answer."""
    memory = InMemoryBackend()
    e = engine(memory)
    e.ingest_many(DIARY)
    result = e.remove(["d3", "nope"])
    assert (result.deleted, result.missing) == (["d3"], ["nope"])
    assert count(memory) == 4
    assert "d3" not in ids(e.ask(Query(text="budget")))


def test_removed_note_can_be_ingested_again() -> None:
    """After remove, the same note is admitted again (it is no longer stored)."""
    e = engine()
    e.ingest_many(DIARY)
    e.remove(["d1"])
    assert e.ingest(DIARY[0]).admitted


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda e: e.ingest(42), "notes\\[0\\] must be a Note or a string"),
        (lambda e: e.ask(42), "query must be a Query"),
        (lambda e: e.remove([1]), "ids\\[0\\] must be a string"),
        (lambda e: e.ingest("x", namespace="alice"), "namespace must be a tuple"),
        (lambda e: e.ask("x", namespace=("",)), "namespace\\[0\\]"),
    ],
)
def test_bad_input_is_refused(call: Any, message: str) -> None:
    """Wrong types raise ContractError naming the field, and nothing is written."""
    memory = InMemoryBackend()
    with pytest.raises(ContractError, match=message):
        call(engine(memory))
    assert count(memory) == 0


# -- atomicity -----------------------------------------------------------------------------------


def test_ingest_is_atomic_when_a_structure_fails() -> None:
    """A structure failure raises, writes nothing, and the structures match memory again."""
    memory = InMemoryBackend()
    e = engine(memory, FlatStructure(), FailingStructure())
    e.ingest_many(DIARY[:2])
    with pytest.raises(StructureError, match="injected"):
        e.ingest_many([note("ok", "budget for the trip", 60.0), note("boom", "budget bomb", 70.0)])
    assert count(memory) == 2
    assert ids(e.ask(Query(text="budget", k=10))) == ["d1", "d2"]
    assert all(len(s) == 2 for s in e.structures())
    assert e.ingest(note("ok", "budget for the trip", 60.0)).admitted


class PlainBackend(FailingPut):
    """A FailingPut that declares no put_with_meta (as a third-party backend might): the engine then
    claims the namespace first and unsets the claim when the put fails."""

    supports_put_with_meta = False
    put_with_meta = MemoryBackend.put_with_meta


@pytest.mark.parametrize("backend", [FailingPut, PlainBackend], ids=["put_with_meta", "claim_first"])
def test_ingest_is_atomic_when_memory_fails(backend: type[FailingPut]) -> None:
    """A failing memory write leaves the structures and the embedding meta as they were, with or
    without the backend's put_with_meta."""
    memory = backend()
    e = engine(memory)
    memory.fail = True
    with pytest.raises(OSError, match="injected"):
        e.ingest_many(DIARY)
    assert meta(memory) is None
    assert all(len(s) == 0 for s in e.structures())
    memory.fail = False
    assert all(r.admitted for r in e.ingest_many(DIARY))
    assert count(memory) == 5 and meta(memory) == SPEC


def test_ingest_on_a_log_sees_a_put_made_elsewhere_first(tmp_path: Path) -> None:
    """Over an event feed a write first folds what others wrote to the namespace: an id put by
    another handle since loading is refused by admission (nothing fails, the rest is written with
    the namespace's embedding_id claim)."""
    with LogBackend(tmp_path / "store") as store:
        e = engine(store)
        e.ingest(note("n1", "budget", 1.0), namespace=("a",))  # loads ("a",) before the direct put
        e.structures(("b",))
        store.put(PutRequest(records=[MemoryRecord(note=DIARY[0], vector=np.ones(64), namespace=("b",))]))
        head = store.head
        results = e.ingest_many([note("fresh", "lunch", 2.0), DIARY[0]], namespace=("b",))
        assert [r.admitted for r in results] == [True, False]
        assert "already stored" in (results[1].reason or "")
        assert [ev.kind for ev in store.events(after=head)] == ["meta", "put"]


def test_put_of_an_id_written_elsewhere_fails_cleanly() -> None:
    """An id stored by another handle since loading raises DuplicateRecord and changes nothing."""
    memory = InMemoryBackend()
    e = engine(memory)
    e.ingest(DIARY[0])
    engine(memory).ingest(DIARY[1])
    with pytest.raises(DuplicateRecord):
        e.ingest(DIARY[1])
    assert count(memory) == 2
    assert len(e.structures()[0]) == 1


# -- the embedding id guard ------------------------------------------------------------------


def test_refuses_memory_of_another_embedding() -> None:
    """Opening memory written with another embedder raises EmbeddingMismatch naming both ids."""
    memory = InMemoryBackend()
    engine(memory).ingest(DIARY[0])
    other = RandomProjectionEmbedder(dim=64)
    with pytest.raises(EmbeddingMismatch) as info:
        ContinuityEngine(memory, other, FlatStructure(), DefaultStrategy())
    assert SPEC in str(info.value) and other.spec_id in str(info.value)


def test_refuses_a_namespace_of_another_embedding_on_first_use() -> None:
    """Another embedding's namespace is refused when first touched, and nothing is written."""
    memory = InMemoryBackend()
    memory.set_meta(memory.meta_set_request("embedding_id", "emb-000000000000", ("old",)))
    e = engine(memory)
    with pytest.raises(EmbeddingMismatch, match="emb-000000000000"):
        e.ingest(DIARY[0], namespace=("old",))
    assert count(memory, ("old",)) == 0


def _other_engine(memory: MemoryBackend) -> ContinuityEngine:
    return ContinuityEngine(memory, RandomProjectionEmbedder(dim=64), FlatStructure(), DefaultStrategy())


@pytest.mark.parametrize("kind", ["in_memory", "log"])
def test_a_second_embedding_is_refused_in_a_new_namespace(tmp_path: Path, kind: str) -> None:
    """A memory holds one embedding: an engine with another refuses its first write into a namespace
    that records none yet (the store's id is in another namespace, not the root), naming both ids,
    and writes nothing; the memory stays answerable by its own engine across every namespace."""
    memory = InMemoryBackend() if kind == "in_memory" else LogBackend(tmp_path / "store")
    engine(memory).ingest(DIARY[0], namespace=("alice",))
    head = memory.head if isinstance(memory, LogBackend) else None
    other = _other_engine(memory)
    with pytest.raises(EmbeddingMismatch) as info:
        other.ingest(DIARY[1], namespace=("newns",))
    assert SPEC in str(info.value) and other.spec_id in str(info.value) and "newns" in str(info.value)
    assert memory.namespaces() == [("alice",)]
    assert memory.get_meta(memory.meta_get_request("embedding_id", ("newns",))).value is None
    if isinstance(memory, LogBackend):
        assert memory.head == head
    assert [h.note.id for h in engine(memory).ask("budget", prefix=()).hits] == ["d1"]


def test_a_second_embedding_is_refused_for_every_write_form() -> None:
    """upsert and restore into a new namespace are refused the same way as ingest."""
    memory = InMemoryBackend()
    engine(memory).ingest(DIARY[0], namespace=("alice",))
    other = _other_engine(memory)
    with pytest.raises(EmbeddingMismatch):
        other.upsert(DIARY[1], namespace=("b",))
    with pytest.raises(EmbeddingMismatch):
        other.restore(Snapshot(namespace=("c",), records=[MemoryRecord(note=DIARY[2], vector=None)]))
    assert memory.namespaces() == [("alice",)]


def test_refuses_records_of_another_embedding_without_meta() -> None:
    """Records carrying another embedding id are refused even when the meta is unset."""
    memory = InMemoryBackend()
    record = MemoryRecord(note=DIARY[0], vector=np.ones(64), embedding_id="emb-ffffffffffff")
    memory.put(PutRequest(records=[record]))
    with pytest.raises(EmbeddingMismatch, match="record 'd1'.*emb-ffffffffffff"):
        engine(memory).ask("budget")


# -- structures derive from memory ----------------------------------------------------------


def test_structures_are_rebuilt_from_memory_on_open() -> None:
    """A new engine on the same memory answers exactly like the one that wrote it."""
    memory = InMemoryBackend()
    first = engine(memory)
    first.ingest_many(DIARY)
    first.remove(["d2"])
    second = engine(memory)
    for query in (Query(text="budget"), Query(near="d3"), Query(time_range=TimeRange(start=15.0))):
        assert second.ask(query) == first.ask(query)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["ingest", "remove", "boom"]),
            st.lists(st.integers(min_value=0, max_value=15), min_size=1, max_size=4),
        ),
        max_size=12,
    )
)
def test_engine_always_equals_a_fresh_engine(steps: list[tuple[str, list[int]]]) -> None:
    """After any ingests, removals and failed ingests, answers equal a freshly opened engine's."""
    words = ["budget", "ana", "bob", "gym", "trip", "report"]
    memory = InMemoryBackend()
    e = engine(memory, FlatStructure(), SegmentTreeStructure(leaf_size=2), FailingStructure())
    for op, numbers in steps:
        notes = [note(f"n{i}", f"{words[i % 6]} {words[i * 7 % 6]} {i}", float(i % 5)) for i in numbers]
        if op == "ingest":
            e.ingest_many(notes)
        elif op == "remove":
            e.remove([n.id for n in notes])
        else:
            with pytest.raises(StructureError):
                e.ingest_many([*notes, note("boom", "boom", 1.0)])
    fresh = engine(memory)
    for query in (Query(text="budget ana", k=5), Query(time_range=TimeRange(start=1.0, end=4.0))):
        assert e.ask(query) == fresh.ask(query)


# -- snapshot and restore ---------------------------------------------------------------------


def test_snapshot_moves_memory_between_backends(tmp_path: Path) -> None:
    """snapshot from in-memory, restore into a LogBackend: same answers, same embedding id."""
    source = engine()
    source.ingest_many(DIARY, namespace=("alice",))
    snap = source.snapshot(("alice",))
    assert snap.embedding_id == SPEC and len(snap.records) == 5
    with LogBackend(tmp_path / "store") as store:
        target = engine(store)
        assert target.restore(snap) == 5
        assert meta(store, ("alice",)) == SPEC
        query = Query(text="budget")
        got, want = target.ask(query, namespace=("alice",)), source.ask(query, namespace=("alice",))
        assert [(h.note, h.score) for h in got.hits] == [(h.note, h.score) for h in want.hits]


def test_snapshot_round_trips_through_json() -> None:
    """A snapshot survives to_json/from_json and restores into another namespace."""
    source = engine()
    source.ingest_many(DIARY)
    snap = Snapshot.from_json(source.snapshot().to_json())
    target = engine()
    assert target.restore(snap, namespace=("copy",)) == 5
    assert ids(target.ask("budget", namespace=("copy",))) == ids(source.ask("budget"))


def test_restore_refuses_another_embedding() -> None:
    """A snapshot of another embedding is refused and nothing is written."""
    source = ContinuityEngine(
        InMemoryBackend(), RandomProjectionEmbedder(dim=64), FlatStructure(), DefaultStrategy()
    )
    source.ingest_many(DIARY)
    memory = InMemoryBackend()
    with pytest.raises(EmbeddingMismatch):
        engine(memory).restore(source.snapshot())
    assert count(memory) == 0


def test_restore_refuses_existing_ids_and_changes_nothing() -> None:
    """Restoring over an existing id raises DuplicateRecord; nothing of the snapshot is written."""
    source = engine()
    source.ingest_many(DIARY)
    memory = InMemoryBackend()
    target = engine(memory)
    target.ingest(DIARY[4])
    with pytest.raises(DuplicateRecord, match="'d5'"):
        target.restore(source.snapshot())
    assert count(memory) == 1
    assert len(target.structures()[0]) == 1


def test_restore_refuses_wrong_vector_length() -> None:
    """A record whose vector does not fit the embedder is refused with ContractError."""
    record = MemoryRecord(note=DIARY[0], vector=np.ones(3))
    with pytest.raises(ContractError, match="length 3"):
        engine().restore(Snapshot(records=[record]))


# -- read-only engines and time travel ----------------------------------------------------------


def test_at_needs_a_backend_with_time_travel() -> None:
    """at() on an in-memory backend raises NotSupported."""
    with pytest.raises(NotSupported, match="in_memory"):
        engine().at(0)


def test_at_answers_as_of_a_past_sequence(tmp_path: Path) -> None:
    """at(seq) answers from memory as it was after that event, and refuses writes."""
    with LogBackend(tmp_path / "store") as store:
        e = engine(store)
        e.ingest_many(DIARY[:2])
        seq = store.head
        e.ingest_many(DIARY[2:])
        e.remove(["d1"])
        past = e.at(seq)
        assert sorted(ids(past.ask(Query(time_range=TimeRange())))) == ["d1", "d2"]
        assert ids(e.ask(Query(text="budget meeting", k=1))) != ["d1"]
        assert ids(past.ask(Query(text="budget meeting", k=1))) == ["d1"]
        with pytest.raises(ReadOnlyError):
            past.ingest(DIARY[3])


def test_read_only_engine_refuses_every_write() -> None:
    """read_only=True refuses ingest, remove and restore with ReadOnlyError."""
    memory = InMemoryBackend()
    e = ContinuityEngine(memory, EMBEDDER, FlatStructure(), DefaultStrategy(), read_only=True)
    for call in (lambda: e.ingest(DIARY[0]), lambda: e.remove(["d1"]), lambda: e.restore(Snapshot(records=[]))):
        with pytest.raises(ReadOnlyError):
            call()
    assert count(memory) == 0


def test_engine_over_a_read_only_log_store_is_read_only(tmp_path: Path) -> None:
    """An engine over LogBackend(path, read_only=True) reports read_only and refuses ingest."""
    path = tmp_path / "s"
    with LogBackend(path) as store:
        engine(store).ingest(DIARY[0])
    with LogBackend(path, read_only=True) as ro:
        e = engine(ro)
        assert ro.read_only and e.read_only
        assert ids(e.ask(Query(text="budget meeting", k=1))) == ["d1"]
        with pytest.raises(ReadOnlyError):
            e.ingest(DIARY[1])


# -- following writes of other handles and processes -----------------------------------------


def test_refresh_sees_writes_through_another_handle() -> None:
    """Without an event feed, refresh rescans: another engine's ingest and remove show up."""
    memory = InMemoryBackend()
    reader, writer = engine(memory), engine(memory)
    reader.ingest_many(DIARY[:2])
    writer.ingest(DIARY[2])
    writer.remove(["d1"])
    reader.refresh()
    assert sorted(ids(reader.ask(Query(time_range=TimeRange())))) == ["d2", "d3"]


WRITER = textwrap.dedent(
    """
    import json, sys
    from coniti import ContinuityEngine, Note
    from coniti.embedding import LocalHashEmbedder
    from coniti.impl.log import LogBackend
    from coniti.strategy import DefaultStrategy
    from coniti.structure import FlatStructure

    path, ids, remove = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    with LogBackend(path) as store:
        e = ContinuityEngine(store, LocalHashEmbedder(dim=64), FlatStructure(), DefaultStrategy())
        e.ingest_many([Note(id=i, text="budget from process " + i, timestamp=100.0) for i in ids])
        e.remove(remove)
    """
)


def run_writer(path: Path, new: list[str], remove: list[str]) -> None:
    subprocess.run(
        [sys.executable, "-c", WRITER, str(path), json.dumps(new), json.dumps(remove)],
        check=True,
        cwd=ROOT,
        timeout=120,
    )


def test_refresh_sees_another_process(tmp_path: Path) -> None:
    """Ingests and removals by another process appear after refresh(), not before."""
    path = tmp_path / "store"
    with LogBackend(path) as store:
        e = engine(store)
        e.ingest_many(DIARY)
        run_writer(path, ["p1", "p2"], ["d2"])
        assert "p1" not in ids(e.ask(Query(text="budget process", k=3)))
        e.refresh()
        assert sorted(ids(e.ask(Query(text="budget process", k=2)))) == ["p1", "p2"]
        assert "d2" not in ids(e.ask(Query(time_range=TimeRange(), k=20)))


def test_incremental_refresh_follows_puts_and_deletes(tmp_path: Path) -> None:
    """With the log's event feed, refresh reads only new events and applies puts and deletes."""
    path = tmp_path / "store"
    with LogBackend(path) as store:
        e = engine(store)
        e.ingest_many(DIARY)
        e.ask("budget")
        assert e.refresh() == 0
        run_writer(path, ["p1", "p2"], ["d2"])
        assert e.refresh() == 3
        assert sorted(ids(e.ask(Query(text="budget process", k=2)))) == ["p1", "p2"]
        assert "d2" not in ids(e.ask(Query(time_range=TimeRange(), k=20)))
        assert e.refresh() == 0


def test_incremental_refresh_applies_a_clear(tmp_path: Path) -> None:
    """A clear event (after a put by another handle) empties the namespace's structures."""
    with LogBackend(tmp_path / "store") as store:
        e = engine(store)
        e.ingest_many(DIARY)
        engine(store).ingest(note("late", "late note", 60.0))
        store.clear(store.clear_request())
        e.refresh()
        assert ids(e.ask(Query(time_range=TimeRange()))) == []


def test_incremental_refresh_refuses_another_embedding(tmp_path: Path) -> None:
    """A new embedding_id written by another handle is refused on refresh."""
    with LogBackend(tmp_path / "store") as store:
        e = engine(store)
        e.ingest_many(DIARY)
        store.set_meta(store.meta_set_request("embedding_id", "emb-aaaaaaaaaaaa"))
        with pytest.raises(EmbeddingMismatch, match="emb-aaaaaaaaaaaa"):
            e.refresh()


def test_refresh_only_touches_loaded_namespaces(tmp_path: Path) -> None:
    """Events of a namespace the engine never loaded are skipped; it loads by scan when touched."""
    with LogBackend(tmp_path / "store") as store:
        e = engine(store)
        e.ingest_many(DIARY[:2])
        engine(store).ingest_many(DIARY[2:], namespace=("other",))
        assert e.refresh() == 4
        assert e.namespaces == [()]
        assert sorted(ids(e.ask(Query(time_range=TimeRange()), namespace=("other",)))) == [
            "d3",
            "d4",
            "d5",
        ]


def test_refresh_picks_up_a_clear(tmp_path: Path) -> None:
    """A clear made through another handle empties the structures on refresh."""
    with LogBackend(tmp_path / "store") as store:
        e = engine(store)
        e.ingest_many(DIARY)
        store.clear(store.clear_request())
        e.refresh()
        assert ids(e.ask(Query(time_range=TimeRange()))) == []


def test_structures_of_a_namespace() -> None:
    """structures(namespace) loads it and lists one structure per prototype."""
    e = engine()
    e.ingest_many(DIARY, namespace=("a",))
    assert [type(s) for s in e.structures(("a",))] == [FlatStructure, SegmentTreeStructure]
    assert e.namespaces == [("a",)]


def test_reindex_refills_structures_from_memory() -> None:
    """reindex(namespace) picks up records written to memory behind the engine's back."""
    memory = InMemoryBackend()
    e = engine(memory)
    e.ingest_many(DIARY[:2])
    memory.put(PutRequest(records=[MemoryRecord(note=DIARY[2], vector=np.ones(64), embedding_id=SPEC)]))
    assert "d3" not in e.structures()[0]
    e.reindex()
    assert all("d3" in s for s in e.structures())
    assert not hasattr(e, "rebuild")


class UndeclaredFeed(InMemoryBackend):
    """Has at/events/head methods but declares none of those capabilities."""

    head = 7

    def at(self, seq: int | None = None, *, time: float | None = None) -> MemoryBackend:
        raise AssertionError("the engine must not call an undeclared at()")

    def events(self, after: int = 0, **_: Any) -> Any:
        raise AssertionError("the engine must not call an undeclared events()")


def test_engine_reads_declared_capabilities_not_methods() -> None:
    """Methods named at/events/head are ignored unless the class declares the capability."""
    e = engine(UndeclaredFeed())
    e.ingest_many(DIARY)
    with pytest.raises(NotSupported, match="time travel"):
        e.at(1)
    assert e.refresh() == 0


class _Counting(LocalHashEmbedder):
    """Records the texts it embeds."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.texts: list[str] = []

    def embed(self, texts: Any) -> Any:
        self.texts.extend(texts)
        return super().embed(texts)


def test_a_query_text_past_max_query_chars_is_refused_before_any_work() -> None:
    """ask with a query text one character past max_query_chars raises ContractError naming the
    limit, and the embedder is never called; a text of exactly the limit is answered."""
    embedder = _Counting()
    e = ContinuityEngine(InMemoryBackend(), embedder, FlatStructure(), DefaultStrategy(), max_query_chars=40)
    e.ingest(note("d1", "budget meeting with Ana", 10.0))
    embedder.texts.clear()
    with pytest.raises(ContractError, match=r"query text is 41 characters, more than max_query_chars \(40\)"):
        e.ask(Query(text="b" * 41))
    assert embedder.texts == []
    assert ids(e.ask("budget".ljust(40))) == ["d1"] and embedder.texts == ["budget".ljust(40)]


def test_max_query_chars_defaults_to_the_stated_limit_and_travels_to_past_engines(tmp_path: Path) -> None:
    """The default limit is MAX_QUERY_CHARS (100,000); an engine at a past point keeps the limit of
    the engine it came from."""
    from coniti.engine import MAX_QUERY_CHARS

    assert MAX_QUERY_CHARS == 100_000 and engine().max_query_chars == MAX_QUERY_CHARS
    with LogBackend(tmp_path / "s") as memory:
        e = engine(memory)
        e.max_query_chars = 5
        e.ingest(note("d1", "budget", 1.0))
        with pytest.raises(ContractError, match="max_query_chars"):
            e.at(1).ask("budgets")


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_a_bad_max_query_chars_is_refused(bad: Any) -> None:
    """max_query_chars must be a positive int."""
    with pytest.raises(ContractError, match="max_query_chars"):
        ContinuityEngine(InMemoryBackend(), EMBEDDER, FlatStructure(), DefaultStrategy(), max_query_chars=bad)


def test_a_50_mb_query_is_refused_in_bounded_memory() -> None:
    """In a child process, asking with a 50 MB query text raises ContractError and raises the
    process's peak RSS (VmHWM) by less than 16 MiB over the text itself (it peaked at 2.7 GB
    before the limit)."""
    child = textwrap.dedent(
        """
        from coniti import Container, ContractError

        def peak_rss():  # this process's own high-water mark (ru_maxrss starts at the parent's)
            with open("/proc/self/status") as status:
                return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

        with Container() as c:
            c.engine.ingest("budget meeting with Ana")
            text = "budget " * (50_000_000 // 7)
            before = peak_rss()
            try:
                c.engine.ask(text)
            except ContractError as exc:
                print("refused", str(exc)[:50])
            grown = peak_rss() - before
            print(grown // 1024)
        """
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True, cwd=ROOT)
    refused, grown = out.stdout.splitlines()
    assert refused.startswith("refused query text is 49,999,999 characters")
    assert int(grown) < 16
