"""The event log's operations on plain values: what :class:`coniti.impl.log.LogBackend` is built on.

Every write call appends its events (gap-free sequence numbers, hash chain, one recorded time ``at``
per call that never goes backwards) and folds them into the projections in one LMDB write
transaction (or a nested one inside a group commit, :mod:`coniti.log.group`); it commits entirely or
not at all. Every event goes through one append routine (:class:`~coniti.log.append.Appends`). Ids
that are not live append no delete event. Reads are index walks over one snapshot; ``as_of=S``
reads the state right after event ``S``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple, TypeVar, cast

import numpy as np

from coniti.errors import DuplicateRecord, StoreCorrupted, StoreError, namespace_text
from coniti.log.append import Appends, PutCall, PutItem, Puts, prepare
from coniti.log.chain import Chain
from coniti.log.codec import (
    DELETE,
    ERASE,
    META,
    OP,
    PUT,
    LogEvent,
    decode_envelope,
    decode_op,
    decode_record,
    encode_feedback_payload,
    encode_meta_payload,
    encode_put_payloads,
    erase_payload,
    is_erased,
    payload_digests,
    read_meta,
)
from coniti.log.feed import read_events
from coniti.log.group import GroupCommit
from coniti.log.keys import Namespace, is_hashed, name_key, name_keys, ns_bytes, ts_key, ts_keys
from coniti.log.layout import LIVE
from coniti.log.projections import Dbs, Head, IndexView, Projections, Row, Version, payload_crcs
from coniti.log.reads import RecordReads
from coniti.log.store import DEFAULT_MAP_SIZE, Store
from coniti.log.tree import TreeReads

__all__ = ["Change", "EventLog", "PutItem", "Row", "WriteView", "erase_for_receipt"]


T = TypeVar("T")


class Change(NamedTuple):
    """One event a :meth:`EventLog.transact` decision appends: a put (``item``; ``replaces`` the
    put seq of the live version it replaces), a delete (``id``), or the op receipt (``op_id``,
    ``receipt``: the map :func:`~coniti.log.codec.encode_op_payload` stores)."""

    kind: str
    id: str | None = None
    item: PutItem | None = None
    replaces: int | None = None
    op_id: str | None = None
    digest: str | None = None
    receipt: dict[str, Any] | None = None


class WriteView:
    """What a :meth:`EventLog.transact` decision reads: one namespace inside the write transaction.
    ``now`` is the write's recorded time (expiry is judged by it); ``next_seq`` the sequence number
    its first event will get (events follow in the order of the changes)."""

    def __init__(
        self, p: Projections, namespace: Namespace, nsid: bytes | None, now: float, next_seq: int
    ) -> None:
        self._p = p
        self._namespace = namespace
        self._nsid = nsid
        self.now = now
        self.next_seq = next_seq

    def live(self, record_id: str) -> Row | None:
        """The visible (live, not expired) version of ``record_id``, or None."""
        if self._nsid is None:
            return None
        rows, _ = RecordReads(self._p.txn, self._p.d).get_rows(self._namespace, self._nsid, [record_id], None, now=self.now)
        return rows[0] if rows else None

    def held(self, record_id: str) -> int | None:
        """The put seq of the live version of ``record_id``, expired or not, or None."""
        if self._nsid is None:
            return None
        idk = name_key(record_id)
        seq = self._p.live_seq(self._nsid, idk)
        if seq is not None and is_hashed(idk) and decode_record(self._p.frame(seq))[0] != record_id:
            return None
        return seq

    def op(self, op_id: str) -> tuple[str, dict[str, Any], int] | None:
        """``(request digest, result map, seq of the op event)`` recorded for ``op_id``, or None."""
        if self._nsid is None:
            return None
        seq = self._p.op_seq(self._nsid, op_id)
        if seq is None:
            return None
        receipt = decode_op(self._p.frame(seq))[1]
        return receipt["d"], receipt["res"], seq


_Taken = dict[Namespace, set[bytes]]
"""The id keys per namespace that put calls accepted earlier in one transaction wrote."""
_PutCall = tuple[Puts, str | None, str | None]
"""One put call as group commit merges it: (records, actor, reason)."""


def _append_meta(
    appends: Appends, nsids: dict[Namespace, bytes | None], meta_event: tuple[Namespace, str, bytes]
) -> None:
    """Append the meta event ``(namespace, key, payload)``, interning its namespace into ``nsids``
    if needed."""
    meta_ns, key, payload = meta_event
    nsids[meta_ns] = nsid = nsids.get(meta_ns) or appends.p.intern(ns_bytes(meta_ns))
    appends.meta(meta_ns, nsid, key, payload)


_Versions = list[tuple[int, int, bytes]]
"""The versions of one record to erase: ``(put seq, end seq or 0, timestamp key)``, oldest first."""


_Held = tuple[list[tuple[str, bytes, Any]], list[str]]
"""What :func:`_held_records` and :func:`_held_keys` give, their third fields told apart by the caller."""


def _held_records(
    p: Projections, nsid: bytes, ids: Iterable[str]
) -> tuple[list[tuple[str, bytes, _Versions]], list[str]]:
    """``(found, missing)``: for each id the namespace ever held, ``(id, id key, versions)``; the
    ids it never held (a hashed key shared with another id does not count)."""
    found: list[tuple[str, bytes, _Versions]] = []
    missing: list[str] = []
    for record_id in ids:
        idk = name_key(record_id)
        versions = []
        for put_seq, end_seq in p.versions(nsid, idk):
            env = decode_envelope(p.frame(put_seq), put_seq)
            if env.id == record_id:
                assert env.timestamp is not None
                versions.append((put_seq, end_seq, ts_key(env.timestamp)))
        if versions:
            found.append((record_id, idk, versions))
        else:
            missing.append(record_id)
    return found, missing


def _held_keys(
    p: Projections, nsid: bytes, keys: Iterable[str]
) -> tuple[list[tuple[str, bytes, list[int]]], list[str]]:
    """``(found, missing)``: for each metadata key the namespace ever held, ``(key, name key, seqs
    of its meta and erase events)``; the keys it never held. Each event the ``meta`` index names
    must be a write or erasure of a key of that name key, else :class:`StoreCorrupted`."""
    found: list[tuple[str, bytes, list[int]]] = []
    missing: list[str] = []
    for key in keys:
        mk = name_key(key)
        seqs = []
        for seq in p.meta_events(nsid, mk):
            env = decode_envelope(p.frame(seq), seq)
            if env.kind not in (META, ERASE) or env.key is None or name_key(env.key) != mk:
                raise StoreCorrupted(
                    f"metadata key {key!r}: its index names event {seq}, which is not a write of it"
                )
            if env.key == key:
                seqs.append(seq)
        if seqs:
            found.append((key, mk, seqs))
        else:
            missing.append(key)
    return found, missing


def _names_in(p: Projections, nsid: bytes, of_meta: bool) -> list[str]:
    """Every record id (``of_meta``: metadata key) the namespace ever held, in key order, read from
    the envelopes of the events its ``ver`` (``meta``) entries name."""
    names: dict[str, None] = {}
    for _, seq in p.name_keys(nsid, of_meta):
        env = decode_envelope(p.frame(seq), seq)
        name = env.key if of_meta else env.id
        if name is None:
            raise StoreCorrupted(f"event {seq} is named by an index of namespace {namespace_text(env.namespace)} it does not fit")
        names[name] = None
    return list(names)


def _erased_later(p: IndexView, nsid: bytes, mk: bytes, key: str, seq: int) -> bool:
    """Whether an erase event of metadata key ``key`` follows its meta event ``seq`` (what a meta
    frame without its payload needs to be read as erased rather than damaged)."""
    for later in p.meta_events(nsid, mk):
        if later <= seq:
            return False
        env = decode_envelope(p.frame(later), later)
        if env.kind == ERASE and env.key == key:
            return True
    return False


def _holds_value(frame: bytes) -> bool:
    """Whether ``frame`` is a meta event whose value is not erased (an erase event holds none)."""
    return not is_erased(frame) and decode_envelope(frame).kind == META


def _erase_versions(p: Projections, nsid: bytes, record_id: str, idk: bytes, versions: _Versions) -> None:
    """Erase every version of a record (``versions``): each put frame loses its payload and the
    projections drop the version from every read; so do the feedback events given to it (FORMAT
    §14). Its receipt is the caller's to append (:meth:`Appends.erase_record`)."""
    for put_seq, end_seq, tsk in versions:
        frame = p.frame(put_seq)
        if not is_erased(frame):
            p.replace_frame(put_seq, erase_payload(frame))
        p.unindex_version(nsid, put_seq, end_seq, tsk)
    for fb_seq in p.feedback_seqs(nsid, idk):
        frame = p.frame(fb_seq)
        if not is_erased(frame) and decode_envelope(frame, fb_seq).id == record_id:
            p.replace_frame(fb_seq, erase_payload(frame))


def _erase_values(p: Projections, seqs: list[int]) -> None:
    """Erase every value of a metadata key (its meta events ``seqs``): each frame loses its payload.
    Its receipt is the caller's to append (:meth:`Appends.erase_key`)."""
    for seq in seqs:
        frame = p.frame(seq)
        if not is_erased(frame):
            p.replace_frame(seq, erase_payload(frame))


def erase_for_receipt(p: Projections, event: LogEvent) -> list[int]:
    """What an ``erase`` receipt ``event`` stands for, done to the log before the receipt is folded
    (cluster mode: a node folding another node's erasure erases its own copy the same way): every
    version of the record ``event.id`` (:func:`_erase_versions`), or every value of the key
    ``event.key`` (:func:`_erase_values`), of the receipt's namespace. Returns the sequence numbers
    of the events whose content it covers (erased now or before)."""
    nsid = p.nsid(ns_bytes(event.namespace))
    if nsid is None:
        return []
    if event.key is not None:
        found_keys = _held_keys(p, nsid, [event.key])[0]
        seqs = [s for _, _, entries in found_keys for s in entries if s < event.seq]
        _erase_values(p, seqs)
        return seqs
    assert event.id is not None
    covered: list[int] = []
    for record_id, idk, versions in _held_records(p, nsid, [event.id])[0]:
        _erase_versions(p, nsid, record_id, idk, versions)
        covered += [put_seq for put_seq, _, _ in versions]
        covered += [s for s in p.feedback_seqs(nsid, idk) if is_erased(p.frame(s))]
    return covered


class EventLog:
    """The event log and its projections in one store directory. Thread-safe.

    ``actor``/``reason`` given to a write are recorded on each of its events. Concurrent ``put``,
    ``delete``, ``set_meta`` and ``clear`` calls share one transaction and one flush, each still all
    or nothing (:mod:`coniti.log.group`); ``group_commit=False`` commits every call on its own.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: str = "sync",
        map_size: int = DEFAULT_MAP_SIZE,
        read_only: bool = False,
        group_commit: bool = True,
    ) -> None:
        self.store = Store(path, durability=durability, map_size=map_size, read_only=read_only)
        if self.store.stale_projections or self.store.needs_reseal:
            from coniti.log.checks import rebuild, reseal

            try:
                (rebuild if self.store.stale_projections else reseal)(self.store)
            except BaseException:
                self.store.close()  # a failed open leaves no environment open behind it
                raise
            self.store.projections_rebuilt()
        self.group = GroupCommit(self.store) if group_commit and not read_only else None
        self._merge_puts = self._put_calls  # one bound method: the group merges calls naming it
        self._commit = self.store.write if self.group is None else self.group.run
        self._dbs = Dbs(self.store.dbs, layout=self.store.layout)
        self._nsids: dict[Namespace, bytes] = {}
        self._live: tuple[bytes, list[Namespace]] | None = None
        """The namespaces :meth:`live_namespaces` answered now, with the head they were read at."""

    @property
    def path(self) -> str:
        return self.store.path

    @property
    def dbs(self) -> Dbs:
        """The store's sub-databases (for :mod:`coniti.log.replica`)."""
        return self._dbs

    def close(self) -> None:
        self.store.close()

    # -- namespaces ------------------------------------------------------------------------------

    def _nsid(self, p: IndexView, namespace: Namespace) -> bytes | None:
        nsid = self._nsids.get(namespace)
        if nsid is None:
            nsid = p.nsid(ns_bytes(namespace))
            if nsid is not None:
                self._nsids[namespace] = nsid
        return nsid

    def forget_namespaces(self) -> None:
        """Drop cached namespace ids (after projections were rebuilt)."""
        self._nsids.clear()

    # -- writes ----------------------------------------------------------------------------------

    def _live_id_matches(self, p: Projections, seq: int, record_id: str) -> bool:
        return decode_record(p.frame(seq))[0] == record_id

    def put(
        self,
        items: Sequence[PutItem],
        *,
        actor: str | None = None,
        reason: str | None = None,
        meta: tuple[Namespace, str, Any] | None = None,
    ) -> range:
        """Append one put event per item, in order; all or nothing. Returns the sequence numbers
        of the events appended (the meta event's first; an empty range when none).

        ``meta`` ``(namespace, key, value)``: first append one meta event setting ``key`` to the JSON
        value ``value``, in the same transaction (a refused put then writes no event at all).
        Raises :class:`DuplicateRecord` if an id is live in its namespace or repeats in ``items``.
        """
        if not items:
            if meta is not None:
                seq = self.set_meta(*meta, actor=actor, reason=reason)
                return range(seq, seq + 1)
            return range(0)
        return self._put_prepared(prepare(items), actor, reason, meta)

    def put_columns(
        self,
        namespace: Namespace,
        ids: Sequence[str],
        texts: Sequence[str],
        timestamps: np.ndarray,
        metadata: Sequence[dict[str, Any]],
        embedding_id: str | None,
        vectors: np.ndarray | None,
        *,
        actor: str | None = None,
        reason: str | None = None,
        meta: tuple[Namespace, str, Any] | None = None,
        expiries: list[float | None] | None = None,
    ) -> range:
        """:meth:`put` of the records of one namespace given as columns (already validated by the
        caller): ``timestamps`` a float64 array, ``vectors`` a C-contiguous ``(len(ids), dim)``
        matrix or None, one ``embedding_id`` for all, ``expiries`` one expiry (or None) per row, or
        None when no record expires. Appends exactly the events :meth:`put` appends for the same
        records, one item per row, with the same checks and errors, and returns their sequence
        numbers as it does."""
        if not ids:
            if meta is not None:
                seq = self.set_meta(*meta, actor=actor, reason=reason)
                return range(seq, seq + 1)
            return range(0)
        payloads = encode_put_payloads(texts, metadata, embedding_id, vectors)
        puts = Puts(
            {namespace: ns_bytes(namespace)}, [namespace] * len(ids), ids, name_keys(ids), timestamps.tolist(),
            ts_keys(timestamps), payloads, payload_digests(payloads), payload_crcs(payloads), expiries,
        )
        return self._put_prepared(puts, actor, reason, meta)

    def _put_prepared(
        self,
        puts: Puts,
        actor: str | None,
        reason: str | None,
        meta: tuple[Namespace, str, Any] | None,
    ) -> range:
        """Append the put events of ``puts`` (see :meth:`put`), grouped with concurrent puts
        unless ``meta`` is given; returns the seqs appended."""
        cache = self._nsids
        meta_event = None if meta is None else (meta[0], meta[1], encode_meta_payload(meta[2]))

        def write(txn: Any) -> tuple[dict[Namespace, bytes], range]:
            p = Projections(txn, self._dbs)
            appends = Appends(p, actor, reason)
            nsids: dict[Namespace, bytes | None] = {
                ns: cache.get(ns) or p.intern(c) for ns, c in puts.canon.items()
            }
            error = self._conflict(p, puts, nsids, None)
            if error is not None:
                raise error
            if meta_event is not None:
                _append_meta(appends, nsids, meta_event)
            appends.puts([(puts, nsids, actor, reason)])
            return cast(dict[Namespace, bytes], nsids), appends.commit()

        if meta is not None:  # not merged with concurrent puts: its meta event comes first
            nsids, seqs = self._commit(write)
        elif self.group is None:
            nsids, seqs = self.store.write(write)
        else:
            data: _PutCall = (puts, actor, reason)
            nsids, seqs = self.group.run(write, merge=(self._merge_puts, data))
        cache.update(nsids)
        return seqs

    def put_batches(
        self,
        batches: Iterable[Sequence[PutItem]],
        *,
        actor: str | None = None,
        reason: str | None = None,
        meta: tuple[Namespace, str, Any] | None = None,
    ) -> int:
        """Append one put event per item of every batch, after the meta event of ``meta`` if given,
        in ONE write transaction: all or nothing, also when the process is killed or interrupted
        (Ctrl-C aborts the transaction). ``batches`` is iterated inside the transaction, once per
        attempt (a full map is grown and the transaction run again), so it must be re-iterable; an
        exception it raises aborts everything. Only one batch is prepared at a time, but LMDB keeps
        every page the transaction writes in memory until the commit (it spills them to the file
        only past 131,072 dirty pages or runs of pages, a value longer than a page being one run
        whatever its size): memory grows with what is written, about the growth of the data file. Raises
        :class:`DuplicateRecord` if an id is live in its namespace or repeats in the batches."""
        cache = self._nsids
        meta_event = None if meta is None else (meta[0], meta[1], encode_meta_payload(meta[2]))

        def write(txn: Any) -> tuple[dict[Namespace, bytes], int]:
            p = Projections(txn, self._dbs)
            appends = Appends(p, actor, reason)
            nsids: dict[Namespace, bytes | None] = {}
            if meta_event is not None:
                nsids[meta_event[0]] = cache.get(meta_event[0])
                _append_meta(appends, nsids, meta_event)
            n = 0
            for items in batches:
                if not items:
                    continue
                puts = prepare(items)
                for ns, c in puts.canon.items():
                    if ns not in nsids:
                        nsids[ns] = cache.get(ns) or p.intern(c)
                # earlier batches are in this transaction: a repeat of one of their ids is live here
                error = self._conflict(p, puts, nsids, None)
                if error is not None:
                    raise error
                appends.puts([(puts, nsids, actor, reason)])
                n += len(puts.ids)
            appends.commit()
            return cast(dict[Namespace, bytes], nsids), n

        nsids, n = self.store.write(write)  # alone, not in a group: it may be long
        cache.update(nsids)
        return n

    def _conflict(
        self,
        p: Projections,
        puts: Puts,
        nsids: dict[Namespace, bytes | None],
        taken: _Taken | None,
    ) -> StoreError | DuplicateRecord | None:
        """Why a put call of ``puts`` must fail, or None: an id repeated in the call, live in the
        store, or written by a call before it in the same transaction (``taken``, which gains this
        call's keys when it may go ahead). ``nsids[ns]`` None: a namespace the store has not seen.

        Per namespace the call's id keys are checked at once: no repeat, none taken, and none with
        a version in the store (one walk of ``ver`` along the sorted keys,
        :meth:`~coniti.log.projections.IndexView.versioned`). Only when that finds something is
        each row checked in order (:meth:`_first_conflict`), so the error names the first
        offending row, as a check row by row would. A call of one row is checked as a row."""
        if len(puts.ids) == 1:
            return self._first_conflict(p, puts, nsids, taken, None)
        if len(puts.canon) == 1:
            groups = {ns: puts.idks for ns in puts.canon}
        else:
            groups = {ns: [] for ns in puts.canon}
            for ns, idk in zip(puts.namespaces, puts.idks, strict=True):
                groups[ns].append(idk)
        held: dict[Namespace, set[bytes]] = {}
        repeated = False
        for ns, idks in groups.items():
            unique = set(idks)
            if len(unique) != len(idks) or (taken is not None and not unique.isdisjoint(taken.get(ns, ()))):
                repeated = True  # the rows tell which comes first
                break
            nsid = nsids[ns]
            held[ns] = set() if nsid is None else p.versioned(nsid, sorted(unique))
        if not repeated and not any(held.values()):
            if taken is not None:
                for ns, idks in groups.items():
                    taken.setdefault(ns, set()).update(idks)
            return None
        return self._first_conflict(p, puts, nsids, taken, None if repeated else held)

    def _first_conflict(
        self,
        p: Projections,
        puts: Puts,
        nsids: dict[Namespace, bytes | None],
        taken: _Taken | None,
        held: dict[Namespace, set[bytes]] | None,
    ) -> StoreError | DuplicateRecord | None:
        """:meth:`_conflict` row by row: the error of the first row that repeats an earlier one,
        is live in the store or was taken, else None (and ``taken`` gains the call's keys).
        ``held``, when given, has the id keys with a version per namespace: the others are not
        live (their :meth:`~coniti.log.projections.IndexView.live_seq` is not read)."""
        seen: dict[Namespace, set[bytes]] = {ns: set() for ns in puts.canon}
        for ns, record_id, idk in zip(puts.namespaces, puts.ids, puts.idks, strict=True):
            if idk in seen[ns]:
                return DuplicateRecord(
                    f"record id {record_id!r} appears twice in one put (namespace {namespace_text(ns)})"
                )
            seen[ns].add(idk)
            nsid = nsids[ns]
            unheld = nsid is None or (held is not None and idk not in held[ns])
            live = None if unheld else p.live_seq(cast(bytes, nsid), idk)
            if live is not None and is_hashed(idk) and not self._live_id_matches(p, live, record_id):
                return StoreError(f"record id {record_id[:40]!r}... collides with another id's hash")
            if live is not None or (taken is not None and idk in taken.get(ns, ())):
                return DuplicateRecord(f"record id {record_id!r} already exists in namespace {namespace_text(ns)}")
        if taken is not None:
            for ns, keys in seen.items():
                taken.setdefault(ns, set()).update(keys)
        return None

    def _put_calls(self, txn: Any, calls: list[_PutCall]) -> list[tuple[Any, BaseException | None]]:
        """Several put calls of one group commit in one go (the merger :meth:`put` offers): each is
        checked against the store and the calls accepted before it; the accepted ones are appended
        in order under one recorded time. A refused call writes nothing (not even its namespace)
        and gets the error it would have raised alone; an accepted one gets its namespace ids and
        the seqs of its events."""
        p = Projections(txn, self._dbs)
        cache = self._nsids
        taken: _Taken = {}
        accepted: list[PutCall] = []
        outcomes: list[tuple[Any, BaseException | None]] = []
        seq = p.head().seq + 1  # the first seq Appends will give (it reads the same head)
        for puts, actor, reason in calls:
            nsids = {ns: cache.get(ns) or p.nsid(c) for ns, c in puts.canon.items()}
            error = self._conflict(p, puts, nsids, taken)
            if error is not None:
                outcomes.append((None, error))
                continue
            for ns, c in puts.canon.items():
                if nsids[ns] is None:
                    nsids[ns] = p.intern(c)
            accepted.append((puts, nsids, actor, reason))
            outcomes.append(((nsids, range(seq, seq + len(puts.ids))), None))
            seq += len(puts.ids)
        if accepted:
            appends = Appends(p, None, None)  # each call carries its own actor and reason
            appends.puts(accepted)
            appends.commit()
        return outcomes

    def delete(
        self,
        namespace: Namespace,
        ids: Sequence[str],
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> tuple[list[str], list[str], range]:
        """Append one delete event per live id; returns ``(deleted, missing, seqs)``: the ids in the
        order of ``ids`` (which must hold no repeats) and the seqs of the events, one per deleted
        id in its order."""
        canonical = ns_bytes(namespace)

        def write(txn: Any) -> tuple[list[str], list[str], range]:
            p = Projections(txn, self._dbs)
            nsid = p.nsid(canonical)
            if nsid is None:
                return [], list(ids), range(0)
            found: list[tuple[str, bytes, Version]] = []
            missing: list[str] = []
            idks = name_keys(ids)
            versions = p.newest_each(nsid, idks)  # the visible version, when live (expiry is not applied)
            for record_id, idk, live in zip(ids, idks, versions, strict=True):
                if (
                    live is None or live[1] != LIVE
                    or (is_hashed(idk) and not self._live_id_matches(p, live[0], record_id))
                ):
                    missing.append(record_id)
                else:
                    found.append((record_id, idk, live))
            if not found:
                return [], missing, range(0)
            appends = Appends(p, actor, reason)
            appends.deletes(namespace, nsid, found)  # ids hold no repeats: each version is as found
            return [record_id for record_id, _, _ in found], missing, appends.commit()

        return self._commit(write)

    def set_meta(
        self,
        namespace: Namespace,
        key: str,
        value: Any,
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> int:
        """Append one meta event setting ``key`` to the JSON value ``value``; returns its seq."""
        canonical = ns_bytes(namespace)
        payload = encode_meta_payload(value)

        def write(txn: Any) -> tuple[bytes, int]:
            p = Projections(txn, self._dbs)
            nsid = p.intern(canonical)
            appends = Appends(p, actor, reason)
            seq = appends.meta(namespace, nsid, key, payload)
            appends.commit()
            return nsid, seq

        self._nsids[namespace], seq = self._commit(write)
        return seq

    def feedback(
        self,
        namespace: Namespace,
        record_id: str,
        weight: float,
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> int | None:
        """Append one feedback event giving ``weight`` to the live record ``record_id``; returns
        its sequence number, or None (nothing appended) when the record is not live."""
        canonical = ns_bytes(namespace)
        payload = encode_feedback_payload(weight)
        idk = name_key(record_id)

        def write(txn: Any) -> int | None:
            p = Projections(txn, self._dbs)
            nsid = p.nsid(canonical)
            if nsid is None:
                return None
            live = p.live_seq(nsid, idk)
            if live is None or (is_hashed(idk) and not self._live_id_matches(p, live, record_id)):
                return None
            appends = Appends(p, actor, reason)
            seq = appends.feedback(namespace, nsid, record_id, idk, payload)
            appends.commit()
            return seq

        return self.store.write(write)

    def feedback_weights(self, namespace: Namespace, as_of: int | None = None) -> dict[str, float]:
        """Record id -> the sum of its feedback weights (as of event ``as_of``); erased ones left out."""
        with self.store.read() as txn:
            p = RecordReads(txn, self._dbs)
            nsid = self._nsid(p, namespace)
            return {} if nsid is None else p.feedback_weights(namespace, nsid, as_of)

    def clear(
        self, namespace: Namespace, *, actor: str | None = None, reason: str | None = None
    ) -> int:
        """Append one clear event (even when the namespace is empty: the request is on record);
        returns how many live records it ended. Metadata is kept."""
        canonical = ns_bytes(namespace)

        def write(txn: Any) -> int:
            p = Projections(txn, self._dbs)
            appends = Appends(p, actor, reason)
            removed = appends.clear(namespace, p.nsid(canonical))
            appends.commit()
            return removed

        return self._commit(write)

    def erase(
        self,
        namespace: Namespace,
        ids: Sequence[str],
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> tuple[list[str], list[str], list[int]]:
        """Erase the content of every version of each record in ``ids`` (no repeats): each of its put
        frames loses its payload (envelope and digest stay, so the chain holds), the projections
        drop the versions from every read, and one ``erase`` event per id is appended as the
        receipt (ending the record if it is live). One transaction. Returns ``(erased, missing,
        receipt sequence numbers)``; ids the namespace never held are missing and get no event."""
        return self._erase_each(namespace, ids, False, actor, reason)

    def erase_meta(
        self,
        namespace: Namespace,
        keys: Sequence[str],
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> tuple[list[str], list[str], list[int]]:
        """Erase every value metadata key of ``keys`` (no repeats) ever had in ``namespace``: each
        of its meta frames loses its payload (envelope and digest stay, so the chain holds), every
        read of the key, now or as of any point, gives None, and one ``erase`` event naming the key
        (``mk``) is appended per key as the receipt. One transaction. Returns ``(erased, missing,
        receipt sequence numbers)``; keys the namespace never held are missing and get no event."""
        return self._erase_each(namespace, keys, True, actor, reason)

    def _erase_each(
        self, namespace: Namespace, names: Sequence[str], of_meta: bool, actor: str | None, reason: str | None
    ) -> tuple[list[str], list[str], list[int]]:
        """:meth:`erase` (record ids ``names``) or, ``of_meta``, :meth:`erase_meta` (keys)."""
        canonical = ns_bytes(namespace)

        def write(txn: Any) -> tuple[list[str], list[str], list[int]]:
            p = Projections(txn, self._dbs)
            nsid = p.nsid(canonical)
            if nsid is None:
                return [], list(names), []
            appends = Appends(p, actor, reason)
            held = _held_keys if of_meta else _held_records
            found, missing = cast(_Held, held(p, nsid, names))
            for name, key, entries in found:
                if of_meta:
                    _erase_values(p, entries)
                    appends.erase_key(namespace, nsid, name, key)
                else:
                    _erase_versions(p, nsid, name, key, entries)
                    appends.erase_record(namespace, nsid, name, key)
            return [name for name, _, _ in found], missing, list(appends.commit())

        return self.store.write(write)

    def erase_namespace(
        self, namespace: Namespace, *, actor: str | None = None, reason: str | None = None
    ) -> tuple[list[str], list[str], list[int]]:
        """Erase every record and every metadata key of ``namespace`` that still holds content (a
        version or value not erased yet), as :meth:`erase` and :meth:`erase_meta` do, in one
        transaction: one receipt per record, then one per key. Returns ``(record ids, metadata keys,
        receipt sequence numbers)``, ids and keys in key order; a namespace with nothing left to
        erase (or never used) appends nothing. Identifiers stay (the ids, keys and namespace in the
        envelopes, the op receipts of write requests): the chain needs them; content goes."""
        canonical = ns_bytes(namespace)

        def write(txn: Any) -> tuple[list[str], list[str], list[int]]:
            p = Projections(txn, self._dbs)
            nsid = p.nsid(canonical)
            if nsid is None:
                return [], [], []
            records = [
                r for r in _held_records(p, nsid, _names_in(p, nsid, False))[0]
                if any(not is_erased(p.frame(put_seq)) for put_seq, _, _ in r[2])
            ]
            keys = [
                k for k in _held_keys(p, nsid, _names_in(p, nsid, True))[0]
                if any(_holds_value(p.frame(seq)) for seq in k[2])
            ]
            appends = Appends(p, actor, reason)
            for record_id, idk, versions in records:
                _erase_versions(p, nsid, record_id, idk, versions)
                appends.erase_record(namespace, nsid, record_id, idk)
            for key, mk, seqs in keys:
                _erase_values(p, seqs)
                appends.erase_key(namespace, nsid, key, mk)
            return [r[0] for r in records], [k[0] for k in keys], list(appends.commit())

        return self.store.write(write)

    def transact(
        self,
        namespace: Namespace,
        decide: Callable[[WriteView], tuple[list[Change], T]],
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> T:
        """One atomic write decided inside the write transaction: ``decide`` reads the namespace
        through a :class:`WriteView` and returns the changes to append (in order) and a value to
        return. Its events share one recorded time and stamp; if ``decide`` raises, nothing is
        written. A put of an id that is live must name the version it replaces."""
        canonical = ns_bytes(namespace)

        def write(txn: Any) -> T:
            p = Projections(txn, self._dbs)
            appends = Appends(p, actor, reason)
            changes, value = decide(WriteView(p, namespace, p.nsid(canonical), appends.at, appends.seq + 1))
            if not changes:
                return value
            nsid = p.intern(canonical)
            for change in changes:
                if change.kind == PUT:
                    assert change.item is not None
                    appends.put(namespace, nsid, change.item, change.replaces)
                elif change.kind == DELETE:
                    assert change.id is not None
                    if not appends.delete(namespace, nsid, change.id, name_key(change.id)):
                        raise StoreError(f"delete of {change.id!r}, which is not live")
                else:
                    assert change.kind == OP and change.op_id is not None
                    assert change.digest is not None and change.receipt is not None
                    appends.op(namespace, nsid, change.op_id, change.digest, change.receipt)
            appends.commit()
            return value

        return self._commit(write)

    def sweep(self, now: float | None, *, actor: str | None, reason: str | None) -> int:
        """Append a delete event for every live version expired at ``now`` (default: the write's
        recorded time), in every namespace; one transaction. Returns how many."""

        def write(txn: Any) -> int:
            p = Projections(txn, self._dbs)
            appends = Appends(p, actor, reason)
            when = appends.at if now is None else now
            reads = RecordReads(txn, self._dbs)
            for nsid, namespace in list(p.namespaces()):
                if not reads.expiring(nsid):
                    continue
                for _, record_id in reads.expired(nsid, when):
                    appends.delete(namespace, nsid, record_id, name_key(record_id))
            return len(appends.commit())

        return self._commit(write)

    def op_result(self, namespace: Namespace, op_id: str) -> tuple[str, dict[str, Any], int] | None:
        """``(request digest, result map, seq of the op event)`` recorded for ``op_id`` in
        ``namespace``, or None."""
        with self.store.read() as txn:
            p = Projections(txn, self._dbs)  # a WriteView's, read-only here
            nsid = self._nsid(p, namespace)
            return None if nsid is None else WriteView(p, namespace, nsid, 0.0, 0).op(op_id)

    def compact(self) -> tuple[int, int]:
        """Rewrite the store without free pages (see :meth:`Store.compact`); returns the data file's
        size before and after."""
        return self.store.compact(reopened=self._reload_dbs)

    def _reload_dbs(self) -> None:
        self._dbs = Dbs(self.store.dbs, layout=self.store.layout)

    def import_frames(
        self, frames: Iterable[bytes], check: Callable[[LogEvent], None] | None = None
    ) -> int:
        """Append stored frames verbatim (from another store, a golden set or an export) after the
        head, folding each; all or nothing, one write transaction. Each frame must decode strictly
        and follow the one before it on the hash chain (:meth:`Chain.read
        <coniti.log.chain.Chain.read>`), and apply to the state before it; ``check``, if given, is
        called with each decoded event before it is folded, and what it raises aborts the import.
        Returns how many were appended; raises :class:`~coniti.log.chain.FoldError` naming the
        first event that does not decode, chain or apply."""
        batch = [bytes(f) for f in frames]

        def write(txn: Any) -> int:
            p = Projections(txn, self._dbs)
            appends = Appends(p, None, None)
            head = p.head()
            chain = Chain(head.seq, head.hash, head.at if head.seq else None)
            for frame in batch:
                prev_at = chain.at
                event = chain.read(frame)
                if check is not None:
                    check(event)
                appends.stored(frame, event, prev_at)
            return len(appends.commit())

        n = self.store.write(write)
        self.forget_namespaces()
        return n

    # -- reads -----------------------------------------------------------------------------------

    def head(self) -> Head:
        """The last event (``seq`` 0 when the log is empty)."""
        with self.store.read() as txn:
            return RecordReads(txn, self._dbs).head()

    def proving(self, fn: Callable[[TreeReads, IndexView, int], T]) -> T:
        """``fn(tree, view, head seq)`` on one read snapshot: the Merkle tree (its size checked to be
        the head's, :meth:`TreeReads.check_size`) and the log (:mod:`coniti.log.tree`)."""
        with self.store.read() as txn:
            view = IndexView(txn, self._dbs)
            tree = TreeReads(txn, self._dbs)
            return fn(tree, view, tree.check_size(view.head().seq))

    def namespaces(self) -> list[Namespace]:
        """Every namespace the log has put a record or metadata into, in order of first use."""
        with self.store.read() as txn:
            return [ns for _, ns in RecordReads(txn, self._dbs).namespaces()]

    def written(self, namespace: Namespace) -> bool:
        """Whether an event other than a clear names ``namespace``, as of now: its namespace table
        holds every namespace a put, delete, metadata write, feedback, op or erase was written to
        (a clear of a namespace never written is the one event that adds none). One lookup."""
        with self.store.read() as txn:
            return self._nsid(IndexView(txn, self._dbs), namespace) is not None

    def live_namespaces(self, as_of: int | None = None) -> list[Namespace]:
        """The namespaces holding at least one record now (or right after event ``as_of``), in
        order of first use; one snapshot, one counter read per namespace ever used. Now's answer is
        kept while the head event (its seq and hash) stays the same."""
        with self.store.read() as txn:
            p = RecordReads(txn, self._dbs)
            if as_of is not None:
                return [ns for nsid, ns in p.namespaces() if p.count(nsid, as_of)]
            head = p.head_bytes()
            if self._live is not None and self._live[0] == head:
                return list(self._live[1])
            live = [ns for nsid, ns in p.namespaces() if p.count(nsid)]
            self._live = (head, live)
            return list(live)

    def seq_at_time(self, at: float) -> int:
        """The last event recorded at or before ``at`` (0 if none)."""
        with self.store.read() as txn:
            return RecordReads(txn, self._dbs).seq_at_time(at)

    def get(
        self, namespace: Namespace, ids: Sequence[str], as_of: int | None = None
    ) -> tuple[list[Row], list[str]]:
        """Rows for ``ids`` (no repeats) in order, and the ids not found."""
        store = self.store
        txn = store.begin_read()  # the pair, not store.read(): the hot path of a get
        try:
            p = RecordReads(txn, self._dbs)
            nsid = self._nsids.get(namespace) or self._nsid(p, namespace)  # the cache first, without a call
            if nsid is None:
                return [], list(ids)
            return p.get_rows(namespace, nsid, ids, as_of)
        except BaseException as exc:
            store.raise_translated(exc)
        finally:
            store.end_read(txn)

    def scan(
        self,
        namespace: Namespace,
        start: float | None,
        end: float | None,
        after: tuple[float, int] | None,
        limit: int | None,
        as_of: int | None = None,
    ) -> tuple[list[Row], tuple[float, int] | None]:
        """Rows in (timestamp, write order) with ``start <= timestamp < end``, strictly after the
        position ``after`` = ``(timestamp, seq)``, at most ``limit``; plus the position of the last
        row when more follow."""
        store = self.store
        txn = store.begin_read()  # the pair, not store.read(): the hot path of a scan page
        try:
            p = RecordReads(txn, self._dbs)
            nsid = self._nsids.get(namespace) or self._nsid(p, namespace)
            if nsid is None:
                return [], None
            return p.scan_rows(namespace, nsid, start, end, after, limit, as_of)
        except BaseException as exc:
            store.raise_translated(exc)
        finally:
            store.end_read(txn)

    def count(
        self,
        namespace: Namespace,
        start: float | None = None,
        end: float | None = None,
        as_of: int | None = None,
    ) -> int:
        """Records with ``start <= timestamp < end`` (unbounded where None)."""
        with self.store.read() as txn:
            p = RecordReads(txn, self._dbs)
            nsid = self._nsid(p, namespace)
            return 0 if nsid is None else p.count_range(nsid, start, end, as_of)

    def get_meta(self, namespace: Namespace, key: str, as_of: int | None = None) -> Any:
        """The metadata value (None when unset). The meta event is checked (:func:`read_meta`: its
        payload against its digest) to be a write of ``key`` in ``namespace``; else
        :class:`StoreCorrupted`."""
        mk = name_key(key)
        with self.store.read() as txn:
            p = RecordReads(txn, self._dbs)
            nsid = self._nsid(p, namespace)
            if nsid is None:
                return None
            seq = p.meta_seq(nsid, mk, as_of)
            if seq is None:
                return None
            env, value, erased = read_meta(p.frame(seq), seq)
            stored_key = env.get("mk")
            if not isinstance(stored_key, str) or env.get("n") != list(namespace) or name_key(stored_key) != mk:
                raise StoreCorrupted(
                    f"metadata key {key!r} of namespace {namespace_text(namespace)} is damaged: its "
                    f"index names event {seq}, which is not a write of it"
                )
            if erased and env["k"] == META and not _erased_later(p, nsid, mk, key, seq):
                raise StoreCorrupted(
                    f"metadata key {key!r} of namespace {namespace_text(namespace)} is damaged: the "
                    f"value of event {seq} is gone but no erasure of the key follows it"
                )
            return value if stored_key == key else None

    def events(self, after: int = 0, until: int | None = None, batch: int = 256) -> Iterator[LogEvent]:
        """Decoded events with ``after < seq <= until`` in order, read ``batch`` per snapshot (no
        transaction is held while the caller consumes them; see :func:`coniti.log.feed.read_events`)."""
        return read_events(self.store, after, until, batch=batch)
