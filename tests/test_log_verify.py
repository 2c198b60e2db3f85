"""rebuild() and verify(): projections equal the fold of the log; damage is reported, never raised."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from coniti.errors import StoreCorrupted
from coniti.impl.log import LogBackend
from coniti.log import EventLog
from coniti.log.keys import seq_key
from coniti.log.store import LOG_DB, PROJECTION_DBS, SYS_DB, SYS_HEAD
from coniti.memory import ClearRequest, DeleteRequest, MetaSetRequest
from coniti.testing.helpers import exact, put, record, scan_all


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LogBackend]:
    backend = LogBackend(tmp_path / "store")
    put(backend, *[record(f"r{i}", float(i % 4), metadata={"i": i}) for i in range(12)])
    put(backend, *[record(f"o{i}", float(i), namespace=("other",)) for i in range(3)])
    backend.delete(DeleteRequest(ids=["r1", "r5"]))
    backend.set_meta(MetaSetRequest(key="k", value={"deep": [1, 2]}))
    backend.clear(ClearRequest(namespace=("other",)))
    put(backend, record("o1", 9.0, namespace=("other",)), record("x" * 700, 1.5))
    yield backend
    backend.close()


def _projections(store: LogBackend) -> dict[bytes, list[tuple[bytes, bytes]]]:
    dbs = store._log.store.dbs
    with store._env.begin() as txn:
        return {name: [(bytes(k), bytes(v)) for k, v in txn.cursor(db=dbs[name])] for name in PROJECTION_DBS}


def _tamper(store: LogBackend, fn: Callable[[Any, dict[bytes, Any]], None]) -> None:
    dbs = store._log.store.dbs
    with store._env.begin(write=True) as txn:
        fn(txn, dbs)


def _reframe(frame: bytes, edit: Callable[[dict[str, Any]], None]) -> bytes:
    (elen,) = struct.unpack_from(">I", frame)
    env = msgpack.unpackb(frame[4 : 4 + elen])
    edit(env)
    raw = msgpack.packb(env)
    return struct.pack(">I", len(raw)) + raw + frame[4 + elen :]


def test_clean_store_verifies(store: LogBackend) -> None:
    """A store written through the API verifies with no problems; every event is checked."""
    report = store.verify()
    assert report.ok and report.problems == ()
    assert report.events_checked == report.head_seq == store.head == 21
    assert len(report.head_hash) == 64


def test_rebuild_reproduces_the_projections_byte_for_byte(store: LogBackend) -> None:
    """rebuild() from the log alone gives exactly the projections the writes maintained."""
    before = _projections(store)
    assert store.rebuild() == store.head
    assert _projections(store) == before


def test_rebuild_restores_dropped_projections(store: LogBackend) -> None:
    """With every projection emptied, rebuild() restores them and reads work again."""
    before = _projections(store)
    records = [exact(r) for r in scan_all(store)]
    _tamper(store, lambda txn, dbs: [txn.drop(dbs[name], delete=False) for name in PROJECTION_DBS])
    assert not store.verify().ok
    store.rebuild()
    assert _projections(store) == before
    assert [exact(r) for r in scan_all(store)] == records
    assert store.verify().ok


def test_missing_projection_entry_is_reported(store: LogBackend) -> None:
    """A time-index entry removed behind the store's back is reported against a fresh fold."""
    def drop_first(txn: Any, dbs: dict[bytes, Any]) -> None:
        cur = txn.cursor(db=dbs[b"time"])
        cur.first()
        cur.delete()

    _tamper(store, drop_first)
    problems = store.verify().problems
    assert len(problems) == 1 and "projection time" in problems[0] and "missing entry" in problems[0]


def test_edited_payload_is_reported(store: LogBackend) -> None:
    """Changing a stored record's bytes (digest left alone) is reported for that event."""
    def edit(txn: Any, dbs: dict[bytes, Any]) -> None:
        frame = txn.get(seq_key(3), db=dbs[LOG_DB])
        txn.put(seq_key(3), frame.replace(b"text of r2", b"text of r9"), db=dbs[LOG_DB])

    _tamper(store, edit)
    problems = store.verify().problems
    assert any("event 3" in p and "digest" in p for p in problems), problems


def test_rewritten_event_breaks_the_chain(store: LogBackend) -> None:
    """An event re-encoded consistently (new content, new digest) breaks the chain at the next event."""
    def edit(txn: Any, dbs: dict[bytes, Any]) -> None:
        frame = txn.get(seq_key(5), db=dbs[LOG_DB])

        def later(env: dict[str, Any]) -> None:
            env["ts"] = 1000.0

        txn.put(seq_key(5), _reframe(frame, later), db=dbs[LOG_DB])

    _tamper(store, edit)
    problems = store.verify().problems
    assert any("event 6" in p and "hash chain" in p for p in problems), problems


def test_gap_in_the_log_is_reported(store: LogBackend) -> None:
    """A deleted log entry is reported as a gap; projections are then not compared."""
    _tamper(store, lambda txn, dbs: txn.delete(seq_key(7), db=dbs[LOG_DB]))
    problems = store.verify().problems
    assert any("gap" in p and "event 6" in p and "event 8" in p for p in problems), problems
    assert any("not compared" in p for p in problems)


def test_garbage_event_is_reported_not_raised(store: LogBackend) -> None:
    """An event that is not a frame at all is described in the report."""
    _tamper(store, lambda txn, dbs: txn.put(seq_key(4), b"\x00\x00", db=dbs[LOG_DB]))
    report = store.verify()
    assert any(p.startswith("event 4 does not decode") for p in report.problems), report.problems
    assert report.events_checked == 21


def test_head_record_disagreeing_with_the_log_is_reported(store: LogBackend) -> None:
    """A head record naming another event than the last is reported."""
    def edit(txn: Any, dbs: dict[bytes, Any]) -> None:
        head = txn.get(SYS_HEAD, db=dbs[SYS_DB])
        txn.put(SYS_HEAD, seq_key(20) + head[8:], db=dbs[SYS_DB])

    _tamper(store, edit)
    assert any("head record" in p for p in store.verify().problems)


def test_rebuild_of_a_damaged_log_raises_and_changes_nothing(store: LogBackend) -> None:
    """rebuild() refuses a log with a gap (StoreCorrupted) and leaves the projections as they were."""
    before = _projections(store)
    _tamper(store, lambda txn, dbs: txn.delete(seq_key(7), db=dbs[LOG_DB]))
    with pytest.raises(StoreCorrupted, match="gap"):
        store.rebuild()
    assert _projections(store) == before


def test_verify_without_the_structure_walk_is_also_clean(store: LogBackend) -> None:
    """verify(structure=False) skips the offline page walk and checks the log and projections."""
    assert store.verify(structure=False).ok


def test_extra_projection_entry_after_the_last_is_reported(store: LogBackend) -> None:
    """An entry added after the last real one in an index is reported as unexpected."""
    _tamper(store, lambda txn, dbs: txn.put(b"\xff" * 20, b"", db=dbs[b"tver"]))
    problems = store.verify().problems
    assert len(problems) == 1 and "projection tver" in problems[0] and "unexpected entry" in problems[0]


def test_import_of_frames_that_do_not_chain_is_refused(store: LogBackend, tmp_path: Path) -> None:
    """import_frames refuses frames with a gap (the chain breaks) and writes nothing."""
    dbs = store._log.store.dbs
    with store._env.begin() as txn:
        frames = [bytes(v) for _, v in txn.cursor(db=dbs[LOG_DB])]
    target = EventLog(tmp_path / "copy")
    try:
        with pytest.raises(StoreCorrupted, match="event 3"):
            target.import_frames(frames[:2] + frames[3:])
        assert target.head().seq == 0
        assert target.import_frames(frames) == len(frames)
        assert target.head().hash.hex() == store.verify().head_hash
    finally:
        target.close()


def test_import_frames_check_sees_each_event_and_can_refuse(store: LogBackend, tmp_path: Path) -> None:
    """import_frames calls check with each decoded event in order before folding it; what check
    raises aborts the import and nothing is written."""
    dbs = store._log.store.dbs
    with store._env.begin() as txn:
        frames = [bytes(v) for _, v in txn.cursor(db=dbs[LOG_DB])]
    seen: list[int] = []

    def check(event: Any) -> None:
        seen.append(event.seq)
        if event.seq == 4:
            raise ValueError("refused event 4")

    target = EventLog(tmp_path / "copy")
    try:
        with pytest.raises(ValueError, match="refused event 4"):
            target.import_frames(frames, check)
        assert seen == [1, 2, 3, 4] and target.head().seq == 0
    finally:
        target.close()


def test_verify_scratch_leaves_nothing_on_disk_while_it_runs(tmp_path: Path) -> None:
    """The scratch environment of verify() is unlinked as soon as it is open: a verification
    killed at any point leaves no copy of the store's content in the scratch directory."""
    from coniti.log import checks

    scratch = checks._Scratch(0, str(tmp_path))
    try:
        assert list(tmp_path.iterdir()) == []
        scratch.txn.put(b"k", b"v", db=next(iter(scratch.dbs.values())))
        scratch.commit_chunk()
    finally:
        scratch.close()
    assert list(tmp_path.iterdir()) == []


def test_verify_removes_stale_scratch_directories(tmp_path: Path) -> None:
    """A scratch directory of a verification killed before it unlinked it (older than a minute)
    is removed by the next verification; a fresh one (another verification starting) is kept."""
    import os

    from coniti.log import checks

    stale = tmp_path / "coniti-verify-stale"
    stale.mkdir()
    (stale / "data.mdb").write_bytes(b"content")
    os.utime(stale, (0, 0))
    fresh = tmp_path / "coniti-verify-fresh"
    fresh.mkdir()
    checks._Scratch(0, str(tmp_path)).close()
    assert not stale.exists() and fresh.exists()
