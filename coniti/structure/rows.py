"""Row stores shared by the exact structures: :class:`Rows` (insertion order, swap-remove) and
:class:`SortedRows` (time-sorted main rows plus a small unsorted buffer), and the candidate
:class:`Pool` that turns fast scores from both into exact hits.

:class:`SortedRows` keeps its main rows sorted by timestamp (rows with equal times in arrival order),
so a time range is the row interval ``[lo, hi)`` found by binary search and scored as one contiguous
slice. A batch whose rows are all at or after the newest main row (the common case: notes arrive in
time order, and memory is scanned in time order) is appended in place: amortised O(batch). Other rows
go to the buffer, which is merged into the main rows (in place, from the back) when it outgrows
``max(buffer_min, buffer_fraction * len(main))``; a merge moves only the main rows after the earliest
insertion point, so its cost is amortised over the buffered rows. Removed main rows are tombstoned
and compacted away (in place) under the same threshold.

The main arrays grow in place by ``ndarray.resize`` (``realloc``: large blocks are remapped, not
copied), so building from n rows holds one copy of the rows plus ``1/4`` spare capacity, not the two
copies a grow-and-copy needs. No view of the main arrays outlives a method call (a view would stop the
resize, which then falls back to a copy).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from coniti.errors import ContractError
from coniti.structure.scoring import (
    StructureHit,
    exact_scores,
    fast_scores,
    select_candidates,
    top_by_key,
)

__all__ = ["Pool", "Rows", "SortedRows", "buffer_options"]

NEG_INF = np.float32(-np.inf)
_CHUNK = 16_384
"""Rows moved per step of an in-place merge or compaction (bounds the temporaries)."""


def buffer_options(buffer_min: Any, buffer_fraction: Any) -> tuple[int, float]:
    """Validated ``buffer_min`` (positive int) and ``buffer_fraction`` (in (0, 1])."""
    if isinstance(buffer_min, bool) or not isinstance(buffer_min, int) or buffer_min < 1:
        raise ContractError(f"buffer_min must be a positive integer, got {buffer_min!r}")
    if (
        isinstance(buffer_fraction, bool)
        or not isinstance(buffer_fraction, int | float)
        or not 0.0 < buffer_fraction <= 1.0
    ):
        raise ContractError(f"buffer_fraction must be in (0, 1], got {buffer_fraction!r}")
    return buffer_min, float(buffer_fraction)


def _copy_grown(array: np.ndarray, rows: int) -> np.ndarray:
    """A copy of ``array`` with room for ``rows`` leading rows."""
    out = np.zeros((rows, *array.shape[1:]), dtype=array.dtype)
    out[: array.shape[0]] = array
    return out


class Rows:
    """Growable contiguous rows: ids, unit float32 vectors, float64 times; swap-remove."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
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
            self.vecs = _copy_grown(self.vecs, cap)
            self.times = _copy_grown(self.times, cap)
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

    def in_range(self, start: float, end: float, exclude: str | None) -> np.ndarray:
        """Positions of rows with ``start <= t < end``, without ``exclude``."""
        _, times = self.view()
        mask = (times >= start) & (times < end)
        if exclude is not None and exclude in self.pos:
            mask[self.pos[exclude]] = False
        return np.flatnonzero(mask)


class SortedRows:
    """Time-sorted main rows (tombstones for removals) plus an unsorted :class:`Rows` buffer.

    ``dirty_from`` is the first main row changed (appended, moved or overwritten) since the owner last
    reset it; the segment tree uses it to refresh only the blocks that changed.
    """

    def __init__(self, buffer_min: int, buffer_fraction: float) -> None:
        self.buffer_min = buffer_min
        self.buffer_fraction = buffer_fraction
        self.dirty_from = 0
        self.clear()

    def clear(self) -> None:
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.vecs = np.zeros((0, 0), dtype=np.float32)
        self.times = np.zeros(0, dtype=np.float64)
        self.alive = np.zeros(0, dtype=bool)
        self.dead = 0
        self.buffer = Rows()
        self.dirty_from = 0

    @property
    def n(self) -> int:
        """Main rows, dead ones included."""
        return len(self.ids)

    def __len__(self) -> int:
        return len(self.ids) - self.dead + len(self.buffer)

    def __contains__(self, id_: object) -> bool:
        return id_ in self.pos or id_ in self.buffer.pos

    def vector(self, id_: str) -> np.ndarray:
        row = self.buffer.pos.get(id_)
        source = self.buffer.vecs if row is not None else self.vecs
        out: np.ndarray = source[row if row is not None else self.pos[id_]].copy()
        return out

    def timestamp(self, id_: str) -> float:
        row = self.buffer.pos.get(id_)
        if row is not None:
            return float(self.buffer.times[row])
        return float(self.times[self.pos[id_]])

    def _limit(self) -> float:
        return max(self.buffer_min, self.buffer_fraction * self.n)

    # -- writes ----------------------------------------------------------------------------------

    def add(self, ids: list[str], unit: np.ndarray, times: np.ndarray) -> None:
        """Append in place when every row is at or after the newest main row, else buffer them."""
        if self.vecs.shape[1] != unit.shape[1]:
            self.vecs = np.zeros((0, unit.shape[1]), dtype=np.float32)
        n = self.n
        if n == 0 or times.min() >= self.times[n - 1]:
            if times.shape[0] > 1 and not (np.diff(times) >= 0).all():
                order = np.argsort(times, kind="stable")
                ids, unit, times = [ids[i] for i in order], unit[order], times[order]
            self._append(ids, unit, times)
            return
        self.buffer.append(ids, unit, times)
        if len(self.buffer) > self._limit():
            self.merge()

    def _reserve(self, rows: int) -> None:
        """Room for ``rows`` main rows: grow by at least a quarter, in place (``ndarray.resize``:
        ``realloc``, which remaps large blocks instead of copying them) unless a view is alive."""
        if rows <= self.vecs.shape[0]:
            return
        cap = max(16, rows, self.vecs.shape[0] + self.vecs.shape[0] // 4)
        dim = self.vecs.shape[1]
        try:  # written out per array: a helper's own reference would fail the reference check
            self.vecs.resize((cap, dim), refcheck=True)
        except ValueError:
            self.vecs = _copy_grown(self.vecs, cap)
        try:
            self.times.resize(cap, refcheck=True)
        except ValueError:
            self.times = _copy_grown(self.times, cap)
        try:
            self.alive.resize(cap, refcheck=True)
        except ValueError:
            self.alive = _copy_grown(self.alive, cap)

    def _append(self, ids: list[str], unit: np.ndarray, times: np.ndarray) -> None:
        n, m = self.n, len(ids)
        self._reserve(n + m)
        self.vecs[n : n + m] = unit
        self.times[n : n + m] = times
        self.alive[n : n + m] = True
        self.pos.update(zip(ids, range(n, n + m), strict=True))
        self.ids.extend(ids)
        self.dirty_from = min(self.dirty_from, n)

    def remove(self, ids: list[str]) -> None:
        """Remove stored ids: buffer rows at once, main rows by tombstone (compacted past the limit)."""
        for id_ in ids:
            if id_ in self.buffer.pos:
                self.buffer.remove([id_])
            else:
                self.alive[self.pos.pop(id_)] = False
                self.dead += 1
        if self.dead > self._limit() or (self.dead and self.dead == self.n):
            self.compact()

    def merge(self) -> None:
        """Move the buffer into the main rows, in place from the back; the buffer is emptied."""
        m = len(self.buffer)
        if not m:
            return
        b_vecs, b_times = self.buffer.view()
        order = np.argsort(b_times, kind="stable")
        b_ids = [self.buffer.ids[i] for i in order]
        b_vecs, b_times = b_vecs[order], b_times[order]
        self.buffer = Rows()
        n = self.n
        ins = np.searchsorted(self.times[:n], b_times, "right")  # after equal main rows
        first = int(ins[0])
        self._reserve(n + m)
        # main row i moves to i + (buffered rows inserted at or before i)
        shift = np.searchsorted(ins, np.arange(first, n), "right")
        for stop in range(n, first, -_CHUNK):
            a = max(first, stop - _CHUNK)
            dest = np.arange(a, stop) + shift[a - first : stop - first]
            self.vecs[dest] = self.vecs[a:stop]
            self.times[dest] = self.times[a:stop]
            self.alive[dest] = self.alive[a:stop]
        at = ins + np.arange(m)
        self.vecs[at] = b_vecs
        self.times[at] = b_times
        self.alive[at] = True
        tail = self.ids[first:]
        merged: list[str] = []
        prev = first
        for j, i in enumerate(ins.tolist()):
            merged.extend(tail[prev - first : i - first])
            merged.append(b_ids[j])
            prev = i
        merged.extend(tail[prev - first :])
        del self.ids[first:]
        self.ids.extend(merged)
        self._reposition(first)

    def compact(self) -> None:
        """Drop tombstoned main rows, in place, keeping time order."""
        n = self.n
        if not self.dead:
            return
        first = int(np.argmin(self.alive[:n]))
        write = first
        for a in range(first, n, _CHUNK):
            b = min(n, a + _CHUNK)
            keep = a + np.flatnonzero(self.alive[a:b])
            c = keep.shape[0]
            self.vecs[write : write + c] = self.vecs[keep]
            self.times[write : write + c] = self.times[keep]
            write += c
        kept = first + np.flatnonzero(self.alive[first:n])
        ids = [self.ids[i] for i in kept.tolist()]
        del self.ids[first:]
        self.ids.extend(ids)
        self.alive[first:write] = True
        self.alive[write:n] = False
        self.dead = 0
        self._reposition(first)

    def _reposition(self, first: int) -> None:
        n = self.n
        live = first + np.flatnonzero(self.alive[first:n])
        self.pos.update(zip([self.ids[i] for i in live.tolist()], live.tolist(), strict=True))
        self.dirty_from = min(self.dirty_from, first)

    # -- reads -----------------------------------------------------------------------------------

    def interval(self, start: float, end: float) -> tuple[int, int]:
        """The main rows ``[lo, hi)`` with ``start <= t < end``."""
        times = self.times[: self.n]
        lo = 0 if start == -math.inf else int(np.searchsorted(times, start, "left"))
        hi = len(times) if end == math.inf else int(np.searchsorted(times, end, "left"))
        return lo, max(lo, hi)

    def score_slice(
        self, pool: Pool, lo: int, hi: int, query: np.ndarray, skip: int | None
    ) -> None:
        """Offer main rows ``[lo, hi)`` to ``pool`` (dead rows and ``skip`` never qualify)."""
        if lo >= hi:
            return
        approx = fast_scores(self.vecs[lo:hi], query)
        if self.dead:
            approx[~self.alive[lo:hi]] = NEG_INF
        if skip is not None and lo <= skip < hi:
            approx[skip - lo] = NEG_INF
        pool.offer(1, np.arange(lo, hi), approx)

    def score_buffer(
        self, pool: Pool, start: float, end: float, query: np.ndarray, exclude: str | None
    ) -> None:
        """Offer the buffered rows with ``start <= t < end`` (without ``exclude``) to ``pool``."""
        rows = self.buffer.in_range(start, end, exclude)
        if rows.shape[0]:
            pool.offer(0, rows, fast_scores(self.buffer.vecs[rows], query))

    def finish(self, pool: Pool, query: np.ndarray) -> list[StructureHit]:
        """The exact top ``pool.k`` among the pool's candidates."""
        if not pool.parts:
            return []
        approx = np.concatenate([p[2] for p in pool.parts])
        chosen = select_candidates(approx, pool.k, pool.eps)
        sources = np.concatenate([np.full(p[1].shape[0], p[0], dtype=np.int8) for p in pool.parts])
        rows = np.concatenate([p[1] for p in pool.parts])[chosen]
        from_buffer = sources[chosen] == 0
        vectors = np.zeros((chosen.shape[0], query.shape[0]), dtype=np.float32)
        times = np.zeros(chosen.shape[0], dtype=np.float64)
        b_rows, m_rows = rows[from_buffer], rows[~from_buffer]
        if b_rows.shape[0]:
            vectors[from_buffer] = self.buffer.vecs[b_rows]
            times[from_buffer] = self.buffer.times[b_rows]
        if m_rows.shape[0]:
            vectors[~from_buffer] = self.vecs[m_rows]
            times[~from_buffer] = self.times[m_rows]
        ids = [
            self.buffer.ids[row] if is_buffer else self.ids[row]
            for row, is_buffer in zip(rows.tolist(), from_buffer.tolist(), strict=True)
        ]
        return top_by_key(ids, exact_scores(vectors, query), times.tolist(), pool.k)

    def _alive_run(self, start: int, stop: int, k: int, forward: bool) -> np.ndarray:
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
            live = a + np.flatnonzero(self.alive[a:b])
            found.append(live if forward else live[::-1])
            total += live.shape[0]
            span *= 2
        if not found:
            return np.zeros(0, dtype=np.int64)
        rows = np.concatenate(found)
        if rows.shape[0] < k:
            return rows
        times = self.times[: self.n]
        edge = times[rows[k - 1]]
        if forward:
            limit = min(stop, int(np.searchsorted(times, edge, "right")))
            extra = rows[k - 1] + 1 + np.flatnonzero(self.alive[rows[k - 1] + 1 : limit])
        else:
            limit = max(stop, int(np.searchsorted(times, edge, "left")))
            extra = limit + np.flatnonzero(self.alive[limit : rows[k - 1]])
        return np.concatenate((rows[:k], extra))

    def time_candidates(
        self, start: float, end: float, anchor_time: float | None, k: int, exclude: str | None
    ) -> tuple[list[str], np.ndarray]:
        """Ids and times of every row that can be among the k best by recency (``anchor_time``
        None) or by closeness in time to ``anchor_time``."""
        buffer_rows = self.buffer.in_range(start, end, exclude)
        ids = [self.buffer.ids[i] for i in buffer_rows]
        times = [self.buffer.times[buffer_rows]]
        lo, hi = self.interval(start, end)
        skip = self.pos.get(exclude) if exclude is not None else None
        if skip is not None:
            self.alive[skip] = False
        try:
            if anchor_time is None:
                rows = self._alive_run(hi, lo, k, forward=False)
            else:
                split = int(np.clip(np.searchsorted(self.times[: self.n], anchor_time), lo, hi))
                rows = np.concatenate(
                    (
                        self._alive_run(split, hi, k, forward=True),
                        self._alive_run(split, lo, k, forward=False),
                    )
                )
        finally:
            if skip is not None:
                self.alive[skip] = True
        ids.extend(self.ids[i] for i in rows.tolist())
        times.append(self.times[rows])
        return ids, np.concatenate(times)


class Pool:
    """Rows scored so far during one search: fast scores per source (0 buffer, 1 main rows) and the
    running k-th best."""

    def __init__(self, k: int, eps: float) -> None:
        self.k = k
        self.eps = eps
        self.parts: list[tuple[int, np.ndarray, np.ndarray]] = []
        self.best = np.zeros(0, dtype=np.float32)
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
        qualify (removed, or the anchor)."""
        self.scored += rows.shape[0]
        keep = approx > NEG_INF
        if not keep.all():
            rows, approx = rows[keep], approx[keep]
        if rows.shape[0]:
            self.parts.append((source, rows, approx))
