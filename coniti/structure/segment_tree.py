"""``segment_tree``: time-sorted rows under a segment tree of centroid/radius bounds, searched
best-first (see :mod:`coniti.structure`; the rows are :class:`~coniti.structure.rows.SortedRows`).

The node statistics are derived from the rows lazily: a search first refreshes the blocks that changed
since the last search (``SortedRows.dirty_from``) and their ancestors. Rows added in time order only
touch the last blocks, so a bulk load (the engine adds chunks of 65,536) builds the statistics once,
at the first search, in O(n) numpy work with temporaries bounded by ``_STAT_ROWS`` rows.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from coniti.errors import ContractError
from coniti.structure.flat import SortedRowsStructure
from coniti.structure.rows import Pool, SortedRows
from coniti.structure.scoring import StructureHit, error_bound, fast_scores

if TYPE_CHECKING:
    from coniti.derived import BlockCheck

__all__ = ["SegmentTreeStructure"]

_STAT_ROWS = 65_536
"""Rows whose block statistics are computed in one numpy step (bounds the temporaries)."""


class _Nodes:
    """A segment tree over blocks of ``leaf`` main rows: per node the row interval [lo, hi), the
    float64-derived centroid (kept as float32) and a radius bounding every row's distance to it.

    Node ``1`` is the root and node ``i`` has children ``2i`` and ``2i + 1``; leaves are
    ``width .. 2 * width - 1`` (block ``b`` is node ``width + b``).
    """

    def __init__(self, leaf: int) -> None:
        self.leaf = leaf
        self.width = 0
        self.lo = np.zeros(0, dtype=np.int64)
        self.hi = np.zeros(0, dtype=np.int64)
        self.center = np.zeros((0, 0), dtype=np.float32)
        self.radius = np.zeros(0, dtype=np.float64)
        self.counts = np.zeros(0, dtype=np.float64)
        self.exact_center = np.zeros((0, 0), dtype=np.float64)

    def refresh(self, rows: SortedRows, dirty_from: int) -> None:
        """Bring the statistics in line with ``rows``, whose rows before ``dirty_from`` did not change."""
        n, dim = rows.n, rows.vecs.shape[1]
        leaf = self.leaf
        blocks = max(1, -(-n // leaf))
        first_block = min(dirty_from // leaf, blocks)
        rows.check_rows(first_block * leaf, n)
        if blocks > self.width or self.center.shape[1] != dim:
            self.width = 1 << (blocks - 1).bit_length()
            nodes = 2 * self.width
            self.lo = np.zeros(nodes, dtype=np.int64)
            self.hi = np.zeros(nodes, dtype=np.int64)
            self.center = np.zeros((nodes, dim), dtype=np.float32)
            self.exact_center = np.zeros((nodes, dim), dtype=np.float64)
            self.radius = np.zeros(nodes, dtype=np.float64)
            self.counts = np.zeros(nodes, dtype=np.float64)
            first_block = 0
        w = self.width
        starts = np.minimum(np.arange(first_block, w, dtype=np.int64) * leaf, n)
        self.lo[w + first_block :] = starts
        self.hi[w + first_block :] = np.minimum(starts + leaf, n)
        self.counts[w + first_block :] = (self.hi[w + first_block :] - starts).astype(np.float64)
        self.exact_center[w + first_block :] = 0.0
        self.radius[w + first_block :] = 0.0
        step = max(1, _STAT_ROWS // leaf)
        full = n // leaf
        for b0 in range(first_block, full, step):
            b1 = min(full, b0 + step)
            block = rows.vecs[b0 * leaf : b1 * leaf].reshape(b1 - b0, leaf, dim)
            centers = block.mean(axis=1, dtype=np.float64)
            self.exact_center[w + b0 : w + b1] = centers
            self.radius[w + b0 : w + b1] = _radii(block, centers)
        if full < blocks and full >= first_block and n > full * leaf:
            tail = rows.vecs[full * leaf : n][None]
            center = tail[0].mean(axis=0, dtype=np.float64)
            self.exact_center[w + full] = center
            self.radius[w + full] = _radii(tail, center[None])[0]
        self.center[w + first_block :] = self.exact_center[w + first_block :]
        lo_node, hi_node = w + first_block, 2 * w
        while lo_node > 1:
            lo_node, hi_node = lo_node // 2, hi_node // 2
            self._parents(lo_node, hi_node)

    def _parents(self, a: int, b: int) -> None:
        """Recompute internal nodes ``a .. b - 1`` from their children."""
        left, right = np.arange(2 * a, 2 * b, 2), np.arange(2 * a + 1, 2 * b, 2)
        left_n, right_n = self.counts[left], self.counts[right]
        total = left_n + right_n
        safe = np.where(total > 0, total, 1.0)
        left_c, right_c = self.exact_center[left], self.exact_center[right]
        merged = (left_c * left_n[:, None] + right_c * right_n[:, None]) / safe[:, None]
        reach_l = np.where(
            left_n > 0, np.linalg.norm(left_c - merged, axis=1) + self.radius[left], 0.0
        )
        reach_r = np.where(
            right_n > 0, np.linalg.norm(right_c - merged, axis=1) + self.radius[right], 0.0
        )
        self.radius[a:b] = np.maximum(reach_l, reach_r) * (1.0 + 1e-9) + 1e-9
        self.exact_center[a:b] = merged
        self.center[a:b] = merged
        self.counts[a:b] = total
        self.lo[a:b] = self.lo[left]
        self.hi[a:b] = self.hi[right]

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


class SegmentTreeStructure(SortedRowsStructure):
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
        self._leaf_size = _positive_int("leaf_size", leaf_size)
        self._direct_rows = _positive_int("direct_rows", direct_rows)
        super().__init__(buffer_min=buffer_min, buffer_fraction=buffer_fraction)
        self._nodes = _Nodes(self._leaf_size)
        self.rows_scored = 0
        """How many rows the last vector search scored (for measurements; pruning lowers it)."""

    @property
    def options(self) -> dict[str, Any]:
        return {
            "leaf_size": self._leaf_size,
            "direct_rows": self._direct_rows,
            **super().options,
        }

    def _clear(self) -> None:
        super()._clear()
        self._nodes = _Nodes(self._leaf_size)

    _NODE_ARRAYS = ("lo", "hi", "center", "radius", "counts", "exact_center")

    def derived_state(self) -> dict[str, np.ndarray]:
        """The rows' arrays plus the tree's (``node_*``; ``node_width`` holds the width)."""
        state = super().derived_state()
        tree = self._synced()
        state.update({f"node_{name}": getattr(tree, name) for name in self._NODE_ARRAYS})
        state["node_width"] = np.array([tree.width], dtype=np.int64)
        return state

    def restore_derived_state(
        self, state: dict[str, np.ndarray], checks: Mapping[str, BlockCheck] | None = None
    ) -> None:
        nodes = _Nodes(self._leaf_size)
        width = state.get("node_width")
        if width is None or width.shape != (1,) or any(f"node_{n}" not in state for n in self._NODE_ARRAYS):
            raise ContractError("the segment tree state lacks its node arrays")
        nodes.width = int(width[0])
        for name in self._NODE_ARRAYS:
            setattr(nodes, name, np.array(state[f"node_{name}"]))
        n = state["times"].shape[0]
        blocks = max(1, -(-n // self._leaf_size))
        if nodes.lo.shape != (2 * nodes.width,) or nodes.width < blocks:
            raise ContractError("the segment tree's nodes do not fit its rows")
        super().restore_derived_state(state, checks)
        self._nodes = nodes

    def _synced(self) -> _Nodes:
        """The node statistics, refreshed for the rows changed since the last search."""
        rows = self._rows
        if rows.dirty_from < rows.n or self._nodes.width == 0:
            self._nodes.refresh(rows, rows.dirty_from)
            rows.dirty_from = rows.n
        return self._nodes

    def _search_vector(
        self, query: np.ndarray, k: int, start: float, end: float, exclude: str | None,
        seq: int | None,
    ) -> list[StructureHit]:
        rows = self._rows
        lo, hi = rows.interval(start, end)
        if hi - lo <= self._direct_rows and rows.one_slice(lo, hi):  # one slice: the fused path
            self.rows_scored = hi - lo
            skip = rows.skip_row(exclude, seq)
            return rows.top_of_slice(query, k, error_bound(query.shape[0]), lo, hi, skip, seq)
        pool, skip = self._begin(query, k, start, end, exclude, seq)
        if hi - lo <= self._direct_rows:
            self._rows.score_slice(pool, lo, hi, query, skip, seq)
        else:
            self._best_first(self._synced(), pool, lo, hi, query, skip, seq)
        self.rows_scored = pool.scored
        return self._rows.finish(pool, query)

    def _best_first(
        self, tree: _Nodes, pool: Pool, lo: int, hi: int, query: np.ndarray, skip: int | None,
        seq: int | None,
    ) -> None:
        """Nodes in order of their bound; a node's bound covers all its rows, dead ones too, so it
        bounds the visible rows as of any event."""
        rows = self._rows
        pieces, nodes = tree.cover(lo, hi)
        for a, b in pieces:
            rows.score_slice(pool, a, b, query, skip, seq)
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
            if -negative < pool.threshold():
                break
            a, b = int(tree.lo[node]), int(tree.hi[node])
            if b - a <= self._direct_rows or node >= tree.width:
                rows.score_slice(pool, a, b, query, skip, seq)
                if _sweep_pays(tree, heap, pool.threshold(), hi - lo):
                    self._sweep(tree, pool, heap, query, skip, seq)
                    return
            else:
                children = [c for c in (2 * node, 2 * node + 1) if tree.hi[c] > tree.lo[c]]
                if children:
                    push(children)

    def _sweep(
        self,
        tree: _Nodes,
        pool: Pool,
        heap: list[tuple[float, int]],
        query: np.ndarray,
        skip: int | None,
        seq: int | None,
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
            self._rows.score_slice(pool, a, b, query, skip, seq)


def _sweep_pays(tree: _Nodes, heap: list[tuple[float, int]], threshold: float, rows: int) -> bool:
    """True when the nodes that can still qualify hold at least half the rows of the range:
    bounds no longer prune, so scoring them in time order beats descending node by node."""
    if len(heap) < 2:
        return False
    open_rows = sum(int(tree.hi[n] - tree.lo[n]) for neg, n in heap if -neg >= threshold)
    return 2 * open_rows >= rows


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ContractError(f"{name} must be a positive integer, got {value!r}")
    return value
