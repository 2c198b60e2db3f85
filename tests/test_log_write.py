"""LogBackend's write model in the log: replace events, history, diff, time travel, op ids that
survive rebuild and export/import, expiry as audited deletes, and older stores."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import numpy as np
import pytest

from coniti.actor import Note
from coniti.errors import IdempotencyConflict
from coniti.impl.log import LogBackend
from coniti.log import EventLog
from coniti.memory import (
    DeleteOp,
    GetRequest,
    MemoryRecord,
    PatchOp,
    PutRequest,
    UpsertOp,
    WriteRequest,
)

GOLDEN = Path(__file__).resolve().parent.parent / "log" / "golden"


def rec(rid: str, ts: float, text: str = "t", **kw: object) -> MemoryRecord:
    return MemoryRecord(note=Note(id=rid, text=text, timestamp=ts), vector=np.ones(3), **kw)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> LogBackend:
    backend = LogBackend(tmp_path / "store")
    yield backend  # type: ignore[misc]
    backend.close()


def _text(view: object, rid: str) -> str | None:
    found = view.get(GetRequest(ids=[rid])).records  # type: ignore[attr-defined]
    return found[0].note.text if found else None


def test_a_replace_is_one_put_naming_the_version_it_ends(store: LogBackend) -> None:
    """An upsert of a live id appends one put event whose replaces is the old version, stamped."""
    store.put(PutRequest(records=[rec("a", 1.0, "old")]))
    head = store.head
    with store.audit(actor="alice", reason="corrected"):
        result = store.write(WriteRequest(ops=[UpsertOp(record=rec("a", 1.0, "new"))]))
    [event] = list(store.events(after=head))
    assert (event.kind, event.replaces, event.actor, event.reason) == ("put", 1, "alice", "corrected")
    assert result.versions == {"a": event.seq}


def test_history_reads_as_a_chain_of_versions(store: LogBackend) -> None:
    """history(id) lists each version, each later one naming the version it replaced."""
    store.put(PutRequest(records=[rec("a", 1.0, "v1")]))
    store.write(WriteRequest(ops=[PatchOp(id="a", text="v2", vector=np.zeros(3))]))
    store.write(WriteRequest(ops=[PatchOp(id="a", timestamp=5.0)]))
    history = store.history("a")
    assert [e.record.note.text for e in history if e.record] == ["v1", "v2", "v2"]
    assert [e.replaces for e in history] == [None, 1, 2]
    assert [e.record.version for e in history if e.record] == [1, 2, 3]


def test_every_view_shows_the_version_live_then(store: LogBackend) -> None:
    """at(seq) before a replace shows the old version, from the replace on the new; never neither."""
    store.put(PutRequest(records=[rec("a", 1.0, "old"), rec("b", 2.0)]))
    store.write(WriteRequest(ops=[UpsertOp(record=rec("a", 1.0, "new")), DeleteOp(id="b")]))
    assert [_text(store.at(s), "a") for s in range(store.head + 1)] == [None, "old", "old", "new", "new"]
    assert [_text(store.at(s), "b") for s in range(store.head + 1)] == [None, None, "t", "t", None]


def test_diff_reports_a_replaced_record_as_changed(store: LogBackend) -> None:
    """diff between the points before and after a replace names the id as changed."""
    store.put(PutRequest(records=[rec("a", 1.0, "old")]))
    store.write(WriteRequest(ops=[UpsertOp(record=rec("a", 1.0, "new"))]))
    d = store.diff(1, 2)
    assert (d.added, d.removed, d.changed) == ([], [], ["a"])


def test_op_ids_survive_rebuild_and_export_import(store: LogBackend, tmp_path: Path) -> None:
    """Op ids are derived from the log: after rebuild, and in an imported copy, a retry replays and
    another request conflicts."""
    first = store.write(WriteRequest(ops=[UpsertOp(record=rec("a", 1.0))], op_id="step-1"))
    store.rebuild()
    assert store.write(WriteRequest(ops=[UpsertOp(record=rec("a", 1.0))], op_id="step-1")).replayed
    store.export_log(tmp_path / "log.jsonl")
    with LogBackend.import_log(tmp_path / "log.jsonl", tmp_path / "copy") as copy:
        again = copy.write(WriteRequest(ops=[UpsertOp(record=rec("a", 1.0))], op_id="step-1"))
        assert again.replayed and again.versions == first.versions
        with pytest.raises(IdempotencyConflict):
            copy.write(WriteRequest(ops=[UpsertOp(record=rec("a", 2.0))], op_id="step-1"))
        assert copy.verify().ok


def test_long_op_ids_are_keyed_by_hash_and_checked(store: LogBackend) -> None:
    """An op id too long for an inline key still replays, and a different long one is its own."""
    long_a, long_b = "a" * 900, "a" * 899 + "b"
    store.write(WriteRequest(ops=[UpsertOp(record=rec("x", 1.0))], op_id=long_a))
    assert store.write(WriteRequest(ops=[UpsertOp(record=rec("x", 1.0))], op_id=long_a)).replayed
    assert not store.write(WriteRequest(ops=[UpsertOp(record=rec("y", 1.0))], op_id=long_b)).replayed


def test_sweep_writes_audited_deletes(store: LogBackend) -> None:
    """sweep ends each expired record with a delete by actor coniti-ttl, reason expired."""
    store.put(PutRequest(records=[rec("old", 1.0, expires_at=time.time() - 5), rec("new", 2.0)]))
    head = store.head
    assert store.sweep().deleted == 1
    [event] = list(store.events(after=head))
    assert (event.kind, event.id, event.actor, event.reason) == ("delete", "old", "coniti-ttl", "expired")
    assert store.verify().ok


def test_a_view_judges_expiry_by_its_recorded_time(store: LogBackend) -> None:
    """A record expiring between two events is visible in the view of the first, not the second."""
    store.put(PutRequest(records=[rec("soon", 1.0, expires_at=time.time() + 0.2)]))
    time.sleep(0.3)
    store.put(PutRequest(records=[rec("other", 2.0)]))
    assert _text(store.at(1), "soon") == "t" and store.at(1).count(store.count_request()).count == 1
    assert _text(store.at(2), "soon") is None and store.at(2).count(store.count_request()).count == 1


def test_sweeps_from_two_handles_delete_once(tmp_path: Path) -> None:
    """Two handles sweeping the same store delete each expired record once between them."""
    with LogBackend(tmp_path / "s") as a, LogBackend(tmp_path / "s") as b:
        a.put(PutRequest(records=[rec(f"r{i}", float(i), expires_at=1.0) for i in range(5)]))
        assert a.sweep().deleted + b.sweep().deleted == 5
        assert a.count(a.count_request()).count == 0


def test_a_version_1_store_folds_and_takes_writes(tmp_path: Path) -> None:
    """A released version-1 golden log imports, and a write on it replaces a version-1 put."""
    lines = (GOLDEN / "v1" / "basic" / "events.jsonl").read_text("utf-8").splitlines()[1:]
    log = EventLog(tmp_path / "s")
    log.import_frames(base64.b64decode(json.loads(line)["frame"]) for line in lines)
    log.close()
    with LogBackend(tmp_path / "s") as store:
        assert {e.seq: json.loads(line)["frame"] for e, line in zip(store.events(), lines, strict=True)}
        live = store.get(GetRequest(ids=["e"])).records
        assert live and live[0].version is not None
        result = store.write(WriteRequest(ops=[PatchOp(id="e", timestamp=11.0)]))
        assert store.history("e")[-1].replaces == live[0].version
        assert result.versions["e"] == store.head and store.verify().ok


def test_erasing_an_expiring_record_verifies(store: LogBackend) -> None:
    """Erasure of records with an expiry (live and ended) leaves projections equal to a rebuild."""
    store.put(PutRequest(records=[rec("a", 1.0, expires_at=4.0e9), rec("b", 2.0, expires_at=1.0)]))
    store.write(WriteRequest(ops=[UpsertOp(record=rec("a", 1.5, "a2", expires_at=4.1e9))]))
    store.erase(["a", "b"], reason="privacy request")
    assert store.verify().ok
    assert store.count(store.count_request()).count == 0
