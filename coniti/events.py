"""The public models of the audit trail and time travel: :class:`Event`, :class:`Diff`,
:class:`EraseResult`.

They are contracts (``to_dict``/``from_dict``/``to_json``/``from_json``/``json_schema``), frozen, and
built fresh for every call, so a caller may keep them. The log engine below (:mod:`coniti.log`) knows
nothing of them; :mod:`coniti.impl.log` converts its plain events into these.

Two clocks never mix: a note's ``timestamp`` (when the thing happened, inside ``record``) and an
event's ``at`` (when the store recorded the change).
"""

from __future__ import annotations

from typing import Any, Literal

import pydantic

from coniti.contracts import Contract, check_json_value
from coniti.records import MemoryRecord, Namespace

__all__ = ["Diff", "EraseResult", "Event", "EventKind"]

EventKind = Literal["put", "delete", "meta", "clear", "erase", "op", "feedback"]


class Event(Contract):
    """One change as the log recorded it.

    * ``seq``: its sequence number (gap-free from 1); ``at``: recorded time, epoch seconds (never
      decreasing along the log).
    * ``kind``: ``put`` (one record written: ``id``, ``timestamp``, ``record``), ``delete`` (one live
      record removed: ``id``), ``meta`` (a metadata write: ``key``, ``value``), ``clear`` (every
      record of ``namespace`` removed), ``erase`` (the receipt of an erasure of every version of
      ``id``, or of every value of metadata key ``key``), ``op`` (the receipt of a write request's op
      id ``op_id``: ``value`` holds the request's digest ``d`` and its result ``res``), ``feedback`` (a
      weight given to the record ``id`` by ``improve``: ``value`` holds the weight, a float; event
      version 3).
    * ``replaces``: for a put that replaced a live version (an upsert or patch), the sequence
      number of that version; the history of a record reads as a chain of versions.
      ``expires_at``: a put's expiry.
    * ``record``/``value`` are None when erased (``erased`` is then True): the change is still on
      record, its content is gone. ``timestamp`` (the note's, for a put) survives erasure.
    * ``actor``/``reason``: who and why, as stamped by :meth:`~coniti.impl.log.LogBackend.audit` or
      the store's default actor (None when unset).
    * ``hash``/``prev``: this event's and the previous event's hash (hex SHA-256); the chain is
      ``hash = SHA-256(prev ‖ envelope ‖ SHA-256(payload))``, see ``log/FORMAT.md``.
    """

    model_config = pydantic.ConfigDict(frozen=True)

    seq: int = pydantic.Field(ge=1)
    at: float
    kind: EventKind
    namespace: Namespace = ()
    id: str | None = None
    timestamp: float | None = None
    record: MemoryRecord | None = None
    key: str | None = None
    value: Any = None
    actor: str | None = None
    reason: str | None = None
    hash: str
    prev: str
    erased: bool = False
    replaces: int | None = None
    expires_at: float | None = None
    op_id: str | None = None

    @pydantic.field_validator("value", mode="before")
    @classmethod
    def _json(cls, value: Any) -> Any:
        return check_json_value(value, "value")


class Diff(Contract):
    """What changed in one namespace between the memory right after event ``a`` and right after
    event ``b``: ids visible at ``b`` only (``added``), at ``a`` only (``removed``), and at both with
    different content (``changed``: text, timestamp, metadata, embedding id, vector bits or blob differ;
    a version whose content was erased counts as changed unless it is the very same version).
    Each list is sorted."""

    model_config = pydantic.ConfigDict(frozen=True)

    a: int = pydantic.Field(ge=0)
    b: int = pydantic.Field(ge=0)
    namespace: Namespace = ()
    added: list[str] = pydantic.Field(default_factory=list)
    removed: list[str] = pydantic.Field(default_factory=list)
    changed: list[str] = pydantic.Field(default_factory=list)

    @property
    def empty(self) -> bool:
        """True when nothing was added, removed or changed."""
        return not (self.added or self.removed or self.changed)


class EraseResult(Contract):
    """The outcome of an erasure (:meth:`~coniti.impl.log.LogBackend.erase`, ``erase_meta``,
    ``erase_namespace``): record ids whose versions were erased (``erased``) and ids the namespace
    never held (``missing``); metadata keys whose values were erased (``erased_keys``) and keys it
    never held (``missing_keys``). Each erased id, then each erased key, has one ``erase`` event:
    their sequence numbers, in that order, are ``receipts``."""

    model_config = pydantic.ConfigDict(frozen=True)

    erased: list[str] = pydantic.Field(default_factory=list)
    missing: list[str] = pydantic.Field(default_factory=list)
    receipts: list[int] = pydantic.Field(default_factory=list)
    erased_keys: list[str] = pydantic.Field(default_factory=list)
    missing_keys: list[str] = pydantic.Field(default_factory=list)
