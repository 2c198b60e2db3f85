"""One ranking across a prefix's namespaces before anything is resolved (coniti.engine.across): a
semantic ask over a prefix equals the merge of each namespace's own answer, resolves only the hits
it answers, and falls back to reading each namespace in turn when a chosen record vanished."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti import ContinuityEngine, Note, Query
from coniti.embedding import LocalHashEmbedder
from coniti.impl.log import LogBackend
from coniti.memory import GetRequest, GetResult
from coniti.recall import Hit
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure

EMBEDDER = LocalHashEmbedder(dim=32)
WORDS = ["budget", "kitchen", "holiday", "review", "plan", "garden"]
SPACES = [("a", "one"), ("a", "two"), ("b",)]


class Reads(LogBackend):
    """A log backend that counts the records its ``get`` returns (the real backend underneath)."""

    read = 0

    def get(self, request: GetRequest) -> GetResult:
        result = super().get(request)
        self.read += len(result.records)
        return result


def engine(path: Path) -> ContinuityEngine:
    return ContinuityEngine(Reads(path), EMBEDDER, [FlatStructure()], DefaultStrategy())


def merged_by_hand(e: ContinuityEngine, query: Query) -> list[tuple[object, ...]]:
    """Each namespace's own answer, merged by (score, newer, id, namespace), cut to k."""
    hits: list[Hit] = []
    for ns in SPACES:
        hits += e.ask(query, namespace=ns).hits
    hits.sort(key=lambda h: (-h.score, -h.note.timestamp, h.note.id, h.namespace))
    return [view(h, r) for r, h in enumerate(hits[: query.k], start=1)]


def view(h: Hit, rank: int | None = None) -> tuple[object, ...]:
    s = h.signals
    assert s is not None
    return (
        h.namespace,
        h.note.id,
        h.score,
        s.semantic,
        rank if rank is not None else s.ranks,
    )


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_prefix_ask_equals_the_merge_of_each_namespace(
    tmp_path_factory: object, data: st.DataObject
) -> None:
    """Hits (namespace, id, score, semantic signal) over a prefix are each namespace's own answer
    merged and cut to k, with the merged rank; with a ``min_score`` too. (The keyword signal of a
    prefix ask is scored against the prefix's merged corpus, not a namespace's own.)"""
    e = engine(tmp_path_factory.mktemp("across"))  # type: ignore[attr-defined]
    n = 0
    for ns in SPACES:
        count = data.draw(st.integers(0, 8))
        e.ingest_many(
            [
                Note(
                    id=f"n{n + i:03}",
                    text=" ".join(
                        data.draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
                    ),
                    timestamp=float(data.draw(st.integers(0, 5))),
                )
                for i in range(count)
            ],
            namespace=ns,
        )
        n += count
    floor = data.draw(st.sampled_from([None, 0.0, 0.3]))
    query = Query(
        text=data.draw(st.sampled_from(WORDS)),
        k=data.draw(st.integers(1, 7)),
        strategy="semantic",
        min_score=floor,
    )
    got = [
        (
            h.namespace,
            h.note.id,
            h.score,
            h.signals.semantic,
            h.signals.ranks["semantic"],
        )
        for h in e.ask(query, prefix=()).hits
    ]  # type: ignore[union-attr]
    assert got == merged_by_hand(e, query)


def test_a_prefix_ask_resolves_only_the_hits_it_answers(tmp_path: Path) -> None:
    """A semantic ask over three namespaces reads k records from memory, not k per namespace."""
    e = engine(tmp_path)
    memory = e.memory
    assert isinstance(memory, Reads)
    for j, ns in enumerate(SPACES):
        e.ingest_many(
            [Note(id=f"n{j}-{i}", text=f"budget plan {i}", timestamp=float(i)) for i in range(30)],
            namespace=ns,
        )
    memory.read = 0
    hits = e.ask(Query(text="budget plan", k=5, strategy="semantic"), prefix=()).hits
    assert len(hits) == 5
    assert memory.read == 5


def test_a_vanished_record_is_left_out_and_the_next_one_answers(tmp_path: Path) -> None:
    """When another handle deleted the best hit and this engine has not refreshed, the prefix ask
    leaves it out and still answers k hits: those of the ranking without it."""
    e = engine(tmp_path)
    for j, ns in enumerate(SPACES):
        e.ingest_many(
            [
                Note(id=f"n{j}-{i}", text=f"budget plan {i} {'x' * i}", timestamp=float(i))
                for i in range(6)
            ],
            namespace=ns,
        )
    query = Query(text="budget plan", k=4, strategy="semantic")
    before = e.ask(query.model_copy(update={"k": 5}), prefix=()).hits
    other = ContinuityEngine(LogBackend(tmp_path), EMBEDDER, [FlatStructure()], DefaultStrategy())
    other.remove([before[0].note.id], namespace=before[0].namespace)
    other.close()
    after = e.ask(query, prefix=()).hits
    assert [(h.namespace, h.note.id) for h in after] == [
        (h.namespace, h.note.id) for h in before[1:]
    ]
