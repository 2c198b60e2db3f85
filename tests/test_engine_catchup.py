"""The catch-up before a write (coniti.engine.fold): a write to one namespace moves every other
loaded namespace that was current past its events, so the next write there reads no event; events
another handle wrote are still folded in."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from coniti import ContinuityEngine, Note, Query
from coniti.embedding import LocalHashEmbedder
from coniti.events import Event
from coniti.impl.log import LogBackend
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure

EMBEDDER = LocalHashEmbedder(dim=32)


class Feeds(LogBackend):
    """A log backend that counts the calls of its event feed (the real backend underneath)."""

    calls = 0

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


def engine(memory: LogBackend) -> ContinuityEngine:
    return ContinuityEngine(memory, EMBEDDER, [FlatStructure()], DefaultStrategy())


def note(i: int) -> Note:
    return Note(id=f"n{i}", text=f"budget plan {i}", timestamp=float(i))


def test_writes_taking_turns_across_namespaces_read_no_event(tmp_path: Path) -> None:
    """Once each namespace was written, batches taking turns over them fold no event before each
    write: the events of the other namespaces are never read again."""
    memory = Feeds(tmp_path)
    e = engine(memory)
    spaces = [("a",), ("b",), ("c",)]
    for j, ns in enumerate(spaces):
        e.ingest(note(j), namespace=ns)
    memory.calls = 0
    for i in range(3, 30):
        e.ingest(note(i), namespace=spaces[i % 3])
    e.remove(["n3"], namespace=("a",))
    e.ingest(note(30), namespace=("b",))
    assert memory.calls == 0


def test_a_write_by_another_handle_is_still_folded_in(tmp_path: Path) -> None:
    """Another handle's write to ``a`` between this engine's writes to ``b`` and ``a``: the write
    to ``a`` folds it, and ``a`` answers both notes, as a fresh engine does."""
    e = engine(LogBackend(tmp_path))
    e.ingest(note(0), namespace=("a",))
    e.ingest(note(1), namespace=("b",))
    other = engine(LogBackend(tmp_path))
    other.ingest(note(2), namespace=("a",))
    other.close()
    e.ingest(note(3), namespace=("b",))
    e.ingest(note(4), namespace=("a",))
    query = Query(text="budget plan", k=10, strategy="semantic")
    got = sorted(h.note.id for h in e.ask(query, namespace=("a",)).hits)
    assert got == ["n0", "n2", "n4"]
    fresh = engine(LogBackend(tmp_path))
    assert [h.note.id for h in fresh.ask(query, prefix=()).hits] == [
        h.note.id for h in e.ask(query, prefix=()).hits
    ]


def test_updates_taking_turns_across_namespaces_read_no_event(tmp_path: Path) -> None:
    """Updates taking turns over namespaces never read the feed: each update's own record is
    folded in from what memory reported (``write_changes``), and the catch-up before the next
    update elsewhere reads no event; every namespace then answers as a fresh engine does."""
    memory = Feeds(tmp_path)
    e = engine(memory)
    spaces = [("a",), ("b",), ("c",)]
    for i in range(9):
        e.ingest(note(i), namespace=spaces[i % 3])
    memory.calls = 0
    for i in range(9):
        e.update(f"n{i}", text=f"revised forecast {i}", namespace=spaces[i % 3])
    assert memory.calls == 0
    query = Query(text="revised forecast", k=10, strategy="semantic")
    fresh = engine(LogBackend(tmp_path))
    for ns in spaces:
        assert [(h.note.id, h.note.text) for h in e.ask(query, namespace=ns).hits] == [
            (h.note.id, h.note.text) for h in fresh.ask(query, namespace=ns).hits
        ]



def test_the_first_write_to_a_new_namespace_reads_no_event(tmp_path: Path) -> None:
    """A namespace nothing was ever written to is loaded without reading the feed (the log says
    so: ``written``), though other namespaces hold events and a clear names it."""
    memory = Feeds(tmp_path)
    e = engine(memory)
    for i in range(5):
        e.ingest(note(i), namespace=("a",))
    memory.clear(memory.clear_request(("b",)))
    assert not memory.written(("b",)) and memory.written(("a",))
    memory.calls = 0
    e.ingest(note(5), namespace=("b",))
    assert memory.calls == 0
    assert memory.written(("b",))


def test_a_new_namespace_loaded_without_a_fold_equals_a_refold(tmp_path: Path) -> None:
    """The index of a namespace first written after other namespaces' events (and a clear of it)
    equals a fold of every event (``verify``), and answers as a fresh engine does."""
    memory = LogBackend(tmp_path)
    e = engine(memory)
    for i in range(6):
        e.ingest(note(i), namespace=("a",))
    memory.clear(memory.clear_request(("b",)))
    e.ingest_many([note(i) for i in range(6, 9)], namespace=("b",))
    e.remove(["n7"], namespace=("b",))
    report = e.verify(namespace=("b",))
    assert report.ok, report.problems
    assert report.rows == 2
    query = Query(text="budget plan", k=10, strategy="semantic")
    fresh = engine(LogBackend(tmp_path))
    for ns in (("a",), ("b",)):
        assert [h.note.id for h in e.ask(query, namespace=ns).hits] == [
            h.note.id for h in fresh.ask(query, namespace=ns).hits
        ]
