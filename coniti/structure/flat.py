"""``flat``: time-sorted contiguous rows; a time range is one slice found by binary search and scored
with one product (see :mod:`coniti.structure.rows` for how rows stay sorted)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from coniti.structure.base import Structure
from coniti.structure.rows import Pool, RowPositions, SortedRows, buffer_options
from coniti.structure.scoring import StructureHit, error_bound, top_by_key, top_with_ties

if TYPE_CHECKING:
    from coniti.derived import BlockCheck

__all__ = ["FlatStructure", "SortedRowsStructure"]


class SortedRowsStructure(Structure):
    """A structure over one :class:`SortedRows`: membership, writes and the time-only searches
    (most recent, closest in time), shared by ``flat``, ``segment_tree`` and ``ann``. Rows are
    versioned (:attr:`~coniti.structure.Structure.supports_as_of`) and the rows persist as arrays
    (:meth:`derived_state`: ``vecs``, ``times``, ``born``, ``died``, ``id_bytes``, ``id_ends``); a
    restored ``vecs`` map is checked block by block as rows are read."""

    supports_as_of: ClassVar[bool] = True
    persistent: ClassVar[bool] = True
    checked_on_touch: ClassVar[frozenset[str]] = frozenset({"vecs"})

    def __init__(self, *, buffer_min: int = 1024, buffer_fraction: float = 0.125) -> None:
        super().__init__()
        self._buffer_min, self._buffer_fraction = buffer_options(buffer_min, buffer_fraction)
        self._rows = SortedRows(self._buffer_min, self._buffer_fraction)

    @property
    def options(self) -> dict[str, Any]:
        return {"buffer_min": self._buffer_min, "buffer_fraction": self._buffer_fraction}

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, id_: object) -> bool:
        return id_ in self._rows

    def stored_among(self, ids: Iterable[str]) -> set[str]:
        return self._rows.stored_among(ids)

    def _add(self, ids: list[str], unit: np.ndarray, times: np.ndarray, born: np.ndarray) -> None:
        self._rows.add(ids, unit, times, born)

    def _remove(self, ids: list[str], seq: int | None) -> None:
        self._rows.remove(ids, seq)

    def _end_each(self, ids: list[str], seqs: list[int]) -> None:
        if type(self)._remove is not SortedRowsStructure._remove:  # a subclass's own removal
            super()._end_each(ids, seqs)
        else:
            self._rows.end_each(ids, seqs)

    def _purge(self, ids: set[str]) -> int:
        return self._rows.purge(ids)

    def _set_born(self, ids: list[str], born: list[int]) -> None:
        self._rows.set_born(ids, born)

    def _row(self, id_: str, seq: int | None) -> tuple[np.ndarray, float] | None:
        if seq is None:
            return (
                (self._rows.vector(id_), self._rows.timestamp(id_)) if id_ in self._rows else None
            )
        return self._rows.row_at(id_, seq)

    def _count(self, seq: int | None) -> int:
        return self._rows.count_at(seq)

    def rows_among(self, ids: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
        """:meth:`Structure.rows_among`, the main rows' first (in the order of ``ids``), then the
        buffered ones; gathered with one ``take`` each, not row by row."""
        got = self.rows_at(self.positions(ids))
        assert got is not None  # read at the layout they were found at
        return got

    def positions(self, ids: Sequence[str]) -> RowPositions:
        """Where the stored ids among ``ids`` are in the rows now (:meth:`rows_at` reads them
        while the rows have not moved)."""
        rows_ = self._rows
        pos, bpos = rows_.pos, rows_.buffer.pos
        at = [pos.get(i, -1) for i in ids]
        main = np.array(at, dtype=np.int64)
        keep = main >= 0
        found = [i for i, r in zip(ids, at, strict=True) if r >= 0]
        brows = np.zeros(0, dtype=np.int64)
        if bpos and not keep.all():
            extra = [(i, bpos[i]) for i, r in zip(ids, at, strict=True) if r < 0 and i in bpos]
            if extra:
                brows = np.array([b for _, b in extra], dtype=np.int64)
                found += [i for i, _ in extra]
        return RowPositions(rows_, rows_.layout, found, main[keep], brows)

    def rows_at(self, at: RowPositions) -> tuple[list[str], np.ndarray, np.ndarray] | None:
        """The ids, unit float32 rows and timestamps at ``at`` (as :meth:`rows_among` gives them),
        or None when the rows moved since ``at`` was read (:attr:`SortedRowStore.layout`) or
        ``at`` is another structure's."""
        rows_ = self._rows
        if at.store is not rows_ or at.layout != rows_.layout:
            return None
        rows, brows = at.main, at.buffered
        vecs: list[np.ndarray] = []
        times: list[np.ndarray] = []
        if rows.shape[0]:
            rows_.check_rows(int(rows.min()), int(rows.max()) + 1)
            vecs.append(rows_.vecs.take(rows, axis=0))
            times.append(rows_.times.take(rows))
        if brows.shape[0]:
            vecs.append(rows_.buffer.vecs.take(brows, axis=0))
            times.append(rows_.buffer.times.take(brows))
        if not vecs:
            return (
                [],
                np.zeros((0, rows_.vecs.shape[1]), dtype=np.float32),
                np.zeros(0, dtype=np.float64),
            )
        return at.ids, np.concatenate(vecs), np.concatenate(times)

    def live_ids(self) -> list[str]:
        return [*self._rows.pos, *self._rows.buffer.pos]

    @property
    def sorted_rows(self) -> SortedRows:
        """The rows themselves, for searches over several structures at once
        (:func:`~coniti.structure.across.top_across`); read them, never modify."""
        return self._rows

    def derived_state(self) -> dict[str, np.ndarray]:
        return self._rows.state()

    def restore_derived_state(
        self, state: dict[str, np.ndarray], checks: Mapping[str, BlockCheck] | None = None
    ) -> None:
        self._rows.restore(state, (checks or {}).get("vecs"))
        self._dim = int(state["vecs"].shape[1]) if state["vecs"].shape[0] else None

    def _clear(self) -> None:
        self._rows.clear()

    def _vector(self, id_: str) -> np.ndarray:
        return self._rows.vector(id_)

    def _timestamp(self, id_: str) -> float:
        return self._rows.timestamp(id_)

    def optimize(self) -> None:
        """Merge the buffer and drop removed rows now (searches never need it; it only speeds them)."""
        self._rows.merge()
        self._rows.compact()

    def _begin(
        self,
        query: np.ndarray,
        k: int,
        start: float,
        end: float,
        exclude: str | None,
        seq: int | None,
    ) -> tuple[Pool, int | None]:
        """A pool already offered the range's buffered rows, and the main row of ``exclude`` (None
        when it is not a main row)."""
        rows = self._rows
        pool = Pool(k, error_bound(query.shape[0]))
        rows.score_buffer(pool, start, end, query, exclude, seq)
        return pool, rows.skip_row(exclude, seq)

    def _exact_search(
        self,
        query: np.ndarray,
        k: int,
        start: float,
        end: float,
        exclude: str | None,
        seq: int | None,
    ) -> list[StructureHit]:
        """Exact top ``k``: the range's slice scored in one product, plus the buffered rows."""
        rows = self._rows
        lo, hi = rows.interval(start, end)
        if rows.one_slice(lo, hi):
            skip = rows.skip_row(exclude, seq)
            return rows.top_of_slice(query, k, error_bound(query.shape[0]), lo, hi, skip, seq)
        pool, skip = self._begin(query, k, start, end, exclude, seq)
        self._rows.score_slice(pool, lo, hi, query, skip, seq)
        return self._rows.finish(pool, query)

    def _search_recent(
        self, k: int, start: float, end: float, seq: int | None
    ) -> list[StructureHit]:
        ids, times = self._rows.time_candidates(start, end, None, k, None, seq)
        chosen = top_with_ties(times, k)
        return top_by_key([ids[i] for i in chosen], [0.0] * len(chosen), times[chosen].tolist(), k)

    def _search_around(
        self, anchor_time: float, k: int, start: float, end: float, exclude: str, seq: int | None
    ) -> list[StructureHit]:
        ids, times = self._rows.time_candidates(start, end, anchor_time, k, exclude, seq)
        closeness = -np.abs(times - anchor_time)
        chosen = top_with_ties(closeness, k)
        return top_by_key(
            [ids[i] for i in chosen], closeness[chosen].tolist(), times[chosen].tolist(), k
        )


class FlatStructure(SortedRowsStructure):
    """Exact cosine top-k: the time range's slice of the sorted rows, scored in one product
    (O(rows in the range) per search)."""

    name: ClassVar[str] = "flat"

    def _search_vector(
        self,
        query: np.ndarray,
        k: int,
        start: float,
        end: float,
        exclude: str | None,
        seq: int | None,
    ) -> list[StructureHit]:
        return self._exact_search(query, k, start, end, exclude, seq)
