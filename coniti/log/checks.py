"""``rebuild`` recomputes every projection from the log; ``reseal`` upgrades a layout-4 store in
place; ``verify`` proves the store is sound.

``verify`` never raises on a problem it can describe; it returns a :class:`VerifyReport`. Its steps:

0. **Length** (always): with every writer held off, the data file must be as long as its newest
   LMDB meta page needs (:func:`coniti.log.guard.size_problem`); a truncated file is reported and
   nothing else is read (reading it would kill the process with SIGBUS).
1. **Structure** (optional, on by default): with every writer held off, the data file is walked by
   py-lmdb's offline verifier (pure Python, never through liblmdb), so a damaged file is reported
   instead of crashing the process. If the structure is damaged, nothing else is read.
2. **Log**: on a snapshot of exactly that state, every event is decoded strictly (payload against its
   digest) and walked along the hash chain (:class:`~coniti.log.chain.Chain`: sequence numbers run
   1, 2, ... without a gap, each event's ``prev`` is the previous event's hash), recorded times must
   not go backwards (the fold's check), and the head record must name the last event; the head
   witness must not name a commit the store lost (:func:`coniti.log.guard.witness_problem`).
3. **Projections**: the log is folded afresh into a scratch LMDB environment (a temporary directory,
   committed in chunks so memory stays flat) and every projection sub-database is compared with
   the store's, entry by entry.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import struct
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import lmdb
import lmdb.verify

from coniti.errors import ConitiError, StoreCorrupted
from coniti.log import guard
from coniti.log.chain import Chain, FoldError
from coniti.log.codec import decode_envelope, decode_event, event_hash, payload_view
from coniti.log.keys import NSID_LEN, SEQ_LEN, seq_from_inv, seq_from_key
from coniti.log.layout import (
    CNT_BODIES,
    KEY_NTS,
    SEAL,
    SEALS,
    VER_LENGTHS,
    ZLIB_SEALS,
    opened,
    payload_crc,
    sealed,
    unpack_crc,
    unseal,
)
from coniti.log.projections import Dbs, IndexView, Projections
from coniti.log.store import (
    LAYOUT_VERSION,
    LOG_DB,
    PROJECTION_DBS,
    RESEALED_LAYOUT,
    RETIRED_DBS,
    SYS_DB,
    SYS_LAYOUT,
    Store,
)
from coniti.log.tree import TreeAppends

__all__ = ["VerifyReport", "rebuild", "reseal", "verify"]

MAX_PROBLEMS = 100
DIFFS_PER_DB = 3
CHUNK = 20_000


@dataclass(frozen=True)
class VerifyReport:
    """What ``verify`` found. ``ok`` when ``problems`` is empty."""

    events_checked: int
    head_seq: int
    head_hash: str
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.dropped = 0

    def add(self, message: str) -> None:
        if len(self.items) < MAX_PROBLEMS:
            self.items.append(message)
        else:
            self.dropped += 1

    def result(self) -> tuple[str, ...]:
        if self.dropped:
            return (*self.items, f"... and {self.dropped} more problems")
        return tuple(self.items)


def rebuild(store: Store) -> int:
    """Recompute every projection from the log alone, in one write transaction; returns the number of
    events folded. Only envelopes are read (payloads are ``verify``'s business). Raises
    :class:`StoreCorrupted` (:class:`~coniti.log.chain.FoldError` naming the event if the log has a
    gap, a broken chain or an event that does not apply) and changes nothing."""
    dbs = store.dbs

    def write(txn: Any) -> int:
        for name in PROJECTION_DBS:
            txn.drop(dbs[name], delete=False)
        _retire_old_layout(store, txn)
        p = Projections(txn, Dbs(dbs))
        chain = Chain()
        for key, frame in txn.cursor(db=dbs[LOG_DB]):
            event = decode_envelope(frame, seq_from_key(key))
            prev_at = chain.at
            chain.follow(event)
            p.fold(event, prev_at, bytes(frame))
        head = p.head()
        if head.seq != chain.seq or head.hash != chain.hash:
            raise StoreCorrupted(
                f"the head record names event {head.seq}; the log ends at event {chain.seq}"
            )
        return chain.seq

    return store.write(write)


def reseal(store: Store) -> int:
    """Upgrade a store of layout 4 (:data:`~coniti.log.store.RESEALED_LAYOUT`) or 5 to the current
    layout in one write transaction, without a rebuild: a layout-4 store has every payload CRC and
    seal recomputed in the current layout's CRC once the layout-4 one is checked (:func:`_reseal`);
    then the Merkle tree (layout 6) is built from the log's chain hashes (:func:`_build_tree`).
    Returns the number of values resealed (0 for a layout-5 store, or when another process
    upgraded the store first). Raises :class:`StoreCorrupted` naming the damaged entry or event and
    changes nothing."""
    dbs = store.dbs

    def write(txn: Any) -> int:
        found = txn.get(SYS_LAYOUT, db=dbs[SYS_DB])
        if found not in (struct.pack(">I", RESEALED_LAYOUT), struct.pack(">I", RESEALED_LAYOUT + 1)):
            return 0
        resealed = _reseal(IndexView(txn, Dbs(dbs))) if found == struct.pack(">I", RESEALED_LAYOUT) else 0
        _build_tree(txn, Dbs(dbs))
        _retire_old_layout(store, txn)
        return resealed

    return store.write(write)


def _build_tree(txn: Any, dbs: Dbs) -> int:
    """Write the Merkle tree's node table afresh from the log (a store upgraded to layout 6): each
    event's chain hash, in order, through :class:`~coniti.log.tree.TreeAppends`. The log must run
    1, 2, ... without a gap and end at the head, else :class:`StoreCorrupted`. Returns the number
    of leaves."""
    txn.drop(dbs.tree, delete=False)
    tree = TreeAppends(txn, dbs)
    seq = 0
    last = prev = bytes(32)
    hashes: list[bytes] = []
    for key, frame in txn.cursor(db=dbs.log):
        seq += 1
        if seq_from_key(key) != seq:
            raise StoreCorrupted(f"the log has a gap before event {seq_from_key(key)}; the tree cannot be built")
        try:
            last = event_hash(frame)
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreCorrupted(f"event {seq} is malformed: {exc}") from exc
        hashes.append(last)
        if len(hashes) == CHUNK:
            tree.extend(seq - CHUNK + 1, hashes, prev)
            prev, hashes = last, []
    tree.extend(seq - len(hashes) + 1, hashes, prev)
    head = IndexView(txn, dbs).head()
    if head.seq != seq or head.hash != last:
        raise StoreCorrupted(f"the head record names event {head.seq}; the log ends at event {seq}")
    return seq


def _reseal(p: IndexView) -> int:
    """Reseal every value of a layout-4 store in the current layout (``p``: a write transaction's
    view of the current layout): each ``ver``, ``tver`` and ``time`` value gets the CRC-32C of
    its put's payload as ``P`` and a CRC-32C seal, each ``cnt`` and ``exv`` value a CRC-32C
    seal; nothing else changes. Each value is checked in layout 4 first: its zlib seal must
    hold and, for the three, its ``P`` must be the zlib CRC-32 of the payload of the put the key
    names, so damage is never sealed as genuine. Else :class:`StoreCorrupted` naming the table
    and entry (the caller's transaction then changes nothing). Returns how many values were
    resealed."""
    old = ZLIB_SEALS
    txn = p.txn
    d = p.d
    resealed = 0
    for name, db, seeds in ((b"ver", d.ver, (old.ver, SEALS.ver)), (b"tver", d.tver, (old.tver, SEALS.tver)),
                            (b"time", d.time, (old.time, SEALS.time))):
        cur = txn.cursor(db=db)
        more = cur.first()
        while more:
            key = cur.key()
            body = opened(key, cur.value(), seeds[0], old.crc)
            seq = _resealed_seq(p, name, key, body)
            try:
                payload = payload_view(p.frame(seq))
            except ValueError as exc:
                raise StoreCorrupted(f"event {seq} is malformed: {exc}") from exc
            assert body is not None
            if old.crc(payload, 0) != unpack_crc(body, len(body) - SEAL)[0]:
                raise _unresealable(p, name, key, seq, "its payload does not match the CRC its entry holds")
            cur.put(key, sealed(key, body[:-SEAL] + payload_crc(payload), seeds[1]))
            resealed += 1
            more = cur.next()
    for name, db, bodies in ((b"cnt", d.cnt, CNT_BODIES), (b"exv", d.exv, (SEQ_LEN,))):
        cur = txn.cursor(db=db)
        more = cur.first()
        while more:
            key = cur.key()
            value = cur.value()
            if name == b"exv" and len(key) == NSID_LEN:  # a namespace's marker: no seal
                if value:
                    raise _unresealable(p, name, key, None, "its marker holds a value")
            else:
                body = unseal(key, value, bodies, False, old.crc)
                if body is None:
                    raise _unresealable(p, name, key, None, "its seal does not hold")
                cur.put(key, sealed(key, body))
                resealed += 1
            more = cur.next()
    return resealed


def _resealed_seq(p: IndexView, name: bytes, key: bytes, body: bytes | None) -> int:
    """The put seq of the layout-4 ``ver``, ``tver`` or ``time`` entry ``key`` whose opened body
    is ``body`` (None: its seal does not hold), once its key and body have their lengths."""
    if name == b"ver":
        ok = len(key) >= NSID_LEN + 3 + SEQ_LEN and body is not None and len(body) + SEAL in VER_LENGTHS
    else:
        smallest = 3 + SEAL + (SEQ_LEN if name == b"tver" else 0)
        ok = len(key) == KEY_NTS and body is not None and len(body) >= smallest
    if not ok:
        raise _unresealable(p, name, key, None, "its seal or length is wrong")
    return seq_from_inv(key[-SEQ_LEN:]) if name == b"ver" else seq_from_key(key[-SEQ_LEN:])


def _unresealable(p: IndexView, name: bytes, key: bytes, seq: int | None, why: str) -> StoreCorrupted:
    """The error of an upgrade to the current layout that found entry ``key`` of table ``name``
    damaged (``seq``: the put it names, if known)."""
    what = f"of event {seq} " if seq is not None else f"{key.hex()} "
    return StoreCorrupted(
        f"the {name.decode()} entry {what}in namespace {p.label(key[:NSID_LEN])} is damaged ({why}): "
        f"the store stays in layout 4 (its upgrade to layout {LAYOUT_VERSION} changed nothing)"
    )


def _retire_old_layout(store: Store, txn: Any) -> None:
    """Delete the sub-databases of older layouts and mark the store as the current layout (inside
    the rebuild's transaction: an interrupted upgrade leaves the old layout whole)."""
    for name in RETIRED_DBS:
        with contextlib.suppress(lmdb.NotFoundError):
            txn.drop(store.env.open_db(name, txn=txn, create=False), delete=True)
    txn.put(SYS_LAYOUT, struct.pack(">I", LAYOUT_VERSION), db=store.dbs[SYS_DB])


def _length(data_file: str) -> list[str]:
    """The data file against its meta pages (:func:`coniti.log.guard.size_problem`)."""
    problem = guard.size_problem(data_file)
    return [] if problem is None else [problem]


def _structure(data_file: str) -> list[str]:
    short = _length(data_file)
    if short:
        return short  # the verifier would read past the end
    try:
        found: list[str] = lmdb.verify.verify(data_file, subdir=False)  # type: ignore[no-untyped-call]
        return [f"LMDB structure: {p}" for p in found]
    except (lmdb.verify.VerifyError, OSError) as exc:
        return [f"LMDB structure: {exc}"]


_SCRATCH_PREFIX = "coniti-verify-"
_STALE_SECONDS = 60.0


def _remove_stale_scratch(scratch_dir: str | None) -> None:
    """Remove scratch directories of verifications killed before they unlinked them (this user's,
    older than a minute)."""
    directory = scratch_dir or tempfile.gettempdir()
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            if not entry.name.startswith(_SCRATCH_PREFIX):
                continue
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if (
                    stat.S_ISDIR(info.st_mode)
                    and info.st_uid == os.getuid()
                    and now - info.st_mtime > _STALE_SECONDS
                ):
                    shutil.rmtree(entry.path, ignore_errors=True)


class _Scratch:
    """A private temporary LMDB environment holding a fresh fold of the log. Its directory is
    removed as soon as the environment is open (LMDB keeps its open files), so a killed
    verification leaves nothing in the scratch directory and the copy lives only while it runs."""

    def __init__(self, size_hint: int, scratch_dir: str | None) -> None:
        _remove_stale_scratch(scratch_dir)
        self.dir = tempfile.mkdtemp(prefix=_SCRATCH_PREFIX, dir=scratch_dir)
        try:
            self.env = lmdb.open(
                self.dir,
                map_size=max(1 << 28, 2 * size_hint),
                sync=False,
                metasync=False,
                max_dbs=len(PROJECTION_DBS) + 2,
                mode=0o700,
            )
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dbs = {name: self.env.open_db(name) for name in PROJECTION_DBS}
        self.d = Dbs(self.dbs)
        self.txn: Any = self.env.begin(write=True)
        self.p = Projections(self.txn, self.d)

    def commit_chunk(self) -> None:
        self.txn.commit()
        self.txn = self.env.begin(write=True)
        self.p = Projections(self.txn, self.d)

    def finish(self) -> Any:
        self.txn.commit()
        self.txn = self.env.begin()
        return self.txn

    def close(self) -> None:
        try:
            self.txn.abort()
            self.env.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def _compare(name: str, live: Iterator[tuple[bytes, bytes]], fresh: Iterator[tuple[bytes, bytes]],
             problems: _Problems) -> None:
    diffs: list[str] = []
    total = 0
    a = next(live, None)
    b = next(fresh, None)
    while a is not None and a == b:
        a = next(live, None)
        b = next(fresh, None)
    while a is not None or b is not None:
        if a is not None and b is not None and a[0] == b[0]:
            if a[1] != b[1]:
                total += 1
                diffs.append(f"value differs at key {a[0].hex()}")
            a, b = next(live, None), next(fresh, None)
        elif b is None or (a is not None and a[0] < b[0]):
            assert a is not None
            total += 1
            diffs.append(f"unexpected entry {a[0].hex()}")
            a = next(live, None)
        else:
            total += 1
            diffs.append(f"missing entry {b[0].hex()}")
            b = next(fresh, None)
    if total:
        shown = "; ".join(diffs[:DIFFS_PER_DB])
        problems.add(
            f"projection {name} differs from a fresh fold of the log in {total} entries: {shown}"
        )


def verify(store: Store, *, structure: bool = True, scratch_dir: str | None = None) -> VerifyReport:
    """Check the store; see the module docstring. Never raises for a problem it can describe."""
    problems = _Problems()
    n = 0
    chain = Chain()
    try:
        with store.read_at_rest(_structure if structure else _length) as (found, txn):
            for message in found:
                problems.add(message)
            if txn is None:
                return VerifyReport(0, 0, "", problems.result())
            dbs = store.dbs
            p = Projections(txn, Dbs(dbs, layout=store.layout))
            head = p.head()
            size = os.path.getsize(os.path.join(store.path, "data.mdb"))
            scratch = _Scratch(size, scratch_dir)
            try:
                fold_ok = True
                for key, frame in txn.cursor(db=dbs[LOG_DB]):
                    n += 1
                    if len(key) != 8:
                        problems.add(f"log key {bytes(key).hex()} is not an 8-byte sequence number")
                        fold_ok = False
                        continue
                    seq = seq_from_key(key)
                    try:
                        chain.number(seq)
                    except FoldError as exc:
                        problems.add(str(exc))
                        fold_ok = False
                    try:
                        event = decode_event(frame, seq)
                    except ConitiError as exc:
                        problems.add(str(exc))
                        fold_ok = False
                        try:
                            chain.unreadable(event_hash(frame))
                        except (ValueError, KeyError, TypeError):
                            chain.unreadable(None)
                        continue
                    prev_at = chain.at
                    try:
                        chain.link(event)
                    except FoldError as exc:
                        problems.add(str(exc))
                    if fold_ok:
                        try:
                            scratch.p.fold(event, prev_at, bytes(frame))
                        except StoreCorrupted as exc:
                            problems.add(str(exc))
                            fold_ok = False
                    if n % CHUNK == 0 and fold_ok:
                        scratch.commit_chunk()
                last_seq = chain.seq
                if head.seq != last_seq or (chain.hash is not None and head.hash != chain.hash):
                    problems.add(
                        f"the head record names event {head.seq} (hash {head.hash.hex()[:16]}...); "
                        f"the log ends at event {last_seq}"
                    )
                elif last_seq and head.at != chain.at:
                    problems.add(f"the head record's recorded time differs from event {last_seq}'s")
                lost = store.witness_problem()
                if lost is not None:
                    problems.add(lost)
                if store.layout < LAYOUT_VERSION:
                    problems.add(
                        f"the store is in layout version {store.layout} (this coniti writes "
                        f"{LAYOUT_VERSION}): projections not compared; a writable open (e.g. coniti rebuild) upgrades it"
                    )
                elif fold_ok:
                    fresh = scratch.finish()
                    for name in PROJECTION_DBS:
                        _compare(
                            name.decode(),
                            txn.cursor(db=dbs[name]).iternext(),
                            fresh.cursor(db=scratch.dbs[name]).iternext(),
                            problems,
                        )
                else:
                    problems.add("projections not compared: the log itself has problems (above)")
            finally:
                scratch.close()
    except ConitiError as exc:
        problems.add(f"verify stopped: {exc}")
    except lmdb.Error as exc:
        problems.add(f"verify stopped: LMDB: {exc}")
    head_hash = chain.hash.hex() if chain.hash is not None else ""
    return VerifyReport(n, chain.seq, head_hash, problems.result())

