"""The index layout: every key and value of the projection sub-databases is defined here.

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
    tree  S h -> 32-byte hash                the Merkle tree over the log (layout 6): node
                                             ``(level h >= 1, index i)``, completed by the append
                                             of event ``S = (i + 1)·2^h`` (:func:`tree_key`);
                                             leaves (level 0) are the log's

Layout format 1 (stores written before layout 2) also had ``atix`` (recorded time -> first seq)
and ``tmax`` (N S -> the last ``time`` position), and 8-byte ``cnt`` values. Such a store reads
exactly (an 8-byte ``cnt`` value leaves as-of scans unbounded); a writable open rebuilds it into
the current layout (:data:`coniti.log.store.LAYOUT_VERSION`).

An *erased* version (its put frame has no payload) has a ``ver`` entry (so history and the fold of
its end still find it) but no ``tver`` entry and no share in ``cnt``: no read, now or as of any
point, returns or counts it.

Layout 5 (:data:`~coniti.log.store.LAYOUT_VERSION`): ``P`` is the CRC-32C of the put's payload
bytes (0 once erased) and ``C`` a seal over the table's name, the key and the value
(:func:`sealed`), so each entry proves itself: reads check the seal and the payload's CRC instead
of confirming each entry by the other index and hashing the payload. A layout-4 store (the same
with zlib's CRC-32, :data:`ZLIB_SEALS`) opened read-only is read as it is, and a writable open
reseals it (:func:`coniti.log.checks.reseal`). A layout-3 store (no ``P``, no ``C``) opened
read-only is read as it is, with those confirmations (:mod:`coniti.log.reads`).

The sub-databases' names, and which a store holds, are :mod:`coniti.log.store`'s; the log's keys
and name keys are :mod:`coniti.log.keys`'s. Keys and values are built and parsed by the functions
below; the hot loops of reads and bulk writes (:mod:`coniti.log.reads`, :func:`put_entries`) use
the constants below instead of a call per entry, and say which function they write out.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from crc32c import crc32c

from coniti.errors import StoreCorrupted
from coniti.log.codec import payload_view
from coniti.log.keys import (
    MAX_SEQ,
    NSID_LEN,
    SEQ_LEN,
    decode_ts_key,
    inv_seq_key,
    name_key,
    seq_from_key,
    seq_key,
    ts_key,
)
from coniti.log.store import LAYOUT_VERSION, LOG_DB, SYS_DB, TREE_DB

__all__ = ["SEALS", "ZLIB_SEALS", "Dbs", "Entries", "Seals", "payload_crcs", "put_entries"]

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")

LIVE = bytes(8)
"""The end ``E`` of a live version in ``ver`` and ``tver`` values (no event ends it)."""
TS_END = NSID_LEN + 8
TSK = slice(NSID_LEN, TS_END)
"""The timestamp key ``T`` in a ``time``/``tver`` key ``N T S``."""
SK = slice(TS_END, None)
"""The sequence key ``S`` in a ``time``/``tver`` key ``N T S`` (the log's key of the put)."""
POSITION = slice(NSID_LEN, None)
"""The position ``T S`` of a record in (timestamp, write order): a ``time``/``tver`` key after ``N``."""
PAST_KEY = b"\xff" * 17
"""After ``N``: sorts after every ``T S`` (16 bytes), so ``N + PAST_KEY`` bounds the keys of ``N``."""
TS_ZERO = ts_key(0.0)
TV_END = SEQ_LEN + 8
"""End of the timestamp key in a ``ver`` value ``E T`` (a version with an expiry has ``E T X``);
the ``E T`` is what the read checks compare."""
XK_END = TV_END + 8
"""End of the expiry key ``X`` in a ``ver`` value ``E T X``."""
INLINE = b"\x00"
"""The first byte of an inline (not hashed) name key."""
KEY_NTS = TS_END + SEQ_LEN
"""The length of a ``time``/``tver`` key ``N T S``."""


def ver_key(nsid: bytes, idk: bytes, seq: int) -> bytes:
    """``ver`` key ``N I ~S`` of the version put at ``seq``; its value is ``E T`` (:data:`LIVE`
    or the ending event's sequence key, then the timestamp key)."""
    return nsid + idk + inv_seq_key(seq)


def meta_key(nsid: bytes, mk: bytes, seq: int) -> bytes:
    """``meta`` key ``N K ~S`` of the metadata write at ``seq`` (value empty)."""
    return nsid + mk + inv_seq_key(seq)


def erx_key(nsid: bytes, idk: bytes, seq: int) -> bytes:
    """``erx`` key ``N I S`` of the erase event ``seq`` of a record (value empty)."""
    return nsid + idk + seq_key(seq)


def time_key(nsid: bytes, tsk: bytes, sk: bytes) -> bytes:
    """``time`` and ``tver`` key ``N T S`` (``sk`` the put's sequence key); ``time`` values are
    ``I``, ``tver`` values ``E I``."""
    return nsid + tsk + sk


def position_key(tsk: bytes, seq: int) -> bytes:
    """The position ``T S`` (see :data:`POSITION`) of timestamp key ``tsk`` and sequence ``seq``."""
    return tsk + seq_key(seq)


def cnt_key(nsid: bytes, seq: int) -> bytes:
    """``cnt`` key ``N S``: the state of namespace ``N`` right after event ``seq``."""
    return nsid + seq_key(seq)


def exv_key(nsid: bytes, xk: bytes, seq: int) -> bytes:
    """``exv`` key ``N X S`` of the version put at ``seq`` expiring at expiry key ``xk``; its value
    is the sealed end ``E``. The key ``N`` alone (value b"") is the namespace's marker."""
    return nsid + xk + seq_key(seq)


def opx_key(nsid: bytes, op_id: str) -> bytes:
    """``opx`` key ``N O`` of op id ``op_id``; its value is the op event's sequence key."""
    return nsid + name_key(op_id)


def fbk_key(nsid: bytes, idk: bytes, seq: int) -> bytes:
    """``fbk`` key ``N I S`` of the feedback event ``seq`` of a record (value empty)."""
    return nsid + idk + seq_key(seq)


TREE_KEY_LEN = SEQ_LEN + 1
"""The length of a ``tree`` key ``S h``: the sequence key of the event whose append completed the
node, then its level as one byte."""
TREE_VALUE_LEN = 32
"""The length of a ``tree`` value: the node's SHA-256 hash (RFC 9162, :mod:`coniti.proofs`)."""


def tree_key(level: int, index: int) -> bytes:
    """``tree`` key ``S h`` of node ``(level, index)``, ``level >= 1`` (:mod:`coniti.proofs`):
    ``S = (index + 1)·2^level`` is the sequence number of the event whose append completed it (leaf
    ``S - 1`` is event ``S``). Level 0 is not stored: a leaf is the hash of its event's hash."""
    return completed_key((index + 1) << level, level)


def completed_key(seq: int, level: int) -> bytes:
    """``tree`` key ``S h`` of the node of ``level`` that the append of event ``seq`` completes:
    the keys of the nodes one append completes follow every key before them, level 0 first, so
    the table is written in LMDB's append mode."""
    return _COMPLETED.pack(seq, level)


_COMPLETED = struct.Struct(">QB")
pack_completed_key = _COMPLETED.pack
""":func:`completed_key` without the Python call (the same bytes: ``S`` as :func:`seq_key`, then
``h``), for the append's loop."""


def tree_covers(last_key: bytes | None, head: int) -> int:
    """How many events the tree table covers, given its greatest key ``last_key`` (None: an empty
    table) and the log's ``head``: the table holds the nodes of level 1 and up, which only
    even-numbered events complete, so it covers the log up to ``head`` when its greatest key's
    sequence number is ``head`` rounded down to even; it then covers ``head``, else that sequence
    number. Raises :class:`StoreCorrupted` for a key of the wrong length."""
    if last_key is None:
        last = 0
    elif len(last_key) != TREE_KEY_LEN:
        raise StoreCorrupted(f"the tree table is damaged: key {bytes(last_key).hex()} is not {TREE_KEY_LEN} bytes")
    else:
        last = seq_from_key(last_key[:SEQ_LEN])
    return head if last == head & ~1 else last


def nsid_of(number: int) -> bytes:
    """The namespace id ``N`` numbered ``number`` (ids run 0, 1, ... in log order)."""
    return _U32.pack(number)


def nsid_number(nsid: bytes) -> int:
    """The number of namespace id ``nsid``."""
    return int(_U32.unpack(nsid)[0])


CRC = struct.Struct(">I")
SEAL = CRC.size
_crc = crc32c
"""The CRC of layout 5 (:data:`~coniti.log.store.LAYOUT_VERSION`): CRC-32C (Castagnoli), of every
payload CRC ``P`` and seal ``C``. Layouts 3 and 4 used zlib's CRC-32 (:class:`Dbs` picks the one
of the store's layout for reads; writes are always in the current layout)."""
unpack_crc = CRC.unpack_from
unpack_pc = struct.Struct(">II").unpack_from
"""``(P, C)``: the payload CRC and the seal that end a ``ver``, ``tver`` or ``time`` value."""
PC = 2 * SEAL
"""The length of the ``P C`` that ends a ``ver``, ``tver`` or ``time`` value."""


def sealed(key: bytes, body: bytes, seed: int = 0) -> bytes:
    """A sealed value: ``body`` then the CRC of ``key ‖ body``, for ``cnt`` and ``exv``; for
    ``ver``, ``tver`` and ``time`` ``seed`` is the CRC of the sub-database's name (:data:`SEALS`),
    so the seal covers ``name ‖ key ‖ body`` and an entry of one of them never passes for an
    entry of another."""
    return body + CRC.pack(_crc(key + body, seed))  # one call: the CRC of key ‖ body


_VER = _crc(b"ver")
_TVER = _crc(b"tver")
_TIME = _crc(b"time")
NO_PAYLOAD = CRC.pack(0)
"""The payload CRC ``P`` of an erased put (the CRC of no bytes)."""
VER_LENGTHS = (TV_END + 2 * SEAL, XK_END + 2 * SEAL)
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


def opened(key: bytes, value: bytes, seed: int, crc: Callable[[Any, int], int] = _crc) -> bytes | None:
    """The body of the sealed ``ver``/``tver``/``time`` value ``value`` of ``key`` (``seed``: its
    sub-database, see :func:`sealed`; ``crc`` the layout's CRC), or None if it is too short or its
    seal does not hold."""
    n = len(value) - SEAL
    if n < SEAL or unpack_crc(value, n)[0] != crc(key + value[:n], seed):
        return None
    return value[:n]


def frame_payload_crc(frame: bytes, seq: int) -> bytes:
    """The payload CRC ``P`` (4 bytes) of the put frame ``frame`` of event ``seq`` being written."""
    try:
        return CRC.pack(_crc(payload_view(frame)))
    except ValueError as exc:
        raise StoreCorrupted(f"event {seq} is malformed: {exc}") from exc


def payload_crc(payload: bytes | memoryview) -> bytes:
    """The payload CRC ``P`` (4 bytes) of the payload bytes ``payload``, in the current layout."""
    return CRC.pack(_crc(payload))


def payload_crcs(payloads: Sequence[bytes]) -> list[bytes]:
    """The payload CRC ``P`` (4 bytes) of each put payload of ``payloads``, being written: what
    :func:`frame_payload_crc` reads from the frame that carries it (bulk writes)."""
    pack, crc = CRC.pack, _crc
    return [pack(crc(payload)) for payload in payloads]


def ver_value(key: bytes, end: bytes, tsk: bytes, xk: bytes, crc: bytes) -> bytes:
    """``ver`` value of ``key``: ``E T`` (``X`` if the version expires), the payload CRC ``P`` of
    its put (:data:`NO_PAYLOAD` once erased), sealed."""
    return sealed(key, end + tsk + xk + crc, _VER)


def tver_value(key: bytes, end: bytes, idk: bytes, crc: bytes) -> bytes:
    """``tver`` value of ``key``: ``E I P``, sealed."""
    return sealed(key, end + idk + crc, _TVER)


def time_value(key: bytes, idk: bytes, crc: bytes) -> bytes:
    """``time`` value of ``key``: ``I P``, sealed."""
    return sealed(key, idk + crc, _TIME)


def unseal(
    key: bytes, value: bytes, bodies: tuple[int, ...], legacy: bool, crc: Callable[[Any, int], int] = _crc
) -> bytes | None:
    """The body of the sealed value ``value`` of ``key`` (one of the lengths ``bodies``; ``crc`` the
    layout's CRC), or None if its CRC or length is wrong. ``legacy`` (a store of layout 1 or 2,
    read as it is): values of those lengths carry no CRC and are taken as they are."""
    if legacy and len(value) in bodies:
        return bytes(value)
    body = bytes(value[:-SEAL])
    if len(body) not in bodies or CRC.unpack_from(value, len(body))[0] != crc(key + body, 0):
        return None
    return body


CNT_BODIES = (8, 24)
"""The lengths of a ``cnt`` body: the count alone (no position, or layout 1), or count and position."""


def cnt_value(key: bytes, count: int, last: bytes) -> bytes:
    """``cnt`` value of ``key``: the live record count (u64) and the last position in ``time`` (b"":
    none), sealed (:func:`sealed`)."""
    return sealed(key, _U64.pack(count) + last)


def cnt_count(body: bytes) -> int:
    """The count of a ``cnt`` body (an unsealed value)."""
    return int(_U64.unpack_from(body)[0])


def cnt_recount(key: bytes, body: bytes, delta: int) -> bytes:
    """The ``cnt`` value of ``key`` whose body is ``body``, with its count changed by ``delta`` and
    its position kept."""
    return sealed(key, _U64.pack(cnt_count(body) + delta) + body[8:])


def cnt_last(body: bytes) -> bytes | None:
    """The last position of a ``cnt`` body (b"": none), or None for an 8-byte value of layout 1."""
    return None if len(body) == 8 else body[8:]


def is_entry(key: bytes, prefix: bytes) -> bool:
    """Whether ``key`` is ``prefix`` and a sequence key (``S`` or ``~S``): an entry of one record or
    metadata key ``prefix`` = ``N I`` or ``N K`` in ``ver``, ``meta`` or ``erx``."""
    return len(key) == len(prefix) + SEQ_LEN and key.startswith(prefix)


def sound_landing(
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


def scan_stop(nsid: bytes, end: float | None) -> bytes:
    """The key a walk of ``time`` or ``tver`` from within namespace ``nsid`` stops at: every key
    from the walk's start on is ``N T S`` with ``N >= nsid``, so it is in ``nsid`` and has a
    timestamp before ``end`` (if any) iff it sorts before this one key."""
    return nsid + (ts_key(end) if end is not None else PAST_KEY)


def scan_start(nsid: bytes, start: float | None, after: tuple[float, int] | None) -> bytes:
    """The first key a scan of namespace ``nsid`` from timestamp ``start`` strictly after the
    position ``after`` = ``(timestamp, seq)`` may return, in ``time`` or ``tver``."""
    first = nsid + ts_key(start) if start is not None else nsid
    if after is not None:
        first = max(first, nsid + position_key(ts_key(after[0]), after[1] + 1))
    return first


def split_position(position: bytes) -> tuple[float, int]:
    """The (timestamp, seq) of a position ``T S``."""
    return decode_ts_key(position[:8]), seq_from_key(position[8:])


class Entries(NamedTuple):
    """The entries a run of puts writes, per table, in the run's order (``putmulti`` input), and
    ``after``: each namespace's ``(live record count, last position in time)`` once they are in."""

    log: list[tuple[bytes, bytes]]
    ver: list[tuple[bytes, bytes]]
    tver: list[tuple[bytes, bytes]]
    time: list[tuple[bytes, bytes]]
    cnt: list[tuple[bytes, bytes]]
    after: dict[bytes, tuple[int, bytes]]


def put_entries(
    seq: int,
    frames: Sequence[bytes],
    nsids: Sequence[bytes],
    idks: Sequence[bytes],
    tsks: Sequence[bytes],
    crcs: Sequence[bytes],
    before: Callable[[bytes], tuple[int, bytes]],
) -> Entries:
    """The entries of events ``seq, seq + 1, ...`` (``frames``, in the log) folded as puts of
    records that are not live, row ``i`` of the columns being event ``i``'s namespace id, id key,
    timestamp key and payload CRC ``P``; ``before(N)`` gives namespace ``N``'s live record count
    and last position in ``time`` before the run. Byte for byte the keys and values of
    :func:`ver_key`/:func:`ver_value`, :func:`time_key` with :func:`tver_value` and
    :func:`time_value`, and :func:`cnt_key`/:func:`cnt_value` for each put in turn, written out
    here (the loop of bulk writes)."""
    after: dict[bytes, tuple[int, bytes]] = {}
    seq_key_, u64, seal, crc32 = seq_key, _U64.pack, CRC.pack, _crc
    live, ver_seed, tver_seed, time_seed, inverted = LIVE, _VER, _TVER, _TIME, MAX_SEQ
    log: list[tuple[bytes, bytes]] = []
    ver: list[tuple[bytes, bytes]] = []
    tver: list[tuple[bytes, bytes]] = []
    time_: list[tuple[bytes, bytes]] = []
    cnt: list[tuple[bytes, bytes]] = []
    count = -1
    nsid = top = b""
    for frame, row_nsid, idk, tsk, crc in zip(frames, nsids, idks, tsks, crcs, strict=True):
        if row_nsid is not nsid:
            if count >= 0:
                after[nsid] = (count, top)
            nsid = row_nsid
            count, top = after.get(nsid) or before(nsid)
        sk = seq_key_(seq)
        log.append((sk, frame))
        vk = nsid + idk + u64(inverted - seq)  # ver_key
        body = live + tsk + crc
        ver.append((vk, body + seal(crc32(vk + body, ver_seed))))
        position = tsk + sk
        if position > top:
            top = position
        tk = nsid + position  # time_key
        body = idk + crc
        time_.append((tk, body + seal(crc32(tk + body, time_seed))))
        body = live + body
        tver.append((tk, body + seal(crc32(tk + body, tver_seed))))
        count += 1
        ck = nsid + sk  # cnt_key
        body = u64(count) + top
        cnt.append((ck, body + seal(crc32(ck + body))))
        seq += 1
    if count >= 0:
        after[nsid] = (count, top)
    return Entries(log, ver, tver, time_, cnt, after)


class Dbs:
    """The sub-database handles of one environment by name (built once, shared by transactions).
    ``log`` and ``sys`` are None for a scratch environment holding projections only."""

    __slots__ = (
        "cnt", "erx", "exv", "fbk", "legacy", "log", "meta", "ns", "nsn", "opx", "seals", "sealed", "sys",
        "time", "tree", "tver", "ver",
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
        self.tree = dbs.get(TREE_DB)
        """The Merkle tree's nodes (layout 6); None in a store of an older layout opened read-only."""
