"""One scoring pass over the rows of every namespace of a prefix (coniti.engine.across.one_pass,
coniti.structure.across.top_across; filtered: coniti.engine.where.first_of): a semantic ask over a
prefix of ``flat`` or ``segment_tree`` namespaces answers what each namespace's own search, merged,
answers (deleted and updated rows, buffered rows, time ranges, ties across namespaces), and any
other ask or structure takes one search per namespace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti import ContinuityEngine, Note, Query, TimeRange
from coniti.embedding import LocalHashEmbedder
from coniti.engine import across, where
from coniti.engine.recall import Scope
from coniti.filters import compile_record_filter
from coniti.impl.log import LogBackend
from coniti.recall import Hit
from coniti.strategy import DefaultStrategy
from coniti.structure import AnnStructure, FlatStructure, SegmentTreeStructure, Structure

EMBEDDER = LocalHashEmbedder(dim=32)
WORDS = ["budget", "kitchen", "holiday", "review", "plan", "garden"]
SPACES = [("a", "one"), ("a", "two"), ("b",)]


def structure(kind: str) -> Structure:
    if kind == "flat":
        return FlatStructure(buffer_min=3, buffer_fraction=0.5)
    return SegmentTreeStructure(leaf_size=2, direct_rows=2, buffer_min=3, buffer_fraction=0.5)


def engine(path: Path, first: Structure) -> ContinuityEngine:
    return ContinuityEngine(LogBackend(path), EMBEDDER, [first], DefaultStrategy())


def merged_by_hand(e: ContinuityEngine, query: Query) -> list[tuple[object, ...]]:
    """Each namespace's own answer (its structure's search), merged by (score, newer, id,
    namespace), cut to k, with the merged rank."""
    hits: list[Hit] = []
    for ns in SPACES:
        hits += e.ask(query, namespace=ns).hits
    hits.sort(key=lambda h: (-h.score, -h.note.timestamp, h.note.id, h.namespace))
    return [view(h, r) for r, h in enumerate(hits[: query.k], start=1)]


def view(h: Hit, rank: int) -> tuple[object, ...]:
    assert h.signals is not None
    return (h.namespace, h.note.id, h.note.timestamp, h.score, h.signals.semantic, rank)


def answered(e: ContinuityEngine, query: Query) -> list[tuple[object, ...]]:
    out = []
    for h in e.ask(query, prefix=()).hits:
        assert h.signals is not None
        out.append(view(h, h.signals.ranks["semantic"]))
    return out


def scopes(e: ContinuityEngine) -> list[Scope]:
    return [Scope.of(ns, e._indexes.get(ns)) for ns in SPACES]


def vector(text: str) -> np.ndarray:
    out: np.ndarray = EMBEDDER.embed([text])[0]
    return out


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), kind=st.sampled_from(["flat", "segment_tree"]))
def test_one_pass_equals_the_merge_of_each_namespaces_search(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, kind: str
) -> None:
    """Over notes written out of time order (buffered rows, merges), some removed, some updated
    (the old row ended, a new one added), the same ids in several namespaces (ties decided by the
    namespace), with or without a time range and a ``min_score``: the prefix ask, answered by one
    pass, gives each namespace's own answer merged and cut to k (namespace, id, time, score,
    semantic signal, merged rank)."""
    e = engine(tmp_path_factory.mktemp("pass"), structure(kind))
    for ns in SPACES:
        count = data.draw(st.integers(0, 10))
        ids = data.draw(st.lists(st.integers(0, 12), min_size=count, max_size=count, unique=True))
        notes = [
            Note(
                id=f"n{i:03}",
                text=" ".join(data.draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)))
                + f" {i}",  # distinct within a namespace (no duplicate refused); may tie across
                timestamp=float(data.draw(st.integers(0, 6))),
            )
            for i in ids
        ]
        half = len(notes) // 2
        for part in (notes[:half], notes[half:]):
            if part:
                e.ingest_many(part, namespace=ns)
        gone = data.draw(st.lists(st.sampled_from(ids), unique=True, max_size=3)) if ids else []
        if gone:
            e.remove([f"n{i:03}" for i in gone], namespace=ns)
        for i in [i for i in ids if i not in gone][:2]:
            if data.draw(st.booleans()):
                e.update(f"n{i:03}", text=data.draw(st.sampled_from(WORDS)) + " new", namespace=ns)
    window = data.draw(
        st.sampled_from([None, TimeRange(start=2.0), TimeRange(end=4.0), TimeRange(start=1.0, end=3.0)])
    )
    query = Query(
        text=data.draw(st.sampled_from(WORDS)),
        k=data.draw(st.integers(1, 7)),
        strategy="semantic",
        time_range=window,
        min_score=data.draw(st.sampled_from([None, 0.2])),
    )
    passed = across.one_pass(scopes(e), query, vector(query.text or ""), e.strategy, query.k)
    assert passed is not None  # the one pass answers this ask
    assert answered(e, query) == merged_by_hand(e, query)
    e.close()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), kind=st.sampled_from(["flat", "segment_tree"]))
def test_a_filtered_prefix_ask_scored_as_one_equals_the_merge_of_each_namespace(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, kind: str
) -> None:
    """With ``user == X`` over notes written out of time order, some removed, some updated, with or
    without a time range: the prefix ask (each namespace's matching rows gathered, then scored as
    one by ``where.first_of``) gives each namespace's own filtered answer merged and cut to k."""
    e = engine(tmp_path_factory.mktemp("where"), structure(kind))
    for ns in SPACES:
        ids = data.draw(st.lists(st.integers(0, 12), max_size=10, unique=True))
        notes = [
            Note(
                id=f"n{i:03}",
                text=" ".join(data.draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))) + f" {i}",
                timestamp=float(data.draw(st.integers(0, 6))),
                metadata={"user": data.draw(st.sampled_from(["ada", "bob"]))},
            )
            for i in ids
        ]
        for part in (notes[: len(notes) // 2], notes[len(notes) // 2 :]):
            if part:
                e.ingest_many(part, namespace=ns)
        gone = data.draw(st.lists(st.sampled_from(ids), unique=True, max_size=3)) if ids else []
        if gone:
            e.remove([f"n{i:03}" for i in gone], namespace=ns)
        for i in [i for i in ids if i not in gone][:2]:
            if data.draw(st.booleans()):
                e.update(f"n{i:03}", text=data.draw(st.sampled_from(WORDS)) + " new", namespace=ns)
    query = Query(
        text=data.draw(st.sampled_from(WORDS)),
        k=data.draw(st.integers(1, 7)),
        strategy="semantic",
        filter={"user": "ada"},
        time_range=data.draw(st.sampled_from([None, TimeRange(start=2.0), TimeRange(end=4.0)])),
    )
    found = [
        where.prefiltered(query, vector(query.text or ""), s.namespace, s.index, e.memory, compile_record_filter(query.filter))
        for s in scopes(e)
    ]
    assert where.first_of(found, query.k) is not None  # scored as one
    assert answered(e, query) == merged_by_hand(e, query)
    e.close()


def test_one_pass_breaks_a_tie_across_namespaces_by_the_namespace(tmp_path: Path) -> None:
    """The same note (id, text, time) in three namespaces scores the same everywhere: the prefix
    ask answers it in the namespaces' order, as the per-namespace merge does."""
    e = engine(tmp_path, FlatStructure())
    for ns in reversed(SPACES):
        e.ingest_many([Note(id="same", text="budget plan", timestamp=1.0)], namespace=ns)
    hits = e.ask(Query(text="budget plan", k=2, strategy="semantic"), prefix=()).hits
    assert [h.namespace for h in hits] == sorted(SPACES)[:2]
    e.close()


def test_one_pass_reads_rows_restored_from_a_snapshot(tmp_path: Path) -> None:
    """After a reopen (the rows memory mapped from the snapshot, checked on first read), the prefix
    ask by one pass answers what it answered before the close."""
    e = engine(tmp_path, FlatStructure())
    for j, ns in enumerate(SPACES):
        e.ingest_many(
            [Note(id=f"n{j}-{i}", text=f"{WORDS[i % 6]} plan {i}", timestamp=float(i)) for i in range(40)],
            namespace=ns,
        )
    query = Query(text="garden plan", k=6, strategy="semantic")
    before = answered(e, query)
    e.persist()
    e.close()
    again = engine(tmp_path, FlatStructure())
    assert answered(again, query) == before == merged_by_hand(again, query)
    again.close()


@pytest.mark.parametrize(
    "change",
    ["near", "filter", "ann", "strategy"],
)
def test_other_asks_and_structures_take_one_search_per_namespace(tmp_path: Path, change: str) -> None:
    """``one_pass`` declines (None) an ask with ``near`` or a filter, a namespace whose first
    structure is ``ann``, and a strategy that answers its own way; the ask still answers what each
    namespace's search, merged, answers."""
    first: Structure = AnnStructure() if change == "ann" else FlatStructure()

    class Own(DefaultStrategy):
        def answer(self, query, vector, context):  # type: ignore[no-untyped-def]
            return super().answer(query, vector, context)

    strategy = Own() if change == "strategy" else DefaultStrategy()
    e = ContinuityEngine(LogBackend(tmp_path), EMBEDDER, [first], strategy)
    for j, ns in enumerate(SPACES):
        e.ingest_many(
            [Note(id=f"n{j}-{i}", text=f"{WORDS[i % 6]} plan {i}", timestamp=float(i)) for i in range(8)],
            namespace=ns,
        )
    update: dict[str, object] = {}
    if change == "near":
        update = {"near": "n0-1"}
    elif change == "filter":
        update = {"filter": {"missing": None}}
    query = Query(text="kitchen plan", k=4, strategy="semantic").model_copy(update=update)
    assert across.one_pass(scopes(e), query, vector("kitchen plan"), e.strategy, 4) is None
    if change in ("ann", "strategy"):
        assert answered(e, query) == merged_by_hand(e, query)
    e.close()


def test_a_past_engine_asks_each_namespace_as_of_its_event(tmp_path: Path) -> None:
    """An engine as of an earlier event (its structures views masked by that event, which the one
    pass does not read) answers a prefix ask from the rows live then: notes removed since are
    still found, notes written since are not, as each namespace's own past answer merged."""
    e = engine(tmp_path, FlatStructure())
    for j, ns in enumerate(SPACES):
        e.ingest_many(
            [Note(id=f"n{j}-{i}", text=f"{WORDS[i % 6]} plan {i}", timestamp=float(i)) for i in range(8)],
            namespace=ns,
        )
    query = Query(text="garden plan", k=4, strategy="semantic")
    before = answered(e, query)
    seq = e._indexes.get(SPACES[0]).seq  # every namespace is current: the last event so far
    assert seq is not None
    e.remove([str(before[0][1])], namespace=before[0][0])  # type: ignore[arg-type]
    e.ingest_many([Note(id="late", text="garden plan", timestamp=9.0)], namespace=SPACES[0])
    past = e.at(seq)
    assert answered(past, query) == before == merged_by_hand(past, query)
    assert across.one_pass(scopes(past), query, vector("garden plan"), e.strategy, 4) is None
    e.close()


def test_one_pass_ranks_a_long_note_by_its_best_passage(tmp_path: Path) -> None:
    """With an embedder that splits long notes into passages (minilm), the prefix ask by one pass
    ranks each long note at its best passage row, once, as each namespace's own answer merged:
    the note whose answer sits past its first passage comes first; when the best rows are a few
    notes' passages, the pass goes deeper until it holds k notes."""
    from coniti.minilm import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    e = ContinuityEngine(LogBackend(tmp_path), embedder, [FlatStructure()], DefaultStrategy())
    filler = " ".join(f"Meeting notes item {i} about the quarterly logistics schedule." for i in range(60))
    fruits = ["mango", "apple", "pear"]
    for j, ns in enumerate(SPACES):
        e.ingest_many(
            [
                Note(id=f"long{j}", text=f"{filler} Ada's favourite fruit is the {fruits[j]}.", timestamp=1.0),
                Note(id=f"long{j}b", text=f"{filler} The van leaves at {j + 6} o'clock.", timestamp=2.0),
                *[Note(id=f"s{j}-{i}", text=f"Shipping forms for warehouse {i}.", timestamp=3.0) for i in range(3)],
            ],
            namespace=ns,
        )
    query = Query(text="Which fruit does Ada like?", k=4, strategy="semantic")
    got = answered(e, query)
    assert got == merged_by_hand(e, query)
    assert str(got[0][1]).startswith("long") and not str(got[0][1]).endswith("b")
    assert len({(g[0], g[1]) for g in got}) == len(got)  # each note once
    passed = across.one_pass(scopes(e), query, embedder.embed([query.text or ""])[0], e.strategy, 4)
    assert passed is not None
    # the best rows all passages of the six long notes: eight notes need a deeper pass
    wide = Query(text="meeting notes about the quarterly logistics schedule", k=8, strategy="semantic")
    got = answered(e, wide)
    assert got == merged_by_hand(e, wide)
    assert len(got) == 8 and len({(g[0], g[1]) for g in got}) == 8
    e.close()
