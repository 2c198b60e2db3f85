"""Recall for one ask: candidates -> filter -> fuse -> hits (:func:`recall`), then MMR, the reranker
and the first ``k`` (:func:`second_stage`).

Everything is handed in, nothing is asked of the engine: the index of each namespace in scope
(:class:`Scope`), the memory the candidates' records are read from (and, for hybrid, the feedback
weights, read once per namespace as values), the embedded query, the strategy. Data flows down:
rankings (:func:`coniti.hybrid.candidates`), record reads, the filter, fusion
(:func:`coniti.hybrid.fuse_keys`), hits.

**Candidates.** A ranking of one namespace (semantic, keyword or recent) is read lazily
(:class:`Stream`): asked for a first batch of candidates, then, only when its consumer needs more,
asked again four times deeper; the records of its candidates are read once per ask, when they are
first ranked, and a candidate whose record vanished from memory (or lost its vector) since the index
saw it is left out. No other ranking or namespace is asked again when one needs more.

**The filter applies where candidates are made**, and a filtered ask equals the unfiltered ranking
with the non-matching notes removed (scores and ranks are those of the unfiltered ranking):

* ``semantic`` over a prefix, with a query vector: the candidates of every namespace are merged
  first and only the first ``want`` of the merge are read and resolved
  (:func:`coniti.engine.across.first_across`); should one of them have vanished, the path below.
* ``semantic`` over a prefix, with a query vector: the filter selects each namespace's candidates
  before scoring (:mod:`coniti.engine.where`: only the matching rows are scored, exactly, in the
  structure's order), and that ranking is read as below.
* ``semantic``, ``keyword``, ``recent`` (:class:`Candidates`): each namespace's stream is read until
  ``want`` candidates match the filter and reach ``query.min_score`` (or the ranking ends, or its
  scores fall below ``min_score``); over a prefix the namespaces' answers are merged by score, then
  the newer note, then the smaller id, then the namespace.
* ``hybrid``: the semantic and keyword streams of every namespace are merged (same order) to
  :func:`~coniti.hybrid.depth` candidates each, fused, and the fused ranking is read in order for
  candidates that match and reach ``min_score`` (a fused score); when fewer than wanted pass and a
  ranking holds more, the merge goes four times deeper, reading further only the streams the merge
  reaches. Hits are built for the candidates kept, and only for them.

**Hybrid's question** (:class:`_Question`). ``Fusion(method="auto")`` fuses by score when a
namespace asked holds conversation turns (:attr:`coniti.keyword.KeywordIndex.threaded`), else by
rank. Fusing by score, the keyword side reads the question without its function words
(:func:`coniti.keyword.question_text`), every candidate's cosine and BM25 scores are fused (those
its ranking did not give computed), and a candidate falling in a time the question names
(:func:`coniti.dates.read_question`, relative dates read against ``query.asked_at`` or the time of
the ask) gets the ``date`` signal. For a question about the present that names no time, the first
fused candidates go through :func:`coniti.fusion.supersede`. The keyword strategy searches the text
as written.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coniti.actor import Query
from coniti.dates import QuestionTime, read_question
from coniti.engine import across, where
from coniti.engine.index import NamespaceIndex
from coniti.engine.indexes import Indexes
from coniti.engine.results import pool_size
from coniti.filters import RecordPredicate as Predicate
from coniti.filters import compile_record_filter as compile_filter
from coniti.fusion import Fusion, mmr
from coniti.hybrid import Fused, Key, Ranked, candidates, depth, fuse_keys
from coniti.keyword import Corpus, question_text
from coniti.memory import GetRequest, MemoryBackend, MemoryRecord
from coniti.recall import Hit, trusted_signals
from coniti.rerank import Reranker, apply_reranker
from coniti.strategy import Strategy, StrategyContext
from coniti.structure import unit_rows
from coniti.structure.scoring import exact_scores

__all__ = ["Candidates", "Scope", "Stream", "answer", "pool", "recall", "second_stage"]

_hit = Hit.constructor()

Found = list[tuple[Hit, np.ndarray]]
"""Hits with their notes' vectors (for MMR), best first."""


@dataclass
class Scope:
    """One namespace of an ask: its ``index``, what the strategy consults (``context``) and the
    records of its candidates read so far (by id; each read once)."""

    namespace: tuple[str, ...]
    index: NamespaceIndex
    context: StrategyContext
    records: dict[str, MemoryRecord] = field(default_factory=dict)

    @classmethod
    def of(cls, namespace: tuple[str, ...], index: NamespaceIndex) -> Scope:
        return cls(namespace, index, index.context(namespace))

    def read(self, memory: MemoryBackend, ids: Sequence[str]) -> None:
        """Read the records of ``ids`` not read yet (one ``get``)."""
        records = self.records
        missing = [i for i in ids if i not in records] if records else list(ids)
        if missing:
            for record in memory.get(GetRequest(ids=missing, namespace=self.namespace)).records:
                self.records[record.note.id] = record

    def key(self, hit: Ranked) -> tuple[float, float, str, tuple[str, ...]]:
        """Where ``hit`` (read) goes among the hits of several namespaces: best score, then the
        newer note, then the smaller id, then the namespace (the rankings' own order, extended)."""
        return (-hit.score, -self.records[hit.id].note.timestamp, hit.id, self.namespace)


class Stream:
    """One ranking of one namespace, read lazily (module docstring): ``rank(k)`` gives its first
    ``k`` candidates; ``size()`` how many rows it ranks (asked only to tell whether a short answer
    was the whole ranking); ``first``: how many candidates to ask for, and to read the records of,
    at a time at first (the ranking is then asked four times deeper each time; records are read in
    pages of as many as were read before)."""

    def __init__(
        self,
        scope: Scope,
        memory: MemoryBackend,
        rank: Callable[[int], list[Ranked]],
        size: Callable[[], int],
        first: int,
    ) -> None:
        self.scope = scope
        self._memory = memory
        self._rank = rank
        self._size = size
        self._first = first
        self._raw: list[Ranked] = []
        self._read = 0
        self._asked = 0
        self.items: list[Ranked] = []
        """The candidates whose records were read, in the ranking's order (those whose record
        vanished or has no vector left out)."""

    def get(self, i: int) -> Ranked | None:
        """Candidate ``i`` (0-based), records read and the ranking asked deeper as needed; None
        past its end."""
        while i >= len(self.items):
            if self._read == len(self._raw):
                # the ranking ends with a short answer, or one as long as its rows (len() of a view
                # as of an event counts them, O(rows): asked only when more is wanted)
                if self._asked and (len(self._raw) < self._asked or self._asked >= self._size()):
                    return None
                k = 4 * self._asked if self._asked else self._first
                self._raw = self._rank(k)
                self._asked = k
                continue
            page = self._raw[self._read : self._read + max(self._first, self._read)]
            self._read += len(page)
            self.scope.read(self._memory, [h.id for h in page])
            records = self.scope.records
            self.items += [h for h in page if (r := records.get(h.id)) is not None and r.vector is not None]
        return self.items[i]


class Candidates:
    """The candidates of one :class:`Stream` that pass: whose note matches ``match`` (None: every
    note) and whose score reaches ``floor`` (None: any), in the ranking's order."""

    def __init__(self, stream: Stream, match: Predicate | None, floor: float | None) -> None:
        self._stream = stream
        self._match = match
        self._floor = floor

    def best(self, want: int) -> list[Ranked]:
        """The first ``want`` that pass (fewer when the ranking ends first, or its scores fall
        below the floor)."""
        stream = self._stream
        if self._match is None and self._floor is None:  # every candidate passes
            stream.get(want - 1)
            return stream.items[:want]
        records = stream.scope.records
        kept: list[Ranked] = []
        i = 0
        while len(kept) < want and (hit := stream.get(i)) is not None:
            if self._floor is not None and hit.score < self._floor:
                break  # the ranking is by score: nothing after it reaches the floor
            if self._match is None or self._match(records[hit.id].note.metadata, records[hit.id].note.kind):
                kept.append(hit)
            i += 1
        return kept


def answer(
    query: Query,
    vector: np.ndarray | None,
    namespaces: Sequence[tuple[str, ...]],
    *,
    merged: bool,
    indexes: Indexes,
    memory: MemoryBackend,
    strategy: Strategy,
    reranker: Reranker | None,
) -> list[Hit]:
    """The hits of ``query`` over ``namespaces`` (their indexes loaded from ``indexes``):
    :func:`recall` of :func:`pool` hits, then :func:`second_stage`."""
    scopes = [Scope.of(ns, index) for ns, index in zip(namespaces, indexes.get_many(namespaces), strict=True)]
    found = recall(
        query, vector, scopes, memory=memory, strategy=strategy, want=pool(query, reranker),
        merged=merged,
    )  # fmt: skip
    return second_stage(query, found, reranker)


def pool(query: Query, reranker: Reranker | None) -> int:
    """How many hits recall gathers for ``query``: :func:`~coniti.engine.results.pool_size` when
    MMR or a reranker re-ranks them (not for ``recent``), else ``k``."""
    staged = query.mmr is not None or (reranker is not None and query.resolved_strategy != "recent")
    return pool_size(query.k) if staged else query.k


def recall(
    query: Query,
    vector: np.ndarray | None,
    scopes: Sequence[Scope],
    *,
    memory: MemoryBackend,
    strategy: Strategy,
    want: int,
    merged: bool,
) -> Found:
    """The ``want`` best hits of ``query`` over ``scopes`` (``vector``: the embedded text, if
    any), by the query's strategy (:mod:`coniti.hybrid`; module docstring). ``merged``: the scopes
    are a prefix's namespaces, ranked as one, each hit's rank its place in that ranking."""
    question = None
    if query.resolved_strategy == "hybrid":
        question = _Question.of(query, scopes)
        query = question.query
    text = query.text
    corpus = None
    if text is not None and len(scopes) > 1:
        corpus = Corpus.merge(s.index.keyword.corpus(text) for s in scopes)
    scale = _scale(query, vector, question, scopes, corpus)
    if query.min_relevance and scale is not None:  # relevance = score / scale (Hit.relevance)
        floor = query.min_relevance * scale
        if query.min_score is None or floor > query.min_score:
            query = query.model_copy(update={"min_score": floor})
    match = None if query.filter is None else compile_filter(query.filter)
    asks = _Asks(query, vector, memory, strategy, corpus)
    if question is not None:
        return _relevant(asks.hybrid(scopes, want, match, question), scale)
    narrowed = match is not None or query.min_score is not None
    pre: dict[int, where.Prefiltered] = {}
    if match is not None and vector is not None:
        for n, scope in enumerate(scopes):
            if where.applies(query, vector, scope.index, strategy, merged):
                pre[n] = where.prefiltered(query, vector, scope.namespace, scope.index, memory, match)
    if merged and vector is not None and query.resolved_strategy == "semantic" and (match is None or len(pre) == len(scopes)):
        rankings = [pre[n].rank if n in pre else asks.ranking(query, s) for n, s in enumerate(scopes)]
        if match is None:
            passed = across.one_pass(scopes, query, vector, strategy, want)
        else:  # every namespace prefiltered: their matching rows scored as one
            passed = where.first_of([pre[n] for n in range(len(scopes))], want)
        if passed is not None:  # every namespace's rows scored as one
            rankings = [_first(ranked) for ranked in passed]
        first = across.first_across(scopes, rankings, want, query.min_score, match, memory, asks.hits)
        if first is not None:
            first.sort(key=lambda item: _merge_key(item[0]))
            return _relevant(_reranked(first, query.resolved_strategy), scale)
    found: Found = []
    for n, scope in enumerate(scopes):
        if n in pre:
            stream = Stream(scope, memory, pre[n].rank, pre[n].size, want)
        else:
            stream = asks.stream(query, scope, max(4 * want, 32) if narrowed else want)
        found += asks.hits(scope, Candidates(stream, match, query.min_score).best(want))
    if merged:
        found.sort(key=lambda item: _merge_key(item[0]))
        del found[want:]
        found = _reranked(found, query.resolved_strategy)
    return _relevant(found[:want], scale)


def _first(ranked: list[Ranked]) -> Callable[[int], list[Ranked]]:
    """A ranking already made (:func:`~coniti.engine.across.one_pass`), as a function of ``k``."""
    return lambda k: ranked[:k]


def _scale(
    query: Query,
    vector: np.ndarray | None,
    question: _Question | None,
    scopes: Sequence[Scope],
    corpus: Corpus | None,
) -> float | None:
    """The score of relevance 1 for this ask (:attr:`coniti.recall.Hit.relevance`): 1 for a
    cosine and for a fused score by score, for keyword the BM25 score of a note of average length
    holding every question word once (the sum of their idf: the ceiling / (k1 + 1)), the best
    reciprocal-rank score possible (first in every ranking fused) by rank; None for ``recent``."""
    name = query.resolved_strategy
    if name == "recent":
        return None
    if name == "keyword" and query.text is not None and scopes:
        index = scopes[0].index.keyword
        typical = index.ceiling(query.text, corpus=corpus) / (index.k1 + 1.0)  # sum of the terms' idf
        return typical if typical > 0 else 1.0
    if question is not None and not question.by_score:
        fusion = query.fusion or Fusion()
        weights = fusion.recency
        if vector is not None or query.near is not None:
            weights += fusion.weight("semantic")
        if query.text is not None:
            weights += fusion.weight("keyword")
        return weights / (fusion.k + 1) if weights > 0 else 1.0
    return 1.0


def _relevant(found: Found, scale: float | None) -> Found:
    """``found`` with each hit's relevance set: its score / ``scale``, within [0, 1]."""
    if scale is None:
        return found
    return [(_hit({**h.__dict__, "relevance": min(1.0, max(0.0, h.score / scale))}), v) for h, v in found]


@dataclass(frozen=True)
class _Question:
    """A hybrid ask as fused (module docstring): ``query`` with its fusion method resolved (and,
    by score, the keyword text stripped of function words), the ``times`` its text names (None
    without text) and whether it asks about the present naming no time (``present``)."""

    query: Query
    times: QuestionTime | None
    present: bool

    @classmethod
    def of(cls, query: Query, scopes: Sequence[Scope]) -> _Question:
        fusion = query.fusion or Fusion()
        if fusion.method == "auto":  # by score over conversation turns, by rank over plain notes
            turns = any(s.index.keyword.threaded for s in scopes)
            fusion = fusion.model_copy(update={"method": "score" if turns else "rank"})
        update: dict[str, object] = {"fusion": fusion}
        times = None
        if query.text is not None:
            times = read_question(query.text, now=time.time() if query.asked_at is None else query.asked_at)
            if fusion.method == "score":
                update["text"] = question_text(query.text)
        present = times is not None and times.present and not times.mentions
        return cls(query.model_copy(update=update), times, present)

    @property
    def by_score(self) -> bool:
        return (self.query.fusion or Fusion()).method == "score"


class _Asks:
    """The rankings of one ask (:meth:`stream`), hybrid's fusion of them (:meth:`hybrid`) and the
    hits they give (:meth:`hits`)."""

    def __init__(
        self,
        query: Query,
        vector: np.ndarray | None,
        memory: MemoryBackend,
        strategy: Strategy,
        corpus: Corpus | None,
    ) -> None:
        self.query = query
        self.vector = vector
        self.memory = memory
        self.strategy = strategy
        self.corpus = corpus

    def ranking(self, asked: Query, scope: Scope) -> Callable[[int], list[Ranked]]:
        """The first ``k`` candidates of ``scope`` by ``asked``'s strategy, as a function of ``k``."""

        def rank(k: int) -> list[Ranked]:
            query = asked if k == asked.k else asked.model_copy(update={"k": k})
            return candidates(
                query, self.vector, strategy=self.strategy, context=scope.context,
                keyword=scope.index.keyword, corpus=self.corpus,
            )  # fmt: skip

        return rank

    def stream(self, asked: Query, scope: Scope, first: int) -> Stream:
        """The ranking of ``scope`` by ``asked``'s strategy, read lazily from ``first``."""

        def size() -> int:
            return len(scope.index.structures[0])

        return Stream(scope, self.memory, self.ranking(asked, scope), size, first)

    def hybrid(self, scopes: Sequence[Scope], want: int, match: Predicate | None, question: _Question) -> Found:
        """The first ``want`` of the fused ranking that pass (module docstring)."""
        query = self.query
        fusion = query.fusion or Fusion()
        wide = depth(want)
        side = {"k": wide, "min_score": None, "filter": None}
        semantic: list[Stream] = []
        lexical: list[Stream] = []
        if self.vector is not None or query.near is not None:
            asked = query.model_copy(update={**side, "strategy": "semantic"})
            semantic = [self.stream(asked, scope, wide) for scope in scopes]
        bar = None
        ceiling = 0.0
        if query.text is not None:
            asked = query.model_copy(update={**side, "strategy": "keyword", "near": None})
            lexical = [self.stream(asked, scope, wide) for scope in scopes]
            if scopes and (fusion.keyword_floor or question.by_score):
                ceiling = scopes[0].index.keyword.ceiling(query.text, corpus=self.corpus)
            if fusion.keyword_floor:
                bar = fusion.keyword_floor * ceiling
        weights: dict[tuple[str, ...], dict[str, float]] = {}
        while True:
            sem = _merged(semantic, wide, None)
            lex = _merged(lexical, wide, bar)
            union = {**lex, **sem}
            deeper = len(sem) == wide or len(lex) == wide
            if deeper and match is not None:
                matching = sum(match(scope.records[key[0]].note.metadata, scope.records[key[0]].note.kind) for key, (scope, _) in union.items())
                if matching < want:  # too few match among the candidates: no fusion can pass want
                    wide *= 4
                    continue
            times = {key: scope.records[key[0]].note.timestamp for key, (scope, _) in union.items()}
            if fusion.feedback and self.memory.supports_feedback:
                for ns in sorted({key[1] for key in times} - set(weights)):
                    weights[ns] = self.memory.feedback_weights(ns)
            fused = fuse_keys(query, list(sem), list(lex), times, weights, **self._signals(question, sem, lex, ceiling))
            kept: list[Fused] = []
            for f in fused:
                scope, _ = sem.get(f.key) or lex[f.key]
                passes = query.min_score is None or f.score >= query.min_score
                if passes and (match is None or match(scope.records[f.key[0]].note.metadata, scope.records[f.key[0]].note.kind)):
                    kept.append(f)
                    if len(kept) == want:
                        break
            if len(kept) == want or not deeper:
                return self._fused_hits(kept, sem, lex, times)
            wide *= 4

    def _signals(
        self,
        question: _Question,
        sem: dict[Key, tuple[Scope, Ranked]],
        lex: dict[Key, tuple[Scope, Ranked]],
        ceiling: float,
    ) -> dict[str, Any]:
        """What :func:`~coniti.hybrid.fuse_keys` needs beyond the rankings (module docstring):
        by score, every candidate's cosine and BM25 scores, the keys in a time the question names
        and the ceiling; for a question about the present, the notes' unit vectors."""
        union = {**lex, **sem}
        out: dict[str, Any] = {}
        if question.by_score:
            out["scores"] = self._scores(sem, lex)
            out["ceiling"] = ceiling
            times = question.times
            if times is not None and times.mentions and (self.query.fusion or Fusion()).date and union:
                keys = list(union)
                stamps = np.array([s.records[k[0]].note.timestamp for k, (s, _) in union.items()], dtype=np.float64)
                out["dated"] = {k for k, hit in zip(keys, times.matches(stamps).tolist(), strict=True) if hit}
        if question.present:

            def unit(keys: Sequence[Key]) -> np.ndarray:
                return unit_rows(np.stack([_vector(union[k][0].records[k[0]]) for k in keys]))

            out["unit"] = unit
        return out

    def _scores(
        self, sem: dict[Key, tuple[Scope, Ranked]], lex: dict[Key, tuple[Scope, Ranked]]
    ) -> dict[Key, tuple[float, float]]:
        """Each candidate's (cosine, BM25) scores: its rankings' own, the others computed (the
        cosine of the question's vector and the note's; BM25 by the namespace's keyword index)."""
        query = self.query
        union = {**lex, **sem}
        cosine = {k: float(r.signals.get("semantic", r.score)) for k, (_, r) in sem.items()}
        lexical = {k: float(r.score) for k, (_, r) in lex.items()}
        missing = [k for k in union if k not in cosine]
        if missing and self.vector is not None:
            unit = unit_rows(np.asarray(self.vector, dtype=np.float32)[None, :])[0]
            rows = unit_rows(np.stack([_vector(union[k][0].records[k[0]]) for k in missing]))
            cosine.update(zip(missing, exact_scores(rows, unit, unit=True), strict=True))
        if query.text is not None:
            by_scope: dict[int, tuple[Scope, list[str]]] = {}
            for k, (scope, _) in union.items():
                if k not in lexical:
                    by_scope.setdefault(id(scope), (scope, []))[1].append(k[0])
            for scope, ids in by_scope.values():
                for id_, value in scope.index.keyword.score(query.text, ids, corpus=self.corpus).items():
                    lexical[(id_, scope.namespace)] = value
        return {k: (cosine.get(k, 0.0), lexical.get(k, 0.0)) for k in union}

    def _fused_hits(
        self,
        kept: list[Fused],
        sem: dict[Key, tuple[Scope, Ranked]],
        lex: dict[Key, tuple[Scope, Ranked]],
        times: dict[Key, float],
    ) -> Found:
        """Hybrid hits of the fused candidates ``kept``: the semantic and keyword scores of the
        side that ranked each first (semantic before keyword), completed as :meth:`hits` does."""
        newest = max(times.values(), default=0.0)
        by_scope: dict[int, tuple[Scope, list[Ranked]]] = {}
        for f in kept:
            scope, ranked = sem.get(f.key) or lex[f.key]
            by_scope.setdefault(id(scope), (scope, []))[1].append(ranked)
        completed: dict[Key, tuple[Hit, np.ndarray]] = {}
        for scope, among in by_scope.values():
            for hit, vec in self.hits(scope, among):
                completed[(hit.note.id, scope.namespace)] = (hit, vec)
        out: Found = []
        for f in kept:
            base, vec = completed[f.key]
            signals = trusted_signals({
                "strategy": "hybrid",
                "semantic": None if base.signals is None else base.signals.semantic,
                "keyword": None if base.signals is None else base.signals.keyword,
                "recency": newest - base.note.timestamp,
                "feedback": f.weight,
                "date": f.date,
                "superseded_by": f.superseded_by,
                "ranks": f.ranks,
                "fused": f.score,
            })  # fmt: skip
            out.append((_hit({**base.__dict__, "score": f.score, "signals": signals}), vec))
        return out

    def hits(self, scope: Scope, kept: list[Ranked]) -> Found:
        """Hits of ``kept`` (read) with their signals completed: the semantic and keyword scores of
        every hit when the query has text (computed for the ones their ranking did not score)."""
        query, records = self.query, scope.records
        lexical: dict[str, float] = {}
        if query.text is not None and any("keyword" not in r.signals for r in kept):
            lexical = scope.index.keyword.score(
                query.text, [r.id for r in kept if "keyword" not in r.signals], corpus=self.corpus
            )
        cosine: dict[str, float] = {}
        unscored = []
        if self.vector is not None and query.text is not None:
            unscored = [r.id for r in kept if "semantic" not in r.signals]
        if unscored:
            unit = unit_rows(np.asarray(self.vector)[None, :])[0]
            rows = unit_rows(np.stack([_vector(records[i]) for i in unscored]))
            cosine = dict(zip(unscored, exact_scores(rows, unit, unit=True), strict=True))
        out = []
        for r in kept:
            record = records[r.id]
            signals = dict(r.signals)
            if query.text is not None:
                signals.setdefault("keyword", lexical.get(r.id, 0.0))
                if r.id in cosine:
                    signals["semantic"] = cosine[r.id]
            hit = _hit({
                "note": record.note, "score": float(r.score), "namespace": scope.namespace,
                "version": record.version, "signals": trusted_signals(signals), "relevance": None,
                "superseded": False,
            })  # fmt: skip
            out.append((hit, _vector(record)))
        return out


def _vector(record: MemoryRecord) -> np.ndarray:
    vector = record.vector
    assert vector is not None  # a stream keeps only records that have one
    return vector


def _merged(streams: list[Stream], wide: int, bar: float | None) -> dict[Key, tuple[Scope, Ranked]]:
    """The first ``wide`` candidates of ``streams`` merged in one order (:meth:`Scope.key`), each
    stream read only as far as the merge reaches; candidates scoring below ``bar`` left out. In
    that order (a dict keeps it)."""
    out: dict[Key, tuple[Scope, Ranked]] = {}
    if len(streams) == 1:
        stream = streams[0]
        i = 0
        while len(out) < wide and (hit := stream.get(i)) is not None:
            if bar is not None and hit.score < bar:
                break
            out[(hit.id, stream.scope.namespace)] = (stream.scope, hit)
            i += 1
        return out
    heap = []
    for n, stream in enumerate(streams):
        if (first := stream.get(0)) is not None and (bar is None or first.score >= bar):
            heap.append((stream.scope.key(first), n, 0, first))
    heapq.heapify(heap)
    while heap:
        _, n, i, hit = heapq.heappop(heap)
        stream = streams[n]
        out[(hit.id, stream.scope.namespace)] = (stream.scope, hit)
        if len(out) == wide:
            break
        after = stream.get(i + 1)
        if after is not None and (bar is None or after.score >= bar):
            heapq.heappush(heap, (stream.scope.key(after), n, i + 1, after))
    return out


def second_stage(query: Query, found: Found, reranker: Reranker | None) -> list[Hit]:
    """MMR (:func:`coniti.fusion.mmr` on the hits' scores and the notes' vectors), then the
    reranker (not for ``recent``), then the first ``k``."""
    hits = [h for h, _ in found]
    if query.mmr is not None and hits:
        rows = unit_rows(np.stack([v for _, v in found]))
        order = mmr([h.score for h in hits], rows, query.mmr, len(hits))
        hits = [hits[i] for i in order]
    if reranker is not None and query.resolved_strategy != "recent" and hits:
        hits = apply_reranker(reranker, query, hits)
    return hits[: query.k]


_RANKING = {"semantic": "semantic", "keyword": "keyword", "recent": "recency"}


def _reranked(found: Found, strategy: str) -> Found:
    """Hits merged from several namespaces with ``signals.ranks`` set to the merged position."""
    name = _RANKING[strategy]
    out = []
    for r, (hit, vector) in enumerate(found, start=1):
        signals = None if hit.signals is None else trusted_signals({**hit.signals.__dict__, "ranks": {name: r}})
        out.append((_hit({**hit.__dict__, "signals": signals}), vector))
    return out


def _merge_key(hit: Hit) -> tuple[float, float, str, tuple[str, ...]]:
    """Hits of several namespaces in one order: best score, then newer note, then smaller id, then
    namespace (the structures' own tie rule, extended by the namespace)."""
    return (-hit.score, -hit.note.timestamp, hit.note.id, hit.namespace)
