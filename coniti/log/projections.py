"""Projections: the indexes derived from the log, folded in the same write transaction as each append.

Sub-databases (keys and values in ``log/FORMAT.md``; ``N`` = 4-byte namespace id, ``I`` = name key of
a record id, ``T`` = timestamp key, ``S`` = sequence key, ``~S`` = inverted sequence key)::

    ns    namespace key -> N                 namespace table (ids assigned 0, 1, ... in log order)
    nsn   N -> canonical namespace bytes
    ver   N I ~S -> end S + T (+ X) + P + C  every version of a record; end 0 = live; X its expiry
    tver  N T S -> end S + I + P + C         every version in (timestamp, write order)
    time  N T S -> I + P + C                 live records in (timestamp, write order)
    meta  N K ~S -> b""                      every metadata write (value in the event at S) and
                                             every erasure of the key (its erase event at S)
    cnt   N S -> u64 + (T S' or b"")         after each event S that changes N's records: N's live
                                             record count, and the last position in ``time`` of
                                             N (none: empty) which bounds as-of scans
    erx   N I S -> b""                       every erase event of a record
    exv   N X S -> end S                     every (not erased) version with an expiry, by expiry
                                             time ``X`` (a timestamp key); end 0 = live; and
          N -> b""                           the marker of a namespace that has had one
    opx   N O -> S                           the op event of each op id ``O`` (a name key)
    fbk   N I S -> b""                       every feedback event of a record (weight in the event)

The fold is a pure function of the events in order: :meth:`Projections.fold` (used by ``rebuild`` and
``verify``) and the write path call the same primitives. As-of reads (``as_of=S``) are index walks:
a version is visible at S when its put is at or before S and its end is 0 or after S. The event of
a recorded time is found by bisecting the log (recorded times never decrease along it).

Layout format 1 (stores written before layout 2) also had ``atix`` (recorded time -> first seq)
and ``tmax`` (N S -> the last ``time`` position), and 8-byte ``cnt`` values. Such a store reads
exactly here (an 8-byte ``cnt`` value leaves as-of scans unbounded); a writable open rebuilds it
into the current layout (:data:`coniti.log.store.LAYOUT_VERSION`).

An *erased* version (its put frame has no payload) has a ``ver`` entry (so history and the fold of
its end still find it) but no ``tver`` entry and no share in ``cnt``: no read, now or as of any
point, returns or counts it.

Layout 5 (:data:`~coniti.log.store.LAYOUT_VERSION`): ``P`` is the CRC-32C of the put's payload
bytes (0 once erased) and ``C`` a seal over the table's name, the key and the value
(:func:`_sealed`), so each entry proves itself: reads check the seal and the payload's CRC instead
of confirming each entry by the other index and hashing the payload. A layout-4 store (the same
with zlib's CRC-32, :data:`ZLIB_SEALS`) opened read-only is read as it is, and a writable open
reseals it (:meth:`Projections.reseal`). A layout-3 store (no ``P``, no ``C``) opened read-only is
read as it is, with those confirmations (:meth:`Projections._row`).
"""

from __future__ import annotations

import math
import struct
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from itertools import takewhile
from typing import Any, NamedTuple

import msgpack
from crc32c import crc32c

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
    decode_envelope,
    decode_op,
    payload_view,
    read_content,
    read_feedback,
    read_put,
    recorded_at,
    split_frame,
)
from coniti.log.keys import (
    INLINE_NAME,
    MAX_SEQ,
    NSID_LEN,
    SEQ_LEN,
    Namespace,
    decode_ts_key,
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
    unpack_position,
)
from coniti.log.store import LAYOUT_VERSION, LOG_DB, SYS_DB, SYS_HEAD

__all__ = ["Dbs", "Head", "Projections", "Row", "payload_crcs"]

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_F64 = struct.Struct(">d")
_tuple_new = tuple.__new__

# -- the index layout: every key and value of the sub-databases above is built and parsed here ------

_LIVE = bytes(8)
"""The end ``E`` of a live version in ``ver`` and ``tver`` values (no event ends it)."""
_TS_END = NSID_LEN + 8
_T = slice(NSID_LEN, _TS_END)
"""The timestamp key ``T`` in a ``time``/``tver`` key ``N T S``."""
_S = slice(_TS_END, None)
"""The sequence key ``S`` in a ``time``/``tver`` key ``N T S`` (the log's key of the put)."""
_POSITION = slice(NSID_LEN, None)
"""The position ``T S`` of a record in (timestamp, write order): a ``time``/``tver`` key after ``N``."""
_PAST_KEY = b"\xff" * 17
"""After ``N``: sorts after every ``T S`` (16 bytes), so ``N + _PAST_KEY`` bounds the keys of ``N``."""
_TS_ZERO = ts_key(0.0)
_TV_END = SEQ_LEN + 8
"""End of the timestamp key in a ``ver`` value ``E T`` (a version with an expiry has ``E T X``);
the ``E T`` is what the read checks compare."""
_XK_END = _TV_END + 8
"""End of the expiry key ``X`` in a ``ver`` value ``E T X``."""
_INLINE = b"\x00"
"""The first byte of an inline (not hashed) name key."""
_KEY_NTS = _TS_END + SEQ_LEN
"""The length of a ``time``/``tver`` key ``N T S``."""


def _damaged(
    names: list[str] | str, idk: bytes, record_id: str | None, seq: int, why: str
) -> StoreCorrupted:
    """The error for a read that found record ``record_id`` (else the one of id key ``idk``, or the
    put at event ``seq``) of namespace ``names`` (or its label, :meth:`Projections._label`)
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


def _ver_key(nsid: bytes, idk: bytes, seq: int) -> bytes:
    """``ver`` key ``N I ~S`` of the version put at ``seq``; its value is ``E T`` (:data:`_LIVE`
    or the ending event's sequence key, then the timestamp key)."""
    return nsid + idk + inv_seq_key(seq)


def _meta_key(nsid: bytes, mk: bytes, seq: int) -> bytes:
    """``meta`` key ``N K ~S`` of the metadata write at ``seq`` (value empty)."""
    return nsid + mk + inv_seq_key(seq)


def _erx_key(nsid: bytes, idk: bytes, seq: int) -> bytes:
    """``erx`` key ``N I S`` of the erase event ``seq`` of a record (value empty)."""
    return nsid + idk + seq_key(seq)


def _time_key(nsid: bytes, tsk: bytes, sk: bytes) -> bytes:
    """``time`` and ``tver`` key ``N T S`` (``sk`` the put's sequence key); ``time`` values are
    ``I``, ``tver`` values ``E I``."""
    return nsid + tsk + sk


def _position(tsk: bytes, seq: int) -> bytes:
    """The position ``T S`` (see :data:`_POSITION`) of timestamp key ``tsk`` and sequence ``seq``."""
    return tsk + seq_key(seq)


def _cnt_key(nsid: bytes, seq: int) -> bytes:
    """``cnt`` key ``N S``: the state of namespace ``N`` right after event ``seq``."""
    return nsid + seq_key(seq)


_CRC = struct.Struct(">I")
_SEAL = _CRC.size
_crc = crc32c
"""The CRC of layout 5 (:data:`~coniti.log.store.LAYOUT_VERSION`): CRC-32C (Castagnoli), of every
payload CRC ``P`` and seal ``C``. Layouts 3 and 4 used zlib's CRC-32 (:class:`Dbs` picks the one
of the store's layout for reads; writes are always in the current layout)."""
_unpack_crc = _CRC.unpack_from
_unpack_pc = struct.Struct(">II").unpack_from
"""``(P, C)``: the payload CRC and the seal that end a ``ver``, ``tver`` or ``time`` value."""
_PC = 2 * _SEAL
"""The length of the ``P C`` that ends a ``ver``, ``tver`` or ``time`` value."""


def _sealed(key: bytes, body: bytes, seed: int = 0) -> bytes:
    """A sealed value: ``body`` then the CRC of ``key ‖ body``, for ``cnt`` and ``exv``; for
    ``ver``, ``tver`` and ``time`` ``seed`` is the CRC of the sub-database's name (:data:`_VER`,
    ...), so the seal covers ``name ‖ key ‖ body`` and an entry of one of them never passes for an
    entry of another."""
    return body + _CRC.pack(_crc(key + body, seed))  # one call: the CRC of key ‖ body


_VER = _crc(b"ver")
_TVER = _crc(b"tver")
_TIME = _crc(b"time")
_NO_PAYLOAD = _CRC.pack(0)
"""The payload CRC ``P`` of an erased put (the CRC of no bytes)."""
_VER_LENGTHS = (_TV_END + 2 * _SEAL, _XK_END + 2 * _SEAL)
"""The lengths of a sealed ``ver`` value: ``E T P C`` and ``E T X P C``."""


class Seals(NamedTuple):
    """How one layout computes its CRCs: the function (``crc(data, start)``) and the seeds of the
    seals of ``ver``, ``tver`` and ``time`` (the CRC of the sub-database's name)."""

    crc: Callable[[Any, int], int]
    ver: int
    tver: int
    time: int


SEALS = Seals(_crc, _VER, _TVER, _TIME)
"""Layout 5's CRCs (CRC-32C)."""
ZLIB_SEALS = Seals(zlib.crc32, zlib.crc32(b"ver"), zlib.crc32(b"tver"), zlib.crc32(b"time"))
"""Layout 4's CRCs (zlib's CRC-32; layout 3 sealed ``cnt`` and ``exv`` with it)."""


def _opened(key: bytes, value: bytes, seed: int, crc: Callable[[Any, int], int] = _crc) -> bytes | None:
    """The body of the sealed ``ver``/``tver``/``time`` value ``value`` of ``key`` (``seed``: its
    sub-database, see :func:`_sealed`; ``crc`` the layout's CRC), or None if it is too short or its
    seal does not hold."""
    n = len(value) - _SEAL
    if n < _SEAL or _unpack_crc(value, n)[0] != crc(key + value[:n], seed):
        return None
    return value[:n]


def _payload_crc(frame: bytes, seq: int) -> bytes:
    """The payload CRC ``P`` (4 bytes) of the put frame ``frame`` of event ``seq`` being written."""
    try:
        return _CRC.pack(_crc(payload_view(frame)))
    except ValueError as exc:
        raise StoreCorrupted(f"event {seq} is malformed: {exc}") from exc


def payload_crcs(payloads: Sequence[bytes]) -> list[bytes]:
    """The payload CRC ``P`` (4 bytes) of each put payload of ``payloads``, being written: what
    :func:`_payload_crc` reads from the frame that carries it (bulk writes)."""
    pack, crc = _CRC.pack, _crc
    return [pack(crc(payload)) for payload in payloads]


def _ver_value(key: bytes, end: bytes, tsk: bytes, xk: bytes, crc: bytes) -> bytes:
    """``ver`` value of ``key``: ``E T`` (``X`` if the version expires), the payload CRC ``P`` of
    its put (:data:`_NO_PAYLOAD` once erased), sealed."""
    return _sealed(key, end + tsk + xk + crc, _VER)


def _tver_value(key: bytes, end: bytes, idk: bytes, crc: bytes) -> bytes:
    """``tver`` value of ``key``: ``E I P``, sealed."""
    return _sealed(key, end + idk + crc, _TVER)


def _time_value(key: bytes, idk: bytes, crc: bytes) -> bytes:
    """``time`` value of ``key``: ``I P``, sealed."""
    return _sealed(key, idk + crc, _TIME)


def _unseal(
    key: bytes, value: bytes, bodies: tuple[int, ...], legacy: bool, crc: Callable[[Any, int], int] = _crc
) -> bytes | None:
    """The body of the sealed value ``value`` of ``key`` (one of the lengths ``bodies``; ``crc`` the
    layout's CRC), or None if its CRC or length is wrong. ``legacy`` (a store of layout 1 or 2,
    read as it is): values of those lengths carry no CRC and are taken as they are."""
    if legacy and len(value) in bodies:
        return bytes(value)
    body = bytes(value[:-_SEAL])
    if len(body) not in bodies or _CRC.unpack_from(value, len(body))[0] != crc(key + body, 0):
        return None
    return body


_CNT_BODIES = (8, 24)
"""The lengths of a ``cnt`` body: the count alone (no position, or layout 1), or count and position."""


def _cnt_value(key: bytes, count: int, last: bytes) -> bytes:
    """``cnt`` value of ``key``: the live record count (u64) and the last position in ``time`` (b"":
    none), sealed (:func:`_sealed`)."""
    return _sealed(key, _U64.pack(count) + last)


def _cnt_count(body: bytes) -> int:
    """The count of a ``cnt`` body (an unsealed value)."""
    return int(_U64.unpack_from(body)[0])


def _cnt_recount(key: bytes, body: bytes, delta: int) -> bytes:
    """The ``cnt`` value of ``key`` whose body is ``body``, with its count changed by ``delta`` and
    its position kept."""
    return _sealed(key, _U64.pack(_cnt_count(body) + delta) + body[8:])


def _cnt_last(body: bytes) -> bytes | None:
    """The last position of a ``cnt`` body (b"": none), or None for an 8-byte value of layout 1."""
    return None if len(body) == 8 else body[8:]


def _is_entry(key: bytes, prefix: bytes) -> bool:
    """Whether ``key`` is ``prefix`` and a sequence key (``S`` or ``~S``): an entry of one record or
    metadata key ``prefix`` = ``N I`` or ``N K`` in ``ver``, ``meta`` or ``erx``."""
    return len(key) == len(prefix) + SEQ_LEN and key.startswith(prefix)


def _seek_newest(cur: Any, prefix: bytes, start: bytes) -> bool:
    """Position ``cur`` on the first key at or after ``start`` and say whether it is an entry of
    ``prefix``: a ``ver``/``meta`` lookup (``start`` is ``prefix``, or ``prefix ~X`` as of ``X``)."""
    return bool(cur.set_range(start)) and _is_entry(cur.key(), prefix)


def _sound_landing(
    cur: Any, probe: bytes, landed: bool, genuine: Callable[[bytes, bytes], bool] | None = None
) -> bool:
    """After ``cur.set_range(probe)`` (``landed``: it found a key), whether the key landed on
    sorts at or after ``probe`` and the key before the landing place sorts before ``probe`` and
    (``genuine`` given) is ``genuine(key, value)``; ``cur`` is left where it landed. A damaged
    branch key (a separator, which no seal covers) can make LMDB's search land on the first key of
    the page after the one it was sent to: *before* the probe, or past keys at or after it, on a
    genuine entry; only the order of the landing place and its predecessor tells."""
    if landed and cur.key() < probe:
        return False
    if not (cur.prev() if landed else cur.last()):
        if landed:
            cur.first()
        return True
    sound = cur.key() < probe and (genuine is None or genuine(cur.key(), cur.value()))
    if landed:
        cur.next()
    return bool(sound)


def _under(cur: Any, prefix: bytes, label: Callable[[bytes], str]) -> Iterator[tuple[bytes, bytes]]:
    """``(sequence key, value)`` of every entry of ``prefix`` (see :func:`_is_entry`) in key order;
    :class:`StoreCorrupted` naming the namespace (``label(N)``) and the name if the lookup of
    ``prefix`` was misdirected (:func:`_sound_landing`: these tables, ``meta``, ``erx`` and
    ``fbk``, have no seals, so only the order of the landing place is checked)."""
    landed = cur.set_range(prefix)
    if not _sound_landing(cur, prefix, landed):
        raise _damaged(label(prefix[:NSID_LEN]), prefix[NSID_LEN:], None, 0, "an index is out of order near it")
    if landed:
        for key, value in cur:
            if not _is_entry(key, prefix):
                return
            yield key[-SEQ_LEN:], value


def _scan_stop(nsid: bytes, end: float | None) -> bytes:
    """The key a walk of ``time`` or ``tver`` from within namespace ``nsid`` stops at: every key
    from the walk's start on is ``N T S`` with ``N >= nsid``, so it is in ``nsid`` and has a
    timestamp before ``end`` (if any) iff it sorts before this one key."""
    return nsid + (ts_key(end) if end is not None else _PAST_KEY)


def _scan_start(nsid: bytes, start: float | None, after: tuple[float, int] | None) -> bytes:
    """The first key a scan of namespace ``nsid`` from timestamp ``start`` strictly after the
    position ``after`` = ``(timestamp, seq)`` may return, in ``time`` or ``tver``."""
    first = nsid + ts_key(start) if start is not None else nsid
    if after is not None:
        first = max(first, nsid + _position(ts_key(after[0]), after[1] + 1))
    return first


def _split_position(position: bytes) -> tuple[float, int]:
    """The (timestamp, seq) of a position ``T S``."""
    return decode_ts_key(position[:8]), seq_from_key(position[8:])


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


class Dbs:
    """The sub-database handles of one environment by name (built once, shared by transactions).
    ``log`` and ``sys`` are None for a scratch environment holding projections only."""

    __slots__ = (
        "cnt", "erx", "exv", "fbk", "legacy", "log", "meta", "ns", "nsn", "opx", "seals", "sealed", "sys",
        "time", "tver", "ver",
    )

    def __init__(self, dbs: dict[bytes, Any], *, layout: int = LAYOUT_VERSION) -> None:
        self.legacy = layout < 3
        """A store of layout 1 or 2 opened read-only: its ``cnt`` and ``exv`` values carry no CRC."""
        self.sealed = layout >= 4
        """Layout 4 on: each ``ver``, ``tver`` and ``time`` value carries its put's payload CRC and a
        seal, which reads check instead of confirming the entry by the other index. Older layouts
        (opened read-only) are read as they are, with those confirmations."""
        self.seals = SEALS if layout >= 5 else ZLIB_SEALS
        """The CRCs of the store's layout, which reads check: CRC-32C from layout 5, zlib's CRC-32
        before (a layout-4 store opened read-only; layout 3's ``cnt`` and ``exv`` seals)."""
        self.log = dbs.get(LOG_DB)
        self.sys = dbs.get(SYS_DB)
        self.ns = dbs[b"ns"]
        self.nsn = dbs[b"nsn"]
        self.ver = dbs[b"ver"]
        self.tver = dbs[b"tver"]
        self.time = dbs[b"time"]
        self.meta = dbs[b"meta"]
        self.cnt = dbs[b"cnt"]
        self.erx = dbs.get(b"erx")
        self.exv = dbs.get(b"exv")
        self.opx = dbs.get(b"opx")
        self.fbk = dbs.get(b"fbk")


class Projections:
    """The projection sub-databases seen through one LMDB transaction (read or write).

    Write methods need a write transaction. Nothing is cached beyond the transaction.
    """

    __slots__ = ("_counts", "_interned", "_max", "_ver_cur", "d", "txn")

    def __init__(self, txn: Any, dbs: Dbs) -> None:
        self.txn = txn
        self.d = dbs
        self._counts: dict[bytes, int] = {}
        self._max: dict[bytes, bytes] = {}
        self._ver_cur: Any = None
        self._interned: dict[Namespace, bytes] = {}

    # -- head and log --------------------------------------------------------------------------

    def head(self) -> Head:
        """The head event as recorded in the system table."""
        return Head.decode(self.txn.get(SYS_HEAD, db=self.d.sys))

    def set_head(self, head: Head) -> None:
        self.txn.put(SYS_HEAD, head.encode(), db=self.d.sys)

    def frame(self, seq: int) -> bytes:
        """The stored frame of event ``seq``; :class:`StoreCorrupted` if the log lacks it."""
        raw = self.txn.get(seq_key(seq), db=self.d.log)
        if raw is None:
            raise _missing(seq)
        return bytes(raw)

    def replace_frame(self, seq: int, frame: bytes) -> None:
        """Overwrite the stored frame of event ``seq`` (erasure: the same envelope and digest, no
        payload)."""
        self.txn.put(seq_key(seq), frame, db=self.d.log)

    def append(self, seq: int, frame: bytes) -> None:
        """Append event ``seq`` to the log (LMDB append mode: it must sort after every key)."""
        if not self.txn.put(seq_key(seq), frame, db=self.d.log, append=True):
            raise StoreCorrupted(f"event {seq} cannot be appended: the log already holds it or later")

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

    # -- namespaces ----------------------------------------------------------------------------

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

    def intern(self, canonical: bytes) -> bytes:
        """The namespace id of ``canonical``, assigning the next one if it is new."""
        key = ns_key(canonical)
        found = self.txn.get(key, db=self.d.ns)
        if found is not None:
            if is_hashed(key) and self.txn.get(found, db=self.d.nsn) != canonical:
                raise StoreError("two namespaces share a SHA-256 key; refusing to mix them")
            return bytes(found)
        cur = self.txn.cursor(db=self.d.nsn)
        number = _U32.unpack(cur.key())[0] + 1 if cur.last() else 0
        nsid = _U32.pack(number)
        self.txn.put(key, nsid, db=self.d.ns)
        if not self.txn.put(nsid, canonical, db=self.d.nsn, append=True):
            raise StoreCorrupted(f"namespace id {number} is already taken")
        return nsid

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
                nsid == _U32.pack(number) and type(namespace) is list
                and all(type(part) is str and part for part in namespace)
                and ns_bytes(namespace) == canonical
                and self.txn.get(ns_key(bytes(canonical)), db=self.d.ns) == nsid
            )
            if not ok:
                raise StoreCorrupted(f"the namespace table is damaged at id {number} ({bytes(nsid).hex()})")
            yield bytes(nsid), tuple(namespace)

    def _label(self, nsid: bytes) -> str:
        """Namespace ``nsid`` for a message (``alice/work``; its id when the table lacks it)."""
        try:
            names = self._names(nsid)
        except StoreCorrupted:
            names = None
        return f"id {nsid.hex()}" if names is None else namespace_text(names)

    # -- versions ------------------------------------------------------------------------------

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
            body = _opened(key, value, seals.ver, seals.crc) if len(value) in _VER_LENGTHS else None
            if body is not None:
                return body[:SEQ_LEN], body[SEQ_LEN:_TV_END], body[_TV_END:-_SEAL], body[-_SEAL:]
        elif value is not None and len(value) in (_TV_END, _XK_END):
            return value[:SEQ_LEN], value[SEQ_LEN:_TV_END], value[_TV_END:], b""
        where = seq_from_inv(key[-SEQ_LEN:]) if len(key) >= NSID_LEN + SEQ_LEN else "?"
        raise StoreCorrupted(
            f"the ver entry of the version put at event {where} in namespace {self._label(key[:NSID_LEN])} "
            "is damaged"
        )

    def latest(self, nsid: bytes, idk: bytes) -> tuple[int, bool, bytes] | None:
        """``(put seq, live, timestamp key)`` of the newest version of a record, or None if it
        never existed."""
        prefix = nsid + idk
        cur = self._vcur()
        if not _seek_newest(cur, prefix, prefix):
            return None
        key = cur.key()
        end, tsk, _, _ = self._ver_parts(key, cur.value())
        return seq_from_inv(key[-SEQ_LEN:]), end == _LIVE, tsk

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
        a diff): the lookup's landing is checked as a get checks it (:func:`_sound_landing`, the
        entry landed on genuine), else :class:`StoreCorrupted`; writes read without it."""
        prefix = nsid + idk
        cur = self._ver_cur or self._vcur()
        probe = prefix if as_of is None else prefix + inv_seq_key(as_of)
        landed = cur.set_range(probe)
        found = landed and _is_entry(cur.key(), prefix)
        if checked and not self._ver_landing_sound(cur, probe, landed):
            raise _damaged(self._label(nsid), idk, None, 0, "the ver index is damaged near it")
        if not found:
            return None
        key = cur.key()
        end, tsk, xk, _ = self._ver_parts(key, cur.value())
        if end != _LIVE and (as_of is None or seq_from_key(end) <= as_of):
            return None
        return seq_from_inv(key[-SEQ_LEN:]), tsk + xk

    def versions(self, nsid: bytes, idk: bytes) -> list[tuple[int, int]]:
        """Every version of a record as ``(put seq, end seq or 0)``, oldest first. The keys around
        the walk must be genuine (see the read checks below), else :class:`StoreCorrupted`."""
        prefix = nsid + idk
        cur = self.txn.cursor(db=self.d.ver)
        out: list[tuple[int, int]] = []
        landed = cur.set_range(prefix)
        if not _sound_landing(cur, prefix, landed, self._genuine_ver):
            raise _damaged(self._label(nsid), idk, None, 0, "the ver index is out of order near it")
        if landed:
            for key, value in cur.iternext(keys=True, values=True):
                if not _is_entry(key, prefix):
                    if not self._genuine_ver(key, value):
                        raise _damaged(self._label(nsid), idk, None, 0, "the ver index is damaged after it")
                    break
                out.append((seq_from_inv(key[-SEQ_LEN:]), seq_from_key(self._ver_parts(key, value)[0])))
        out.reverse()
        return out

    # -- fold primitives (write transaction) ---------------------------------------------------

    def _cnt_entry(self, nsid: bytes, as_of: int | None) -> bytes | None:
        """The body of the last ``cnt`` entry of the namespace (at or before event ``as_of``), its
        CRC checked; :class:`StoreCorrupted` naming the namespace if it is damaged."""
        cur = self.txn.cursor(db=self.d.cnt)
        target = _cnt_key(nsid, MAX_SEQ if as_of is None else as_of + 1)
        legacy = self.d.legacy
        crc = self.d.seals.crc
        landed = cur.set_range(target)
        # One damaged key can misdirect LMDB's search; it is then the entry landed on or the one
        # before it, and both are checked (each value's CRC covers its key), and their order: the
        # entry landed on at or after the target, the one before it before.
        if landed and (
            cur.key() < target or (not legacy and _unseal(cur.key(), cur.value(), _CNT_BODIES, False, crc) is None)
        ):
            raise StoreCorrupted(f"the count index is damaged near namespace {self._label(nsid)}")
        found = cur.prev() if landed else cur.last()
        if not found:
            return None
        key = cur.key()
        body = _unseal(key, cur.value(), _CNT_BODIES, legacy, crc)
        if key >= target or (body is None and key[:NSID_LEN] != nsid):
            raise StoreCorrupted(f"the count index is damaged near namespace {self._label(nsid)}")
        if key[:NSID_LEN] != nsid:
            return None
        if body is None or len(key) != NSID_LEN + SEQ_LEN:
            raise StoreCorrupted(
                f"the record count of namespace {self._label(nsid)} after event "
                f"{seq_from_key(key[-SEQ_LEN:]) if len(key) >= SEQ_LEN else '?'} is damaged"
            )
        return body

    def count(self, nsid: bytes, as_of: int | None = None) -> int:
        """Live records in the namespace now (or right after event ``as_of``)."""
        if as_of is None and nsid in self._counts:
            return self._counts[nsid]
        entry = self._cnt_entry(nsid, as_of)
        value = 0 if entry is None else _cnt_count(entry)
        if as_of is None:
            self._counts[nsid] = value
        return value

    def _set_count(self, nsid: bytes, seq: int, value: int) -> None:
        """Write ``cnt[N S]``: the count and the last position in ``time`` (as cached)."""
        self._counts[nsid] = value
        key = _cnt_key(nsid, seq)
        self.txn.put(key, _cnt_value(key, value, self._time_last(nsid)), db=self.d.cnt)

    def _time_last(self, nsid: bytes) -> bytes:
        """The greatest ``T S`` in ``time`` for namespace ``nsid`` now (b"" if none); cached."""
        found = self._max.get(nsid)
        if found is not None:
            return found
        cur = self.txn.cursor(db=self.d.time)
        following = _U32.pack(_U32.unpack(nsid)[0] + 1)
        ok = cur.prev() if cur.set_range(following) else cur.last()
        key = cur.key() if ok else b""
        found = bytes(key[_POSITION]) if key[:NSID_LEN] == nsid else b""
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
            latest = self.latest(nsid, idk)
            if latest is None or not latest[1] or latest[0] != replaces:
                raise FoldError(seq, f"event {seq}: replaces version {replaces}, which is not the live one")
            counted = self._end(seq, nsid, idk, replaces, latest[2])
            self._counts[nsid] = self.count(nsid) - counted
        if erased:
            self.put_erased(seq, nsid, idk, tsk)
            if expires_at is not None:
                self.txn.put(nsid, b"", db=self.d.exv)  # the marker counts erased versions too
            return
        self.put(seq, nsid, idk, tsk, _payload_crc(self.frame(seq), seq) if crc is None else crc)
        if expires_at is not None:
            self.exv_put(nsid, seq, expires_at, idk, tsk)

    def put(self, seq: int, nsid: bytes, idk: bytes, tsk: bytes, crc: bytes) -> None:
        """Fold a put of a record that is not live; ``crc`` the CRC-32 of its payload (4 bytes,
        :func:`_payload_crc`)."""
        txn = self.txn
        vk = _ver_key(nsid, idk, seq)
        txn.put(vk, _ver_value(vk, _LIVE, tsk, b"", crc), db=self.d.ver)
        tk = _time_key(nsid, tsk, seq_key(seq))
        txn.put(tk, _tver_value(tk, _LIVE, idk, crc), db=self.d.tver)
        self._entered_time(nsid, tk[_POSITION])
        txn.put(tk, _time_value(tk, idk, crc), db=self.d.time)
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
        built first (the ``ver``, ``tver``, ``time`` and ``cnt`` values of :func:`_ver_value`,
        :func:`_tver_value`, :func:`_time_value` and :func:`_cnt_value`, inline), then each table
        gets its entries in one ``putmulti`` (the log's in append mode)."""
        if len(frames) == 1:  # five putmulti calls cost more than they save
            self.append(seq, frames[0])
            self.put(seq, nsids[0], idks[0], tsks[0], crcs[0])
            return
        counts = self._counts
        last = self._max
        seq_key_, u64, seal, crc32 = seq_key, _U64.pack, _CRC.pack, _crc
        live, ver_seed, tver_seed, time_seed, inverted = _LIVE, _VER, _TVER, _TIME, MAX_SEQ
        log: list[tuple[bytes, bytes]] = []
        ver: list[tuple[bytes, bytes]] = []
        tver: list[tuple[bytes, bytes]] = []
        time_: list[tuple[bytes, bytes]] = []
        cnt: list[tuple[bytes, bytes]] = []
        count = -1
        nsid = top = b""
        first = seq
        for frame, row_nsid, idk, tsk, crc in zip(frames, nsids, idks, tsks, crcs, strict=True):
            if row_nsid is not nsid:
                if count >= 0:
                    counts[nsid], last[nsid] = count, top
                nsid = row_nsid
                count = self.count(nsid)
                top = self._time_last(nsid)
            sk = seq_key_(seq)
            log.append((sk, frame))
            vk = nsid + idk + u64(inverted - seq)  # _ver_key
            body = live + tsk + crc
            ver.append((vk, body + seal(crc32(vk + body, ver_seed))))
            position = tsk + sk
            if position > top:
                top = position
            tk = nsid + position  # _time_key
            body = idk + crc
            time_.append((tk, body + seal(crc32(tk + body, time_seed))))
            body = live + body
            tver.append((tk, body + seal(crc32(tk + body, tver_seed))))
            count += 1
            ck = nsid + sk  # _cnt_key
            body = u64(count) + top
            cnt.append((ck, body + seal(crc32(ck + body))))
            seq += 1
        counts[nsid], last[nsid] = count, top
        txn, d = self.txn, self.d
        if txn.cursor(db=d.log).putmulti(log, append=True)[1] != len(log):
            raise StoreCorrupted(f"events {first} to {seq - 1} cannot be appended: the log already holds one or later")
        txn.cursor(db=d.ver).putmulti(ver)
        txn.cursor(db=d.tver).putmulti(tver)
        txn.cursor(db=d.time).putmulti(time_)
        txn.cursor(db=d.cnt).putmulti(cnt)

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

    def put_erased(self, seq: int, nsid: bytes, idk: bytes, tsk: bytes) -> None:
        """Fold a put whose content was erased: a version that history and the fold of its end find
        (``ver``, ``time``), but no read sees (no ``tver`` entry, not counted)."""
        txn = self.txn
        vk = _ver_key(nsid, idk, seq)
        txn.put(vk, _ver_value(vk, _LIVE, tsk, b"", _NO_PAYLOAD), db=self.d.ver)
        tk = _time_key(nsid, tsk, seq_key(seq))
        self._entered_time(nsid, tk[_POSITION])
        txn.put(tk, _time_value(tk, idk, _NO_PAYLOAD), db=self.d.time)
        self._set_count(nsid, seq, self.count(nsid))

    def _end(self, seq: int, nsid: bytes, idk: bytes, put_seq: int, tsk: bytes) -> bool:
        """End a version at ``seq``; returns whether it was counted (False: erased). A version
        with an expiry keeps it in its ``ver`` value, and its ``exv`` entry records the end."""
        txn = self.txn
        end = seq_key(seq)
        crc = self._end_ver(nsid, idk, put_seq, end)
        tk = _time_key(nsid, tsk, seq_key(put_seq))
        counted = txn.get(tk, db=self.d.tver) is not None
        if counted:
            txn.put(tk, _tver_value(tk, end, idk, crc), db=self.d.tver)
        was_last = tk[_POSITION] == self._time_last(nsid)
        txn.delete(tk, db=self.d.time)
        if was_last:
            del self._max[nsid]  # found again from ``time`` when the count is written
        return counted

    def _end_ver(self, nsid: bytes, idk: bytes, put_seq: int, end: bytes) -> bytes:
        """Write the end ``end`` into the ``ver`` value of the version put at ``put_seq``, keeping
        its expiry (and ending its ``exv`` entry) if it has one; returns its payload CRC ``P``."""
        key = _ver_key(nsid, idk, put_seq)
        _, tsk, xk, crc = self._ver_parts(key, self.txn.get(key, db=self.d.ver))
        if xk:
            exv_key = nsid + xk + seq_key(put_seq)
            if self.txn.get(exv_key, db=self.d.exv) is not None:
                self.txn.put(exv_key, _sealed(exv_key, end), db=self.d.exv)
        self.txn.put(key, _ver_value(key, end, tsk, xk, crc), db=self.d.ver)
        return crc

    def delete(self, seq: int, nsid: bytes, idk: bytes) -> bool:
        """Fold a delete (or erase): end the live version. False if the record is not live."""
        latest = self.latest(nsid, idk)
        if latest is None or not latest[1]:
            return False
        counted = self._end(seq, nsid, idk, latest[0], latest[2])
        self._set_count(nsid, seq, self.count(nsid) - counted)
        return True

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
                body = _opened(key, cur.value(), _TIME)
                if body is None or len(key) != _KEY_NTS:
                    raise StoreCorrupted(f"the time index of namespace {self._label(nsid)} is damaged")
                idk = body[:-_SEAL]
                crc = self._end_ver(nsid, idk, seq_from_key(key[_S]), end)
                if txn.get(key, db=self.d.tver) is not None:
                    txn.put(key, _tver_value(key, end, idk, crc), db=self.d.tver)
                    removed += 1
                if not cur.delete() or not cur.key():
                    break
        self._max[nsid] = b""
        self._set_count(nsid, seq, 0)
        return removed

    def erasure(self, seq: int, nsid: bytes, idk: bytes) -> None:
        """Fold the receipt of an erase event (``erx``)."""
        self.txn.put(_erx_key(nsid, idk, seq), b"", db=self.d.erx)

    def erasures(self, nsid: bytes, idk: bytes) -> list[int]:
        """The sequence numbers of the erase events of a record, oldest first."""
        if self.d.erx is None:
            return []
        cur = self.txn.cursor(db=self.d.erx)
        return [seq_from_key(sk) for sk, _ in _under(cur, nsid + idk, self._label)]

    def unindex_version(self, nsid: bytes, put_seq: int, end_seq: int, tsk: bytes) -> None:
        """Make the version put at ``put_seq`` (ended at ``end_seq``, 0 if live) what the fold of an
        erased put gives: drop its ``tver`` entry, its ``exv`` entry and its share of every ``cnt``
        entry from ``put_seq`` up to (not including) its end; its ``ver`` entry (and ``time`` entry,
        while live) stay, with the payload CRC of no payload and (``ver``) without the expiry."""
        txn = self.txn
        tk = _time_key(nsid, tsk, seq_key(put_seq))
        indexed = txn.get(tk, db=self.d.tver)
        if indexed is None:
            return  # already unindexed
        body = _opened(tk, indexed, _TVER)
        if body is None:
            raise StoreCorrupted(f"the tver entry of event {put_seq} in namespace {self._label(nsid)} is damaged")
        txn.delete(tk, db=self.d.tver)
        idk = body[SEQ_LEN:-_SEAL]
        vk = _ver_key(nsid, idk, put_seq)
        end, _, xk, _ = self._ver_parts(vk, txn.get(vk, db=self.d.ver))
        txn.put(vk, _ver_value(vk, end, tsk, b"", _NO_PAYLOAD), db=self.d.ver)
        if end == _LIVE:
            txn.put(tk, _time_value(tk, idk, _NO_PAYLOAD), db=self.d.time)
        if xk:
            txn.delete(nsid + xk + seq_key(put_seq), db=self.d.exv)
        lo = _cnt_key(nsid, put_seq)
        hi = _cnt_key(nsid, end_seq or MAX_SEQ)
        cur = txn.cursor(db=self.d.cnt)
        changed: list[tuple[bytes, bytes]] = []
        if cur.set_range(lo):
            for key, value in cur.iternext(keys=True, values=True):
                if key >= hi or key[:NSID_LEN] != nsid:
                    break
                body = _unseal(key, value, _CNT_BODIES, False)
                if body is None:
                    raise StoreCorrupted(f"the record count of namespace {self._label(nsid)} is damaged")
                changed.append((bytes(key), _cnt_recount(key, body, -1)))
        for key, value in changed:
            txn.put(key, value, db=self.d.cnt)
        self._counts.pop(nsid, None)

    def meta(self, seq: int, nsid: bytes, mk: bytes) -> None:
        """Fold a metadata write (the value stays in the event), or the erase event of a key."""
        self.txn.put(_meta_key(nsid, mk, seq), b"", db=self.d.meta)

    def meta_events(self, nsid: bytes, mk: bytes) -> list[int]:
        """The seqs of every ``meta`` entry of key ``mk`` (its writes and erasures), newest first."""
        cur = self.txn.cursor(db=self.d.meta)
        return [seq_from_inv(sk) for sk, _ in _under(cur, nsid + mk, self._label)]

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
                        f"namespace {self._label(nsid)}: a {'meta' if of_meta else 'ver'} "
                        "index key is malformed (damaged store)"
                    )
                out.append((bytes(key[NSID_LEN:-SEQ_LEN]), seq_from_inv(key[-SEQ_LEN:])))
        return out

    def fold(self, event: LogEvent, prev_at: float | None, frame: bytes | None = None) -> None:
        """Apply one decoded event (``prev_at``: the recorded time of the one before, None for the
        first); ``frame`` its stored frame (default: the one the log holds). Raises
        :class:`FoldError` if it does not apply, or if a put's payload does not match its digest
        (the index entries seal the payload's CRC, so a fold must not seal a damaged one)."""
        seq = event.seq
        if prev_at is not None and event.at < prev_at:
            raise FoldError(seq, f"event {seq}: recorded time goes backwards")
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
                    crc = _CRC.pack(_crc(payload_view(self.frame(seq) if frame is None else frame, checked=True)))
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

    # -- layout upgrade ------------------------------------------------------------------------

    def reseal(self) -> int:
        """Reseal every value of a layout-4 store in the current layout (a write transaction, this
        view of the current layout): each ``ver``, ``tver`` and ``time`` value gets the CRC-32C of
        its put's payload as ``P`` and a CRC-32C seal, each ``cnt`` and ``exv`` value a CRC-32C
        seal; nothing else changes. Each value is checked in layout 4 first: its zlib seal must
        hold and, for the three, its ``P`` must be the zlib CRC-32 of the payload of the put the key
        names, so damage is never sealed as genuine. Else :class:`StoreCorrupted` naming the table
        and entry (the caller's transaction then changes nothing). Returns how many values were
        resealed."""
        old = ZLIB_SEALS
        txn = self.txn
        d = self.d
        resealed = 0
        for name, db, seeds in ((b"ver", d.ver, (old.ver, _VER)), (b"tver", d.tver, (old.tver, _TVER)),
                                (b"time", d.time, (old.time, _TIME))):
            cur = txn.cursor(db=db)
            more = cur.first()
            while more:
                key = cur.key()
                body = _opened(key, cur.value(), seeds[0], old.crc)
                seq = self._resealed_seq(name, key, body)
                frame = txn.get(seq_key(seq), db=d.log)
                if frame is None:
                    raise _missing(seq)
                try:
                    payload = payload_view(frame)
                except ValueError as exc:
                    raise StoreCorrupted(f"event {seq} is malformed: {exc}") from exc
                assert body is not None
                if old.crc(payload, 0) != _unpack_crc(body, len(body) - _SEAL)[0]:
                    raise self._unresealable(name, key, seq, "its payload does not match the CRC its entry holds")
                cur.put(key, _sealed(key, body[:-_SEAL] + _CRC.pack(_crc(payload)), seeds[1]))
                resealed += 1
                more = cur.next()
        for name, db, bodies in ((b"cnt", d.cnt, _CNT_BODIES), (b"exv", d.exv, (SEQ_LEN,))):
            cur = txn.cursor(db=db)
            more = cur.first()
            while more:
                key = cur.key()
                value = cur.value()
                if name == b"exv" and len(key) == NSID_LEN:  # a namespace's marker: no seal
                    if value:
                        raise self._unresealable(name, key, None, "its marker holds a value")
                else:
                    body = _unseal(key, value, bodies, False, old.crc)
                    if body is None:
                        raise self._unresealable(name, key, None, "its seal does not hold")
                    cur.put(key, _sealed(key, body))
                    resealed += 1
                more = cur.next()
        return resealed

    def _resealed_seq(self, name: bytes, key: bytes, body: bytes | None) -> int:
        """The put seq of the layout-4 ``ver``, ``tver`` or ``time`` entry ``key`` whose opened body
        is ``body`` (None: its seal does not hold), once its key and body have their lengths."""
        if name == b"ver":
            ok = len(key) >= NSID_LEN + 3 + SEQ_LEN and body is not None and len(body) + _SEAL in _VER_LENGTHS
        else:
            smallest = 3 + _SEAL + (SEQ_LEN if name == b"tver" else 0)
            ok = len(key) == _KEY_NTS and body is not None and len(body) >= smallest
        if not ok:
            raise self._unresealable(name, key, None, "its seal or length is wrong")
        return seq_from_inv(key[-SEQ_LEN:]) if name == b"ver" else seq_from_key(key[-SEQ_LEN:])

    def _unresealable(self, name: bytes, key: bytes, seq: int | None, why: str) -> StoreCorrupted:
        """The error of an upgrade to the current layout that found entry ``key`` of table ``name``
        damaged (``seq``: the put it names, if known)."""
        what = f"of event {seq} " if seq is not None else f"{key.hex()} "
        return StoreCorrupted(
            f"the {name.decode()} entry {what}in namespace {self._label(key[:NSID_LEN])} is damaged ({why}): "
            f"the store stays in layout 4 (its upgrade to layout {LAYOUT_VERSION} changed nothing)"
        )

    # -- reads ---------------------------------------------------------------------------------

    def _row(
        self,
        names: list[str],
        nsid: bytes,
        sk: bytes,
        tsk: bytes,
        idk: bytes,
        record_id: str | None,
        end: bytes,
        via_time: bool,
        xk: bytes = b"",
        now: float | None = None,
    ) -> Row | None:
        """(A store of layout 3 or older; see :meth:`_sealed_row` for layout 4.) The row of the
        version put by the event of log key ``sk`` that an index entry of
        namespace ``names`` (id ``nsid``) names with timestamp key ``tsk``, id key ``idk`` and end
        ``end``, or None when its content was erased, it expired at ``now``, or (``record_id``
        given) it is another id's sharing a hashed key. ``xk``: the expiry key that follows ``tsk``
        in the version's ``ver`` value (b"": none), given when found through ``ver``; found through
        ``time`` or ``tver`` it is read from the ``ver`` entry. ``now``: the clock expiry is judged
        by, given for a namespace holding expiring versions (its marker ``exv[N]``).

        Nothing is returned unchecked (``log/FORMAT.md`` §5.1): the frame must be that put with a
        payload matching its digest (:func:`read_content`), and the other index must agree: found
        through ``ver`` (``via_time`` False), the version's ``tver`` entry must hold ``end`` and
        ``idk``; found through ``time`` or ``tver``, its ``ver`` entry must hold ``end`` and
        ``tsk``. The id and timestamp then come from those keys; for a hashed id key, the
        timestamp key of 0.0, an expiring version or a namespace holding any, from the envelope,
        which must match them and whose expiry ``x`` must be the ``ver`` value's (:func:`read_put`).
        Raises :class:`StoreCorrupted` naming the namespace and the record."""
        txn = self.txn
        d = self.d
        frame = txn.get(sk, db=d.log)
        seq = seq_from_key(sk)
        if frame is None:
            raise _damaged(names, idk, record_id, seq, "the index names an event the log lacks")
        found = None
        if via_time:
            found = txn.get(nsid + idk + inv_seq_key(seq), db=d.ver)
            if found is not None:
                xk = found[_TV_END:]
        expires_at = None
        try:
            if not xk and now is None and tsk != _TS_ZERO and idk[:1] == _INLINE:
                # id and timestamp from the keys, which the other index confirms below
                data = read_content(frame, seq)
                rid = record_id if record_id is not None else inline_name(idk)
                ts = decode_ts_key(tsk)
            else:
                env, data = read_put(frame, seq)
                rid, ts = env["i"], env["ts"]
                if env["n"] != names or name_key(rid) != idk or ts_key(ts) != tsk:
                    raise StoreCorrupted(f"event {seq} is not the put the index entry names")
                expires_at = env.get("x")
                if data is not None and xk != (b"" if expires_at is None else ts_key(expires_at)):
                    raise StoreCorrupted(f"the expiry in its ver entry is not event {seq}'s")
        except (StoreCorrupted, KeyError, TypeError, AttributeError, ValueError) as exc:
            raise _damaged(names, idk, record_id, seq, str(exc)) from exc
        tk = nsid + tsk + sk
        if data is None:
            if txn.get(tk, db=d.tver) is not None:
                raise _damaged(names, idk, record_id, seq, "its content is gone but not erased")
            return None
        if via_time:
            agrees = found is not None and found[:_TV_END] == end + tsk
        else:
            agrees = txn.get(tk, db=d.tver) == end + idk
        if not agrees:
            raise _damaged(names, idk, record_id, seq, "the ver and tver indexes disagree")
        if record_id is not None and rid != record_id:
            return None
        if expires_at is not None:
            if now is None:
                raise _damaged(names, idk, record_id, seq, "it expires but its namespace has no expiry marker")
            if expires_at <= now:
                return None
        return _tuple_new(Row, (rid, ts, data, seq, expires_at))

    def _sealed_row(
        self,
        names: list[str],
        sk: bytes,
        seq: int,
        tsk: bytes,
        idk: bytes,
        record_id: str | None,
        crc: int,
        xk: bytes,
        now: float | None,
    ) -> Row | None:
        """:meth:`_row` for a store of layout 4: the row of the version put by the event of log key
        ``sk`` (sequence ``seq``) that a sealed index entry (its seal checked by the caller) of namespace ``names``
        names with timestamp key ``tsk``, id key ``idk``, payload CRC ``crc`` and expiry key ``xk``
        (b"": none; ``now`` then given), or None when its content was erased, it expired at
        ``now``, or (``record_id`` given) it is another id's sharing a hashed key. The frame must be
        that put with a payload of that CRC (:func:`read_content`; an erased put's CRC is the one
        of no payload, so no other index is needed to tell erasure from damage). The id and
        timestamp come from the keys (a hashed id key or the timestamp key of 0.0: from the
        envelope, which must match them), the expiry from ``xk``."""
        d = self.d
        frame = self.txn.get(sk, None, d.log)  # positional: cheaper than the keyword db=
        if frame is None:
            raise _damaged(names, idk, record_id, seq, "the index names an event the log lacks")
        try:
            if tsk != _TS_ZERO and idk[:1] == _INLINE:
                data = read_content(frame, seq, crc, d.seals.crc)
                if data is None:
                    return None
                rid = record_id if record_id is not None else inline_name(idk)
                ts = decode_ts_key(tsk)
            else:
                env, data = read_put(frame, seq, crc, d.seals.crc)
                if data is None:
                    return None
                rid, ts = env["i"], env["ts"]
                if env["n"] != names or name_key(rid) != idk or ts_key(ts) != tsk:
                    raise StoreCorrupted(f"event {seq} is not the put the index entry names")
        except (StoreCorrupted, KeyError, TypeError, AttributeError, ValueError) as exc:
            raise _damaged(names, idk, record_id, seq, str(exc)) from exc
        if record_id is not None and rid != record_id:
            return None
        if not xk:
            return _tuple_new(Row, (rid, ts, data, seq, None))
        expires_at = decode_ts_key(xk)
        if now is None or expires_at <= now:
            return None
        return _tuple_new(Row, (rid, ts, data, seq, expires_at))

    def _expiry_key(self, names: list[str], nsid: bytes, idk: bytes, seq: int, end: bytes, tsk: bytes) -> bytes:
        """The expiry key ``X`` (b"": none) of the version put at ``seq``, found through ``time``
        or ``tver`` with end ``end`` and timestamp key ``tsk``: from its sealed ``ver`` entry,
        which must hold them (layout 4)."""
        vk = nsid + idk + inv_seq_key(seq)
        found = self.txn.get(vk, db=self.d.ver)
        seals = self.d.seals
        body = None if found is None or len(found) not in _VER_LENGTHS else _opened(vk, found, seals.ver, seals.crc)
        if body is None or body[:_TV_END] != end + tsk:
            raise _damaged(names, idk, None, seq, "the ver and time indexes disagree")
        return body[_TV_END:-_SEAL]

    def _check_end(self, names: list[str], idk: bytes, record_id: str, end: bytes) -> None:
        """Check that event ``end`` (a sequence key), which the ``ver`` index says ended the newest
        version of ``record_id``, is a delete, erase or clear of it; else :class:`StoreCorrupted`."""
        seq = seq_from_key(end)
        frame = self.txn.get(end, db=self.d.log)
        if frame is None:
            raise _damaged(names, idk, record_id, seq, "the index names an event the log lacks")
        event = decode_envelope(frame, seq)
        ok = event.namespace == tuple(names) and (
            event.kind == CLEAR or (event.kind in (DELETE, ERASE) and event.id == record_id)
        )
        if not ok:
            raise _damaged(names, idk, record_id, seq, f"event {seq} does not end it")

    # The B-trees are not checksummed: one damaged key can send a lookup past entries (LMDB's
    # binary search trusts the order), or before its probe, or end a walk early. Reads therefore
    # check that a lookup landed at or after its probe and the key before it is before the probe
    # (:func:`_sound_landing`), the order of what a walk returns, and the key that ends it: each
    # genuine (sealed from layout 4 on; before, confirmed by the other index: ``ver`` against
    # ``tver``, ``time``/``tver`` against ``ver``).

    def _ver_landing_sound(self, cur: Any, probe: bytes, landed: bool) -> bool:
        """Whether a ``ver`` lookup of ``probe`` (``landed``: ``cur.set_range(probe)`` found a key)
        landed soundly: the entry landed on is genuine and the landing is in order, its
        predecessor genuine too (:func:`_sound_landing`); ``cur`` is left where it landed. The
        check of a get that finds no version, and of :meth:`visible_version` when ``checked``."""
        if landed and not self._genuine_ver(cur.key(), cur.value()):
            return False
        return _sound_landing(cur, probe, landed, self._genuine_ver)

    def _genuine_ver(self, key: bytes, value: bytes) -> bool:
        """Whether ``ver`` entry ``key`` (``N I ~S``) -> ``value`` is genuine: in layout 4, sealed;
        before, ``E T`` or ``E T X`` confirmed by the ``tver`` entry of that version (or, without
        one, by the version's erased frame)."""
        if self.d.sealed:
            return (
                len(key) >= NSID_LEN + 3 + SEQ_LEN and len(value) in _VER_LENGTHS
                and _opened(key, value, self.d.seals.ver, self.d.seals.crc) is not None
            )
        if len(key) < NSID_LEN + 3 + SEQ_LEN or len(value) not in (_TV_END, _XK_END):
            return False
        sk = seq_key(seq_from_inv(key[-SEQ_LEN:]))
        found = self.txn.get(key[:NSID_LEN] + value[SEQ_LEN:_TV_END] + sk, db=self.d.tver)
        if found is None:
            frame = self.txn.get(sk, db=self.d.log)
            return frame is not None and not split_frame(frame)[2]
        return bool(found == value[:SEQ_LEN] + key[NSID_LEN:-SEQ_LEN])

    def _genuine_time(self, key: bytes, value: bytes, tver: bool) -> bool:
        """Whether ``time`` (``tver`` True: ``tver``) entry ``key`` (``N T S``) -> ``value`` is
        genuine: in layout 4, sealed; before, ``I`` (or ``E I``) confirmed by the ``ver`` entry of
        that version."""
        if len(key) != _KEY_NTS:
            return False
        if self.d.sealed:
            seals = self.d.seals
            return _opened(key, value, seals.tver if tver else seals.time, seals.crc) is not None
        end, idk = (value[:SEQ_LEN], value[SEQ_LEN:]) if tver else (_LIVE, value)
        ver_key = key[:NSID_LEN] + idk + inv_seq_key(seq_from_key(key[_S]))
        found = self.txn.get(ver_key, db=self.d.ver)
        return found is not None and found[:_TV_END] == end + key[_T]

    def _genuine_time_now(self, key: bytes, value: bytes) -> bool:
        return self._genuine_time(key, value, False)

    def _genuine_tver(self, key: bytes, value: bytes) -> bool:
        return self._genuine_time(key, value, True)

    # -- expiry ----------------------------------------------------------------------------------

    def expiring(self, nsid: bytes) -> bool:
        """Whether the namespace ever held a (not erased) version with an expiry: only then do
        scans and counts look at expiries (one lookup of the namespace's marker ``exv[N]``). In
        layout 4 the lookup lands where the marker sorts: an expiry entry of the namespace there
        instead (its marker lost) is :class:`StoreCorrupted`, not a namespace without expiries."""
        exv = self.d.exv
        if exv is None:
            return False
        if not self.d.sealed:
            return self.txn.get(nsid, db=exv) is not None
        cur = self.txn.cursor(db=exv)
        if not cur.set_range(nsid):
            return False
        key = cur.key()
        if key == nsid:
            return True
        if key[:NSID_LEN] == nsid or key < nsid:  # the marker lost, or a misdirected search
            raise StoreCorrupted(f"the expiry index of namespace {self._label(nsid)} has lost its marker")
        return False

    def clock(self, as_of: int | None) -> float:
        """The recorded-time clock expiry is judged by: now (never before the head's recorded time),
        or the recorded time of event ``as_of`` (0.0 for the empty log)."""
        if as_of is None:
            return self.head().next_at()
        return recorded_at(self.frame(as_of)) if as_of else 0.0

    def reader_now(self, nsid: bytes, as_of: int | None) -> float | None:
        """The clock a read of the namespace judges expiry by, or None when it holds no expiring
        version (reads then skip the check)."""
        return self.clock(as_of) if self.expiring(nsid) else None

    def hidden(self, nsid: bytes, now: float, as_of: int | None = None) -> set[int]:
        """Put seqs of the versions visible now (or right after ``as_of``) that expired at ``now``.
        Every entry walked is checked (its CRC, ascending keys); :class:`StoreCorrupted` naming the
        namespace otherwise."""
        out: set[int] = set()
        exv = self.d.exv
        if exv is None:
            return out
        cur = self.txn.cursor(db=exv)
        stop = nsid + ts_key(now) + _PAST_KEY[:SEQ_LEN]
        legacy = self.d.legacy
        last = nsid
        landed = cur.set_range(nsid)
        if not _sound_landing(cur, nsid, landed, self._genuine_exv):
            raise StoreCorrupted(f"the expiry index is damaged near namespace {self._label(nsid)}")
        if landed:
            for key, value in cur.iternext(keys=True, values=True):
                if key > stop or key[:NSID_LEN] != nsid:
                    if not self._genuine_exv(key, value):
                        raise StoreCorrupted(f"the expiry index of namespace {self._label(nsid)} is damaged")
                    break
                if len(key) == NSID_LEN:
                    if value:
                        raise StoreCorrupted(f"the expiry index of namespace {self._label(nsid)} is damaged")
                    continue  # the namespace's marker
                end = _unseal(key, value, (SEQ_LEN,), legacy, self.d.seals.crc)
                if end is None or len(key) != NSID_LEN + 8 + SEQ_LEN or key < last:
                    raise StoreCorrupted(f"the expiry index of namespace {self._label(nsid)} is damaged")
                last = key
                put_seq = seq_from_key(key[-SEQ_LEN:])
                if as_of is None:
                    if end == _LIVE:
                        out.add(put_seq)
                elif put_seq <= as_of and (end == _LIVE or seq_from_key(end) > as_of):
                    out.add(put_seq)
        return out

    def _genuine_exv(self, key: bytes, value: bytes) -> bool:
        """Whether ``exv`` entry ``key`` -> ``value`` is a namespace marker or a sealed entry whose
        CRC holds (always true for a store of an older layout, whose values carry none)."""
        if len(key) == NSID_LEN:
            return not value
        return self.d.legacy or (
            len(key) == NSID_LEN + 8 + SEQ_LEN and _unseal(key, value, (SEQ_LEN,), False, self.d.seals.crc) is not None
        )

    def expired(self, nsid: bytes, now: float) -> list[tuple[int, str]]:
        """Live versions of the namespace expired at ``now``: ``(put seq, record id)``, oldest put
        first. Each must be a put of the namespace that expires by ``now`` and be the live version
        of its id (:class:`StoreCorrupted` otherwise)."""
        out = []
        names = list(self._names(nsid))
        for put_seq in sorted(self.hidden(nsid, now)):
            env = decode_envelope(self.frame(put_seq), put_seq)
            idk = b"" if env.id is None else name_key(env.id)
            if (
                env.kind != PUT or list(env.namespace) != names or env.expires_at is None
                or env.expires_at > now or env.id is None or self.live_seq(nsid, idk) != put_seq
            ):
                raise _damaged(names, idk, env.id, put_seq, "its expiry index entry does not fit it")
            out.append((put_seq, env.id))
        return out

    def exv_put(self, nsid: bytes, seq: int, expires_at: float, idk: bytes, tsk: bytes) -> None:
        """Record the expiry of the live version put at ``seq``: its ``exv`` entry, and the expiry
        key after the timestamp key in its ``ver`` value (where the fold finds it when the version
        ends, without reading the log)."""
        xk = ts_key(expires_at)
        self.txn.put(nsid, b"", db=self.d.exv)  # the marker: N holds expiring versions
        exv_key = nsid + xk + seq_key(seq)
        self.txn.put(exv_key, _sealed(exv_key, _LIVE), db=self.d.exv)
        key = _ver_key(nsid, idk, seq)
        crc = self._ver_parts(key, self.txn.get(key, db=self.d.ver))[3]
        self.txn.put(key, _ver_value(key, _LIVE, tsk, xk, crc), db=self.d.ver)

    # -- op ids ----------------------------------------------------------------------------------

    def op_seq(self, nsid: bytes, op_id: str) -> int | None:
        """The seq of the op event of ``op_id`` in the namespace, or None (a hashed key's match is
        checked against the event)."""
        if self.d.opx is None:
            return None
        ok = name_key(op_id)
        found = self.txn.get(nsid + ok, db=self.d.opx)
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
                f"op id {op_id!r} of namespace {self._label(nsid)} is damaged: its index names "
                f"event {seq}, which is not its receipt"
            )
        return seq

    def op(self, seq: int, nsid: bytes, op_id: str) -> None:
        """Fold an op event."""
        self.txn.put(nsid + name_key(op_id), seq_key(seq), db=self.d.opx)

    # -- feedback --------------------------------------------------------------------------------

    def feedback(self, seq: int, nsid: bytes, idk: bytes) -> None:
        """Fold a feedback event (``fbk``)."""
        self.txn.put(nsid + idk + seq_key(seq), b"", db=self.d.fbk)

    def feedback_seqs(self, nsid: bytes, idk: bytes) -> list[int]:
        """The sequence numbers of the feedback events of one record, oldest first."""
        if self.d.fbk is None:
            return []
        cur = self.txn.cursor(db=self.d.fbk)
        return [seq_from_key(sk) for sk, _ in _under(cur, nsid + idk, self._label)]

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

    def get_rows(
        self,
        namespace: Namespace,
        nsid: bytes,
        ids: Sequence[str],
        as_of: int | None = None,
        now: float | None = None,
    ) -> tuple[list[Row], list[str]]:
        """The rows of the records ``ids`` of ``namespace`` (its id ``nsid``) visible now (or right
        after event ``as_of``), in the order of ``ids``, and the ids that have none. In a namespace
        holding expiring versions (one lookup of its marker), expiry is judged by ``now`` when given
        (a write's recorded time), else by :meth:`clock`; elsewhere a get reads nothing more. Each
        row is checked (:meth:`_sealed_row`, or :meth:`_row` in an older layout, its entry's seal
        first); a newest version that is not visible because an event ended it is checked to be
        ended by that event. In layout 4 the expiry is the ``ver`` value's own (no marker lookup),
        and the clock is read only when a version expires."""
        rows: list[Row] = []
        missing: list[str] = []
        names = list(namespace)
        sealed = self.d.sealed
        if not sealed:  # before layout 4 expiry is judged in a namespace with the marker only
            if not self.expiring(nsid):
                now = None
            elif now is None:
                now = self.clock(as_of)
        cur = self._ver_cur or self._vcur()
        crc32, ver_seed = self.d.seals.crc, self.d.seals.ver
        for record_id in ids:
            idk = name_key(record_id)
            prefix = nsid + idk
            row = None
            probe = prefix if as_of is None else prefix + inv_seq_key(as_of)
            landed = cur.set_range(probe)
            key = cur.key() if landed else b""
            # As of an event, a key of the record before the probe is a later version: only a
            # misdirected lookup lands there (the miss path below refuses it).
            if landed and len(key) == len(prefix) + SEQ_LEN and key.startswith(prefix) and (
                as_of is None or key >= probe
            ):
                value = cur.value()
                end = value[:SEQ_LEN]
                if end == _LIVE or (as_of is not None and seq_from_key(end) > as_of):
                    seq = seq_from_inv(key[-SEQ_LEN:])
                    sk = seq_key(seq)
                    if not sealed:
                        row = self._row(names, nsid, sk, value[SEQ_LEN:_TV_END], idk, record_id, end, False, value[_TV_END:], now)
                    else:
                        n = len(value) - 2 * _SEAL  # the end of the value before P C
                        if n + 2 * _SEAL not in _VER_LENGTHS:
                            raise _damaged(names, idk, record_id, 0, "its ver entry is damaged")
                        crc, seal = _unpack_pc(value, n)
                        if seal != crc32(key + value[: n + _SEAL], ver_seed):
                            raise _damaged(names, idk, record_id, 0, "its ver entry is damaged")
                        xk = value[_TV_END:n]
                        if xk and now is None:
                            now = self.clock(as_of)
                        row = self._sealed_row(names, sk, seq, value[SEQ_LEN:_TV_END], idk, record_id, crc, xk, now)
                elif sealed and not self._genuine_ver(key, value):
                    raise _damaged(names, idk, record_id, 0, "its ver entry is damaged")
                elif not _sound_landing(cur, probe, True, self._genuine_ver):
                    # An ended version answers "missing" only if the lookup was not sent past
                    # a newer one (a re-put after a delete): the key before must precede the probe.
                    raise _damaged(names, idk, record_id, 0, "the ver index is damaged near it")
                elif as_of is None:
                    self._check_end(names, idk, record_id, end)
            elif not self._ver_landing_sound(cur, probe, landed):
                raise _damaged(names, idk, record_id, 0, "the ver index is damaged near it")
            if row is None:
                missing.append(record_id)
            else:
                rows.append(row)
        return rows, missing

    def scan_rows(
        self,
        namespace: Namespace,
        nsid: bytes,
        start: float | None,
        end: float | None,
        after: tuple[float, int] | None,
        limit: int | None,
        as_of: int | None = None,
    ) -> tuple[list[Row], tuple[float, int] | None]:
        """The rows of ``namespace`` (its id ``nsid``) visible now (or right after event ``as_of``)
        in (timestamp, write order) with ``start <= timestamp < end``, strictly after the position
        ``after`` = ``(timestamp, seq)``, at most ``limit``; plus the position of the last row when
        more may follow. Now: a walk of ``time`` decoding each entry as it goes (a page counts the
        entries it walks); as of an event: :meth:`scan_as_of`. In a namespace holding expiring
        versions, expired ones are left out and a page holds exactly ``limit`` rows when more
        follow. Each row is checked (:meth:`_sealed_row`, or :meth:`_row` in an older layout)."""
        row_of = self._row
        names = list(namespace)
        now = self.reader_now(nsid, as_of)
        if now is not None:
            return self._scan_expiring(names, nsid, start, end, after, limit, as_of, now)
        if self.d.sealed and as_of is None:
            return self._sealed_scan(names, nsid, start, end, after, limit)
        if as_of is not None:
            entries, more = self._tver_walk(nsid, start, end, after, limit, as_of)
            rows = []
            for seq, tsk, idk, ended, crc in entries:
                if self.d.sealed:
                    row = self._sealed_row(names, seq_key(seq), seq, tsk, idk, None, _unpack_crc(crc)[0], b"", None)
                else:
                    row = row_of(names, nsid, seq_key(seq), tsk, idk, None, ended, True)
                if row is not None:
                    rows.append(row)
            return rows, more
        rows = []
        last = b""
        for taken, (key, idk, _) in enumerate(self._time_walk(names, nsid, start, end, after)):
            if taken == limit:
                return rows, _split_position(last[_POSITION])
            last = key
            row = row_of(names, nsid, key[_S], key[_T], idk, None, _LIVE, True)
            if row is not None:
                rows.append(row)
        return rows, None

    def _sealed_scan(
        self,
        names: list[str],
        nsid: bytes,
        start: float | None,
        end: float | None,
        after: tuple[float, int] | None,
        limit: int | None,
    ) -> tuple[list[Row], tuple[float, int] | None]:
        """:meth:`scan_rows` now, in a namespace without expiring versions of a layout-4 store: a
        walk of ``time`` checked as :meth:`_time_walk` checks it, each row checked as
        :meth:`_sealed_row` checks it (both written out here, the hot loop of a scan; an entry with
        a hashed id key or a timestamp not above 0.0 takes :meth:`_sealed_row` itself)."""
        cur = self.txn.cursor(db=self.d.time)
        first = _scan_start(nsid, start, after)
        landed = cur.set_range(first)
        if not _sound_landing(cur, first, landed, self._genuine_time_now):
            raise _damaged(names, b"", None, 0, "the time index is out of order where the scan begins")
        rows: list[Row] = []
        if not landed:
            return rows, None
        stop = _scan_stop(nsid, end)
        last = first[:-1]  # sorts before every key the walk may return
        d = self.d
        crc32, time_seed = d.seals.crc, d.seals.time
        get, log_db = self.txn.get, d.log
        row_of = self._sealed_row
        append = rows.append
        for taken, (key, value) in enumerate(cur.iternext(keys=True, values=True)):
            if key >= stop:
                if not self._genuine_time(key, value, False):
                    raise _damaged(names, b"", None, 0, "the time index is damaged where the scan ends")
                break
            n = len(value) - _PC  # the end of the value before P C
            if len(key) != _KEY_NTS or key <= last or n < _SEAL:
                raise _damaged(names, b"", None, 0, "the time index is damaged")
            crc, seal = _unpack_pc(value, n)
            if seal != crc32(key + value[: n + _SEAL], time_seed):
                raise _damaged(names, b"", None, 0, "the time index is damaged")
            if taken == limit:
                return rows, _split_position(last[_POSITION])
            last = key
            idk = value[:n]
            flipped, seq = unpack_position(key, NSID_LEN)
            if not flipped < 0.0 or idk[:1] != _INLINE:  # a timestamp not above 0.0 or a hashed id
                row = row_of(names, key[_S], seq, key[_T], idk, None, crc, b"", None)
                if row is not None:
                    append(row)
                continue
            frame = get(key[_S], None, log_db)  # positional: cheaper than the keyword db=
            if frame is None:
                raise _damaged(names, idk, None, seq, "the index names an event the log lacks")
            try:
                data = read_content(frame, seq, crc, crc32)
                if data is not None:  # else erased
                    rid = idk[INLINE_NAME].decode("utf-8", "surrogatepass")  # inline_name(idk)
                    append(_tuple_new(Row, (rid, -flipped, data, seq, None)))
            except (StoreCorrupted, KeyError, TypeError, AttributeError, ValueError) as exc:
                raise _damaged(names, idk, None, seq, str(exc)) from exc
        return rows, None

    def _scan_expiring(
        self,
        names: list[str],
        nsid: bytes,
        start: float | None,
        end: float | None,
        after: tuple[float, int] | None,
        limit: int | None,
        as_of: int | None,
        now: float,
    ) -> tuple[list[Row], tuple[float, int] | None]:
        """:meth:`scan_rows` where expiry applies: rows not expired at ``now``, exactly ``limit``
        per page (the walk reads one row past a full page to know whether more follow)."""
        if as_of is not None:
            entries, _ = self._tver_walk(nsid, start, end, after, None, as_of)
            walk: Iterator[tuple[bytes, bytes, bytes, bytes, bytes]] = (
                (seq_key(seq), tsk, idk, ended, crc) for seq, tsk, idk, ended, crc in entries
            )
        else:
            walk = (
                (key[_S], key[_T], idk, _LIVE, crc)
                for key, idk, crc in self._time_walk(names, nsid, start, end, after)
            )
        rows: list[Row] = []
        last: tuple[bytes, bytes] | None = None
        sealed = self.d.sealed
        for sk, tsk, idk, ended, crc in walk:
            if sealed:
                seq = seq_from_key(sk)
                xk = self._expiry_key(names, nsid, idk, seq, ended, tsk)
                row = self._sealed_row(names, sk, seq, tsk, idk, None, _unpack_crc(crc)[0], xk, now)
            else:
                row = self._row(names, nsid, sk, tsk, idk, None, ended, True, now=now)
            if row is None:
                continue
            if limit is not None and len(rows) == limit:
                assert last is not None
                return rows, _split_position(last[0] + last[1])
            rows.append(row)
            last = (tsk, sk)
        return rows, None

    def _time_walk(
        self, names: list[str], nsid: bytes, start: float | None, end: float | None, after: tuple[float, int] | None
    ) -> Iterator[tuple[bytes, bytes, bytes]]:
        """``(key N T S, id key, payload CRC)`` of the live entries of ``time`` of namespace
        ``names`` (id ``nsid``) in range, checked as they go (the key before the start, strictly
        ascending keys of the right length, each value's seal in layout 4, the key that ends the
        walk); else :class:`StoreCorrupted`. The CRC is b"" in an older layout (none kept)."""
        cur = self.txn.cursor(db=self.d.time)
        first = _scan_start(nsid, start, after)
        landed = cur.set_range(first)
        if not _sound_landing(cur, first, landed, self._genuine_time_now):
            raise _damaged(names, b"", None, 0, "the time index is out of order where the scan begins")
        if not landed:
            return
        stop = _scan_stop(nsid, end)
        last = first[:-1]  # sorts before every key the walk may return
        sealed = self.d.sealed
        seals = self.d.seals
        crc32 = seals.crc
        for key, value in cur.iternext(keys=True, values=True):
            if key >= stop:
                if not self._genuine_time(key, value, False):
                    raise _damaged(names, b"", None, 0, "the time index is damaged where the scan ends")
                return
            if len(key) != _KEY_NTS or key <= last:
                raise _damaged(names, b"", None, 0, "the time index is out of order")
            last = key
            if not sealed:
                yield key, value, b""
                continue
            n = len(value) - _SEAL
            if n < 2 * _SEAL or _unpack_crc(value, n)[0] != crc32(key + value[:n], seals.time):
                raise _damaged(names, b"", None, seq_from_key(key[_S]), "its time entry is damaged")
            yield key, value[: n - _SEAL], value[n - _SEAL : n]

    def scan_as_of(
        self,
        nsid: bytes,
        start: float | None,
        end: float | None,
        after: tuple[float, int] | None,
        limit: int | None,
        as_of: int,
        confirm: bool = False,
    ) -> tuple[list[tuple[int, bytes, bytes, bytes]], tuple[float, int] | None]:
        """Records visible right after event ``as_of`` in (timestamp, write order) with ``start <=
        timestamp < end``, strictly after position ``after`` = ``(timestamp, seq)``, at most
        ``limit``, as ``(put seq, timestamp key, record id key, end)`` (``end`` as in ``tver``);
        plus the position of the last one returned when more follow (else None). A walk of
        ``tver``, stopped by the namespace's scan bound as of that event. ``confirm``: every entry
        walked, returned or not, must be confirmed by ``ver`` (for a caller that returns no row
        of its own to check, such as a count; from layout 4 on each entry's seal is checked instead,
        always); else :class:`StoreCorrupted`."""
        entries, more = self._tver_walk(nsid, start, end, after, limit, as_of, confirm)
        return [entry[:4] for entry in entries], more

    def _tver_walk(
        self,
        nsid: bytes,
        start: float | None,
        end: float | None,
        after: tuple[float, int] | None,
        limit: int | None,
        as_of: int,
        confirm: bool = False,
    ) -> tuple[list[tuple[int, bytes, bytes, bytes, bytes]], tuple[float, int] | None]:
        """:meth:`scan_as_of` with each entry's payload CRC (b"" before layout 4) last."""
        out: list[tuple[int, bytes, bytes, bytes, bytes]] = []
        sealed = self.d.sealed
        seals = self.d.seals
        last_key = b""
        bound = self.last_position(nsid, as_of)
        if bound == b"":
            return out, None
        cur = self.txn.cursor(db=self.d.tver)
        first = _scan_start(nsid, start, after)
        landed = cur.set_range(first)
        if not _sound_landing(cur, first, landed, self._genuine_tver):
            raise StoreCorrupted("the tver index is out of order where a scan begins (damaged store)")
        if not landed:
            return out, None
        stop = _scan_stop(nsid, end)
        last = first[:-1]  # sorts before every key the walk may return
        for key, value in cur.iternext(keys=True, values=True):
            if key >= stop:
                if not self._genuine_tver(key, value):
                    raise StoreCorrupted("the tver index is damaged where a scan ends")
                return out, None
            if len(key) != _KEY_NTS or key <= last:
                raise StoreCorrupted("the tver index is out of order (damaged store)")
            last = key
            if bound is not None and key[_POSITION] > bound:
                return out, None
            if sealed:
                body = _opened(key, value, seals.tver, seals.crc)
                if body is None or len(body) < SEQ_LEN + 2 + _SEAL:
                    raise StoreCorrupted(
                        f"the tver entry of event {seq_from_key(key[_S])} in namespace {self._label(nsid)} is damaged"
                    )
                idk, crc = body[SEQ_LEN:-_SEAL], body[-_SEAL:]
            elif confirm and not self._genuine_tver(key, value):
                raise StoreCorrupted("the tver index disagrees with the ver index (damaged store)")
            else:
                idk, crc = value[SEQ_LEN:], b""
            put_seq = seq_from_key(key[_S])
            ended = value[:SEQ_LEN]
            if put_seq > as_of or (ended != _LIVE and seq_from_key(ended) <= as_of):
                continue
            if limit is not None and len(out) == limit:
                return out, _split_position(last_key[_POSITION])
            out.append((put_seq, key[_T], idk, ended, crc))
            last_key = key
        return out, None

    def last_position(self, nsid: bytes, as_of: int) -> bytes | None:
        """The last ``T S`` that ``time`` held for the namespace right after event ``as_of`` (b"" if
        it held none): no version visible then sorts after it. None for a store in layout format 1
        (its 8-byte ``cnt`` values do not say): unbounded."""
        entry = self._cnt_entry(nsid, as_of)
        return b"" if entry is None else _cnt_last(entry)

    def count_range(
        self, nsid: bytes, start: float | None, end: float | None, as_of: int | None = None
    ) -> int:
        """Records visible now (or right after event ``as_of``) with ``start <= timestamp < end``
        (unbounded where None); expired versions are not counted."""
        now = self.reader_now(nsid, as_of)
        if now is not None:
            hidden = self.hidden(nsid, now, as_of)
            if start is None and end is None:
                return self.count(nsid, as_of) - len(hidden)
            if as_of is not None:
                entries = self.scan_as_of(nsid, start, end, None, None, as_of, confirm=True)[0]
                return sum(1 for seq, *_ in entries if seq not in hidden)
            return sum(1 for key in self._confirmed_time(nsid, start, end) if seq_from_key(key[_S]) not in hidden)
        if start is None and end is None:
            return self.count(nsid, as_of)
        if as_of is not None:
            return len(self.scan_as_of(nsid, start, end, None, None, as_of, confirm=True)[0])
        return sum(1 for _ in self._confirmed_time(nsid, start, end))

    def _confirmed_time(self, nsid: bytes, start: float | None, end: float | None) -> Iterator[bytes]:
        """The keys of the live entries of ``time`` of the namespace in range, each confirmed by
        its ``ver`` entry (the walk checked as :meth:`_time_walk` checks it); else
        :class:`StoreCorrupted` naming the namespace."""
        names = self._names(nsid)
        if self.d.sealed:  # each entry's seal is checked by the walk
            for key, _, _ in self._time_walk(names, nsid, start, end, None):
                yield key
            return
        genuine = self._genuine_time_now
        for key, idk, _ in self._time_walk(names, nsid, start, end, None):
            if not genuine(key, idk):
                raise _damaged(names, idk, None, seq_from_key(key[_S]), "the time and ver indexes disagree")
            yield key

    def meta_seq(self, nsid: bytes, mk: bytes, as_of: int | None = None) -> int | None:
        """The seq of the metadata write in effect now (or right after ``as_of``), else None."""
        prefix = nsid + mk
        cur = self.txn.cursor(db=self.d.meta)
        probe = prefix if as_of is None else prefix + inv_seq_key(as_of)
        landed = cur.set_range(probe)
        if not _sound_landing(cur, probe, landed):
            raise StoreCorrupted(f"the meta index is out of order near a key of namespace {self._label(nsid)}")
        if not (landed and _is_entry(cur.key(), prefix)):
            return None
        return seq_from_inv(cur.key()[-SEQ_LEN:])
