"""LogBackend's retention (:mod:`coniti.retention`): the expiry a write gives records stored
without one, and recording the policy an open asks for. Functions over the store's parts; the
backend calls them on each write path."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from coniti.actor import Note
from coniti.errors import ContractError
from coniti.log import EventLog, PutItem
from coniti.memory import MemoryRecord, MetaSetRequest, UpsertOp, WriteRequest
from coniti.retention import RETENTION_KEY, Retention, suppressed

if TYPE_CHECKING:
    from coniti.impl.log import LogBackend

__all__ = [
    "configure_retention",
    "policy_now",
    "retained_columns",
    "retained_items",
    "retained_write",
    "stored_policy",
]


def stored_policy(log: EventLog) -> Retention:
    """The retention the store holds (its root metadata key :data:`~coniti.retention.RETENTION_KEY`)."""
    return Retention.from_meta(log.get_meta((), RETENTION_KEY, None))


def policy_now(policy: Retention) -> Retention | None:
    """The retention a write applies now: ``policy`` (the handle's), None when it has none or
    inside :func:`~coniti.retention.no_expiry`."""
    if suppressed() or not policy.active:
        return None
    return policy


def retained_items(items: list[PutItem], records: Sequence[MemoryRecord], policy: Retention | None) -> list[PutItem]:
    """``items`` (of ``records``) with the retention expiry of ``policy`` on those without one."""
    if policy is None:
        return items
    now = time.time()
    out = []
    for item, record in zip(items, records, strict=True):
        if item.expires_at is None:
            ttl = policy.seconds(getattr(record.note, "kind", None))
            if ttl is not None:
                item = item._replace(expires_at=now + ttl)
        out.append(item)
    return out


def retained_columns(notes: Sequence[Note], policy: Retention | None) -> list[float | None] | None:
    """The expiry column of a batch of ``notes`` (none of which has one) under ``policy``: None
    when no record expires; without per-kind retention one value for every row (the notes are not
    read), else per note by its kind."""
    if policy is None or not notes:
        return None
    now = time.time()
    if not policy.kinds:
        assert policy.default is not None  # an active policy without kinds has a default
        return [now + policy.default] * len(notes)
    out: list[float | None] = []
    for note in notes:
        ttl = policy.seconds(getattr(note, "kind", None))
        out.append(None if ttl is None else now + ttl)
    return out if any(x is not None for x in out) else None


def retained_write(request: WriteRequest, policy: Retention | None) -> WriteRequest:
    """``request`` with the retention expiry of ``policy`` on its upserts' records without one
    (a patch keeps the live record's expiry)."""
    if policy is None:
        return request
    now = time.time()
    ops: list[Any] = []
    for op in request.ops:
        if isinstance(op, UpsertOp) and op.record.expires_at is None:
            ttl = policy.seconds(getattr(op.record.note, "kind", None))
            if ttl is not None:
                op = UpsertOp(record=op.record.model_copy(update={"expires_at": now + ttl}))
        ops.append(op)
    return request.model_copy(update={"ops": ops})


def configure_retention(backend: LogBackend, retention: Any, kind_retention: Any) -> Retention:
    """The retention an open asks for, recorded in the store when it differs from the store's
    (module :mod:`coniti.retention`); refused on a read-only store."""
    stored = backend.retention
    wanted = Retention.make(retention, kind_retention, stored)
    if wanted == stored:
        return stored
    if backend.read_only:
        raise ContractError(
            f"retention: this store is opened read-only; it keeps {stored!r} (open it for writing to change it)"
        )
    with backend.audit(backend.actor, "retention"):
        backend.set_meta(MetaSetRequest(key=RETENTION_KEY, value=wanted.to_meta(), namespace=()))
    return wanted
