"""The shared scoring: the vectorised exact scores equal fsum of the float64 products, bit for bit,
and the pool keeps every candidate a search needs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pytest import MonkeyPatch

from coniti.structure.rows import NEG_INF, Pool
from coniti.structure.scoring import error_bound, exact_scores, select_candidates, unit_rows

pytestmark = pytest.mark.usefixtures("kernel_mode")  # compiled kernels, then numpy twins


def fsum_scores(rows: np.ndarray, query: np.ndarray) -> list[float]:
    return [
        math.fsum(float(a) * float(b) for a, b in zip(row, query, strict=True))
        for row in rows.tolist()
    ]


FLOATS = st.floats(
    min_value=-1.5, max_value=1.5, allow_nan=False, allow_infinity=False, width=32,
    allow_subnormal=True,
)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 40).flatmap(
        lambda dim: st.tuples(
            hnp.arrays(np.float32, st.tuples(st.integers(1, 6), st.just(dim)), elements=FLOATS),
            hnp.arrays(np.float32, st.just(dim), elements=FLOATS),
        )
    )
)
def test_exact_scores_equal_fsum_bit_for_bit(case: tuple[np.ndarray, np.ndarray]) -> None:
    """float32 rows (tiny, subnormal, zero and signed-zero values included) score exactly what
    fsum of the exact products gives, to the last bit."""
    rows, query = case
    got = exact_scores(rows, query)
    assert [x.hex() for x in got] == [x.hex() for x in fsum_scores(rows, query)]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([3, 255, 256, 384, 1536]))
def test_exact_scores_of_unit_rows_equal_fsum(seed: int, dim: int) -> None:
    """Unit rows of the sizes embedders give score exactly what fsum gives."""
    rng = np.random.default_rng(seed)
    rows = unit_rows(rng.standard_normal((12, dim)))
    query = unit_rows(rng.standard_normal((1, dim)))[0]
    assert exact_scores(rows, query) == fsum_scores(rows, query)


def test_exact_scores_of_large_values_fall_back_to_fsum() -> None:
    """Values whose products overflow the vectorised parts still score as fsum does."""
    rows = np.array([[3e30, -2e30, 1.0], [1e-30, 2e-38, 0.5]], dtype=np.float32)
    query = np.array([2e30, 3e30, 1.0], dtype=np.float32)
    assert exact_scores(rows, query) == fsum_scores(rows, query)


@settings(max_examples=200, deadline=None)
@given(
    hnp.arrays(
        np.float32, st.integers(1, 60),
        elements=st.one_of(st.just(float("-inf")), st.floats(-1, 1, width=32)),
    ),
    st.integers(1, 12),
    st.integers(0, 1000),
)
def test_pool_keeps_what_selection_over_everything_picks(
    approx: np.ndarray, k: int, start: int
) -> None:
    """Offering scores in pieces and selecting over what the pool kept picks the same rows as
    selecting over every finite score at once."""
    eps = error_bound(8)
    pool = Pool(k, eps)
    for a in range(0, approx.shape[0], 7):
        pool.offer_span(1, start + a, approx[a : a + 7].copy())
    finite = np.flatnonzero(approx > NEG_INF)
    want = set((start + finite[select_candidates(approx[finite], k, eps)]).tolist())
    kept_rows = np.concatenate([p[1] for p in pool.parts]) if pool.parts else np.zeros(0, int)
    kept = np.concatenate([p[2] for p in pool.parts]) if pool.parts else np.zeros(0, np.float32)
    got = set(kept_rows[select_candidates(kept, k, eps)].tolist()) if kept.shape[0] else set()
    assert got == want


def test_exact_scores_at_a_rounding_midpoint_round_half_to_even() -> None:
    """A row whose exact score is a midpoint between two floats (or within the fractions' rounding
    error of one) scores what fsum gives: the fast path never guesses a side."""
    rows = np.array([[1.0, 2.0**-27], [1.0, 2.0**-27 + 2.0**-50]], dtype=np.float32)
    query = np.array([0.5, 2.0**-27], dtype=np.float32)
    assert [x.hex() for x in exact_scores(rows, query)] == [x.hex() for x in fsum_scores(rows, query)]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 300), st.integers(20, 45))
def test_exact_scores_of_unit_rows_with_tiny_values_equal_fsum(seed: int, dim: int, shift: int) -> None:
    """Unit rows and queries with a tiny value (scores near a midpoint, fractions with low bits)
    score exactly what fsum gives."""
    rng = np.random.default_rng(seed)
    rows = unit_rows(rng.standard_normal((6, dim)))
    query = unit_rows(rng.standard_normal((1, dim)))[0]
    rows[:, 0] = np.float32(2.0**-shift)
    query[0] = np.float32(2.0 ** -(65 - shift))
    assert [x.hex() for x in exact_scores(rows, query)] == [x.hex() for x in fsum_scores(rows, query)]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 400), st.integers(1, 12))
def test_exact_scores_of_few_bit_rows_equal_fsum(seed: int, dim: int, bits: int) -> None:
    """Rows and queries whose values carry few bits (as hashed embeddings do: exact midpoints and
    exact zeros are common) score exactly what fsum gives."""
    rng = np.random.default_rng(seed)
    steps = 2**bits
    rows = (rng.integers(-steps, steps + 1, (8, dim)) / steps).astype(np.float32)
    query = (rng.integers(-steps, steps + 1, dim) / steps).astype(np.float32)
    rows[0] = rows[1] * np.float32(0.5)  # a power-of-two multiple of another row
    assert [x.hex() for x in exact_scores(rows, query)] == [x.hex() for x in fsum_scores(rows, query)]


def test_exact_midpoints_with_exact_fractions_need_no_fsum(monkeypatch: MonkeyPatch) -> None:
    """A score that is exactly a midpoint of the fast sum, with fractions float64 adds exactly, is
    rounded half to even without the fsum fallback (and equals fsum)."""
    import coniti.structure.scoring as scoring

    rows = np.array([[1.0, 1.0, 2.0**-28], [1.0, 1.0, 3 * 2.0**-28]], dtype=np.float32)
    query = np.array([2.0**-3, 2.0**-4, 2.0**-28], dtype=np.float32)  # 3/16 + (1 or 3) * 2**-56
    want = fsum_scores(rows, query)
    calls: list[int] = []
    real = scoring._fsum_scores

    def counted(r: np.ndarray, q: np.ndarray) -> list[float]:
        calls.append(r.shape[0])
        return real(r, q)

    monkeypatch.setattr(scoring, "_fsum_scores", counted)
    assert [x.hex() for x in exact_scores(rows, query)] == [x.hex() for x in want]
    assert calls == []
