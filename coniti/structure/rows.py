"""Row stores shared by the exact structures: :class:`Rows` (insertion order, swap-remove) and
:class:`SortedRows` (time-sorted main rows plus a small unsorted buffer: kept by its base
:class:`SortedRowStore`, searched by it), which offers fast scores from both to a candidate
:class:`~coniti.structure.pool.Pool` that it turns into exact hits.

:class:`SortedRows` keeps its main rows sorted by timestamp (rows with equal times in arrival order),
so a time range is the row interval ``[lo, hi)`` found by binary search and scored as one contiguous
slice. A batch whose rows are all at or after the newest main row (the common case: notes arrive in
time order, and memory is scanned in time order) is appended in place: amortised O(batch). Other rows
go to the buffer, which is merged into the main rows (in place, from the back) when it outgrows
``max(buffer_min, buffer_fraction * len(main))``; a merge moves only the main rows after the earliest
insertion point, so its cost is amortised over the buffered rows.

**Versioned rows.** Every row carries the sequence numbers between which it was live: ``born`` (the
event that wrote it) and ``died`` (the event that ended it; :data:`LIVE` while it is live). A row is
visible as of event ``S`` when ``born <= S < died``; the current rows are those with ``died == LIVE``
(the ``alive`` mask). A removal *with* a sequence number keeps the row (history); a removal without
one *purges* it (``died = born``: visible at no point), and purged rows are compacted away (in place)
under the buffer's threshold. Rows kept for history cost their vector and 25 bytes each: memory
holds every version ever written, not only the live ones.

The main arrays grow in place by ``ndarray.resize`` (``realloc``: large blocks are remapped, not
copied), so building from n rows holds one copy of the rows plus ``1/4`` spare capacity, not the two
copies a grow-and-copy needs. No view of the main arrays outlives a method call (a view would stop the
resize, which then falls back to a copy). The vectors may be a read-only memory map (see
:meth:`SortedRows.restore`): new rows then go to the buffer, and the map is copied into memory only
when a merge or compaction must rewrite the main rows. A map restored with a
:class:`~coniti.derived.BlockCheck` is read only after the blocks of the rows read passed it
(:meth:`SortedRows.check_rows`); a block that fails raises :class:`~coniti.derived.StaleSnapshot`
(a merge checks every block before it moves a row; after one, the owner rebuilds the rows: the
engine does).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from coniti.derived import BlockCheck, pack_strings
from coniti.errors import ContractError, StructureError
from coniti.packed import LOOKUP_BUDGET, PackedStrings, index_arrays, indexed
from coniti.structure import scoring
from coniti.structure.pool import NEG_INF, Pool, float32_at_most, kth_largest
from coniti.structure.scoring import (
    StructureHit,
    exact_scores,
    fast_scores,
    fsum_unsure,
    hits,
    ranked,
    select_candidates,
    top_by_key,
)

__all__ = ["LIVE", "Pool", "Rows", "SortedRows", "buffer_options"]

LIVE = np.iinfo(np.int64).max
"""The ``died`` of a row that is live now."""

_CHUNK = 2_048
"""Rows moved per step of an in-place merge or compaction (bounds the temporaries: 3 MiB of 384-dim
float32 rows, which stay in cache; 16,384 rows' took longer to move per row)."""


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


def visible(born: np.ndarray, died: np.ndarray, seq: int | None) -> np.ndarray:
    """The rows live now (``seq`` None) or as of event ``seq``."""
    if seq is None:
        out: np.ndarray = died == LIVE
        return out
    return (born <= seq) & (died > seq)


class Rows:
    """Growable contiguous rows: ids, unit float32 vectors, float64 times, born/died; swap-remove.

    ``pos`` maps the id of each live row to its position; dead rows (kept for history) are not in it."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.vecs = np.zeros((0, 0), dtype=np.float32)
        self.times = np.zeros(0, dtype=np.float64)
        self.born = np.zeros(0, dtype=np.int64)
        self.died = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        """Live rows."""
        return len(self.pos)

    @property
    def n(self) -> int:
        """Rows, dead ones included."""
        return len(self.ids)

    def append(self, ids: list[str], unit: np.ndarray, times: np.ndarray, born: np.ndarray) -> None:
        n, m = len(self.ids), len(ids)
        if self.vecs.shape[1] != unit.shape[1]:
            self.vecs = np.zeros((0, unit.shape[1]), dtype=np.float32)
        if n + m > self.vecs.shape[0]:
            cap = max(16, n + m, 2 * self.vecs.shape[0])
            self.vecs = _copy_grown(self.vecs, cap)
            self.times = _copy_grown(self.times, cap)
            self.born = _copy_grown(self.born, cap)
            self.died = _copy_grown(self.died, cap)
        self.vecs[n : n + m] = unit
        self.times[n : n + m] = times
        self.born[n : n + m] = born
        self.died[n : n + m] = LIVE
        self.pos.update(zip(ids, range(n, n + m), strict=True))
        self.ids.extend(ids)

    def empty(self) -> None:
        """Drop every row, keeping the arrays (their capacity) for the rows appended next."""
        self.ids = []
        self.pos = {}

    def kill(self, id_: str, seq: int) -> None:
        """End the live row of ``id_`` at event ``seq``; the row stays (history)."""
        self.died[self.pos.pop(id_)] = seq

    def remove_rows(self, rows: list[int]) -> None:
        """Drop rows by position (highest first, so swaps never move a row still to drop)."""
        for row in sorted(set(rows), reverse=True):
            id_ = self.ids[row]
            if self.pos.get(id_) == row:
                del self.pos[id_]
            last = len(self.ids) - 1
            if row != last:
                moved = self.ids[last]
                self.ids[row] = moved
                self.vecs[row] = self.vecs[last]
                self.times[row] = self.times[last]
                self.born[row] = self.born[last]
                self.died[row] = self.died[last]
                if self.pos.get(moved) == last:
                    self.pos[moved] = row
            self.ids.pop()

    def view(self) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.ids)
        return self.vecs[:n], self.times[:n]

    def in_range(self, start: float, end: float, exclude: str | None, seq: int | None = None) -> np.ndarray:
        """Positions of rows visible now (or as of ``seq``) with ``start <= t < end``, without
        ``exclude`` (the id's live row now, or every row of it as of ``seq``)."""
        n = len(self.ids)
        if not n:
            return np.zeros(0, dtype=np.int64)
        times = self.times[:n]
        mask = (times >= start) & (times < end) & visible(self.born[:n], self.died[:n], seq)
        if exclude is not None:
            if seq is None:
                if exclude in self.pos:
                    mask[self.pos[exclude]] = False
            else:
                for i, id_ in enumerate(self.ids):
                    if id_ == exclude:
                        mask[i] = False
        return np.flatnonzero(mask)


@dataclass(frozen=True)
class RowPositions:
    """Where some ids' rows are in ``store`` at its ``layout``: the ``ids`` found (the main rows'
    first, then the buffered ones), their ``main`` row numbers then their ``buffered`` ones; valid
    while ``store.layout`` stays (:meth:`coniti.structure.flat.SortedRowsStructure.rows_at`)."""

    store: SortedRowStore
    layout: int
    ids: list[str]
    main: np.ndarray
    buffered: np.ndarray


class SortedRowStore:
    """Time-sorted main rows (dead rows stay, masked) plus an unsorted :class:`Rows` buffer: how
    the rows are kept (ids, packed or not; versions; writes, merge and compaction; the snapshot
    arrays). The searches over them are :class:`SortedRows`, the class the structures use.

    ``dirty_from`` is the first main row changed (appended, moved or overwritten) since the owner last
    reset it; the segment tree uses it to refresh only the blocks that changed. ``dead`` counts main
    rows that are not live (searches then mask), ``purged`` those visible at no point (compacted).
    ``layout`` changes whenever a row is added, ended, dropped or moved (a write, a merge, a
    compaction, a clear or a restore): row numbers read at one ``layout`` hold while it stays.
    """

    def __init__(self, buffer_min: int, buffer_fraction: float) -> None:
        self.buffer_min = buffer_min
        self.buffer_fraction = buffer_fraction
        self.dirty_from = 0
        self.layout = 0
        self.clear()

    def clear(self) -> None:
        self.layout += 1
        self._ids: list[str] | None = []
        self._pos: dict[str, int] | None = {}
        self._packed: PackedStrings | None = None
        self._n_packed = 0
        self._lookups = 0
        self.vecs = np.zeros((0, 0), dtype=np.float32)
        self.times = np.zeros(0, dtype=np.float64)
        self.alive = np.zeros(0, dtype=bool)
        self.born = np.zeros(0, dtype=np.int64)
        self.died = np.zeros(0, dtype=np.int64)
        self.dead = 0
        self.purged = 0
        self.buffer = Rows()
        self.dirty_from = 0
        self._check: BlockCheck | None = None

    def check_rows(self, a: int, b: int) -> None:
        """Before main rows ``[a, b)`` of a restored map are read: check their blocks."""
        if self._check is not None:
            self._check.rows(a, b)
            if self._check.done:
                self._check = None

    # ``ids`` (per main row) and ``pos`` (id -> main row of its live version) are built from the
    # packed ids of a restored snapshot only when first needed: a search that only reads the ids of
    # its hits (``id_at``) never builds them, and up to ``LOOKUP_BUDGET`` lookups of one id
    # (membership, a removal, the fold of a few events) search the packed ids instead (``_main``).

    @property
    def packed(self) -> bool:
        """Whether the main rows' ids are still those of a restored snapshot, packed."""
        return self._packed is not None

    def _searchable(self, lookups: int) -> bool:
        """Whether ``lookups`` more searches of the packed ids are worth it (counted if so); if
        not (or nothing is packed) the ids are unpacked and ``pos`` answers."""
        if self._packed is None:
            return False
        if self._lookups + lookups <= LOOKUP_BUDGET:
            self._lookups += lookups
            return True
        self._unpack()
        return False

    def _main(self, id_: str) -> int | None:
        """The main row of the live version of ``id_``, or None."""
        if self._packed is None or not self._searchable(1):
            return self.pos.get(id_)
        for row in self._packed.find(id_).tolist():
            if self.alive[row]:
                return int(row)
        return None

    def _mains(self, ids: list[str]) -> Iterator[int | None]:
        """:meth:`_main` of each of ``ids``, in order: while the ids stay packed, one
        :meth:`~coniti.packed.PackedStrings.find_each` for all of them (counted as ``len(ids)``
        searches)."""
        if self._packed is None or not self._searchable(len(ids)):
            return map(self.pos.get, ids)
        alive = self.alive
        return (next((r for r in at if alive[r]), None) for at in self._packed.find_each(ids))

    def _main_rows(self, id_: str) -> list[int]:
        """Every main row of ``id_`` (live or kept for history), ascending."""
        if self._searchable(1):
            assert self._packed is not None
            return [int(r) for r in self._packed.find(id_).tolist()]
        return [i for i, x in enumerate(self.ids) if x == id_]

    @property
    def ids(self) -> list[str]:
        """The id of each main row."""
        if self._ids is None:
            self._unpack()
        assert self._ids is not None
        return self._ids

    @property
    def pos(self) -> dict[str, int]:
        """The main row of each live id."""
        if self._pos is None:
            self._unpack()
        assert self._pos is not None
        return self._pos

    def _unpack(self) -> None:
        """Decode the packed ids into ``ids`` and ``pos``, pairing each main row's id with its
        ``alive``: call it (through :meth:`_unpacked`) before any main row moves, or ids and
        liveness of different rows are paired."""
        assert self._packed is not None
        ids = self._packed.tolist()
        live = np.flatnonzero(self.alive[: len(ids)])
        pos = dict(zip([ids[i] for i in live.tolist()], live.tolist(), strict=True))
        if len(pos) != live.shape[0] or len(ids) != self._n_packed:
            raise StructureError("the restored rows hold two live rows of one id")
        self._pos = pos
        self._ids = ids
        self._packed = None

    def _unpacked(self) -> None:
        """Decode packed ids now, if still packed: what a merge or compaction does before it moves
        a row."""
        if self._packed is not None:
            self._unpack()

    def id_at(self, row: int) -> str:
        """The id of main row ``row``."""
        if self._ids is not None:
            return self._ids[row]
        assert self._packed is not None
        return self._packed[row]

    def ids_at(self, rows: np.ndarray | list[int]) -> list[str]:
        """The ids of main rows ``rows`` (an integer array or list), in that order."""
        if self._ids is not None:
            ids = self._ids
            return [ids[row] for row in (rows if isinstance(rows, list) else rows.tolist())]
        assert self._packed is not None
        return self._packed.take(np.asarray(rows, dtype=np.int64))

    @property
    def n(self) -> int:
        """Main rows, dead ones included."""
        return len(self._ids) if self._ids is not None else self._n_packed

    def __len__(self) -> int:
        """Live rows."""
        return self.n - self.dead + len(self.buffer)

    def __contains__(self, id_: object) -> bool:
        if not isinstance(id_, str):
            return False
        return id_ in self.buffer.pos or self._main(id_) is not None

    def stored_among(self, ids: Iterable[str]) -> set[str]:
        """The ids among ``ids`` with a live row: set operations on the id maps, or one search of
        the packed ids per id while they stay packed (:meth:`_searchable`)."""
        asked = ids if isinstance(ids, set | frozenset) else set(ids)
        found = self.buffer.pos.keys() & asked
        if self._searchable(len(asked)):
            assert self._packed is not None
            alive, listed = self.alive, list(asked)
            rows = self._packed.find_each(listed)
            found.update(id_ for id_, at in zip(listed, rows, strict=True) if any(alive[r] for r in at))
        else:
            found |= self.pos.keys() & asked
        return found

    def _live_main(self, id_: str) -> int:
        """:meth:`_main`, raising ``KeyError`` for an id with no live main row."""
        row = self._main(id_)
        if row is None:
            raise KeyError(id_)
        return row

    def vector(self, id_: str) -> np.ndarray:
        row = self.buffer.pos.get(id_)
        if row is None:
            row = self._live_main(id_)
            self.check_rows(row, row + 1)
            return np.array(self.vecs[row])
        out: np.ndarray = np.array(self.buffer.vecs[row])
        return out

    def timestamp(self, id_: str) -> float:
        row = self.buffer.pos.get(id_)
        if row is not None:
            return float(self.buffer.times[row])
        return float(self.times[self._live_main(id_)])

    def _limit(self) -> float:
        return max(self.buffer_min, self.buffer_fraction * self.n)

    # -- versions ----------------------------------------------------------------------------------

    def count_at(self, seq: int | None) -> int:
        """Rows live now (``seq`` None) or as of event ``seq``."""
        if seq is None:
            return len(self)
        n, b = self.n, self.buffer.n
        main = int(np.count_nonzero(visible(self.born[:n], self.died[:n], seq)))
        return main + int(np.count_nonzero(visible(self.buffer.born[:b], self.buffer.died[:b], seq)))

    def row_at(self, id_: str, seq: int) -> tuple[np.ndarray, float] | None:
        """``(vector, timestamp)`` of the row of ``id_`` visible as of ``seq``, or None. O(rows):
        versions are not indexed by id."""
        for i in self._main_rows(id_):
            if self.born[i] <= seq < self.died[i]:
                self.check_rows(i, i + 1)
                return np.array(self.vecs[i]), float(self.times[i])
        buffer = self.buffer
        for i, x in enumerate(buffer.ids):
            if x == id_ and buffer.born[i] <= seq < buffer.died[i]:
                return np.array(buffer.vecs[i]), float(buffer.times[i])
        return None

    # -- writes ----------------------------------------------------------------------------------

    def add(self, ids: list[str], unit: np.ndarray, times: np.ndarray, born: np.ndarray) -> None:
        """Append in place when every row is at or after the newest main row (and the main rows are
        writable), else buffer them."""
        self.layout += 1
        if self.vecs.shape[1] != unit.shape[1]:
            self.vecs = np.zeros((0, unit.shape[1]), dtype=np.float32)
        n = self.n
        if (n == 0 or times.min() >= self.times[n - 1]) and self.vecs.flags.writeable:
            if times.shape[0] > 1 and not (np.diff(times) >= 0).all():
                order = np.argsort(times, kind="stable")
                ids, unit, times, born = [ids[i] for i in order], unit[order], times[order], born[order]
            self._append(ids, unit, times, born)
            return
        self.buffer.append(ids, unit, times, born)
        if len(self.buffer) > self._limit():
            self.merge()

    def _own(self) -> None:
        """Copy a read-only (mapped) vector matrix into memory before rewriting it."""
        if not self.vecs.flags.writeable:
            self.check_rows(0, self.n)
            self.vecs = np.array(self.vecs[: self.n])

    def _reserve(self, rows: int) -> None:
        """Room for ``rows`` main rows: grow by at least a quarter, in place (``ndarray.resize``:
        ``realloc``, which remaps large blocks instead of copying them) unless a view is alive."""
        self._own()
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
        try:
            self.born.resize(cap, refcheck=True)
        except ValueError:
            self.born = _copy_grown(self.born, cap)
        try:
            self.died.resize(cap, refcheck=True)
        except ValueError:
            self.died = _copy_grown(self.died, cap)

    def _append(self, ids: list[str], unit: np.ndarray, times: np.ndarray, born: np.ndarray) -> None:
        n, m = self.n, len(ids)
        self._reserve(n + m)
        self.vecs[n : n + m] = unit
        self.times[n : n + m] = times
        self.alive[n : n + m] = True
        self.born[n : n + m] = born
        self.died[n : n + m] = LIVE
        self.pos.update(zip(ids, range(n, n + m), strict=True))
        self.ids.extend(ids)
        self.dirty_from = min(self.dirty_from, n)

    def remove(self, ids: list[str], seq: int | None = None) -> None:
        """End the live rows of stored ``ids``: at event ``seq`` (the rows stay, for as-of reads),
        or, without ``seq``, purged (visible at no point; compacted past the limit)."""
        self.layout += 1
        for id_ in ids:
            if id_ in self.buffer.pos:
                if seq is None:
                    self.buffer.remove_rows([self.buffer.pos[id_]])
                else:
                    self.buffer.kill(id_, seq)
                continue
            row = self._live_main(id_)
            if self._pos is not None:
                del self._pos[id_]
            self.alive[row] = False
            self.died[row] = self.born[row] if seq is None else seq
            self.dead += 1
            self.purged += seq is None
        self._maybe_compact()

    def end_each(self, ids: list[str], seqs: list[int]) -> None:
        """End the live row of each of the stored, distinct ``ids`` at its event in ``seqs`` (the
        rows stay, for as-of reads): :meth:`remove` with each id's ``seq``, the main rows ended in
        one array assignment."""
        self.layout += 1
        rows: list[int] = []
        ends: list[int] = []
        mains = self._mains([id_ for id_ in ids if id_ not in self.buffer.pos])
        for id_, seq in zip(ids, seqs, strict=True):
            if id_ in self.buffer.pos:
                self.buffer.kill(id_, seq)
                continue
            row = next(mains)
            if row is None:
                raise KeyError(id_)
            if self._pos is not None:
                del self._pos[id_]
            rows.append(row)
            ends.append(seq)
        if rows:
            self.alive[rows] = False
            self.died[rows] = ends
            self.dead += len(rows)
        self._maybe_compact()

    def purge(self, ids: set[str]) -> int:
        """Drop every row (live or kept for history) of ``ids``; returns how many. O(rows)."""
        self.layout += 1
        gone = [i for i, x in enumerate(self.buffer.ids) if x in ids]
        self.buffer.remove_rows(gone)
        count = len(gone)
        if self._searchable(len(ids)):
            assert self._packed is not None
            rows = sorted(int(r) for id_ in ids for r in self._packed.find(id_).tolist())
            main = [(r, self.id_at(r)) for r in rows]
        else:
            main = list(enumerate(self.ids))
        for row, id_ in main:
            if id_ in ids and self.died[row] > self.born[row]:
                if self.alive[row]:
                    self.alive[row] = False
                    if self._pos is not None:
                        self._pos.pop(id_, None)
                    self.dead += 1
                self.died[row] = self.born[row]
                self.purged += 1
                count += 1
        self._maybe_compact()
        return count

    def set_born(self, ids: list[str], born: list[int]) -> None:
        """Correct the ``born`` of the live rows of ``ids`` (one array assignment per part)."""
        in_buffer, main = self.buffer.pos, self._main
        buffered_rows = list(map(in_buffer.get, ids))  # the usual batches in C-level passes:
        if None not in buffered_rows:  # every row still buffered
            self.buffer.born[cast("list[int]", buffered_rows)] = born
            return
        if self._packed is None and buffered_rows.count(None) == len(ids):
            main_rows = list(map(self.pos.get, ids))
            if None not in main_rows:  # every row in the main rows (appended, or merged)
                self.born[cast("list[int]", main_rows)] = born
                return
        buffered: list[int] = []
        buffered_born: list[int] = []
        rows: list[int] = []
        rows_born: list[int] = []
        for id_, seq in zip(ids, born, strict=True):
            row = in_buffer.get(id_)
            if row is not None:
                buffered.append(row)
                buffered_born.append(seq)
            elif (row := main(id_)) is not None:
                rows.append(row)
                rows_born.append(seq)
            else:
                raise KeyError(id_)
        if buffered:
            self.buffer.born[buffered] = buffered_born
        if rows:
            self.born[rows] = rows_born

    def _maybe_compact(self) -> None:
        if self.purged > self._limit() or (self.purged and self.purged == self.n):
            self.compact()

    def merge(self) -> None:
        """Move the buffer into the main rows, in place from the back; the buffer is emptied."""
        self.layout += 1
        m = self.buffer.n
        if not m:
            return
        self._own()  # first: a block that fails its check leaves the rows as they were
        self._unpacked()  # before a row moves: the ids pair with the rows' liveness as it is now
        buf = self.buffer
        b_vecs, b_times = buf.view()
        order = np.argsort(b_times, kind="stable")
        b_ids = [buf.ids[i] for i in order]
        b_vecs, b_times = b_vecs[order], b_times[order]
        b_born, b_died = buf.born[:m][order], buf.died[:m][order]
        buf.empty()  # its rows copied out above; its capacity kept for the next buffered rows
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
            self.born[dest] = self.born[a:stop]
            self.died[dest] = self.died[a:stop]
        at = ins + np.arange(m)
        self.vecs[at] = b_vecs
        self.times[at] = b_times
        self.alive[at] = b_died == LIVE
        self.born[at] = b_born
        self.died[at] = b_died
        self.dead += int(np.count_nonzero(b_died != LIVE))
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
        """Drop purged main rows (visible at no point), in place, keeping time order; rows kept
        for history stay."""
        self.layout += 1
        n = self.n
        if not self.purged:
            return
        self._own()
        self._unpacked()  # before a row moves (see merge)
        keep_all = self.died[:n] > self.born[:n]
        first = int(np.argmin(keep_all))
        write = first
        for a in range(first, n, _CHUNK):
            b = min(n, a + _CHUNK)
            keep = a + np.flatnonzero(keep_all[a:b])
            c = keep.shape[0]
            self.vecs[write : write + c] = self.vecs[keep]
            self.times[write : write + c] = self.times[keep]
            self.born[write : write + c] = self.born[keep]
            self.died[write : write + c] = self.died[keep]
            write += c
        kept = first + np.flatnonzero(keep_all[first:n])
        ids = [self.ids[i] for i in kept.tolist()]
        del self.ids[first:]
        self.ids.extend(ids)
        self.alive[first:write] = self.died[first:write] == LIVE
        self.alive[write:n] = False
        self.dead = int(np.count_nonzero(~self.alive[:write]))
        self.purged = 0
        self._reposition(first)

    def _reposition(self, first: int) -> None:
        n, ids, pos = self.n, self.ids, self.pos
        alive = self.alive[first:n]
        if alive.all():  # the usual case: every moved row is live
            pos.update(zip(ids[first:n], range(first, n), strict=True))
        else:
            live = (first + np.flatnonzero(alive)).tolist()
            pos.update(zip(map(ids.__getitem__, live), live, strict=True))
        self.dirty_from = min(self.dirty_from, first)

    # -- the rows as arrays (a snapshot of derived state) ------------------------------------------

    def state(self) -> dict[str, np.ndarray]:
        """The rows as arrays, buffer merged and purged rows dropped first: ``vecs`` (n x dim
        float32), ``times``, ``born``, ``died``, the ids as UTF-8 ``id_bytes`` cut at ``id_ends``
        and their sort index (:func:`~coniti.packed.index_arrays`: ``id_order``, ``id_keys``,
        ``id_key_scheme``; made here unless the ids are still packed with one, O(n log n)), so a
        restore looks ids up without sorting them. Views of the live arrays: read them before the
        next write."""
        self.merge()
        self.compact()
        n = self.n
        self.check_rows(0, n)
        packed = self._packed if self._packed is not None else PackedStrings(*pack_strings(self.ids))
        id_bytes, id_ends = packed.arrays
        return {
            "vecs": self.vecs[:n],
            "times": self.times[:n],
            "born": self.born[:n],
            "died": self.died[:n],
            "id_bytes": id_bytes,
            "id_ends": id_ends,
            **index_arrays(packed),
        }

    def restore(self, state: dict[str, np.ndarray], check: BlockCheck | None = None) -> None:
        """Replace every row by those of :meth:`state` (``vecs`` may be a read-only memory map, kept
        as is; ``check``: the CRC-32 check of its blocks, run on first touch). Raises
        :class:`ContractError` for arrays that do not fit together."""
        vecs, times, born, died = state["vecs"], state["times"], state["born"], state["died"]
        n = times.shape[0]
        shapes_fit = (
            vecs.ndim == 2 and vecs.shape[0] == n and born.shape == (n,) and died.shape == (n,)
            and vecs.dtype == np.float32 and times.dtype == np.float64
        )
        if not shapes_fit or (n > 1 and not (np.diff(times) >= 0).all()):
            raise ContractError("the row arrays do not fit together")
        raw, ends = state["id_bytes"], state["id_ends"]
        if (
            raw.dtype != np.uint8 or ends.shape != (n,) or (n and int(ends[-1]) != raw.shape[0])
            or (n > 1 and not (np.diff(ends) >= 0).all())
        ):
            raise ContractError("the row ids do not fit the rows")
        alive = died == LIVE
        live = int(np.count_nonzero(alive))
        try:  # the ids' sort index when the state has one of this key scheme (else made later)
            packed = indexed(np.array(raw), np.array(ends), state)
        except ValueError:
            raise ContractError("the row ids' sort index does not fit the ids") from None
        self.clear()
        self.vecs = vecs.view(np.ndarray)  # the same memory (a map stays mapped), minus the
        # np.memmap subclass, whose every slice and gather runs Python code
        self.times = np.array(times)
        self.born = np.array(born)
        self.died = np.array(died)
        self.alive = alive
        self._ids = None
        self._pos = None
        self._packed = packed
        self._n_packed = n
        self.dead = n - live
        self.purged = int(np.count_nonzero(self.died <= self.born))
        self.dirty_from = n
        self._check = check if check is not None and not check.done else None



class SortedRows(SortedRowStore):
    """:class:`SortedRowStore` and the searches over its rows: a time range's row interval, one
    slice's exact top ``k`` (:meth:`top_of_slice`), slices and the buffer offered to a :class:`Pool`
    and the pool's exact top ``k`` (:meth:`finish`), and the rows nearest in time."""

    # -- reads (``seq`` None: the live rows; else the rows visible as of event ``seq``) ----------

    def interval(self, start: float, end: float) -> tuple[int, int]:
        """The main rows ``[lo, hi)`` with ``start <= t < end``."""
        n = self.n
        times = self.times[:n]
        lo = 0 if start == -math.inf else int(times.searchsorted(start, "left"))
        hi = n if end == math.inf else int(times.searchsorted(end, "left"))
        return lo, max(lo, hi)

    def visible(self, a: int, b: int, seq: int | None) -> np.ndarray | None:
        """The visibility mask of main rows ``[a, b)``, or None when every one of them is live and
        ``seq`` is None (no mask needed)."""
        if seq is None:
            return self.alive[a:b] if self.dead else None
        return visible(self.born[a:b], self.died[a:b], seq)

    def score_slice(
        self, pool: Pool, lo: int, hi: int, query: np.ndarray, skip: int | None,
        seq: int | None = None,
    ) -> None:
        """Offer main rows ``[lo, hi)`` to ``pool`` (rows not visible and ``skip`` never qualify)."""
        if lo >= hi:
            return
        # a restored map: each span is scored once its blocks passed (the next ones are checked
        # meanwhile, on other threads)
        for a, b in [(lo, hi)] if self._check is None else self._check.spans(lo, hi):
            approx = fast_scores(self.vecs[a:b], query)
            mask = self.visible(a, b, seq)
            if mask is not None:
                approx[~mask] = NEG_INF
            if skip is not None and a <= skip < b:
                approx[skip - a] = NEG_INF
            pool.offer_span(1, a, approx)
        if self._check is not None and self._check.done:
            self._check = None

    def score_buffer(
        self, pool: Pool, start: float, end: float, query: np.ndarray, exclude: str | None,
        seq: int | None = None,
    ) -> None:
        """Offer the visible buffered rows with ``start <= t < end`` (without ``exclude``) to ``pool``."""
        if not self.buffer.n:
            return
        rows = self.buffer.in_range(start, end, exclude, seq)
        if rows.shape[0]:
            pool.offer(0, rows, fast_scores(self.buffer.vecs[rows], query))

    def skip_row(self, exclude: str | None, seq: int | None) -> int | None:
        """The main row of ``exclude`` that a search must skip: its live row now, its visible row
        as of ``seq`` (None when it has none among the main rows)."""
        if exclude is None:
            return None
        if seq is None:
            return self._main(exclude)
        for i in self._main_rows(exclude):
            if self.born[i] <= seq < self.died[i]:
                return i
        return None

    def one_slice(self, lo: int, hi: int) -> bool:
        """Whether main rows ``[lo, hi)`` are a range's rows alone, readable now: nothing is
        buffered and, in a restored map, the blocks holding them passed their check
        (:meth:`top_of_slice` applies)."""
        return not self.buffer.n and (self._check is None or self._check.passed(lo, hi))

    def top_of_slice(
        self, query: np.ndarray, k: int, eps: float, lo: int, hi: int, skip: int | None,
        seq: int | None = None,
    ) -> list[StructureHit]:
        """The exact top ``k`` among main rows ``[lo, hi)`` (rows not visible and ``skip`` never
        qualify) while :meth:`one_slice`: the hits :meth:`score_slice` and :meth:`finish` give, bit
        for bit, in fewer steps. The candidates are the rows whose fast score is within ``2 * eps``
        of the k-th best visible one. The compiled kernel (:data:`~coniti.structure.scoring.kernels`)
        finds them, visibility included, and scores them in one call. Its numpy twin, live now with
        few dead rows, takes the k-th best of the whole slice first: when at least ``k`` of the rows
        at or above it are visible it is also the k-th best visible one, and only the candidates'
        visibility is read, not the slice's."""
        if lo >= hi:
            return []
        approx = fast_scores(self.vecs[lo:hi], query)
        compiled = scoring.kernels
        if compiled is not None and self.vecs.flags.c_contiguous:  # what follows, in one call
            found = compiled.slice_top(
                self.vecs, query, approx, lo, k, eps, self.alive if self.dead else None,
                None if seq is None else self.born, None if seq is None else self.died,
                -1 if seq is None else seq, -1 if skip is None else skip,
            )
            if found is None:  # a NaN fast score
                return self._top_masked(approx, query, k, eps, lo, skip, seq)
            candidates, scores, unsure = found
            return self._ranked(candidates, scores, unsure, query, k)
        if seq is not None or 4 * self.dead > self.n:
            return self._top_masked(approx, query, k, eps, lo, skip, seq)
        m = hi - lo
        if m <= k:
            rows = np.arange(lo, hi)
        else:
            kth = kth_largest(approx, k)
            rows = lo + (approx >= float32_at_most(float(kth) - 2.0 * eps)).nonzero()[0]
        if self.dead or skip is not None:
            shown = self.alive[rows]
            if skip is not None:
                shown &= rows != skip
            if not all(shown.tolist()):  # a few rows: cheaper in Python than a numpy reduction
                if m > k and np.count_nonzero(shown & (approx[rows - lo] >= kth)) < k:
                    return self._top_masked(approx, query, k, eps, lo, skip, seq)
                rows = rows[shown]
        return self._exact_top(rows, query, k)

    def _top_masked(
        self, approx: np.ndarray, query: np.ndarray, k: int, eps: float, lo: int, skip: int | None,
        seq: int | None,
    ) -> list[StructureHit]:
        """:meth:`top_of_slice` with the fast scores ``approx`` of the rows from ``lo`` on, masking
        every row that does not qualify first."""
        mask = self.visible(lo, lo + approx.shape[0], seq)
        if mask is not None:
            approx[~mask] = NEG_INF
        if skip is not None and 0 <= skip - lo < approx.shape[0]:
            approx[skip - lo] = NEG_INF
        kth = kth_largest(approx, k) if approx.shape[0] > k else NEG_INF
        if kth > NEG_INF:
            near = (approx >= float32_at_most(float(kth) - 2.0 * eps)).nonzero()[0]
        else:
            near = (approx > NEG_INF).nonzero()[0]
        return self._exact_top(lo + near, query, k)

    def _ranked(
        self, rows: list[int], scores: list[float], unsure: list[int], query: np.ndarray, k: int
    ) -> list[StructureHit]:
        """The top ``k`` of main rows ``rows`` whose exact scores the compiled kernel gave, but at
        the positions ``unsure`` (summed here with fsum); what :meth:`_exact_top` gives."""
        if unsure:
            fsum_unsure(scores, unsure, self.vecs.take(rows, axis=0), query)
        return self._top_scored(rows, scores, k)

    def _exact_top(self, rows: np.ndarray, query: np.ndarray, k: int) -> list[StructureHit]:
        """The top ``k`` of main rows ``rows`` by exact score (then time, then id)."""
        scores = exact_scores(self.vecs.take(rows, axis=0), query, unit=True)  # take: a cheap gather
        return self._top_scored(rows, scores, k)

    def _top_scored(
        self, rows: np.ndarray | list[int], scores: list[float], k: int
    ) -> list[StructureHit]:
        """The top ``k`` of main rows ``rows`` with exact scores ``scores`` (then time, then id);
        ids are read for the hits only."""
        order = ranked(scores, k)
        if order is None:
            return top_by_key(self.ids_at(rows), scores, self.times[rows].tolist(), k)
        if len(order) == len(scores):
            return hits(self.ids_at(rows), scores, order)
        chosen = rows.take(order) if isinstance(rows, np.ndarray) else [rows[i] for i in order]
        return hits(self.ids_at(chosen), [scores[i] for i in order], range(len(order)))

    def finish(self, pool: Pool, query: np.ndarray) -> list[StructureHit]:
        """The exact top ``pool.k`` among the pool's candidates."""
        parts = pool.parts
        if not parts:
            return []
        if len(parts) == 1:
            rows, approx = parts[0][1], parts[0][2]
        else:
            rows, approx = np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])
        chosen = None if approx.shape[0] <= pool.k else select_candidates(approx, pool.k, pool.eps)
        if chosen is not None:
            rows = rows[chosen]
        if all(p[0] == 1 for p in parts):  # main rows only: no buffer lookups
            return self._exact_top(rows, query, pool.k)
        sources = np.concatenate([np.full(p[1].shape[0], p[0], dtype=np.int8) for p in parts])
        from_buffer = (sources if chosen is None else sources[chosen]) == 0
        vectors = np.zeros((rows.shape[0], query.shape[0]), dtype=np.float32)
        times = np.zeros(rows.shape[0], dtype=np.float64)
        b_rows, m_rows = rows[from_buffer], rows[~from_buffer]
        if b_rows.shape[0]:
            vectors[from_buffer] = self.buffer.vecs[b_rows]
            times[from_buffer] = self.buffer.times[b_rows]
        if m_rows.shape[0]:
            vectors[~from_buffer] = self.vecs[m_rows]
            times[~from_buffer] = self.times[m_rows]
        ids = [
            self.buffer.ids[row] if is_buffer else self.id_at(row)
            for row, is_buffer in zip(rows.tolist(), from_buffer.tolist(), strict=True)
        ]
        return top_by_key(ids, exact_scores(vectors, query), times.tolist(), pool.k)

    def _run(
        self, start: int, stop: int, k: int, forward: bool, seq: int | None, skip: int | None
    ) -> np.ndarray:
        """Up to ``k`` visible rows walking from ``start`` towards ``stop``, plus rows tied in time."""

        def shown(a: int, b: int) -> np.ndarray:
            mask = self.visible(a, b, seq)
            rows = np.arange(a, b) if mask is None else a + np.flatnonzero(mask)
            return rows if skip is None or not a <= skip < b else rows[rows != skip]

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
            live = shown(a, b)
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
            extra = shown(int(rows[k - 1]) + 1, limit) if limit > rows[k - 1] + 1 else rows[:0]
        else:
            limit = max(stop, int(np.searchsorted(times, edge, "left")))
            extra = shown(limit, int(rows[k - 1])) if rows[k - 1] > limit else rows[:0]
        return np.concatenate((rows[:k], extra))

    def time_candidates(
        self, start: float, end: float, anchor_time: float | None, k: int, exclude: str | None,
        seq: int | None = None,
    ) -> tuple[list[str], np.ndarray]:
        """Ids and times of every visible row that can be among the k best by recency
        (``anchor_time`` None) or by closeness in time to ``anchor_time``."""
        buffer_rows = self.buffer.in_range(start, end, exclude, seq)
        ids = [self.buffer.ids[i] for i in buffer_rows]
        times = [self.buffer.times[buffer_rows]]
        lo, hi = self.interval(start, end)
        skip = self.skip_row(exclude, seq)
        if anchor_time is None:
            rows = self._run(hi, lo, k, False, seq, skip)
        else:
            split = int(np.clip(np.searchsorted(self.times[: self.n], anchor_time), lo, hi))
            rows = np.concatenate(
                (self._run(split, hi, k, True, seq, skip), self._run(split, lo, k, False, seq, skip))
            )
        ids.extend(self.ids_at(rows))
        times.append(self.times[rows])
        return ids, np.concatenate(times)

