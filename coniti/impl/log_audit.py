"""The audit trail, history, diff, change feed and durable subscriptions of an
:class:`~coniti.log.EventLog`, as public models: functions of the log, and :class:`AuditTrail`, which
gives them to :class:`~coniti.impl.log.LogBackend` as methods.

Contracts:

* Every function validates its arguments before touching the store and raises
  :class:`~coniti.errors.ContractError` naming the argument.
* Events are :class:`coniti.events.Event` models built fresh per call (records are new objects).
  Erased content reads as ``record=None``/``value=None`` with ``erased=True``.
* Iterators read the log in batches, each from a fresh snapshot; no read transaction is held while
  the caller consumes events. They see the commits of other processes.
* ``follow`` polls (1 ms backing off to 50 ms) and returns after ``timeout`` seconds in which no
  event was yielded; ``afollow`` does the same without blocking the event loop.
* A :class:`Subscription`'s position is stored in the store (outside the log) and moves only when
  acknowledged, so after a crash a consumer resumes right after the last event it acknowledged:
  every event is delivered until acknowledged, and none is acknowledged twice.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from coniti.actor import Note
from coniti.errors import ContractError
from coniti.events import Diff, Event
from coniti.log import EventLog, feed
from coniti.log.codec import LogEvent
from coniti.log.keys import Namespace
from coniti.memory import MemoryRecord, as_namespace, to_thread

__all__ = ["Subscription", "public_event"]

_BATCH = 256


# -- validation ----------------------------------------------------------------------------------


def check_seq(value: Any, field: str, head: int | None = None) -> int:
    """``value`` as a sequence number ``>= 0`` (and ``<= head`` when given)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ContractError(f"{field} must be an integer sequence number, got {type(value).__name__}")
    if value < 0:
        raise ContractError(f"{field} must be >= 0, got {value}")
    if head is not None and value > head:
        raise ContractError(f"{field} must be between 0 and the head ({head}), got {value}")
    return value


def check_timeout(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ContractError(f"timeout must be None or a finite number of seconds >= 0, got {value!r}")
    return float(value)


# -- events --------------------------------------------------------------------------------------


def public_event(e: LogEvent) -> Event:
    """The public model of a decoded log event (trusted: the store wrote it)."""
    record = None
    data = e.record
    if data is not None:
        assert e.id is not None and e.timestamp is not None
        record = MemoryRecord.trusted(
            Note.trusted(e.id, data.text, e.timestamp, data.metadata, data.kind, data.facts),
            data.vector,
            data.embedding_id,
            e.namespace,
            e.seq,
            e.expires_at,
            data.blob,
        )
    return Event.constructor()(
        {
            "seq": e.seq,
            "at": e.at,
            "kind": e.kind,
            "namespace": e.namespace,
            "id": e.id,
            "timestamp": e.timestamp,
            "record": record,
            "key": e.key,
            "value": e.value,
            "actor": e.actor,
            "reason": e.reason,
            "hash": e.hash.hex(),
            "prev": e.prev.hex(),
            "erased": e.erased,
            "replaces": e.replaces,
            "expires_at": e.expires_at,
            "op_id": e.op_id,
        }
    )


def events(
    log: EventLog,
    after: Any = 0,
    until: Any = None,
    namespace: Any = None,
    limit: Any = None,
) -> Iterator[Event]:
    after = check_seq(after, "after")
    until = None if until is None else check_seq(until, "until")
    ns = None if namespace is None else as_namespace(namespace)
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ContractError(f"limit must be None or an integer >= 1, got {limit!r}")
    return (public_event(e) for e in feed.read_events(log.store, after, until, ns, limit, _BATCH))


def history(log: EventLog, record_id: Any, namespace: Any) -> list[Event]:
    if not isinstance(record_id, str) or not record_id:
        raise ContractError(f"id must be a non-empty string, got {record_id!r}")
    ns = as_namespace(namespace)
    return [public_event(e) for e in feed.history(log.store, ns, record_id)]


def diff(log: EventLog, a: Any, b: Any, namespace: Any) -> Diff:
    head = log.head().seq
    a = check_seq(a, "a", head)
    b = check_seq(b, "b", head)
    ns = as_namespace(namespace)
    added, removed, changed = feed.diff(log.store, ns, a, b)
    return Diff.constructor()(
        {"a": a, "b": b, "namespace": ns, "added": added, "removed": removed, "changed": changed}
    )


def diff_all(log: EventLog, a: Any, b: Any, prefix: Any) -> list[Diff]:
    head = log.head().seq
    a = check_seq(a, "a", head)
    b = check_seq(b, "b", head)
    make = Diff.constructor()
    return [
        make({"a": a, "b": b, "namespace": ns, "added": added, "removed": removed, "changed": changed})
        for ns, added, removed, changed in feed.diff_prefix(log.store, as_namespace(prefix), a, b)
    ]


# -- the live tail ---------------------------------------------------------------------------------


def _start(log: EventLog, after: Any) -> int:
    return log.head().seq if after is None else check_seq(after, "after")


def follow(
    log: EventLog, after: Any, timeout: Any, namespace: Any = None
) -> Iterator[Event]:
    pos = _start(log, after)
    wait = check_timeout(timeout)
    ns = None if namespace is None else as_namespace(namespace)
    return _follow(log, pos, wait, ns)


def _follow(
    log: EventLog, pos: int, timeout: float | None, ns: Namespace | None
) -> Iterator[Event]:
    store = log.store
    last_new = time.monotonic()
    while True:
        batch, pos = feed.read_batch(store, pos, None, ns, _BATCH)
        if batch:
            for e in batch:
                yield public_event(e)
            last_new = time.monotonic()
            continue
        deadline = None if timeout is None else last_new + timeout
        if feed.wait_for_head(store, pos, deadline) <= pos:
            return


def afollow(
    log: EventLog, after: Any, timeout: Any, namespace: Any = None
) -> AsyncIterator[Event]:
    pos = _start(log, after)
    wait = check_timeout(timeout)
    ns = None if namespace is None else as_namespace(namespace)
    return _afollow(log, pos, wait, ns)


async def _afollow(
    log: EventLog, pos: int, timeout: float | None, ns: Namespace | None
) -> AsyncIterator[Event]:
    import asyncio  # the running loop has imported it; not imported with this module

    store = log.store
    last_new = time.monotonic()
    while True:
        batch, pos = await to_thread(feed.read_batch, store, pos, None, ns, _BATCH)
        if batch:
            for e in batch:
                yield public_event(e)
            last_new = time.monotonic()
            continue
        deadline = None if timeout is None else last_new + timeout
        delay = 0.001
        while True:
            if store.replicating:  # cluster mode: fold the stream first (wait_for_head does too)
                await to_thread(store.catch_up)
            head = await to_thread(feed.head_seq, store)
            if head > pos:
                break
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return
            await asyncio.sleep(delay if deadline is None else min(delay, deadline - now))
            delay = min(delay * 2, 0.05)


# -- durable named subscriptions -------------------------------------------------------------------


class Subscription:
    """A named, durable position in a store's log: the sequence number of the last event its
    consumer acknowledged, kept in the store itself (outside the log, so acknowledging appends no
    event).

    Use: iterate :meth:`follow` (or :meth:`pending`, or :meth:`afollow`), process each event, then
    :meth:`ack` its ``seq``. After a crash or restart, the same name resumes right after the last
    acknowledged event: nothing acknowledged is delivered again and nothing after it is skipped.
    Events delivered but not yet acknowledged are delivered again, so acknowledge after the effect
    is durable (or make the effect idempotent). One consumer per name; positions only move forward
    except through :meth:`seek`. Thread-safe like its store.
    """

    __slots__ = ("_log", "name")

    def __init__(self, log: EventLog, name: str) -> None:
        self._log = log
        self.name = name

    def __repr__(self) -> str:
        return f"Subscription({self.name!r}, position={self.position})"

    @property
    def position(self) -> int:
        """The last acknowledged sequence number (0: nothing yet), read from the store."""
        found = feed.subscription(self._log.store, self.name)
        if found is None:
            raise ContractError(f"subscription {self.name!r} was deleted")
        return found

    def pending(self, *, limit: int | None = None) -> Iterator[Event]:
        """The events after :attr:`position` up to the head, without waiting."""
        return events(self._log, self.position, None, None, limit)

    def follow(self, *, timeout: float | None = None) -> Iterator[Event]:
        """A live tail from :attr:`position`, as :meth:`LogBackend.follow <coniti.impl.log.LogBackend.follow>`.
        Does not acknowledge."""
        return follow(self._log, self.position, timeout)

    def afollow(self, *, timeout: float | None = None) -> AsyncIterator[Event]:
        """The async :meth:`follow`."""
        return afollow(self._log, self.position, timeout)

    def ack(self, seq: int) -> None:
        """Record durably that every event up to and including ``seq`` was processed. ``seq`` must not
        be behind :attr:`position` nor beyond the head (:class:`ContractError`)."""
        seq = check_seq(seq, "seq")
        feed.set_subscription(self._log.store, self.name, seq, forward_only=True)

    async def aack(self, seq: int) -> None:
        """The async :meth:`ack` (on a worker thread)."""
        await to_thread(self.ack, seq)

    def seek(self, seq: int) -> None:
        """Move the position to ``seq`` (``0..head``), backwards too: replays from there."""
        seq = check_seq(seq, "seq")
        feed.set_subscription(self._log.store, self.name, seq, forward_only=False)

    def delete(self) -> None:
        """Remove the subscription from the store."""
        feed.drop_subscription(self._log.store, self.name)


def subscription(log: EventLog, name: Any, start: Any) -> Subscription:
    start = check_seq(start, "start")
    if feed.subscription(log.store, name) is None:
        feed.create_subscription(log.store, name, start)
    return Subscription(log, name)


def subscriptions(log: EventLog) -> dict[str, int]:
    return feed.subscriptions(log.store)


# -- the audit trail as methods of a store ---------------------------------------------------------


class AuditTrail:
    """The audit trail, history, diff, change feed and subscriptions of a store's log as methods:
    the part of :class:`~coniti.impl.log.LogBackend` that reads its history. Each method is the
    function of this module of the same name applied to the store's log (which checks the
    arguments first)."""

    _log: EventLog

    def events(
        self,
        after: int = 0,
        *,
        until: int | None = None,
        namespace: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> Iterator[Event]:
        """The audit trail: events with ``after < seq <= until`` (``until`` None: to the head), of
        ``namespace`` only when given (``()`` is the root namespace), at most ``limit``, in sequence
        order. Lazy; reads in batches, holding no transaction between them."""
        return events(self._log, after, until, namespace, limit)

    def written(self, namespace: Sequence[str]) -> bool:
        """Whether any event but a clear names ``namespace`` (a clear of a namespace never written
        to ends nothing); False: folding the events of ``namespace`` up to the head read before this
        call changes no index. As of now, on a view too."""
        return self._log.written(as_namespace(namespace))

    def history(self, id: str, namespace: Sequence[str] = ()) -> list[Event]:
        """Every event that touched record ``id`` of ``namespace``, oldest first: each put of it and
        the delete, clear or erase that ended each version. Empty if it never existed."""
        return history(self._log, id, namespace)

    def diff(self, a: int, b: int, *, namespace: Sequence[str] = ()) -> Diff:
        """Record ids added, removed and changed in ``namespace`` between the memory right after event
        ``a`` and right after event ``b`` (each ``0..head``)."""
        return diff(self._log, a, b, namespace)

    def diff_all(self, a: int, b: int, *, prefix: Sequence[str] = ()) -> list[Diff]:
        """:meth:`diff` of every namespace under ``prefix`` (``()``: the whole store), from one
        walk of the events between the two points: one :class:`Diff` per namespace with a change,
        sorted by namespace (none when nothing changed)."""
        return diff_all(self._log, a, b, prefix)

    def follow(
        self,
        after: int | None = None,
        *,
        timeout: float | None = None,
        namespace: Sequence[str] | None = None,
    ) -> Iterator[Event]:
        """A live tail: the events after ``after`` (None: the current head) as they commit, from any
        handle or process; stops once ``timeout`` seconds pass without a new event (None: never)."""
        return follow(self._log, after, timeout, namespace)

    def afollow(
        self,
        after: int | None = None,
        *,
        timeout: float | None = None,
        namespace: Sequence[str] | None = None,
    ) -> AsyncIterator[Event]:
        """The async :meth:`follow`: reads on worker threads, waits with ``asyncio.sleep``."""
        return afollow(self._log, after, timeout, namespace)

    def subscription(self, name: str, *, start: int = 0) -> Subscription:
        """The durable subscription ``name`` (created at position ``start`` if new; an existing one
        keeps its position). See :class:`Subscription`."""
        return subscription(self._log, name, start)

    def subscriptions(self) -> dict[str, int]:
        """Every subscription of the store and its position."""
        return subscriptions(self._log)
