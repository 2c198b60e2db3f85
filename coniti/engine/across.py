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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from coniti.filters import RecordPredicate
from coniti.hybrid import Ranked
from coniti.memory import MemoryBackend

if TYPE_CHECKING:
    from coniti.engine.recall import Found, Scope

__all__ = ["first_across"]


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
