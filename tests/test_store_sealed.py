"""Store layout 4: every ``ver``, ``tver`` and ``time`` value carries its put's payload CRC ``P`` and
a seal ``C`` (``log/FORMAT.md`` §1, §5.1). Reads check the seal and the payload CRC instead of
confirming each entry by the other index; layout-3 stores read as they are (read-only) and a
writable open rebuilds them into layout 4."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from helpers_log import db_entries, put, rec, rewrite_db

from coniti.errors import StoreCorrupted
from coniti.impl.log import LogBackend
from coniti.log.codec import split_frame
from coniti.log.keys import seq_key
from coniti.log.store import LAYOUT_VERSION
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


def _to_layout_3(path: Path) -> None:
    """Turn a layout-4 store into the layout-3 store the previous coniti wrote: ver, tver and time
    values without their payload CRC and seal, sys/format 3."""
    for name in (b"ver", b"tver", b"time"):
        seed = zlib.crc32(name)

        def strip(txn: Any, db: Any, seed: int = seed) -> None:
            for key, value in list(txn.cursor(db=db)):
                body = bytes(value[:-4])
                assert struct.unpack(">I", value[-4:])[0] == zlib.crc32(body, zlib.crc32(bytes(key), seed))
                txn.put(key, body[:-4], db=db)

        rewrite_db(path, name, strip)
    rewrite_db(path, b"sys", lambda txn, db: txn.put(b"format", struct.pack(">I", 3), db=db))


def test_a_new_store_seals_every_ver_tver_and_time_value(tmp_path: Path) -> None:
    """Each ver, tver and time value ends with the CRC-32 of its put's payload and a seal over the
    table name, the key and the value (an erased version's payload CRC is 0)."""
    _store(tmp_path / "s")
    frames = dict(_entries(tmp_path / "s", b"log"))
    for name in (b"ver", b"tver", b"time"):
        for key, value in _entries(tmp_path / "s", name):
            body, seal = value[:-4], struct.unpack(">I", value[-4:])[0]
            assert seal == zlib.crc32(name + key + body)
            seq = struct.unpack(">Q", key[-8:])[0]
            seq = 2**64 - 1 - seq if name == b"ver" else seq
            payload = split_frame(frames[seq_key(seq)])[2]
            assert struct.unpack(">I", body[-4:])[0] == zlib.crc32(payload)
    assert _sys_format(tmp_path / "s") == LAYOUT_VERSION == 4


def test_a_layout_3_store_reads_the_same_read_only_and_a_writable_open_upgrades_it(tmp_path: Path) -> None:
    """A layout-3 store (no payload CRCs, no seals on ver/tver/time) gives every get, scan and
    range count, now and as of each point, that it gave in layout 4; a writable open rebuilds it
    into layout 4, byte for byte what it was, and verify() is clean."""
    _store(tmp_path / "s")
    before = {name: _entries(tmp_path / "s", name) for name in (b"ver", b"tver", b"time")}
    with LogBackend(tmp_path / "s", read_only=True) as s:
        expected = _reads(s)
    _to_layout_3(tmp_path / "s")
    with LogBackend(tmp_path / "s", read_only=True) as s:
        assert _reads(s) == expected
    with LogBackend(tmp_path / "s") as s:
        assert s.verify().ok
        assert _reads(s) == expected
    assert _sys_format(tmp_path / "s") == 4
    assert {name: _entries(tmp_path / "s", name) for name in before} == before


def test_a_layout_3_store_read_only_still_confirms_entries_by_the_other_index(tmp_path: Path) -> None:
    """In a layout-3 store (read as it is) a tver entry that disagrees with ver makes a get raise:
    the older layout keeps its cross-index checks."""
    _store(tmp_path / "s")
    _to_layout_3(tmp_path / "s")
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
    _to_layout_3(tmp_path / "s")
    seq = 5  # the put of r4
    frame = bytearray(dict(_entries(tmp_path / "s", b"log"))[seq_key(seq)])
    frame[-1] ^= 0x01
    rewrite_db(tmp_path / "s", b"log", lambda txn, db: txn.put(seq_key(seq), bytes(frame), db=db))
    with pytest.raises(StoreCorrupted, match="event 5"):
        LogBackend(tmp_path / "s")
    assert _sys_format(tmp_path / "s") == 3
    with LogBackend(tmp_path / "s", read_only=True) as s, pytest.raises(StoreCorrupted, match="r4"):
        s.get(GetRequest(ids=["r4"], namespace=NS))
