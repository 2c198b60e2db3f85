"""The one append routine of the event log: every event a write appends goes through :class:`Appends`.

For each event, in order: the next sequence number after the head (gap-free), the envelope and
frame encoded (:mod:`coniti.log.codec`) and chained to the event before it, the frame appended to
the log, the event folded into the projections (:class:`~coniti.log.projections.Projections`);
once, at the end, the new head recorded. All of a transaction's events share one recorded time,
never before the head's (``log/FORMAT.md`` §3). Each kind has one method, which also folds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, cast

import numpy as np

from coniti.log.codec import (
    CLEAR,
    DELETE,
    ERASE,
    FEEDBACK,
    META,
    OP,
    PUT,
    LogEvent,
    encode_deletes,
    encode_event,
    encode_op_payload,
    encode_put_payload,
    encode_puts,
    payload_digests,
)
from coniti.log.keys import Namespace, name_key, name_keys, ns_bytes, ts_key, ts_keys
from coniti.log.projections import Head, Projections, Version, payload_crcs

__all__ = ["Appends", "PutCall", "PutItem", "Puts", "prepare"]


class PutItem(NamedTuple):
    """One record to put, as plain values (already validated by the caller): ``vector`` None for a
    record without one, ``blob`` its binary payload (None: none)."""

    namespace: Namespace
    id: str
    text: str
    timestamp: float
    metadata: dict[str, Any]
    embedding_id: str | None
    vector: np.ndarray | None
    expires_at: float | None = None
    blob: bytes | None = None
    kind: str | None = None
    facts: tuple[float | None, float | None, tuple[str, ...]] | None = None


class Puts(NamedTuple):
    """The records of one put call ready to append, as columns: row ``i`` is record ``i`` with its
    namespace, id, id key, note timestamp (a float) and its key, payload, payload digest and
    payload CRC ``P``; ``expiries`` its expiry or None (the column None: no record expires).
    ``canon`` holds the canonical bytes of each namespace, in order of first use."""

    canon: dict[Namespace, bytes]
    namespaces: Sequence[Namespace]
    ids: Sequence[str]
    idks: list[bytes]
    stamps: list[float]
    tsks: list[bytes]
    payloads: list[bytes]
    digests: list[bytes]
    crcs: list[bytes]
    expiries: list[float | None] | None


PutCall = tuple[Puts, dict[Namespace, bytes | None], str | None, str | None]
"""One accepted put call for :meth:`Appends.puts`: its records, the namespace id of each of their
namespaces (interned), its actor and its reason."""


def prepare(items: Sequence[PutItem]) -> Puts:
    """The put of ``items``, encoded."""
    canon: dict[Namespace, bytes] = {}
    namespaces: list[Namespace] = []
    ids: list[str] = []
    stamps: list[float] = []
    payloads: list[bytes] = []
    expiries: list[float | None] = []
    for item in items:
        ns = item.namespace
        if ns not in canon:
            canon[ns] = ns_bytes(ns)
        namespaces.append(ns)
        ids.append(item.id)
        stamps.append(float(item.timestamp))
        payloads.append(encode_put_payload(
            item.text, item.metadata, item.embedding_id, item.vector, item.blob, item.kind, item.facts
        ))
        expiries.append(item.expires_at)
    return Puts(
        canon, namespaces, ids, name_keys(ids), stamps,
        ts_keys(np.array(stamps, dtype=np.float64)) if len(stamps) > 8 else [ts_key(ts) for ts in stamps], payloads,
        payload_digests(payloads), payload_crcs(payloads),
        None if expiries.count(None) == len(expiries) else expiries,
    )


class Appends:
    """The events one write transaction appends after the head of ``p``, all recorded at :attr:`at`
    and stamped with ``actor`` and ``reason`` (a call of :meth:`puts` carries its own). Each
    method appends one event (a run, for :meth:`puts`) and folds it, and returns what the fold
    says where a caller needs it; :meth:`commit` records the new head and gives the sequence numbers
    appended. Nothing is recorded as the head until :meth:`commit`; a transaction that raises
    leaves no trace. The namespace ids given (``nsid``) must be ``p``'s for ``namespace``."""

    __slots__ = ("_first", "actor", "at", "hash", "p", "reason", "seq")

    def __init__(self, p: Projections, actor: str | None, reason: str | None) -> None:
        head = p.head()
        self.p = p
        self.actor = actor
        self.reason = reason
        self.at = head.next_at()
        """The recorded time of every event appended here."""
        self.seq = head.seq
        """The sequence number of the last event appended (the head's before any)."""
        self.hash = head.hash
        """The hash of the last event appended (the head's before any)."""
        self._first = head.seq + 1

    def _event(
        self,
        kind: str,
        namespace: Namespace,
        payload: bytes = b"",
        *,
        id: str | None = None,
        key: str | None = None,
        timestamp: float | None = None,
        replaces: int | None = None,
        expires_at: float | None = None,
        op_id: str | None = None,
    ) -> int:
        """Number, encode, chain and append one event (the caller folds it); returns its seq."""
        seq = self.seq + 1
        prev = self.hash
        frame, self.hash = encode_event(
            seq, self.at, kind, namespace, prev, payload, id=id, timestamp=timestamp, key=key,
            actor=self.actor, reason=self.reason, replaces=replaces, expires_at=expires_at, op_id=op_id,
        )
        p = self.p
        p.append(seq, frame)
        p.tree().append(seq, self.hash, prev)
        self.seq = seq
        return seq

    def put(self, namespace: Namespace, nsid: bytes, item: PutItem, replaces: int | None) -> int:
        """A put of ``item``: of a record that is not live, or (``replaces``) replacing the live
        version put at that seq."""
        ts = float(item.timestamp)
        payload = encode_put_payload(
            item.text, item.metadata, item.embedding_id, item.vector, item.blob, item.kind, item.facts
        )
        seq = self._event(
            PUT, namespace, payload, id=item.id, timestamp=ts, replaces=replaces, expires_at=item.expires_at
        )
        self.p.put_version(
            seq, nsid, name_key(item.id), ts_key(ts), replaces=replaces, expires_at=item.expires_at
        )
        return seq

    def puts(self, calls: list[PutCall]) -> None:
        """The put events of ``calls`` (checked: no record of them is live), in order, each call's
        events stamped with its actor and reason: encoded as runs (:func:`encode_puts`) and folded
        together (:meth:`Projections.put_many`)."""
        first = seq = self.seq + 1
        h = self.hash
        frames: list[bytes] = []
        row_nsids: list[bytes] = []
        idks: list[bytes] = []
        tsks: list[bytes] = []
        crcs: list[bytes] = []
        hashes: list[bytes] = []
        expiring: list[tuple[bytes, int, float, bytes, bytes]] = []
        for puts, nsids, actor, reason in calls:
            more, h = encode_puts(
                seq, self.at, h, puts.namespaces, puts.ids, puts.stamps, puts.payloads, puts.digests,
                actor=actor, reason=reason, expiries=puts.expiries, hashes=hashes,
            )
            if len(puts.canon) == 1:
                row_nsids += [cast(bytes, nsids[puts.namespaces[0]])] * len(more)
            else:
                row_nsids += [cast(bytes, nsids[ns]) for ns in puts.namespaces]
            if puts.expiries is not None:
                expiring += [
                    (row_nsids[len(frames) + i], seq + i, x, puts.idks[i], puts.tsks[i])
                    for i, x in enumerate(puts.expiries)
                    if x is not None
                ]
            frames += more
            idks += puts.idks
            tsks += puts.tsks
            crcs += puts.crcs
            seq += len(more)
        p = self.p
        p.put_many(first, frames, row_nsids, idks, tsks, crcs)
        p.tree().extend(first, hashes, self.hash)
        for nsid, put_seq, expires_at, idk, tsk in expiring:
            p.exv_put(nsid, put_seq, expires_at, idk, tsk)
        self.seq, self.hash = seq - 1, h

    def delete(self, namespace: Namespace, nsid: bytes, record_id: str, idk: bytes) -> bool:
        """A delete of record ``record_id`` (id key ``idk``); whether it ended a live version."""
        return self.p.delete(self._event(DELETE, namespace, id=record_id), nsid, idk)

    def deletes(self, namespace: Namespace, nsid: bytes, live: Sequence[tuple[str, bytes, Version]]) -> None:
        """The delete events of live records ``(record id, id key, version)``, each version as
        :meth:`~coniti.log.projections.IndexView.newest_each` found it in this transaction (not looked
        up again; no repeats), in order: the same events and projections as :meth:`delete` for
        each, the events encoded as one run (:func:`~coniti.log.codec.encode_deletes`), folded
        together (:meth:`~coniti.log.projections.Projections.end_many`) and their Merkle leaves
        added in one run."""
        if not live:
            return
        first, prev = self.seq + 1, self.hash
        hashes: list[bytes] = []
        frames, self.hash = encode_deletes(
            first, self.at, prev, namespace, [record_id for record_id, _, _ in live],
            actor=self.actor, reason=self.reason, hashes=hashes,
        )  # fmt: skip
        p = self.p
        p.append_many(first, frames)
        p.end_many(first, nsid, [(idk, version) for _, idk, version in live])
        self.seq = first + len(frames) - 1
        p.tree().extend(first, hashes, prev)

    def meta(self, namespace: Namespace, nsid: bytes, key: str, payload: bytes) -> int:
        """A meta event setting ``key`` (``payload``: :func:`~coniti.log.codec.encode_meta_payload`)."""
        seq = self._event(META, namespace, payload, key=key)
        self.p.meta(seq, nsid, name_key(key))
        return seq

    def feedback(self, namespace: Namespace, nsid: bytes, record_id: str, idk: bytes, payload: bytes) -> int:
        """A feedback event giving record ``record_id`` a weight (``payload``:
        :func:`~coniti.log.codec.encode_feedback_payload`)."""
        seq = self._event(FEEDBACK, namespace, payload, id=record_id)
        self.p.feedback(seq, nsid, idk)
        return seq

    def clear(self, namespace: Namespace, nsid: bytes | None) -> int:
        """A clear of ``namespace`` (``nsid`` None: one the store has not seen); how many live
        records it ended."""
        seq = self._event(CLEAR, namespace)
        return 0 if nsid is None else self.p.clear(seq, nsid)

    def op(self, namespace: Namespace, nsid: bytes, op_id: str, digest: str, receipt: dict[str, Any]) -> int:
        """The op event recording ``op_id``'s request digest and result map ``receipt``."""
        seq = self._event(OP, namespace, encode_op_payload(digest, receipt), op_id=op_id)
        self.p.op(seq, nsid, op_id)
        return seq

    def erase_record(self, namespace: Namespace, nsid: bytes, record_id: str, idk: bytes) -> int:
        """The erase event (receipt) of record ``record_id``, whose versions the caller has erased;
        it ends the record if it is live."""
        seq = self._event(ERASE, namespace, id=record_id)
        self.p.delete(seq, nsid, idk)
        self.p.erasure(seq, nsid, idk)
        return seq

    def erase_key(self, namespace: Namespace, nsid: bytes, key: str, mk: bytes) -> int:
        """The erase event (receipt) of metadata key ``key`` (name key ``mk``), whose values the
        caller has erased."""
        seq = self._event(ERASE, namespace, key=key)
        self.p.meta(seq, nsid, mk)
        return seq

    def stored(self, frame: bytes, event: LogEvent, prev_at: float | None) -> None:
        """A stored frame appended as it is (an import): ``event`` is its decoding, which the caller
        has checked to follow the last event on the hash chain; it is folded
        (:meth:`Projections.fold`) and its recorded time becomes :attr:`at`."""
        self.p.append(event.seq, frame)
        self.p.fold(event, prev_at)
        self.seq, self.hash, self.at = event.seq, event.hash, event.at

    def commit(self) -> range:
        """Record the last event appended as the head (nothing when none was); the sequence numbers
        appended, in order."""
        if self.seq >= self._first:
            self.p.set_head(Head(self.seq, self.at, self.hash))
        return range(self._first, self.seq + 1)
