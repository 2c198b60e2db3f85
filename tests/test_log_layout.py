"""Store layout format 2 (``cnt`` carries the as-of scan bound; no ``atix``/``tmax``) and stores in
layout format 1: read exactly as they are, upgraded in one transaction by a writable open.

The format-1 store is a fixture written by coniti before the change
(``tests/data/store_format1/make.py``), with the reads it gave then in ``expected.json``.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import lmdb
import pytest
from helpers_log import unpack_store

from coniti.actor import TimeRange
from coniti.errors import StoreCorrupted
from coniti.impl.log import LogBackend
from coniti.log import projections
from coniti.log.store import LAYOUT_VERSION
from coniti.memory import CountRequest, ScanRequest
from coniti.testing.helpers import put, record

FIXTURE = Path(__file__).parent / "data" / "store_format1"
NAMESPACES = [(), ("alice", "notes")]
EXPECTED: dict[str, Any] = json.loads((FIXTURE / "expected.json").read_text())


def observe(view: Any) -> dict[str, object]:
    """What make.py recorded for one point of history."""
    out: dict[str, object] = {}
    window = TimeRange(start=20.0, end=60.0)
    for ns in NAMESPACES:
        records = view.scan(ScanRequest(namespace=ns)).records
        out["/".join(ns)] = {
            "scan": [[r.note.id, r.note.timestamp, r.note.text] for r in records],
            "count": view.count(CountRequest(namespace=ns)).count,
            "count_20_60": view.count(CountRequest(namespace=ns, time_range=window)).count,
            "scan_20_60": [
                r.note.id for r in view.scan(ScanRequest(namespace=ns, time_range=window)).records
            ],
        }
    return out


def tables(path: Path) -> set[bytes]:
    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=32)
    try:
        with env.begin() as txn:
            return {bytes(key) for key, _ in txn.cursor()}
    finally:
        env.close()


def sys_format(path: Path) -> int:
    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=32)
    try:
        sys_db = env.open_db(b"sys", create=False)
        with env.begin() as txn:
            return int(struct.unpack(">I", txn.get(b"format", db=sys_db))[0])
    finally:
        env.close()


@pytest.fixture
def format1(tmp_path: Path) -> Path:
    return unpack_store(FIXTURE / "store.tar.gz", tmp_path)


def last_seq_at(recorded: list[list[float]], t: float) -> int:
    """The last event recorded at or before ``t`` by brute force over (at, seq) pairs."""
    return max((int(seq) for at, seq in recorded if at <= t), default=0)


def test_the_fixture_is_a_format1_store(format1: Path) -> None:
    """The fixture really is the old layout: format 1, with the atix and tmax tables."""
    assert sys_format(format1) == 1
    assert {b"atix", b"tmax"} <= tables(format1)


def test_a_format1_store_opened_read_only_reads_every_point_as_it_did(format1: Path) -> None:
    """Opened read-only, a format-1 store gives, at every point of its history, the scans and counts
    it gave when it was written; it stays format 1."""
    with LogBackend(format1, read_only=True) as ro:
        assert ro.head == EXPECTED["head"]
        assert [observe(ro.at(seq)) for seq in range(ro.head + 1)] == EXPECTED["states"]
    assert sys_format(format1) == 1


def test_a_format1_store_finds_points_by_recorded_time_without_atix(format1: Path) -> None:
    """Views by recorded time of a format-1 store opened read-only land on the last event recorded
    at or before that time, with its atix table unused."""
    recorded = EXPECTED["recorded"]
    times = sorted({at for at, _ in recorded})
    probes = [times[0] - 1.0, *times, *[(a + b) / 2 for a, b in zip(times, times[1:], strict=False)]]
    with LogBackend(format1, read_only=True) as ro:
        assert [ro.at(time=t).seq for t in probes] == [last_seq_at(recorded, t) for t in probes]


def test_verify_of_a_format1_store_opened_read_only_says_why_it_cannot_compare(format1: Path) -> None:
    """verify() on a read-only format-1 store names the layout instead of reporting its older
    projections as damage."""
    with LogBackend(format1, read_only=True) as ro:
        report = ro.verify()
    assert len(report.problems) == 1
    assert "layout version 1" in report.problems[0]


def test_a_writable_open_upgrades_a_format1_store(format1: Path) -> None:
    """A writable open rebuilds a format-1 store into the current layout: sys/format is 5, atix and
    tmax are gone, verify() is clean and every point of history reads as before."""
    with LogBackend(format1) as store:
        assert store.verify().ok
        assert [observe(store.at(seq)) for seq in range(store.head + 1)] == EXPECTED["states"]
    assert sys_format(format1) == LAYOUT_VERSION == 6
    assert not {b"atix", b"tmax"} & tables(format1)


def test_an_upgraded_store_takes_new_writes(format1: Path) -> None:
    """After the upgrade, writes append after the old head and the chain stays valid."""
    with LogBackend(format1) as store:
        head = store.head
        put(store, record("new", 50.0))
        assert store.head == head + 1
        assert store.verify().ok


def test_an_interrupted_upgrade_leaves_the_format1_store_whole(
    format1: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the rebuild fails partway, nothing of the upgrade is committed: the store is still format
    1 with its old tables, reads as before, and the next writable open upgrades it."""
    real_fold = projections.Projections.fold

    def failing_fold(
        self: projections.Projections, event: Any, prev_at: float | None, frame: bytes | None = None
    ) -> None:
        if event.seq == 10:
            raise StoreCorrupted("injected failure at event 10")
        real_fold(self, event, prev_at, frame)

    monkeypatch.setattr(projections.Projections, "fold", failing_fold)
    with pytest.raises(StoreCorrupted, match="injected"):
        LogBackend(format1)
    monkeypatch.setattr(projections.Projections, "fold", real_fold)
    assert sys_format(format1) == 1
    assert {b"atix", b"tmax"} <= tables(format1)
    with LogBackend(format1, read_only=True) as ro:
        assert [observe(ro.at(seq)) for seq in range(ro.head + 1)] == EXPECTED["states"]
    with LogBackend(format1) as store:
        assert store.verify().ok
    assert sys_format(format1) == LAYOUT_VERSION


def test_a_new_store_is_written_in_the_current_layout(tmp_path: Path) -> None:
    """A new store has sys/format 5 and no atix or tmax table."""
    with LogBackend(tmp_path / "s") as store:
        put(store, record("a", 1.0))
    assert sys_format(tmp_path / "s") == 6
    assert not {b"atix", b"tmax"} & tables(tmp_path / "s")


def test_views_by_recorded_time_bisect_to_the_last_event_at_or_before(tmp_path: Path) -> None:
    """at(time=t) is the last event recorded at or before t, for every recorded time of a history
    of single and batched writes, the midpoints between them, and times before and after it."""
    with LogBackend(tmp_path / "s") as store:
        for i in range(25):
            put(store, *[record(f"r{i}-{j}", float(i)) for j in range(1 + i % 3)])
        recorded = [[e.at, e.seq] for e in store.events()]
        times = sorted({at for at, _ in recorded})
        probes = [
            times[0] - 1.0,
            *times,
            *[(a + b) / 2 for a, b in zip(times, times[1:], strict=False)],
            times[-1] + 1.0,
        ]
        assert [store.at(time=t).seq for t in probes] == [last_seq_at(recorded, t) for t in probes]



def test_open_ended_counts_and_scans_stay_in_their_namespace(tmp_path: Path) -> None:
    """A count or scan with only a start (no end) covers its own namespace to the end and not the
    records of the namespace whose id follows it in the indexes (the walk stops on one key bound)."""
    with LogBackend(tmp_path / "s") as store:
        put(store, *[record(f"a{i}", float(i), namespace=("a",)) for i in range(6)])
        put(store, *[record(f"b{i}", float(i), namespace=("b",)) for i in range(4)])
        from_two = TimeRange(start=2.0)
        for ns, expected in ((("a",), ["a2", "a3", "a4", "a5"]), (("b",), ["b2", "b3"])):
            scanned = store.scan(ScanRequest(namespace=ns, time_range=from_two)).records
            assert [r.note.id for r in scanned] == expected
            count = store.count(CountRequest(namespace=ns, time_range=from_two)).count
            assert count == len(expected)
            page = store.scan(ScanRequest(namespace=ns, time_range=from_two, limit=3))
            rest = store.scan(ScanRequest(namespace=ns, cursor=page.next_cursor)) if page.next_cursor else None
            ids = [r.note.id for r in page.records] + ([r.note.id for r in rest.records] if rest else [])
            assert ids == expected
