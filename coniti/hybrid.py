"""Recall by strategy for one namespace: the ranked candidates a query's strategy gives, with
their signals (:class:`~coniti.recall.Signals` fields), before notes are read.

``semantic``
    The engine's :class:`~coniti.strategy.Strategy` answers from the structures (cosine, or time
    closeness to ``near``).
``keyword``
    The namespace's :class:`~coniti.keyword.KeywordIndex` answers by BM25 (over several
    namespaces, with the statistics of their union: a :class:`~coniti.keyword.Corpus`).
``recent``
    The first structure's time-only search: newest first, score 0.0.
``hybrid``
    :func:`fuse_keys`: the semantic and keyword candidates, :func:`depth` of each over every
    namespace asked (keyword candidates below :attr:`Fusion.keyword_floor
    <coniti.fusion.Fusion.keyword_floor>` of the query's BM25 ceiling left out), fused with the
    query's :class:`~coniti.fusion.Fusion` (by score, :func:`coniti.fusion.fuse_scores`, or by
    rank, :func:`coniti.fusion.fuse`; a ``recency`` weight adds the candidates ranked by
    timestamp), the feedback weights of their namespaces and the times the question names; then,
    for a question about the present, :func:`coniti.fusion.supersede`. The score is the fused
    score. Fusing once over all namespaces of a prefix keeps the fused scores comparable. (The
    engine's recall, :mod:`coniti.engine.recall`, resolves ``Fusion(method="auto")``, applies a
    query's filter to the fused ranking, reading each candidate's note once.)

A long note's passage rows (:mod:`coniti.passages`) are mapped back to their note by the
``semantic`` and ``recent`` rankings: a note is ranked at its best row.

Candidates come in the total order of :mod:`coniti.fusion` (score, newer, id).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coniti.actor import Query
from coniti.fusion import SUPERSEDE_DEPTH, Fusion, fuse, fuse_scores, supersede
from coniti.keyword import Corpus, KeywordIndex
from coniti.passages import note_hits
from coniti.strategy import Strategy, StrategyContext
from coniti.structure import StructureHit

__all__ = ["Fused", "Key", "Ranked", "candidates", "depth", "fuse_keys"]


@dataclass(frozen=True, slots=True)
class Ranked:
    """One candidate: its id, its score and the signals known before the note is read."""

    id: str
    score: float
    signals: dict[str, Any] = field(default_factory=dict)


def depth(k: int) -> int:
    """How many candidates hybrid asks of each side for ``k`` hits: ``max(4 * k, 50)``."""
    return max(4 * k, 50)


def candidates(
    query: Query,
    vector: np.ndarray | None,
    *,
    strategy: Strategy,
    context: StrategyContext,
    keyword: KeywordIndex,
    corpus: Corpus | None = None,
) -> list[Ranked]:
    """At most ``query.k`` candidates of ``semantic``, ``keyword`` or ``recent`` (module
    docstring; ``hybrid`` is :func:`fuse_keys` over the first two)."""
    name = query.resolved_strategy
    if name == "semantic":
        hits = _note_rows(query, lambda asked: strategy.answer(asked, vector, context), context)
        key = "semantic" if vector is not None else None
        return [
            Ranked(h.id, h.score, {"strategy": name, **({key: h.score} if key else {}), "ranks": {"semantic": r}})
            for r, h in enumerate(hits, start=1)
        ]
    if name == "keyword":
        assert query.text is not None
        hits = keyword.search(query.text, k=query.k, time_range=query.time_range, corpus=corpus)
        return [
            Ranked(h.id, h.score, {"strategy": name, "keyword": h.score, "ranks": {"keyword": r}})
            for r, h in enumerate(hits, start=1)
        ]
    if name == "recent":
        if not context.structures:
            return []
        first = context.structures[0]
        hits = _note_rows(query, lambda asked: first.search(None, k=asked.k, time_range=asked.time_range), context)
        newest = keyword.timestamp(hits[0].id) if hits else 0.0
        return [
            Ranked(h.id, h.score, {
                "strategy": name, "recency": newest - keyword.timestamp(h.id), "ranks": {"recency": r},
            })
            for r, h in enumerate(hits, start=1)
        ]
    raise ValueError(f"candidates() answers semantic, keyword or recent, not {name!r}")


def _note_rows(
    query: Query, search: Callable[[Query], list[StructureHit]], context: StrategyContext
) -> list[StructureHit]:
    """``search(query)`` with passage rows mapped to their notes (each note at its best row, the
    ``near`` anchor left out: :func:`coniti.passages.note_hits`), asked deeper until ``query.k``
    notes are found or the structure holds no more rows."""
    asked = query
    while True:
        rows = search(asked)
        hits = note_hits(rows, exclude=query.near)
        if len(hits) >= query.k or len(rows) < asked.k:
            return hits[: query.k]
        size = len(context.structures[0]) if context.structures else 0  # O(rows) for a past view
        if asked.k >= size:
            return hits[: query.k]
        asked = asked.model_copy(update={"k": min(asked.k * 2, size)})


Key = tuple[str, tuple[str, ...]]
"""A hit's identity across namespaces: (note id, namespace); ordered by id, then namespace."""


@dataclass(frozen=True, slots=True)
class Fused:
    """One candidate of hybrid recall after fusion: its ``key``, fused ``score``, its rank in each
    ranking that holds it, its feedback ``weight``, its ``date`` signal (score fusion: 1.0 when
    the note falls in a time the question names, else 0.0; None by rank) and the id of the newer
    note it was moved below (``superseded_by``, :func:`coniti.fusion.supersede`)."""

    key: Key
    score: float
    ranks: dict[str, int]
    weight: float
    date: float | None = None
    superseded_by: str | None = None


def fuse_keys(
    query: Query,
    semantic: Sequence[Key],
    lexical: Sequence[Key],
    times: Mapping[Key, float],
    feedback: Mapping[tuple[str, ...], Mapping[str, float]],
    *,
    scores: Mapping[Key, tuple[float, float]] | None = None,
    dated: Collection[Key] = (),
    ceiling: float = 0.0,
    unit: Callable[[Sequence[Key]], np.ndarray] | None = None,
) -> list[Fused]:
    """Hybrid recall's fusion: the semantic and keyword rankings (each in its total order, over
    every namespace asked) fused with the query's :class:`~coniti.fusion.Fusion`, whose ``method``
    is ``"score"`` or ``"rank"`` here (``"auto"`` counts as rank; the engine resolves it), and
    each namespace's feedback weights (``feedback[ns]``: id -> weight; a namespace absent has
    none); a ``recency`` weight adds every candidate ranked by ``times[key]``, newest first.

    By rank: :func:`coniti.fusion.fuse`. By score: :func:`coniti.fusion.fuse_scores` of each
    candidate's ``scores[key]`` (its cosine and BM25 scores, every candidate's), ``date`` 1.0 for
    the keys in ``dated`` and ``ceiling``, the question's BM25 ceiling. ``unit`` (given for a
    question about the present): the unit vectors of some keys' notes, one row each; the first
    candidates are then passed through :func:`coniti.fusion.supersede`. Returns the candidates in
    the fusion's total order (an exact tie in score and time: the smaller id, then the smaller
    namespace); the fused score is the hit's score."""
    fusion = query.fusion or Fusion()
    method = "score" if fusion.method == "score" else "rank"
    rankings: dict[str, Sequence[Key]] = {"semantic": semantic, "keyword": lexical}
    if fusion.recency:
        rankings["recency"] = sorted(times, key=lambda key: (-times[key], key))
    weights: dict[Key, float] = {}
    if fusion.feedback:
        for ns in sorted({key[1] for key in times}):
            for id_, w in feedback.get(ns, {}).items():
                if (id_, ns) in times:
                    weights[(id_, ns)] = w
    ranks: dict[Key, dict[str, int]] = {}
    for name, keys in rankings.items():
        for r, key in enumerate(keys, start=1):
            ranks.setdefault(key, {})[name] = r
    fused: list[tuple[Key, float]]
    if method == "rank":
        fused = [(key, score) for key, score, _ in fuse(rankings, times, fusion=fusion, feedback=weights)]
    else:
        held = scores or {}
        signals = {
            key: {
                "semantic": held.get(key, (0.0, 0.0))[0],
                "keyword": held.get(key, (0.0, 0.0))[1],
                "date": 1.0 if key in dated else 0.0,
                "feedback": float(weights.get(key, 0.0)),
            }
            for key in times
        }
        fused = fuse_scores(signals, times, fusion=fusion, ceiling=ceiling)
    moved: dict[Key, Key] = {}
    if unit is not None and len(fused) > 1:
        head = [key for key, _ in fused[:SUPERSEDE_DEPTH]]
        rows = dict(zip(head, unit(head), strict=True))
        fused, moved = supersede(fused, times, rows, fusion=fusion, method=method)
    return [
        Fused(
            key, score, ranks.get(key, {}), float(weights.get(key, 0.0)),
            date=(1.0 if key in dated else 0.0) if method == "score" else None,
            superseded_by=moved[key][0] if key in moved else None,
        )
        for key, score in fused
    ]
