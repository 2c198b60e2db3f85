"""The candidate pool of a search over rows: :class:`Pool` keeps the fast scores offered so far
(from a :class:`~coniti.structure.rows.SortedRows`' buffer and main rows) that can still be among
the top ``k``, and the float32 helpers it and the one-slice search share.

A fast (float32) score errs from the exact one by at most ``eps``
(:func:`~coniti.structure.scoring.error_bound`): a row is a candidate when its fast score is within
``2 * eps`` of the k-th best (:func:`~coniti.structure.scoring.select_candidates`), so the exact
top ``k`` is among the candidates.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["NEG_INF", "Pool", "float32_at_most", "kth_largest"]

NEG_INF = np.float32(-np.inf)
"""The fast score of a row that never qualifies (not visible, or the anchor)."""

_NO_SCORES = np.zeros(0, dtype=np.float32)
_NO_SCORES.flags.writeable = False


class Pool:
    """Rows scored so far during one search: fast scores per source (0 buffer, 1 main rows) and the
    running k-th best."""

    def __init__(self, k: int, eps: float) -> None:
        self.k = k
        self.eps = eps
        self.parts: list[tuple[int, np.ndarray, np.ndarray]] = []
        self.best = _NO_SCORES
        self._folded = 0
        self.scored = 0

    def threshold(self) -> float:
        """Fast scores below this cannot be candidates (-inf until k rows were scored)."""
        if self._folded < len(self.parts):
            best = np.concatenate([self.best, *(p[2] for p in self.parts[self._folded :])])
            if best.shape[0] > self.k:
                best = np.partition(best, best.shape[0] - self.k)[best.shape[0] - self.k :]
            self.best, self._folded = best, len(self.parts)
        if self.best.shape[0] < self.k:
            return -math.inf
        return float(self.best.min()) - 2.0 * self.eps

    def offer(self, source: int, rows: np.ndarray, approx: np.ndarray) -> None:
        """Add fast scores ``approx`` of ``rows`` from ``source``; ``-inf`` marks rows that never
        qualify (removed, or the anchor). Only the rows that can still be candidates are kept
        (:meth:`_kept`)."""
        self.scored += rows.shape[0]
        keep = self._kept(approx)
        if keep is not None:
            rows, approx = rows[keep], approx[keep]
        if rows.shape[0]:
            self.parts.append((source, rows, approx))

    def offer_span(self, source: int, start: int, approx: np.ndarray) -> None:
        """:meth:`offer` of the consecutive rows ``start, start + 1, ...`` (one per score)."""
        self.scored += approx.shape[0]
        keep = self._kept(approx)
        if keep is None:
            rows = np.arange(start, start + approx.shape[0])
        else:
            rows, approx = start + keep, approx[keep]
        if rows.shape[0]:
            self.parts.append((source, rows, approx))

    def _kept(self, approx: np.ndarray) -> np.ndarray | None:
        """Positions in ``approx`` that can be candidates (None: all of them): finite, and, past
        ``k`` scores, within ``2 * eps`` of their own k-th best. The search's final k-th best is at
        least that one, so :func:`~coniti.structure.scoring.select_candidates` over what is kept picks what it would pick
        over everything offered."""
        m, k = approx.shape[0], self.k
        if m > k:
            kth = float(np.partition(approx, m - k)[m - k])
            if kth > -math.inf:
                near: np.ndarray = approx >= float32_at_most(kth - 2.0 * self.eps)
                return near.nonzero()[0]
        finite = approx > NEG_INF
        return None if finite.all() else finite.nonzero()[0]


def kth_largest(values: np.ndarray, k: int) -> np.float32:
    """The ``k``-th largest of ``values`` (more than ``k`` of them)."""
    m = values.shape[0]
    scratch = values.copy()
    scratch.partition(m - k)
    kth: np.float32 = scratch[m - k]
    return kth


def float32_at_most(bound: float) -> np.float32:
    """The largest float32 at or below ``bound``: float32 scores compare with it as they would with
    ``bound`` itself, without a float64 copy of them."""
    near = np.float32(bound)
    value = float(near)
    if value <= bound or value != value:  # NaN: NaN
        return near
    if value == math.inf:
        return _FLOAT32_MAX
    # near is the float32 just above bound: step down to the one below it (without a ufunc call)
    fraction, exponent = math.frexp(abs(value))  # abs(value) == fraction * 2**exponent
    down = exponent - (25 if value > 0.0 and fraction == 0.5 else 24) if value else -149
    # (a positive power of two has a finer spacing below it)
    return np.float32(value - 2.0 ** max(down, -149))  # exact; -149: float32's subnormal spacing


_FLOAT32_MAX = np.float32(np.finfo(np.float32).max)


