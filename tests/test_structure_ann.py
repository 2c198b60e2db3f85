"""The ``ann`` structure: exact in what it returns (range, anchor, scores, order), approximate in recall."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti.actor import TimeRange
from coniti.errors import ContractError, StructureError
from coniti.structure import STRUCTURES, FlatStructure, Structure

pytest.importorskip("usearch")

from coniti.structure.ann import AnnStructure  # noqa: E402


def clustered(n: int, dim: int = 16, seed: int = 0) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``n`` rows around 20 centres, times 0..n-1 in order."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, dim))
    rows = centres[rng.integers(0, 20, size=n)] + 0.3 * rng.normal(size=(n, dim))
    return [f"a{i:05d}" for i in range(n)], rows, np.arange(n, dtype=np.float64)


def both(n: int, **options: object) -> tuple[AnnStructure, FlatStructure, np.ndarray]:
    ids, rows, times = clustered(n)
    ann, flat = AnnStructure(exact_rows=64, **options), FlatStructure()  # type: ignore[arg-type]
    for s in (ann, flat):
        s.add(ids, rows, times)
    return ann, flat, rows


def test_ann_is_registered_and_not_the_default() -> None:
    """'ann' is a registered structure name; the exact structures stay registered beside it."""
    assert isinstance(STRUCTURES.create("ann", expansion_search=32), AnnStructure)
    assert {"flat", "segment_tree", "ann"} <= set(STRUCTURES.names())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 30),
    st.none() | st.tuples(st.integers(-5, 1200), st.integers(0, 1300)),
    st.booleans(),
)
def test_ann_hits_are_always_correct_for_what_they_claim(
    seed: int, k: int, window: tuple[int, int] | None, use_anchor: bool
) -> None:
    """Every ann hit is inside the range, not the anchor, scored exactly as flat scores it, in the
    total order; and there are as many hits as flat gives (only which ones may differ)."""
    ann, flat, rows = ANN_FLAT
    rng = np.random.default_rng(seed)
    query = rng.normal(size=rows.shape[1])
    time_range = None if window is None else TimeRange(start=min(window), end=max(window))
    anchor = f"a{int(rng.integers(0, 1200)):05d}" if use_anchor else None
    got = ann.search(query, k=k, time_range=time_range, anchor_id=anchor)
    exact = flat.search(query, k=1200, time_range=time_range, anchor_id=anchor)
    score_of = {h.id: h.score for h in exact}
    assert len(got) == min(k, len(exact))
    assert all(h.id in score_of and h.score == score_of[h.id] for h in got)
    assert got == sorted(got, key=lambda h: (-h.score, -ann._timestamp(h.id), h.id))


ANN_FLAT = both(1200)


def test_ann_recall_is_high_on_clustered_data() -> None:
    """With the default graph options, recall@10 against exact search is at least 0.9."""
    ann, flat, rows = both(3000)
    rng = np.random.default_rng(5)
    found = 0
    for _ in range(50):
        query = rows[int(rng.integers(0, 3000))] + 0.1 * rng.normal(size=rows.shape[1])
        truth = {h.id for h in flat.search(query, k=10)}
        found += len(truth & {h.id for h in ann.search(query, k=10)})
        assert not ann.last_exact
    assert found / 500 >= 0.9


def test_small_window_is_searched_exactly() -> None:
    """A range holding at most exact_rows notes is scanned exactly: the hits equal flat's."""
    ann, flat, rows = ANN_FLAT
    window = TimeRange(start=100.0, end=150.0)
    assert ann.search(rows[3], k=10, time_range=window) == flat.search(rows[3], k=10, time_range=window)
    assert ann.last_exact


def test_narrow_fraction_is_searched_exactly() -> None:
    """A range below min_fraction of the notes is scanned exactly even when it holds many rows."""
    ann, flat, rows = both(3000, min_fraction=0.5)
    ann._exact_rows = 10
    window = TimeRange(start=0.0, end=1000.0)
    assert ann.search(rows[0], k=5, time_range=window) == flat.search(rows[0], k=5, time_range=window)
    assert ann.last_exact


def test_searches_without_a_vector_are_exact() -> None:
    """Most recent and closest-in-time searches equal flat's."""
    ann, flat, _ = ANN_FLAT
    window = TimeRange(start=10.0, end=900.0)
    assert ann.search(None, k=7, time_range=window) == flat.search(None, k=7, time_range=window)
    assert ann.search(None, k=7, anchor_id="a00500") == flat.search(None, k=7, anchor_id="a00500")


def test_removed_notes_are_never_hits() -> None:
    """After a removal the graph never returns the removed ids, and a re-added id is found again."""
    ann, _, rows = both(500)
    gone = [f"a{i:05d}" for i in range(0, 500, 2)]
    assert ann.remove(gone) == 250
    hits = ann.search(rows[0], k=50)
    assert len(hits) == 50 and not set(gone) & {h.id for h in hits}
    ann.add(["a00000"], [rows[0]], [9999.0])
    assert [h.id for h in ann.search(rows[0], k=1)] == ["a00000"]


def test_index_state_round_trips() -> None:
    """A structure restored from index_state() (same rows, graph from bytes) answers the same."""
    ann, _, rows = both(800)
    state = ann.index_state()
    assert isinstance(state["index"], bytes) and len(state["ids"]) == 800
    twin = ann.spawn()
    ids, rows, times = clustered(800)
    twin.add(ids, rows, times)
    twin.restore_index_state(state)
    for i in (1, 77, 400):
        assert twin.search(rows[i], k=10) == ann.search(rows[i], k=10)


def test_index_state_for_other_rows_is_refused() -> None:
    """A state whose ids are not the stored ids raises StructureError and changes nothing."""
    ann, _, rows = both(300)
    state = ann.index_state()
    other = AnnStructure()
    other.add(["x"], [rows[0]], [0.0])
    with pytest.raises(StructureError, match="stored ids"):
        other.restore_index_state(state)
    assert [h.id for h in other.search(rows[0], k=3)] == ["x"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"connectivity": 1}, "connectivity"),
        ({"expansion_search": 0}, "expansion_search"),
        ({"oversample": 0.5}, "oversample"),
        ({"min_fraction": 2.0}, "min_fraction"),
        ({"threads": -1}, "threads"),
        ({"buffer_min": 0}, "buffer_min"),
    ],
)
def test_bad_ann_options_are_refused(kwargs: dict[str, object], message: str) -> None:
    """Bad ann options raise ContractError naming the option."""
    with pytest.raises(ContractError, match=message):
        AnnStructure(**kwargs)  # type: ignore[arg-type]


def test_spawn_keeps_the_options() -> None:
    """spawn() gives an empty ann structure with the same options."""
    ann = AnnStructure(connectivity=8, expansion_search=40)
    twin: Structure = ann.spawn()
    assert len(twin) == 0 and twin.options == ann.options
