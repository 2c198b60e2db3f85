"""The fused one-slice search (``SortedRows.top_of_slice``) gives the hits the general path (a
:class:`Pool` offered the slice, then ``finish``) gives, bit for bit: same ids, order and scores."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slice_cases import SliceCase, slice_cases

from coniti.structure.flat import FlatStructure
from coniti.structure.pool import float32_at_most
from coniti.structure.rows import Pool
from coniti.structure.scoring import error_bound, unit_vector

pytestmark = pytest.mark.usefixtures("kernel_mode")  # compiled kernels, then numpy twins


def general(s: FlatStructure, query: np.ndarray, k: int, lo: int, hi: int, skip: int | None,
            seq: int | None) -> list[tuple[str, str]]:
    rows = s._rows
    pool = Pool(k, error_bound(query.shape[0]))
    rows.score_slice(pool, lo, hi, query, skip, seq)
    return [(h.id, h.score.hex()) for h in rows.finish(pool, query)]


@settings(max_examples=150, deadline=None)
@given(slice_cases(), st.integers(1, 12))
def test_fused_slice_search_equals_the_general_path(case: SliceCase, k: int) -> None:
    """On random windows over rows with many tied scores (few distinct values), tied times and a
    share of removed rows, with or without an excluded row and an as-of event, the fused path
    returns exactly the general path's hits."""
    rows, query, lo, hi, skip, seq = case.rows, case.query, case.lo, case.hi, case.skip, case.seq
    assert rows.one_slice(lo, hi)
    want = general(case.structure, query, k, lo, hi, skip, seq)
    got = rows.top_of_slice(query, k, error_bound(query.shape[0]), lo, hi, skip, seq)
    assert [(h.id, h.score.hex()) for h in got] == want


def _float32_at_most_by_nextafter(bound: float) -> np.float32:
    near = np.float32(bound)
    return near if float(near) <= bound else np.nextafter(near, np.float32(-np.inf))


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.floats(allow_nan=False, width=64),
        st.floats(-2.0, 2.0),
        st.floats(width=32).flatmap(
            lambda x: st.sampled_from([x, float(np.nextafter(x, np.inf)), float(np.nextafter(x, -np.inf))])
        ),
    )
)
def test_float32_at_most_is_the_largest_float32_at_or_below(bound: float) -> None:
    """``_float32_at_most`` (no ufunc call) gives the float32 ``np.nextafter`` gives below a bound
    that rounds up, and the bound's own rounding otherwise: the same bits, zeros, subnormals,
    powers of two and overflow included."""
    with np.errstate(over="ignore"):
        expected = _float32_at_most_by_nextafter(bound)
        found = float32_at_most(bound)
    assert found.dtype == np.float32
    assert found.tobytes() == expected.tobytes()


def _brute_exact(s: FlatStructure, query: np.ndarray, k: int, lo: int, hi: int) -> list[tuple[str, str]]:
    """The top ``k`` of main rows ``[lo, hi)`` by fsum of the exact products, then time desc, id asc."""
    rows = s._rows
    keyed = sorted(
        (-math.fsum(float(a) * float(b) for a, b in zip(rows.vecs[i].tolist(), query.tolist(), strict=True)),
         -float(rows.times[i]), rows.ids[i])
        for i in range(lo, hi)
    )
    return [(id_, (-negative).hex()) for negative, _, id_ in keyed[:k]]


@settings(max_examples=120, deadline=None)
@given(
    st.integers(0, 2**32 - 1), st.integers(1, 12), st.sampled_from(["none", "one", "k", "k+1"]),
    st.booleans(),
)
def test_fused_windows_of_none_one_k_and_k_plus_one_rows_equal_brute_force(
    seed: int, k: int, size: str, few_bits: bool
) -> None:
    """Windows of 0, 1, k and k+1 rows over live rows with tied scores and times: the fused path
    returns the fsum brute force's hits, ties broken by time then id, bit for bit."""
    rng = np.random.default_rng(seed)
    dim = int(rng.integers(1, 300))
    m = {"none": 0, "one": 1, "k": k, "k+1": k + 1}[size]
    n = m + 6
    vectors = (rng.integers(-3, 4, (n, dim)) if few_bits else rng.standard_normal((n, dim))).astype(np.float64)
    vectors[rng.random(n) < 0.3] = vectors[-1]  # tied exact scores
    vectors[np.abs(vectors).sum(axis=1) == 0.0, 0] = 1.0
    ids = [f"id{i:04d}" for i in rng.permutation(n).tolist()]
    times = np.sort(rng.integers(0, 4, n)).astype(np.float64)  # tied times
    s = FlatStructure()
    s.add(ids, vectors, times, born=np.arange(1, n + 1))
    query = unit_vector(rng.standard_normal(dim) if not few_bits else rng.integers(-3, 4, dim) + 0.5)[0]
    lo = int(rng.integers(0, n - m + 1))
    got = s._rows.top_of_slice(query, k, error_bound(dim), lo, lo + m, None)
    assert [(h.id, h.score.hex()) for h in got] == _brute_exact(s, query, k, lo, lo + m)
