"""What the engine hands back: :class:`IngestResult`, :class:`Answer`, :class:`Snapshot`,
:class:`DerivedReport`; and the two figures an ask is sized by (:func:`pool_size`,
:data:`EMBEDDING_KEY`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pydantic

from coniti.actor import Query
from coniti.contracts import Contract
from coniti.memory import MemoryRecord, Namespace
from coniti.recall import Hit

__all__ = [
    "EMBEDDING_KEY",
    "MAX_QUERY_CHARS",
    "Answer",
    "DerivedReport",
    "IngestResult",
    "Snapshot",
    "ingest_results",
    "pool_size",
]

EMBEDDING_KEY = "embedding_id"
"""The metadata key holding a namespace's embedding spec id."""

MAX_QUERY_CHARS = 100_000
"""The default of :attr:`ContinuityEngine.max_query_chars
<coniti.engine.ContinuityEngine.max_query_chars>`: the longest query text an ask takes
(characters)."""


def pool_size(k: int) -> int:
    """The candidates gathered for the MMR and reranker stages of a query for ``k`` hits:
    ``max(4 * k, 32)``."""
    return max(4 * k, 32)


class IngestResult(Contract):
    """The outcome of ingesting one note: admitted, or refused with a ``reason``."""

    model_config = pydantic.ConfigDict(frozen=True)

    admitted: bool
    id: str
    reason: str | None = None


class Answer(Contract):
    """The hits for a query, best first: from ``namespace``, or from every namespace under
    ``prefix`` when the query spanned them (each hit names its own namespace). ``receipt``: the
    seq of the recall receipt the ask appended (:mod:`coniti.receipts`), None when it kept none."""

    model_config = pydantic.ConfigDict(frozen=True)

    query: Query
    namespace: Namespace = ()
    prefix: Namespace | None = None
    hits: list[Hit]
    receipt: int | None = None


class Snapshot(Contract):
    """Every record of one namespace, read by scan; :meth:`ContinuityEngine.restore
    <coniti.engine.ContinuityEngine.restore>` writes it back."""

    namespace: Namespace = ()
    embedding_id: str | None = None
    records: list[MemoryRecord]


class DerivedReport(Contract):
    """:meth:`ContinuityEngine.verify <coniti.engine.ContinuityEngine.verify>` of one namespace:
    ``ok`` when the structures (and the snapshot on disk, if any) equal a fresh build from memory;
    ``problems`` says what differs. ``snapshot``: ``"none"`` (nothing persisted here),
    ``"current"`` (on disk, checked and equal after its catch-up) or the reason it is refused."""

    model_config = pydantic.ConfigDict(frozen=True)

    namespace: Namespace = ()
    seq: int | None = None
    rows: int
    ok: bool
    snapshot: str
    problems: list[str]


ingest_result = IngestResult.constructor()
answer = Answer.constructor()
derived_report = DerivedReport.constructor()
snapshot = Snapshot.constructor()


def ingest_results(ids: Sequence[str], decisions: Sequence[Any]) -> list[IngestResult]:
    """One :class:`IngestResult` per note, built without validating again."""
    return [
        ingest_result({"admitted": d.admitted, "id": id_, "reason": d.reason})
        for id_, d in zip(ids, decisions, strict=True)
    ]
