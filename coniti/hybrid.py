"""Recall by strategy for one namespace: the ranked candidates a query's strategy gives, with
their signals (:class:`~coniti.recall.Signals` fields), before notes are read.

``semantic``
    The engine's :class:`~coniti.strategy.Strategy` answers from the structures (cosine, or time
    closeness to ``near``).
``keyword``
    The namespace's :class:`~coniti.keyword.KeywordIndex` answers by BM25.
``recent``
    The first structure's time-only search: newest first, score 0.0.
``hybrid``
    Both of the above asked for ``depth`` candidates each (:func:`depth`), fused by
    :func:`coniti.fusion.fuse` with the query's :class:`~coniti.fusion.Fusion` (a ``recency``
    weight adds the candidates ranked by timestamp) and the namespace's feedback weights; the
    score is the fused score.

Candidates come in the total order of :mod:`coniti.fusion` (score, newer, id).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coniti.actor import Query
from coniti.fusion import Fusion, fuse
from coniti.keyword import KeywordIndex
from coniti.strategy import Strategy, StrategyContext

__all__ = ["Ranked", "candidates", "depth"]


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
    feedback: Callable[[], Mapping[str, float]],
) -> list[Ranked]:
    """At most ``query.k`` candidates of the query's resolved strategy (module docstring)."""
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
        hits = keyword.search(query.text, k=query.k, time_range=query.time_range)
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
    return _hybrid(query, vector, strategy, context, keyword, feedback)


def _hybrid(
    query: Query,
    vector: np.ndarray | None,
    strategy: Strategy,
    context: StrategyContext,
    keyword: KeywordIndex,
    feedback: Callable[[], Mapping[str, float]],
) -> list[Ranked]:
    fusion = query.fusion or Fusion()
    wide = query.model_copy(update={"k": depth(query.k)})
    semantic = strategy.answer(wide, vector, context) if (vector is not None or query.near) else []
    lexical = (
        keyword.search(query.text, k=wide.k, time_range=query.time_range) if query.text else []
    )
    times = {h.id: keyword.timestamp(h.id) for h in (*semantic, *lexical)}
    rankings: dict[str, list[str]] = {
        "semantic": [h.id for h in semantic],
        "keyword": [h.id for h in lexical],
    }
    if fusion.recency:
        rankings["recency"] = sorted(times, key=lambda i: (-times[i], i))
    weights = dict(feedback()) if fusion.feedback else {}
    fused = fuse(rankings, times, fusion=fusion, feedback=weights)
    sem = {h.id: h.score for h in semantic} if vector is not None else {}
    lex = {h.id: h.score for h in lexical}
    newest = max(times.values(), default=0.0)
    out = []
    for id_, score, ranks in fused[: query.k]:
        signals: dict[str, Any] = {
            "strategy": "hybrid",
            "recency": newest - times[id_],
            "feedback": float(weights.get(id_, 0.0)),
            "ranks": ranks,
            "fused": score,
        }
        if id_ in sem:
            signals["semantic"] = sem[id_]
        if id_ in lex:
            signals["keyword"] = lex[id_]
        out.append(Ranked(id_, score, signals))
    return out
