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
    :func:`fuse_hits`: the semantic and keyword hits, :func:`depth` of each over every namespace
    asked (filters applied; keyword hits below :attr:`Fusion.keyword_floor
    <coniti.fusion.Fusion.keyword_floor>` of the query's BM25 ceiling left out), fused with the
    query's :class:`~coniti.fusion.Fusion` (by score, :func:`coniti.fusion.fuse_scores`, or by
    rank, :func:`coniti.fusion.fuse`), the feedback weights of their namespaces and the times the
    question names; the score is the fused score. Fusing once over all namespaces of a prefix
    keeps the fused scores comparable.

Candidates come in the total order of :mod:`coniti.fusion` (score, newer, id).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coniti.actor import Query
from coniti.dates import QuestionTime
from coniti.fusion import SUPERSEDE_DEPTH, Fusion, fuse, fuse_scores, supersede
from coniti.keyword import Corpus, KeywordIndex, thread_of
from coniti.passages import note_hits
from coniti.recall import Hit, trusted_signals
from coniti.strategy import Strategy, StrategyContext
from coniti.structure import StructureHit, unit_rows

__all__ = ["Ranked", "candidates", "depth", "fuse_hits"]

_hit = Hit.constructor()



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


def fuse_hits(
    query: Query,
    semantic: Sequence[tuple[Hit, np.ndarray]],
    lexical: Sequence[tuple[Hit, np.ndarray]],
    feedback: Callable[[tuple[str, ...]], Mapping[str, float]],
    *,
    question: QuestionTime | None = None,
    ceiling: float = 0.0,
) -> list[tuple[Hit, np.ndarray]]:
    """Hybrid recall: the semantic and keyword hits (each list in its total order, over every
    namespace asked, filters applied, their semantic and keyword signals filled in) fused with the
    query's :class:`~coniti.fusion.Fusion` and each namespace's feedback weights (``feedback(ns)``):
    by score (:func:`coniti.fusion.fuse_scores`; ``question``: the times the question names, for
    the ``date`` signal; ``ceiling``: the question's BM25 ceiling) or by rank
    (:func:`coniti.fusion.fuse`), ``auto`` choosing score when a candidate is a conversation turn
    (:func:`coniti.keyword.thread_of`); then, for a question about the present,
    :func:`coniti.fusion.supersede`. Returns hits scored by the fused
    score, with their signals merged, in the fusion's total order (an exact tie in score and time:
    the smaller id, then the smaller namespace). ``query.min_score`` applies to the fused score."""
    fusion = query.fusion or Fusion()
    method = fusion.method
    found: dict[Key, tuple[Hit, np.ndarray]] = {}
    for hit, vector in (*semantic, *lexical):
        found.setdefault((hit.note.id, hit.namespace), (hit, vector))
    times = {key: hit.note.timestamp for key, (hit, _) in found.items()}
    rankings: dict[str, list[Key]] = {
        "semantic": [(h.note.id, h.namespace) for h, _ in semantic],
        "keyword": [(h.note.id, h.namespace) for h, _ in lexical],
    }
    if fusion.recency:
        rankings["recency"] = sorted(times, key=lambda key: (-times[key], key))
    weights: dict[Key, float] = {}
    if fusion.feedback:
        for ns in sorted({key[1] for key in found}):
            for id_, w in feedback(ns).items():
                if (id_, ns) in found:
                    weights[(id_, ns)] = w
    dated: dict[Key, float] = {}
    if method == "auto":
        method = "score" if any(thread_of(h.note.metadata) is not None for h, _ in found.values()) else "rank"
    if question is not None and question.mentions and fusion.date and found and method == "score":
        keys = list(found)
        hits = question.matches(np.array([times[key] for key in keys], dtype=np.float64))
        dated = {key: 1.0 for key, hit in zip(keys, hits.tolist(), strict=True) if hit}
    ranks: dict[Key, dict[str, int]] = {}
    for name, keys_ in rankings.items():
        for r, key in enumerate(keys_, start=1):
            ranks.setdefault(key, {})[name] = r
    moved: dict[Key, Key] = {}
    if method == "rank":
        fused = [(key, score) for key, score, _ in fuse(rankings, times, fusion=fusion, feedback=weights)]
    else:
        signals: dict[Key, dict[str, float]] = {}
        for key, (hit, _) in found.items():
            base = hit.signals
            signals[key] = {
                "semantic": 0.0 if base is None or base.semantic is None else base.semantic,
                "keyword": 0.0 if base is None or base.keyword is None else base.keyword,
                "date": dated.get(key, 0.0),
                "feedback": float(weights.get(key, 0.0)),
            }
        fused = fuse_scores(signals, times, fusion=fusion, ceiling=ceiling)
    if question is not None and question.present and not question.mentions and fused:
        head = [key for key, _ in fused[:SUPERSEDE_DEPTH]]
        unit = dict(zip(head, unit_rows(np.stack([found[key][1] for key in head])), strict=True))
        fused, moved = supersede(fused, times, unit, fusion=fusion, method=method)
    newest = max(times.values(), default=0.0)
    out = []
    for key, score in fused:
        if query.min_score is not None and score < query.min_score:
            continue
        hit, vector = found[key]
        base = hit.signals
        values = {
            "strategy": "hybrid",
            "semantic": None if base is None else base.semantic,
            "keyword": None if base is None else base.keyword,
            "recency": newest - hit.note.timestamp,
            "feedback": float(weights.get(key, 0.0)),
            "ranks": ranks.get(key, {}),
            "fused": score,
        }
        if method == "score":
            values["date"] = dated.get(key, 0.0)
        if key in moved:
            values["superseded_by"] = moved[key][0]
        out.append((_hit({**hit.__dict__, "score": score, "signals": trusted_signals(values)}), vector))
    return out
