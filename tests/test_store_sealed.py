"""Store layouts 4 and 5: every ``ver``, ``tver`` and ``time`` value carries its put's payload CRC
``P`` and a seal ``C`` (``log/FORMAT.md`` §1, §5.1), CRC-32C in layout 5 (zlib's CRC-32 in layout
4). Reads check the seal and the payload CRC instead of confirming each entry by the other index;
layout-4 and layout-3 stores read as they are (read-only), and a writable open reseals a layout-4
store into layout 5 and rebuilds a layout-3 one."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c
from helpers_log import db_entries, put, rec, rewrite_db, to_layout_3, to_layout_4

from coniti.errors import StoreCorrupted
from coniti.impl.log import LogBackend
from coniti.log import checks
from coniti.log.codec import split_frame
from coniti.log.keys import seq_key, ts_key
from coniti.log.store import LAYOUT_VERSION, PROJECTION_DBS
from coniti.memory import (
    CountRequest,
    DeleteOp,
    GetRequest,
    PutRequest,
    ScanRequest,
    TimeRange,
    WriteRequest,
)

NS = ("alice",)


_entries = db_entries


def _sys_format(path: Path) -> int:
    return int(struct.unpack(">I", dict(_entries(path, b"sys"))[b"format"])[0])


def _store(path: Path) -> None:
    with LogBackend(path) as s:
        put(s, [rec(f"r{i}", float(i), NS) for i in range(6)])
        s.put(PutRequest(records=[rec("later", 9.0, NS).model_copy(update={"expires_at": 4.0e9})]))
        s.write(WriteRequest(ops=[DeleteOp(id="r0")], namespace=NS))
        s.erase(["r1"], namespace=NS, reason="asked to")


def _reads(s: LogBackend) -> list[Any]:
    """What every read path returns, now and as of each point (ids, timestamps, texts, expiries)."""
    def rows(records: Any) -> list[Any]:
        return [(r.note.id, r.note.timestamp, r.note.text, r.expires_at) for r in records]

    out: list[Any] = []
    for seq in range(s.head + 1):
        view = s.at(seq) if seq < s.head else s
        ids = [f"r{i}" for i in range(6)] + ["later"]
        out.append(rows(view.get(GetRequest(ids=ids, namespace=NS)).records))
        out.append(rows(view.scan(ScanRequest(namespace=NS, limit=100)).records))
        out.append(view.count(CountRequest(namespace=NS, time_range=TimeRange(start=1.0, end=8.0))).count)
    return out


def _tables(path: Path) -> dict[bytes, list[tuple[bytes, bytes]]]:
    """Every entry of every sub-database of a closed store but ``sys`` (whose ``format`` differs
    between layouts)."""
    return {name: _entries(path, name) for name in (b"log", *PROJECTION_DBS)}


def test_a_new_store_seals_every_value_with_crc32c(tmp_path: Path) -> None:
    """Each ver, tver and time value ends with the CRC-32C of its put's payload and a CRC-32C seal
    over the table name, the key and the value (an erased version's payload CRC is 0); each cnt and
    exv value ends with a CRC-32C seal over its key and value."""
    _store(tmp_path / "s")
    frames = dict(_entries(tmp_path / "s", b"log"))
    for name in (b"ver", b"tver", b"time"):
        for key, value in _entries(tmp_path / "s", name):
            body, seal = value[:-4], struct.unpack(">I", value[-4:])[0]
            assert seal == crc32c(name + key + body)
            seq = struct.unpack(">Q", key[-8:])[0]
            seq = 2**64 - 1 - seq if name == b"ver" else seq
            payload = split_frame(frames[seq_key(seq)])[2]
            assert struct.unpack(">I", body[-4:])[0] == crc32c(payload)
    sealed = [(k, v) for name in (b"cnt", b"exv") for k, v in _entries(tmp_path / "s", name) if v]
    assert sealed and all(struct.unpack(">I", v[-4:])[0] == crc32c(k + v[:-4]) for k, v in sealed)
    assert _sys_format(tmp_path / "s") == LAYOUT_VERSION == 6


def test_a_layout_4_store_reads_the_same_read_only(tmp_path: Path) -> None:
    """A layout-4 store (its CRCs zlib's CRC-32) opened read-only gives every get, scan and range
    count, now and as of each point, that it gives in layout 5, and stays layout 4."""
    _store(tmp_path / "s")
    with LogBackend(tmp_path / "s", read_only=True) as s:
        expected = _reads(s)
    to_layout_4(tmp_path / "s")
    with LogBackend(tmp_path / "s", read_only=True) as s:
        assert _reads(s) == expected
    assert _sys_format(tmp_path / "s") == 4


def test_a_layout_4_store_read_only_checks_its_zlib_seals(tmp_path: Path) -> None:
    """In a layout-4 store read as it is, a ver value with one bit flipped makes a get raise: its
    zlib seal is checked, not skipped."""
    _store(tmp_path / "s")
    to_layout_4(tmp_path / "s")
    _flip(tmp_path / "s", b"ver", b"r3", 9)
    with LogBackend(tmp_path / "s", read_only=True) as s, pytest.raises(StoreCorrupted, match="r3"):
        s.get(GetRequest(ids=["r3"], namespace=NS))


def test_a_writable_open_reseals_a_layout_4_store_byte_for_byte(tmp_path: Path) -> None:
    """A writable open of a layout-4 store reseals it into layout 5 without a rebuild: every table
    is then byte for byte what coniti writes in layout 5, sys/format is 5, verify() is clean and
    the reads are those of before."""
    _store(tmp_path / "s")
    before = _tables(tmp_path / "s")
    with LogBackend(tmp_path / "s", read_only=True) as s:
        expected = _reads(s)
    to_layout_4(tmp_path / "s")
    assert _tables(tmp_path / "s") != before
    with LogBackend(tmp_path / "s") as s:
        assert s.verify().ok
        assert _reads(s) == expected
    assert _sys_format(tmp_path / "s") == 6
    assert _tables(tmp_path / "s") == before


def test_a_reseal_does_not_rebuild(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The upgrade from layout 4 reseals in place: no projection is rebuilt from the log."""
    _store(tmp_path / "s")
    to_layout_4(tmp_path / "s")

    def no_rebuild(store: Any) -> int:
        raise AssertionError("rebuilt")

    monkeypatch.setattr(checks, "rebuild", no_rebuild)
    with LogBackend(tmp_path / "s") as s:
        assert s.head
    assert _sys_format(tmp_path / "s") == 6


@pytest.mark.parametrize(
    ("db", "match", "at"),
    [(b"log", b"note r4", -1), (b"ver", b"r3", 9), (b"tver", b"r3", 0), (b"time", b"r2", -1), (b"cnt", b"", -2)],
)
def test_an_upgrade_of_a_damaged_layout_4_store_fails_and_changes_nothing(
    tmp_path: Path, db: bytes, match: bytes, at: int
) -> None:
    """One bit flipped in a layout-4 store (a put's payload, a ver, tver, time or cnt value): the
    writable open that would reseal it raises StoreCorrupted, and every table and sys/format are as
    they were (the damage is not sealed as genuine); read-only, the store still reads as layout 4."""
    _store(tmp_path / "s")
    to_layout_4(tmp_path / "s")
    _flip(tmp_path / "s", db, match, at)
    damaged = _tables(tmp_path / "s")
    with pytest.raises(StoreCorrupted, match="stays in layout 4"):
        LogBackend(tmp_path / "s")
    assert _sys_format(tmp_path / "s") == 4
    assert _tables(tmp_path / "s") == damaged


def test_a_layout_3_store_reads_the_same_read_only_and_a_writable_open_upgrades_it(tmp_path: Path) -> None:
    """A layout-3 store (no payload CRCs, no seals on ver/tver/time) gives every get, scan and
    range count, now and as of each point, that it gave in layout 5; a writable open rebuilds it
    into layout 5, byte for byte what it was, and verify() is clean."""
    _store(tmp_path / "s")
    before = _tables(tmp_path / "s")
    with LogBackend(tmp_path / "s", read_only=True) as s:
        expected = _reads(s)
    to_layout_3(tmp_path / "s")
    with LogBackend(tmp_path / "s", read_only=True) as s:
        assert _reads(s) == expected
    with LogBackend(tmp_path / "s") as s:
        assert s.verify().ok
        assert _reads(s) == expected
    assert _sys_format(tmp_path / "s") == 6
    assert _tables(tmp_path / "s") == before


def test_a_layout_3_store_read_only_still_confirms_entries_by_the_other_index(tmp_path: Path) -> None:
    """In a layout-3 store (read as it is) a tver entry that disagrees with ver makes a get raise:
    the older layout keeps its cross-index checks."""
    _store(tmp_path / "s")
    to_layout_3(tmp_path / "s")
    key, value = [(k, v) for k, v in _entries(tmp_path / "s", b"tver") if b"r3" in v][0]
    rewrite_db(tmp_path / "s", b"tver", lambda txn, db: txn.put(key, value[:-1] + b"x", db=db))
    with LogBackend(tmp_path / "s", read_only=True) as s, pytest.raises(StoreCorrupted, match="r3"):
        s.get(GetRequest(ids=["r3"], namespace=NS))


def _flip(path: Path, db: bytes, match: bytes, at: int) -> None:
    key, value = [(k, v) for k, v in _entries(path, db) if match in k + v][0]
    damaged = bytearray(value)
    damaged[at] ^= 0x01
    rewrite_db(path, db, lambda txn, handle: txn.put(key, bytes(damaged), db=handle))


@pytest.mark.parametrize("at", [0, 9, -6, -1])
def test_get_of_a_version_whose_ver_value_is_damaged_raises(tmp_path: Path, at: int) -> None:
    """One bit flipped anywhere in a ver value (its end, timestamp, payload CRC or seal): get
    raises StoreCorrupted naming the record, never returns it altered or reads it as missing."""
    _store(tmp_path / "s")
    _flip(tmp_path / "s", b"ver", b"r3", at)
    with LogBackend(tmp_path / "s", read_only=True) as s, pytest.raises(StoreCorrupted, match="r3"):
        s.get(GetRequest(ids=["r3"], namespace=NS))


def test_scan_over_a_damaged_time_value_raises(tmp_path: Path) -> None:
    """A time value whose id key byte was flipped (it would name another record): scan raises."""
    _store(tmp_path / "s")
    _flip(tmp_path / "s", b"time", b"r3", 3)
    with LogBackend(tmp_path / "s", read_only=True) as s, pytest.raises(StoreCorrupted):
        s.scan(ScanRequest(namespace=NS, limit=100))


def test_a_scan_reports_a_put_the_log_lacks_naming_namespace_and_record(tmp_path: Path) -> None:
    """In a namespace without expiring versions (the scan's written-out loop), a time entry whose
    put frame is gone from the log: the scan raises StoreCorrupted naming the namespace and the
    record, and the erased record beside it is still left out of a scan that stops before."""
    path = tmp_path / "s"
    with LogBackend(path) as s:
        put(s, [rec(f"r{i}", float(i), NS) for i in range(6)])
        s.erase(["r1"], namespace=NS, reason="asked to")
    (seq,) = [k[-8:] for k, _ in _entries(path, b"time") if k[4:12] == ts_key(3.0)]
    rewrite_db(path, b"log", lambda txn, db: txn.delete(seq, db=db))
    with LogBackend(path, read_only=True) as s:
        before = s.scan(ScanRequest(namespace=NS, time_range=TimeRange(end=3.0), limit=100)).records
        assert [r.note.id for r in before] == ["r0", "r2"]
        with pytest.raises(StoreCorrupted, match=r"record 'r3' of namespace .*alice.*log lacks"):
            s.scan(ScanRequest(namespace=NS, limit=100))


def test_an_as_of_scan_over_a_damaged_tver_value_raises(tmp_path: Path) -> None:
    """A tver value whose end was flipped (a live version read as ended, or the reverse): a scan as
    of a past point raises instead of leaving the version out."""
    _store(tmp_path / "s")
    _flip(tmp_path / "s", b"tver", b"r3", 7)
    with LogBackend(tmp_path / "s", read_only=True) as s, pytest.raises(StoreCorrupted):
        s.at(s.head - 1).scan(ScanRequest(namespace=NS, limit=100))


def test_a_payload_cut_off_a_frame_is_not_read_as_erased(tmp_path: Path) -> None:
    """A put frame that lost its payload (cut after the digest) while its index entries still hold
    the payload's CRC: get and scan raise StoreCorrupted naming the record, where an erased
    version (CRC 0) reads as missing."""
    _store(tmp_path / "s")
    with LogBackend(tmp_path / "s", read_only=True) as s:
        assert [r.note.id for r in s.get(GetRequest(ids=["r1", "r4"], namespace=NS)).records] == ["r4"]
    seq = 5  # the put of r4
    frame = dict(_entries(tmp_path / "s", b"log"))[seq_key(seq)]
    cut = frame[: len(frame) - len(split_frame(frame)[2])]
    rewrite_db(tmp_path / "s", b"log", lambda txn, db: txn.put(seq_key(seq), cut, db=db))
    with LogBackend(tmp_path / "s", read_only=True) as s:
        with pytest.raises(StoreCorrupted, match="r4"):
            s.get(GetRequest(ids=["r4"], namespace=NS))
        with pytest.raises(StoreCorrupted, match="r4"):
            s.scan(ScanRequest(namespace=NS, limit=100))


def test_an_entry_of_another_table_does_not_pass_for_a_time_entry(tmp_path: Path) -> None:
    """A tver entry put into time under its own key (the two share their key layout): its seal is
    tver's, so a scan raises instead of reading its end bytes as part of an id."""
    _store(tmp_path / "s")
    key, value = [(k, v) for k, v in _entries(tmp_path / "s", b"tver") if b"r3" in v][0]
    rewrite_db(tmp_path / "s", b"time", lambda txn, db: txn.put(key, value, db=db))
    with LogBackend(tmp_path / "s", read_only=True) as s, pytest.raises(StoreCorrupted):
        s.scan(ScanRequest(namespace=NS, limit=100))


def test_a_lost_expiry_marker_is_reported_by_a_scan(tmp_path: Path) -> None:
    """The namespace's expiry marker exv[N] deleted while its expiry entries remain: a scan raises
    instead of returning expired versions unhidden."""
    _store(tmp_path / "s")
    marker = [k for k, _ in _entries(tmp_path / "s", b"exv") if len(k) == 4][0]
    rewrite_db(tmp_path / "s", b"exv", lambda txn, db: txn.delete(marker, db=db))
    with LogBackend(tmp_path / "s", read_only=True) as s, pytest.raises(StoreCorrupted, match="marker"):
        s.scan(ScanRequest(namespace=NS, limit=100))


def test_verify_reports_a_ver_value_whose_seal_does_not_hold(tmp_path: Path) -> None:
    """verify() compares every value, seal included, with a fresh fold of the log: a ver value
    with a wrong seal is reported in the ver projection."""
    _store(tmp_path / "s")
    _flip(tmp_path / "s", b"ver", b"r3", -1)
    with LogBackend(tmp_path / "s", read_only=True) as s:
        problems = s.verify().problems
    assert len(problems) == 1 and "projection ver" in problems[0]


def test_a_rebuild_does_not_seal_a_payload_that_does_not_match_its_digest(tmp_path: Path) -> None:
    """Upgrading a layout-3 store whose log holds a damaged payload fails naming the event and
    changes nothing (the fold would otherwise seal the damaged payload's CRC); read-only, the
    damage is still reported by the read."""
    _store(tmp_path / "s")
    to_layout_3(tmp_path / "s")
    seq = 5  # the put of r4
    frame = bytearray(dict(_entries(tmp_path / "s", b"log"))[seq_key(seq)])
    frame[-1] ^= 0x01
    rewrite_db(tmp_path / "s", b"log", lambda txn, db: txn.put(seq_key(seq), bytes(frame), db=db))
    with pytest.raises(StoreCorrupted, match="event 5"):
        LogBackend(tmp_path / "s")
    assert _sys_format(tmp_path / "s") == 3
    with LogBackend(tmp_path / "s", read_only=True) as s, pytest.raises(StoreCorrupted, match="r4"):
        s.get(GetRequest(ids=["r4"], namespace=NS))
