"""Fusion and diversity: score fusion (:func:`fuse_scores`, hybrid recall's default),
reciprocal-rank fusion (:func:`fuse`) and maximal marginal relevance (:func:`mmr`), pure functions
over ids, scores, ranks and vectors.

**Score fusion.** Each candidate brings its signals: ``semantic`` (the cosine of question and note,
missing: 0), ``keyword`` (its BM25 score), ``date`` (1 when the note falls in a time the question
names, :mod:`coniti.dates`), ``feedback`` (its summed feedback weight) and its timestamp. Its fused
score is::

    (semantic_w * cosine + keyword_w * bm25 / scale + date_w * date
     + recency_w * recency + feedback_w * feedback) / (semantic_w + keyword_w)

where ``scale`` is the larger of the best BM25 score among the candidates and ``keyword_scale``
times the question's BM25 ceiling (:meth:`coniti.keyword.KeywordIndex.ceiling`): the best keyword
match counts 1 unless it matches only a small part of the question (one common word of five), a
note holding no query word 0; ``recency`` is 1 for the newest candidate down to 0 for the
oldest, linear in rank. The weights are :class:`Fusion`'s; dividing by ``semantic_w + keyword_w``
keeps a fused score on the cosine's scale whatever the two weights are. A feedback weight of 1 thus
counts like a perfect match on one more side of weight ``feedback_w``.

**Superseded notes.** For a question about the present (:func:`coniti.dates.asks_present`, no time
named), :func:`supersede` prefers the newer of two notes that answer it: among the first
:data:`SUPERSEDE_DEPTH` candidates, an older note whose vector has a cosine of at least
``supersede_similarity`` with a newer one's (the two say much the same thing) and whose fused score
exceeds the newer one's by at most the share ``supersede`` of the newer one's (``older - newer <=
supersede * |newer|``: the same rule for scores and for reciprocal ranks) is moved just below it.
Chosen on the labelled pairs of ``tools/data/superseded/`` (``tools/bench_superseded.py``).

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
from typing import Any, Literal, TypeVar

import numpy as np
import pydantic

from coniti.contracts import Contract

__all__ = [
    "DEFAULT_SUPERSEDE", "DEFAULT_WEIGHTS", "RANKINGS", "SIGNALS", "SUPERSEDE_DEPTH", "Fusion", "fuse",
    "fuse_reciprocal_rank", "fuse_scores", "mmr", "order_key", "supersede",
]  # fmt: skip

K = TypeVar("K", str, tuple[str, tuple[str, ...]])
"""What fusion ranks: note ids, or (id, namespace) pairs across namespaces (ordered by id, then
namespace, for the tie rule)."""

RANKINGS = ("semantic", "keyword", "recency")
"""The rankings hybrid recall fuses, in the order their shares are summed."""

SIGNALS = ("semantic", "keyword", "date", "recency", "feedback")
"""The signals score fusion adds up, in this order."""

DEFAULT_WEIGHTS = {"rank": {"semantic": 1.0, "keyword": 1.0}, "score": {"semantic": 0.8, "keyword": 1.0}}
"""The ``semantic`` and ``keyword`` weights of each method when :class:`Fusion` leaves them None:
rank fusion's as before score fusion came; score fusion's chosen by cross-validation on LoCoMo."""

DEFAULT_SUPERSEDE = {"rank": 0.03, "score": 0.3}
"""The ``supersede`` margin of each method when :class:`Fusion` leaves it None: reciprocal-rank
scores of the first candidates lie within a few percent of each other, fused scores do not."""

SUPERSEDE_DEPTH = 10
"""How many of the first candidates :func:`supersede` compares."""


class Fusion(Contract):
    """How hybrid recall fuses: ``method`` ``"score"`` (:func:`fuse_scores`), ``"rank"``
    (reciprocal-rank fusion, :func:`fuse`, with the constant ``k``) or ``"auto"`` (the default: by
    score when a namespace asked holds conversation turns, notes with a thread, by rank over plain
    notes: on the labelled recall set of plain notes rank fusion ranks better, on LoCoMo's
    conversations score fusion does; README, Recall quality); a weight per signal: ``semantic``,
    ``keyword`` (None, the default: the method's, :data:`DEFAULT_WEIGHTS`), ``recency`` (by
    timestamp, newest first), ``date`` (score fusion only: the note falls in a time the question
    names), ``feedback`` (0: feedback does not move hybrid results); 0 leaves a signal out.
    ``keyword_scale``: the least share of the question's BM25 ceiling that counts as a full keyword
    match (:func:`fuse_scores`). ``supersede`` and ``supersede_similarity``: the share of its score
    and the cosine by which a newer note displaces an older one for a question about the present
    (:func:`supersede`; ``supersede=None``: the method's, :data:`DEFAULT_SUPERSEDE`; 0 turns it
    off). ``keyword_floor``: a note joins the keyword candidates only when its BM25 score is at
    least this fraction of the query's BM25 ceiling
    (:meth:`coniti.keyword.KeywordIndex.ceiling`), so that matches on words most notes share do
    not outvote the semantic side (0: every match joins).

    The defaults of ``semantic``, ``keyword`` and ``date`` were chosen for score fusion by
    leave-one-conversation-out cross-validation on the LoCoMo development split
    (``tools/bench_locomo.py --cv``; README, Recall quality); ``keyword_floor`` and
    ``keyword_scale`` on the labelled recall set (``tools/bench_recall.py``)."""

    model_config = pydantic.ConfigDict(frozen=True)

    method: Literal["auto", "score", "rank"] = "auto"
    k: int = pydantic.Field(default=60, ge=1, le=1_000_000, strict=True)
    semantic: float | None = pydantic.Field(default=None, ge=0.0, allow_inf_nan=False)
    keyword: float | None = pydantic.Field(default=None, ge=0.0, allow_inf_nan=False)
    recency: float = pydantic.Field(default=0.0, ge=0.0, allow_inf_nan=False)
    date: float = pydantic.Field(default=0.6, ge=0.0, allow_inf_nan=False)
    feedback: float = pydantic.Field(default=1.0, ge=0.0, allow_inf_nan=False)
    keyword_floor: float = pydantic.Field(default=0.15, ge=0.0, le=1.0, allow_inf_nan=False)
    keyword_scale: float = pydantic.Field(default=0.2, ge=0.0, le=1.0, allow_inf_nan=False)
    supersede: float | None = pydantic.Field(default=None, ge=0.0, allow_inf_nan=False)
    """The largest share of the newer note's score by which an older one may lead it and still be
    moved below it (:func:`supersede`); None: the method's (:data:`DEFAULT_SUPERSEDE`)."""
    supersede_similarity: float = pydantic.Field(default=0.7, ge=-1.0, le=1.0, allow_inf_nan=False)

    @pydantic.field_validator(
        "semantic", "keyword", "recency", "date", "feedback", "keyword_floor", "keyword_scale",
        "supersede", "supersede_similarity", mode="before",
    )  # fmt: skip
    @classmethod
    def _number(cls, value: Any, info: pydantic.ValidationInfo) -> Any:
        if value is None and info.field_name in ("semantic", "keyword", "supersede"):
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{info.field_name} must be a number, got {type(value).__name__}")
        return value

    def margin(self, method: str) -> float:
        """The ``supersede`` margin when fusing by ``method`` (None: :data:`DEFAULT_SUPERSEDE`)."""
        if self.supersede is None:
            return DEFAULT_SUPERSEDE["rank" if method == "rank" else "score"]
        return float(self.supersede)

    def weight(self, ranking: str, method: str = "rank") -> float:
        """The weight of one of :data:`RANKINGS` (or ``date``/``feedback``) when fusing by
        ``method``: ``semantic`` and ``keyword`` left None take that method's default
        (:data:`DEFAULT_WEIGHTS`)."""
        value = getattr(self, ranking)
        if value is None:
            return DEFAULT_WEIGHTS["rank" if method == "rank" else "score"][ranking]
        return float(value)


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


def fuse_scores(
    signals: Mapping[K, Mapping[str, float]],
    times: Mapping[K, float],
    *,
    fusion: Fusion | None = None,
    ceiling: float = 0.0,
) -> list[tuple[K, float]]:
    """Score fusion (module docstring) of the candidates ``signals`` holds: ``signals[id]`` maps
    names of :data:`SIGNALS` but ``recency`` to values (a missing one is 0); ``times[id]`` is the
    timestamp; ``ceiling`` the question's BM25 ceiling. Returns ``(id, fused score)`` for every
    candidate in the module's total order."""
    params = fusion or Fusion()
    semantic, keyword = params.weight("semantic", "score"), params.weight("keyword", "score")
    total = semantic + keyword
    scale = 1.0 / total if total > 0 else 1.0
    best = max((float(s.get("keyword", 0.0)) for s in signals.values()), default=0.0)
    if best > 0:
        best = max(best, params.keyword_scale * ceiling)
    recency: dict[K, float] = {}
    if params.recency and signals:
        newest = sorted(signals, key=lambda id_: (-times[id_], id_))
        span = max(len(newest) - 1, 1)
        recency = {id_: 1.0 - r / span for r, id_ in enumerate(newest)}
    out: list[tuple[K, float]] = []
    for id_, held in signals.items():
        parts = [
            semantic * float(held.get("semantic", 0.0)),
            keyword * (float(held.get("keyword", 0.0)) / best if best > 0 else 0.0),
            params.date * float(held.get("date", 0.0)),
            params.recency * recency.get(id_, 0.0),
            params.feedback * float(held.get("feedback", 0.0)),
        ]
        out.append((id_, math.fsum(parts) * scale))
    out.sort(key=lambda item: order_key(item[1], times[item[0]], item[0]))
    return out


def supersede(
    ranked: Sequence[tuple[K, float]],
    times: Mapping[K, float],
    unit: Mapping[K, np.ndarray],
    *,
    fusion: Fusion | None = None,
    method: str = "score",
) -> tuple[list[tuple[K, float]], dict[K, K]]:
    """``ranked`` (``(id, score)`` in the total order) with older notes displaced by newer ones
    that say the same (module docstring), again in the total order, and ``{older: newer}`` for
    each note moved; ``method``: how ``ranked`` was fused (for the default margin). ``unit[id]``: the note's unit vector. A moved note takes the largest float
    below its newer note's score; newer notes are taken newest first, so a chain of versions ends
    newest first."""
    params = fusion or Fusion()
    margin = params.margin(method)
    if not margin or len(ranked) < 2:
        return list(ranked), {}
    scores = dict(ranked)
    head = [id_ for id_, _ in ranked[:SUPERSEDE_DEPTH]]
    moved: dict[K, K] = {}
    for newer in sorted(head, key=lambda id_: (-times[id_], id_)):
        for older in head:
            if (
                times[older] < times[newer]
                and scores[newer] <= scores[older] <= scores[newer] + margin * abs(scores[newer])
                and float(unit[older] @ unit[newer]) >= params.supersede_similarity
            ):
                scores[older] = math.nextafter(scores[newer], -math.inf)
                moved[older] = newer
    out = sorted(scores.items(), key=lambda item: order_key(item[1], times[item[0]], item[0]))
    return out, moved


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
