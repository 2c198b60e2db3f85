"""``flat``: contiguous numpy arrays in insertion order, one time mask and one product per search."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from coniti.structure.base import Structure
from coniti.structure.scoring import (
    StructureHit,
    error_bound,
    exact_scores,
    fast_scores,
    select_candidates,
    top_by_key,
    top_with_ties,
)

__all__ = ["FlatStructure", "Rows", "vector_hits"]


class Rows:
    """Growable contiguous rows: ids, unit float32 vectors, float64 times; swap-remove."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.vecs = np.zeros((0, 0), dtype=np.float32)
        self.times = np.zeros(0, dtype=np.float64)

    def clear(self) -> None:
        self.ids = []
        self.pos = {}
        self.vecs = np.zeros((0, 0), dtype=np.float32)
        self.times = np.zeros(0, dtype=np.float64)

    def __len__(self) -> int:
        return len(self.ids)

    def append(self, ids: list[str], unit: np.ndarray, times: np.ndarray) -> None:
        n, m = len(self.ids), len(ids)
        if self.vecs.shape[1] != unit.shape[1]:
            self.vecs = np.zeros((0, unit.shape[1]), dtype=np.float32)
        if n + m > self.vecs.shape[0]:
            cap = max(16, n + m, 2 * self.vecs.shape[0])
            vecs = np.zeros((cap, unit.shape[1]), dtype=np.float32)
            vecs[:n] = self.vecs[:n]
            stamps = np.zeros(cap, dtype=np.float64)
            stamps[:n] = self.times[:n]
            self.vecs, self.times = vecs, stamps
        self.vecs[n : n + m] = unit
        self.times[n : n + m] = times
        for offset, id_ in enumerate(ids, n):
            self.pos[id_] = offset
        self.ids.extend(ids)

    def remove(self, ids: list[str]) -> None:
        for id_ in ids:
            row = self.pos.pop(id_)
            last = len(self.ids) - 1
            if row != last:
                moved = self.ids[last]
                self.ids[row] = moved
                self.vecs[row] = self.vecs[last]
                self.times[row] = self.times[last]
                self.pos[moved] = row
            self.ids.pop()

    def view(self) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.ids)
        return self.vecs[:n], self.times[:n]


def vector_hits(
    ids: Sequence[str],
    vecs: np.ndarray,
    times: np.ndarray,
    rows: np.ndarray | None,
    query: np.ndarray,
    k: int,
    eps: float,
) -> list[StructureHit]:
    """Exact top ``k`` among ``rows`` (all when None) of a row store."""
    matrix = vecs if rows is None else vecs[rows]
    approx = fast_scores(matrix, query)
    chosen = select_candidates(approx, k, eps)
    picked = chosen if rows is None else rows[chosen]
    scores = exact_scores(matrix[chosen], query)
    return top_by_key([ids[i] for i in picked], scores, times[picked].tolist(), k)


class FlatStructure(Structure):
    """Exact cosine top-k over contiguous arrays with a time-range mask (O(n) per search)."""

    name: ClassVar[str] = "flat"

    def __init__(self) -> None:
        super().__init__()
        self._rows = Rows()

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, id_: object) -> bool:
        return id_ in self._rows.pos

    def _add(self, ids: list[str], unit: np.ndarray, times: np.ndarray) -> None:
        self._rows.append(ids, unit, times)

    def _remove(self, ids: list[str]) -> None:
        self._rows.remove(ids)

    def _clear(self) -> None:
        self._rows.clear()

    def _vector(self, id_: str) -> np.ndarray:
        row: np.ndarray = self._rows.vecs[self._rows.pos[id_]]
        return row

    def _timestamp(self, id_: str) -> float:
        return float(self._rows.times[self._rows.pos[id_]])

    def _mask(self, start: float, end: float, exclude: str | None) -> np.ndarray | None:
        _, times = self._rows.view()
        mask: np.ndarray | None = None
        if start > -math.inf or end < math.inf:
            mask = (times >= start) & (times < end)
        if exclude is not None:
            if mask is None:
                mask = np.ones(times.shape[0], dtype=bool)
            mask[self._rows.pos[exclude]] = False
        return mask

    def _search_vector(
        self, query: np.ndarray, k: int, start: float, end: float, exclude: str | None
    ) -> list[StructureHit]:
        vecs, times = self._rows.view()
        mask = self._mask(start, end, exclude)
        rows = None if mask is None else np.flatnonzero(mask)
        return vector_hits(self._rows.ids, vecs, times, rows, query, k, error_bound(vecs.shape[1]))

    def _search_recent(self, k: int, start: float, end: float) -> list[StructureHit]:
        _, times = self._rows.view()
        mask = self._mask(start, end, None)
        rows = np.arange(times.shape[0]) if mask is None else np.flatnonzero(mask)
        picked = rows[top_with_ties(times[rows], k)]
        ids = [self._rows.ids[i] for i in picked]
        return top_by_key(ids, [0.0] * len(ids), times[picked].tolist(), k)

    def _search_around(
        self, anchor_time: float, k: int, start: float, end: float, exclude: str
    ) -> list[StructureHit]:
        _, times = self._rows.view()
        mask = self._mask(start, end, exclude)
        rows = np.flatnonzero(mask) if mask is not None else np.arange(times.shape[0])
        closeness = -np.abs(times[rows] - anchor_time)
        chosen = top_with_ties(closeness, k)
        picked = rows[chosen]
        ids = [self._rows.ids[i] for i in picked]
        return top_by_key(ids, closeness[chosen].tolist(), times[picked].tolist(), k)
