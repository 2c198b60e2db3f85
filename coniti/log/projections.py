"""Projections: the indexes derived from the log, folded in the same write transaction as each append.

The tables, and every key and value in them, are :mod:`coniti.log.layout`'s. One transaction sees
them through :class:`IndexView` (the lookups every read and write shares, each checking what it lands
on), :class:`Projections` (the fold: the writes of each event kind; a write transaction) and
:class:`~coniti.log.reads.RecordReads` (the rows a get, scan or count returns).

The fold is a pure function of the events in order: :meth:`Projections.fold` (used by ``rebuild`` and
``verify``) and the write path call the same primitives. As-of reads (``as_of=S``) are index walks:
a version is visible at S when its put is at or before S and its end is 0 or after S. The event of
a recorded time is found by bisecting the log (recorded times never decrease along it).
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import takewhile
from typing import Any, NamedTuple

import msgpack

from coniti.errors import StoreCorrupted, StoreError, namespace_text
from coniti.log.chain import FoldError
from coniti.log.codec import (
    CLEAR,
    DELETE,
    ERASE,
    FEEDBACK,
    META,
    OP,
    PUT,
    LogEvent,
    RecordData,
    decode_op,
    payload_view,
    read_feedback,
    recorded_at,
    split_frame,
)
from coniti.log.keys import (
    MAX_SEQ,
    NSID_LEN,
    SEQ_LEN,
    Namespace,
    inline_name,
    inv_seq_key,
    is_hashed,
    name_key,
    ns_bytes,
    ns_key,
    seq_from_inv,
    seq_from_key,
    seq_key,
    ts_key,
)
from coniti.log.layout import (
    CNT_BODIES,
    KEY_NTS,
    LIVE,
    NO_PAYLOAD,
    POSITION,
    SEAL,
    SEALS,
    SK,
    TSK,
    TV_END,
    VER_LENGTHS,
    XK_END,
    Dbs,
    cnt_count,
    cnt_key,
    cnt_recount,
    cnt_value,
    erx_key,
    exv_key,
    fbk_key,
    frame_payload_crc,
    is_entry,
    meta_key,
    nsid_number,
    nsid_of,
    opened,
    opx_key,
    payload_crc,
    payload_crcs,
    put_entries,
    sealed,
    sound_landing,
    time_key,
    time_value,
    tver_value,
    unseal,
    ver_key,
    ver_value,
)
from coniti.log.store import SYS_HEAD
from coniti.log.tree import TreeAppends

__all__ = ["Dbs", "Head", "IndexView", "Projections", "Row", "Version", "payload_crcs"]

_U64 = struct.Struct(">Q")
_F64 = struct.Struct(">d")

Version = tuple[int, bytes, bytes, bytes, bytes]
"""``(put seq, E, T, X or b"", P)``: a version and its ``ver`` value's parts (:meth:`IndexView.newest_each`)."""


def damaged(
    names: list[str] | str, idk: bytes, record_id: str | None, seq: int, why: str
) -> StoreCorrupted:
    """The error for a read that found record ``record_id`` (else the one of id key ``idk``, or the
    put at event ``seq``) of namespace ``names`` (or its label, :meth:`IndexView.label`)
    damaged: ``why``."""
    if record_id is None and not is_hashed(idk):
        try:
            record_id = inline_name(idk)
        except ValueError:
            record_id = None
    what = repr(record_id) if record_id is not None else f"put at event {seq}"
    where = names if isinstance(names, str) else namespace_text(names)
    return StoreCorrupted(f"record {what} of namespace {where} is damaged: {why}")


def _missing(seq: int) -> StoreCorrupted:
    """The error for an index naming event ``seq``, which the log lacks."""
    return StoreCorrupted(f"event {seq} is referenced by an index but missing from the log")


def _under(cur: Any, prefix: bytes, label: Callable[[bytes], str]) -> Iterator[tuple[bytes, bytes]]:
    """``(sequence key, value)`` of every entry of ``prefix`` (see :func:`~coniti.log.layout.is_entry`) in key order;
    :class:`StoreCorrupted` naming the namespace (``label(N)``) and the name if the lookup of
    ``prefix`` was misdirected (:func:`~coniti.log.layout.sound_landing`: these tables, ``meta``, ``erx`` and
    ``fbk``, have no seals, so only the order of the landing place is checked)."""
    landed = cur.set_range(prefix)
    if not sound_landing(cur, prefix, landed):
        raise damaged(label(prefix[:NSID_LEN]), prefix[NSID_LEN:], None, 0, "an index is out of order near it")
    if landed:
        for key, value in cur:
            if not is_entry(key, prefix):
                return
            yield key[-SEQ_LEN:], value


class Row(NamedTuple):
    """One record read back: id, note timestamp, content (fresh objects, owned by the caller), the
    sequence number of the put that wrote this version, and its expiry (None: none)."""

    id: str
    timestamp: float
    data: RecordData
    seq: int
    expires_at: float | None = None


class Head:
    """The last event: ``seq`` (0 when empty), its recorded time ``at`` and its ``hash``."""

    __slots__ = ("at", "hash", "seq")

    def __init__(self, seq: int, at: float, hash: bytes) -> None:
        self.seq = seq
        self.at = at
        self.hash = hash

    def next_at(self) -> float:
        """The recorded time of the next event: now, or this head's time if the clock went back
        (recorded times never decrease, ``log/FORMAT.md`` §3)."""
        return max(time.time(), self.at)

    def encode(self) -> bytes:
        return _U64.pack(self.seq) + _F64.pack(self.at) + self.hash

    @classmethod
    def decode(cls, raw: bytes | None) -> Head:
        if raw is None:
            return cls(0, 0.0, bytes(32))
        if len(raw) != 48:
            raise StoreCorrupted("the head record in the system table is malformed")
        return cls(_U64.unpack_from(raw)[0], _F64.unpack_from(raw, 8)[0], bytes(raw[16:]))


class IndexView:
    """The projection sub-databases, and the log's head and frames, seen through one LMDB
    transaction (read or write): the lookups reads and writes share. Each checks what it lands on
    (the read checks below); :class:`StoreCorrupted` names what is damaged. Nothing is cached
    beyond the transaction."""

    __slots__ = ("_counts", "_ver_cur", "d", "txn")

    def __init__(self, txn: Any, dbs: Dbs) -> None:
        self.txn = txn
        self.d = dbs
        self._counts: dict[bytes, int] = {}
        self._ver_cur: Any = None

    # -- head and log ------------------------------------------------------------------------

    def head(self) -> Head:
        """The head event as recorded in the system table."""
        return Head.decode(self.txn.get(SYS_HEAD, db=self.d.sys))

    def head_bytes(self) -> bytes:
        """The head event's record in the system table, undecoded (empty when there is none)."""
        raw = self.txn.get(SYS_HEAD, db=self.d.sys)
        return b"" if raw is None else bytes(raw)

    def frame(self, seq: int) -> bytes:
        """The stored frame of event ``seq``; :class:`StoreCorrupted` if the log lacks it."""
        raw = self.txn.get(seq_key(seq), db=self.d.log)
        if raw is None:
            raise _missing(seq)
        return bytes(raw)

    def seq_at_time(self, at: float) -> int:
        """The last event recorded at or before ``at`` (0 if none): a bisection of the log, whose
        recorded times never decrease (about 20 envelope reads at a million events)."""
        lo, hi = 0, self.head().seq
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if recorded_at(self.frame(mid)) <= at:
                lo = mid
            else:
                hi = mid - 1
        return lo

    # -- namespaces --------------------------------------------------------------------------

    def nsid(self, canonical: bytes) -> bytes | None:
        """The namespace id of canonical namespace bytes, or None if never used. The ``ns`` and
        ``nsn`` tables must agree on it (:class:`StoreCorrupted` if an inline key's do not; a hashed
        key's mismatch is another namespace sharing its SHA-256 key)."""
        key = ns_key(canonical)
        found = self.txn.get(key, db=self.d.ns)
        if found is None:
            return None
        if self.txn.get(found, db=self.d.nsn) != canonical:
            if is_hashed(key):
                return None
            raise StoreCorrupted(
                f"namespace {canonical!r}: the ns and nsn tables disagree on its id (damaged store)"
            )
        return bytes(found)

    def _names(self, nsid: bytes) -> list[str]:
        """The namespace of id ``nsid`` as a list (for error messages; [] if ``nsn`` lacks it)."""
        canonical = self.txn.get(nsid, db=self.d.nsn)
        try:
            return [] if canonical is None else list(msgpack.unpackb(canonical, raw=False))
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            raise StoreCorrupted(f"the namespace table is damaged at id {nsid.hex()}: {exc}") from exc

    def namespaces(self) -> Iterator[tuple[bytes, Namespace]]:
        """Every namespace ever used: ``(namespace id, namespace)`` in id order. The table is
        checked as it is read: ids run 0, 1, 2, ..., each names a list of non-empty strings, and
        ``ns`` maps it back to its id; else :class:`StoreCorrupted`."""
        for number, (nsid, canonical) in enumerate(self.txn.cursor(db=self.d.nsn)):
            try:
                namespace = msgpack.unpackb(canonical, raw=False)
            except (ValueError, msgpack.UnpackException) as exc:
                raise StoreCorrupted(f"the namespace table is damaged at id {number}: {exc}") from exc
            ok = (
                nsid == nsid_of(number) and type(namespace) is list
                and all(type(part) is str and part for part in namespace)
                and ns_bytes(namespace) == canonical
                and self.txn.get(ns_key(bytes(canonical)), db=self.d.ns) == nsid
            )
            if not ok:
                raise StoreCorrupted(f"the namespace table is damaged at id {number} ({bytes(nsid).hex()})")
            yield bytes(nsid), tuple(namespace)

    def label(self, nsid: bytes) -> str:
        """Namespace ``nsid`` for a message (``alice/work``; its id when the table lacks it)."""
        try:
            names = self._names(nsid)
        except StoreCorrupted:
            names = None
        return f"id {nsid.hex()}" if names is None else namespace_text(names)

    # -- versions ----------------------------------------------------------------------------

    def _vcur(self) -> Any:
        if self._ver_cur is None:
            self._ver_cur = self.txn.cursor(db=self.d.ver)
        return self._ver_cur

    def _ver_parts(self, key: bytes, value: bytes | None) -> tuple[bytes, bytes, bytes, bytes]:
        """``(E, T, X or b"", P)`` of the ``ver`` entry ``key`` -> ``value`` (``P`` b"" in a layout
        before 4, which has none); :class:`StoreCorrupted` if it is missing, malformed or (layout
        4) its seal does not hold."""
        if value is not None and self.d.sealed:
            seals = self.d.seals
            body = opened(key, value, seals.ver, seals.crc) if len(value) in VER_LENGTHS else None
            if body is not None:
                return body[:SEQ_LEN], body[SEQ_LEN:TV_END], body[TV_END:-SEAL], body[-SEAL:]
        elif value is not None and len(value) in (TV_END, XK_END):
            return value[:SEQ_LEN], value[SEQ_LEN:TV_END], value[TV_END:], b""
        where = seq_from_inv(key[-SEQ_LEN:]) if len(key) >= NSID_LEN + SEQ_LEN else "?"
        raise StoreCorrupted(
            f"the ver entry of the version put at event {where} in namespace {self.label(key[:NSID_LEN])} "
            "is damaged"
        )

    def latest(self, nsid: bytes, idk: bytes) -> tuple[int, bool, bytes] | None:
        """``(put seq, live, timestamp key)`` of the newest version of a record, or None if it
        never existed."""
        found = self.newest_each(nsid, (idk,))[0]
        return None if found is None else (found[0], found[1] == LIVE, found[2])

    def newest_each(self, nsid: bytes, idks: Iterable[bytes]) -> list[Version | None]:
        """For each id key of ``idks``, in order (one cursor walk): the record's newest version and its ``ver``
        value's parts (``E`` is :data:`LIVE` while live; a fold ends it with them), or None if it never existed."""
        cur = self._vcur()
        set_range, key_of, value_of = cur.set_range, cur.key, cur.value
        parts = self._ver_parts
        out: list[Version | None] = []
        add = out.append
        for idk in idks:
            prefix = nsid + idk
            if not (set_range(prefix) and is_entry(key := key_of(), prefix)):
                add(None)
                continue
            end, tsk, xk, crc = parts(key, value_of())
            add((seq_from_inv(key[-SEQ_LEN:]), end, tsk, xk, crc))
        return out

    def live_seq(self, nsid: bytes, idk: bytes, as_of: int | None = None) -> int | None:
        """The put seq of the version visible now (or right after event ``as_of``), else None."""
        found = self.visible(nsid, idk, as_of)
        return None if found is None else found[0]

    def visible(
        self, nsid: bytes, idk: bytes, as_of: int | None = None, checked: bool = False
    ) -> tuple[int, bytes] | None:
        """``(put seq, timestamp key)`` of the version visible now (or right after event
        ``as_of``), else None; ``checked`` as in :meth:`visible_version`."""
        found = self.visible_version(nsid, idk, as_of, checked)
        return None if found is None else (found[0], found[1][:8])

    def visible_version(
        self, nsid: bytes, idk: bytes, as_of: int | None = None, checked: bool = False
    ) -> tuple[int, bytes] | None:
        """``(put seq, T or T X)``: the version visible now (or right after event ``as_of``) and
        the rest of its ``ver`` value (its timestamp key, then its expiry key if it has one), else
        None. Expiry is not applied here. ``checked`` (a read that returns what it finds, such as
        a diff): the lookup's landing is checked as a get checks it (:func:`~coniti.log.layout.sound_landing`, the
        entry landed on genuine), else :class:`StoreCorrupted`; writes read without it."""
        prefix = nsid + idk
        cur = self._ver_cur or self._vcur()
        probe = prefix if as_of is None else prefix + inv_seq_key(as_of)
        landed = cur.set_range(probe)
        found = landed and is_entry(cur.key(), prefix)
        if checked and not self._ver_landing_sound(cur, probe, landed):
            raise damaged(self.label(nsid), idk, None, 0, "the ver index is damaged near it")
        if not found:
            return None
        key = cur.key()
        end, tsk, xk, _ = self._ver_parts(key, cur.value())
        if end != LIVE and (as_of is None or seq_from_key(end) <= as_of):
            return None
        return seq_from_inv(key[-SEQ_LEN:]), tsk + xk

    def versions(self, nsid: bytes, idk: bytes) -> list[tuple[int, int]]:
        """Every version of a record as ``(put seq, end seq or 0)``, oldest first. The keys around
        the walk must be genuine (see the read checks below), else :class:`StoreCorrupted`."""
        prefix = nsid + idk
        cur = self.txn.cursor(db=self.d.ver)
        out: list[tuple[int, int]] = []
        landed = cur.set_range(prefix)
        if not sound_landing(cur, prefix, landed, self._genuine_ver):
            raise damaged(self.label(nsid), idk, None, 0, "the ver index is out of order near it")
        if landed:
            for key, value in cur.iternext(keys=True, values=True):
                if not is_entry(key, prefix):
                    if not self._genuine_ver(key, value):
                        raise damaged(self.label(nsid), idk, None, 0, "the ver index is damaged after it")
                    break
                out.append((seq_from_inv(key[-SEQ_LEN:]), seq_from_key(self._ver_parts(key, value)[0])))
        out.reverse()
        return out

    def versioned(self, nsid: bytes, idks: Sequence[bytes]) -> set[bytes]:
        """The id keys of ``idks`` (ascending) that have at least one ``ver`` entry in the
        namespace: one walk of ``ver`` along the sorted keys, seeking only where the cursor is not
        already past the key. A key with no entry has no version, so its record is not live
        (:meth:`live_seq` would give None without reading any entry). Relies on id keys being
        prefix-free (:func:`~coniti.log.keys.name_key`: length-prefixed or a fixed-size hash), so
        an entry of one key never sorts between another key and that key's own entries."""
        cur = self._vcur()
        found: set[bytes] = set()
        entry = len(nsid) + SEQ_LEN
        key = b""
        for idk in idks:
            prefix = nsid + idk
            if key < prefix:
                if not cur.set_range(prefix):
                    break  # no key at or after this one: none of the rest has an entry
                key = cur.key()
            if len(key) == entry + len(idk) and key.startswith(prefix):
                found.add(idk)
        return found

    # -- counts ------------------------------------------------------------------------------

    def _cnt_entry(self, nsid: bytes, as_of: int | None) -> bytes | None:
        """The body of the last ``cnt`` entry of the namespace (at or before event ``as_of``), its
        CRC checked; :class:`StoreCorrupted` naming the namespace if it is damaged."""
        cur = self.txn.cursor(db=self.d.cnt)
        target = cnt_key(nsid, MAX_SEQ if as_of is None else as_of + 1)
        legacy = self.d.legacy
        crc = self.d.seals.crc
        landed = cur.set_range(target)
        # One damaged key can misdirect LMDB's search; it is then the entry landed on or the one
        # before it, and both are checked (each value's CRC covers its key), and their order: the
        # entry landed on at or after the target, the one before it before.
        if landed and (
            cur.key() < target or (not legacy and unseal(cur.key(), cur.value(), CNT_BODIES, False, crc) is None)
        ):
            raise StoreCorrupted(f"the count index is damaged near namespace {self.label(nsid)}")
        found = cur.prev() if landed else cur.last()
        if not found:
            return None
        key = cur.key()
        body = unseal(key, cur.value(), CNT_BODIES, legacy, crc)
        if key >= target or (body is None and key[:NSID_LEN] != nsid):
            raise StoreCorrupted(f"the count index is damaged near namespace {self.label(nsid)}")
        if key[:NSID_LEN] != nsid:
            return None
        if body is None or len(key) != NSID_LEN + SEQ_LEN:
            raise StoreCorrupted(
                f"the record count of namespace {self.label(nsid)} after event "
                f"{seq_from_key(key[-SEQ_LEN:]) if len(key) >= SEQ_LEN else '?'} is damaged"
            )
        return body

    def count(self, nsid: bytes, as_of: int | None = None) -> int:
        """Live records in the namespace now (or right after event ``as_of``)."""
        if as_of is None and nsid in self._counts:
            return self._counts[nsid]
        entry = self._cnt_entry(nsid, as_of)
        value = 0 if entry is None else cnt_count(entry)
        if as_of is None:
            self._counts[nsid] = value
        return value

    def _ver_landing_sound(self, cur: Any, probe: bytes, landed: bool) -> bool:
        """Whether a ``ver`` lookup of ``probe`` (``landed``: ``cur.set_range(probe)`` found a key)
        landed soundly: the entry landed on is genuine and the landing is in order, its
        predecessor genuine too (:func:`~coniti.log.layout.sound_landing`); ``cur`` is left where it landed. The
        check of a get that finds no version, and of :meth:`visible_version` when ``checked``."""
        if landed and not self._genuine_ver(cur.key(), cur.value()):
            return False
        return sound_landing(cur, probe, landed, self._genuine_ver)

    def _genuine_ver(self, key: bytes, value: bytes) -> bool:
        """Whether ``ver`` entry ``key`` (``N I ~S``) -> ``value`` is genuine: in layout 4, sealed;
        before, ``E T`` or ``E T X`` confirmed by the ``tver`` entry of that version (or, without
        one, by the version's erased frame)."""
        if self.d.sealed:
            return (
                len(key) >= NSID_LEN + 3 + SEQ_LEN and len(value) in VER_LENGTHS
                and opened(key, value, self.d.seals.ver, self.d.seals.crc) is not None
            )
        if len(key) < NSID_LEN + 3 + SEQ_LEN or len(value) not in (TV_END, XK_END):
            return False
        sk = seq_key(seq_from_inv(key[-SEQ_LEN:]))
        found = self.txn.get(key[:NSID_LEN] + value[SEQ_LEN:TV_END] + sk, db=self.d.tver)
        if found is None:
            frame = self.txn.get(sk, db=self.d.log)
            return frame is not None and not split_frame(frame)[2]
        return bool(found == value[:SEQ_LEN] + key[NSID_LEN:-SEQ_LEN])

    def _genuine_time(self, key: bytes, value: bytes, tver: bool) -> bool:
        """Whether ``time`` (``tver`` True: ``tver``) entry ``key`` (``N T S``) -> ``value`` is
        genuine: in layout 4, sealed; before, ``I`` (or ``E I``) confirmed by the ``ver`` entry of
        that version."""
        if len(key) != KEY_NTS:
            return False
        if self.d.sealed:
            seals = self.d.seals
            return opened(key, value, seals.tver if tver else seals.time, seals.crc) is not None
        end, idk = (value[:SEQ_LEN], value[SEQ_LEN:]) if tver else (LIVE, value)
        ver_key = key[:NSID_LEN] + idk + inv_seq_key(seq_from_key(key[SK]))
        found = self.txn.get(ver_key, db=self.d.ver)
        return found is not None and found[:TV_END] == end + key[TSK]

    def _genuine_time_now(self, key: bytes, value: bytes) -> bool:
        return self._genuine_time(key, value, False)

    def _genuine_tver(self, key: bytes, value: bytes) -> bool:
        return self._genuine_time(key, value, True)

    # -- metadata, erasures, op ids, feedback ------------------------------------------------

    def meta_events(self, nsid: bytes, mk: bytes) -> list[int]:
        """The seqs of every ``meta`` entry of key ``mk`` (its writes and erasures), newest first."""
        cur = self.txn.cursor(db=self.d.meta)
        return [seq_from_inv(sk) for sk, _ in _under(cur, nsid + mk, self.label)]

    def meta_seq(self, nsid: bytes, mk: bytes, as_of: int | None = None) -> int | None:
        """The seq of the metadata write in effect now (or right after ``as_of``), else None."""
        prefix = nsid + mk
        cur = self.txn.cursor(db=self.d.meta)
        probe = prefix if as_of is None else prefix + inv_seq_key(as_of)
        landed = cur.set_range(probe)
        if not sound_landing(cur, probe, landed):
            raise StoreCorrupted(f"the meta index is out of order near a key of namespace {self.label(nsid)}")
        if not (landed and is_entry(cur.key(), prefix)):
            return None
        return seq_from_inv(cur.key()[-SEQ_LEN:])

    def name_keys(self, nsid: bytes, of_meta: bool) -> list[tuple[bytes, int]]:
        """``(name key, seq)`` of every entry of the namespace in ``ver`` (its records' versions,
        ``seq`` the put) or, ``of_meta``, in ``meta`` (its keys' writes and erasures), in key order.
        :class:`StoreCorrupted` for a key too short to hold a name and a sequence number."""
        cur = self.txn.cursor(db=self.d.meta if of_meta else self.d.ver)
        out: list[tuple[bytes, int]] = []
        if cur.set_range(nsid):
            for key in cur.iternext(keys=True, values=False):
                if key[:NSID_LEN] != nsid:
                    break
                if len(key) < NSID_LEN + 3 + SEQ_LEN:
                    raise StoreCorrupted(
                        f"namespace {self.label(nsid)}: a {'meta' if of_meta else 'ver'} "
                        "index key is malformed (damaged store)"
                    )
                out.append((bytes(key[NSID_LEN:-SEQ_LEN]), seq_from_inv(key[-SEQ_LEN:])))
        return out

    def erasures(self, nsid: bytes, idk: bytes) -> list[int]:
        """The sequence numbers of the erase events of a record, oldest first."""
        if self.d.erx is None:
            return []
        cur = self.txn.cursor(db=self.d.erx)
        return [seq_from_key(sk) for sk, _ in _under(cur, nsid + idk, self.label)]

    def op_seq(self, nsid: bytes, op_id: str) -> int | None:
        """The seq of the op event of ``op_id`` in the namespace, or None (a hashed key's match is
        checked against the event)."""
        if self.d.opx is None:
            return None
        ok = name_key(op_id)
        found = self.txn.get(opx_key(nsid, op_id), db=self.d.opx)
        if found is None:
            return None
        seq = seq_from_key(bytes(found)) if len(found) == SEQ_LEN else 0
        frame = self.txn.get(seq_key(seq), db=self.d.log) if seq else None
        try:
            recorded = None if frame is None else decode_op(bytes(frame))[0]
        except StoreCorrupted:
            recorded = None
        if recorded != op_id:
            if recorded is not None and is_hashed(ok):
                return None  # another op id sharing the hashed key
            raise StoreCorrupted(
                f"op id {op_id!r} of namespace {self.label(nsid)} is damaged: its index names "
                f"event {seq}, which is not its receipt"
            )
        return seq

    def feedback_seqs(self, nsid: bytes, idk: bytes) -> list[int]:
        """The sequence numbers of the feedback events of one record, oldest first."""
        if self.d.fbk is None:
            return []
        cur = self.txn.cursor(db=self.d.fbk)
        return [seq_from_key(sk) for sk, _ in _under(cur, nsid + idk, self.label)]

    def feedback_weights(self, namespace: Namespace, nsid: bytes, as_of: int | None) -> dict[str, float]:
        """Record id -> the sum of its feedback weights in events at or before ``as_of`` (None:
        all), erased events left out; ids in ascending order of their name key. Each event is read
        and checked (:func:`read_feedback`) to be feedback in ``namespace``."""
        if self.d.fbk is None:
            return {}
        parts: dict[str, list[float]] = {}
        cur = self.txn.cursor(db=self.d.fbk)
        limit = MAX_SEQ if as_of is None else as_of
        entries = iter(cur) if cur.set_range(nsid) else iter(())
        for key, _ in takewhile(lambda kv: bytes(kv[0][:NSID_LEN]) == nsid, entries):
            seq = seq_from_key(bytes(key[-SEQ_LEN:]))
            if seq > limit:
                continue
            env, weight = read_feedback(self.frame(seq), seq)
            if env.get("n") != list(namespace) or not isinstance(env.get("i"), str):
                raise StoreCorrupted(
                    f"feedback of namespace {namespace_text(namespace)} is damaged: its index names event {seq}, "
                    "which is not feedback in it"
                )
            if weight is not None:
                parts.setdefault(env["i"], []).append(weight)
        return {i: math.fsum(w) for i, w in parts.items()}


class Projections(IndexView):
    """The fold: the writes that bring the projections along with each appended event, one
    primitive per effect of an event kind, and :meth:`fold` (a decoded event through them). Needs a
    write transaction, except for the lookups of :class:`IndexView`. Nothing is cached beyond the
    transaction."""

    __slots__ = ("_interned", "_max", "_tree")

    def __init__(self, txn: Any, dbs: Dbs) -> None:
        super().__init__(txn, dbs)
        self._max: dict[bytes, bytes] = {}
        self._interned: dict[Namespace, bytes] = {}
        self._tree: TreeAppends | None = None

    def tree(self) -> TreeAppends:
        """The Merkle tree's appends in this transaction (:mod:`coniti.log.tree`): the append
        routine adds each event's chain hash to it, :meth:`fold` too."""
        if self._tree is None:
            self._tree = TreeAppends(self.txn, self.d)
        return self._tree

    # -- head, log and namespaces ------------------------------------------------------------

    def set_head(self, head: Head) -> None:
        self.txn.put(SYS_HEAD, head.encode(), db=self.d.sys)

    def append(self, seq: int, frame: bytes) -> None:
        """Append event ``seq`` to the log (LMDB append mode: it must sort after every key)."""
        if not self.txn.put(seq_key(seq), frame, db=self.d.log, append=True):
            raise StoreCorrupted(f"event {seq} cannot be appended: the log already holds it or later")

    def append_many(self, seq: int, frames: Sequence[bytes]) -> None:
        """:meth:`append` of ``frames`` as events ``seq, seq + 1, ...``, in one ``putmulti``."""
        entries = [(seq_key(seq + i), frame) for i, frame in enumerate(frames)]
        if self.txn.cursor(db=self.d.log).putmulti(entries, append=True)[1] != len(entries):
            raise StoreCorrupted(f"events {seq} to {seq + len(frames) - 1} cannot be appended: the log already holds one or later")

    def replace_frame(self, seq: int, frame: bytes) -> None:
        """Overwrite the stored frame of event ``seq`` (erasure: the same envelope and digest, no
        payload)."""
        self.txn.put(seq_key(seq), frame, db=self.d.log)

    def intern(self, canonical: bytes) -> bytes:
        """The namespace id of ``canonical``, assigning the next one if it is new."""
        key = ns_key(canonical)
        found = self.txn.get(key, db=self.d.ns)
        if found is not None:
            if is_hashed(key) and self.txn.get(found, db=self.d.nsn) != canonical:
                raise StoreError("two namespaces share a SHA-256 key; refusing to mix them")
            return bytes(found)
        cur = self.txn.cursor(db=self.d.nsn)
        number = nsid_number(cur.key()) + 1 if cur.last() else 0
        nsid = nsid_of(number)
        self.txn.put(key, nsid, db=self.d.ns)
        if not self.txn.put(nsid, canonical, db=self.d.nsn, append=True):
            raise StoreCorrupted(f"namespace id {number} is already taken")
        return nsid

    # -- record versions ---------------------------------------------------------------------

    def _set_count(self, nsid: bytes, seq: int, value: int) -> None:
        """Write ``cnt[N S]``: the count and the last position in ``time`` (as cached)."""
        self._counts[nsid] = value
        key = cnt_key(nsid, seq)
        self.txn.put(key, cnt_value(key, value, self._time_last(nsid)), db=self.d.cnt)

    def _time_last(self, nsid: bytes) -> bytes:
        """The greatest ``T S`` in ``time`` for namespace ``nsid`` now (b"" if none); cached."""
        found = self._max.get(nsid)
        if found is not None:
            return found
        cur = self.txn.cursor(db=self.d.time)
        following = nsid_of(nsid_number(nsid) + 1)
        ok = cur.prev() if cur.set_range(following) else cur.last()
        key = cur.key() if ok else b""
        found = bytes(key[POSITION]) if key[:NSID_LEN] == nsid else b""
        self._max[nsid] = found
        return found

    def _entered_time(self, nsid: bytes, position: bytes) -> None:
        if position > self._time_last(nsid):
            self._max[nsid] = position

    def put_version(
        self,
        seq: int,
        nsid: bytes,
        idk: bytes,
        tsk: bytes,
        *,
        replaces: int | None = None,
        expires_at: float | None = None,
        erased: bool = False,
        crc: bytes | None = None,
    ) -> None:
        """Fold a put: of a record that is not live, or (``replaces``) replacing the live version
        put at that seq, ended here; with an expiry (``exv``); of erased content (``erased``).
        ``crc``: the CRC-32 of its payload, which the index entries keep (default: computed from
        the frame the log holds at ``seq``, appended by the caller)."""
        if replaces is not None:
            newest = self.newest_each(nsid, (idk,))[0]
            if newest is None or newest[1] != LIVE or newest[0] != replaces:
                raise FoldError(seq, f"event {seq}: replaces version {replaces}, which is not the live one")
            counted = self._end(seq, nsid, idk, replaces, newest[2], newest[2:])
            self._counts[nsid] = self.count(nsid) - counted
        if erased:
            self.put_erased(seq, nsid, idk, tsk)
            if expires_at is not None:
                self.txn.put(nsid, b"", db=self.d.exv)  # the marker counts erased versions too
            return
        self.put(seq, nsid, idk, tsk, frame_payload_crc(self.frame(seq), seq) if crc is None else crc)
        if expires_at is not None:
            self.exv_put(nsid, seq, expires_at, idk, tsk)

    def put(self, seq: int, nsid: bytes, idk: bytes, tsk: bytes, crc: bytes) -> None:
        """Fold a put of a record that is not live; ``crc`` the CRC-32 of its payload (4 bytes,
        :func:`~coniti.log.layout.frame_payload_crc`)."""
        txn = self.txn
        vk = ver_key(nsid, idk, seq)
        txn.put(vk, ver_value(vk, LIVE, tsk, b"", crc), db=self.d.ver)
        tk = time_key(nsid, tsk, seq_key(seq))
        txn.put(tk, tver_value(tk, LIVE, idk, crc), db=self.d.tver)
        self._entered_time(nsid, tk[POSITION])
        txn.put(tk, time_value(tk, idk, crc), db=self.d.time)
        self._set_count(nsid, seq, self.count(nsid) + 1)

    def put_many(
        self,
        seq: int,
        frames: Sequence[bytes],
        nsids: Sequence[bytes],
        idks: Sequence[bytes],
        tsks: Sequence[bytes],
        crcs: Sequence[bytes],
    ) -> None:
        """Append ``frames`` as events ``seq, seq + 1, ...`` and fold each as a put of a record that
        is not live, row ``i`` of the columns being event ``i``'s namespace id, id key, timestamp
        key and payload CRC ``P`` (:func:`payload_crcs` of the payloads the frames carry): the same
        writes as :meth:`append` then :meth:`put` for each in turn (bulk writes). The entries are
        built first (:func:`~coniti.log.layout.put_entries`), then each table gets its entries in
        one ``putmulti`` (the log's in append mode)."""
        if len(frames) == 1:  # five putmulti calls cost more than they save
            self.append(seq, frames[0])
            self.put(seq, nsids[0], idks[0], tsks[0], crcs[0])
            return
        entries = put_entries(seq, frames, nsids, idks, tsks, crcs, self._before_run)
        counts, last = self._counts, self._max
        for nsid, (count, top) in entries.after.items():
            counts[nsid], last[nsid] = count, top
        txn, d = self.txn, self.d
        if txn.cursor(db=d.log).putmulti(entries.log, append=True)[1] != len(frames):
            raise StoreCorrupted(
                f"events {seq} to {seq + len(frames) - 1} cannot be appended: the log already holds one or later"
            )
        txn.cursor(db=d.ver).putmulti(entries.ver)
        txn.cursor(db=d.tver).putmulti(entries.tver)
        txn.cursor(db=d.time).putmulti(entries.time)
        txn.cursor(db=d.cnt).putmulti(entries.cnt)

    def _before_run(self, nsid: bytes) -> tuple[int, bytes]:
        """Namespace ``nsid``'s live record count and last position in ``time`` (for :func:`put_entries`)."""
        return self.count(nsid), self._time_last(nsid)

    def put_erased(self, seq: int, nsid: bytes, idk: bytes, tsk: bytes) -> None:
        """Fold a put whose content was erased: a version that history and the fold of its end find
        (``ver``, ``time``), but no read sees (no ``tver`` entry, not counted)."""
        txn = self.txn
        vk = ver_key(nsid, idk, seq)
        txn.put(vk, ver_value(vk, LIVE, tsk, b"", NO_PAYLOAD), db=self.d.ver)
        tk = time_key(nsid, tsk, seq_key(seq))
        self._entered_time(nsid, tk[POSITION])
        txn.put(tk, time_value(tk, idk, NO_PAYLOAD), db=self.d.time)
        self._set_count(nsid, seq, self.count(nsid))

    def _end(self, seq: int, nsid: bytes, idk: bytes, put_seq: int, tsk: bytes, rest: tuple[bytes, bytes, bytes] | None = None) -> bool:
        """End a version at ``seq``; returns whether it was counted (False: erased). A version with an expiry
        keeps it in its ``ver`` value, and its ``exv`` entry records the end. ``rest``: its ``ver`` value's
        ``(T, X or b"", P)`` as read in this transaction (None: read here)."""
        txn = self.txn
        end = seq_key(seq)
        crc = self._end_ver(nsid, idk, put_seq, end, rest)
        tk = time_key(nsid, tsk, seq_key(put_seq))
        counted = txn.get(tk, db=self.d.tver) is not None
        if counted:
            txn.put(tk, tver_value(tk, end, idk, crc), db=self.d.tver)
        was_last = tk[POSITION] == self._time_last(nsid)
        txn.delete(tk, db=self.d.time)
        if was_last:
            del self._max[nsid]  # found again from ``time`` when the count is written
        return counted

    def _end_ver(self, nsid: bytes, idk: bytes, put_seq: int, end: bytes, rest: tuple[bytes, bytes, bytes] | None = None) -> bytes:
        """Write ``end`` into the ``ver`` value of the version put at ``put_seq``, keeping its expiry (and
        ending its ``exv`` entry) if it has one (``rest``: as :meth:`_end`'s); returns its payload CRC ``P``."""
        key = ver_key(nsid, idk, put_seq)
        if rest is None:
            _, tsk, xk, crc = self._ver_parts(key, self.txn.get(key, db=self.d.ver))
        else:
            tsk, xk, crc = rest
        if xk:
            xkey = exv_key(nsid, xk, put_seq)
            if self.txn.get(xkey, db=self.d.exv) is not None:
                self.txn.put(xkey, sealed(xkey, end), db=self.d.exv)
        self.txn.put(key, ver_value(key, end, tsk, xk, crc), db=self.d.ver)
        return crc

    def delete(self, seq: int, nsid: bytes, idk: bytes) -> bool:
        """Fold a delete (or erase): end the live version. False if the record is not live."""
        latest = self.latest(nsid, idk)
        if latest is None or not latest[1]:
            return False
        self.end_live(seq, nsid, idk, latest[0], latest[2])
        return True

    def end_live(self, seq: int, nsid: bytes, idk: bytes, put_seq: int, tsk: bytes) -> None:
        """Fold a delete of a record whose live version (put at ``put_seq``, timestamp key
        ``tsk``, as :meth:`latest` found it in this transaction) the caller knows: end it."""
        counted = self._end(seq, nsid, idk, put_seq, tsk)
        self._set_count(nsid, seq, self.count(nsid) - counted)

    def end_many(self, first: int, nsid: bytes, ended: Sequence[tuple[bytes, Version]]) -> None:
        """Fold the deletes of events ``first, first + 1, ...`` of live records of ``nsid``, each
        ``(id key, its version as :meth:`newest_each` read it in this transaction)``, none twice: the
        writes of :meth:`end_live` for each in turn, the ``ver``, ``tver`` and ``cnt`` entries in one
        ``putmulti`` each at the end (no later delete reads them: each version has its own keys)."""
        txn, d = self.txn, self.d
        vers, tvers, cnts = [], [], []  # entries (key, value), one kind each
        count, last = self.count(nsid), self._time_last(nsid)
        for seq, (idk, (put_seq, _, tsk, xk, crc)) in enumerate(ended, first):
            end = seq_key(seq)
            key = ver_key(nsid, idk, put_seq)
            if xk:
                xkey = exv_key(nsid, xk, put_seq)
                if txn.get(xkey, db=d.exv) is not None:
                    txn.put(xkey, sealed(xkey, end), db=d.exv)
            vers.append((key, ver_value(key, end, tsk, xk, crc)))
            tk = time_key(nsid, tsk, seq_key(put_seq))
            if txn.get(tk, db=d.tver) is not None:  # counted (not erased)
                tvers.append((tk, tver_value(tk, end, idk, crc)))
                count -= 1
            txn.delete(tk, db=d.time)
            if tk[POSITION] == last:
                del self._max[nsid]  # found again from ``time``
                last = self._time_last(nsid)
            ck = cnt_key(nsid, seq)
            cnts.append((ck, cnt_value(ck, count, last)))
        self._counts[nsid] = count
        txn.cursor(db=d.ver).putmulti(vers)
        txn.cursor(db=d.tver).putmulti(tvers)
        txn.cursor(db=d.cnt).putmulti(cnts)

    def clear(self, seq: int, nsid: bytes) -> int:
        """Fold a clear: end every live version of the namespace. Returns how many."""
        txn = self.txn
        end = seq_key(seq)
        cur = txn.cursor(db=self.d.time)
        removed = 0
        if cur.set_range(nsid):
            while True:
                key = cur.key()
                if key[:NSID_LEN] != nsid:
                    break
                body = opened(key, cur.value(), SEALS.time)
                if body is None or len(key) != KEY_NTS:
                    raise StoreCorrupted(f"the time index of namespace {self.label(nsid)} is damaged")
                idk = body[:-SEAL]
                crc = self._end_ver(nsid, idk, seq_from_key(key[SK]), end)
                if txn.get(key, db=self.d.tver) is not None:
                    txn.put(key, tver_value(key, end, idk, crc), db=self.d.tver)
                    removed += 1
                if not cur.delete() or not cur.key():
                    break
        self._max[nsid] = b""
        self._set_count(nsid, seq, 0)
        return removed

    def unindex_version(self, nsid: bytes, put_seq: int, end_seq: int, tsk: bytes) -> None:
        """Make the version put at ``put_seq`` (ended at ``end_seq``, 0 if live) what the fold of an
        erased put gives: drop its ``tver`` entry, its ``exv`` entry and its share of every ``cnt``
        entry from ``put_seq`` up to (not including) its end; its ``ver`` entry (and ``time`` entry,
        while live) stay, with the payload CRC of no payload and (``ver``) without the expiry."""
        txn = self.txn
        tk = time_key(nsid, tsk, seq_key(put_seq))
        indexed = txn.get(tk, db=self.d.tver)
        if indexed is None:
            return  # already unindexed
        body = opened(tk, indexed, SEALS.tver)
        if body is None:
            raise StoreCorrupted(f"the tver entry of event {put_seq} in namespace {self.label(nsid)} is damaged")
        txn.delete(tk, db=self.d.tver)
        idk = body[SEQ_LEN:-SEAL]
        vk = ver_key(nsid, idk, put_seq)
        end, _, xk, _ = self._ver_parts(vk, txn.get(vk, db=self.d.ver))
        txn.put(vk, ver_value(vk, end, tsk, b"", NO_PAYLOAD), db=self.d.ver)
        if end == LIVE:
            txn.put(tk, time_value(tk, idk, NO_PAYLOAD), db=self.d.time)
        if xk:
            txn.delete(exv_key(nsid, xk, put_seq), db=self.d.exv)
        lo = cnt_key(nsid, put_seq)
        hi = cnt_key(nsid, end_seq or MAX_SEQ)
        cur = txn.cursor(db=self.d.cnt)
        changed: list[tuple[bytes, bytes]] = []
        if cur.set_range(lo):
            for key, value in cur.iternext(keys=True, values=True):
                if key >= hi or key[:NSID_LEN] != nsid:
                    break
                body = unseal(key, value, CNT_BODIES, False)
                if body is None:
                    raise StoreCorrupted(f"the record count of namespace {self.label(nsid)} is damaged")
                changed.append((bytes(key), cnt_recount(key, body, -1)))
        for key, value in changed:
            txn.put(key, value, db=self.d.cnt)
        self._counts.pop(nsid, None)

    def exv_put(self, nsid: bytes, seq: int, expires_at: float, idk: bytes, tsk: bytes) -> None:
        """Record the expiry of the live version put at ``seq``: its ``exv`` entry, and the expiry
        key after the timestamp key in its ``ver`` value (where the fold finds it when the version
        ends, without reading the log)."""
        xk = ts_key(expires_at)
        self.txn.put(nsid, b"", db=self.d.exv)  # the marker: N holds expiring versions
        xkey = exv_key(nsid, xk, seq)
        self.txn.put(xkey, sealed(xkey, LIVE), db=self.d.exv)
        key = ver_key(nsid, idk, seq)
        crc = self._ver_parts(key, self.txn.get(key, db=self.d.ver))[3]
        self.txn.put(key, ver_value(key, LIVE, tsk, xk, crc), db=self.d.ver)

    # -- metadata, erasures, op ids, feedback ------------------------------------------------

    def erasure(self, seq: int, nsid: bytes, idk: bytes) -> None:
        """Fold the receipt of an erase event (``erx``)."""
        self.txn.put(erx_key(nsid, idk, seq), b"", db=self.d.erx)

    def meta(self, seq: int, nsid: bytes, mk: bytes) -> None:
        """Fold a metadata write (the value stays in the event), or the erase event of a key."""
        self.txn.put(meta_key(nsid, mk, seq), b"", db=self.d.meta)

    def op(self, seq: int, nsid: bytes, op_id: str) -> None:
        """Fold an op event."""
        self.txn.put(opx_key(nsid, op_id), seq_key(seq), db=self.d.opx)

    def feedback(self, seq: int, nsid: bytes, idk: bytes) -> None:
        """Fold a feedback event (``fbk``)."""
        self.txn.put(fbk_key(nsid, idk, seq), b"", db=self.d.fbk)

    # -- the fold of one event ---------------------------------------------------------------

    def fold(self, event: LogEvent, prev_at: float | None, frame: bytes | None = None) -> None:
        """Apply one decoded event (``prev_at``: the recorded time of the one before, None for the
        first); ``frame`` its stored frame (default: the one the log holds). Raises
        :class:`FoldError` if it does not apply, or if a put's payload does not match its digest
        (the index entries seal the payload's CRC, so a fold must not seal a damaged one)."""
        seq = event.seq
        if prev_at is not None and event.at < prev_at:
            raise FoldError(seq, f"event {seq}: recorded time goes backwards")
        self.tree().append(seq, event.hash, event.prev)
        namespace = event.namespace
        kind = event.kind
        if kind == PUT:
            assert event.id is not None and event.timestamp is not None
            nsid = self._interned.get(namespace) or self.intern(ns_bytes(namespace))
            self._interned[namespace] = nsid
            idk = name_key(event.id)
            if event.replaces is None:
                latest = self.latest(nsid, idk)
                if latest is not None and latest[1]:
                    raise FoldError(seq, f"event {seq}: put of record {event.id!r}, which is already live")
            crc = None
            if not event.erased:
                try:
                    crc = payload_crc(payload_view(self.frame(seq) if frame is None else frame, checked=True))
                except ValueError as exc:
                    raise FoldError(seq, f"event {seq}: {exc}") from exc
            self.put_version(
                seq, nsid, idk, ts_key(event.timestamp), replaces=event.replaces,
                expires_at=event.expires_at, erased=event.erased, crc=crc,
            )
        elif kind == ERASE and event.key is not None:
            found = self._interned.get(namespace) or self.nsid(ns_bytes(namespace))
            if found is not None:
                self.meta(seq, found, name_key(event.key))
        elif kind in (DELETE, ERASE):
            assert event.id is not None
            found = self._interned.get(namespace) or self.nsid(ns_bytes(namespace))
            idk = name_key(event.id)
            deleted = found is not None and self.delete(seq, found, idk)
            if kind == DELETE and not deleted:
                raise FoldError(seq, f"event {seq}: delete of record {event.id!r}, which is not live")
            if kind == ERASE and found is not None:
                self.erasure(seq, found, idk)
        elif kind == CLEAR:
            found = self._interned.get(namespace) or self.nsid(ns_bytes(namespace))
            if found is not None:
                self.clear(seq, found)
        elif kind == META:
            assert event.key is not None
            nsid = self._interned.get(namespace) or self.intern(ns_bytes(namespace))
            self._interned[namespace] = nsid
            self.meta(seq, nsid, name_key(event.key))
        elif kind == OP:
            assert event.op_id is not None
            nsid = self._interned.get(namespace) or self.intern(ns_bytes(namespace))
            self._interned[namespace] = nsid
            if self.op_seq(nsid, event.op_id) is not None:
                raise FoldError(seq, f"event {seq}: op id {event.op_id!r} is already recorded")
            self.op(seq, nsid, event.op_id)
        elif kind == FEEDBACK:
            assert event.id is not None
            nsid = self._interned.get(namespace) or self.intern(ns_bytes(namespace))
            self._interned[namespace] = nsid
            self.feedback(seq, nsid, name_key(event.id))
