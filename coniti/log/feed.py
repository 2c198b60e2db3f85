"""Reading the log as a feed: event ranges, a record's history, diffs between two points, waiting for
new events, and durable subscription positions. Plain values only (events of :mod:`coniti.log.codec`).

Contracts:

* Ranges are half-open on the left: ``after < seq <= until``. Events are read ``batch`` per read
  transaction, so no transaction is held while a caller consumes them, and every batch sees the
  commits of every process up to its start.
* :func:`history` and :func:`diff` read one snapshot and cost index walks plus one frame decode per
  event returned (``diff`` and ``diff_prefix``: one envelope decode per event between the two
  points).
* **Checked.** Every event returned by :func:`read_batch` (so :func:`read_events` and the follow
  loop) and :func:`history` has its payload checked against its digest and its hash against the
  chain (the ``prev`` of the event after it, or the head record): an event altered in place, content
  or envelope (actor, recorded time, ids), raises :class:`StoreCorrupted` instead of being returned.
  :func:`history` also checks that each event its indexes name is a put, end or erase of the record.
* Subscription positions live in the ``sys`` sub-database (``sub:<name>`` -> u64 big-endian), outside
  the log: moving one appends no event, and neither ``rebuild`` nor ``verify`` touches them.
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from coniti.errors import ContractError, StoreCorrupted, namespace_text
from coniti.log.chain import Chain
from coniti.log.codec import (
    CLEAR,
    DELETE,
    ERASE,
    FEEDBACK,
    GENESIS,
    PUT,
    LogEvent,
    decode_envelope,
    decode_event,
    decode_record,
)
from coniti.log.keys import SEQ_LEN, Namespace, name_key, ns_bytes, seq_from_key, seq_key
from coniti.log.projections import Dbs, Head, IndexView
from coniti.log.reads import RecordReads
from coniti.log.store import LOG_DB, SYS_DB, SYS_HEAD, Store

__all__ = [
    "MAX_SUBSCRIPTION_NAME",
    "create_subscription",
    "diff",
    "diff_prefix",
    "drop_subscription",
    "head_seq",
    "history",
    "read_batch",
    "read_events",
    "read_frames",
    "set_subscription",
    "subscription",
    "subscriptions",
    "wait_for_head",
]

SUB_PREFIX = b"sub:"
MAX_SUBSCRIPTION_NAME = 200
"""Longest subscription name, in UTF-8 bytes."""
_U64 = struct.Struct(">Q")
_POLL_MIN = 0.001
_POLL_MAX = 0.05


# -- ranges --------------------------------------------------------------------------------------


def head_seq(store: Store) -> int:
    """The sequence number of the last committed event (0 when empty), as of now."""
    with store.read() as txn:
        return Head.decode(txn.get(SYS_HEAD, db=store.dbs[SYS_DB])).seq


def read_batch(
    store: Store,
    after: int,
    until: int | None,
    namespace: Namespace | None,
    batch: int,
) -> tuple[list[LogEvent], int]:
    """Up to ``batch`` events with ``after < seq <= until`` (of ``namespace`` when given), in order,
    from one snapshot; plus the last sequence number examined (``after`` if none), from which the
    next batch continues."""
    out: list[LogEvent] = []
    with store.read() as txn:
        log_db = store.dbs[LOG_DB]
        cur = txn.cursor(db=log_db)
        if not cur.set_range(seq_key(after + 1)):
            return out, after
        chain = Chain(after, _hash_of(txn, log_db, after))
        for key, frame in cur:
            seq = seq_from_key(key)
            if until is not None and seq > until:
                break
            chain.number(seq)
            event = decode_envelope(frame, seq)
            chain.link(event)
            if namespace is not None and event.namespace != namespace:
                continue
            out.append(decode_event(frame, seq))
            if len(out) == batch:
                break
        if chain.seq > after:
            _confirm(txn, store, chain.seq, chain.hash)
    return out, chain.seq


def _hash_of(txn: Any, log_db: Any, seq: int) -> bytes:
    """The hash of event ``seq`` (:data:`GENESIS` for 0), from its envelope."""
    if seq == 0:
        return GENESIS
    frame = txn.get(seq_key(seq), db=log_db)
    if frame is None:
        raise StoreCorrupted(f"event {seq} is missing from the log")
    return decode_envelope(frame, seq).hash


def _confirm(txn: Any, store: Store, seq: int, hash: bytes | None) -> None:
    """Check that ``hash`` is what the log goes on from after event ``seq``: the ``prev`` of event
    ``seq + 1``, or the head record's hash when ``seq`` is the last. With the chain walked up to it,
    this proves the events returned are the ones the chain was written with (an envelope altered in
    place changes its hash)."""
    nxt = txn.get(seq_key(seq + 1), db=store.dbs[LOG_DB])
    if nxt is not None:
        if decode_envelope(nxt, seq + 1).prev != hash:
            raise StoreCorrupted(
                f"event {seq} is damaged: its hash is not the prev of event {seq + 1} (the hash "
                "chain is broken)"
            )
        return
    head = Head.decode(txn.get(SYS_HEAD, db=store.dbs[SYS_DB]))
    if head.seq != seq or head.hash != hash:
        raise StoreCorrupted(
            f"event {seq} is damaged: the log ends there but the head record names event "
            f"{head.seq} with another hash"
        )


def read_frames(store: Store, after: int, until: int, batch: int) -> list[tuple[int, bytes]]:
    """Up to ``batch`` stored frames ``(seq, bytes)`` with ``after < seq <= until``, from one
    snapshot, checked gap-free (:class:`~coniti.log.chain.FoldError` otherwise)."""
    out: list[tuple[int, bytes]] = []
    chain = Chain(after, None)
    with store.read() as txn:
        cur = txn.cursor(db=store.dbs[LOG_DB])
        if not cur.set_range(seq_key(after + 1)):
            return out
        for key, frame in cur:
            seq = seq_from_key(key)
            if seq > until:
                break
            chain.number(seq)
            out.append((seq, bytes(frame)))
            if len(out) == batch:
                break
    return out


def read_events(
    store: Store,
    after: int = 0,
    until: int | None = None,
    namespace: Namespace | None = None,
    limit: int | None = None,
    batch: int = 256,
) -> Iterator[LogEvent]:
    """Events with ``after < seq <= until`` (``until`` None: up to the head as each batch begins),
    of ``namespace`` when given, at most ``limit``, in sequence order."""
    left = math.inf if limit is None else limit
    pos = after
    while left > 0:
        size = int(min(batch, left))
        events, pos = read_batch(store, pos, until, namespace, size)
        yield from events
        left -= len(events)
        if len(events) < size:
            return


# -- one record, two points ----------------------------------------------------------------------


def history(store: Store, namespace: Namespace, record_id: str) -> list[LogEvent]:
    """Every event that touched record ``record_id`` of ``namespace``, oldest first: each put of it,
    the delete, clear or erase that ended each version, every erase of it (its receipts), and every
    feedback given to it (FORMAT §14). Empty if the record never existed."""
    idk = name_key(record_id)
    with store.read() as txn:
        p = IndexView(txn, Dbs(store.dbs, layout=store.layout))
        nsid = p.nsid(ns_bytes(namespace))
        if nsid is None:
            return []
        events: dict[int, LogEvent] = {}

        def event_at(seq: int, kinds: tuple[str, ...]) -> LogEvent | None:
            """Event ``seq`` checked (payload, chain), which the indexes say is a ``kinds`` event of
            the record; None if it is another id's sharing a hashed key."""
            event = decode_event(p.frame(seq), seq)
            _confirm(txn, store, seq, event.hash)
            ok = event.kind in kinds and event.namespace == namespace
            if ok and event.kind != CLEAR:
                ok = event.id is not None and name_key(event.id) == idk
            if not ok:
                raise StoreCorrupted(
                    f"record {record_id!r} of namespace {namespace_text(namespace)} is damaged: its index names "
                    f"event {seq}, a {event.kind} event that is not one of it"
                )
            return None if event.kind != CLEAR and event.id != record_id else event

        for put_seq, end_seq in p.versions(nsid, idk):
            put = event_at(put_seq, (PUT,))
            if put is None:
                continue  # another id sharing a hashed key
            events[put_seq] = put
            if end_seq:
                ended = event_at(end_seq, (DELETE, ERASE, CLEAR, PUT))
                if ended is not None and ended.kind == PUT and ended.replaces != put_seq:
                    raise StoreCorrupted(
                        f"record {record_id!r} of namespace {namespace_text(namespace)} is damaged: its index says "
                        f"event {end_seq} ended version {put_seq}, which that put does not replace"
                    )
                if ended is not None:
                    events[end_seq] = ended
        for seq in p.erasures(nsid, idk):
            erased = event_at(seq, (ERASE,))
            if erased is not None:
                events[seq] = erased
        for seq in p.feedback_seqs(nsid, idk):
            given = event_at(seq, (FEEDBACK,))
            if given is not None:
                events[seq] = given
        return [events[seq] for seq in sorted(events)]


def _visible(p: IndexView, nsid: bytes, record_id: str, as_of: int) -> tuple[int, bytes] | None:
    """The version of ``record_id`` a read right after ``as_of`` sees (erased ones are not seen)."""
    found = p.visible(nsid, name_key(record_id), as_of, checked=True)
    if found is None:
        return None
    frame = p.frame(found[0])
    env = decode_envelope(frame, found[0])
    return (found[0], frame) if env.id == record_id and not env.erased else None


def _strict_equal(x: Any, y: Any) -> bool:
    """JSON values equal with their types (``1``, ``1.0`` and ``True`` differ; so do 0.0 and -0.0)."""
    if type(x) is not type(y):
        return False
    if isinstance(x, float):
        return bool(x.hex() == y.hex())
    if isinstance(x, list):
        return len(x) == len(y) and all(_strict_equal(a, b) for a, b in zip(x, y, strict=True))
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(_strict_equal(v, y[k]) for k, v in x.items())
    return bool(x == y)


def _same_content(frame_a: bytes, frame_b: bytes) -> bool:
    _, ts_a, a = decode_record(frame_a)
    _, ts_b, b = decode_record(frame_b)
    if a is None or b is None:
        return False
    return (
        ts_a.hex() == ts_b.hex()
        and a.text == b.text
        and a.embedding_id == b.embedding_id
        and _same_vector(a.vector, b.vector)
        and a.blob == b.blob
        and a.kind == b.kind
        and a.facts == b.facts
        and _strict_equal(a.metadata, b.metadata)
    )


def _same_vector(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Both None, or the same dtype and bytes."""
    if a is None or b is None:
        return a is b
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


def diff(store: Store, namespace: Namespace, a: int, b: int) -> tuple[list[str], list[str], list[str]]:
    """``(added, removed, changed)`` record ids of ``namespace`` between the state right after event
    ``a`` and right after event ``b`` (either order), each sorted. Only ids touched by an event
    between the two points are examined (all ids visible at the earlier point if a clear lies
    between)."""
    for _, added, removed, changed in _diffs(store, namespace, a, b, exact=True):
        return added, removed, changed
    return [], [], []


def diff_prefix(
    store: Store, prefix: Namespace, a: int, b: int
) -> list[tuple[Namespace, list[str], list[str], list[str]]]:
    """:func:`diff` of every namespace that starts with ``prefix`` (``()``: all), from one walk of
    the events between the two points: ``(namespace, added, removed, changed)`` for each namespace
    with a change, sorted by namespace."""
    return _diffs(store, prefix, a, b, exact=False)


def _diffs(
    store: Store, scope: Namespace, a: int, b: int, *, exact: bool
) -> list[tuple[Namespace, list[str], list[str], list[str]]]:
    """The diffs of :func:`diff` (``exact``: the namespace ``scope`` alone) and :func:`diff_prefix`
    (every namespace starting with ``scope``); namespaces without a change are left out."""
    lo, hi = min(a, b), max(a, b)
    n = len(scope)
    out: list[tuple[Namespace, list[str], list[str], list[str]]] = []
    with store.read() as txn:
        p = RecordReads(txn, Dbs(store.dbs, layout=store.layout))
        if lo == hi or (exact and p.nsid(ns_bytes(scope)) is None):
            return out
        touched: dict[Namespace, dict[str, None]] = {}
        cleared: set[Namespace] = set()
        cur = txn.cursor(db=store.dbs[LOG_DB])
        if cur.set_range(seq_key(lo + 1)):
            for key, frame in cur:
                seq = seq_from_key(key)
                if seq > hi:
                    break
                env = decode_envelope(frame, seq)
                ns = env.namespace
                if (ns != scope if exact else ns[:n] != scope) or (env.kind == ERASE and env.id is None):
                    continue  # another namespace, or a metadata key's erasure (§15): no record
                if env.kind in (PUT, DELETE, ERASE):
                    assert env.id is not None
                    touched.setdefault(ns, {})[env.id] = None
                elif env.kind == CLEAR:
                    touched.setdefault(ns, {})
                    cleared.add(ns)
        for ns in sorted(touched):
            nsid = p.nsid(ns_bytes(ns))
            if nsid is None:
                continue
            ids = touched[ns]
            if ns in cleared:
                entries, _ = p.scan_as_of(nsid, None, None, None, None, lo)
                for put_seq, _, _, _ in entries:
                    rid = decode_envelope(p.frame(put_seq), put_seq).id
                    assert rid is not None
                    ids[rid] = None
            added: list[str] = []
            removed: list[str] = []
            changed: list[str] = []
            for rid in ids:
                at_a = _visible(p, nsid, rid, a)
                at_b = _visible(p, nsid, rid, b)
                if at_a is None and at_b is not None:
                    added.append(rid)
                elif at_a is not None and at_b is None:
                    removed.append(rid)
                elif (
                    at_a is not None
                    and at_b is not None
                    and at_a[0] != at_b[0]
                    and not _same_content(at_a[1], at_b[1])
                ):
                    changed.append(rid)
            if added or removed or changed:
                out.append((ns, sorted(added), sorted(removed), sorted(changed)))
    return out


# -- waiting -------------------------------------------------------------------------------------


def wait_for_head(store: Store, after: int, deadline: float | None) -> int:
    """Wait until the head passes ``after`` (returns the head), ``deadline`` (a ``time.monotonic``
    value; returns the head, possibly ``<= after``). A commit of this process
    wakes the wait at once; other processes' commits are seen by polling, every 1 ms at first,
    backing off to 50 ms (each poll is one read transaction). A store in cluster mode
    (:attr:`Store.replicating <coniti.log.store.Store.replicating>`) first folds what its stream
    holds beyond it, at most every 50 ms (:meth:`Store.catch_up <coniti.log.store.Store.catch_up>`)."""
    delay = _POLL_MIN
    caught_up = 0.0
    while True:
        if store.replicating and time.monotonic() - caught_up >= _POLL_MAX:
            store.catch_up()
            caught_up = time.monotonic()
        head = head_seq(store)
        if head > after:
            return head
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return head
        pause = delay if deadline is None else min(delay, deadline - now)
        store.wait_for_commit(pause)
        delay = min(delay * 2, _POLL_MAX)


# -- subscription positions ----------------------------------------------------------------------


def _sub_key(name: str) -> bytes:
    if not isinstance(name, str) or not name:
        raise ContractError("subscription name must be a non-empty string")
    raw = name.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_SUBSCRIPTION_NAME:
        raise ContractError(
            f"subscription name is {len(raw)} bytes of UTF-8; at most {MAX_SUBSCRIPTION_NAME} allowed"
        )
    return SUB_PREFIX + raw


def subscription(store: Store, name: str) -> int | None:
    """The stored position of subscription ``name``, or None if it does not exist."""
    key = _sub_key(name)
    with store.read() as txn:
        raw = txn.get(key, db=store.dbs[SYS_DB])
    if raw is None:
        return None
    if len(raw) != SEQ_LEN:
        raise StoreCorrupted(f"subscription {name!r}: its stored position is malformed")
    return int(_U64.unpack(raw)[0])


def subscriptions(store: Store) -> dict[str, int]:
    """Every subscription and its position, by name."""
    out: dict[str, int] = {}
    with store.read() as txn:
        cur = txn.cursor(db=store.dbs[SYS_DB])
        if cur.set_range(SUB_PREFIX):
            for key, value in cur:
                if not bytes(key).startswith(SUB_PREFIX):
                    break
                out[bytes(key[len(SUB_PREFIX) :]).decode("utf-8", "surrogatepass")] = int(
                    _U64.unpack(value)[0]
                )
    return out


def _position(txn: Any, store: Store, position: int, name: str) -> None:
    head = Head.decode(txn.get(SYS_HEAD, db=store.dbs[SYS_DB])).seq
    if position > head:
        raise ContractError(f"position {position} of subscription {name!r} is beyond the head ({head})")


def create_subscription(store: Store, name: str, start: int) -> int:
    """Create subscription ``name`` at position ``start`` (``0..head``) unless it exists; returns its
    position (the existing one if it did). One durable write transaction."""
    key = _sub_key(name)

    def write(txn: Any) -> int:
        raw = txn.get(key, db=store.dbs[SYS_DB])
        if raw is not None:
            return int(_U64.unpack(raw)[0])
        _position(txn, store, start, name)
        txn.put(key, _U64.pack(start), db=store.dbs[SYS_DB])
        return start

    return store.write(write)


def set_subscription(store: Store, name: str, position: int, *, forward_only: bool) -> None:
    """Store ``position`` (``0..head``) for the existing subscription ``name`` in one durable write
    transaction. ``forward_only``: refuse to move it backwards. :class:`ContractError` otherwise."""
    key = _sub_key(name)

    def write(txn: Any) -> None:
        sys_db = store.dbs[SYS_DB]
        raw = txn.get(key, db=sys_db)
        if raw is None:
            raise ContractError(f"no subscription named {name!r}")
        _position(txn, store, position, name)
        current = int(_U64.unpack(raw)[0])
        if forward_only and position < current:
            raise ContractError(
                f"subscription {name!r} is at {current}; acknowledging {position} would move it back"
            )
        txn.put(key, _U64.pack(position), db=sys_db)

    store.write(write)


def drop_subscription(store: Store, name: str) -> bool:
    """Remove subscription ``name``; True if it existed."""
    key = _sub_key(name)
    return bool(store.write(lambda txn: txn.delete(key, db=store.dbs[SYS_DB])))
