"""Recall receipts: what an ``ask`` answered, kept in the log so it can be shown and replayed.

``engine.ask(query, receipt=True)`` appends one event after answering: a metadata write of key
:data:`RECEIPT_KEY` in namespace :data:`RECEIPTS` (exported, imported and chained like every event;
the namespace shows among the store's namespaces) whose value is the receipt's map
(:meth:`Receipt.to_value`): the SHA-256 digest of the query (its canonical JSON), the query itself
only when asked (``receipt="with_query"``), the strategy it resolved to, the fusion and MMR
settings, ``k``, the embedder's spec id, the namespace or prefix asked, the point read (the seq the
engine's indexes had reached) and every hit as ``(namespace, id, version, score)``. The answer's
``receipt`` is the event's seq. ``engine.replay(receipt)`` asks the same query of
``engine.at(point)`` and :meth:`Receipt.matches` says whether the hits are the same, scores bit for
bit. Needs a log memory (a backend with ``audit``, ``events`` and time travel).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from coniti.actor import Query
from coniti.errors import ContractError
from coniti.recall import Hit

__all__ = ["RECEIPTS", "RECEIPT_KEY", "Receipt", "query_digest", "read_receipt", "record_receipt"]

RECEIPTS = ("coniti", "receipts")
"""The namespace of the receipt events."""
RECEIPT_KEY = "recall"
"""The metadata key whose values are the receipts."""
_VERSION = 1


def query_digest(query: Query) -> str:
    """The hex SHA-256 of ``query``'s canonical JSON (its ``to_dict``, keys sorted, no spaces)."""
    text = json.dumps(query.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


HitKey = tuple[tuple[str, ...], str, int | None, float]
"""A hit as a receipt keeps it: ``(namespace, id, version, score)``."""


@dataclass(frozen=True)
class Receipt:
    """One recall receipt. ``seq`` is its event (0 before it is written); ``point`` the seq the
    answer was read at; ``query`` the query's map, or None when only its digest was kept."""

    seq: int
    point: int
    query_digest: str
    query: dict[str, Any] | None
    strategy: str
    fusion: dict[str, Any] | None
    mmr: float | None
    k: int
    embedder: str
    namespace: tuple[str, ...]
    prefix: tuple[str, ...] | None
    hits: tuple[HitKey, ...]

    @staticmethod
    def of(
        query: Query, hits: list[Hit], *, point: int, embedder: str, namespace: tuple[str, ...],
        prefix: tuple[str, ...] | None, with_query: bool,
    ) -> Receipt:
        """The receipt of an answer (not yet written)."""
        return Receipt(
            0, point, query_digest(query), query.to_dict() if with_query else None, query.resolved_strategy,
            None if query.fusion is None else query.fusion.to_dict(), query.mmr, query.k, embedder,
            namespace, prefix, keys(hits),
        )

    def to_value(self) -> dict[str, Any]:
        """The receipt as the JSON value kept in its event."""
        return {
            "v": _VERSION, "point": self.point, "query_digest": self.query_digest, "query": self.query,
            "strategy": self.strategy, "fusion": self.fusion, "mmr": self.mmr, "k": self.k,
            "embedder": self.embedder, "namespace": list(self.namespace),
            "prefix": None if self.prefix is None else list(self.prefix),
            "hits": [[list(ns), rid, version, score] for ns, rid, version, score in self.hits],
        }  # fmt: skip

    @staticmethod
    def from_value(seq: int, value: Any) -> Receipt:
        """The receipt kept by event ``seq``; :class:`ContractError` if ``value`` is not one."""
        try:
            if value["v"] != _VERSION:
                raise ValueError(f"receipt version {value['v']!r}")
            return Receipt(
                seq, int(value["point"]), str(value["query_digest"]), value["query"], str(value["strategy"]),
                value["fusion"], value["mmr"], int(value["k"]), str(value["embedder"]), tuple(value["namespace"]),
                None if value["prefix"] is None else tuple(value["prefix"]),
                tuple((tuple(ns), rid, version, float(score)) for ns, rid, version, score in value["hits"]),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise ContractError(f"event {seq} is not a recall receipt ({exc})") from None

    def query_for(self, query: Query | str | None) -> Query:
        """The query to replay: the one kept, or ``query`` (a plain string becomes
        ``Query(text=...)``, as ``ask`` makes it), which must have the receipt's digest;
        :class:`ContractError` otherwise."""
        if query is None:
            if self.query is None:
                raise ContractError(
                    f"receipt {self.seq} keeps only the query's digest: give the query to replay it"
                )
            return Query.from_dict(self.query)
        if isinstance(query, str):
            query = Query(text=query)
        if query_digest(query) != self.query_digest:
            raise ContractError(f"the query given is not the one of receipt {self.seq} (its digest differs)")
        return query

    def matches(self, hits: list[Hit]) -> bool:
        """Whether ``hits`` are the receipt's: the same namespaces, ids, versions and scores (bit for
        bit), in order."""
        return keys(hits) == self.hits


def keys(hits: list[Hit]) -> tuple[HitKey, ...]:
    """``(namespace, id, version, score)`` of each hit, in order."""
    return tuple((tuple(h.namespace), h.note.id, h.version, float(h.score)) for h in hits)


def record_receipt(memory: Any, receipt: Receipt) -> int:
    """Append ``receipt`` to ``memory`` (a log backend) as its event; returns the event's seq.
    Raises :class:`~coniti.errors.ReadOnlyError` for a memory that cannot keep one."""
    from coniti.errors import ReadOnlyError

    keep = getattr(memory, "set_meta_seq", None)
    if keep is None or getattr(memory, "read_only", False):
        raise ReadOnlyError(f"a recall receipt needs a writable log memory (memory: {memory.kind})")
    return int(keep(RECEIPTS, RECEIPT_KEY, receipt.to_value()))


def read_receipt(memory: Any, seq: int) -> Receipt:
    """The receipt kept by event ``seq`` of ``memory``; :class:`ContractError` if that event is not
    a receipt (or is past the head)."""
    head = memory.head
    if not isinstance(seq, int) or isinstance(seq, bool) or not 1 <= seq <= head:
        raise ContractError(f"receipt seq must be between 1 and the head ({head}), got {seq!r}")
    [event] = memory.events(after=seq - 1, until=seq)
    if event.kind != "meta" or tuple(event.namespace) != RECEIPTS or event.key != RECEIPT_KEY:
        raise ContractError(f"event {seq} is not a recall receipt (it is a {event.kind} event)")
    return Receipt.from_value(seq, event.value)
