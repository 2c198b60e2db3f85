"""One ranking across the namespaces of a prefix before anything is resolved (:func:`first_across`):
for a ``semantic`` ask merged over a prefix, each namespace's ranking is asked for its first
``want`` candidates (the structures' search: no record read), the candidates of every namespace are
put in one order, and only the first ``want`` of that order have their records read and their hits
built (signals, keyword scores): one resolve for the ask, not one per namespace of hits then thrown
away.

**What it equals.** The merged order is the one hits are merged by (:mod:`coniti.engine.recall`):
best score, then the newer note, then the smaller id, then the namespace, the note's time read from
the keyword index (the timestamp its rows were given, the note's own). Each namespace's first
``want`` hold every one of its candidates that can be among the first ``want`` overall, so the
first ``want`` of the merge are those of the per-namespace answers merged. Should a chosen
candidate's record have vanished from memory (or lost its vector, or, re-tested, not match the
filter) since the index saw it, :func:`first_across` gives up (None) and the ask takes the path
that reads each namespace's candidates in turn.

**One scoring pass** (:func:`one_pass`): when every namespace in scope ranks by a ``flat`` or
``segment_tree`` structure first, with the default strategy, an unfiltered
``semantic`` ask without ``near`` scores the rows of all of them as one
(:func:`~coniti.structure.across.top_across`: one array of fast scores, one ``k``-th best, the
candidates near it scored exactly), and each namespace's ranking is its share of the first ``want``
of that pass, in the structure's order. The hits are those of each structure's own search merged:
the same rows, scores (the canonical exact score) and order (score, then the newer, then the
smaller id, then the namespace); deleted rows, rows outside the time range and buffered rows
are treated as the structures treat them. A long note's passage rows (:mod:`coniti.passages`)
count as their note at its best row, the pass asked twice as deep until ``want`` notes are sure. Any other ask, or a structure of another kind in scope,
takes one search per namespace.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from coniti.actor import Query
from coniti.filters import RecordPredicate
from coniti.hybrid import Ranked
from coniti.memory import MemoryBackend
from coniti.passages import note_id
from coniti.strategy import DefaultStrategy, Strategy
from coniti.structure.across import top_across
from coniti.structure.base import time_bounds
from coniti.structure.flat import FlatStructure, SortedRowsStructure
from coniti.structure.scoring import unit_vector
from coniti.structure.segment_tree import SegmentTreeStructure

if TYPE_CHECKING:
    from coniti.engine.recall import Found, Scope

__all__ = ["first_across", "one_pass"]

_ONE_PASS = (FlatStructure, SegmentTreeStructure)
"""The structures :func:`one_pass` reads the rows of (exact, over :class:`SortedRows`)."""


def first_across(
    scopes: Sequence[Scope],
    rankings: Sequence[Callable[[int], list[Ranked]]],
    want: int,
    floor: float | None,
    match: RecordPredicate | None,
    memory: MemoryBackend,
    hits: Callable[[Scope, list[Ranked]], Found],
) -> Found | None:
    """The first ``want`` hits over ``scopes`` (``rankings[i]``: the ranking of ``scopes[i]``,
    every candidate of it matching the filter already; ``floor``: the ``min_score``), in the merged
    order, unranked yet (the caller sets the merged ranks); None when a chosen candidate's record
    cannot be answered (module docstring)."""
    pool: list[tuple[tuple[float, float, str, tuple[str, ...]], int, Ranked]] = []
    for n, (scope, rank) in enumerate(zip(scopes, rankings, strict=True)):
        ranked = rank(want)
        if floor is not None:
            ranked = [r for r in ranked if r.score >= floor]
        if not ranked:
            continue
        timestamp = scope.index.keyword.timestamp
        for r in ranked:
            pool.append(((-r.score, -timestamp(r.id), r.id, scope.namespace), n, r))
    pool.sort(key=lambda item: item[0])
    del pool[want:]
    chosen: dict[int, list[Ranked]] = {}
    for _, n, r in pool:
        chosen.setdefault(n, []).append(r)
    found: Found = []
    for n, among in chosen.items():
        scope = scopes[n]
        scope.read(memory, [r.id for r in among])
        records = scope.records
        for r in among:
            record = records.get(r.id)
            if record is None or record.vector is None:
                return None
            if match is not None and not match(record.note.metadata, record.note.kind):
                return None
        found += hits(scope, among)
    return found


def one_pass(
    scopes: Sequence[Scope], query: Query, vector: np.ndarray, strategy: Strategy, want: int
) -> list[list[Ranked]] | None:
    """Each of ``scopes``' candidates among the first ``want`` of an unfiltered ``semantic`` ask
    over all of them scored in one pass, in its structure's order (module docstring); None when the
    ask or a scope does not allow it (the caller then searches each namespace)."""
    if query.near is not None or query.filter is not None or want < 1:
        return None
    if type(strategy).answer is not DefaultStrategy.answer:
        return None
    structures = []
    for scope in scopes:
        index = scope.index
        if not index.structures:
            return None
        first = index.structures[0]
        if type(first) not in _ONE_PASS or not isinstance(first, SortedRowsStructure):
            return None
        structures.append(first)
    q = np.asarray(vector, dtype=np.float64)
    if q.ndim != 1 or q.size == 0:
        return None
    unit, squared = unit_vector(q)
    if not math.isfinite(squared):
        return None
    if any(s.dim is not None and s.dim != q.size for s in structures):
        return None  # the per-namespace search says what is wrong
    start, end = time_bounds(query.time_range)
    rankings: list[list[Ranked]] = [[] for _ in scopes]
    if start >= end:
        return rankings
    rows = [s.sorted_rows for s in structures]
    passages = any(scope.index.passages is not None for scope in scopes)
    deep = want
    while True:
        found = top_across(rows, unit, deep, start, end)
        if found is None:
            return None
        if not passages:
            break
        every = len(found) < deep  # every row in range is a candidate
        found = _notes(found, deep)  # a note at its best row (coniti.passages.note_hits)
        if every or len(found) >= want:
            break
        deep *= 2  # fewer than want notes reach the deep-th best row: deeper
    found.sort(key=lambda f: (-f[2], -f[3], f[1], scopes[f[0]].namespace))
    for n, id_, score, _ in found[:want]:
        ranked = rankings[n]
        signals = {"strategy": "semantic", "semantic": score, "ranks": {"semantic": len(ranked) + 1}}
        ranked.append(Ranked(id_, score, signals))
    return rankings


def _notes(
    found: list[tuple[int, str, float, float]], deep: int
) -> list[tuple[int, str, float, float]]:
    """The notes of the candidate rows ``found`` (of :func:`top_across` for ``deep``), each at its
    best row, that are sure to be among the best notes: those whose best row reaches the
    ``deep``-th best exact score (every row that does is in ``found``, so no other note can rank
    before them). All of them when ``found`` holds fewer than ``deep`` rows (every row in range)."""
    scores = sorted((f[2] for f in found), reverse=True)
    floor = scores[deep - 1] if len(scores) >= deep else -math.inf
    best: dict[tuple[int, str], tuple[int, str, float, float]] = {}
    for n, row, score, when in found:
        if score < floor:
            continue
        key = (n, note_id(row))
        if key not in best or score > best[key][2]:
            best[key] = (n, key[1], score, when)
    return list(best.values())
