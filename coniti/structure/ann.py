"""``ann``: an approximate (HNSW) index from the ``usearch`` library over exact time-sorted rows.

Needs the ``coniti[ann]`` extra (``usearch``). What it returns, and what is approximate:

* Every hit satisfies the query: inside the time range, never the anchor, never a removed note, and its
  score is the exact score every structure gives (re-scored from the stored row). Hits are in the
  shared total order (score desc, time desc, id asc).
* Only *recall* is approximate: a vector search may miss some of the true top ``k``. It never returns
  fewer hits than exact search would (when fewer than ``k`` qualify, all of them are returned).
* A vector search asks the graph for ``fetch = ceil(oversample * k / f)`` neighbours, where ``f`` is
  the fraction of stored notes inside the time range, keeps those inside the range and re-scores them
  exactly; if fewer than ``k`` remain it asks again with twice ``fetch``. When the range holds at most
  ``exact_rows`` notes, or ``f < min_fraction``, or ``fetch`` would exceed a quarter of the notes in the
  range, it searches the range's slice of the sorted rows exactly instead (as ``flat`` does).
* Searches without a vector (most recent, closest in time to an anchor) are exact, from the rows.

The graph is derived data, rebuilt from the rows by adding them (``add`` is incremental: O(log n) per
row, no rebuilds). :meth:`AnnStructure.index_state` / :meth:`AnnStructure.restore_index_state` give it
as bytes (``usearch``'s own serialisation) plus the id of every key, so a snapshot of the rows can carry
it. With ``threads=1`` (the default) a build from the same rows in the same order gives the same graph.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from coniti.derived import BlockCheck, pack_strings, unpack_strings
from coniti.errors import ContractError, StructureError
from coniti.structure.flat import SortedRowsStructure
from coniti.structure.scoring import StructureHit, exact_scores, top_by_key

__all__ = ["AnnStructure"]


def _usearch() -> Any:
    try:
        from usearch.index import Index
    except ImportError:  # pragma: no cover - depends on the environment
        raise StructureError(
            "the 'ann' structure needs the usearch library: pip install 'coniti[ann]'"
        ) from None
    return Index


class AnnStructure(SortedRowsStructure):
    """Approximate cosine top-k by an HNSW graph, exact time filtering and exact scores; see the
    module docstring. Options: ``connectivity`` (graph degree M), ``expansion_add`` (ef at build),
    ``expansion_search`` (ef at search), ``oversample``, ``exact_rows``, ``min_fraction``,
    ``threads`` (build threads; 0 = all cores, not reproducible)."""

    name: ClassVar[str] = "ann"

    def __init__(
        self,
        *,
        connectivity: int = 16,
        expansion_add: int = 128,
        expansion_search: int = 64,
        oversample: float = 2.0,
        exact_rows: int = 4096,
        min_fraction: float = 0.02,
        threads: int = 1,
        buffer_min: int = 1024,
        buffer_fraction: float = 0.125,
    ) -> None:
        super().__init__(buffer_min=buffer_min, buffer_fraction=buffer_fraction)
        self._connectivity = _int_option("connectivity", connectivity, 2)
        self._expansion_add = _int_option("expansion_add", expansion_add, 1)
        self._expansion_search = _int_option("expansion_search", expansion_search, 1)
        self._exact_rows = _int_option("exact_rows", exact_rows, 0)
        self._threads = _int_option("threads", threads, 0)
        self._oversample = _float_option("oversample", oversample, 1.0, math.inf)
        self._min_fraction = _float_option("min_fraction", min_fraction, 0.0, 1.0)
        self._index: Any = None
        self._key_ids: list[str | None] = []
        self._keys: dict[str, int] = {}
        self.last_exact = False
        """Whether the last vector search scanned the range exactly instead of asking the graph."""

    @property
    def options(self) -> dict[str, Any]:
        return {
            "connectivity": self._connectivity,
            "expansion_add": self._expansion_add,
            "expansion_search": self._expansion_search,
            "oversample": self._oversample,
            "exact_rows": self._exact_rows,
            "min_fraction": self._min_fraction,
            "threads": self._threads,
            **super().options,
        }

    @property
    def expansion_search(self) -> int:
        """The graph's search breadth (ef); higher: better recall, slower searches."""
        return self._expansion_search

    @expansion_search.setter
    def expansion_search(self, value: int) -> None:
        self._expansion_search = _int_option("expansion_search", value, 1)

    def _new_index(self, dim: int) -> Any:
        return _usearch()(
            ndim=dim,
            metric="ip",
            dtype="f32",
            connectivity=self._connectivity,
            expansion_add=self._expansion_add,
            expansion_search=self._expansion_search,
        )

    persistent: ClassVar[bool] = True
    """The rows and the graph persist: :meth:`derived_state` adds ``graph`` (usearch's bytes as
    ``uint8``) and ``graph_id_bytes``/``graph_id_ends`` (the id of each graph key, ``""`` for a
    removed one) to the rows' arrays; restoring loads the graph into memory (a copy)."""

    def _add(self, ids: list[str], unit: np.ndarray, times: np.ndarray, born: np.ndarray) -> None:
        index = self._index if self._index is not None else self._new_index(unit.shape[1])
        first = len(self._key_ids)
        keys = np.arange(first, first + len(ids), dtype=np.uint64)
        index.add(keys, unit, threads=self._threads)
        super()._add(ids, unit, times, born)
        self._index = index
        self._key_ids.extend(ids)
        self._keys.update(zip(ids, range(first, first + len(ids)), strict=True))

    def _remove(self, ids: list[str], seq: int | None) -> None:
        keys = [self._keys.pop(id_) for id_ in ids]
        self._index.remove(np.array(keys, dtype=np.uint64))
        for key in keys:
            self._key_ids[key] = None
        super()._remove(ids, seq)

    def _purge(self, ids: set[str]) -> int:
        live = [i for i in ids if i in self._keys]
        if live:
            keys = [self._keys.pop(id_) for id_ in live]
            self._index.remove(np.array(keys, dtype=np.uint64))
            for key in keys:
                self._key_ids[key] = None
        return super()._purge(ids)

    def _clear(self) -> None:
        super()._clear()
        self._index = None
        self._key_ids = []
        self._keys = {}

    def _in_range(self, start: float, end: float) -> int:
        """How many stored notes (live main rows and buffered rows) the range holds."""
        rows = self._rows
        lo, hi = rows.interval(start, end)
        count = hi - lo
        if rows.dead and count:
            count = int(np.count_nonzero(rows.alive[lo:hi]))
        return count + int(rows.buffer.in_range(start, end, None).shape[0])

    def _search_vector(
        self, query: np.ndarray, k: int, start: float, end: float, exclude: str | None,
        seq: int | None,
    ) -> list[StructureHit]:
        if seq is not None:  # the graph holds live rows only: as of an event, search exactly
            self.last_exact = True
            return self._exact_search(query, k, start, end, exclude, seq)
        count = self._in_range(start, end)
        total = len(self)
        fraction = count / total if total else 0.0
        wanted = k + (exclude is not None)
        fetch = math.ceil(self._oversample * wanted / fraction) if fraction else 0
        exact = (
            count <= max(self._exact_rows, wanted)
            or fraction < self._min_fraction
            or 4 * fetch > count
        )
        self.last_exact = exact
        if exact:
            return self._exact_search(query, k, start, end, exclude, None)
        self._index.expansion_search = self._expansion_search
        while True:
            hits, qualified = self._graph(query, k, start, end, exclude, min(fetch, total))
            if len(hits) >= k or qualified >= count or fetch >= total:
                return hits
            fetch *= 2
            if 4 * fetch > count:
                self.last_exact = True
                return self._exact_search(query, k, start, end, exclude, None)

    def _graph(
        self, query: np.ndarray, k: int, start: float, end: float, exclude: str | None, fetch: int
    ) -> tuple[list[StructureHit], int]:
        """Top ``k`` among the graph's ``fetch`` nearest that qualify, and how many qualified."""
        matches = self._index.search(query, fetch, threads=1)
        rows = self._rows
        ids: list[str] = []
        for key in matches.keys.tolist():
            id_ = self._key_ids[key]
            if id_ is None or id_ == exclude:
                continue
            ids.append(id_)
        times = np.array([rows.timestamp(i) for i in ids], dtype=np.float64)
        inside = np.flatnonzero((times >= start) & (times < end))
        picked = [ids[i] for i in inside.tolist()]
        if not picked:
            return [], 0
        vectors = np.stack([rows.vector(i) for i in picked])
        hits = top_by_key(picked, exact_scores(vectors, query), times[inside].tolist(), k)
        return hits, len(picked)

    def derived_state(self) -> dict[str, np.ndarray]:
        state = super().derived_state()
        graph = self.index_state()
        id_bytes, id_ends = pack_strings(["" if i is None else i for i in graph["ids"]])
        state["graph"] = np.frombuffer(graph["index"], dtype=np.uint8)
        state["graph_id_bytes"], state["graph_id_ends"] = id_bytes, id_ends
        return state

    def restore_derived_state(
        self, state: dict[str, np.ndarray], checks: Mapping[str, BlockCheck] | None = None
    ) -> None:
        """The rows, then the graph; arrays that do not fit raise :class:`ContractError` and leave
        the structure empty."""
        try:
            graph = np.asarray(state["graph"]).tobytes()
            keys = unpack_strings(state["graph_id_bytes"], state["graph_id_ends"])
        except (KeyError, ValueError) as exc:
            raise ContractError(f"the ann state lacks its graph: {exc}") from None
        super().restore_derived_state(state, checks)
        try:
            self.restore_index_state({"index": graph, "ids": [k or None for k in keys]})
        except StructureError as exc:  # the rows are restored, the graph is not: start empty
            self.clear()
            raise ContractError(str(exc)) from None

    # -- the derived graph as bytes -----------------------------------------------------------

    def index_state(self) -> dict[str, Any]:
        """The graph as ``{"index": bytes, "ids": [id or None per key]}`` (``None``: removed)."""
        blob = b"" if self._index is None else bytes(self._index.save())
        return {"index": blob, "ids": list(self._key_ids)}

    def restore_index_state(self, state: dict[str, Any]) -> None:
        """Replace the graph by one from :meth:`index_state`; its live ids must be exactly the stored
        ids (raises :class:`StructureError` otherwise, and changes nothing)."""
        ids = state.get("ids")
        blob = state.get("index")
        if not isinstance(ids, list) or not isinstance(blob, bytes | bytearray):
            raise ContractError("index state must hold 'index' (bytes) and 'ids' (a list)")
        live = [i for i in ids if i is not None]
        if len(live) != len(set(live)) or len(live) != len(self) or not all(i in self for i in live):
            raise StructureError("the index state does not hold exactly the stored ids")
        index = _usearch().restore(bytes(blob)) if blob else None
        if (index.size if index is not None else 0) != len(live):
            raise StructureError("the index state holds another number of vectors than ids")
        self._index = index
        self._key_ids = list(ids)
        self._keys = {id_: key for key, id_ in enumerate(ids) if id_ is not None}


def _int_option(name: str, value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ContractError(f"{name} must be an integer >= {least}, got {value!r}")
    return value


def _float_option(name: str, value: Any, least: float, most: float) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not least <= value <= most
        or math.isnan(value)
    ):
        raise ContractError(f"{name} must be a number in [{least}, {most}], got {value!r}")
    return float(value)
