"""``segment_tree``: time-sorted rows under a segment tree of centroid/radius bounds, searched
best-first, with an unsorted buffer for new rows (see :mod:`coniti.structure`)."""

from __future__ import annotations

import heapq
import math
from typing import Any, ClassVar

import numpy as np

from coniti.errors import ContractError
from coniti.structure.base import Structure
from coniti.structure.flat import Rows
from coniti.structure.scoring import (
    StructureHit,
    error_bound,
    exact_scores,
    fast_scores,
    select_candidates,
    top_by_key,
    top_with_ties,
)

__all__ = ["SegmentTreeStructure"]

_NEG_INF = np.float32(-np.inf)

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
        self._buffer = Rows()
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
        self._buffer = Rows()
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
        self._buffer = Rows()

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
