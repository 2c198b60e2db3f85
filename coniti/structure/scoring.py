"""The scoring every structure shares: unit rows, fast float32 candidates, exact float64 scores, and
the total order of hits (score desc, time desc, id asc). See :mod:`coniti.structure` for the rules.

:func:`unit_rows` is also how :mod:`coniti.embedding` normalises its rows: one definition of "unit".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = [
    "StructureHit",
    "error_bound",
    "exact_scores",
    "fast_scores",
    "select_candidates",
    "top_by_key",
    "top_with_ties",
    "unit_rows",
]


class StructureHit(NamedTuple):
    """One search result: the stored id and its score (higher is better)."""

    id: str
    score: float

_UNIT_BLOCK = 8_192
"""Rows converted to float64 at a time by :func:`unit_rows` (bounds its temporaries)."""


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in float64, returned as a new C-contiguous float32 array.

    Works through ``_UNIT_BLOCK`` rows at a time (each row's result does not depend on the blocking),
    so a large float32 batch never has a full float64 copy."""
    rows = np.asarray(vectors)
    if rows.dtype not in (np.float32, np.float64):
        rows = rows.astype(np.float64)
    if rows.ndim == 2 and rows.shape[0] == 1:  # one query: the same arithmetic, fewer calls
        row = rows.astype(np.float64)
        norm = math.sqrt(float(np.einsum("ij,ij->i", row, row)[0]))
        one: np.ndarray = (row / norm if norm > 0.0 else row).astype(np.float32)
        return one
    out = np.empty(rows.shape, dtype=np.float32)
    for a in range(0, rows.shape[0], _UNIT_BLOCK):
        block = rows[a : a + _UNIT_BLOCK].astype(np.float64)
        norms = np.sqrt(np.einsum("ij,ij->i", block, block))
        safe = np.where(norms > 0.0, norms, 1.0)
        out[a : a + _UNIT_BLOCK] = block / safe[:, None]
    return out


def error_bound(dim: int) -> float:
    """An upper bound on |float32 dot - exact dot| for two vectors of norm at most 1 + 1e-6."""
    u = dim * 2.0**-24
    return 1.01 * u / (1.0 - u) + 1e-9


def fast_scores(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """float32 ``rows @ query`` on the calling thread.

    ``np.einsum`` rather than BLAS: OpenBLAS threads any matrix-vector product above ~9,000 elements,
    and a threaded product stalls for milliseconds whenever the other cores are busy.
    """
    out: np.ndarray = np.einsum("ij,j->i", rows, query)
    return out


def exact_scores(rows: np.ndarray, query: np.ndarray) -> list[float]:
    """The canonical scores: correctly rounded sums of the exact float64 products, one per row
    (what :func:`math.fsum` of them gives, bit for bit).

    float32 rows and query (what the structures hold) take a vectorised path: a float32 product is
    exact in float64, so each product scaled by ``2**s`` splits exactly into an integer part and a
    fraction scaled by ``2**m`` to an integer (``s``, ``m`` chosen from the dimension so that every
    partial sum of either part stays below ``2**53``: float64 adds them exactly, in any order). The
    exact total ``high * 2**m + low`` is then rounded once, by one float64 addition of two exact
    operands (IEEE rounds it correctly, half to even). Rows with a product below ``2**-(s + m)``
    (values under about ``2**-40`` of either side), a zero total (its sign is fsum's), products of
    2 or more, and other dtypes go through :func:`math.fsum`."""
    if rows.shape[0] == 0:
        return []
    dim = rows.shape[1]
    if rows.dtype != np.float32 or query.dtype != np.float32 or not 0 < dim <= _EXACT_DIM:
        return _fsum_scores(rows, query)
    width = max(1, (dim - 1).bit_length())  # dim <= 2**width
    s, m = 52 - width, 53 - width  # |high| < 2**(s + 1) and |low| < 2**m: dim of them < 2**53
    part = rows.astype(np.float64)
    part *= query.astype(np.float64) * 2.0**s  # exact: a power of two times a float32 product
    high = np.trunc(part)
    if not (high.max() < 2.0 ** (s + 1) and high.min() > -(2.0 ** (s + 1))):
        return _fsum_scores(rows, query)
    part -= high  # the fraction, exact
    part *= 2.0**m
    low = np.trunc(part)
    whole = bool((part == low).all())
    # both sums exact; high * 2**-s and low * 2**-(s + m) exact too: their sum is the one rounding
    totals = np.array([2.0**-s, 2.0 ** -(s + m)]) @ np.stack((high.sum(axis=1), low.sum(axis=1)))
    out: list[float] = totals.tolist()
    exact = [True] * len(out) if whole else (part == low).all(axis=1).tolist()
    for i, (score, ok) in enumerate(zip(out, exact, strict=True)):
        if score == 0.0 or not ok:
            out[i] = _fsum_scores(rows[i : i + 1], query)[0]
    return out


_EXACT_DIM = 1 << 20
"""Dimensions the vectorised path of :func:`exact_scores` takes (beyond, the parts would have
too few bits)."""


def _fsum_scores(rows: np.ndarray, query: np.ndarray) -> list[float]:
    products = rows.astype(np.float64) * query.astype(np.float64)
    return [math.fsum(row) for row in products.tolist()]


def select_candidates(approx: np.ndarray, k: int, eps: float) -> np.ndarray:
    """Positions whose fast score is within ``2 * eps`` of the k-th best (all when there are <= k)."""
    m = approx.shape[0]
    if m <= k:
        return np.arange(m)
    kth = np.partition(approx, m - k)[m - k]
    return np.flatnonzero(approx >= np.float64(kth) - 2.0 * eps)


def top_by_key(
    ids: Sequence[str], scores: Sequence[float], times: Sequence[float], k: int
) -> list[StructureHit]:
    """The ``k`` best by (score desc, time desc, id asc)."""
    keys = sorted(zip([-s for s in scores], [-t for t in times], ids, strict=True))[:k]
    return [StructureHit(id_, -float(negative)) for negative, _, id_ in keys]


def top_with_ties(values: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest ``values`` plus every position tied with the k-th largest."""
    m = values.shape[0]
    if m <= k:
        return np.arange(m)
    kth = np.partition(values, m - k)[m - k]
    return np.flatnonzero(values >= kth)
