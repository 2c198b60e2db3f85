"""Consolidation: summarise a conversation's turns, extract facts from them, keep memory bounded.

:func:`consolidate` works on one namespace (a conversation's, or any other). Its *span* is the live
notes of kind ``"message"`` there, older than ``older_than`` when given, that no live ``summary``
note already cites (:mod:`coniti.engine.lineage`), the oldest :data:`MAX_SPAN` (1,024) of them:
the rest wait for the next call. Over the span it

* asks the **summariser** for one text and writes it as a note of kind ``"summary"``, its
  ``derived_from`` naming every turn summarised (``note:ID@VERSION``);
* asks the **extractor** (when given) for proposed facts; each is compared with the live facts of
  the namespace (kind ``"fact"``): a fact with the same content id is a no-op, a proposal naming a
  fact it ``supersedes`` ends that fact's validity and adds the new one
  (:mod:`coniti.engine.validity`), any other is added; each new fact cites its sources;
* with ``prune_sources``, deletes the summarised turns; with ``max_items``, deletes the oldest live
  notes of the namespace beyond that many (never the notes this consolidation writes).

All of it is ONE atomic write (a :class:`~coniti.memory.WriteRequest` with compare-and-set on every
turn of the span at the version read), stamped with the reason ``consolidation OPID: ...`` listing
each decision, under the op id ``consolidate:`` + the SHA-256 of the namespace and the span's
``ID@VERSION`` list: consolidating the same span again writes nothing (the report says
``replayed``). A summariser or extractor that raises or returns something else than documented, an
extractor naming an unknown or superseded fact: :class:`~coniti.errors.ContractError` (or the
callable's own error), nothing written.

Summarisers and extractors are callables (or objects with ``summarize`` / ``extract``), sync or
async: ``summarizer(turns) -> str`` and ``extractor(turns, facts) -> list[str | Proposal]``, where
``turns`` are the span's notes in chronological order and ``facts`` the live facts. Built in, with
no model: :class:`ExtractiveSummarizer` and :class:`PassThroughExtractor`.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import inspect
import json
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from coniti.actor import MAX_SOURCES, Note, to_stored_time
from coniti.embedding import tokenize as word_tokens
from coniti.engine.lineage import parse_ref
from coniti.engine.validity import SUPERSEDES
from coniti.errors import ContractError
from coniti.jsonl import MAX_STAMP_CHARS
from coniti.memory import DeleteOp, MemoryRecord, UpsertOp, WriteRequest, WriteResult, audited

if TYPE_CHECKING:
    from coniti.engine.engine import ContinuityEngine

__all__ = [
    "ConsolidationReport",
    "Consolidator",
    "ExtractiveSummarizer",
    "PassThroughExtractor",
    "Proposal",
    "consolidate",
    "consolidate_every",
    "span_op_id",
]


@dataclass(frozen=True)
class Proposal:
    """A fact an extractor proposes: its ``text``, the live fact it ``supersedes`` (an id, or None)
    and the turns it came from (``sources``: note ids of the span; empty: every turn of the span)."""

    text: str
    supersedes: str | None = None
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConsolidationReport:
    """What one consolidation did: turns ``summarized``, facts ``reweighted`` (superseded: hidden
    from default recall from then on), notes ``pruned`` (deleted), notes ``derived`` (summaries and
    facts written); ``seq`` the last event of the write (None when nothing was written), its
    ``op_id``, the ids of the derived notes (``notes``) and each ``decision``; ``replayed`` when
    this span had been consolidated already (nothing written now); ``remaining`` the unsummarised
    turns beyond :data:`MAX_SPAN` left for the next call."""

    summarized: int
    reweighted: int
    pruned: int
    derived: int
    seq: int | None
    op_id: str | None = None
    notes: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    replayed: bool = False
    remaining: int = 0


MAX_SPAN = MAX_SOURCES
"""The most turns one consolidation summarises (the oldest first; a summary cites each): the rest
wait for the next call (:attr:`ConsolidationReport.remaining`)."""

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")

_STOP = (
    "the and for are but not you all any can had her was one our out has him his how its may new now "
    "see two who did get let say she too use that with have this will your from they been were said "
    "each which their what there when would make like into than them then these some could other "
    "still just also very about after before over only such here where while should"
)
STOPWORDS = frozenset(_STOP.split())
"""Words :class:`ExtractiveSummarizer` does not score."""


class ExtractiveSummarizer:
    """An extractive summary with no model: the span's text split into sentences, each scored by the
    span-frequency of its words (words of 3+ characters, not in :data:`STOPWORDS`) over the square
    root of their number, the best ``max_sentences`` kept in
    their original order, each prefixed by its speaker when the turn has one (``turn.speaker``
    metadata), at most ``max_chars`` characters in all (the first sentence always kept, cut).
    Deterministic."""

    def __init__(self, max_sentences: int = 3, max_chars: int = 1000) -> None:
        if type(max_sentences) is not int or max_sentences < 1:
            raise ContractError(f"max_sentences must be a positive int, got {max_sentences!r}")
        if type(max_chars) is not int or max_chars < 1:
            raise ContractError(f"max_chars must be a positive int, got {max_chars!r}")
        self.max_sentences, self.max_chars = max_sentences, max_chars

    def summarize(self, turns: Sequence[Note]) -> str:
        sentences: list[tuple[str, list[str]]] = []
        for note in turns:
            turn = note.metadata.get("turn")
            speaker = turn.get("speaker") if isinstance(turn, dict) else None
            for part in _SENTENCE.split(note.text):
                part = part.strip()
                if part:
                    words = [w for w in word_tokens(part.lower()) if len(w) >= 3 and w not in STOPWORDS]
                    sentences.append((f"{speaker}: {part}" if isinstance(speaker, str) else part, words))
        if not sentences:
            return ""
        counts = Counter(w for _, words in sentences for w in words)

        def score(i: int) -> float:
            words = sentences[i][1]
            return sum(counts[w] for w in words) / math.sqrt(len(words)) if words else 0.0

        best = sorted(range(len(sentences)), key=lambda i: (-score(i), i))[: self.max_sentences]
        out = ""
        for i in sorted(best):
            piece = sentences[i][0] if not out else " " + sentences[i][0]
            if len(out) + len(piece) > self.max_chars:
                if not out:
                    out = piece[: self.max_chars]
                break
            out += piece
        return out

    __call__ = summarize


class PassThroughExtractor:
    """Every turn of the span becomes a proposed fact as it is (its text, stripped), citing that
    turn; turns of fewer than ``min_words`` words are skipped. Supersedes nothing."""

    def __init__(self, min_words: int = 1) -> None:
        self.min_words = min_words

    def extract(self, turns: Sequence[Note], facts: Sequence[Note]) -> list[Proposal]:
        return [
            Proposal(t.text.strip(), sources=(t.id,))
            for t in turns
            if len(t.text.split()) >= self.min_words
        ]

    __call__ = extract


def _resolved(value: Any) -> Any:
    """``value``, awaited when it is awaitable (on a fresh event loop in a worker thread, so that
    this works inside and outside a running loop)."""
    if not inspect.isawaitable(value):
        return value
    import asyncio  # only for an async summariser or extractor (coniti ask/add leave it out)

    async def wait() -> Any:
        return await value

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, wait()).result()


def _call(thing: Any, method: str, *args: Any) -> Any:
    fn = getattr(thing, method, None)
    if fn is None:
        if not callable(thing):
            raise ContractError(f"the {method[:-1]}er must be callable or have a {method}() method")
        fn = thing
    return _resolved(fn(*args))


def span_op_id(ns: tuple[str, ...], span: Sequence[MemoryRecord]) -> str:
    """The op id of consolidating ``span`` in ``ns``: ``consolidate:`` and the SHA-256 (hex, 32
    characters) of the namespace and the span's ``ID@VERSION`` list."""
    body = json.dumps([list(ns), [f"{r.id}@{r.version}" for r in span]], separators=(",", ":"))
    return "consolidate:" + hashlib.sha256(body.encode("utf-8")).hexdigest()[:32]


def _derived_id(op_id: str, what: str) -> str:
    return what + "-" + hashlib.sha256(f"{op_id}/{what}".encode()).hexdigest()[:16]


def _proposals(value: Any) -> list[Proposal]:
    if not isinstance(value, list | tuple):
        raise ContractError(f"the extractor must return a list of str or Proposal, got {type(value).__name__}")
    out = []
    for i, p in enumerate(value):
        if isinstance(p, str):
            p = Proposal(p)
        if not isinstance(p, Proposal) or not isinstance(p.text, str) or not p.text.strip():
            raise ContractError(f"the extractor's item {i} is not a non-blank str or Proposal: {p!r}")
        out.append(p)
    return out


def consolidate(
    engine: ContinuityEngine,
    ns: tuple[str, ...],
    *,
    max_items: int | None = None,
    summarizer: Any = None,
    extractor: Any = None,
    older_than: float | datetime | None = None,
    prune_sources: bool = False,
    actor: str | None = None,
) -> ConsolidationReport:
    """Consolidate namespace ``ns`` of ``engine`` (module docstring). ``summarizer`` None: an
    :class:`ExtractiveSummarizer`; ``False``: no summary. ``extractor`` None: no facts."""
    if max_items is not None and (type(max_items) is not int or max_items < 0):
        raise ContractError(f"max_items must be a non-negative int or None, got {max_items!r}")
    if type(prune_sources) is not bool:
        raise ContractError(f"prune_sources must be True or False, got {prune_sources!r}")
    try:
        cutoff = None if older_than is None else to_stored_time(older_than, "older_than")
    except ValueError as exc:
        raise ContractError(str(exc)) from None
    summarizer = ExtractiveSummarizer() if summarizer is None else summarizer
    memory = engine.memory
    live = sorted(memory.iter_all(namespace=ns), key=lambda r: (r.note.timestamp, r.version or 0))
    cited = _summarised(engine, ns, live)
    waiting = [
        r for r in live
        if r.note.kind == "message" and r.id not in cited and (cutoff is None or r.note.timestamp < cutoff)
    ]  # fmt: skip
    span, remaining = waiting[:MAX_SPAN], len(waiting) - min(len(waiting), MAX_SPAN)
    over = [] if max_items is None else live[: max(0, len(live) - max_items)]
    if not span and not over:
        return ConsolidationReport(0, 0, 0, 0, None)
    op_id = span_op_id(ns, span) if span else "consolidate:" + hashlib.sha256(
        json.dumps([list(ns), "max", max_items, [f"{r.id}@{r.version}" for r in over]]).encode()
    ).hexdigest()[:32]
    if memory.supports_write and memory.op_result(op_id, ns) is not None:
        return ConsolidationReport(0, 0, 0, 0, None, op_id, replayed=True, remaining=remaining)
    turns = [r.note for r in span]
    now = time.time()
    notes: list[Note] = []
    ended: list[Note] = []
    decisions: list[str] = []
    sources = tuple(f"note:{r.id}@{r.version}" for r in span)
    version_of = {r.id: r.version for r in span}
    if span and summarizer is not False:
        text = _call(summarizer, "summarize", turns)
        if not isinstance(text, str):
            raise ContractError(f"the summarizer returned {type(text).__name__}, not str; nothing written")
        if text.strip():
            sid = _derived_id(op_id, "summary")
            notes.append(Note(id=sid, text=text, timestamp=turns[-1].timestamp, kind="summary", derived_from=sources))
            decisions.append(f"summary {sid} of {len(span)} turns")
    if span and extractor is not None:
        facts = [r for r in live if r.note.kind == "fact"]
        current = {r.id: r for r in facts if r.note.valid_to is None}
        known = {r.note.content_id(ns) for r in facts}
        for i, p in enumerate(_proposals(_call(extractor, "extract", turns, [r.note for r in facts]))):
            unknown = [s for s in p.sources if s not in version_of]
            if unknown:
                raise ContractError(f"the extractor named {unknown[0]!r}, not a turn of the span; nothing written")
            cites = tuple(f"note:{s}@{version_of[s]}" for s in p.sources) or sources
            fid = _derived_id(op_id, f"fact{i}")
            note = Note(id=fid, text=p.text.strip(), timestamp=turns[-1].timestamp, kind="fact", derived_from=cites)
            if note.content_id(ns) in known:
                decisions.append(f"no-op: {p.text.strip()[:60]!r} is known")
                continue
            known.add(note.content_id(ns))
            if p.supersedes is not None:
                old = current.pop(p.supersedes, None)
                if old is None:
                    raise ContractError(
                        f"the extractor named fact {p.supersedes!r} to supersede, not a live current fact; "
                        "nothing written"
                    )
                note = note.model_copy(update={
                    "valid_from": now, "derived_from": (*cites, f"{SUPERSEDES}{old.id}@{old.version}"),
                })  # fmt: skip
                ended.append(old.note.model_copy(update={"valid_to": now}))
                decisions.append(f"fact {fid} supersedes {old.id}")
            else:
                decisions.append(f"fact {fid} added")
            notes.append(note)
    pruned = [r.id for r in span] if prune_sources else []
    if max_items is not None:
        left = [r for r in live if r.id not in set(pruned)]
        excess = len(left) + len(notes) - max_items
        # the oldest notes go first; the notes written now stay
        pruned += [r.id for r in left[: max(0, excess)]]
    ended = [n for n in ended if n.id not in set(pruned)]
    if pruned:
        decisions.append(f"pruned {len(pruned)}")
    if not notes and not ended and not pruned:
        return ConsolidationReport(0, 0, 0, 0, None, op_id, decisions=tuple(decisions), remaining=remaining)
    spec = engine.spec_id
    by_id = {r.id: r for r in live}
    vectors = engine.embedder.embed([n.text for n in notes]) if notes else None
    ops: list[Any] = [
        UpsertOp(record=MemoryRecord.trusted(n, None if vectors is None else vectors[i].copy(), spec, ns))
        for i, n in enumerate(notes)
    ]
    ops += [
        UpsertOp(record=MemoryRecord.trusted(n, by_id[n.id].vector, by_id[n.id].embedding_id, ns, None,
                                             by_id[n.id].expires_at))  # fmt: skip
        for n in ended
    ]
    ops += [DeleteOp(id=rid) for rid in pruned]
    expect: dict[str, int | None] = {r.id: r.version for r in span if r.version is not None}
    expect.update({n.id: by_id[n.id].version for n in ended if by_id[n.id].version is not None})
    expect.update({n.id: None for n in notes})
    request = WriteRequest(ops=ops, namespace=ns, expect=expect, op_id=op_id)
    reason = _reason(op_id, decisions)
    stamp = (actor or "coniti.consolidate", reason) if memory.supports_event_feed else (None, None)
    with audited(memory, *stamp):
        result: WriteResult = engine._write(ns, request)
    return ConsolidationReport(
        summarized=len(span) if any(n.kind == "summary" for n in notes) else 0,
        reweighted=len(ended),
        pruned=len(pruned),
        derived=len(notes),
        seq=max(result.seqs) if result.seqs else None,
        op_id=op_id,
        notes=tuple(n.id for n in notes),
        decisions=tuple(decisions),
        replayed=result.replayed,
        remaining=remaining,
    )


def _reason(op_id: str, decisions: Sequence[str]) -> str:
    """The audit reason: ``consolidation OPID: `` and each decision, or, when that would pass
    :data:`~coniti.jsonl.MAX_STAMP_CHARS`, the summary's decision and the counts of the others."""
    head = f"consolidation {op_id}: "
    full = head + "; ".join(decisions)
    if len(full) <= MAX_STAMP_CHARS:
        return full
    kinds = Counter(d.split(" ")[0].rstrip(":") if not d.startswith("fact ") else
                    ("superseding fact" if " supersedes " in d else "fact added") for d in decisions)  # fmt: skip
    parts = [d for d in decisions if d.startswith("summary ") or d.startswith("pruned ")]
    parts += [f"{n} {kind}" for kind, n in sorted(kinds.items()) if kind not in ("summary", "pruned")]
    return (head + "; ".join(parts))[:MAX_STAMP_CHARS]


def _summarised(engine: ContinuityEngine, ns: tuple[str, ...], live: Sequence[MemoryRecord]) -> set[str]:
    """Ids of the turns a live summary of ``ns`` cites."""
    out: set[str] = set()
    for r in live:
        if r.note.kind == "summary":
            for ref in r.note.derived_from:
                kind, rid, _ = parse_ref(ref)
                if kind == "note" and rid is not None:
                    out.add(rid)
    return out


@dataclass
class Consolidator:
    """A background consolidation (:func:`consolidate_every`): ``stop()`` ends it (and the engine's
    ``close`` does); ``reports`` and ``errors`` keep the last 100 of each."""

    interval: float
    run: Callable[[], ConsolidationReport]
    reports: list[ConsolidationReport] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Consolidator:
        self._thread = threading.Thread(target=self._loop, name="coniti-consolidate", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.reports = [*self.reports[-99:], self.run()]
            except Exception as exc:  # kept for the caller; the next round tries again
                self.errors = [*self.errors[-99:], exc]

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop and wait for a round under way to end (at most ``timeout`` seconds)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


def consolidate_every(interval: float, run: Callable[[], ConsolidationReport]) -> Consolidator:
    """A started :class:`Consolidator` calling ``run`` every ``interval`` seconds (> 0)."""
    if isinstance(interval, bool) or not isinstance(interval, int | float) or not interval > 0:
        raise ContractError(f"interval must be a positive number of seconds, got {interval!r}")
    return Consolidator(float(interval), run).start()
