"""A damaged key in a *branch* page of LMDB's B-tree (a separator, which no seal covers: the seals
cover the entries of the leaves) misdirects a lookup; LMDB's search then lands on the first entry of
the page after the one it was sent to, which can sort *before* the probe while being a genuine,
sealed entry with a genuine predecessor (``log/FORMAT.md`` §5.1, "The walk itself"). Every read
must then raise :class:`StoreCorrupted` naming the namespace and the record, not answer wrongly
(issue 12: the fault campaign's seed 7 found a ``get`` answering "missing" and a ``history``
answering empty after one byte of a ``ver`` separator changed).

The damage is planted in place in ``data.mdb``: the sub-database's root page (from its record in
LMDB's main database) is a branch page, and one byte of one of its separator keys is changed."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import pytest
from helpers_log import rec

from coniti.errors import StoreCorrupted
from coniti.impl.log import LogBackend
from coniti.memory import (
    CountRequest,
    DeleteRequest,
    GetRequest,
    MetaGetRequest,
    MetaSetRequest,
    PutRequest,
    ScanRequest,
    TimeRange,
)

NS = ("alice",)
IDS = [f"r{i:03d}" for i in range(300)]


def _separators(path: Path, db: bytes) -> list[tuple[int, bytes]]:
    """``(file offset of the key, key)`` of every separator of sub-database ``db``'s root page, which
    must be a branch page (LMDB 0.9: a page header of 16 bytes, then the nodes' u16 offsets; a
    branch node is 8 bytes of child page number and key size, then the key; node 0's key is empty)."""
    import lmdb

    env = lmdb.open(str(path), max_dbs=16, readonly=True, lock=False)
    try:
        psize = env.stat()["psize"]
        with env.begin() as txn:
            record = txn.get(db)  # the sub-database's MDB_db in the main database
    finally:
        env.close()
    assert record is not None
    depth, root = struct.unpack_from("<H", record, 6)[0], struct.unpack_from("<Q", record, 40)[0]
    assert depth == 2, f"the {db.decode()} table should have one branch level, not {depth - 1}"
    raw = path.joinpath("data.mdb").read_bytes()
    page = root * psize
    flags, lower = struct.unpack_from("<HH", raw, page + 10)
    assert flags & 0x01, "the root is not a branch page"
    out = []
    for i in range(1, (lower - 16) // 2):
        node = page + struct.unpack_from("<H", raw, page + 16 + 2 * i)[0]
        size = struct.unpack_from("<H", raw, node + 6)[0]
        out.append((node + 8, raw[node + 8 : node + 8 + size]))
    return out


def _poke(path: Path, offset: int, value: int) -> None:
    with open(path / "data.mdb", "r+b") as fh:
        fh.seek(offset)
        fh.write(bytes([value]))


def _id_of(key: bytes) -> str:
    """The record id of a ``ver`` key ``N I ~S`` whose id key is inline."""
    size = struct.unpack_from(">H", key, 5)[0]
    return key[7 : 7 + size].decode()


def _store(path: Path) -> None:
    with LogBackend(path) as s:
        s.put(PutRequest(records=[rec(i, float(n), NS) for n, i in enumerate(IDS)]))


def _raised_for(exc: pytest.ExceptionInfo[StoreCorrupted], record_id: str) -> None:
    message = str(exc.value)
    assert repr(record_id) in message and "alice" in message, message


def _misdirected_ver(path: Path) -> str:
    """Damage the first ``ver`` separator past the first one so that it sorts after every id (the
    hundreds digit of its id set to 0x81); return the id right after it, which a lookup then
    misses (LMDB lands on the separator's own entry, before the probe)."""
    offset, key = _separators(path, b"ver")[1]
    sep = _id_of(key)
    _poke(path, offset + 8, 0x81)  # N (4), 0x00, u16 length, "r", then the hundreds digit
    return IDS[IDS.index(sep) + 1]


def test_get_past_a_damaged_ver_separator_raises_naming_the_record(tmp_path: Path) -> None:
    """A get whose lookup a damaged ``ver`` separator sends before its probe raises StoreCorrupted
    naming the record and its namespace (it used to answer "missing")."""
    path = tmp_path / "s"
    _store(path)
    victim = _misdirected_ver(path)
    with LogBackend(path, read_only=True) as s, pytest.raises(StoreCorrupted) as exc:
        s.get(GetRequest(ids=[victim], namespace=NS))
    _raised_for(exc, victim)


def test_history_past_a_damaged_ver_separator_raises_naming_the_record(tmp_path: Path) -> None:
    """A history whose walk a damaged ``ver`` separator starts before the record's first entry
    raises StoreCorrupted naming the record and its namespace (it used to return no events)."""
    path = tmp_path / "s"
    _store(path)
    victim = _misdirected_ver(path)
    with LogBackend(path, read_only=True) as s, pytest.raises(StoreCorrupted) as exc:
        s.history(victim, NS)
    _raised_for(exc, victim)


def test_scan_from_just_after_a_damaged_time_separator_raises(tmp_path: Path) -> None:
    """A scan starting just after the timestamp of a ``time`` separator damaged to sort after the
    namespace raises StoreCorrupted naming the namespace (it used to return the separator's own
    record, whose timestamp is before the scan's start)."""
    path = tmp_path / "s"
    _store(path)
    offset, key = _separators(path, b"time")[1]
    ts = struct.unpack(">d", struct.pack(">Q", struct.unpack_from(">Q", key, 4)[0] ^ (1 << 63)))[0]
    _poke(path, offset + 4, 0xFF)  # the timestamp key's first byte: sorts after every timestamp
    start = math.nextafter(ts, math.inf)
    with LogBackend(path, read_only=True) as s, pytest.raises(StoreCorrupted, match="alice"):
        s.scan(ScanRequest(namespace=NS, time_range=TimeRange(start=start)))


def _revived_store(path: Path, times: int = 150) -> None:
    """One record put and deleted ``times`` times, then put again (live): its ``ver`` entries span
    leaves, every one but the newest ended by a delete."""
    with LogBackend(path) as s:
        for n in range(times):
            s.put(PutRequest(records=[rec("hot", float(n), NS)]))
            s.delete(DeleteRequest(ids=["hot"], namespace=NS))
        s.put(PutRequest(records=[rec("hot", float(times), NS)]))


def test_get_sent_past_the_live_version_to_a_deleted_one_raises(tmp_path: Path) -> None:
    """A get that a ``ver`` separator damaged to sort before the record sends past its live version
    onto an older, deleted one raises StoreCorrupted naming it (it used to answer "missing")."""
    path = tmp_path / "s"
    _revived_store(path)
    offset, _ = _separators(path, b"ver")[0]
    _poke(path, offset + 7, ord("a"))  # "hot" -> "aot": sorts before the record
    with LogBackend(path, read_only=True) as s, pytest.raises(StoreCorrupted) as exc:
        s.get(GetRequest(ids=["hot"], namespace=NS))
    _raised_for(exc, "hot")


def _later_version_misdirected(path: Path) -> int:
    """:func:`_revived_store`, then its first ``ver`` separator (a version of the record) damaged in
    the low byte of its ``~S`` to sort after the probe of a get as of two events before that
    version's put; returns the put's sequence number. Such a get lands on that later version."""
    _revived_store(path)
    offset, key = _separators(path, b"ver")[0]
    _poke(path, offset + len(key) - 1, 0xFF)
    return (1 << 64) - 1 - struct.unpack_from(">Q", key, len(key) - 8)[0]


def test_get_as_of_sent_onto_a_later_version_raises(tmp_path: Path) -> None:
    """A get as of an event that a damaged ``ver`` separator sends onto a version put after that
    event raises StoreCorrupted naming the record (it used to return that later version)."""
    path = tmp_path / "s"
    put_seq = _later_version_misdirected(path)
    with LogBackend(path, read_only=True) as s, pytest.raises(StoreCorrupted) as exc:
        s.at(put_seq - 2).get(GetRequest(ids=["hot"], namespace=NS))
    _raised_for(exc, "hot")


def test_metadata_get_past_a_damaged_meta_separator_raises(tmp_path: Path) -> None:
    """A metadata get whose lookup a damaged ``meta`` separator sends before its probe raises
    StoreCorrupted naming the namespace (it used to answer that the key is unset)."""
    path = tmp_path / "s"
    keys = [f"k{i:03d}" for i in range(300)]
    with LogBackend(path) as s:
        for key in keys:
            s.set_meta(MetaSetRequest(key=key, value=key, namespace=NS))
    offset, sep = _separators(path, b"meta")[1]
    _poke(path, offset + 8, 0x81)  # the hundreds digit of the key's name
    victim = keys[keys.index(_id_of(sep)) + 1]
    with LogBackend(path, read_only=True) as s, pytest.raises(StoreCorrupted, match="alice"):
        s.get_meta(MetaGetRequest(key=victim, namespace=NS))


def test_count_as_of_just_after_a_damaged_cnt_separator_raises(tmp_path: Path) -> None:
    """A count as of the event a damaged ``cnt`` separator names (damaged to sort after its
    namespace) raises StoreCorrupted naming the namespace (it used to give the count one event
    earlier)."""
    path = tmp_path / "s"
    with LogBackend(path) as s:
        for n, i in enumerate(IDS):
            s.put(PutRequest(records=[rec(i, float(n), NS)]))
    offset, key = _separators(path, b"cnt")[1]
    seq = struct.unpack_from(">Q", key, 4)[0]
    _poke(path, offset + 4, 0xFF)  # the sequence number's first byte
    with LogBackend(path, read_only=True) as s, pytest.raises(StoreCorrupted, match="alice"):
        s.at(seq).count(CountRequest(namespace=NS))


def test_diff_across_a_damaged_ver_separator_raises(tmp_path: Path) -> None:
    """A diff whose earlier point's lookup a damaged ``ver`` separator sends onto the version put
    at its later point raises StoreCorrupted naming the record (it used to report the record
    unchanged)."""
    path = tmp_path / "s"
    put_seq = _later_version_misdirected(path)
    with LogBackend(path, read_only=True) as s, pytest.raises(StoreCorrupted) as exc:
        s.diff(put_seq - 2, put_seq, namespace=NS)
    _raised_for(exc, "hot")
