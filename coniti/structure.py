"""Structures: (id, vector, timestamp) organised over time, searched by cosine similarity or by time.

A :class:`Structure` is derived data: the engine fills it from memory and can always rebuild it. Every
structure answers :meth:`Structure.search` with exactly the same hits, in the same order:

* with a ``vector``: the ``k`` stored vectors most similar to it by cosine similarity;
* with an ``anchor_id`` and a ``vector``: most similar to the sum of the unit query vector and the
  anchor's unit vector (recall around that note, steered by the text);
* with an ``anchor_id`` and no vector: the ``k`` notes closest in time to the anchor, score
  ``-|t - t_anchor|`` (seconds);
* with neither: the ``k`` most recent notes, score ``0.0``.

Only notes with ``time_range.start <= t < time_range.end`` are hits (``None`` = unbounded); the anchor
itself never is. Hits are ordered by score (descending), then timestamp (descending, so newer first),
then id (ascending): a total order, so ties are broken identically everywhere.

Scores are exact and reproducible. Stored vectors and the query are scaled to unit length in float64
and kept as float32 (an all-zero vector stays zero and scores 0). The score of a stored vector ``v`` for
the query ``q`` is the correctly rounded float64 sum of the exact products ``q[i] * v[i]``
(:func:`math.fsum`), whatever the batch or the order in which rows are visited. Fast float32
products only choose candidates: a candidate set always includes every row whose fast score is within
twice the proven float32 error bound of the k-th best fast score, so the exact top k is never missed.

Built-ins, registered by name in :data:`STRUCTURES`:

``flat``
    Contiguous numpy arrays in insertion order. Each search filters by time with one mask over every
    row, then scores the remaining rows with one matrix-vector product. Cost O(n) per search.
``segment_tree``
    Rows sorted by time under a segment tree over blocks of ``leaf_size`` rows; each node stores the
    centroid of its rows and a radius bounding their distance to it, so ``q . c + r`` bounds every score
    inside. A time range becomes a row interval by binary search; a short interval is scored directly;
    a long one is covered by O(log n) nodes searched best-first, and nodes whose bound cannot reach
    the current k-th score are skipped. New rows go to a small unsorted buffer, merged into the tree
    when it outgrows ``buffer_fraction`` of the tree (amortised O(log n) per row); removed rows are
    masked and compacted away when they reach half the tree.

Structures are not thread-safe: the engine serialises access to them.
"""

from __future__ import annotations

import heapq
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, NamedTuple, Self

import numpy as np

from coniti.actor import TimeRange
from coniti.errors import AnchorNotFound, ContractError, StructureError
from coniti.registry import Registry

__all__ = [
    "STRUCTURES",
    "FlatStructure",
    "SegmentTreeStructure",
    "Structure",
    "StructureHit",
]


class StructureHit(NamedTuple):
    """One search result: the stored id and its score (higher is better)."""

    id: str
    score: float


STRUCTURES: Registry[Structure] = Registry("structure", "coniti.structures")
"""Structures by name; third parties add theirs here or in the ``coniti.structures`` entry-point group."""

_NEG_INF = np.float32(-np.inf)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in float64, returned as a new C-contiguous float32 array."""
    rows = np.asarray(vectors, dtype=np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    safe = np.where(norms > 0.0, norms, 1.0)
    return np.ascontiguousarray(rows / safe[:, None], dtype=np.float32)


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


def _bounds(time_range: TimeRange | None) -> tuple[float, float]:
    if time_range is None:
        return -math.inf, math.inf
    start = -math.inf if time_range.start is None else time_range.start
    end = math.inf if time_range.end is None else time_range.end
    return start, end


class Structure(ABC):
    """Organises (id, vector, timestamp) over time; see the module docstring for search semantics.

    :meth:`add`, :meth:`remove`, :meth:`search` and :meth:`clear` validate their input and then call the
    subclass's ``_add``, ``_remove``, ``_search_*`` and ``_clear``. A call that raises changes nothing.
    """

    name: ClassVar[str]

    def __init__(self) -> None:
        self._dim: int | None = None

    @property
    def options(self) -> dict[str, Any]:
        """The constructor options that reproduce this structure (``type(s)(**s.options)``)."""
        return {}

    def spawn(self) -> Self:
        """A new, empty structure of the same kind and options."""
        return type(self)(**self.options)

    @property
    def dim(self) -> int | None:
        """The vector length, fixed by the first :meth:`add` (``None`` while empty since a clear)."""
        return self._dim

    # -- validated public surface ------------------------------------------------------------

    def add(
        self, ids: Sequence[str], vectors: Any, timestamps: Sequence[float] | np.ndarray
    ) -> None:
        """Insert a batch: ``ids[i]`` with row ``vectors[i]`` at ``timestamps[i]``; all or nothing.

        Raises :class:`StructureError` for a repeated or already stored id, a wrong shape or dimension,
        or a non-finite value.
        """
        id_list = list(ids)
        for i, id_ in enumerate(id_list):
            if not isinstance(id_, str) or not id_:
                raise StructureError(f"ids[{i}] must be a non-empty string, got {id_!r}")
        seen: set[str] = set()
        for id_ in id_list:
            if id_ in seen:
                raise StructureError(f"id {id_!r} appears twice in one add")
            if id_ in self:
                raise StructureError(f"id {id_!r} is already in the {self.name} structure")
            seen.add(id_)
        try:
            matrix = np.asarray(vectors, dtype=np.float64)
            times = np.asarray(timestamps, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise StructureError(f"vectors and timestamps must be numeric: {exc}") from None
        n = len(id_list)
        if matrix.ndim != 2 or matrix.shape[0] != n:
            raise StructureError(f"vectors must have shape ({n}, dim), got {matrix.shape}")
        if times.shape != (n,):
            raise StructureError(f"timestamps must have shape ({n},), got {times.shape}")
        if n == 0:
            return
        dim = matrix.shape[1]
        if dim == 0:
            raise StructureError("vectors must have at least one column")
        if self._dim is not None and dim != self._dim:
            raise StructureError(f"vectors have dimension {dim}, the structure holds {self._dim}")
        if not np.isfinite(matrix).all():
            bad = int(np.flatnonzero(~np.isfinite(matrix).all(axis=1))[0])
            raise StructureError(f"vector of id {id_list[bad]!r} is not finite")
        if not np.isfinite(times).all():
            bad = int(np.flatnonzero(~np.isfinite(times))[0])
            raise StructureError(f"timestamp of id {id_list[bad]!r} is not finite")
        self._add(id_list, unit_rows(matrix), times.copy())
        self._dim = dim

    def remove(self, ids: Iterable[str]) -> int:
        """Remove the stored ones among ``ids`` (unknown ids are ignored); returns how many."""
        present = [i for i in dict.fromkeys(ids) if isinstance(i, str) and i in self]
        if present:
            self._remove(present)
        return len(present)

    def clear(self) -> None:
        """Remove everything; the dimension is free again."""
        self._clear()
        self._dim = None

    def search(
        self,
        vector: Any | None,
        *,
        k: int,
        time_range: TimeRange | None = None,
        anchor_id: str | None = None,
    ) -> list[StructureHit]:
        """The ``k`` best hits (see the module docstring); fewer when fewer notes qualify.

        Raises :class:`ContractError` for a bad ``k``, ``vector`` or ``time_range`` and
        :class:`AnchorNotFound` for an ``anchor_id`` that is not stored.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ContractError(f"k must be a positive integer, got {k!r}")
        if time_range is not None and not isinstance(time_range, TimeRange):
            raise ContractError(f"time_range must be a TimeRange, got {type(time_range).__name__}")
        query: np.ndarray | None = None
        if vector is not None:
            try:
                q = np.asarray(vector, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ContractError(f"vector must be numeric: {exc}") from None
            if q.ndim != 1 or q.size == 0:
                raise ContractError(f"vector must be one-dimensional, got shape {q.shape}")
            if not np.isfinite(q).all():
                raise ContractError("vector must be finite (no NaN or infinity)")
            if self._dim is not None and q.size != self._dim:
                raise ContractError(f"vector has dimension {q.size}, the structure holds {self._dim}")
            query = unit_rows(q[None, :])[0]
        anchor_time = 0.0
        if anchor_id is not None:
            if anchor_id not in self:
                raise AnchorNotFound(f"anchor id {anchor_id!r} is not in the structure")
            anchor_time = self._timestamp(anchor_id)
            if query is not None:
                combined = query.astype(np.float64) + self._vector(anchor_id).astype(np.float64)
                query = unit_rows(combined[None, :])[0]
        start, end = _bounds(time_range)
        if len(self) == 0 or start >= end:
            return []
        if query is not None:
            return self._search_vector(query, k, start, end, anchor_id)
        if anchor_id is not None:
            return self._search_around(anchor_time, k, start, end, anchor_id)
        return self._search_recent(k, start, end)

    # -- what a subclass implements --------------------------------------------------------

    @abstractmethod
    def __len__(self) -> int:
        """How many ids are stored."""

    @abstractmethod
    def __contains__(self, id_: object) -> bool:
        """True when ``id_`` is stored."""

    @abstractmethod
    def _add(self, ids: list[str], unit: np.ndarray, times: np.ndarray) -> None:
        """Insert validated, new ids with unit float32 rows and finite float64 times."""

    @abstractmethod
    def _remove(self, ids: list[str]) -> None:
        """Remove ids that are all stored."""

    @abstractmethod
    def _clear(self) -> None:
        """Remove everything."""

    @abstractmethod
    def _vector(self, id_: str) -> np.ndarray:
        """The stored unit float32 row of a stored id."""

    @abstractmethod
    def _timestamp(self, id_: str) -> float:
        """The timestamp of a stored id."""

    @abstractmethod
    def _search_vector(
        self, query: np.ndarray, k: int, start: float, end: float, exclude: str | None
    ) -> list[StructureHit]:
        """Top ``k`` by exact cosine score with the unit ``query`` among times in [start, end)."""

    @abstractmethod
    def _search_recent(self, k: int, start: float, end: float) -> list[StructureHit]:
        """The ``k`` newest among times in [start, end), score 0.0."""

    @abstractmethod
    def _search_around(
        self, anchor_time: float, k: int, start: float, end: float, exclude: str
    ) -> list[StructureHit]:
        """The ``k`` closest in time to ``anchor_time`` among times in [start, end)."""


class _Rows:
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


def _vector_hits(
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
        self._rows = _Rows()

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
        return _vector_hits(self._rows.ids, vecs, times, rows, query, k, error_bound(vecs.shape[1]))

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


class _Tree:
    """Immutable time-sorted rows with a segment tree of (centroid, radius) over blocks of rows."""

    def __init__(
        self, ids: list[str], vecs: np.ndarray, times: np.ndarray, leaf_size: int
    ) -> None:
        order = np.argsort(times, kind="stable")
        self.ids = [ids[i] for i in order]
        self.vecs = np.ascontiguousarray(vecs[order])
        self.times = np.ascontiguousarray(times[order])
        self.alive = np.ones(len(self.ids), dtype=bool)
        self.dead = 0
        self.pos = {id_: row for row, id_ in enumerate(self.ids)}
        self.leaf = leaf_size
        n, dim = self.vecs.shape
        blocks = max(1, -(-n // leaf_size))
        self.width = 1 << (blocks - 1).bit_length()
        nodes = 2 * self.width
        self.lo = np.zeros(nodes, dtype=np.int64)
        self.hi = np.zeros(nodes, dtype=np.int64)
        self.center = np.zeros((nodes, dim), dtype=np.float32)
        self.radius = np.zeros(nodes, dtype=np.float64)
        self._build(n, dim, blocks)

    def _build(self, n: int, dim: int, blocks: int) -> None:
        w, leaf = self.width, self.leaf
        starts = np.minimum(np.arange(self.width, dtype=np.int64) * leaf, n)
        self.lo[w:] = starts
        self.hi[w:] = np.minimum(starts + leaf, n)
        counts = (self.hi[w:] - self.lo[w:]).astype(np.float64)
        centers = np.zeros((w, dim), dtype=np.float64)
        radius = np.zeros(w, dtype=np.float64)
        full = n // leaf
        if full:
            block = self.vecs[: full * leaf].reshape(full, leaf, dim)
            centers[:full] = block.mean(axis=1, dtype=np.float64)
            radius[:full] = _radii(block, centers[:full])
        if full < blocks:
            tail = self.vecs[full * leaf : n][None]
            centers[full] = tail[0].mean(axis=0, dtype=np.float64)
            radius[full] = _radii(tail, centers[full : full + 1])[0]
        level_centers, level_radius, level_counts = centers, radius, counts
        self.center[w:] = centers
        self.radius[w:] = radius
        first = w
        while first > 1:
            half = first // 2
            left_c, right_c = level_centers[0::2], level_centers[1::2]
            left_n, right_n = level_counts[0::2], level_counts[1::2]
            total = left_n + right_n
            safe = np.where(total > 0, total, 1.0)
            merged = (left_c * left_n[:, None] + right_c * right_n[:, None]) / safe[:, None]
            reach_l = np.where(
                left_n > 0, np.linalg.norm(left_c - merged, axis=1) + level_radius[0::2], 0.0
            )
            reach_r = np.where(
                right_n > 0, np.linalg.norm(right_c - merged, axis=1) + level_radius[1::2], 0.0
            )
            level_radius = np.maximum(reach_l, reach_r) * (1.0 + 1e-9) + 1e-9
            level_centers, level_counts = merged, total
            self.center[half:first] = merged
            self.radius[half:first] = level_radius
            self.lo[half:first] = self.lo[first : 2 * first : 2]
            self.hi[half:first] = self.hi[first + 1 : 2 * first : 2]
            first = half

    def __len__(self) -> int:
        return len(self.ids) - self.dead

    def cover(self, lo: int, hi: int) -> tuple[list[tuple[int, int]], list[int]]:
        """Row interval [lo, hi) as partial-block row ranges plus O(log n) whole tree nodes."""
        leaf, w = self.leaf, self.width
        first_block = -(-lo // leaf)
        last_block = hi // leaf
        if first_block >= last_block:
            return [(lo, hi)], []
        pieces = []
        if lo < first_block * leaf:
            pieces.append((lo, first_block * leaf))
        if last_block * leaf < hi:
            pieces.append((last_block * leaf, hi))
        nodes = []
        left, right = first_block + w, last_block + w
        while left < right:
            if left & 1:
                nodes.append(left)
                left += 1
            if right & 1:
                right -= 1
                nodes.append(right)
            left //= 2
            right //= 2
        return pieces, nodes


def _radii(blocks: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Per block, an upper bound on the distance from its rows to its float64 center.

    ``|v - c|^2 = v.v - 2 v.c + c.c`` in float64 (no full-size temporaries); the cancellation error is
    far below the added margins.
    """
    vv = np.einsum("bld,bld->bl", blocks, blocks, dtype=np.float64)
    vc = np.einsum("bld,bd->bl", blocks, centers, dtype=np.float64)
    cc = np.einsum("bd,bd->b", centers, centers)
    sq = (vv - 2.0 * vc).max(axis=1) + cc
    out: np.ndarray = np.sqrt(np.maximum(sq, 0.0) + 1e-12) * (1.0 + 1e-9) + 1e-7
    return out


class _Pool:
    """Rows scored so far during one tree search: fast scores and the running k-th best."""

    def __init__(self, k: int, eps: float) -> None:
        self.k = k
        self.eps = eps
        self.parts: list[tuple[int, np.ndarray, np.ndarray]] = []
        self.best = np.zeros(0, dtype=np.float32)
        self.scored = 0

    def threshold(self) -> float:
        """Fast scores below this cannot be candidates (-inf until k rows were scored)."""
        if self.best.shape[0] < self.k:
            return -math.inf
        return float(self.best.min()) - 2.0 * self.eps

    def offer(self, source: int, rows: np.ndarray, approx: np.ndarray) -> None:
        self.scored += rows.shape[0]
        keep = approx > _NEG_INF
        rows, approx = rows[keep], approx[keep]
        if rows.shape[0] == 0:
            return
        self.parts.append((source, rows, approx))
        best = np.concatenate((self.best, approx))
        if best.shape[0] > self.k:
            best = np.partition(best, best.shape[0] - self.k)[best.shape[0] - self.k :]
        self.best = best


class SegmentTreeStructure(Structure):
    """Time-sorted rows under a segment tree of centroid/radius bounds; see the module docstring."""

    name: ClassVar[str] = "segment_tree"

    def __init__(
        self,
        *,
        leaf_size: int = 64,
        direct_rows: int = 2048,
        buffer_min: int = 1024,
        buffer_fraction: float = 0.125,
    ) -> None:
        super().__init__()
        self._leaf_size = _positive_int("leaf_size", leaf_size)
        self._direct_rows = _positive_int("direct_rows", direct_rows)
        self._buffer_min = _positive_int("buffer_min", buffer_min)
        if (
            isinstance(buffer_fraction, bool)
            or not isinstance(buffer_fraction, int | float)
            or not 0.0 < buffer_fraction <= 1.0
        ):
            raise ContractError(f"buffer_fraction must be in (0, 1], got {buffer_fraction!r}")
        self._buffer_fraction = float(buffer_fraction)
        self._tree: _Tree | None = None
        self._buffer = _Rows()
        self.rows_scored = 0
        """How many rows the last vector search scored (for measurements; pruning lowers it)."""

    @property
    def options(self) -> dict[str, Any]:
        return {
            "leaf_size": self._leaf_size,
            "direct_rows": self._direct_rows,
            "buffer_min": self._buffer_min,
            "buffer_fraction": self._buffer_fraction,
        }

    def __len__(self) -> int:
        return len(self._buffer) + (0 if self._tree is None else len(self._tree))

    def __contains__(self, id_: object) -> bool:
        if id_ in self._buffer.pos:
            return True
        tree = self._tree
        if tree is None or not isinstance(id_, str):
            return False
        row = tree.pos.get(id_)
        return row is not None and bool(tree.alive[row])

    def _add(self, ids: list[str], unit: np.ndarray, times: np.ndarray) -> None:
        self._buffer.append(ids, unit, times)
        tree_rows = 0 if self._tree is None else len(self._tree)
        if len(self._buffer) > max(self._buffer_min, self._buffer_fraction * tree_rows):
            self._merge()

    def _merge(self) -> None:
        """Rebuild the tree from its live rows plus the buffer; the buffer is emptied."""
        ids: list[str] = []
        parts_v: list[np.ndarray] = []
        parts_t: list[np.ndarray] = []
        tree = self._tree
        if tree is not None:
            live = np.flatnonzero(tree.alive)
            ids.extend(tree.ids[i] for i in live)
            parts_v.append(tree.vecs[live])
            parts_t.append(tree.times[live])
        if len(self._buffer):
            vecs, times = self._buffer.view()
            ids.extend(self._buffer.ids)
            parts_v.append(vecs)
            parts_t.append(times)
        self._buffer = _Rows()
        self._tree = None
        if ids:
            self._tree = _Tree(
                ids, np.concatenate(parts_v), np.concatenate(parts_t), self._leaf_size
            )

    def optimize(self) -> None:
        """Merge the buffer and drop removed rows now (searches never need it; it only speeds them)."""
        if len(self._buffer) or (self._tree is not None and self._tree.dead):
            self._merge()

    def _remove(self, ids: list[str]) -> None:
        in_buffer = [i for i in ids if i in self._buffer.pos]
        if in_buffer:
            self._buffer.remove(in_buffer)
        tree = self._tree
        if tree is not None:
            for id_ in ids:
                row = tree.pos.get(id_)
                if row is not None and tree.alive[row]:
                    tree.alive[row] = False
                    tree.dead += 1
            if tree.dead * 2 > len(tree.ids):
                self._merge()

    def _clear(self) -> None:
        self._tree = None
        self._buffer = _Rows()

    def _vector(self, id_: str) -> np.ndarray:
        row = self._buffer.pos.get(id_)
        if row is not None:
            found: np.ndarray = self._buffer.vecs[row]
            return found
        assert self._tree is not None
        out: np.ndarray = self._tree.vecs[self._tree.pos[id_]]
        return out

    def _timestamp(self, id_: str) -> float:
        row = self._buffer.pos.get(id_)
        if row is not None:
            return float(self._buffer.times[row])
        assert self._tree is not None
        return float(self._tree.times[self._tree.pos[id_]])

    def _buffer_rows(self, start: float, end: float, exclude: str | None) -> np.ndarray:
        _, times = self._buffer.view()
        mask = (times >= start) & (times < end)
        if exclude is not None and exclude in self._buffer.pos:
            mask[self._buffer.pos[exclude]] = False
        return np.flatnonzero(mask)

    def _tree_interval(self, start: float, end: float) -> tuple[int, int]:
        assert self._tree is not None
        times = self._tree.times
        lo = 0 if start == -math.inf else int(np.searchsorted(times, start, "left"))
        hi = len(times) if end == math.inf else int(np.searchsorted(times, end, "left"))
        return lo, max(lo, hi)

    def _search_vector(
        self, query: np.ndarray, k: int, start: float, end: float, exclude: str | None
    ) -> list[StructureHit]:
        eps = error_bound(query.shape[0])
        pool = _Pool(k, eps)
        buffer_rows = self._buffer_rows(start, end, exclude)
        if buffer_rows.shape[0]:
            vecs, _ = self._buffer.view()
            pool.offer(0, buffer_rows, fast_scores(vecs[buffer_rows], query))
        tree = self._tree
        if tree is not None:
            lo, hi = self._tree_interval(start, end)
            skip = tree.pos.get(exclude) if exclude is not None else None
            if hi - lo <= self._direct_rows:
                self._score_rows(tree, pool, lo, hi, query, skip)
            else:
                self._best_first(tree, pool, lo, hi, query, skip)
        self.rows_scored = pool.scored
        return self._finish(pool, query)

    def _score_rows(
        self,
        tree: _Tree,
        pool: _Pool,
        lo: int,
        hi: int,
        query: np.ndarray,
        skip: int | None,
    ) -> None:
        if lo >= hi:
            return
        approx = fast_scores(tree.vecs[lo:hi], query)
        if tree.dead:
            approx[~tree.alive[lo:hi]] = _NEG_INF
        if skip is not None and lo <= skip < hi:
            approx[skip - lo] = _NEG_INF
        pool.offer(1, np.arange(lo, hi), approx)

    def _best_first(
        self,
        tree: _Tree,
        pool: _Pool,
        lo: int,
        hi: int,
        query: np.ndarray,
        skip: int | None,
    ) -> None:
        pieces, nodes = tree.cover(lo, hi)
        for a, b in pieces:
            self._score_rows(tree, pool, a, b, query, skip)
        slack = 3.0 * pool.eps + 1e-6
        heap: list[tuple[float, int]] = []

        def push(batch: list[int]) -> None:
            idx = np.array(batch, dtype=np.int64)
            bounds = fast_scores(tree.center[idx], query) + tree.radius[idx] + slack
            for node, bound in zip(batch, bounds.tolist(), strict=True):
                heapq.heappush(heap, (-bound, node))

        if nodes:
            push(nodes)
        while heap:
            negative, node = heapq.heappop(heap)
            threshold = pool.threshold()
            if -negative < threshold:
                break
            a, b = int(tree.lo[node]), int(tree.hi[node])
            if b - a <= self._direct_rows or node >= tree.width:
                self._score_rows(tree, pool, a, b, query, skip)
                if self._sweep_pays(tree, heap, pool.threshold(), hi - lo):
                    self._sweep(tree, pool, heap, query, skip)
                    return
            else:
                children = [c for c in (2 * node, 2 * node + 1) if tree.hi[c] > tree.lo[c]]
                if children:
                    push(children)

    def _sweep_pays(self, tree: _Tree, heap: list[tuple[float, int]], threshold: float, rows: int) -> bool:
        """True when the nodes that can still qualify hold at least half the rows of the range:
        bounds no longer prune, so scoring them in time order beats descending node by node."""
        if len(heap) < 2:
            return False
        open_rows = sum(int(tree.hi[n] - tree.lo[n]) for neg, n in heap if -neg >= threshold)
        return 2 * open_rows >= rows

    def _sweep(
        self,
        tree: _Tree,
        pool: _Pool,
        heap: list[tuple[float, int]],
        query: np.ndarray,
        skip: int | None,
    ) -> None:
        """Score every node left in ``heap`` that can still qualify, as few contiguous slices."""
        threshold = pool.threshold()
        spans = sorted((int(tree.lo[n]), int(tree.hi[n])) for neg, n in heap if -neg >= threshold)
        merged: list[list[int]] = []
        for a, b in spans:
            if merged and merged[-1][1] == a:
                merged[-1][1] = b
            else:
                merged.append([a, b])
        for a, b in merged:
            self._score_rows(tree, pool, a, b, query, skip)

    def _finish(self, pool: _Pool, query: np.ndarray) -> list[StructureHit]:
        if not pool.parts:
            return []
        approx = np.concatenate([p[2] for p in pool.parts])
        chosen = select_candidates(approx, pool.k, pool.eps)
        sources = np.concatenate([np.full(p[1].shape[0], p[0], dtype=np.int8) for p in pool.parts])
        rows = np.concatenate([p[1] for p in pool.parts])[chosen]
        from_buffer = sources[chosen] == 0
        ids: list[str] = []
        vectors = np.zeros((chosen.shape[0], query.shape[0]), dtype=np.float32)
        times = np.zeros(chosen.shape[0], dtype=np.float64)
        buffer_vecs, buffer_times = self._buffer.view()
        b_rows, t_rows = rows[from_buffer], rows[~from_buffer]
        if b_rows.shape[0]:
            vectors[from_buffer] = buffer_vecs[b_rows]
            times[from_buffer] = buffer_times[b_rows]
        if self._tree is not None and t_rows.shape[0]:
            vectors[~from_buffer] = self._tree.vecs[t_rows]
            times[~from_buffer] = self._tree.times[t_rows]
        buffer_ids, tree_ids = self._buffer.ids, (self._tree.ids if self._tree else [])
        for row, is_buffer in zip(rows.tolist(), from_buffer.tolist(), strict=True):
            ids.append(buffer_ids[row] if is_buffer else tree_ids[row])
        return top_by_key(ids, exact_scores(vectors, query), times.tolist(), pool.k)

    def _alive_run(self, tree: _Tree, start: int, stop: int, k: int, forward: bool) -> np.ndarray:
        """Up to ``k`` live rows walking from ``start`` towards ``stop``, plus rows tied in time."""
        found: list[np.ndarray] = []
        total = 0
        span = max(2 * k, 64)
        cursor = start
        while total < k and (cursor < stop if forward else cursor > stop):
            if forward:
                a, b = cursor, min(stop, cursor + span)
                cursor = b
            else:
                a, b = max(stop, cursor - span), cursor
                cursor = a
            live = a + np.flatnonzero(tree.alive[a:b])
            found.append(live if forward else live[::-1])
            total += live.shape[0]
            span *= 2
        if not found:
            return np.zeros(0, dtype=np.int64)
        rows = np.concatenate(found)
        if rows.shape[0] < k:
            return rows
        edge = tree.times[rows[k - 1]]
        if forward:
            limit = min(stop, int(np.searchsorted(tree.times, edge, "right")))
            extra = rows[k - 1] + 1 + np.flatnonzero(tree.alive[rows[k - 1] + 1 : limit])
        else:
            limit = max(stop, int(np.searchsorted(tree.times, edge, "left")))
            extra = limit + np.flatnonzero(tree.alive[limit : rows[k - 1]])
        return np.concatenate((rows[:k], extra))

    def _time_candidates(
        self, start: float, end: float, anchor_time: float | None, k: int, exclude: str | None
    ) -> tuple[list[str], np.ndarray]:
        """Ids and times of every row that can be among the k best by recency or time closeness."""
        ids: list[str] = []
        times: list[np.ndarray] = []
        buffer_rows = self._buffer_rows(start, end, exclude)
        ids.extend(self._buffer.ids[i] for i in buffer_rows)
        times.append(self._buffer.view()[1][buffer_rows])
        tree = self._tree
        if tree is not None:
            lo, hi = self._tree_interval(start, end)
            skip = tree.pos.get(exclude) if exclude is not None else None
            restore = skip is not None and bool(tree.alive[skip])
            if restore:
                tree.alive[skip] = False
            try:
                if anchor_time is None:
                    rows = self._alive_run(tree, hi, lo, k, forward=False)
                else:
                    split = int(np.clip(np.searchsorted(tree.times, anchor_time, "left"), lo, hi))
                    rows = np.concatenate(
                        (
                            self._alive_run(tree, split, hi, k, forward=True),
                            self._alive_run(tree, split, lo, k, forward=False),
                        )
                    )
            finally:
                if restore:
                    tree.alive[skip] = True
            ids.extend(tree.ids[i] for i in rows)
            times.append(tree.times[rows])
        return ids, np.concatenate(times)

    def _search_recent(self, k: int, start: float, end: float) -> list[StructureHit]:
        ids, times = self._time_candidates(start, end, None, k, None)
        chosen = top_with_ties(times, k)
        return top_by_key([ids[i] for i in chosen], [0.0] * len(chosen), times[chosen].tolist(), k)

    def _search_around(
        self, anchor_time: float, k: int, start: float, end: float, exclude: str
    ) -> list[StructureHit]:
        ids, times = self._time_candidates(start, end, anchor_time, k, exclude)
        closeness = -np.abs(times - anchor_time)
        chosen = top_with_ties(closeness, k)
        return top_by_key(
            [ids[i] for i in chosen], closeness[chosen].tolist(), times[chosen].tolist(), k
        )


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ContractError(f"{name} must be a positive integer, got {value!r}")
    return value


STRUCTURES.register(FlatStructure.name, FlatStructure)
STRUCTURES.register(SegmentTreeStructure.name, SegmentTreeStructure)
