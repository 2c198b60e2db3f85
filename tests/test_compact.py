"""compact(): the store rewritten without free pages; after erase + compact no byte of the erased
content is in any file of the store. Children run this file as a script (``python
tests/test_compact.py hold '<json>'``) to hold a store open in another process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve()
if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent.parent))

from coniti.errors import ReadOnlyError, StoreBusy  # noqa: E402
from coniti.impl.log import LogBackend  # noqa: E402
from coniti.memory import DeleteRequest, ScanRequest  # noqa: E402
from coniti.testing.helpers import exact, ids, put, record, scan_all, state  # noqa: E402

SECRET = "compact-secret-5d1e"
SECRET_META = "compact-meta-0b7f"
SECRET_VECTOR = [4321.125, -99.0625, 7.5]


def child_hold(a: dict[str, Any]) -> None:
    """Open the store, say so, and keep it open until stdin closes."""
    with LogBackend(a["store"]) as store:
        os.write(1, (json.dumps({"head": store.head}) + "\n").encode())
        sys.stdin.read()


def _files(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file())


def _patterns() -> list[bytes]:
    import numpy as np

    return [SECRET.encode(), SECRET_META.encode(), np.asarray(SECRET_VECTOR, "float64").tobytes()]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LogBackend]:
    backend = LogBackend(tmp_path / "store")
    for b in range(5):
        put(backend, *[record(f"r{b}-{i}", float(i), text=f"filler {b} {i} " * 20) for i in range(40)])
    put(backend, record("victim", 1.0, text=SECRET, metadata={"m": SECRET_META}, vector=SECRET_VECTOR))
    backend.delete(DeleteRequest(ids=["victim"]))
    put(backend, record("victim", 2.0, text=SECRET + " v2", metadata={"m": SECRET_META},
                        vector=SECRET_VECTOR))
    yield backend
    backend.close()


def test_after_erase_and_compact_no_byte_of_the_content_remains(store: LogBackend) -> None:
    """Erasure leaves old bytes in LMDB's freed pages; after compact() the text, the metadata value
    and the vector's bytes appear in no file of the store, and verify() is clean."""
    path = Path(store.path)
    assert any(p in _files(path) for p in _patterns())
    store.erase(["victim"], reason="privacy request")
    assert store.verify().ok
    store.compact()
    found = [p for p in _patterns() if p in _files(path)]
    assert found == []
    assert store.verify().ok


def test_compact_keeps_every_event_and_every_read(store: LogBackend) -> None:
    """The same head, head hash, events, records at every sampled point, store id and subscriptions."""
    store.subscription("s").ack(7)
    events = [e.to_dict() for e in store.events()]
    points = [0, 1, 100, store.head - 1, store.head]
    before = {seq: state(store.at(seq)) for seq in points}
    head_hash, store_id = store.head_hash, store.store_id
    store.compact()
    assert (store.head_hash, store.store_id) == (head_hash, store_id)
    assert [e.to_dict() for e in store.events()] == events
    assert {seq: state(store.at(seq)) for seq in points} == before
    assert store.subscriptions() == {"s": 7}


def test_compact_shrinks_a_store_whose_records_were_deleted(store: LogBackend) -> None:
    """After erasing most records the data file is smaller; sizes come back as (before, after)."""
    store.erase([f"r{b}-{i}" for b in range(5) for i in range(40)], reason="purge")
    size = os.path.getsize(Path(store.path) / "data.mdb")
    before, after = store.compact()
    assert before == size and after < before
    assert after == os.path.getsize(Path(store.path) / "data.mdb")


def test_store_and_its_views_keep_working_after_compact(store: LogBackend) -> None:
    """Writes, reads, views made before compaction and cursors all work afterwards, and reopen."""
    view = store.at(10)
    cursor = store.scan(ScanRequest(limit=5)).next_cursor
    rows = [exact(r) for r in scan_all(view)]
    store.compact()
    assert [exact(r) for r in scan_all(view)] == rows
    assert len(store.scan(ScanRequest(limit=5, cursor=cursor)).records) == 5
    put(store, record("after", 3.0))
    assert store.verify().ok
    path = store.path
    store.close()
    with LogBackend(path) as again:
        assert "after" in ids(scan_all(again))


def test_compact_is_refused_while_another_process_has_the_store_open(store: LogBackend) -> None:
    """With the store open in another process, compact() raises StoreBusy and changes nothing;
    once that process has closed it, compact() works."""
    proc = subprocess.Popen(
        [sys.executable, str(HERE), "hold", json.dumps({"store": store.path})],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert json.loads(line) == {"head": store.head}, proc.stderr.read() if proc.stderr else ""
        data = (Path(store.path) / "data.mdb").read_bytes()
        with pytest.raises(StoreBusy, match="another process"):
            store.compact()
        assert (Path(store.path) / "data.mdb").read_bytes() == data
        put(store, record("still-writable"))
    finally:
        proc.communicate("", timeout=30)
    assert proc.returncode == 0
    store.compact()
    assert store.verify().ok


def test_compact_is_refused_while_another_handle_is_open(store: LogBackend) -> None:
    """A second LogBackend on the same path in this process makes compact() raise StoreBusy."""
    other = LogBackend(store.path)
    try:
        with pytest.raises(StoreBusy, match="other open handle"):
            store.compact()
    finally:
        other.close()
    store.compact()


def test_compact_on_a_readonly_handle_is_refused(store: LogBackend) -> None:
    """A read-only handle cannot compact."""
    path = store.path
    store.close()
    with LogBackend(path, read_only=True) as ro, pytest.raises(ReadOnlyError):
        ro.compact()


def test_leftover_of_a_killed_compaction_is_removed_at_open(store: LogBackend) -> None:
    """A .compact-* directory left by a compaction killed midway is removed at the next open; the
    store is intact."""
    path = Path(store.path)
    head_hash = store.head_hash
    store.close()
    leftover = path / ".compact-killed"
    leftover.mkdir()
    (leftover / "data.mdb").write_bytes(b"partial copy")
    with LogBackend(path) as again:
        assert not leftover.exists()
        assert again.head_hash == head_hash and again.verify().ok


COMMANDS = {"hold": child_hold}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](json.loads(sys.argv[2]))
