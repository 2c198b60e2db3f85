"""Rank fusion and diversity: reciprocal-rank fusion (:func:`fuse`) and maximal marginal relevance
(:func:`mmr`), pure functions over ids, ranks and vectors.

**Reciprocal-rank fusion.** Each ranking (a list of ids, best first) gives the id at 1-based rank
``r`` the share ``weight / (k + r)``; an id's fused score is the sum of its shares over the rankings
that hold it, plus ``feedback_weight * feedback(id) / (k + 1)`` when feedback is given: a feedback
weight of 1 counts like being first in one more ranking of weight ``feedback_weight``. ``k``
(:attr:`Fusion.k`, 60 by default as in Cormack et al.) damps the head of each list.

**Maximal marginal relevance.** From candidates with relevance scores and unit vectors,
:func:`mmr` picks one at a time the candidate maximising
``lam * rel(d) - (1 - lam) * max(cos(d, s) for s picked)``, where ``rel`` is the relevance
min-max-scaled to [0, 1] over the candidates (all equal: 1). The first pick is always the most
relevant candidate. ``lam = 1`` keeps the relevance order; ``lam = 0`` picks the most relevant first
and then always the candidate least similar to those picked.

**One total order.** Fused ids are ordered by fused score (descending), then timestamp
(descending: newer first), then id (ascending), the order structures use. MMR breaks a tie between
equal objectives by the unscaled relevance (higher wins), then by the candidate's position in the
order given (earlier wins). Both are exact
float64 computations on the same inputs, so they give the same answer on every machine.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import pydantic

from coniti.contracts import Contract

__all__ = ["RANKINGS", "Fusion", "fuse", "fuse_reciprocal_rank", "mmr", "order_key"]

K = TypeVar("K", str, tuple[str, tuple[str, ...]])
"""What fusion ranks: note ids, or (id, namespace) pairs across namespaces (ordered by id, then
namespace, for the tie rule)."""

RANKINGS = ("semantic", "keyword", "recency")
"""The rankings hybrid recall fuses, in the order their shares are summed."""


class Fusion(Contract):
    """How hybrid recall fuses: the RRF constant ``k``, a weight per ranking (``semantic``,
    ``keyword``, ``recency``: by timestamp, newest first; 0 leaves a ranking out), the weight of
    feedback (0: feedback does not move hybrid results) and ``keyword_floor``: a note joins the
    keyword ranking only when its BM25 score is at least this fraction of the query's BM25 ceiling
    (:meth:`coniti.keyword.KeywordIndex.ceiling`), so that matches on words most notes share do
    not outvote the semantic ranking (0: every match joins). The default 0.15 was chosen on the
    labelled recall set (``tools/bench_recall.py``; README, Strategies)."""

    model_config = pydantic.ConfigDict(frozen=True)

    k: int = pydantic.Field(default=60, ge=1, le=1_000_000, strict=True)
    semantic: float = pydantic.Field(default=1.0, ge=0.0, allow_inf_nan=False)
    keyword: float = pydantic.Field(default=1.0, ge=0.0, allow_inf_nan=False)
    recency: float = pydantic.Field(default=0.0, ge=0.0, allow_inf_nan=False)
    feedback: float = pydantic.Field(default=1.0, ge=0.0, allow_inf_nan=False)
    keyword_floor: float = pydantic.Field(default=0.15, ge=0.0, le=1.0, allow_inf_nan=False)

    @pydantic.field_validator("semantic", "keyword", "recency", "feedback", "keyword_floor", mode="before")
    @classmethod
    def _number(cls, value: Any, info: pydantic.ValidationInfo) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{info.field_name} must be a number, got {type(value).__name__}")
        return value

    def weight(self, ranking: str) -> float:
        """The weight of one of :data:`RANKINGS`."""
        return float(getattr(self, ranking))


def order_key(score: float, timestamp: float, id_: K) -> tuple[float, float, K]:
    """The total order of hits: score descending, then timestamp descending, then id ascending."""
    return (-score, -timestamp, id_)


def fuse(
    rankings: Mapping[str, Sequence[K]],
    times: Mapping[K, float],
    *,
    fusion: Fusion | None = None,
    feedback: Mapping[K, float] | None = None,
) -> list[tuple[K, float, dict[str, int]]]:
    """Reciprocal-rank fusion of ``rankings`` (name -> ids, best first; names from
    :data:`RANKINGS`) in the module's total order: ``(id, fused score, {ranking: 1-based rank})``
    for every id of any ranking. ``times[id]`` is its timestamp (for the tie rule); ``feedback[id]``
    its feedback weight (missing: 0). A ranking must not repeat an id."""
    params = fusion or Fusion()
    ranks: dict[K, dict[str, int]] = {}
    shares: dict[K, list[float]] = {}
    for name in RANKINGS:
        ids = rankings.get(name)
        if ids is None:
            continue
        w = params.weight(name)
        for r, id_ in enumerate(ids, start=1):
            held = ranks.setdefault(id_, {})
            if name in held:
                raise ValueError(f"ranking {name!r} holds id {id_!r} twice")
            held[name] = r
            if w:
                shares.setdefault(id_, []).append(w / (params.k + r))
    for name in rankings:
        if name not in RANKINGS:
            raise ValueError(f"unknown ranking {name!r}; known: {', '.join(RANKINGS)}")
    out: list[tuple[K, float, dict[str, int]]] = []
    for id_, held in ranks.items():
        parts: list[float] = shares.get(id_, [])
        if feedback is not None and params.feedback:
            parts = [*parts, params.feedback * float(feedback.get(id_, 0.0)) / (params.k + 1)]
        out.append((id_, math.fsum(parts), held))
    out.sort(key=lambda item: order_key(item[1], times[item[0]], item[0]))
    return out


def mmr(relevance: Sequence[float], vectors: np.ndarray, lam: float, k: int) -> list[int]:
    """The indices of at most ``k`` candidates in MMR order (module docstring). ``relevance[i]`` and
    ``vectors[i]`` (unit rows; a zero row is similar to nothing) belong to candidate ``i``; the
    candidates are given in their total order, which breaks ties."""
    n = len(relevance)
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"mmr lambda must be in [0, 1], got {lam!r}")
    if vectors.shape[0] != n:
        raise ValueError(f"{n} relevance scores but {vectors.shape[0]} vectors")
    if n == 0 or k < 1:
        return []
    rel = np.asarray(relevance, dtype=np.float64)
    low, high = float(rel.min()), float(rel.max())
    scaled = (rel - low) / (high - low) if high > low else np.ones(n)
    rows = np.asarray(vectors, dtype=np.float64)
    picked: list[int] = []
    closest = np.full(n, -np.inf)  # max similarity to anything picked so far
    free = np.ones(n, dtype=bool)
    position = np.arange(n)
    for _ in range(min(k, n)):
        objective = lam * scaled - (1.0 - lam) * closest if picked else rel.copy()
        objective[~free] = -np.inf
        # the maximum objective, then the higher relevance, then the earlier position
        best = int(np.lexsort((position, -rel, -objective))[0])
        picked.append(best)
        free[best] = False
        closest = np.maximum(closest, rows @ rows[best])
    return picked


# -- a public helper: reciprocal-rank fusion over any rankings of ids ---------------------------


H = TypeVar("H", bound=Hashable)


def fuse_reciprocal_rank(
    rankings: Sequence[Sequence[H]], k: int = 60, weights: Sequence[float] | None = None
) -> list[tuple[H, float]]:
    """Reciprocal-rank fusion of any lists of ids (each best first): ``[(id, score), ...]``, every id
    of any ranking once, best first. The id at 1-based rank ``r`` of ranking ``i`` gets
    ``weights[i] / (k + r)`` (weights default to 1); its score is the exact sum
    (:func:`math.fsum`) of its shares. Ties keep the order in which the ids first appear when the
    rankings are read rank by rank (every ranking's first id, in ranking order, then every second
    id, ...). Ids may be any hashable values; the rankings may differ in length.

    Raises :class:`~coniti.errors.ContractError` naming the argument for a ``k`` that is not an
    int of at least 1, weights that are not one finite non-negative number per ranking, a
    ranking that is not a sequence (a bare string is refused) or one that holds an id twice.
    This is a pure function: hybrid recall uses :func:`fuse` (named rankings, feedback, the
    timestamp tie rule)."""
    from coniti.errors import ContractError

    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ContractError(f"k must be an int of at least 1, got {k!r}")
    if isinstance(rankings, str | bytes) or not isinstance(rankings, Sequence):
        raise ContractError(f"rankings must be a sequence of lists of ids, got {type(rankings).__name__}")
    if weights is None:
        ws = [1.0] * len(rankings)
    else:
        if isinstance(weights, str | bytes) or not isinstance(weights, Sequence) or len(weights) != len(rankings):
            raise ContractError(f"weights must be one number per ranking ({len(rankings)}), got {weights!r}")
        ws = []
        for i, w in enumerate(weights):
            if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w < 0:
                raise ContractError(f"weights[{i}] must be a finite number >= 0, got {w!r}")
            ws.append(float(w))
    for i, ranking in enumerate(rankings):
        if isinstance(ranking, str | bytes) or not isinstance(ranking, Sequence):
            raise ContractError(f"rankings[{i}] must be a list of ids, got {type(ranking).__name__}")
        if len(set(ranking)) != len(ranking):
            twice = next(x for j, x in enumerate(ranking) if x in ranking[:j])
            raise ContractError(f"rankings[{i}] holds id {twice!r} twice")
    shares: dict[H, list[float]] = {}
    longest = max((len(r) for r in rankings), default=0)
    for r in range(longest):  # rank by rank: the first-appearance order of the tie rule
        for i, ranking in enumerate(rankings):
            if r < len(ranking):
                shares.setdefault(ranking[r], []).append(ws[i] / (k + r + 1))
    scored = [(id_, math.fsum(parts)) for id_, parts in shares.items()]
    scored.sort(key=lambda item: -item[1])  # stable: ties stay in first-appearance order
    return scored
