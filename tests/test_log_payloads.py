"""LogBackend with records without a vector and with blobs: erasure and compaction remove the blob's
bytes, checked reads and verify detect a damaged blob, history, diff, rebuild, reopen and the log
export keep them exactly. Each test runs on a plain store and on one with a default actor."""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lmdb
import msgpack
import pytest

from coniti.errors import MemoryFileError, StoreCorrupted
from coniti.impl.log import LogBackend
from coniti.log.codec import GENESIS, PUT, encode_event
from coniti.memory import GetRequest, PatchOp, ScanRequest, UpsertOp, WriteRequest
from coniti.testing.helpers import exact, put, record, scan_all, state

SECRET_BLOB = b"\x00secret checkpoint bytes \xfe\xff" * 8
OTHER_BLOB = bytes(range(256))


@pytest.fixture(params=["plain", "audited"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LogBackend]:
    actor = "auditor" if request.param == "audited" else None
    with LogBackend(tmp_path / "store", actor=actor) as backend:
        put(backend, record("cp", 1.0, vectorless=True, blob=SECRET_BLOB),
            record("other", 2.0, vectorless=True, blob=OTHER_BLOB), record("usual", 3.0))
        yield backend


def _files(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file())


def _flip_in_frame(path: Path, seq: int, needle: bytes) -> None:
    """Flip one bit of ``needle`` inside stored frame ``seq`` of a closed store, bypassing coniti."""
    env = lmdb.open(str(path), max_dbs=16)
    try:
        with env.begin(write=True) as txn:
            db = env.open_db(b"log", txn=txn, create=False)
            frame = bytearray(txn.get(struct.pack(">Q", seq), db=db))
            frame[bytes(frame).index(needle)] ^= 0x01
            txn.put(struct.pack(">Q", seq), bytes(frame), db=db)
    finally:
        env.close()


# -- erasure ---------------------------------------------------------------------------------------


def test_after_erase_and_compact_no_byte_of_the_blob_remains(store: LogBackend) -> None:
    """Erasing a record with a blob (two versions) and compacting leaves none of the blob's bytes in
    any file of the store; verify stays clean and the other blob reads back."""
    store.write(WriteRequest(ops=[UpsertOp(record=record("cp", 1.0, vectorless=True, blob=SECRET_BLOB + b"v2"))]))
    path = Path(store.path)
    assert SECRET_BLOB in _files(path)
    store.erase(["cp"], reason="thread deleted")
    store.compact()
    assert SECRET_BLOB not in _files(path)
    assert store.verify().ok
    assert [r.blob for r in store.get(GetRequest(ids=["cp", "other"])).records] == [OTHER_BLOB]


def test_an_erased_blob_is_gone_from_every_past_view(store: LogBackend) -> None:
    """After erase, no view of any point and no event returns the blob."""
    store.erase(["cp"], reason="thread deleted")
    for seq in range(store.head + 1):
        assert all(r.id != "cp" for r in scan_all(store.at(seq)))
    records = [e.record for e in store.events() if e.id == "cp"]
    assert records and all(r is None for r in records)


# -- checked reads -----------------------------------------------------------------------------------


@pytest.mark.parametrize("read", ["get", "scan", "as-of get", "events", "history"])
def test_a_damaged_blob_is_refused_by_every_read(store: LogBackend, read: str) -> None:
    """One bit flipped inside a stored blob makes get, scan, an as-of get, events and history raise
    StoreCorrupted (naming the record or its event) instead of returning other bytes."""
    path = Path(store.path)
    store.close()
    _flip_in_frame(path, 1, SECRET_BLOB[:16])
    with LogBackend(path) as damaged, pytest.raises(StoreCorrupted, match=r"cp|event 1"):
        if read == "get":
            damaged.get(GetRequest(ids=["cp"]))
        elif read == "scan":
            damaged.scan(ScanRequest(limit=10))
        elif read == "as-of get":
            damaged.at(2).get(GetRequest(ids=["cp"]))
        elif read == "events":
            list(damaged.events())
        else:
            damaged.history("cp")


def test_verify_reports_a_damaged_blob(store: LogBackend) -> None:
    """verify names the event whose blob no longer matches its digest."""
    path = Path(store.path)
    store.close()
    _flip_in_frame(path, 2, OTHER_BLOB[100:116])
    with LogBackend(path) as damaged:
        report = damaged.verify()
    assert not report.ok and any("event 2" in p for p in report.problems)


def test_an_intact_neighbour_still_reads(store: LogBackend) -> None:
    """A damaged blob does not make the other records unreadable by id."""
    path = Path(store.path)
    store.close()
    _flip_in_frame(path, 1, SECRET_BLOB[:16])
    with LogBackend(path) as damaged:
        assert [r.blob for r in damaged.get(GetRequest(ids=["other"])).records] == [OTHER_BLOB]


# -- history, diff, rebuild, reopen ------------------------------------------------------------------


def test_history_shows_each_blob_version(store: LogBackend) -> None:
    """history(id) lists every version with the blob it had; a patch that keeps the blob repeats it."""
    store.write(WriteRequest(ops=[PatchOp(id="cp", blob=b"two")]))
    store.write(WriteRequest(ops=[PatchOp(id="cp", metadata={"k": 1})]))
    store.write(WriteRequest(ops=[PatchOp(id="cp", clear_blob=True)]))
    blobs = [e.record.blob for e in store.history("cp") if e.record is not None]
    assert blobs == [SECRET_BLOB, b"two", b"two", None]


def test_diff_sees_a_change_of_the_blob_alone(store: LogBackend) -> None:
    """Two versions that differ only in their blob are ``changed`` for diff."""
    before = store.head
    store.write(WriteRequest(ops=[PatchOp(id="other", blob=OTHER_BLOB[::-1])]))
    assert store.diff(before, store.head).changed == ["other"]


def test_rebuild_and_reopen_keep_every_record_exactly(store: LogBackend) -> None:
    """Rebuilding the projections and reopening the store give the same records bit for bit."""
    expected = state(store)
    store.rebuild()
    assert state(store) == expected
    path = Path(store.path)
    store.close()
    with LogBackend(path) as again:
        assert state(again) == expected
        assert again.verify().ok


# -- the log export --------------------------------------------------------------------------------


def test_export_then_import_keeps_blobs_and_missing_vectors(store: LogBackend, tmp_path: Path) -> None:
    """export_log then import_log gives the same events (hashes) and records, blobs byte for byte."""
    store.export_log(tmp_path / "log.jsonl")
    with LogBackend.import_log(tmp_path / "log.jsonl", tmp_path / "copy") as copy:
        assert copy.head_hash == store.head_hash
        assert [exact(r) for r in scan_all(copy)] == [exact(r) for r in scan_all(store)]
        assert copy.get(GetRequest(ids=["cp"])).records[0].blob == SECRET_BLOB


def _export_of(frames: list[bytes], head_hash: bytes) -> str:
    header = {"format": "coniti-log", "version": "1.0.0", "log_format": 3, "events": len(frames),
              "head_hash": head_hash.hex(), "created_at": "2026-01-01T00:00:00Z", "store_id": "00" * 16}
    lines = [json.dumps(header)]
    for seq, frame in enumerate(frames, 1):
        lines.append(json.dumps({
            "seq": seq, "at": 1.0, "kind": "put", "namespace": [], "id": "r", "timestamp": 1.0, "key": None,
            "actor": None, "reason": None, "erased": False, "prev": GENESIS.hex(), "hash": "", "frame":
            base64.b64encode(frame).decode("ascii"),
        }))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ({"tx": "t", "md": {}, "e": None, "bl": "not bin"}, "field bl"),
        ({"tx": "t", "md": {}, "e": "emb", "bl": b"x"}, "field e"),
    ],
    ids=["blob-as-str", "embedding-without-vector"],
)
def test_import_refuses_a_malformed_payload_naming_the_line_and_field(
    tmp_path: Path, content: dict[str, Any], field: str
) -> None:
    """An export whose put frame carries a blob that is not bin (or an embedding id without a
    vector), with a matching digest, is refused naming line 2 and the field; no store is made."""
    payload = msgpack.packb(content, use_bin_type=True)
    frame, h = encode_event(1, 1.0, PUT, (), GENESIS, payload, id="r", timestamp=1.0)
    source = tmp_path / "bad.jsonl"
    source.write_text(_export_of([frame], h), encoding="utf-8")
    with pytest.raises(MemoryFileError, match=rf"line 2: .*{field}"):
        LogBackend.import_log(source, tmp_path / "copy")
    assert not (tmp_path / "copy").exists()
