"""The filter selects the candidates before scoring (:func:`prefiltered`): for a semantic ask over a
prefix, each namespace's notes that match ``query.filter`` are found in a metadata column kept beside
its index, and only their rows are scored, exactly, in the structure's own order.

**What it equals.** The structures rank rows by the canonical exact score
(:func:`~coniti.structure.scoring.exact_scores` of the stored unit row and the unit query), then the
newer note, then the smaller id (:func:`~coniti.structure.scoring.top_by_key`). Scoring only the
matching rows the same way gives the structure's ranking with the non-matching rows removed, score
for score: what a filtered ask answers (:mod:`coniti.engine.recall`). When every namespace of the
prefix is prefiltered, :func:`first_of` scores their matching rows as one (fast scores, one
``k``-th best, only the rows near it scored exactly) and the merge reads those
(:func:`~coniti.engine.across.first_across`); otherwise, or when the merge gives up, each
namespace's ranking is read by a :class:`~coniti.engine.recall.Stream` as any other (every
matching row then scored exactly). Either way a candidate's record is still read from memory, the
filter tested again on it, and a record that vanished left out.

**When it applies** (else the ask takes the unfiltered ranking and filters its candidates): strategy
``semantic`` with a query vector and no ``near``; the asks merged over a prefix (each hit's rank is
then its place in the merged ranking, not in its namespace's unfiltered one); the default strategy
answering (a custom strategy may rank otherwise); a ``flat`` or ``segment_tree`` structure first (exact;
not a view as of an event, not ``ann``); an index over an event feed (``seq`` set).

**The metadata column** (:class:`MetadataColumn`): the live notes' metadata of one namespace, read
from memory in one ``get`` when first needed and kept while the index's ``seq`` stays the same (a
write, a fold or a refresh moves it; the next filtered ask reads it again). Equality of a top-level
key to a string, number, bool or null is answered from a posting per key and value (built per key
on first use); any other filter is tested on each cached metadata. A posting's row numbers in the
structure are kept beside it (:meth:`MetadataColumn.rows`) and found again only once the rows move
(:attr:`~coniti.structure.rows.SortedRowStore.layout`: a write, a merge, a compaction).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from coniti.actor import Query
from coniti.engine.index import NamespaceIndex
from coniti.filters import RecordPredicate
from coniti.hybrid import Ranked
from coniti.memory import GetRequest, MemoryBackend
from coniti.passages import live_passages, note_id
from coniti.strategy import DefaultStrategy, Strategy
from coniti.structure.flat import FlatStructure, SortedRowsStructure
from coniti.structure.pool import float32_at_most, kth_largest
from coniti.structure.rows import RowPositions
from coniti.structure.scoring import error_bound, exact_scores, fast_scores, unit_vector
from coniti.structure.segment_tree import SegmentTreeStructure

__all__ = ["MetadataColumn", "Prefiltered", "first_of", "prefiltered"]

_SCALARS = (str, int, float, bool, type(None))


class MetadataColumn:
    """The metadata of the live notes of one namespace as of event ``seq`` (module docstring)."""

    def __init__(
        self, seq: int, metadata: dict[str, dict[str, Any]], kinds: dict[str, str] | None = None
    ) -> None:
        self.seq = seq
        self.metadata = metadata
        self.kinds = kinds or {}
        """The kind of each id that has one (a filter's ``"$kind"``)."""
        self._postings: dict[str, dict[bytes, list[str]]] = {}
        self._positions: dict[tuple[str, bytes], RowPositions] = {}

    @classmethod
    def of(
        cls, index: NamespaceIndex, namespace: tuple[str, ...], memory: MemoryBackend
    ) -> MetadataColumn:
        """The column of ``index`` (kept on it while its ``seq`` holds; else read from memory)."""
        seq = index.seq
        assert seq is not None
        column = index.metadata
        if isinstance(column, MetadataColumn) and column.seq == seq:
            return column
        ids = index.structures[0].live_ids()
        records = memory.get(GetRequest(ids=ids, namespace=namespace)).records if ids else []
        kinds = {r.note.id: r.note.kind for r in records if r.note.kind is not None}
        column = cls(seq, {r.note.id: r.note.metadata for r in records}, kinds)
        index.metadata = column
        return column

    def posting(self, key: str, value: Any) -> list[str]:
        """The ids whose metadata holds ``value`` at top-level ``key`` (JSON equality: ``1`` equals
        ``1.0``, a bool is not a number)."""
        postings = self._postings.get(key)
        if postings is None:
            postings = {}
            for id_, meta in self.metadata.items():
                if key in meta and isinstance(v := meta[key], _SCALARS):
                    postings.setdefault(_value_key(v), []).append(id_)
            self._postings[key] = postings
        return postings.get(_value_key(value), [])

    def matching(self, spec: Any, match: RecordPredicate) -> list[str]:
        """The ids whose metadata matches the filter ``spec`` (compiled: ``match``)."""
        posted = _posted(spec)
        if posted is not None:
            return self.posting(*posted)
        kinds = self.kinds
        return [id_ for id_, meta in self.metadata.items() if match(meta, kinds.get(id_))]

    def rows(
        self, spec: Any, match: RecordPredicate, structure: SortedRowsStructure
    ) -> tuple[list[str], np.ndarray, np.ndarray]:
        """``structure.rows_among(self.matching(spec, match))``. A posting's row numbers are kept
        beside it and read again only once the rows moved (a write, a merge, a compaction:
        :attr:`~coniti.structure.rows.SortedRowStore.layout`) or the structure is another."""
        posted = _posted(spec)
        if posted is None:
            return structure.rows_among(self.matching(spec, match))
        key = (posted[0], _value_key(posted[1]))
        kept = self._positions.get(key)
        got = None if kept is None else structure.rows_at(kept)
        if got is None:
            kept = structure.positions(self.posting(*posted))
            self._positions[key] = kept
            got = structure.rows_at(kept)
            assert got is not None  # read at the layout they were found at
        return got


def _posted(spec: Any) -> tuple[str, Any] | None:
    """The top-level key and scalar value of a filter answered from a posting, or None."""
    if isinstance(spec, dict) and len(spec) == 1:
        ((key, value),) = spec.items()
        if (
            not key.startswith("$")
            and "." not in key
            and isinstance(value, _SCALARS)
            and value is not None
        ):
            return key, value
    return None


def _value_key(value: Any) -> bytes:
    """A key equal for JSON-equal scalars: numbers by value (``1`` and ``1.0`` alike), bools apart."""
    if isinstance(value, bool) or value is None:
        return b"j" + bytes(orjson.dumps(value))
    if isinstance(value, int | float):
        return b"n" + orjson.dumps(float(value))
    return b"s" + str(value).encode("utf-8", "surrogatepass")


class Prefiltered:
    """The matching rows of one namespace (row ``ids``, their unit ``vectors`` and ``times``) for
    the unit ``query``, ranked by the structure's order (score, then the newer, then the smaller
    id): ``rank(k)`` and ``size()`` as :class:`~coniti.engine.recall.Stream` asks them. Every row
    is scored exactly on the first of them (a note with ``passages`` at its best row, as
    :func:`coniti.passages.note_hits`); :func:`first_of` scores only the rows that can be among the
    first ``want`` over several namespaces. ``rank(k)`` orders only the first ``k``
    (``heapq.nsmallest``: ``sorted(...)[:k]``, the keys being distinct)."""

    def __init__(
        self,
        ids: list[str],
        vectors: np.ndarray,
        times: np.ndarray,
        query: np.ndarray,
        passages: bool = False,
    ) -> None:
        self.ids, self.vectors, self.times, self.query = ids, vectors, times, query
        self.passages = passages
        self._keys: list[tuple[float, float, str]] | None = None

    def _ranked(self) -> list[tuple[float, float, str]]:
        if self._keys is None:
            ids = self.ids
            scores = exact_scores(self.vectors, self.query, unit=True) if ids else []
            times = self.times.tolist()
            if self.passages:  # a note at its best row, as coniti.passages.note_hits
                best: dict[str, tuple[float, float]] = {}
                for row, score, when in zip(ids, scores, times, strict=True):
                    note = note_id(row)
                    if note not in best or score > best[note][0]:
                        best[note] = (score, when)
                ids = list(best)
                scores, times = [best[n][0] for n in ids], [best[n][1] for n in ids]
            self._keys = list(zip([-s for s in scores], [-t for t in times], ids, strict=True))
        return self._keys

    def rank(self, k: int) -> list[Ranked]:
        first = heapq.nsmallest(k, self._ranked())
        return [_ranked(i, -s, r) for r, (s, _, i) in enumerate(first, start=1)]

    def size(self) -> int:
        return len(self._ranked())


def _ranked(id_: str, score: float, rank: int) -> Ranked:
    return Ranked(id_, score, {"strategy": "semantic", "semantic": score, "ranks": {"semantic": rank}})


def first_of(found: Sequence[Prefiltered], want: int) -> list[list[Ranked]] | None:
    """Each namespace's rows (``found[i]``) that can be among the first ``want`` of all of them, in
    its own order, scored in one pass: every row's fast float32 score into one array, its ``want``-th
    best taken once, and only the rows within twice the float32 error bound of it scored exactly
    (they hold every row whose exact score reaches the ``want``-th best exact score, ties included:
    :func:`~coniti.structure.across.top_across`'s rule), so the first ``want`` of their merge are those
    of every namespace's full ranking merged. None when a namespace has passage rows or a fast score
    is NaN (the caller reads each namespace's full ranking)."""
    if any(f.passages for f in found):
        return None
    total = sum(len(f.ids) for f in found)
    rankings: list[list[Ranked]] = [[] for _ in found]
    if not total or want < 1:
        return rankings
    approx = np.empty(total, dtype=np.float32)
    starts = []
    offset = 0
    for f in found:
        starts.append(offset)
        m = len(f.ids)
        if m:
            fast_scores(f.vectors, f.query, approx[offset : offset + m])
        offset += m
    if np.isnan(approx).any():
        return None
    if total > want:
        kth = kth_largest(approx, want)
        eps = error_bound(found[0].query.shape[0])
        picks = (approx >= float32_at_most(float(kth) - 2.0 * eps)).nonzero()[0]
    else:
        picks = np.arange(total)
    which = np.searchsorted(np.asarray(starts), picks, "right") - 1
    chosen: list[list[tuple[float, float, str]]] = [[] for _ in found]
    for n in np.unique(which).tolist():
        f = found[n]
        rows = picks[which == n] - starts[n]
        scores = exact_scores(f.vectors.take(rows, axis=0), f.query, unit=True)
        times = f.times.take(rows).tolist()
        chosen[n] = sorted(
            zip([-s for s in scores], [-t for t in times], [f.ids[r] for r in rows.tolist()], strict=True)
        )
    for n, keys in enumerate(chosen):
        rankings[n] = [_ranked(i, -s, r) for r, (s, _, i) in enumerate(keys, start=1)]
    return rankings


def applies(
    query: Query, vector: np.ndarray | None, index: NamespaceIndex, strategy: Strategy, merged: bool
) -> bool:
    """Whether :func:`prefiltered` answers this ask in this namespace (module docstring)."""
    if query.filter is None or not merged or vector is None or query.near is not None:
        return False
    if query.resolved_strategy != "semantic" or index.seq is None or not index.structures:
        return False
    if type(strategy).answer is not DefaultStrategy.answer:
        return False
    return type(index.structures[0]) in (FlatStructure, SegmentTreeStructure)


def prefiltered(
    query: Query,
    vector: np.ndarray,
    namespace: tuple[str, ...],
    index: NamespaceIndex,
    memory: MemoryBackend,
    match: RecordPredicate,
) -> Prefiltered:
    """The ranking of the notes of ``index`` that match ``query.filter`` (and its time range), each
    row scored exactly as the structure scores it (module docstring; call when :func:`applies`)."""
    column = MetadataColumn.of(index, namespace, memory)
    structure = index.structures[0]
    if index.passages is None and isinstance(structure, SortedRowsStructure):
        ids, vectors, times = column.rows(query.filter, match, structure)
    else:
        matching = column.matching(query.filter, match)
        if index.passages is not None:  # a long note's further passages are rows of their own
            matching = [*matching, *live_passages(structure, matching)]
        ids, vectors, times = structure.rows_among(matching)
    if query.time_range is not None and ids:
        start, end = query.time_range.start, query.time_range.end
        keep = np.ones(len(ids), dtype=bool)
        if start is not None:
            keep &= times >= start
        if end is not None:
            keep &= times < end
        if not keep.all():
            chosen = np.flatnonzero(keep)
            ids = [ids[i] for i in chosen.tolist()]
            vectors, times = vectors[chosen], times[chosen]
    unit, _ = unit_vector(np.asarray(vector, dtype=np.float64))
    return Prefiltered(ids, vectors, times, unit, index.passages is not None)
