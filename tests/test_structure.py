"""Structures: flat and segment_tree search semantics, exactness, equivalence and input checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti.actor import TimeRange
from coniti.errors import AnchorNotFound, ContractError, StructureError, UnknownPiece
from coniti.structure import (
    STRUCTURES,
    FlatStructure,
    SegmentTreeStructure,
    Structure,
    StructureHit,
    unit_rows,
)

KINDS = ["flat", "segment_tree"]


def small_tree() -> SegmentTreeStructure:
    """A segment tree with tiny blocks, so every code path (buffer, nodes, pruning) runs."""
    return SegmentTreeStructure(leaf_size=2, direct_rows=3, buffer_min=4, buffer_fraction=0.25)


def small_flat() -> FlatStructure:
    """A flat structure with a tiny buffer, so out-of-order rows are merged and removals compacted."""
    return FlatStructure(buffer_min=2, buffer_fraction=0.25)


def make(kind: str) -> Structure:
    return small_tree() if kind == "segment_tree" else small_flat()


def reference(
    ids: list[str],
    vectors: np.ndarray,
    times: list[float],
    query: np.ndarray | None,
    k: int,
    time_range: TimeRange | None,
    anchor: str | None,
) -> list[StructureHit]:
    """Brute force over every row in plain Python: the documented semantics, nothing clever."""
    unit = unit_rows(vectors)
    where = {id_: i for i, id_ in enumerate(ids)}
    if query is not None:
        q = unit_rows(np.asarray(query, dtype=np.float64)[None, :])[0]
        if anchor is not None:
            q = unit_rows((q.astype(np.float64) + unit[where[anchor]].astype(np.float64))[None])[0]
    rows = []
    for i, id_ in enumerate(ids):
        if id_ == anchor or (time_range is not None and not time_range.contains(times[i])):
            continue
        if query is not None:
            score = math.fsum(float(a) * float(b) for a, b in zip(unit[i], q, strict=True))
        elif anchor is not None:
            score = -abs(times[i] - times[where[anchor]])
        else:
            score = 0.0
        rows.append((-score, -times[i], id_, score))
    rows.sort()
    return [StructureHit(r[2], r[3]) for r in rows[:k]]


def fill(structure: Structure, n: int, dim: int = 3, seed: int = 0) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = [f"n{i:03d}" for i in range(n)]
    vectors = rng.normal(size=(n, dim))
    structure.add(ids, vectors, [float(i) for i in range(n)])
    return ids, vectors


# -- equivalence: segment_tree returns exactly what flat returns ------------------------------

small_ints = st.integers(min_value=-2, max_value=2)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, object]:
    dim = draw(st.integers(min_value=1, max_value=4))
    n = draw(st.integers(min_value=0, max_value=60))
    vectors = draw(
        st.lists(st.lists(small_ints, min_size=dim, max_size=dim), min_size=n, max_size=n)
    )
    times = draw(st.lists(st.integers(min_value=0, max_value=12), min_size=n, max_size=n))
    removed = draw(st.sets(st.integers(min_value=0, max_value=max(0, n - 1)), max_size=n // 2))
    batches = draw(st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=8))
    queries = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        bounds = draw(st.tuples(st.none() | st.integers(-1, 13), st.none() | st.integers(-1, 13)))
        start, end = bounds
        if start is not None and end is not None and start > end:
            start, end = end, start
        queries.append(
            {
                "vector": draw(st.none() | st.lists(small_ints, min_size=dim, max_size=dim)),
                "k": draw(st.integers(min_value=1, max_value=12)),
                "range": draw(st.booleans()),
                "start": start,
                "end": end,
                "anchor": draw(st.none() | st.integers(min_value=0, max_value=max(0, n - 1))),
            }
        )
    return {
        "dim": dim,
        "vectors": vectors,
        "times": times,
        "removed": removed,
        "batches": batches,
        "queries": queries,
    }


def load(structure: Structure, scenario: dict[str, object]) -> list[str]:
    vectors = np.array(scenario["vectors"], dtype=np.float64).reshape(-1, scenario["dim"])  # type: ignore[call-overload]
    times = [float(t) for t in scenario["times"]]  # type: ignore[attr-defined]
    ids = [f"id{i}" for i in range(len(times))]
    batches = scenario["batches"]
    i = b = 0
    while i < len(ids):
        step = batches[b % len(batches)]  # type: ignore[index]
        structure.add(ids[i : i + step], vectors[i : i + step], times[i : i + step])
        i += step
        b += 1
    structure.remove([ids[r] for r in scenario["removed"] if r < len(ids)])  # type: ignore[attr-defined]
    return [id_ for n, id_ in enumerate(ids) if n not in scenario["removed"]]  # type: ignore[operator]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_segment_tree_equals_flat(scenario: dict[str, object]) -> None:
    """On random data, removals, time ranges, k and anchors, segment_tree returns flat's exact hits,
    and both equal the plain-Python reference (the rows they share are checked too)."""
    flat, tree = small_flat(), small_tree()
    live = load(flat, scenario)
    load(tree, scenario)
    assert len(flat) == len(tree) == len(live)
    vectors = np.array(scenario["vectors"], dtype=np.float64).reshape(-1, scenario["dim"])  # type: ignore[call-overload]
    all_times = [float(t) for t in scenario["times"]]  # type: ignore[attr-defined]
    keep = [i for i in range(len(all_times)) if f"id{i}" in live]
    for q in scenario["queries"]:  # type: ignore[attr-defined]
        anchor = None
        if q["anchor"] is not None and live:
            anchor = live[q["anchor"] % len(live)]
        time_range = TimeRange(start=q["start"], end=q["end"]) if q["range"] else None
        args = {"k": q["k"], "time_range": time_range, "anchor_id": anchor}
        expected = reference(
            [f"id{i}" for i in keep],
            vectors[keep],
            [all_times[i] for i in keep],
            None if q["vector"] is None else np.array(q["vector"], dtype=np.float64),
            q["k"],
            time_range,
            anchor,
        )
        assert flat.search(q["vector"], **args) == expected
        assert tree.search(q["vector"], **args) == expected


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[str, object]]:
    """Interleaved steps: add a batch (in time order after the newest, or anywhere), remove some
    stored ids, search (a vector or not, a window whose bounds fall on stored times)."""
    steps: list[tuple[str, object]] = []
    clock = 0
    for n in range(draw(st.integers(min_value=1, max_value=14))):
        kind = draw(st.sampled_from(["in_order", "any_order", "remove", "search"]))
        if kind in ("in_order", "any_order"):
            size = draw(st.integers(min_value=1, max_value=7))
            if kind == "in_order":
                times = sorted(draw(st.lists(st.integers(clock, clock + 3), min_size=size, max_size=size)))
                clock = times[-1]
            else:
                times = draw(st.lists(st.integers(0, clock + 3), min_size=size, max_size=size))
            vecs = draw(st.lists(st.lists(small_ints, min_size=2, max_size=2), min_size=size, max_size=size))
            steps.append(("add", [(f"h{n}-{j}", v, float(t)) for j, (v, t) in enumerate(zip(vecs, times, strict=True))]))
        elif kind == "remove":
            steps.append(("remove", draw(st.lists(st.integers(0, 40), max_size=6))))
        else:
            bounds = draw(st.tuples(st.none() | st.integers(-1, clock + 4), st.none() | st.integers(-1, clock + 4)))
            vector = draw(st.none() | st.lists(small_ints, min_size=2, max_size=2))
            steps.append(("search", (vector, bounds, draw(st.integers(1, 9)), draw(st.booleans()))))
    return steps


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_interleaved_writes_and_searches_match_reference(steps: list[tuple[str, object]]) -> None:
    """Adds in and out of time order, removals and searches, interleaved: after every step both
    structures answer exactly as the plain-Python reference over the live notes (window bounds on
    stored times, ties in time and score, buffer merges, compaction and lazy tree refreshes)."""
    structures = [small_flat(), small_tree()]
    live: dict[str, tuple[list[int], float]] = {}
    for kind, payload in steps:
        if kind == "add":
            batch = payload  # type: ignore[assignment]
            for s in structures:
                s.add([b[0] for b in batch], [b[1] for b in batch], [b[2] for b in batch])  # type: ignore[attr-defined]
            live.update({b[0]: (b[1], b[2]) for b in batch})  # type: ignore[attr-defined]
        elif kind == "remove":
            order = sorted(live)
            gone = [order[i % len(order)] for i in payload] if order else []  # type: ignore[attr-defined]
            for s in structures:
                assert s.remove(gone) == len(set(gone))
            for id_ in gone:
                live.pop(id_, None)
        else:
            vector, (start, end), k, use_anchor = payload  # type: ignore[misc]
            if start is not None and end is not None and start > end:
                start, end = end, start
            ids = sorted(live)
            anchor = ids[len(ids) // 2] if use_anchor and ids else None
            time_range = TimeRange(start=start, end=end)
            matrix = np.array([live[i][0] for i in ids], dtype=np.float64).reshape(-1, 2)
            query = None if vector is None else np.array(vector, dtype=np.float64)
            expected = reference(ids, matrix, [live[i][1] for i in ids], query, k, time_range, anchor)
            for s in structures:
                assert s.search(vector, k=k, time_range=time_range, anchor_id=anchor) == expected
        for s in structures:
            assert len(s) == len(live)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(min_value=0, max_value=2**32 - 1),
    st.integers(min_value=1, max_value=40),
    st.sampled_from([2, 16, 64]),
)
def test_both_structures_match_brute_force(seed: int, k: int, dim: int) -> None:
    """Gaussian vectors, duplicates and zero rows: both structures equal a plain-Python reference."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 120))
    vectors = rng.normal(size=(n, dim))
    vectors[rng.random(n) < 0.1] = 0.0
    dup = rng.random(n) < 0.2
    vectors[dup] = vectors[0]
    times = rng.integers(0, 30, size=n).astype(float).tolist()
    ids = [f"x{i}" for i in range(n)]
    query = rng.normal(size=dim)
    time_range = TimeRange(start=5.0, end=25.0) if rng.random() < 0.5 else None
    anchor = ids[int(rng.integers(n))] if rng.random() < 0.5 else None
    expected = reference(ids, vectors, times, query, k, time_range, anchor)
    for kind in KINDS:
        structure = make(kind)
        structure.add(ids, vectors, times)
        assert structure.search(query, k=k, time_range=time_range, anchor_id=anchor) == expected


def test_segment_tree_prunes_clustered_data() -> None:
    """With two far-apart clusters, a query near one scores fewer rows than the tree holds."""
    rng = np.random.default_rng(3)
    n = 4000
    a = np.array([1.0, 0.0, 0.0, 0.0]) + 0.01 * rng.normal(size=(n // 2, 4))
    b = np.array([0.0, 0.0, 0.0, 1.0]) + 0.01 * rng.normal(size=(n // 2, 4))
    tree = SegmentTreeStructure(leaf_size=32, direct_rows=64)
    tree.add([f"i{i}" for i in range(n)], np.vstack([a, b]), [float(i) for i in range(n)])
    hits = tree.search([1.0, 0.0, 0.0, 0.0], k=5)
    assert len(hits) == 5
    assert tree.rows_scored < n


# -- search semantics, per structure ----------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_vector_search_ranks_by_cosine(kind: str) -> None:
    """The hit closest in angle comes first; length does not matter."""
    s = make(kind)
    s.add(["a", "b", "c"], [[1.0, 0.0], [10.0, 1.0], [0.0, 1.0]], [1.0, 2.0, 3.0])
    hits = s.search([1.0, 0.0], k=3)
    assert [h.id for h in hits] == ["a", "b", "c"]
    assert hits[0].score == 1.0
    assert hits[2].score == 0.0


@pytest.mark.parametrize("kind", KINDS)
def test_time_range_is_half_open(kind: str) -> None:
    """A note at start is a hit, a note at end is not."""
    s = make(kind)
    s.add(["t10", "t20", "t30"], np.ones((3, 2)), [10.0, 20.0, 30.0])
    hits = s.search([1.0, 1.0], k=5, time_range=TimeRange(start=10.0, end=30.0))
    assert sorted(h.id for h in hits) == ["t10", "t20"]


@pytest.mark.parametrize("kind", KINDS)
def test_empty_time_range_gives_no_hits(kind: str) -> None:
    """start == end selects nothing."""
    s = make(kind)
    s.add(["a"], [[1.0]], [5.0])
    assert s.search([1.0], k=3, time_range=TimeRange(start=5.0, end=5.0)) == []


@pytest.mark.parametrize("kind", KINDS)
def test_ties_break_newer_first_then_id(kind: str) -> None:
    """Equal scores order by timestamp descending, then id ascending."""
    s = make(kind)
    s.add(["b", "a", "c", "d"], np.ones((4, 2)), [1.0, 1.0, 2.0, 0.5])
    assert [h.id for h in s.search([1.0, 1.0], k=4)] == ["c", "a", "b", "d"]


@pytest.mark.parametrize("kind", KINDS)
def test_no_vector_returns_most_recent(kind: str) -> None:
    """Without vector or anchor, hits are the newest in the range with score 0.0."""
    s = make(kind)
    fill(s, 20)
    hits = s.search(None, k=3, time_range=TimeRange(end=10.0))
    assert hits == [StructureHit("n009", 0.0), StructureHit("n008", 0.0), StructureHit("n007", 0.0)]


@pytest.mark.parametrize("kind", KINDS)
def test_anchor_without_vector_ranks_by_time_closeness(kind: str) -> None:
    """Anchor only: closest in time first, score -|dt|, later first on equal distance."""
    s = make(kind)
    fill(s, 20)
    hits = s.search(None, k=3, anchor_id="n010")
    assert hits == [
        StructureHit("n011", -1.0),
        StructureHit("n009", -1.0),
        StructureHit("n012", -2.0),
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_anchor_is_never_a_hit(kind: str) -> None:
    """The anchor is excluded even when it is the best match."""
    s = make(kind)
    ids, vectors = fill(s, 10)
    hits = s.search(vectors[4], k=10, anchor_id="n004")
    assert "n004" not in [h.id for h in hits]
    assert len(hits) == 9


@pytest.mark.parametrize("kind", KINDS)
def test_anchor_steers_vector_search(kind: str) -> None:
    """With a vector and an anchor, the query is the sum of both unit vectors."""
    s = make(kind)
    s.add(["x", "y", "mid", "anchor"], [[1, 0], [0, 1], [1, 1], [0, 1]], [1.0, 2.0, 3.0, 4.0])
    hits = s.search([1.0, 0.0], k=1, anchor_id="anchor")
    assert hits[0].id == "mid"


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_anchor_raises(kind: str) -> None:
    """An anchor that is not stored raises AnchorNotFound naming it."""
    s = make(kind)
    fill(s, 3)
    with pytest.raises(AnchorNotFound, match="'ghost'"):
        s.search(None, k=1, anchor_id="ghost")


@pytest.mark.parametrize("kind", KINDS)
def test_zero_vector_scores_zero(kind: str) -> None:
    """An all-zero stored vector scores exactly 0 for any query."""
    s = make(kind)
    s.add(["z"], [[0.0, 0.0, 0.0]], [1.0])
    assert s.search([1.0, 2.0, 3.0], k=1) == [StructureHit("z", 0.0)]


@pytest.mark.parametrize("kind", KINDS)
def test_fewer_hits_than_k(kind: str) -> None:
    """k larger than the number of candidates returns them all."""
    s = make(kind)
    fill(s, 4)
    assert len(s.search([1.0, 0.0, 0.0], k=50)) == 4


@pytest.mark.parametrize("kind", KINDS)
def test_empty_structure_returns_nothing(kind: str) -> None:
    """Searching an empty structure gives an empty list."""
    assert make(kind).search(None, k=3) == []


# -- add, remove, clear ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_remove_hides_ids_and_reports_count(kind: str) -> None:
    """Removed ids are no longer hits; unknown ids are ignored and not counted."""
    s = make(kind)
    fill(s, 10)
    assert s.remove(["n001", "n002", "nope", "n001"]) == 2
    assert len(s) == 8
    assert "n001" not in s
    assert {h.id for h in s.search(None, k=20)} == {f"n{i:03d}" for i in range(10)} - {"n001", "n002"}


@pytest.mark.parametrize("kind", KINDS)
def test_removed_id_can_be_added_again(kind: str) -> None:
    """After remove, the same id may be added with a new vector."""
    s = make(kind)
    fill(s, 10)
    s.remove(["n003"])
    s.add(["n003"], [[0.0, 0.0, 9.0]], [100.0])
    assert s.search([0.0, 0.0, 1.0], k=1)[0] == StructureHit("n003", 1.0)


@pytest.mark.parametrize("kind", KINDS)
def test_clear_empties_and_frees_dimension(kind: str) -> None:
    """clear removes everything and a new dimension is accepted."""
    s = make(kind)
    fill(s, 5)
    s.clear()
    assert len(s) == 0 and s.dim is None
    s.add(["a"], [[1.0]], [0.0])
    assert s.dim == 1


@pytest.mark.parametrize("kind", KINDS)
def test_duplicate_id_is_refused_and_changes_nothing(kind: str) -> None:
    """An id already stored, or repeated in the batch, raises ContractError; nothing is added."""
    s = make(kind)
    fill(s, 3)
    with pytest.raises(ContractError, match="'n001'"):
        s.add(["new", "n001"], np.ones((2, 3)), [1.0, 2.0])
    with pytest.raises(ContractError, match="twice"):
        s.add(["q", "q"], np.ones((2, 3)), [1.0, 2.0])
    assert len(s) == 3 and "new" not in s and "q" not in s


@pytest.mark.parametrize("kind", KINDS)
def test_wrong_dimension_is_refused(kind: str) -> None:
    """Vectors of another length than the stored ones raise ContractError naming both."""
    s = make(kind)
    fill(s, 3)
    with pytest.raises(ContractError, match="dimension 2.*holds 3"):
        s.add(["x"], [[1.0, 2.0]], [0.0])
    assert len(s) == 3


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("vectors", "times", "message"),
    [
        ([[float("nan"), 1.0]], [0.0], "vector of id 'a' is not finite"),
        ([[1.0, 1.0]], [float("inf")], "timestamp of id 'a' is not finite"),
        ([1.0, 1.0], [0.0], "shape"),
        ([[1.0, 1.0]], [0.0, 1.0], "timestamps must have shape"),
    ],
)
def test_bad_add_input_is_refused(kind: str, vectors: object, times: list[float], message: str) -> None:
    """Non-finite values and wrong shapes raise ContractError naming the problem."""
    s = make(kind)
    with pytest.raises(ContractError, match=message):
        s.add(["a"], vectors, times)
    assert len(s) == 0


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"vector": [1.0], "k": 0}, "k must be a positive integer"),
        ({"vector": [1.0], "k": True}, "k must be a positive integer"),
        ({"vector": [1.0, 2.0], "k": 1}, "dimension 2"),
        ({"vector": [float("nan")], "k": 1}, "finite"),
        ({"vector": [float("-inf")], "k": 1}, "finite"),
        ({"vector": [1.0, float("inf")], "k": 1}, "finite"),
        ({"vector": [[1.0]], "k": 1}, "one-dimensional"),
        ({"vector": None, "k": 1, "time_range": (0, 1)}, "TimeRange"),
    ],
)
def test_bad_search_input_is_refused(kind: str, kwargs: dict[str, object], message: str) -> None:
    """Bad k, vector or time_range raise ContractError naming the field."""
    s = make(kind)
    s.add(["a"], [[1.0]], [0.0])
    with pytest.raises(ContractError, match=message):
        s.search(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", KINDS)
def test_a_query_whose_squared_norm_overflows_is_searched(kind: str) -> None:
    """A finite query too large to square in float64 is searched, not refused as non-finite."""
    s = make(kind)
    s.add(["a"], [[1.0]], [0.0])
    assert [h.id for h in s.search([1e200], k=1)] == ["a"]


@pytest.mark.parametrize("kind", KINDS)
def test_search_does_not_change_the_structure(kind: str) -> None:
    """Searching around an anchor leaves every id searchable afterwards."""
    s = make(kind)
    fill(s, 30)
    s.search(None, k=3, anchor_id="n015")
    assert len(s.search(None, k=100)) == 30


def test_segment_tree_keeps_results_across_merges_and_compaction() -> None:
    """Many small adds (buffer merges) and many removals (compaction) keep results equal to flat."""
    flat, tree = FlatStructure(), small_tree()
    rng = np.random.default_rng(7)
    for step in range(60):
        ids = [f"s{step}-{j}" for j in range(3)]
        vectors = rng.normal(size=(3, 4))
        times = rng.integers(0, 100, size=3).astype(float)
        flat.add(ids, vectors, times)
        tree.add(ids, vectors, times)
        if step % 3 == 2:
            gone = [f"s{step - 1}-{j}" for j in range(3)] + [f"s{step - 2}-0"]
            flat.remove(gone)
            tree.remove(gone)
    query = rng.normal(size=4)
    for k in (1, 5, 50, 500):
        assert tree.search(query, k=k) == flat.search(query, k=k)
        assert tree.search(None, k=k) == flat.search(None, k=k)


def test_segment_tree_optimize_keeps_results() -> None:
    """optimize() merges the buffer and drops removed rows without changing any answer."""
    tree = small_tree()
    fill(tree, 50)
    tree.remove(["n010", "n020"])
    before = tree.search([1.0, 0.5, 0.0], k=10)
    tree.optimize()
    assert tree.search([1.0, 0.5, 0.0], k=10) == before


# -- pieces -------------------------------------------------------------------------------------


def test_registry_has_both_builtins() -> None:
    """flat and segment_tree are registered by name."""
    assert {"flat", "segment_tree"} <= set(STRUCTURES.names())
    assert isinstance(STRUCTURES.create("segment_tree", leaf_size=8), SegmentTreeStructure)


def test_unknown_structure_lists_registered_names() -> None:
    """An unknown name raises UnknownPiece listing what is registered."""
    with pytest.raises(UnknownPiece, match="unknown structure 'kd'.*flat.*segment_tree"):
        STRUCTURES.create("kd")


def test_spawn_gives_an_empty_twin() -> None:
    """spawn() returns a new empty structure with the same options."""
    tree = SegmentTreeStructure(leaf_size=8, direct_rows=100)
    fill(tree, 5)
    twin = tree.spawn()
    assert len(twin) == 0 and twin.options == tree.options


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"leaf_size": 0}, "leaf_size"),
        ({"direct_rows": 1.5}, "direct_rows"),
        ({"buffer_fraction": 0.0}, "buffer_fraction"),
    ],
)
def test_bad_segment_tree_options_are_refused(kwargs: dict[str, object], message: str) -> None:
    """Bad segment_tree options raise ContractError naming the option."""
    with pytest.raises(ContractError, match=message):
        SegmentTreeStructure(**kwargs)  # type: ignore[arg-type]


def test_many_rows_match_the_reference() -> None:
    """With thousands of rows (several tree levels, sweeps), both structures equal the reference."""
    rng = np.random.default_rng(11)
    n, dim = 9000, 4
    ids = [f"r{i}" for i in range(n)]
    vectors = rng.normal(size=(n, dim))
    times = rng.integers(0, 1000, size=n).astype(float).tolist()
    query = rng.normal(size=dim)
    expected = reference(ids, vectors, times, query, 7, None, None)
    for structure in (FlatStructure(), SegmentTreeStructure()):
        structure.add(ids, vectors, times)
        assert structure.search(query, k=7) == expected


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bad", [[float("nan"), 1.0, 0.0], [1.0, 2.0]], ids=["nan", "dimension"])
def test_add_and_search_refuse_bad_vectors_with_one_error_type(kind: str, bad: list[float]) -> None:
    """The same bad vector raises ContractError from add and from search, never StructureError."""
    s = make(kind)
    fill(s, 3)
    with pytest.raises(ContractError) as on_add:
        s.add(["x"], [bad], [0.0])
    with pytest.raises(ContractError) as on_search:
        s.search(bad, k=1)
    assert not isinstance(on_add.value, StructureError)
    assert not isinstance(on_search.value, StructureError)


def test_structure_package_modules_hold_their_parts() -> None:
    """The base class, scoring and each built-in live in their own module of coniti.structure."""
    from coniti.structure import base, flat, scoring, segment_tree

    assert Structure is base.Structure and STRUCTURES is base.STRUCTURES
    assert FlatStructure is flat.FlatStructure
    assert SegmentTreeStructure is segment_tree.SegmentTreeStructure
    assert unit_rows is scoring.unit_rows and StructureHit is scoring.StructureHit
    assert STRUCTURES.get("flat") is FlatStructure


# -- the time-sorted row store ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_in_order_batches_are_appended_in_place(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches in time order (as the engine loads memory) go straight to the sorted rows: no buffer,
    and the arrays grow in place, never by a grow-and-copy."""
    from coniti.structure import rows as rows_module

    copies: list[tuple[int, ...]] = []
    original = rows_module._copy_grown

    def spy(array: np.ndarray, rows: int) -> np.ndarray:
        copies.append(array.shape)
        return original(array, rows)

    monkeypatch.setattr(rows_module, "_copy_grown", spy)
    s = make(kind)
    for b in range(20):
        s.add([f"b{b}-{j}" for j in range(300)], np.ones((300, 4)), 300.0 * b + np.arange(300.0))
        s.search([1.0, 0.0, 0.0, 0.0], k=2)
    store = s._rows  # type: ignore[attr-defined]
    assert len(store.buffer) == 0 and store.n == 6000
    assert [c for c in copies if len(c) == 2 and c[0] > 0] == []


@pytest.mark.parametrize("kind", KINDS)
def test_out_of_order_rows_are_buffered_then_merged_in_time_order(kind: str) -> None:
    """Rows older than the newest wait in the buffer; past the limit they are merged and the main
    rows are sorted by time again, with every note still found."""
    s = make(kind)
    fill(s, 40)
    store = s._rows  # type: ignore[attr-defined]
    s.add(["late1"], [[1.0, 0.0, 0.0]], [3.5])
    assert len(store.buffer) == 1
    s.add([f"late{i}" for i in range(2, 40)], np.ones((38, 3)), np.linspace(0.5, 38.5, 38))
    assert len(store.buffer) == 0 and store.n == 79
    assert (np.diff(store.times[: store.n]) >= 0).all()
    assert {h.id for h in s.search(None, k=100)} == {f"n{i:03d}" for i in range(40)} | {
        f"late{i}" for i in range(1, 40)
    }


def test_segment_tree_builds_its_nodes_once_for_a_bulk_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many chunk adds without a search (the engine's open) refresh the node statistics once, at the
    first search that needs them, and not again for searches without writes."""
    from coniti.structure import segment_tree

    calls: list[int] = []
    original = segment_tree._Nodes.refresh

    def spy(self: object, rows: object, dirty_from: int) -> None:
        calls.append(dirty_from)
        original(self, rows, dirty_from)  # type: ignore[arg-type]

    monkeypatch.setattr(segment_tree._Nodes, "refresh", spy)
    tree = SegmentTreeStructure(leaf_size=8, direct_rows=16)
    rng = np.random.default_rng(2)
    for c in range(10):
        tree.add([f"c{c}-{j}" for j in range(500)], rng.normal(size=(500, 4)), 500.0 * c + np.arange(500.0))
    for _ in range(3):
        tree.search(rng.normal(size=4), k=5)
    assert calls == [0]
    tree.add(["new"], [[1.0, 0.0, 0.0, 0.0]], [1e6])
    tree.search([1.0, 0.0, 0.0, 0.0], k=1)
    assert calls == [0, 5000]


@pytest.mark.parametrize("kind", KINDS)
def test_set_born_stamps_the_live_rows_for_as_of_searches(kind: str) -> None:
    """Rows added at 0 and stamped by set_born (some in the sorted rows, one buffered out of time
    order) are invisible as of an earlier event and visible from their stamp on; an id without a
    live row is a KeyError."""
    s = make(kind)
    s.add(["a", "b", "c"], np.eye(3, 4), [10.0, 20.0, 30.0])
    s.add(["d"], np.eye(4)[3:], [5.0])  # out of time order: buffered
    s.set_born(["a", "b", "c", "d"], [7, 7, 8, 8])
    assert [h.id for h in s.search(None, k=4, as_of=6)] == []
    assert sorted(h.id for h in s.search(None, k=4, as_of=7)) == ["a", "b"]
    assert sorted(h.id for h in s.search(None, k=4, as_of=8)) == ["a", "b", "c", "d"]
    with pytest.raises(KeyError):
        s.set_born(["zzz"], [9])


@pytest.mark.parametrize("kind", KINDS)
def test_set_born_of_rows_all_buffered_stamps_each(kind: str) -> None:
    """A batch stamped while every one of its rows is still buffered (added out of time order):
    each row visible from its own stamp on, the rows already stamped left as they were (a batch of
    rows all in the sorted rows is stamped at once too: "a")."""
    s = make(kind)
    s.add(["a"], np.eye(1, 4), [50.0])
    s.set_born(["a"], [3])
    s.add(["b", "c", "d"], np.eye(4)[1:], [5.0, 10.0, 20.0])  # before "a": buffered
    s.set_born(["b", "c", "d"], [7, 8, 9])
    assert [h.id for h in s.search(None, k=4, as_of=3)] == ["a"]
    assert sorted(h.id for h in s.search(None, k=4, as_of=8)) == ["a", "b", "c"]
    assert sorted(h.id for h in s.search(None, k=4, as_of=9)) == ["a", "b", "c", "d"]
