"""Reopen + first ask over several namespaces (issue 33): the namespaces restored from their
snapshots are caught up together, in one pass over the events written after them
(``FoldedIndexes.get_many``), and answer as a fresh build of the log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers_derived import flip_byte

from coniti import ContinuityEngine, Note, Query, derived
from coniti.embedding import LocalHashEmbedder
from coniti.impl.log import LogBackend
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure

EMBEDDER = LocalHashEmbedder(dim=32)
WORDS = ["budget", "lunch", "gym", "ana", "bob", "report", "trip", "code", "plan", "tea"]
SPACES = [("a",), ("b",), ("c", "d")]
QUERIES = [Query(text="budget plan", k=6, strategy="semantic"), Query(text="gym tea", k=6, strategy="hybrid")]


def engine(store: LogBackend, structure: FlatStructure | None = None) -> ContinuityEngine:
    return ContinuityEngine(store, EMBEDDER, [structure or FlatStructure()], DefaultStrategy())


def fresh(store: LogBackend) -> ContinuityEngine:
    return ContinuityEngine(store.at(None), EMBEDDER, [FlatStructure()], DefaultStrategy(), read_only=True)


def notes(n: int, start: int = 0) -> list[Note]:
    return [
        Note(id=f"n{i}", text=f"{WORDS[i % 10]} {WORDS[(i * 7) % 10]} item {i}", timestamp=float(i))
        for i in range(start, start + n)
    ]


def answers(e: ContinuityEngine) -> list[list[tuple[str, tuple[str, ...], float]]]:
    return [[(h.note.id, tuple(h.namespace), h.score) for h in e.ask(q, prefix=()).hits] for q in QUERIES]


def written(store: LogBackend, structure: FlatStructure | None = None) -> None:
    """Notes in three namespaces, snapshots saved at different points, then writes after them in
    each (puts, an update, a delete), taking turns."""
    e = engine(store, structure)
    for j, ns in enumerate(SPACES):
        e.ingest_many(notes(30, 100 * j), namespace=ns)
        e.persist()  # each namespace's snapshot at its own seq
    for j, ns in enumerate(SPACES):
        e.ingest_many(notes(3, 100 * j + 50), namespace=ns)
    e.update("n1", text="budget budget plan", namespace=SPACES[0])
    e.remove(["n102"], namespace=SPACES[1])
    e.ingest_many(notes(2, 260), namespace=SPACES[2])
    e.close()


def test_a_reopened_ask_over_every_namespace_equals_a_rebuild_and_reads_the_feed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first ask over every namespace after a reopen restores each snapshot, folds the events
    after them in one pass of the feed (not one per namespace), and answers as a fresh build."""
    with LogBackend(tmp_path / "s") as store:
        written(store)
        reads: list[Any] = []
        original = LogBackend.events

        def spy(self: LogBackend, after: int = 0, **kw: Any) -> Any:
            if kw.get("until") != after + 1:  # not the one-event read of a snapshot's event hash
                reads.append((after, kw.get("namespace")))
            return original(self, after, **kw)

        monkeypatch.setattr(LogBackend, "events", spy)
        reopened = engine(store)
        got = answers(reopened)
        monkeypatch.undo()
        assert len(reads) == 1 and reads[0][1] is None and reads[0][0] > 0, reads
        assert got == answers(fresh(store))
        assert reopened.verify().ok


def damaged(path: Path, monkeypatch: pytest.MonkeyPatch, structure: FlatStructure | None = None) -> LogBackend:
    """The store of :func:`written` with snapshots of 200-byte checksum blocks, one bit of the
    first vector block of each flipped (a deferred check: found when the rows are first read)."""
    monkeypatch.setattr(derived, "CRC_BLOCK", 200)
    store = LogBackend(path)
    written(store, structure)
    monkeypatch.undo()
    for manifest in sorted(Path(store.derived_path).glob("*.json")):
        flip_byte(manifest, "structure.0/vecs", 5)
    return store


def test_damaged_vector_blocks_in_every_namespace_are_all_rebuilt_by_one_ask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ask over every namespace whose snapshots each hold a damaged vector block (found when
    the search reads it, one namespace after another) answers as a fresh build: each failure
    heals that namespace and the ask goes on (before: StaleSnapshot after the first heal)."""
    with damaged(tmp_path / "s", monkeypatch) as store:
        reopened = engine(store)
        assert answers(reopened) == answers(fresh(store))
        assert reopened.verify().ok

