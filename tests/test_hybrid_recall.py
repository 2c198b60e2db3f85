"""Recall strategies through the engine: keyword, hybrid, recent, auto, signals, MMR and rerankers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from coniti import Container, Note, Query
from coniti.actor import TimeRange
from coniti.engine import ContinuityEngine
from coniti.errors import ContractError, UnknownPiece
from coniti.fusion import Fusion
from coniti.keyword import KeywordIndex, question_text
from coniti.recall import Hit
from coniti.rerank import RERANKERS, RerankerError

NOTES = [
    Note(id="inv", text="Invoice INV-2024-0042 was paid by ACME on Monday", timestamp=10.0),
    Note(id="zrh", text="我们下周在苏黎世见面", timestamp=20.0),
    Note(id="cat", text="the cat sat on the warm mat", timestamp=30.0),
    Note(id="dog", text="the dog slept on the warm rug", timestamp=40.0),
    Note(id="cat2", text="the cat sat on the warm mat again", timestamp=50.0),
]


@pytest.fixture
def engine() -> Iterator[ContinuityEngine]:
    with Container() as c:
        c.engine.ingest_many(NOTES)
        yield c.engine


def ids(hits: list[Hit]) -> list[str]:
    return [h.note.id for h in hits]


def test_keyword_strategy_finds_a_cjk_name(engine: ContinuityEngine) -> None:
    """ask '苏黎世' with strategy keyword scores the note holding it above zero, first."""
    hits = engine.ask(Query(text="苏黎世", strategy="keyword")).hits
    assert ids(hits) == ["zrh"] and hits[0].score > 0


def test_keyword_strategy_finds_an_invoice_number(engine: ContinuityEngine) -> None:
    """A literal code is found by its tokens."""
    assert ids(engine.ask(Query(text="INV-2024-0042", strategy="keyword")).hits)[0] == "inv"


def test_keyword_strategy_does_not_embed(engine: ContinuityEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A keyword query needs no embedding call."""
    monkeypatch.setattr(engine.embedder, "embed", lambda texts: pytest.fail("embedded"))
    assert engine.ask(Query(text="cat", strategy="keyword")).hits


def test_auto_with_text_is_hybrid(engine: ContinuityEngine) -> None:
    """The default strategy with text answers by hybrid fusion."""
    hits = engine.ask("warm mat").hits
    assert {h.signals.strategy for h in hits if h.signals} == {"hybrid"}


def test_auto_with_only_a_time_range_is_recent(engine: ContinuityEngine) -> None:
    """Without text or near, auto orders by time alone, newest first."""
    hits = engine.ask(Query(time_range=TimeRange(start=15.0, end=45.0))).hits
    assert ids(hits) == ["dog", "cat", "zrh"]
    assert hits[0].signals is not None and hits[0].signals.strategy == "recent"


def test_auto_with_near_is_semantic(engine: ContinuityEngine) -> None:
    """With an anchor, auto answers as the strategy's near search."""
    hits = engine.ask(Query(near="cat")).hits
    assert hits[0].signals is not None and hits[0].signals.strategy == "semantic"
    assert "cat" not in ids(hits)


def test_hybrid_finds_what_keyword_finds_when_semantic_misses(engine: ContinuityEngine) -> None:
    """A CJK question that the hash embedder cannot match still comes first in hybrid."""
    assert ids(engine.ask(Query(text="苏黎世", strategy="hybrid")).hits)[0] == "zrh"


def test_hybrid_signals_name_the_fused_ranks(engine: ContinuityEngine) -> None:
    """A hybrid hit fused by rank carries its semantic and keyword scores, its ranks in both and
    the fused score (the sum of its reciprocal ranks)."""
    query = Query(text="cat warm mat", strategy="hybrid", fusion=Fusion(method="rank"))
    hit = engine.ask(query).hits[0]
    sig = hit.signals
    assert sig is not None
    assert sig.ranks.keys() == {"semantic", "keyword"}
    assert sig.semantic is not None and sig.keyword is not None and sig.keyword > 0
    assert sig.fused == hit.score == pytest.approx(
        1 / (60 + sig.ranks["semantic"]) + 1 / (60 + sig.ranks["keyword"])
    )


def test_hybrid_score_fusion_adds_cosine_and_relative_bm25(engine: ContinuityEngine) -> None:
    """Fused by score, a hit scores (semantic x cosine + keyword x BM25 / scale) / (semantic +
    keyword), with no date named and no feedback, where scale is the larger of the best BM25 of the
    candidates and 0.2 of the question's BM25 ceiling."""
    fusion = Fusion(method="score", semantic=1.0, keyword=1.0)
    hits = engine.ask(Query(text="cat warm mat", strategy="hybrid", k=5, fusion=fusion)).hits
    ceiling = engine.keyword_index().ceiling(question_text("cat warm mat"))
    best = max(max(h.signals.keyword or 0.0 for h in hits if h.signals), 0.2 * ceiling)
    for hit in hits:
        sig = hit.signals
        assert sig is not None and sig.semantic is not None and sig.keyword is not None
        assert hit.score == sig.fused == pytest.approx((sig.semantic + sig.keyword / best) / 2)


def test_auto_fuses_by_rank_over_plain_notes_and_by_score_over_turns(engine: ContinuityEngine) -> None:
    """Fusion(method='auto'): the plain notes of the fixture fuse by reciprocal rank; once the
    namespace holds a conversation turn (a note with a session), by score."""
    hit = engine.ask(Query(text="cat warm mat", strategy="hybrid")).hits[0]
    assert hit.signals is not None and hit.signals.date is None
    assert hit.score == pytest.approx(sum(1 / (60 + r) for r in hit.signals.ranks.values()))
    engine.ingest(Note(id="turn", text="Ana: the cat likes the mat", timestamp=60.0, metadata={"session": 1}))
    hit = engine.ask(Query(text="cat warm mat", strategy="hybrid")).hits[0]
    assert hit.signals is not None and hit.signals.date == 0.0 and hit.score > 0.1


def test_semantic_strategy_scores_are_cosines(engine: ContinuityEngine) -> None:
    """strategy semantic gives the structures' cosine scores; the keyword signal is filled in."""
    hits = engine.ask(Query(text="cat mat", strategy="semantic")).hits
    assert all(h.signals and h.signals.semantic == h.score for h in hits)
    assert all(h.signals and h.signals.keyword is not None for h in hits)


def test_recent_ignores_feedback_and_text(engine: ContinuityEngine) -> None:
    """recent orders by time alone: text does not matter and feedback does not reorder it."""
    engine.improve("inv", 100.0)
    assert ids(engine.ask(Query(text="invoice", strategy="recent", k=5)).hits) == [
        "cat2", "dog", "cat", "zrh", "inv",
    ]


def test_feedback_moves_a_hybrid_hit_up(engine: ContinuityEngine) -> None:
    """Positive feedback on the second hybrid hit makes it first; its signal shows the weight."""
    before = engine.ask(Query(text="cat warm", strategy="hybrid")).hits
    second = before[1].note.id
    engine.improve(second, 1.0)
    after = engine.ask(Query(text="cat warm", strategy="hybrid")).hits
    assert after[0].note.id == second
    assert after[0].signals is not None and after[0].signals.feedback == 1.0


def test_feedback_weight_zero_in_fusion_ignores_feedback(engine: ContinuityEngine) -> None:
    """Fusion(feedback=0) gives the ranking without feedback."""
    query = Query(text="cat warm", strategy="hybrid", fusion=Fusion(feedback=0.0))
    before = ids(engine.ask(query).hits)
    engine.improve(before[-1], 5.0)
    assert ids(engine.ask(query).hits) == before


def test_recency_weight_brings_newer_notes_up(engine: ContinuityEngine) -> None:
    """With a heavy recency weight, the newer of two equal texts leads, and recency is a fused rank."""
    hits = engine.ask(Query(text="cat sat mat", strategy="hybrid", fusion=Fusion(recency=5.0))).hits
    assert hits[0].note.id == "cat2"
    assert hits[0].signals is not None and "recency" in hits[0].signals.ranks


def test_the_same_query_gives_the_same_answer(engine: ContinuityEngine) -> None:
    """Hybrid with MMR is deterministic: asking twice gives equal answers."""
    query = Query(text="the warm cat", strategy="hybrid", mmr=0.5)
    assert engine.ask(query) == engine.ask(query)


def test_mmr_moves_a_near_duplicate_down(engine: ContinuityEngine) -> None:
    """'cat2' nearly repeats 'cat': with a low lambda the second hit is not the duplicate."""
    plain = ids(engine.ask(Query(text="cat sat on the warm mat", strategy="semantic", k=3)).hits)
    assert plain[:2] == ["cat", "cat2"] or plain[:2] == ["cat2", "cat"]
    diverse = ids(engine.ask(Query(text="cat sat on the warm mat", strategy="semantic", k=3, mmr=0.2)).hits)
    assert diverse[0] == plain[0] and diverse[1] not in ("cat", "cat2")


def test_mmr_with_lambda_one_keeps_the_order(engine: ContinuityEngine) -> None:
    """mmr=1 is relevance alone: the same hits as without MMR."""
    query = Query(text="warm cat", strategy="semantic", k=4)
    assert ids(engine.ask(query.model_copy(update={"mmr": 1.0})).hits) == ids(engine.ask(query).hits)


def test_mmr_is_refused_for_recent() -> None:
    """Nothing reorders recent: Query(strategy='recent', mmr=...) is a contract error."""
    with pytest.raises(ContractError, match="mmr"):
        Query(time_range=TimeRange(start=0), mmr=0.5)


def test_keyword_without_text_is_refused() -> None:
    """strategy keyword needs text."""
    with pytest.raises(ContractError, match="keyword"):
        Query(time_range=TimeRange(start=0), strategy="keyword")


def test_an_unknown_strategy_is_refused() -> None:
    """Query.strategy is one of the five names."""
    with pytest.raises(ContractError, match="strategy"):
        Query(text="x", strategy="bm25")  # type: ignore[arg-type]


def test_keyword_index_follows_removals(engine: ContinuityEngine) -> None:
    """A removed note is no longer a keyword hit."""
    engine.remove(["inv"])
    assert engine.ask(Query(text="INV-2024-0042", strategy="keyword")).hits == []


def test_keyword_index_follows_updates(engine: ContinuityEngine) -> None:
    """After update, the new text is found and the old one is not."""
    engine.update("inv", text="Invoice INV-2025-0001 is open")
    assert ids(engine.ask(Query(text="INV-2025-0001", strategy="keyword")).hits) == ["inv"]
    assert ids(engine.ask(Query(text="ACME", strategy="keyword")).hits) == []


def test_keyword_options_reach_every_namespace() -> None:
    """Container(keyword=KeywordIndex(k1=..., b=...)) sets each namespace's index options."""
    with Container(keyword=KeywordIndex(k1=0.0, b=0.0)) as c:
        c.engine.ingest_many([Note(id="a", text="apple apple apple", timestamp=1.0)], namespace=("x",))
        c.engine.ingest_many([Note(id="b", text="pear", timestamp=1.0)], namespace=("x",))
        hit = c.engine.ask(Query(text="apple", strategy="keyword"), namespace=("x",)).hits[0]
        import math

        assert hit.score == pytest.approx(math.log(1 + 1.5 / 1.5))


def test_keyword_across_namespaces_with_a_prefix(engine: ContinuityEngine) -> None:
    """A prefix query merges keyword hits of every namespace under it."""
    engine.ingest(Note(id="inv-b", text="copy of INV-2024-0042", timestamp=5.0), namespace=("bob",))
    found = engine.ask(Query(text="INV-2024-0042", strategy="keyword"), prefix=()).hits
    assert {(h.namespace, h.note.id) for h in found} == {((), "inv"), (("bob",), "inv-b")}


# -- rerankers --------------------------------------------------------------------------------


class Reverse:
    name = "reverse"

    def rerank(self, query: Query, hits: list[Hit]) -> list[Hit]:
        return list(reversed(hits))


class Broken:
    name = "broken"

    def rerank(self, query: Query, hits: list[Hit]) -> list[Hit]:
        raise RuntimeError("model server down")


class Forger:
    name = "forger"

    def __init__(self, out: Any) -> None:
        self.out = out

    def rerank(self, query: Query, hits: list[Hit]) -> Any:
        return self.out(hits)


def test_a_reranker_reorders_the_candidates() -> None:
    """Container(reranker=...) applies it: the answer is the reranker's order, cut to k."""
    query = Query(text="warm cat", strategy="semantic", k=2)
    with Container() as plain:
        plain.engine.ingest_many(NOTES)
        first_stage = ids(plain.engine.ask(query.model_copy(update={"k": 5})).hits)
    with Container(reranker=Reverse()) as c:
        c.engine.ingest_many(NOTES)
        assert ids(c.engine.ask(query).hits) == list(reversed(first_stage))[:2]


def test_a_failing_reranker_is_an_error_not_a_fallback() -> None:
    """The reranker's exception propagates from ask."""
    with Container(reranker=Broken()) as c:
        c.engine.ingest_many(NOTES)
        with pytest.raises(RuntimeError, match="model server down"):
            c.engine.ask("warm cat")


def test_a_reranker_returning_a_foreign_hit_is_refused() -> None:
    """Every returned hit must be one it was given."""
    def forge(hits: list[Hit]) -> list[Hit]:
        return [hits[0].model_copy(update={"note": hits[0].note.model_copy(update={"id": "ghost"})})]

    with Container(reranker=Forger(forge)) as c:
        c.engine.ingest_many(NOTES)
        with pytest.raises(RerankerError, match="ghost"):
            c.engine.ask("warm cat")


def test_a_reranker_returning_a_hit_twice_is_refused() -> None:
    """No hit twice."""
    with Container(reranker=Forger(lambda hits: [hits[0], hits[0]])) as c:
        c.engine.ingest_many(NOTES)
        with pytest.raises(RerankerError, match="twice"):
            c.engine.ask("warm cat")


def test_a_reranker_returning_no_list_is_refused() -> None:
    """The result must be a list of hits."""
    with Container(reranker=Forger(lambda hits: None)) as c:
        c.engine.ingest_many(NOTES)
        with pytest.raises(RerankerError, match="NoneType"):
            c.engine.ask("warm cat")


def test_recent_is_never_reranked() -> None:
    """A reranker does not see recent queries."""
    with Container(reranker=Broken()) as c:
        c.engine.ingest_many(NOTES)
        assert ids(c.engine.ask(Query(time_range=TimeRange(start=0.0), k=2)).hits) == ["cat2", "dog"]


def test_the_built_in_reranker_is_registered_by_name() -> None:
    """Container(reranker='term_overlap') builds the registered reranker; it sees the text."""
    with Container(reranker="term_overlap") as c:
        c.engine.ingest_many(NOTES)
        hit = c.engine.ask(Query(text="ACME invoice", strategy="semantic")).hits[0]
        assert hit.note.id == "inv" and hit.score == 1.0


def test_an_unknown_reranker_name_is_refused() -> None:
    """An unregistered name raises UnknownPiece."""
    with pytest.raises(UnknownPiece):
        Container(reranker="no-such-reranker")


def test_rerankers_can_be_registered() -> None:
    """A reranker registered in code is found by name."""
    RERANKERS.register("reverse-test", Reverse)
    try:
        with Container(reranker="reverse-test") as c:
            assert isinstance(c.reranker, Reverse)
    finally:
        RERANKERS.unregister("reverse-test")


def test_a_reranker_without_rerank_is_refused() -> None:
    """An object without rerank(query, hits) is a contract error."""
    with pytest.raises(ContractError, match="reranker"):
        Container(reranker=object())  # type: ignore[arg-type]


@pytest.mark.parametrize("strategy", ["semantic", "keyword", "hybrid"])
def test_every_signal_field_is_readable(engine: ContinuityEngine, strategy: str) -> None:
    """Each hit's Signals has every field (None where the strategy gives none) and round-trips."""
    from coniti.recall import Signals

    for hit in engine.ask(Query(text="warm cat", strategy=strategy)).hits:  # type: ignore[arg-type]
        sig = hit.signals
        assert sig is not None
        assert {f: getattr(sig, f) for f in Signals.model_fields} == Signals.from_dict(sig.to_dict()).model_dump()


def test_hybrid_over_a_prefix_fuses_once_over_every_namespace() -> None:
    """A prefix hybrid ask ranks the union: each hit's semantic rank is its rank among the
    semantic hits of every namespace together (not within its own namespace)."""
    with Container() as c:
        c.engine.ingest_many(NOTES[:3], namespace=("a",))
        c.engine.ingest_many(NOTES[3:], namespace=("b",))
        hits = c.engine.ask(Query(text="warm mat cat", strategy="hybrid", k=5), prefix=()).hits
        semantic = c.engine.ask(Query(text="warm mat cat", strategy="semantic", k=5), prefix=()).hits
        by_key = {(h.namespace, h.note.id): r for r, h in enumerate(semantic, start=1)}
        for hit in hits:
            assert hit.signals is not None
            assert hit.signals.ranks["semantic"] == by_key[(hit.namespace, hit.note.id)]


def test_a_filtered_hybrid_ask_is_the_fused_ranking_minus_non_matching_notes() -> None:
    """Filters apply after fusion: the filtered answer is the unfiltered one without the notes the
    filter rejects, in the same order."""
    notes = [Note(id=f"n{i}", text=f"note {i} about cats and mats", timestamp=float(i),
                  metadata={"kind": "ab"[i % 2]}) for i in range(12)]  # fmt: skip
    with Container() as c:
        c.engine.ingest_many(notes)
        full = c.engine.ask(Query(text="cats mats", strategy="hybrid", k=12)).hits
        wanted = [h.note.id for h in full if h.note.metadata["kind"] == "a"][:3]
        got = c.engine.ask(Query(text="cats mats", strategy="hybrid", k=3, filter={"kind": "a"})).hits
        assert [h.note.id for h in got] == wanted


def test_ranks_of_a_prefix_ask_are_positions_in_the_merged_answer(engine: ContinuityEngine) -> None:
    """Over a prefix, a keyword hit's rank signal is its position in the merged answer."""
    engine.ingest(Note(id="inv-b", text="copy of INV-2024-0042", timestamp=5.0), namespace=("bob",))
    hits = engine.ask(Query(text="INV-2024-0042 ACME", strategy="keyword"), prefix=()).hits
    assert [h.signals.ranks for h in hits if h.signals] == [{"keyword": r} for r in range(1, len(hits) + 1)]
