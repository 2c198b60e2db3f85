"""The :class:`Structure` base class (validation, search dispatch) and the :data:`STRUCTURES` registry."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Self

import numpy as np

from coniti.actor import TimeRange
from coniti.errors import AnchorNotFound, ContractError
from coniti.registry import Registry
from coniti.structure.scoring import StructureHit, unit_rows

__all__ = ["STRUCTURES", "Structure"]

STRUCTURES: Registry[Structure] = Registry("structure", "coniti.structures")
"""Structures by name; third parties add theirs here or in the ``coniti.structures`` entry-point group."""

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

        Raises :class:`ContractError` (bad input, as :meth:`search` does) for a repeated or already
        stored id, a wrong shape or dimension, or a non-finite value.
        """
        id_list = list(ids)
        for i, id_ in enumerate(id_list):
            if not isinstance(id_, str) or not id_:
                raise ContractError(f"ids[{i}] must be a non-empty string, got {id_!r}")
        seen: set[str] = set()
        for id_ in id_list:
            if id_ in seen:
                raise ContractError(f"id {id_!r} appears twice in one add")
            if id_ in self:
                raise ContractError(f"id {id_!r} is already in the {self.name} structure")
            seen.add(id_)
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
