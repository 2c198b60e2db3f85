"""The conformance suite run against InMemoryBackend, one class per capability, plus its own tests."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable

import numpy as np
import pytest

from coniti import testing as conformance
from coniti.batch import NoteBatch, RecordBatch
from coniti.errors import InvalidCursor
from coniti.impl.memory import InMemoryBackend
from coniti.memory import MemoryBackend, ScanRequest
from coniti.testing import BackendFactory
from coniti.testing.helpers import count, ids, put, record, scan_all


class InMemoryFixtures:
    """The one fixture the suite needs, and InMemoryBackend's declared capabilities."""

    supports_threads = True
    supports_fork_safety = True

    @pytest.fixture
    def backend_factory(self) -> BackendFactory:
        return InMemoryBackend


class TestInMemoryBasics(InMemoryFixtures, conformance.BasicsTests):
    pass


class TestInMemoryPut(InMemoryFixtures, conformance.PutTests):
    pass


class TestInMemoryGet(InMemoryFixtures, conformance.GetTests):
    pass


class TestInMemoryDelete(InMemoryFixtures, conformance.DeleteTests):
    pass


class TestInMemoryScan(InMemoryFixtures, conformance.ScanTests):
    pass


class TestInMemoryCursors(InMemoryFixtures, conformance.CursorTests):
    pass


class TestInMemoryNamespaces(InMemoryFixtures, conformance.NamespaceTests):
    pass


class TestInMemoryCopies(InMemoryFixtures, conformance.CopyTests):
    pass


class TestInMemoryMeta(InMemoryFixtures, conformance.MetaTests):
    pass


class TestInMemoryClear(InMemoryFixtures, conformance.ClearTests):
    pass


class TestInMemoryCount(InMemoryFixtures, conformance.CountTests):
    pass


class TestInMemoryFilters(InMemoryFixtures, conformance.FilterTests):
    pass


class TestInMemoryNamespaceListing(InMemoryFixtures, conformance.NamespaceListingTests):
    pass


class TestInMemoryRequestTypes(InMemoryFixtures, conformance.RequestTypeTests):
    pass


class TestInMemoryAsync(InMemoryFixtures, conformance.AsyncTests):
    pass


class TestInMemoryIterAll(InMemoryFixtures, conformance.IterAllTests):
    pass


class TestInMemoryDump(InMemoryFixtures, conformance.DumpTests):
    pass


class TestInMemoryLoad(InMemoryFixtures, conformance.LoadTests):
    pass


class TestInMemoryReject(InMemoryFixtures, conformance.RejectTests):
    pass


class TestInMemoryRollback(InMemoryFixtures, conformance.RollbackTests):
    pass


class TestInMemoryProperties(InMemoryFixtures, conformance.PropertyTests):
    pass


class TestInMemoryConcurrency(InMemoryFixtures, conformance.ConcurrencyTests):
    pass


class TestInMemoryCapabilities(InMemoryFixtures, conformance.CapabilityTests):
    pass


class _WithoutPutWithMeta(InMemoryBackend):
    """A backend declaring no optional capability at all (what the base class gives)."""

    supports_put_with_meta = False
    supports_write = False
    put_with_meta = MemoryBackend.put_with_meta
    write = MemoryBackend.write
    sweep = MemoryBackend.sweep


class TestUndeclaredCapabilities(conformance.CapabilityTests):
    """The capability tests pass for a backend that declares none (the NotSupported branch)."""

    @pytest.fixture
    def backend_factory(self) -> BackendFactory:
        return _WithoutPutWithMeta


# -- InMemoryBackend only ------------------------------------------------------------------------


def test_kind_is_in_memory() -> None:
    """InMemoryBackend's kind is 'in_memory'."""
    assert InMemoryBackend.kind == "in_memory"


def test_nothing_is_shared_between_instances() -> None:
    """A new instance starts empty: nothing is persisted or shared."""
    first = InMemoryBackend()
    put(first, record("a", 1.0))
    assert count(InMemoryBackend()) == 0


def test_edited_cursor_is_refused() -> None:
    """A cursor whose payload was edited (first character changed) fails authentication."""
    backend = InMemoryBackend()
    put(backend, *[record(f"r{i}", float(i)) for i in range(4)])
    cursor = backend.scan(ScanRequest(limit=1)).next_cursor
    assert cursor is not None
    edited = ("B" if cursor[0] != "B" else "C") + cursor[1:]
    with pytest.raises(InvalidCursor):
        backend.scan(ScanRequest(cursor=edited))


def test_concurrent_puts_get_unique_write_order() -> None:
    """16 threads putting records at one timestamp: all land, each thread's records in its own order."""
    backend = InMemoryBackend()
    barrier = threading.Barrier(16)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        barrier.wait()
        try:
            for j in range(100):
                put(backend, record(f"t{t:02d}-{j:03d}", 7.0))
        except BaseException as exc:  # noqa: BLE001 - checked below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    got = ids(scan_all(backend))
    assert len(got) == len(set(got)) == 1600
    for t in range(16):
        mine = [i for i in got if i.startswith(f"t{t:02d}-")]
        assert mine == sorted(mine)


def test_concurrent_paging_while_writing_loses_nothing_old() -> None:
    """Paging with cursors while other threads insert later records returns every record that existed
    before the scan began, once each and in order."""
    backend = InMemoryBackend()
    put(backend, *[record(f"old{i:03d}", float(i)) for i in range(300)])
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set():
            put(backend, record(f"new{n:05d}", 1000.0 + n))
            n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        seen: list[str] = []
        cursor: str | None = None
        while True:
            page = backend.scan(ScanRequest(limit=7, cursor=cursor, time_range=None))
            seen.extend(ids(page.records))
            cursor = page.next_cursor
            if cursor is None or len(seen) > 5000:
                break
    finally:
        stop.set()
        thread.join()
    old = [i for i in seen if i.startswith("old")]
    assert old == [f"old{i:03d}" for i in range(300)]
    assert len(seen) == len(set(seen))


class TestInMemoryWrite(InMemoryFixtures, conformance.WriteTests):
    pass


class TestInMemoryPayloads(InMemoryFixtures, conformance.PayloadTests):
    pass


class TestInMemoryFeedback(InMemoryFixtures, conformance.FeedbackTests):
    pass


class TestInMemoryWritten(InMemoryFixtures, conformance.WrittenTests):
    pass


def _tracked_after(fill: Callable[[], None]) -> int:
    """How many more objects the garbage collector tracks once ``fill()`` has run (collected)."""
    gc.collect()
    before = len(gc.get_objects())
    fill()
    gc.collect()
    return len(gc.get_objects()) - before


@pytest.mark.parametrize("way", ["put", "put_batch", "put_batches"])
def test_held_records_add_no_object_to_the_garbage_collector(way: str) -> None:
    """2,000 held records (plain metadata) leave the collector's lists as plain values: a full
    collection does not walk a held note (they were four tracked objects each)."""
    backend = InMemoryBackend()
    records = [record(f"r{i:04d}", float(i), metadata={"i": i, "tag": "x"}) for i in range(2_000)]

    def fill() -> None:
        if way == "put":
            put(backend, *records)
        elif way == "put_batches":
            backend.put_batches([records])
        else:
            notes = NoteBatch(
                [r.id for r in records], [r.note.text for r in records],
                [r.note.timestamp for r in records], [dict(r.note.metadata) for r in records],
            )  # fmt: skip
            vectors = np.stack([r.vector for r in records if r.vector is not None])
            backend.put_batch(RecordBatch(notes, vectors, "e1", ()))

    assert _tracked_after(fill) < 50
    assert count(backend) == 2_000
