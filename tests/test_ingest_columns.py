"""The ingest of a NoteBatch reads columns: a batch is the sequence of its notes, the default
strategy keys and admits from its columns exactly as from notes, structures check a batch's ids in
bulk with the errors of the one-by-one walk, and a refused ingest changes nothing (store,
structures, keyword index, content index)."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coniti.actor import Note
from coniti.batch import NoteBatch
from coniti.embedding import LocalHashEmbedder
from coniti.engine import ContinuityEngine
from coniti.errors import ContractError, DuplicateRecord
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.memory import GetRequest
from coniti.strategy import Admission, DefaultStrategy, StrategyContext
from coniti.structure import FlatStructure, SegmentTreeStructure, Structure

TEXT = st.sampled_from(["x", "x y", " ", "", "\t\n", "z", "É é", "苏黎世"])
STAMP = st.sampled_from([0.0, -0.0, 1.0, 2.5, -62135596800.0])
META = st.sampled_from([{}, {"a": 1}, {"a": [1, 2]}, {"b": None, "a": 1}])
ROWS = st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), TEXT, STAMP, META), max_size=10)


def _batch(rows: list[tuple[str, str, float, dict[str, Any]]]) -> NoteBatch:
    return NoteBatch([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows])


# -- the batch as a sequence ------------------------------------------------------------------


def test_a_note_batch_is_the_sequence_of_its_notes() -> None:
    """batch[i] is the note of row i, iteration gives notes() in order, a slice is the NoteBatch
    of those rows."""
    batch = NoteBatch(["a", "b", "c"], ["one", "two", "three"], [1.0, 2.0, 3.0], [{"k": 1}, {}, {}])
    assert batch[0] == Note(id="a", text="one", timestamp=1.0, metadata={"k": 1})
    assert batch[-1].id == "c"
    assert list(batch) == batch.notes()
    part = batch[1:]
    assert isinstance(part, NoteBatch) and part.ids == ("b", "c")


def test_a_batch_builds_its_notes_once() -> None:
    """Reading a batch's notes twice gives the same Note objects (built on first use, kept);
    notes() is a new list each time."""
    batch = NoteBatch(["a", "b"], ["one", "two"], [1.0, 2.0])
    assert batch[1] is batch[1]
    assert batch.notes() is not batch.notes()
    assert batch.notes()[0] is batch[0]


# -- the default strategy on columns ---------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(ROWS, st.sampled_from(["text_timestamp", "text_metadata"]), st.booleans())
def test_content_keys_of_a_batch_are_those_of_its_notes(
    rows: list[tuple[str, str, float, dict[str, Any]]], key: str, refuse: bool
) -> None:
    """content_keys(NoteBatch) equals content_key of each note (-0.0 keyed as 0.0, metadata in
    key order), and content_keys of the notes as a list."""
    s = DefaultStrategy(duplicate_key=key, refuse_duplicates=refuse)
    batch = _batch(rows)
    notes = batch.notes()
    assert s.content_keys(batch) == [s.content_key(n) for n in notes] == s.content_keys(notes)


def test_a_subclass_overriding_content_key_gets_its_keys_for_a_batch() -> None:
    """A DefaultStrategy subclass that overrides content_key (only) keys a NoteBatch with it."""

    class ByLength(DefaultStrategy):
        def content_key(self, note: Note) -> str | None:
            return str(len(note.text))

    batch = NoteBatch(["a", "b"], ["one", "three"], [1.0, 2.0])
    assert ByLength().content_keys(batch) == ["3", "5"]


def _context(stored: dict[str, list[str]], ids: set[str]) -> StrategyContext:
    return StrategyContext((), (FlatStructure(),), lambda k: list(stored.get(k, [])), ids.__contains__)


@settings(max_examples=80, deadline=None)
@given(ROWS, ROWS, st.sampled_from(["text_timestamp", "text_metadata"]))
def test_admission_of_a_batch_decides_as_of_its_notes(
    stored_rows: list[tuple[str, str, float, dict[str, Any]]],
    rows: list[tuple[str, str, float, dict[str, Any]]],
    key: str,
) -> None:
    """admit(NoteBatch) gives the decisions and reasons of admit(the batch's notes): blank
    texts, ids earlier in the batch, stored ids, stored and in-batch duplicates."""
    s = DefaultStrategy(duplicate_key=key)
    stored: dict[str, list[str]] = {}
    ids = {r[0] for r in stored_rows[:2]}
    for i, (_, text, t, meta) in enumerate(stored_rows):
        k = s.content_key(Note(id=f"s{i}", text=text, timestamp=t, metadata=meta))
        assert k is not None
        stored.setdefault(k, []).append(f"s{i}")
    batch = _batch(rows)
    vectors = np.zeros((len(rows), 4), dtype=np.float32)
    decided = s.admit(batch, vectors, _context(stored, ids))
    assert decided == s.admit(batch.notes(), vectors, _context(stored, ids))
    assert all(isinstance(d, Admission) for d in decided)


# -- structures: membership in bulk ------------------------------------------------------------


def _structures() -> list[Structure]:
    return [
        FlatStructure(buffer_min=2, buffer_fraction=0.25),
        SegmentTreeStructure(leaf_size=2, direct_rows=3, buffer_min=4, buffer_fraction=0.25),
    ]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 11), st.sampled_from([0.0, 5.0, 9.0])), max_size=12, unique_by=lambda r: r[0]),
    st.lists(st.integers(0, 11), max_size=5),
    st.sets(st.integers(0, 14)),
    st.booleans(),
)
def test_stored_among_is_membership_of_each_id(
    rows: list[tuple[int, float]], removed: list[int], asked: set[int], restore: bool
) -> None:
    """stored_among(ids) is {id in ids if id in structure}: main rows, buffered rows (added out
    of time order), removed ids (gone), and a structure restored from its derived state (ids
    still packed)."""
    for s in _structures():
        ids = [f"n{i}" for i, _ in rows]
        if ids:
            s.add(ids, np.ones((len(ids), 3)), [t for _, t in rows], born=list(range(1, len(ids) + 1)))
        s.remove([f"n{i}" for i in removed], seq=100)
        if restore:
            copy = s.spawn()
            copy.restore_derived_state(s.derived_state())
            s = copy
        wanted = {f"n{i}" for i in asked}
        assert s.stored_among(wanted) == {i for i in wanted if i in s}


@pytest.mark.parametrize("ids", [["ok", 3, ""], ["ok", ""], ["ok", ["list"]]])
def test_add_names_the_first_id_that_is_not_a_string(ids: list[Any]) -> None:
    """A batch with a non-string or empty id is refused naming the first such position, as the
    walk over the ids names it; nothing is added."""
    for s in _structures():
        s.add(["old"], np.ones((1, 2)), [0.0])
        with pytest.raises(ContractError, match=r"ids\[1\] must be a non-empty string"):
            s.add(ids, np.ones((len(ids), 2)), [1.0] * len(ids))
        assert s.stored_among({"old", "ok"}) == {"old"} and len(s) == 1


def test_add_names_the_first_repeated_or_stored_id_in_order() -> None:
    """Of a repeated and a stored id, add names whichever comes first in the batch."""
    for s in _structures():
        s.add(["old"], np.ones((1, 2)), [0.0])
        with pytest.raises(ContractError, match="id 'old' is already in the"):
            s.add(["x", "old", "x"], np.ones((3, 2)), [1.0] * 3)
        with pytest.raises(ContractError, match="id 'x' appears twice in one add"):
            s.add(["x", "x", "old"], np.ones((3, 2)), [1.0] * 3)
        assert len(s) == 1


def test_add_accepts_ids_of_a_str_subclass() -> None:
    """Ids that are instances of a str subclass are strings: accepted, as before."""

    class Tag(str):
        pass

    for s in _structures():
        s.add([Tag("a"), Tag("b")], np.ones((2, 2)), [0.0, 1.0])
        assert "a" in s and "b" in s


# -- the engine: a refused batch changes nothing ----------------------------------------------


class AdmitAll(DefaultStrategy):
    """A strategy that admits every note (it consults nothing): the structures and memory are
    then the ones to refuse a known id."""

    name = "admit_all"

    def admit(self, notes: Any, vectors: np.ndarray, context: StrategyContext) -> list[Admission]:
        return [Admission(True)] * len(notes)


def _notes_held(e: ContinuityEngine) -> set[tuple[Any, ...]]:
    """The keyword index's rows as (id, died, time, length): what they hold, not the seq that
    wrote them (a rebuild from memory stamps rows with their versions)."""
    return {(r[0], *r[2:]) for r in e.keyword_index().rows_state()}


def _state(e: ContinuityEngine) -> tuple[Any, ...]:
    space = e._space(())
    return ([sorted(s.live_ids()) for s in e.structures()], _notes_held(e), dict(e._content(space)))


def _engine(memory: Any, strategy: DefaultStrategy | None = None) -> ContinuityEngine:
    structures = [FlatStructure(), SegmentTreeStructure()]
    return ContinuityEngine(memory, LocalHashEmbedder(dim=16), structures, strategy or DefaultStrategy())


@pytest.mark.parametrize("kind", ["in_memory", "log"])
def test_an_id_in_the_structures_but_not_in_memory_refuses_the_batch(tmp_path: Any, kind: str) -> None:
    """A batch (admitted by a strategy that checks nothing) holding an id the structures hold
    but memory does not raises the structure's ContractError naming it; memory is unchanged (no
    event), and the structures, keyword index and content index equal memory again (rebuilt)."""
    memory = InMemoryBackend() if kind == "in_memory" else LogBackend(tmp_path / "s")
    e = _engine(memory, AdmitAll())
    e.ingest_many(NoteBatch(["a", "b"], ["one", "two"], [1.0, 2.0]))
    for s in e.structures():  # a row memory does not hold (a structure out of step with memory)
        s.add(["ghost"], np.ones((1, 16)), [3.0])
    keyword, content = _notes_held(e), dict(e._content(e._space(())))
    head = getattr(memory, "head", None)
    with pytest.raises(ContractError, match="id 'ghost' is already in the flat structure"):
        e.ingest_many(NoteBatch(["c", "ghost"], ["three", "four"], [4.0, 5.0]))
    assert [r.id for r in memory.get(GetRequest(ids=["a", "b", "c", "ghost"])).records] == ["a", "b"]
    assert getattr(memory, "head", None) == head
    assert _state(e) == ([["a", "b"], ["a", "b"]], keyword, content)


def test_an_id_in_memory_but_not_in_the_structures_refuses_the_batch() -> None:
    """A batch holding an id memory holds but the engine's structures do not (written by another
    handle since, over a backend without an event feed to fold) raises DuplicateRecord; the
    structures, keyword index and content index are as before, and memory holds nothing of the
    batch."""
    memory = InMemoryBackend()
    e = _engine(memory, AdmitAll())
    e.ingest_many(NoteBatch(["a"], ["one"], [1.0]))
    before = _state(e)
    _engine(memory).ingest_many(NoteBatch(["b"], ["two"], [2.0]))  # another handle; e not refreshed
    with pytest.raises(DuplicateRecord, match="'b'"):
        e.ingest_many(NoteBatch(["c", "b"], ["three", "again"], [3.0, 4.0]))
    assert memory.get(GetRequest(ids=["c"])).records == []
    assert _state(e) == before


def test_a_stored_id_in_a_batch_is_refused_by_admission() -> None:
    """With the default strategy an id already stored is refused by admission ('already
    stored'); the rest of the batch is written."""
    e = _engine(InMemoryBackend())
    e.ingest_many(NoteBatch(["a"], ["one"], [1.0]))
    results = e.ingest_many(NoteBatch(["b", "a"], ["two", "again"], [2.0, 3.0]))
    assert [(r.id, r.admitted, r.reason) for r in results] == [
        ("b", True, None),
        ("a", False, "id 'a' is already stored"),
    ]
    assert [sorted(s.live_ids()) for s in e.structures()] == [["a", "b"], ["a", "b"]]


def test_ingest_results_are_contracts_with_one_result_per_note() -> None:
    """ingest_many(NoteBatch) returns a list of IngestResult, one per note in order, equal to
    their JSON round trip."""
    from coniti.engine import IngestResult

    e = _engine(InMemoryBackend())
    results = e.ingest_many(NoteBatch(["a", "b", "c"], ["one", " ", "one"], [1.0, 2.0, 1.0]))
    assert type(results) is list and all(type(r) is IngestResult for r in results)
    assert [r.to_dict() for r in results] == [
        {"admitted": True, "id": "a", "reason": None},
        {"admitted": False, "id": "b", "reason": "blank text"},
        {"admitted": False, "id": "c", "reason": "duplicate of note 'a' earlier in this batch"},
    ]
    assert [IngestResult.from_json(r.to_json()) for r in results] == results
    assert results[0].model_fields_set == {"admitted", "id", "reason"}


class FailingPutBatch(InMemoryBackend):
    """An in-memory backend whose put_batch (the engine's ingest of a NoteBatch) fails while
    ``fail`` is set."""

    fail = False

    def put_batch(self, batch: Any, meta: Any = None) -> Any:
        if self.fail:
            raise OSError("injected memory failure")
        return super().put_batch(batch, meta)


def test_a_failed_memory_write_leaves_every_index_as_it_was() -> None:
    """When memory refuses a NoteBatch's write, the structures, keyword index and content index
    are as before the call, and memory holds nothing of the batch."""
    memory = FailingPutBatch()
    e = _engine(memory)
    e.ingest_many(NoteBatch(["a", "b"], ["one", "two"], [1.0, 2.0]))
    before = _state(e)
    memory.fail = True
    with pytest.raises(OSError, match="injected"):
        e.ingest_many(NoteBatch(["c", "d"], ["three", "four"], [3.0, 4.0]))
    assert _state(e) == before
    assert memory.get(GetRequest(ids=["c", "d"])).records == []


# -- the garbage collector --------------------------------------------------------------------


def _tracked() -> int:
    gc.collect()
    return len(gc.get_objects())


@pytest.mark.parametrize("non_ascii", [False, True])
def test_in_memory_ingest_keeps_no_tracked_object_per_note(non_ascii: bool) -> None:
    """3,000 more notes ingested in memory (NoteBatch, local_hash, flat) grow the objects the
    garbage collector tracks by fewer than 100: records, notes and their token sequences are held
    as plain values, so a larger memory does not lengthen the process's collections."""
    engine = ContinuityEngine(
        InMemoryBackend(), LocalHashEmbedder(dim=16), FlatStructure(), DefaultStrategy()
    )
    word = "苏黎世" if non_ascii else "zurich"

    def ingest(start: int) -> None:
        for a in range(start, start + 3_000, 500):
            rows = range(a, a + 500)
            engine.ingest_many(NoteBatch(
                [f"n{i}" for i in rows], [f"{word} note {i % 7} about {i % 11}" for i in rows],
                [float(i) for i in rows], [{"i": i} for i in rows],
            ))  # fmt: skip

    ingest(0)
    before = _tracked()
    ingest(3_000)
    assert _tracked() - before < 100


class _Watching(LocalHashEmbedder):
    """local_hash that records, after a full collection, whether the collector still tracks the
    token sequences it is given."""

    tracked: list[bool]

    def _embed_words(self, texts: list[str], words: Sequence[Sequence[str]] | None) -> np.ndarray:
        gc.collect()
        self.tracked.extend(gc.is_tracked(w) for w in words or ())
        return super()._embed_words(texts, words)


@pytest.mark.parametrize("text", ["zurich note", "苏黎世 note"])
def test_ingest_token_sequences_leave_the_collector(text: str) -> None:
    """The token sequences an ingest hands the embedder and the keyword index are ones the garbage
    collector stops tracking, so a batch's tokens alive through a collection are not promoted to
    the oldest generation, where each brings the next full collection nearer."""
    embedder = _Watching(dim=16)
    embedder.tracked = []
    engine = ContinuityEngine(InMemoryBackend(), embedder, FlatStructure(), DefaultStrategy())
    engine.ingest_many(NoteBatch(["a", "b"], [text, f"{text} two"], [1.0, 2.0], [{}, {}]))
    assert embedder.tracked == [False, False]
