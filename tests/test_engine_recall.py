"""The engine's recall surface: prefix scopes, metadata filters, min_score, context blocks, async twins."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti import ContinuityEngine, Note, Query, TimeRange
from coniti.embedding import LocalHashEmbedder
from coniti.errors import AnchorNotFound, ContractError
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.memory import MemoryBackend
from coniti.recall import ContextBlock, Hit, to_context_block
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure, SegmentTreeStructure

EMBEDDER = LocalHashEmbedder(dim=64)

WORK = ("alice", "work")
HOME = ("alice", "personal")
BOB = ("bob", "home")


def engine(memory: MemoryBackend | None = None) -> ContinuityEngine:
    return ContinuityEngine(
        memory if memory is not None else InMemoryBackend(),
        EMBEDDER,
        [FlatStructure(), SegmentTreeStructure(leaf_size=2)],
        DefaultStrategy(),
    )


def filled(memory: MemoryBackend | None = None) -> ContinuityEngine:
    e = engine(memory)
    e.ingest_many(
        [
            Note(id="w1", text="Alice leads the budget review", timestamp=10.0, metadata={"kind": "task"}),
            Note(id="w2", text="Alice approved the budget", timestamp=20.0, metadata={"kind": "fact"}),
        ],
        namespace=WORK,
    )
    e.ingest_many(
        [
            Note(id="p1", text="Alice plans a holiday budget", timestamp=30.0, metadata={"kind": "fact"}),
            Note(id="p2", text="Alice cooks on Sundays", timestamp=40.0, metadata={"kind": "habit"}),
        ],
        namespace=HOME,
    )
    e.ingest(Note(id="b1", text="Bob's budget for the kitchen", timestamp=50.0), namespace=BOB)
    return e


def ranked(e: ContinuityEngine, query: Query | str, **scope: object) -> list[tuple[tuple[str, ...], str]]:
    return [(h.namespace, h.note.id) for h in e.ask(query, **scope).hits]  # type: ignore[arg-type]


# -- prefix scopes ---------------------------------------------------------------------------------


def test_prefix_ranks_across_every_namespace_under_it() -> None:
    """ask(prefix=("alice",)) answers from alice/work and alice/personal in one ranking, not bob."""
    e = filled()
    hits = ranked(e, Query(text="budget", k=10), prefix=("alice",))
    assert {ns for ns, _ in hits} == {WORK, HOME}
    assert sorted(i for _, i in hits) == ["p1", "p2", "w1", "w2"]


def test_prefix_ranking_equals_the_merge_of_each_namespace() -> None:
    """The scoped semantic ranking is the per-namespace answers merged by score (then newer,
    then id). (Hybrid fuses once over every namespace: tests/test_hybrid_recall.py.)"""
    e = filled()
    query = Query(text="budget review", k=3, strategy="semantic")
    parts = [h for ns in (WORK, HOME) for h in e.ask(query, namespace=ns).hits]
    parts.sort(key=lambda h: (-h.score, -h.note.timestamp, h.note.id, h.namespace))

    def plain(hits: list[Hit]) -> list[tuple[str, tuple[str, ...], float, int | None]]:  # signals aside
        return [(h.note.id, h.namespace, h.score, h.version) for h in hits]

    assert plain(e.ask(query, prefix=("alice",)).hits) == plain(parts[:3])


def test_empty_prefix_spans_the_whole_store() -> None:
    """prefix=() answers from every live namespace."""
    e = filled()
    assert {ns for ns, _ in ranked(e, Query(text="budget", k=10), prefix=())} == {WORK, HOME, BOB}


def test_hits_name_their_namespace_in_a_single_namespace_ask_too() -> None:
    """Hit.namespace is the namespace asked when no prefix is given."""
    e = filled()
    assert {ns for ns, _ in ranked(e, "budget", namespace=BOB)} == {BOB}


def test_answer_records_the_prefix() -> None:
    """Answer.prefix is the prefix asked (None for a one-namespace ask)."""
    e = filled()
    assert e.ask("budget", prefix=("alice",)).prefix == ("alice",)
    assert e.ask("budget", namespace=WORK).prefix is None


def test_namespace_and_prefix_together_are_refused() -> None:
    """Giving both namespace and prefix is a ContractError."""
    with pytest.raises(ContractError, match="namespace or prefix"):
        filled().ask("budget", namespace=WORK, prefix=("alice",))


def test_near_with_a_prefix_is_refused() -> None:
    """An anchor belongs to one namespace: near with a prefix is a ContractError."""
    with pytest.raises(ContractError, match="near"):
        filled().ask(Query(near="w1"), prefix=("alice",))


def test_a_bad_prefix_names_prefix() -> None:
    """A prefix that is not a namespace is a ContractError naming prefix."""
    with pytest.raises(ContractError, match="prefix"):
        filled().ask("budget", prefix=("alice", ""))


def test_prefix_with_no_live_namespace_answers_nothing() -> None:
    """A prefix under which nothing is stored gives an empty answer, not an error."""
    assert filled().ask("budget", prefix=("carol",)).hits == []


def test_anchor_missing_in_its_namespace_still_raises() -> None:
    """near of an id not stored in the namespace asked raises AnchorNotFound as before."""
    with pytest.raises(AnchorNotFound):
        filled().ask(Query(near="w1"), namespace=HOME)


# -- filters and min_score -----------------------------------------------------------------------


def test_filter_keeps_only_matching_notes() -> None:
    """Query.filter answers only notes whose metadata matches it."""
    e = filled()
    hits = ranked(e, Query(text="budget", filter={"kind": "fact"}), prefix=("alice",))
    assert sorted(i for _, i in hits) == ["p1", "w2"]


def test_filter_with_operators_and_time_range() -> None:
    """Operators combine with a time range: kind in (task, habit) and timestamp >= 15."""
    e = filled()
    query = Query(time_range=TimeRange(start=15.0), filter={"kind": {"$in": ["task", "habit"]}})
    assert ranked(e, query, prefix=()) == [(HOME, "p2")]


def test_filter_finds_k_matches_beyond_the_first_candidates() -> None:
    """A selective filter still answers k matches even when they rank far below the top k."""
    e = engine()
    notes = [
        Note(id=f"n{i:03}", text=f"budget line {i}", timestamp=float(i), metadata={"rare": i % 50 == 0})
        for i in range(200)
    ]
    e.ingest_many(notes)
    hits = e.ask(Query(text="budget line", k=4, filter={"rare": True})).hits
    assert sorted(h.note.id for h in hits) == ["n000", "n050", "n100", "n150"]


def test_min_score_drops_weak_hits() -> None:
    """Hits below Query.min_score are dropped; those at or above it stay, in order."""
    e = filled()
    everything = e.ask(Query(text="budget review", k=10), namespace=WORK).hits
    cut = everything[0].score
    kept = e.ask(Query(text="budget review", k=10, min_score=cut), namespace=WORK).hits
    assert kept == [h for h in everything if h.score >= cut]
    assert kept and len(kept) < len(everything)


def test_bad_filter_and_min_score_are_contract_errors() -> None:
    """An unknown operator names it; a non-numeric min_score names the field."""
    with pytest.raises(ContractError, match=r"\$near"):
        Query(text="x", filter={"kind": {"$near": 1}})
    with pytest.raises(ContractError, match="min_score"):
        Query(text="x", min_score="high")  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=30),
    wanted=st.sampled_from(["a", "b", "c"]),
    k=st.integers(min_value=1, max_value=8),
)
def test_filtered_ask_equals_filtering_the_full_ranking(kinds: list[str], wanted: str, k: int) -> None:
    """A filtered ask is the unfiltered full ranking with non-matching notes removed, cut to k."""
    e = engine()
    e.ingest_many(
        [
            Note(id=f"n{i:02}", text=f"note {i} about {kind}", timestamp=float(i), metadata={"kind": kind})
            for i, kind in enumerate(kinds)
        ]
    )
    full = e.ask(Query(text="note about", k=len(kinds))).hits
    expected = [h for h in full if h.note.metadata["kind"] == wanted][:k]
    assert e.ask(Query(text="note about", k=k, filter={"kind": wanted})).hits == expected


# -- context blocks --------------------------------------------------------------------------------


def test_context_renders_the_answer_within_the_budget(tmp_path: Path) -> None:
    """engine.context is to_context_block of ask's hits, with the log's head as seq."""
    with LogBackend(tmp_path / "s") as store:
        e = filled(store)
        block = e.context("budget", token_budget=30, prefix=("alice",))
        hits = e.ask("budget", prefix=("alice",)).hits
        assert isinstance(block, ContextBlock)
        assert block == to_context_block(hits, 30, seq=store.head)
        assert block.omitted > 0 and "more omitted" in block.text


def test_context_is_reproduced_by_at_seq(tmp_path: Path) -> None:
    """After more writes, engine.at(block.seq).context(...) gives the same block again."""
    with LogBackend(tmp_path / "s") as store:
        e = filled(store)
        block = e.context("budget", token_budget=200, namespace=WORK)
        e.ingest(Note(id="w3", text="Alice moved the budget review", timestamp=60.0), namespace=WORK)
        assert e.context("budget", token_budget=200, namespace=WORK) != block
        assert block.seq is not None
        assert e.at(block.seq).context("budget", token_budget=200, namespace=WORK) == block


def test_context_on_a_backend_without_a_feed_has_no_seq() -> None:
    """Over the in-memory backend there is no memory point: seq is None."""
    assert filled().context("budget", token_budget=100).seq is None


def test_context_checks_the_budget_before_asking() -> None:
    """A bad token_budget is a ContractError naming it."""
    with pytest.raises(ContractError, match="token_budget"):
        filled().context("budget", token_budget=0)


# -- async twins -----------------------------------------------------------------------------------


def test_async_twins_equal_the_sync_calls() -> None:
    """aingest_many, aingest, aask, acontext and aremove give what their sync calls give."""
    sync, other = engine(), engine()
    notes = [Note(id=f"n{i}", text=f"budget item {i}", timestamp=float(i)) for i in range(5)]
    extra = Note(id="x", text="budget extra", timestamp=9.0)

    async def run() -> tuple[object, ...]:
        return (
            await other.aingest_many(notes, namespace=WORK),
            await other.aingest(extra, namespace=WORK),
            await other.aask("budget", prefix=("alice",)),
            await other.acontext("budget", token_budget=40, namespace=WORK),
            await other.aremove(["n1", "nope"], namespace=WORK),
            await other.aask("budget", namespace=WORK),
        )

    expected = (
        sync.ingest_many(notes, namespace=WORK),
        sync.ingest(extra, namespace=WORK),
        sync.ask("budget", prefix=("alice",)),
        sync.context("budget", token_budget=40, namespace=WORK),
        sync.remove(["n1", "nope"], namespace=WORK),
        sync.ask("budget", namespace=WORK),
    )
    assert asyncio.run(run()) == expected
