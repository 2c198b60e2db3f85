"""Plain and async functions as rerankers (coniti/rerank.py) and the public RRF helper
:func:`coniti.fusion.fuse_reciprocal_rank`."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coniti import Container, Note, Query
from coniti.engine import ContinuityEngine
from coniti.errors import ContractError
from coniti.fusion import fuse_reciprocal_rank
from coniti.recall import Hit
from coniti.rerank import FunctionReranker, RerankerError

NOTES = [
    Note(id="a", text="the warm cat sleeps", timestamp=1.0),
    Note(id="b", text="a cat on a warm mat", timestamp=2.0),
    Note(id="c", text="dogs bark at night", timestamp=3.0),
    Note(id="d", text="invoice from ACME", timestamp=4.0),
]
QUERY = Query(text="warm cat", strategy="semantic", k=3)


def first_stage() -> list[str]:
    with Container() as c:
        c.engine.ingest_many(NOTES)
        return [h.note.id for h in c.engine.ask(QUERY.model_copy(update={"k": 4})).hits]


def reverse(query: Query, hits: list[Hit]) -> list[Hit]:
    return list(reversed(hits))


async def areverse(query: Query, hits: list[Hit]) -> list[Hit]:
    await asyncio.sleep(0)
    return list(reversed(hits))


def test_a_plain_function_is_a_reranker() -> None:
    """Container(reranker=fn) applies fn(query, hits): the answer is its order, cut to k."""
    expected = list(reversed(first_stage()))[:3]
    with Container(reranker=reverse) as c:
        c.engine.ingest_many(NOTES)
        assert [h.note.id for h in c.engine.ask(QUERY).hits] == expected


def test_an_async_function_is_a_reranker() -> None:
    """An async def reranker is awaited by the sync ask."""
    expected = list(reversed(first_stage()))[:3]
    with Container(reranker=areverse) as c:
        c.engine.ingest_many(NOTES)
        assert [h.note.id for h in c.engine.ask(QUERY).hits] == expected


def test_an_async_reranker_works_under_aask_and_inside_a_running_loop() -> None:
    """From a coroutine: aask (worker thread) and a sync ask on the loop's own thread both give
    the reranked answer (the awaitable never runs on the caller's loop)."""
    expected = list(reversed(first_stage()))[:3]
    with Container(reranker=areverse) as c:
        c.engine.ingest_many(NOTES)

        async def both() -> tuple[list[str], list[str]]:
            a = await c.engine.aask(QUERY)
            b = c.engine.ask(QUERY)  # sync, inside the running loop
            return [h.note.id for h in a.hits], [h.note.id for h in b.hits]

        assert asyncio.run(both()) == (expected, expected)


def test_the_engine_takes_a_function_too() -> None:
    """ContinuityEngine(reranker=fn) wraps it; its name is the function's."""
    with Container() as c:
        engine = ContinuityEngine(c.memory, c.embedder, c.structure, c.strategy, reranker=reverse)
        assert isinstance(engine.reranker, FunctionReranker) and engine.reranker.name == "reverse"


def test_a_function_returning_a_foreign_hit_is_refused_by_name() -> None:
    """The function falls under the rerankers' rules; the error names the function."""
    def forge(query: Query, hits: list[Hit]) -> list[Hit]:
        return [hits[0].model_copy(update={"note": hits[0].note.model_copy(update={"id": "ghost"})})]

    with Container(reranker=forge) as c:
        c.engine.ingest_many(NOTES)
        with pytest.raises(RerankerError, match=r"'forge'.*ghost"):
            c.engine.ask(QUERY)


def test_an_async_function_that_raises_propagates() -> None:
    """An async reranker's exception is the ask's."""
    async def broken(query: Query, hits: list[Hit]) -> list[Hit]:
        raise RuntimeError("model server down")

    with Container(reranker=broken) as c:
        c.engine.ingest_many(NOTES)
        with pytest.raises(RuntimeError, match="model server down"):
            c.engine.ask(QUERY)


@pytest.mark.parametrize("bad", [42, 3.5, FunctionReranker])
def test_a_non_callable_or_a_class_is_refused(bad: object) -> None:
    """Neither a value nor a class is a reranker: ContractError naming reranker."""
    with pytest.raises(ContractError, match="^reranker must be"):
        Container(reranker=bad)  # type: ignore[arg-type]


# -- fuse_reciprocal_rank --------------------------------------------------------------------


def test_rrf_scores_are_the_sum_of_weighted_reciprocal_ranks() -> None:
    """Each id gets weight / (k + rank) per ranking holding it."""
    out = dict(fuse_reciprocal_rank([["a", "b"], ["b", "c"]], k=10, weights=[1.0, 2.0]))
    assert out == {
        "a": 1 / 11,
        "b": math.fsum([1 / 12, 2 / 11]),
        "c": 2 / 12,
    }


def test_rrf_orders_best_first_and_breaks_ties_by_first_appearance() -> None:
    """Equal scores keep the rank-by-rank first-appearance order."""
    assert [i for i, _ in fuse_reciprocal_rank([["x", "y"], ["z", "w"]])] == ["x", "z", "y", "w"]


def test_rrf_takes_any_hashable_ids() -> None:
    """Ids may be ints or tuples."""
    assert fuse_reciprocal_rank([[1, (2, "a")], [(2, "a")]])[0][0] == (2, "a")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 20), unique=True, max_size=10), max_size=4))
def test_rrf_holds_every_id_once(rankings: list[list[int]]) -> None:
    """The union of the rankings, each once, scores non-increasing."""
    out = fuse_reciprocal_rank(rankings)
    assert sorted(i for i, _ in out) == sorted({i for r in rankings for i in r})
    scores = [s for _, s in out]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rankings": [["a"]], "k": 0}, "k"),
        ({"rankings": [["a"]], "k": True}, "k"),
        ({"rankings": [["a"], ["b"]], "weights": [1.0]}, "weights"),
        ({"rankings": [["a"]], "weights": [-1.0]}, r"weights\[0\]"),
        ({"rankings": [["a"]], "weights": [float("nan")]}, r"weights\[0\]"),
        ({"rankings": [["a", "a"]]}, r"rankings\[0\] holds id 'a' twice"),
        ({"rankings": ["ab"]}, r"rankings\[0\]"),
        ({"rankings": "ab"}, "rankings"),
    ],
)
def test_rrf_refuses_bad_input_naming_the_argument(kwargs: dict[str, object], field: str) -> None:
    """Bad k, weights or rankings: one-line ContractError naming the argument."""
    with pytest.raises(ContractError, match=f"^{field}"):
        fuse_reciprocal_rank(**kwargs)  # type: ignore[arg-type]
