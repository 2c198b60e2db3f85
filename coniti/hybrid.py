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
    <coniti.fusion.Fusion.keyword_floor>` of the query's BM25 ceiling left out), fused by
    :func:`coniti.fusion.fuse` with the query's :class:`~coniti.fusion.Fusion` (a ``recency``
    weight adds the candidates ranked by timestamp) and the feedback weights of their namespaces;
    the score is the fused score. Fusing once over all namespaces of a prefix keeps the fused
    scores comparable. (The engine's recall, :mod:`coniti.engine.recall`, applies a query's filter
    to the fused ranking, reading each candidate's note once.)

Candidates come in the total order of :mod:`coniti.fusion` (score, newer, id).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coniti.actor import Query
from coniti.fusion import Fusion, fuse
from coniti.keyword import Corpus, KeywordIndex
from coniti.strategy import Strategy, StrategyContext

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
    docstring; ``hybrid`` is :func:`fuse_hits` over the first two)."""
    name = query.resolved_strategy
    if name == "semantic":
        hits = strategy.answer(query, vector, context)
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
        hits = context.structures[0].search(None, k=query.k, time_range=query.time_range)
        newest = keyword.timestamp(hits[0].id) if hits else 0.0
        return [
            Ranked(h.id, h.score, {
                "strategy": name, "recency": newest - keyword.timestamp(h.id), "ranks": {"recency": r},
            })
            for r, h in enumerate(hits, start=1)
        ]
    raise ValueError(f"candidates() answers semantic, keyword or recent, not {name!r}")


Key = tuple[str, tuple[str, ...]]
"""A hit's identity across namespaces: (note id, namespace); ordered by id, then namespace."""


@dataclass(frozen=True, slots=True)
class Fused:
    """One candidate of hybrid recall after fusion: its ``key``, fused ``score``, its rank in each
    ranking that holds it and its feedback ``weight``."""

    key: Key
    score: float
    ranks: dict[str, int]
    weight: float


def fuse_keys(
    query: Query,
    semantic: Sequence[Key],
    lexical: Sequence[Key],
    times: Mapping[Key, float],
    feedback: Mapping[tuple[str, ...], Mapping[str, float]],
) -> list[Fused]:
    """Hybrid recall's fusion: the semantic and keyword rankings (each in its total order, over
    every namespace asked) fused by :func:`coniti.fusion.fuse` with the query's
    :class:`~coniti.fusion.Fusion` (a ``recency`` weight adds every candidate ranked by
    ``times[key]``, newest first) and each namespace's feedback weights (``feedback[ns]``: id ->
    weight; a namespace absent has none), in the fusion's total order (an exact tie in score and
    time: the smaller id, then the smaller namespace). The fused score is the hit's score."""
    fusion = query.fusion or Fusion()
    rankings: dict[str, Sequence[Key]] = {"semantic": semantic, "keyword": lexical}
    if fusion.recency:
        rankings["recency"] = sorted(times, key=lambda key: (-times[key], key))
    weights: dict[Key, float] = {}
    if fusion.feedback:
        for ns in sorted({key[1] for key in times}):
            for id_, w in feedback.get(ns, {}).items():
                if (id_, ns) in times:
                    weights[(id_, ns)] = w
    return [
        Fused(key, score, ranks, float(weights.get(key, 0.0)))
        for key, score, ranks in fuse(rankings, times, fusion=fusion, feedback=weights)
    ]
