"""Hit.relevance (issue 30, item 8): each hit's score read on a 0-1 scale, per strategy, and
Query.min_relevance / ``coniti ask --min-score`` cutting on it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from cli_support import Cli

from coniti import ContinuityEngine, Note, Query
from coniti.embedding import LocalHashEmbedder
from coniti.errors import ContractError
from coniti.fusion import Fusion
from coniti.impl.memory import InMemoryBackend
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure

A = ("a",)
B = ("b",)


def engine() -> ContinuityEngine:
    e = ContinuityEngine(InMemoryBackend(), LocalHashEmbedder(dim=64), [FlatStructure()], DefaultStrategy())
    e.ingest_many(
        [
            Note(id="a1", text="apple banana", timestamp=1.0),
            Note(id="a2", text="cherry date", timestamp=2.0),
            Note(id="a3", text="apple cherry", timestamp=3.0),
            Note(id="a4", text="elder fig", timestamp=4.0),
        ],
        namespace=A,
    )
    e.ingest_many(
        [Note(id="b1", text="banana split", timestamp=5.0), Note(id="b2", text="grape melon", timestamp=6.0)],
        namespace=B,
    )
    return e


QUERIES = [
    Query(text="apple banana", k=10, strategy="semantic"),
    Query(text="apple banana", k=10, strategy="keyword"),
    Query(text="apple banana", k=10, strategy="hybrid"),
    Query(text="apple banana", k=10, strategy="hybrid", fusion=Fusion(method="score")),
]


def test_semantic_relevance_is_the_cosine_negatives_as_zero() -> None:
    """Semantic hits: relevance = max(score, 0), the score being the cosine."""
    hits = engine().ask(Query(text="apple banana", k=10, strategy="semantic"), namespace=A).hits
    assert hits and all(h.relevance == max(h.score, 0.0) for h in hits)


def test_keyword_relevance_is_one_when_every_word_matches_once_at_average_length() -> None:
    """A note of average length holding each question word once has keyword relevance 1; one
    holding only one of the words has that word's share of the question's idf."""
    e = engine()
    hits = {h.note.id: h for h in e.ask(Query(text="apple banana", k=10, strategy="keyword"), namespace=A).hits}
    assert hits["a1"].relevance == pytest.approx(1.0)
    n, df_apple, df_banana = 4, 2, 1
    idf = {t: math.log(1 + (n - df + 0.5) / (df + 0.5)) for t, df in (("apple", df_apple), ("banana", df_banana))}
    assert hits["a3"].relevance == pytest.approx(idf["apple"] / (idf["apple"] + idf["banana"]))


def test_rank_fused_relevance_is_the_share_of_the_best_possible_fused_score() -> None:
    """Hybrid by rank: relevance = fused score / (sum of the rankings' weights / (k + 1)), 1.0 for
    a note first on both sides."""
    hits = engine().ask(Query(text="apple banana", k=10, strategy="hybrid"), namespace=A).hits
    assert hits[0].note.id == "a1" and hits[0].relevance == pytest.approx(1.0)
    assert all(h.relevance == pytest.approx(min(1.0, h.score / (2 / 61))) for h in hits)


def test_score_fused_relevance_is_the_fused_score_within_zero_and_one() -> None:
    """Hybrid by score: relevance = the fused score, clipped to [0, 1]."""
    query = Query(text="apple banana", k=10, strategy="hybrid", fusion=Fusion(method="score"))
    hits = engine().ask(query, namespace=A).hits
    assert hits and all(h.relevance == min(1.0, max(0.0, h.score)) for h in hits)


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: f"{q.strategy}-{q.fusion.method if q.fusion else ''}")
def test_relevance_follows_the_score_within_an_answer(query: Query) -> None:
    """Over a prefix too, a hit's relevance is in [0, 1] and never above an earlier hit's."""
    hits = engine().ask(query, prefix=()).hits
    values = [h.relevance for h in hits]
    assert len(hits) >= 3 and all(v is not None and 0.0 <= v <= 1.0 for v in values)
    assert values == sorted(values, reverse=True)  # type: ignore[type-var]


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: f"{q.strategy}-{q.fusion.method if q.fusion else ''}")
def test_min_relevance_keeps_the_hits_at_or_above_it_in_order(query: Query) -> None:
    """min_relevance answers the unfiltered ranking without the hits below it (over a prefix and
    with a filter too)."""
    e = engine()
    for scope, filter_ in (({"namespace": A}, None), ({"prefix": ()}, None), ({"prefix": ()}, {"x": {"$exists": False}})):
        everything = e.ask(query.model_copy(update={"filter": filter_}), **scope).hits  # type: ignore[arg-type]
        values = sorted({h.relevance for h in everything if h.relevance is not None})
        cut = values[len(values) // 2]
        kept = e.ask(query.model_copy(update={"filter": filter_, "min_relevance": cut}), **scope).hits  # type: ignore[arg-type]
        assert [h.note.id for h in kept] == [h.note.id for h in everything if h.relevance is not None and h.relevance >= cut]
        assert 0 < len(kept) < len(everything)


def test_recent_hits_have_no_relevance_and_refuse_min_relevance() -> None:
    """recent ranks by time: its hits carry relevance None, and min_relevance with it is refused."""
    e = engine()
    from coniti import TimeRange

    hits = e.ask(Query(time_range=TimeRange(start=0.0), k=3), namespace=A).hits
    assert hits and all(h.relevance is None for h in hits)
    with pytest.raises(ContractError, match="min_relevance"):
        Query(time_range=TimeRange(start=0.0), min_relevance=0.5)


def test_min_relevance_outside_zero_to_one_is_refused() -> None:
    """min_relevance must be a number in [0, 1]; the error names the field."""
    for bad in (-0.1, 1.5, "high", True):
        with pytest.raises(ContractError, match="min_relevance"):
            Query(text="x", min_relevance=bad)  # type: ignore[arg-type]


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    c = Cli(tmp_path / "store", capsys, monkeypatch)
    for id_, text in (("t1", "tea in Lyon"), ("t2", "coffee in Paris"), ("t3", "tea and coffee"), ("t4", "rain in Lyon")):
        c.ok("add", text, "--id", id_, "--embedding", "local_hash")
    return c


def test_cli_ask_shows_relevance_and_min_score_cuts_on_it(cli: Cli) -> None:
    """ask --json gives each hit's relevance in [0, 1] beside the raw score; --min-score keeps the
    hits whose relevance reaches it; the table's first column is the relevance."""
    hits = cli.ok("ask", "tea Lyon", "--json").json()["hits"]
    values = [h["relevance"] for h in hits]
    assert len(values) == 4 and all(0.0 <= v <= 1.0 for v in values) and values[0] == pytest.approx(1.0)
    cut = sorted(values)[2]
    kept = cli.ok("ask", "tea Lyon", "--min-score", str(cut), "--json").json()["hits"]
    assert [h["id"] for h in kept] == [h["id"] for h in hits if h["relevance"] >= cut]
    table = cli.ok("ask", "tea Lyon").out
    assert table.split()[0] == "relevance" and "1.00" in table


def test_cli_min_score_outside_zero_to_one_or_with_recent_is_a_usage_error(cli: Cli) -> None:
    """--min-score 1.5 and --min-score with --strategy recent exit 2 naming --min-score."""
    for args in (("--min-score", "1.5"), ("--min-score", "0.5", "--strategy", "recent")):
        result = cli("ask", "tea", *args)
        assert result.code == 2 and "--min-score" in result.err
