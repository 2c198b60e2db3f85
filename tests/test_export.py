"""export_log / import_log: the coniti-log JSONL file carries the whole history, and an import
checks every line, the sequence and the hash chain before a store appears."""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
import stat
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

from coniti.errors import MemoryFileError
from coniti.impl.log import LogBackend
from coniti.log.codec import (
    EVENT_VERSION,
    GENESIS,
    PUT,
    encode_event,
    encode_put_payload,
    split_frame,
)
from coniti.memory import ClearRequest, DeleteRequest, MetaSetRequest
from coniti.testing.helpers import exact, put, record, state

NAMESPACES = [(), ("team", "a")]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LogBackend]:
    backend = LogBackend(tmp_path / "source", actor="svc")
    put(backend, *[record(f"r{i}", float(i % 3), metadata={"i": i}, dtype="float32") for i in range(6)])
    with backend.audit(actor="alice", reason="cleanup"):
        backend.delete(DeleteRequest(ids=["r1", "r4"]))
    backend.set_meta(MetaSetRequest(key="embedding_id", value="emb-1"))
    put(backend, record("x" * 700, 1.5, namespace=("team", "a"), text="long \u2603"))
    backend.clear(ClearRequest(namespace=("team", "a")))
    put(backend, record("r1", 9.0, text="back", dtype="float16"))
    yield backend
    backend.close()


def _lines(path: Path) -> list[str]:
    opener: Callable[..., Any] = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# -- export ------------------------------------------------------------------------------------


def test_export_writes_a_header_and_one_line_per_event(store: LogBackend, tmp_path: Path) -> None:
    """The file has a coniti-log header naming the event count and head hash, then one line per
    event with its readable fields and its frame."""
    n = store.export_log(tmp_path / "log.jsonl")
    lines = _lines(tmp_path / "log.jsonl")
    header = json.loads(lines[0])
    assert n == store.head == len(lines) - 1 == header["events"]
    assert header["format"] == "coniti-log" and header["version"] == "1.0.0"
    assert header["head_hash"] == store.head_hash and header["log_format"] == EVENT_VERSION
    events = list(store.events())
    for line, event in zip(lines[1:], events, strict=True):
        data = json.loads(line)
        assert (data["seq"], data["kind"], data["id"], data["actor"], data["reason"], data["hash"]) == (
            event.seq, event.kind, event.id, event.actor, event.reason, event.hash
        )
        assert base64.b64decode(data["frame"])


def test_export_with_gz_name_is_gzip(store: LogBackend, tmp_path: Path) -> None:
    """A target ending in .gz is gzip-compressed with the same lines."""
    store.export_log(tmp_path / "log.jsonl")
    store.export_log(tmp_path / "log.jsonl.gz")
    assert (tmp_path / "log.jsonl.gz").read_bytes()[:2] == b"\x1f\x8b"
    plain, packed = _lines(tmp_path / "log.jsonl"), _lines(tmp_path / "log.jsonl.gz")
    assert [json.loads(x) for x in plain[1:]] == [json.loads(x) for x in packed[1:]]


def test_export_file_is_private_and_leaves_no_partial(store: LogBackend, tmp_path: Path) -> None:
    """The exported file is 0600 and no .partial file remains."""
    store.export_log(tmp_path / "log.jsonl")
    assert stat.S_IMODE(os.stat(tmp_path / "log.jsonl").st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.jsonl", "source"]


def test_failed_export_keeps_the_previous_file(store: LogBackend, tmp_path: Path) -> None:
    """If writing fails midway (here: the file-size limit is hit), the earlier file at the target
    is untouched and no partial file remains."""
    import resource
    import signal

    target = tmp_path / "log.jsonl"
    target.write_text("previous\n")
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2000, old_limit[1]))
    try:
        with pytest.raises(MemoryFileError, match="cannot write"):
            store.export_log(target)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    assert target.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.jsonl", "source"]


def test_export_to_a_stream(store: LogBackend) -> None:
    """export_log also writes to an open text stream, and import_log reads one back."""
    out = io.StringIO()
    assert store.export_log(out) == store.head
    assert out.getvalue().count("\n") == store.head + 1


# -- round trip --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["log.jsonl", "log.jsonl.gz"])
def test_round_trip_gives_the_same_events_and_head_hash(
    store: LogBackend, tmp_path: Path, name: str
) -> None:
    """export -> import gives a store with the same events (seq, at, actor, reason, hash), the same
    head hash, the same memory at every point, and verify() clean."""
    store.export_log(tmp_path / name)
    with LogBackend.import_log(tmp_path / name, tmp_path / "copy") as copy:
        assert copy.head == store.head and copy.head_hash == store.head_hash
        assert [e.to_dict() for e in copy.events()] == [e.to_dict() for e in store.events()]
        for seq in range(store.head + 1):
            assert state(copy.at(seq), NAMESPACES) == state(store.at(seq), NAMESPACES)
        assert copy.verify().ok
        assert copy.store_id != store.store_id


def test_imported_store_takes_new_writes(store: LogBackend, tmp_path: Path) -> None:
    """The imported store continues the chain: a new write follows the imported head."""
    store.export_log(tmp_path / "log.jsonl")
    with LogBackend.import_log(tmp_path / "log.jsonl", tmp_path / "copy") as copy:
        put(copy, record("new", 1.0))
        assert copy.head == store.head + 1
        assert list(copy.events(store.head))[0].prev == store.head_hash
        assert copy.verify().ok


def test_round_trip_of_an_empty_store(tmp_path: Path) -> None:
    """An empty store exports a header only and imports as an empty store."""
    with LogBackend(tmp_path / "empty") as empty:
        assert empty.export_log(tmp_path / "e.jsonl") == 0
    with LogBackend.import_log(tmp_path / "e.jsonl", tmp_path / "copy") as copy:
        assert copy.head == 0 and copy.head_hash == "0" * 64


def test_import_into_an_existing_empty_directory(store: LogBackend, tmp_path: Path) -> None:
    """The target may be an empty directory."""
    store.export_log(tmp_path / "log.jsonl")
    (tmp_path / "copy").mkdir()
    with LogBackend.import_log(tmp_path / "log.jsonl", tmp_path / "copy") as copy:
        assert copy.head_hash == store.head_hash


def test_import_passes_options(store: LogBackend, tmp_path: Path) -> None:
    """import_log's actor= is the new store's default actor for later writes."""
    store.export_log(tmp_path / "log.jsonl")
    with LogBackend.import_log(tmp_path / "log.jsonl", tmp_path / "copy", actor="restorer") as copy:
        put(copy, record("after"))
        assert list(copy.events(store.head))[0].actor == "restorer"


# -- rejections ----------------------------------------------------------------------------------


def _exported(store: LogBackend, tmp_path: Path) -> list[str]:
    store.export_log(tmp_path / "good.jsonl")
    return _lines(tmp_path / "good.jsonl")


def _reject(source: Path, tmp_path: Path, match: str) -> None:
    target = tmp_path / "target"
    with pytest.raises(MemoryFileError, match=match):
        LogBackend.import_log(source, target)
    assert not target.exists()
    assert [p.name for p in tmp_path.iterdir() if "importing" in p.name] == []


def _edit(lines: list[str], lineno: int, fn: Callable[[dict[str, Any]], None]) -> list[str]:
    data = json.loads(lines[lineno - 1])
    fn(data)
    out = list(lines)
    out[lineno - 1] = json.dumps(data)
    return out


def test_import_rejects_a_broken_chain(store: LogBackend, tmp_path: Path) -> None:
    """A line whose frame was re-made with another prev hash (its own hash recomputed) breaks the
    chain: refused, naming that line; no store is created."""
    lines = _exported(store, tmp_path)
    data = json.loads(lines[4])
    frame = base64.b64decode(data["frame"])
    payload = encode_put_payload("forged", {}, None, np.ones(2, "float32"))
    forged, h = encode_event(data["seq"], data["at"], PUT, [], b"\x01" * 32, payload, id="forged",
                             timestamp=0.0)
    assert forged != frame
    data.update(frame=base64.b64encode(forged).decode(), hash=h.hex(), prev=(b"\x01" * 32).hex(),
                id="forged", timestamp=0.0, actor=None)
    lines[4] = json.dumps(data)
    _reject(_write(tmp_path / "bad.jsonl", lines), tmp_path, "line 5: .*hash chain is broken")


def test_import_rejects_a_gap(store: LogBackend, tmp_path: Path) -> None:
    """A missing event line is a gap in the sequence: refused, naming the line after it."""
    lines = _exported(store, tmp_path)
    del lines[3]
    _reject(_write(tmp_path / "bad.jsonl", lines), tmp_path, "line 4: expected event 3, found event 4")


def test_import_names_the_first_bad_line(store: LogBackend, tmp_path: Path) -> None:
    """A gap (line 4) before a line that is not JSON (line 7): the earlier line is the one named,
    although the frames are checked a batch at a time after their lines are read."""
    lines = _exported(store, tmp_path)
    del lines[3]
    lines[6] = "{not json"
    _reject(_write(tmp_path / "bad.jsonl", lines), tmp_path, "line 4: expected event 3, found event 4")


def test_import_rejects_a_frame_of_a_newer_event_version(store: LogBackend, tmp_path: Path) -> None:
    """A frame whose envelope names a newer event version than the header's is refused, naming its
    line."""
    lines = _exported(store, tmp_path)
    data = json.loads(lines[2])
    env, digest, payload = split_frame(base64.b64decode(data["frame"]))
    newer = msgpack.packb({**msgpack.unpackb(env), "v": EVENT_VERSION + 1})
    data["frame"] = base64.b64encode(struct.pack(">I", len(newer)) + newer + digest + payload).decode()
    lines[2] = json.dumps(data)
    _reject(_write(tmp_path / "bad.jsonl", lines), tmp_path, f"line 3: .*reads up to event version {EVENT_VERSION}")


def test_import_rejects_reordered_lines(store: LogBackend, tmp_path: Path) -> None:
    """Two swapped lines are refused."""
    lines = _exported(store, tmp_path)
    lines[2], lines[3] = lines[3], lines[2]
    _reject(_write(tmp_path / "bad.jsonl", lines), tmp_path, "line 3: expected event 2")


@pytest.mark.parametrize(
    ("field", "value"),
    [("actor", "mallory"), ("reason", "nothing to see"), ("id", "other"), ("at", 1.0),
     ("kind", "delete"), ("namespace", ["x"]), ("hash", "ab" * 32), ("erased", True), ("seq", 99)],
)
def test_import_rejects_an_edited_readable_field(
    store: LogBackend, tmp_path: Path, field: str, value: Any
) -> None:
    """Editing a readable field (actor, reason, id, ...) so it no longer matches the frame is
    refused, naming the line and the field."""
    lines = _edit(_exported(store, tmp_path), 3, lambda d: d.update({field: value}))
    _reject(_write(tmp_path / "bad.jsonl", lines), tmp_path, f"line 3: field '{field}'")


def test_import_rejects_an_edited_frame(store: LogBackend, tmp_path: Path) -> None:
    """Changing one byte of a frame's payload (the note text) is caught by its digest."""
    lines = _exported(store, tmp_path)
    data = json.loads(lines[1])
    frame = bytearray(base64.b64decode(data["frame"]))
    at = bytes(frame).index(b"text of r0")
    frame[at] ^= 0x01
    data["frame"] = base64.b64encode(bytes(frame)).decode()
    lines[1] = json.dumps(data)
    _reject(_write(tmp_path / "bad.jsonl", lines), tmp_path, "line 2: .*digest")


def test_import_rejects_a_truncated_file(store: LogBackend, tmp_path: Path) -> None:
    """A file cut at a line boundary has fewer events than its header promises: refused."""
    lines = _exported(store, tmp_path)[:-2]
    _reject(_write(tmp_path / "bad.jsonl", lines), tmp_path, "ends after .* events; the header promises")


def test_import_rejects_a_file_cut_mid_line(store: LogBackend, tmp_path: Path) -> None:
    """A file cut inside a line has invalid JSON on its last line: refused, naming it."""
    text = "\n".join(_exported(store, tmp_path))
    cut = tmp_path / "bad.jsonl"
    cut.write_text(text[: len(text) - 40], encoding="utf-8")
    _reject(cut, tmp_path, f"line {store.head + 1}: invalid JSON")


def test_import_rejects_a_truncated_gzip(store: LogBackend, tmp_path: Path) -> None:
    """A gzip file cut short is refused with a clear error."""
    store.export_log(tmp_path / "good.jsonl.gz")
    raw = (tmp_path / "good.jsonl.gz").read_bytes()
    (tmp_path / "bad.jsonl.gz").write_bytes(raw[: len(raw) // 2])
    _reject(tmp_path / "bad.jsonl.gz", tmp_path, "line")


def test_import_rejects_extra_events(store: LogBackend, tmp_path: Path) -> None:
    """More event lines than the header promises are refused."""
    lines = _edit(_exported(store, tmp_path), 1, lambda d: d.update(events=d["events"] - 1))
    _reject(_write(tmp_path / "bad.jsonl", lines), tmp_path, "promises .* more follow")


def test_import_rejects_a_wrong_head_hash(store: LogBackend, tmp_path: Path) -> None:
    """A header whose head_hash is not the last event's hash is refused."""
    lines = _edit(_exported(store, tmp_path), 1, lambda d: d.update(head_hash="00" * 32))
    _reject(_write(tmp_path / "bad.jsonl", lines), tmp_path, "line 1: head_hash")


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda d: d.update(format="coniti-memory"), "line 1: format"),
        (lambda d: d.update(version="2.0.0"), "line 1: version 2.0.0 is not supported"),
        (lambda d: d.update(log_format=99), "line 1: log_format 99 is newer"),
        (lambda d: d.update(events=-1), "line 1: events"),
        (lambda d: d.pop("head_hash"), "line 1: head_hash"),
    ],
)
def test_import_rejects_a_bad_header(
    store: LogBackend, tmp_path: Path, edit: Callable[[dict[str, Any]], None], match: str
) -> None:
    """Wrong format, unsupported version, newer log format or bad fields in the header are refused."""
    lines = _edit(_exported(store, tmp_path), 1, edit)
    _reject(_write(tmp_path / "bad.jsonl", lines), tmp_path, match)


def test_import_rejects_blank_lines_missing_fields_and_bad_base64(store: LogBackend, tmp_path: Path) -> None:
    """A blank line, a line without a field, and a frame that is not base64 are each refused."""
    lines = _exported(store, tmp_path)
    _reject(_write(tmp_path / "b1.jsonl", [*lines[:2], "", *lines[2:]]), tmp_path, "line 3: blank")
    _reject(_write(tmp_path / "b2.jsonl", _edit(lines, 2, lambda d: d.pop("actor"))), tmp_path,
            "line 2: missing field 'actor'")
    _reject(_write(tmp_path / "b3.jsonl", _edit(lines, 2, lambda d: d.update(frame="!!"))), tmp_path,
            "line 2: field 'frame' is not valid base64")
    _reject(_write(tmp_path / "b4.jsonl", []), tmp_path, "empty")


def test_import_rejects_an_event_that_does_not_apply(tmp_path: Path) -> None:
    """A well-chained log whose second event puts a record that is already live is refused at that
    line, and no store appears."""
    payload = encode_put_payload("t", {}, None, np.ones(2, "float32"))
    f1, h1 = encode_event(1, 10.0, PUT, [], GENESIS, payload, id="a", timestamp=1.0)
    f2, h2 = encode_event(2, 10.0, PUT, [], h1, payload, id="a", timestamp=1.0)
    rows = [{"format": "coniti-log", "version": "1.0.0", "log_format": 1, "events": 2,
             "head_hash": h2.hex(), "created_at": "2024-01-01T00:00:00Z", "store_id": "x"}]
    for seq, frame, h, prev in ((1, f1, h1, GENESIS), (2, f2, h2, h1)):
        rows.append({"seq": seq, "at": 10.0, "kind": "put", "namespace": [], "id": "a", "timestamp": 1.0,
                     "key": None, "actor": None, "reason": None, "erased": False, "prev": prev.hex(),
                     "hash": h.hex(), "frame": base64.b64encode(frame).decode()})
    _reject(_write(tmp_path / "bad.jsonl", [json.dumps(r) for r in rows]), tmp_path,
            "line 3: .*already live")


def test_import_refuses_an_existing_store(store: LogBackend, tmp_path: Path) -> None:
    """A target that exists and is not an empty directory is refused and left unchanged."""
    store.export_log(tmp_path / "log.jsonl")
    head, head_hash = store.head, store.head_hash
    with pytest.raises(MemoryFileError, match="already exists"):
        LogBackend.import_log(tmp_path / "log.jsonl", store.path)
    assert (store.head, store.head_hash) == (head, head_hash)


def test_import_of_a_missing_file_is_refused(tmp_path: Path) -> None:
    """A source that does not exist raises MemoryFileError and creates nothing."""
    _reject(tmp_path / "nope.jsonl", tmp_path, "cannot read")


def test_round_trip_keeps_exact_records(store: LogBackend, tmp_path: Path) -> None:
    """Records read from the imported store are bit-identical (float16 and float32 vectors)."""
    store.export_log(tmp_path / "log.jsonl")
    with LogBackend.import_log(tmp_path / "log.jsonl", tmp_path / "copy") as copy:
        assert [exact(r) for r in copy.iter_all()] == [exact(r) for r in store.iter_all()]


def test_export_does_not_follow_a_planted_partial_symlink(store: LogBackend, tmp_path: Path) -> None:
    """A symlink planted at <target>.partial is not followed: the file it points to keeps its bytes
    (export_log writes through the same exclusive temporary file as dump)."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    target = tmp_path / "log.jsonl"
    target.with_name("log.jsonl.partial").symlink_to(victim)
    assert store.export_log(target) == store.head
    assert victim.read_bytes() == b"precious\n"


def test_export_onto_a_fifo_is_refused(store: LogBackend, tmp_path: Path) -> None:
    """A target that is a FIFO (not a regular file, like a device) is refused and stays a FIFO."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(MemoryFileError, match="FIFO"):
        store.export_log(fifo)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_leftover_of_a_killed_import_is_removed_by_the_next(store: LogBackend, tmp_path: Path) -> None:
    """A scratch store left by a killed import (.NAME.importing-*, nobody holding its lock) is
    removed by the next import into the same path."""
    source = tmp_path / "log.jsonl"
    store.export_log(source)
    leftover = tmp_path / ".copy.importing-0123456789ab"
    leftover.mkdir()
    (leftover / "data.mdb").write_bytes(b"imported text of a killed import")
    LogBackend.import_log(source, tmp_path / "copy").close()
    assert not leftover.exists()
    assert not [p for p in tmp_path.iterdir() if ".importing-" in p.name]


def test_scratch_of_a_running_import_is_kept(store: LogBackend, tmp_path: Path) -> None:
    """A scratch store whose directory lock is held (an import still running) is not removed."""
    import fcntl

    source = tmp_path / "log.jsonl"
    store.export_log(source)
    running = tmp_path / ".copy.importing-0123456789ab"
    running.mkdir()
    fd = os.open(running, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        LogBackend.import_log(source, tmp_path / "copy").close()
        assert running.exists()
    finally:
        os.close(fd)


def test_failed_import_creates_no_parent_directories(store: LogBackend, tmp_path: Path) -> None:
    """A rejected import into a path whose parents did not exist leaves none of them."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    with pytest.raises(MemoryFileError, match="line 1"):
        LogBackend.import_log(bad, tmp_path / "new" / "deeper" / "copy")
    assert not (tmp_path / "new").exists()


def test_import_on_a_full_disk_raises_store_full(store: LogBackend, tmp_path: Path) -> None:
    """An import the disk cannot hold (here: the file-size limit) raises StoreFull, not
    MemoryFileError: the file was not rejected. Nothing is left at the target or beside it."""
    import resource
    import signal

    from coniti.errors import StoreFull

    source = tmp_path / "log.jsonl"
    store.export_log(source)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, old_limit[1]))
    try:
        with pytest.raises(StoreFull):
            LogBackend.import_log(source, tmp_path / "copy")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.jsonl", "source"]
