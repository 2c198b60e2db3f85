"""Reciprocal-rank fusion and maximal marginal relevance (coniti/fusion.py): properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coniti.errors import ContractError
from coniti.fusion import Fusion, fuse, mmr

IDS = [f"n{i}" for i in range(12)]


@st.composite
def rankings(draw: st.DrawFn) -> dict[str, list[str]]:
    out = {}
    for name in ("semantic", "keyword"):
        out[name] = draw(st.permutations(IDS).map(lambda p: list(p)).flatmap(
            lambda p: st.integers(0, len(p)).map(lambda n: p[:n])
        ))
    return out


TIMES = {i: float(n % 4) for n, i in enumerate(IDS)}


@settings(max_examples=100, deadline=None)
@given(rankings())
def test_fused_ids_are_the_union_each_once(ranks: dict[str, list[str]]) -> None:
    """Every id of any ranking appears exactly once in the fusion."""
    fused = [i for i, _, _ in fuse(ranks, TIMES)]
    assert sorted(fused) == sorted(set(ranks["semantic"]) | set(ranks["keyword"]))


@settings(max_examples=100, deadline=None)
@given(rankings())
def test_fusion_is_in_the_documented_total_order(ranks: dict[str, list[str]]) -> None:
    """Fused score descending, then timestamp descending, then id ascending."""
    fused = fuse(ranks, TIMES)
    keys = [(-s, -TIMES[i], i) for i, s, _ in fused]
    assert keys == sorted(keys)


@settings(max_examples=100, deadline=None)
@given(rankings(), st.integers(1, 200))
def test_fused_score_is_the_sum_of_reciprocal_ranks(ranks: dict[str, list[str]], k: int) -> None:
    """Each id's score is the sum of 1 / (k + rank) over the rankings holding it, and its ranks
    are the 1-based positions there."""
    for id_, score, held in fuse(ranks, TIMES, fusion=Fusion(k=k)):
        expected = {n: r.index(id_) + 1 for n, r in ranks.items() if id_ in r}
        assert held == expected
        assert score == pytest.approx(sum(1 / (k + r) for r in expected.values()), rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(rankings())
def test_an_id_first_in_every_ranking_is_first(ranks: dict[str, list[str]]) -> None:
    """An id ranked first by every (non-empty) ranking is first in the fusion."""
    top = "n0"
    pinned = {n: [top, *[i for i in r if i != top]] for n, r in ranks.items()}
    assert fuse(pinned, TIMES)[0][0] == top


@settings(max_examples=100, deadline=None)
@given(rankings(), st.sampled_from(IDS), st.floats(0.01, 10))
def test_positive_feedback_never_lowers_an_id(ranks: dict[str, list[str]], id_: str, w: float) -> None:
    """Giving an id positive feedback moves it up or leaves it where it was."""
    ranks["keyword"] = list(dict.fromkeys([*ranks["keyword"], id_]))
    before = [i for i, _, _ in fuse(ranks, TIMES)].index(id_)
    after = [i for i, _, _ in fuse(ranks, TIMES, feedback={id_: w})].index(id_)
    assert after <= before


@settings(max_examples=60, deadline=None)
@given(rankings())
def test_a_zero_weight_leaves_a_ranking_out_of_the_scores(ranks: dict[str, list[str]]) -> None:
    """With keyword weight 0 the scores are those of the semantic ranking alone."""
    fused = dict((i, s) for i, s, _ in fuse(ranks, TIMES, fusion=Fusion(keyword=0.0)))
    alone = dict((i, s) for i, s, _ in fuse({"semantic": ranks["semantic"]}, TIMES))
    for id_, score in fused.items():
        assert score == alone.get(id_, 0.0)


def test_feedback_of_one_counts_like_a_first_rank() -> None:
    """A feedback weight of 1 adds 1 / (k + 1) to the fused score."""
    (_, base, _), = fuse({"keyword": ["a"]}, {"a": 0.0})
    (_, boosted, _), = fuse({"keyword": ["a"]}, {"a": 0.0}, feedback={"a": 1.0})
    assert boosted - base == pytest.approx(1 / 61)


def test_a_ranking_repeating_an_id_is_refused() -> None:
    """A ranking must list each id once."""
    with pytest.raises(ValueError, match="twice"):
        fuse({"keyword": ["a", "a"]}, {"a": 0.0})


def test_fusion_options_are_validated() -> None:
    """k must be a positive int and weights non-negative numbers."""
    with pytest.raises(ContractError):
        Fusion(k=0)
    with pytest.raises(ContractError):
        Fusion(keyword=-1.0)
    with pytest.raises(ContractError):
        Fusion(semantic=True)


# -- MMR ------------------------------------------------------------------------------------------


@st.composite
def candidates(draw: st.DrawFn) -> tuple[list[float], np.ndarray]:
    n = draw(st.integers(1, 10))
    rel = draw(st.lists(st.floats(-1, 1, allow_nan=False), min_size=n, max_size=n))
    rows = np.array(draw(st.lists(
        st.lists(st.floats(-1, 1, allow_nan=False), min_size=3, max_size=3), min_size=n, max_size=n
    )), dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    rows = np.where(norms > 1e-9, rows / np.where(norms > 1e-9, norms, 1.0), 0.0)
    return rel, rows


@settings(max_examples=100, deadline=None)
@given(candidates(), st.floats(0, 1), st.integers(1, 12))
def test_mmr_picks_distinct_candidates(c: tuple[list[float], np.ndarray], lam: float, k: int) -> None:
    """MMR returns min(k, n) distinct indices."""
    rel, rows = c
    picked = mmr(rel, rows, lam, k)
    assert len(picked) == min(k, len(rel)) and len(set(picked)) == len(picked)


@settings(max_examples=100, deadline=None)
@given(candidates())
def test_mmr_with_lambda_one_keeps_the_relevance_order(c: tuple[list[float], np.ndarray]) -> None:
    """lam = 1: relevance descending, ties in the order given."""
    rel, rows = c
    expected = sorted(range(len(rel)), key=lambda i: (-rel[i], i))
    assert mmr(rel, rows, 1.0, len(rel)) == expected


@settings(max_examples=100, deadline=None)
@given(candidates(), st.floats(0, 1))
def test_mmr_first_pick_is_the_most_relevant(c: tuple[list[float], np.ndarray], lam: float) -> None:
    """Nothing is picked yet, so the first pick is the most relevant (the earliest on a tie)."""
    rel, rows = c
    assert mmr(rel, rows, lam, 1) == [min(range(len(rel)), key=lambda i: (-rel[i], i))]


@settings(max_examples=60, deadline=None)
@given(candidates(), st.floats(0, 1), st.integers(1, 12))
def test_mmr_is_deterministic(c: tuple[list[float], np.ndarray], lam: float, k: int) -> None:
    """The same candidates give the same picks."""
    rel, rows = c
    assert mmr(rel, rows, lam, k) == mmr(list(rel), rows.copy(), lam, k)


def test_mmr_with_lambda_zero_skips_a_near_duplicate() -> None:
    """Two identical vectors at the top: with lam 0.3 the second pick is the different one."""
    rows = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert mmr([1.0, 0.99, 0.5], rows, 0.3, 3)[:2] == [0, 2]


def test_mmr_lambda_outside_the_unit_interval_is_refused() -> None:
    """lam must be in [0, 1]."""
    with pytest.raises(ValueError, match="lambda"):
        mmr([1.0], np.ones((1, 2)), 1.5, 1)
