"""The :class:`Structure` base class (validation, search dispatch) and the :data:`STRUCTURES` registry."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np

from coniti.actor import TimeRange
from coniti.errors import AnchorNotFound, ContractError, NotSupported, ReadOnlyError
from coniti.registry import Registry
from coniti.structure.scoring import StructureHit, unit_rows, unit_vector

if TYPE_CHECKING:
    from coniti.derived import BlockCheck

__all__ = ["STRUCTURES", "Structure"]

STRUCTURES: Registry[Structure] = Registry("structure", "coniti.structures")
"""Structures by name; third parties add theirs here or in the ``coniti.structures`` entry-point group."""

def time_bounds(time_range: TimeRange | None) -> tuple[float, float]:
    """``time_range`` as ``[start, end)`` (an open side, or no range: infinite)."""
    if time_range is None:
        return -math.inf, math.inf
    start = -math.inf if time_range.start is None else time_range.start
    end = math.inf if time_range.end is None else time_range.end
    return start, end


def _new_ids(structure: Structure, ids: list[str]) -> bool:
    """Whether ``ids`` (strings) are non-empty, distinct and none is stored in ``structure``."""
    distinct = set(ids)
    return len(distinct) == len(ids) and "" not in distinct and not structure.stored_among(distinct)


class Structure(ABC):
    """Organises (id, vector, timestamp) over time; see the module docstring for search semantics.

    :meth:`add`, :meth:`remove`, :meth:`search` and :meth:`clear` validate their input and then call the
    subclass's ``_add``, ``_remove``, ``_search_*`` and ``_clear``. A call that raises changes nothing.
    """

    name: ClassVar[str]

    supports_as_of: ClassVar[bool] = False
    """Rows keep the sequence numbers between which they were live: :meth:`remove` with ``seq``
    keeps them, :meth:`set_born` stamps a row's first one, :meth:`search` answers ``as_of`` an
    event and :meth:`at` gives a view as of one."""

    persistent: ClassVar[bool] = False
    """:meth:`derived_state` and :meth:`restore_derived_state` give and take the whole structure as
    named numpy arrays (what :mod:`coniti.derived` keeps on disk)."""

    checked_on_touch: ClassVar[frozenset[str]] = frozenset()
    """Fields of :meth:`derived_state` whose CRC-32 check :meth:`restore_derived_state` can take
    deferred (a :class:`~coniti.derived.BlockCheck` it runs before reading the array's bytes)."""

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
        self,
        ids: Sequence[str],
        vectors: Any,
        timestamps: Sequence[float] | np.ndarray,
        *,
        born: Sequence[int] | np.ndarray | None = None,
    ) -> None:
        """Insert a batch: ``ids[i]`` with row ``vectors[i]`` at ``timestamps[i]``; all or nothing.

        ``born[i]``: the sequence number of the event that wrote the row (default 0: live since the
        start), read by as-of searches. Raises :class:`ContractError` (bad input, as :meth:`search`
        does) for a repeated or already stored id, a wrong shape or dimension, or a non-finite value.
        """
        id_list = list(ids)
        # the usual batch passes three set checks; any other is walked for the first bad id
        if set(map(type, id_list)) - {str} or not _new_ids(self, id_list):
            self._refuse_ids(id_list)
        try:
            matrix = np.asarray(vectors)
            if matrix.dtype not in (np.float32, np.float64):  # float32 stays: no float64 copy
                matrix = np.asarray(vectors, dtype=np.float64)
            times = np.asarray(timestamps, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ContractError(f"vectors and timestamps must be numeric: {exc}") from None
        n = len(id_list)
        if matrix.ndim != 2 or matrix.shape[0] != n:
            raise ContractError(f"vectors must have shape ({n}, dim), got {matrix.shape}")
        if times.shape != (n,):
            raise ContractError(f"timestamps must have shape ({n},), got {times.shape}")
        seqs = np.zeros(n, dtype=np.int64) if born is None else np.asarray(born, dtype=np.int64)
        if seqs.shape != (n,) or (n and int(seqs.min()) < 0):
            raise ContractError(f"born must hold {n} sequence numbers >= 0")
        if n == 0:
            return
        dim = matrix.shape[1]
        if dim == 0:
            raise ContractError("vectors must have at least one column")
        if self._dim is not None and dim != self._dim:
            raise ContractError(f"vectors have dimension {dim}, the structure holds {self._dim}")
        if not np.isfinite(matrix).all():
            bad = int(np.flatnonzero(~np.isfinite(matrix).all(axis=1))[0])
            raise ContractError(f"vector of id {id_list[bad]!r} is not finite")
        if not np.isfinite(times).all():
            bad = int(np.flatnonzero(~np.isfinite(times))[0])
            raise ContractError(f"timestamp of id {id_list[bad]!r} is not finite")
        self._add(id_list, unit_rows(matrix), times.copy(), seqs.copy())
        self._dim = dim

    def _refuse_ids(self, ids: list[Any]) -> None:
        """Raise the error :meth:`add` gives for the first bad, repeated or stored id of ``ids``, if
        any (ids of a ``str`` subclass pass)."""
        for i, id_ in enumerate(ids):
            if not isinstance(id_, str) or not id_:
                raise ContractError(f"ids[{i}] must be a non-empty string, got {id_!r}")
        seen: set[str] = set()
        for id_ in ids:
            if id_ in seen:
                raise ContractError(f"id {id_!r} appears twice in one add")
            if id_ in self:
                raise ContractError(f"id {id_!r} is already in the {self.name} structure")
            seen.add(id_)

    def stored_among(self, ids: Iterable[str]) -> set[str]:
        """The ids among ``ids`` that are stored now (a subclass may find them in bulk)."""
        return {id_ for id_ in ids if id_ in self}

    def remove(self, ids: Iterable[str], *, seq: int | None = None) -> int:
        """Remove the stored ones among ``ids`` (unknown ids are ignored); returns how many.

        With ``seq`` (structures that declare :attr:`supports_as_of`): the rows end at event ``seq``
        and stay, for searches as of earlier events. Without it they are gone at every point."""
        if seq is not None and not self.supports_as_of:
            raise NotSupported(f"the {self.name} structure keeps no versions")
        present = [i for i in dict.fromkeys(ids) if isinstance(i, str) and i in self]
        if present:
            self._remove(present, seq)
        return len(present)

    def end_each(self, ids: Sequence[str], seqs: Sequence[int]) -> int:
        """End the live row of each of ``ids`` at its own event in ``seqs`` (a batch of deletes, one
        event each; needs :attr:`supports_as_of`); unknown ids are ignored; returns how many. The
        same rows as ``remove([id], seq=seq)`` for each pair in order, in one call."""
        pairs = list(zip(ids, seqs, strict=True))
        if pairs and not self.supports_as_of:
            raise NotSupported(f"the {self.name} structure keeps no versions")
        stored = self.stored_among({id_ for id_, _ in pairs if isinstance(id_, str)})  # in bulk
        present: dict[str, int] = {}
        for id_, seq in pairs:
            if isinstance(id_, str) and id_ in stored and id_ not in present:
                present[id_] = seq
        if present:
            self._end_each(list(present), list(present.values()))
        return len(present)

    def _end_each(self, ids: list[str], seqs: list[int]) -> None:
        """End stored, distinct ``ids`` each at its event in ``seqs``; by default one
        :meth:`_remove` an id."""
        for id_, seq in zip(ids, seqs, strict=True):
            self._remove([id_], seq)

    def purge(self, ids: Iterable[str]) -> int:
        """Drop every row of ``ids``, live or kept for history (an erasure); returns how many."""
        wanted = {i for i in ids if isinstance(i, str)}
        if not self.supports_as_of:
            return self.remove(wanted)
        return self._purge(wanted) if wanted else 0

    def set_born(self, ids: Sequence[str], born: Sequence[int]) -> None:
        """Set the ``born`` sequence number of the live row of each of ``ids`` (needs
        :attr:`supports_as_of`): a writer adds rows before the write that assigns their sequence
        numbers (so that a failing structure leaves memory unwritten), then stamps them with what
        the write returned. Every id must have a live row (``KeyError`` otherwise)."""
        if not self.supports_as_of:
            raise NotSupported(f"the {self.name} structure keeps no versions")
        if len(ids) != len(born):
            raise ContractError(f"set_born needs one sequence number per id: {len(born)} for {len(ids)}")
        self._set_born(list(ids), [int(b) for b in born])

    def at(self, seq: int) -> Structure:
        """A read-only view answering :meth:`search` as of event ``seq`` (needs
        :attr:`supports_as_of`). It reads this structure's rows at every call: rows written after
        ``seq`` are never visible in it, so it stays valid while this structure grows."""
        if not self.supports_as_of:
            raise NotSupported(f"the {self.name} structure keeps no versions")
        return _AsOf(self, seq)

    def rows_among(self, ids: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The ids among ``ids`` that are stored, with their stored unit float32 rows (``(m, dim)``)
        and float64 timestamps: the rows the searches score. In no promised order (the rows line
        up with the ids returned)."""
        found = [i for i in ids if i in self]
        if not found:
            return [], np.zeros((0, self._dim or 0), dtype=np.float32), np.zeros(0, dtype=np.float64)
        vectors = np.stack([self._vector(i) for i in found])
        times = np.array([self._timestamp(i) for i in found], dtype=np.float64)
        return found, vectors, times

    def live_ids(self) -> list[str]:
        """The ids stored now (structures with :attr:`supports_as_of`)."""
        raise NotSupported(f"the {self.name} structure does not list its ids")

    def derived_state(self) -> dict[str, np.ndarray]:
        """The structure as named arrays (see :attr:`persistent`); views, valid until the next write."""
        raise NotSupported(f"the {self.name} structure is not persistent")

    def restore_derived_state(
        self, state: dict[str, np.ndarray], checks: Mapping[str, BlockCheck] | None = None
    ) -> None:
        """Replace everything by a :meth:`derived_state` (arrays may be read-only memory maps).
        ``checks``: for fields of :attr:`checked_on_touch`, the CRC-32 checks not run yet; the
        structure runs each block's before reading its bytes, and a block that fails raises
        :class:`~coniti.derived.StaleSnapshot` from the call that touched it. Raises
        :class:`ContractError` for arrays that do not fit and changes nothing then."""
        raise NotSupported(f"the {self.name} structure is not persistent")

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
        as_of: int | None = None,
    ) -> list[StructureHit]:
        """The ``k`` best hits (see the module docstring); fewer when fewer notes qualify. With
        ``as_of`` (needs :attr:`supports_as_of`): among the rows visible right after that event.

        Raises :class:`ContractError` for a bad ``k``, ``vector`` or ``time_range`` and
        :class:`AnchorNotFound` for an ``anchor_id`` that is not stored (as of ``as_of``).
        """
        if as_of is not None and not self.supports_as_of:
            raise NotSupported(f"the {self.name} structure keeps no versions")
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
            query, squared = unit_vector(q)
            if not math.isfinite(squared) and not np.isfinite(q).all():  # finite values: finite sum
                raise ContractError("vector must be finite (no NaN or infinity)")
            if self._dim is not None and q.size != self._dim:
                raise ContractError(f"vector has dimension {q.size}, the structure holds {self._dim}")
        anchor_time = 0.0
        if anchor_id is not None:
            found = self._row(anchor_id, as_of)
            if found is None:
                raise AnchorNotFound(f"anchor id {anchor_id!r} is not in the structure")
            anchor_vector, anchor_time = found
            if query is not None:
                combined = query.astype(np.float64) + anchor_vector.astype(np.float64)
                query = unit_rows(combined[None, :])[0]
        start, end = time_bounds(time_range)
        if start >= end or (as_of is None and len(self) == 0):
            return []  # as of an event, the searches find nothing visible on their own (no O(n) count)
        if query is not None:
            return self._search_vector(query, k, start, end, anchor_id, as_of)
        if anchor_id is not None:
            return self._search_around(anchor_time, k, start, end, anchor_id, as_of)
        return self._search_recent(k, start, end, as_of)

    def _row(self, id_: str, seq: int | None) -> tuple[np.ndarray, float] | None:
        """``(unit vector, timestamp)`` of the row of ``id_`` visible now (or as of ``seq``)."""
        if seq is None:
            return (self._vector(id_), self._timestamp(id_)) if id_ in self else None
        raise NotSupported(f"the {self.name} structure keeps no versions")

    def _count(self, seq: int | None) -> int:
        """Rows visible now (or as of ``seq``)."""
        if seq is None:
            return len(self)
        raise NotSupported(f"the {self.name} structure keeps no versions")

    def _purge(self, ids: set[str]) -> int:
        """Drop every row of ``ids`` (structures with :attr:`supports_as_of`)."""
        raise NotSupported(f"the {self.name} structure keeps no versions")

    def _set_born(self, ids: list[str], born: list[int]) -> None:
        """Set the ``born`` of the live rows of ``ids`` (structures with :attr:`supports_as_of`)."""
        raise NotSupported(f"the {self.name} structure keeps no versions")

    # -- what a subclass implements --------------------------------------------------------

    @abstractmethod
    def __len__(self) -> int:
        """How many ids are stored."""

    @abstractmethod
    def __contains__(self, id_: object) -> bool:
        """True when ``id_`` is stored."""

    @abstractmethod
    def _add(self, ids: list[str], unit: np.ndarray, times: np.ndarray, born: np.ndarray) -> None:
        """Insert validated, new ids with unit float32 rows, finite float64 times and the int64
        sequence numbers that wrote them."""

    @abstractmethod
    def _remove(self, ids: list[str], seq: int | None) -> None:
        """Remove ids that are all stored: at event ``seq`` (kept for as-of searches), or purged."""

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
        self, query: np.ndarray, k: int, start: float, end: float, exclude: str | None,
        seq: int | None,
    ) -> list[StructureHit]:
        """Top ``k`` by exact cosine score with the unit ``query`` among times in [start, end)
        (among rows visible as of ``seq`` when given)."""

    @abstractmethod
    def _search_recent(self, k: int, start: float, end: float, seq: int | None) -> list[StructureHit]:
        """The ``k`` newest among times in [start, end), score 0.0."""

    @abstractmethod
    def _search_around(
        self, anchor_time: float, k: int, start: float, end: float, exclude: str, seq: int | None
    ) -> list[StructureHit]:
        """The ``k`` closest in time to ``anchor_time`` among times in [start, end)."""


class _AsOf(Structure):
    """A read-only view of a structure as of event ``seq`` (:meth:`Structure.at`)."""

    supports_as_of: ClassVar[bool] = True

    def __init__(self, source: Structure, seq: int) -> None:
        super().__init__()
        self.name = source.name  # type: ignore[misc]  # the view answers for its source
        self._source = source
        self._seq = seq
        self._dim = source.dim
        self._len: int | None = None

    @property
    def options(self) -> dict[str, Any]:
        return self._source.options

    def spawn(self) -> Self:
        raise ReadOnlyError("a structure view as of an event cannot spawn")

    def __len__(self) -> int:
        """Rows visible as of the view's event, counted once (O(rows)) and kept: later writes to the
        source never change it, except an erasure, which only makes it an overestimate."""
        if self._len is None:
            self._len = self._source._count(self._seq)
        return self._len

    def __contains__(self, id_: object) -> bool:
        return isinstance(id_, str) and self._source._row(id_, self._seq) is not None

    def search(
        self,
        vector: Any | None,
        *,
        k: int,
        time_range: TimeRange | None = None,
        anchor_id: str | None = None,
        as_of: int | None = None,
    ) -> list[StructureHit]:
        """:meth:`Structure.search` of the source as of this view's event (``as_of`` must be None
        or not later than it)."""
        if as_of is not None and as_of > self._seq:
            raise ContractError(f"as_of {as_of} is after this view's event {self._seq}")
        return self._source.search(
            vector, k=k, time_range=time_range, anchor_id=anchor_id,
            as_of=self._seq if as_of is None else as_of,
        )

    def _refuse(self) -> ReadOnlyError:
        return ReadOnlyError(f"the {self.name} structure as of event {self._seq} is read-only")

    def _add(self, ids: list[str], unit: np.ndarray, times: np.ndarray, born: np.ndarray) -> None:
        raise self._refuse()

    def _remove(self, ids: list[str], seq: int | None) -> None:
        raise self._refuse()

    def _purge(self, ids: set[str]) -> int:
        raise self._refuse()

    def _set_born(self, ids: list[str], born: list[int]) -> None:
        raise self._refuse()

    def _clear(self) -> None:
        raise self._refuse()

    def _vector(self, id_: str) -> np.ndarray:
        found = self._source._row(id_, self._seq)
        if found is None:
            raise KeyError(id_)
        return found[0]

    def _timestamp(self, id_: str) -> float:
        found = self._source._row(id_, self._seq)
        if found is None:
            raise KeyError(id_)
        return found[1]

    def _search_vector(
        self, query: np.ndarray, k: int, start: float, end: float, exclude: str | None,
        seq: int | None,
    ) -> list[StructureHit]:
        raise AssertionError("unreachable: search() delegates")  # pragma: no cover

    def _search_recent(self, k: int, start: float, end: float, seq: int | None) -> list[StructureHit]:
        raise AssertionError("unreachable: search() delegates")  # pragma: no cover

    def _search_around(
        self, anchor_time: float, k: int, start: float, end: float, exclude: str, seq: int | None
    ) -> list[StructureHit]:
        raise AssertionError("unreachable: search() delegates")  # pragma: no cover

