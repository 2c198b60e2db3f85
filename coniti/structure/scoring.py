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
    """The canonical scores: correctly rounded sums of the exact float64 products, one per row."""
    if rows.shape[0] == 0:
        return []
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
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], -times[i], ids[i]))[:k]
    return [StructureHit(ids[i], float(scores[i])) for i in order]


def top_with_ties(values: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest ``values`` plus every position tied with the k-th largest."""
    m = values.shape[0]
    if m <= k:
        return np.arange(m)
    kth = np.partition(values, m - k)[m - k]
    return np.flatnonzero(values >= kth)
