"""LogBackend beyond the conformance suite: persistence, sharing, long keys, views, audit, cursors."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coniti.actor import TimeRange
from coniti.errors import (
    ContractError,
    InvalidCursor,
    MemoryBackendError,
    ReadOnlyError,
    StoreClosed,
    StoreError,
    StoreForked,
)
from coniti.impl.log import LogBackend
from coniti.memory import (
    ClearRequest,
    CountRequest,
    DeleteRequest,
    GetRequest,
    MetaGetRequest,
    MetaSetRequest,
    ScanRequest,
)
from coniti.testing.helpers import exact, ids, put, record, scan_all

LONG_ID = "x" * 600
LONG_NS = ("n" * 700, "second")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(path: Path) -> Iterator[LogBackend]:
    backend = LogBackend(path)
    yield backend
    backend.close()


def _meta(backend: LogBackend, key: str, ns: tuple[str, ...] = ()) -> object:
    return backend.get_meta(MetaGetRequest(key=key, namespace=ns)).value


# -- persistence and sharing -----------------------------------------------------------------


def test_writes_survive_close_and_reopen(path: Path) -> None:
    """Records, deletes, metadata and the head are all there after close and reopen."""
    with LogBackend(path) as backend:
        written = [record(f"r{i}", float(i), metadata={"i": i}, dtype="float32") for i in range(5)]
        put(backend, *written)
        backend.delete(DeleteRequest(ids=["r2"]))
        backend.set_meta(MetaSetRequest(key="k", value=[1, {"a": None}]))
        head = backend.head
    with LogBackend(path) as backend:
        assert [exact(r) for r in scan_all(backend)] == [exact(r) for r in written if r.id != "r2"]
        assert _meta(backend, "k") == [1, {"a": None}]
        assert backend.head == head == 7


def test_handles_on_one_path_share_one_environment(path: Path) -> None:
    """Two handles on a path share the LMDB environment; closing one leaves the other working."""
    first = LogBackend(path)
    second = LogBackend(str(path) + "/")
    assert first._env is second._env
    put(first, record("a", 1.0))
    first.close()
    assert ids(scan_all(second)) == ["a"]
    second.close()


def test_conflicting_durability_on_one_path_is_refused(store: LogBackend, path: Path) -> None:
    """A second handle asking for another durability than the open environment gets ContractError."""
    with pytest.raises(ContractError, match="durability"):
        LogBackend(path, durability="nosync")


def test_unknown_durability_is_refused(path: Path) -> None:
    """durability names one of the modes; anything else is a ContractError naming it."""
    with pytest.raises(ContractError, match="durability"):
        LogBackend(path, durability="fast")
    assert not path.exists()


def test_nosync_store_reads_back_after_sync(path: Path) -> None:
    """A nosync store accepts writes, sync() flushes them, and a reopen reads them."""
    with LogBackend(path, durability="nosync") as backend:
        put(backend, record("a", 1.0))
        backend.sync()
    with LogBackend(path) as backend:
        assert ids(scan_all(backend)) == ["a"]


def test_new_store_is_private(tmp_path: Path) -> None:
    """The store directory is created 0700 and its files 0600, whatever the umask."""
    old = os.umask(0)
    try:
        with LogBackend(tmp_path / "s") as backend:
            put(backend, record("a", 1.0))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "s").st_mode) == 0o700
    for name in ("data.mdb", "lock.mdb"):
        assert stat.S_IMODE(os.stat(tmp_path / "s" / name).st_mode) == 0o600


def test_readonly_open_of_a_missing_store_fails_and_creates_nothing(path: Path) -> None:
    """read_only=True never creates a store."""
    with pytest.raises(StoreError, match="no store"):
        LogBackend(path, read_only=True)
    assert not path.exists()


def test_readonly_handle_reads_and_refuses_writes(path: Path) -> None:
    """A read-only handle reads the store; a write raises ReadOnlyError and appends nothing."""
    with LogBackend(path) as backend:
        put(backend, record("a", 1.0))
    with LogBackend(path, read_only=True) as reader:
        assert ids(scan_all(reader)) == ["a"]
        with pytest.raises(ReadOnlyError):
            put(reader, record("b", 2.0))
        assert reader.head == 1


def test_closed_handle_raises_store_closed(path: Path) -> None:
    """Any operation on a closed handle raises StoreClosed (a MemoryBackendError)."""
    backend = LogBackend(path)
    backend.close()
    with pytest.raises(StoreClosed):
        backend.count(CountRequest())
    assert issubclass(StoreClosed, MemoryBackendError)


def test_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    """A path naming an existing file is a StoreError, and the file is untouched."""
    target = tmp_path / "file"
    target.write_text("keep")
    with pytest.raises(StoreError, match="not a directory"):
        LogBackend(target)
    assert target.read_text() == "keep"


def test_tiny_map_grows_when_full(path: Path) -> None:
    """With a 64 KiB map, 1 MiB of records is accepted and the map has grown."""
    with LogBackend(path, map_size=1 << 16) as backend:
        for b in range(8):
            put(backend, *[record(f"r{b}-{i}", float(b), vector=[0.5] * 2048) for i in range(8)])
        assert backend.count(CountRequest()).count == 64
        assert backend._env.info()["map_size"] >= 1 << 20


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_handle_used_after_fork_raises_and_child_can_reopen(path: Path) -> None:
    """In a forked child the inherited handle raises StoreForked; a new handle there works, and the
    parent's handle keeps working afterwards."""
    backend = LogBackend(path)
    put(backend, record("a", 1.0))
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            try:
                backend.count(CountRequest())
            except StoreForked:
                with LogBackend(path) as fresh:
                    put(fresh, record("child", 2.0))
                    code = 0 if fresh.count(CountRequest()).count == 2 else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert ids(scan_all(backend)) == ["a", "child"]
    backend.close()


# -- events, head, recorded time ----------------------------------------------------------------


def test_head_counts_one_event_per_change(store: LogBackend) -> None:
    """put appends one event per record, delete one per deleted id, set_meta one, clear one (even of
    an empty namespace); missing ids and failed calls append nothing."""
    put(store, record("a", 1.0), record("b", 2.0))
    assert store.head == 2
    store.delete(DeleteRequest(ids=["a", "zz"]))
    assert store.head == 3
    with pytest.raises(MemoryBackendError):
        put(store, record("c", 3.0), record("b", 4.0))
    assert store.head == 3
    store.set_meta(MetaSetRequest(key="k", value=1))
    assert store.clear(ClearRequest()).deleted == 1
    assert store.clear(ClearRequest(namespace=("never",))).deleted == 0
    assert store.head == 6


def test_recorded_time_never_goes_backwards(store: LogBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """If the clock steps back, events keep the last recorded time instead."""
    put(store, record("a", 1.0))
    first = next(store._log.events()).at
    monkeypatch.setattr(time, "time", lambda: first - 3600.0)
    put(store, record("b", 1.0))
    assert [e.at for e in store._log.events()] == [first, first]


def test_actor_and_audit_block_are_stamped_on_events(path: Path) -> None:
    """Events carry the store's default actor, or the actor and reason of an enclosing audit block."""
    with LogBackend(path, actor="service") as backend:
        put(backend, record("a", 1.0))
        with backend.audit(actor="alice", reason="ticket 7"):
            backend.delete(DeleteRequest(ids=["a"]))
        stamps = [(e.kind, e.actor, e.reason) for e in backend._log.events()]
    assert stamps == [("put", "service", None), ("delete", "alice", "ticket 7")]


# -- long ids and namespaces --------------------------------------------------------------------


def test_ids_and_namespaces_longer_than_an_lmdb_key_work(store: LogBackend) -> None:
    """A 600-character id in a 700-character namespace: put, get, scan, count, meta, delete, clear."""
    long_record = record(LONG_ID, 1.0, namespace=LONG_NS)
    near = record(LONG_ID + "y", 2.0, namespace=LONG_NS)
    put(store, long_record, near)
    got = store.get(GetRequest(ids=[LONG_ID, LONG_ID + "z"], namespace=LONG_NS))
    assert [exact(r) for r in got.records] == [exact(long_record)] and got.missing == [LONG_ID + "z"]
    assert ids(scan_all(store, namespace=LONG_NS)) == [LONG_ID, LONG_ID + "y"]
    store.set_meta(MetaSetRequest(key="m" * 900, value="v", namespace=LONG_NS))
    assert _meta(store, "m" * 900, LONG_NS) == "v" and _meta(store, "m" * 901, LONG_NS) is None
    with pytest.raises(MemoryBackendError, match="already exists"):
        put(store, record(LONG_ID, 3.0, namespace=LONG_NS))
    assert store.delete(DeleteRequest(ids=[LONG_ID], namespace=LONG_NS)).deleted == [LONG_ID]
    assert store.clear(ClearRequest(namespace=LONG_NS)).deleted == 1
    assert store.verify().ok


# -- cursors ------------------------------------------------------------------------------------


def test_cursor_stays_valid_across_reopen(path: Path) -> None:
    """A cursor issued before close resumes after reopening the store."""
    with LogBackend(path) as backend:
        put(backend, *[record(f"r{i}", float(i)) for i in range(4)])
        cursor = backend.scan(ScanRequest(limit=2)).next_cursor
    with LogBackend(path) as backend:
        assert ids(backend.scan(ScanRequest(cursor=cursor)).records) == ["r2", "r3"]


def test_cursor_of_another_store_is_refused(tmp_path: Path) -> None:
    """A cursor from a different store (even with the same data) raises InvalidCursor."""
    with LogBackend(tmp_path / "a") as a, LogBackend(tmp_path / "b") as b:
        for backend in (a, b):
            put(backend, *[record(f"r{i}", float(i)) for i in range(3)])
        cursor = a.scan(ScanRequest(limit=1)).next_cursor
        with pytest.raises(InvalidCursor):
            b.scan(ScanRequest(cursor=cursor))


def test_store_id_is_stable(path: Path) -> None:
    """The store id is kept in the store: the same after reopening."""
    with LogBackend(path) as backend:
        first = backend.store_id
    with LogBackend(path) as backend:
        assert backend.store_id == first and len(first) == 32


# -- at(seq) views ------------------------------------------------------------------------------


def _history(store: LogBackend) -> None:
    put(store, record("a", 1.0), record("b", 2.0))  # 1, 2
    store.set_meta(MetaSetRequest(key="k", value="one"))  # 3
    store.delete(DeleteRequest(ids=["a"]))  # 4
    put(store, record("a", 0.5, text="again"))  # 5
    store.set_meta(MetaSetRequest(key="k", value="two"))  # 6
    store.clear(ClearRequest())  # 7
    put(store, record("c", 3.0))  # 8


@pytest.mark.parametrize(
    ("seq", "expected", "meta"),
    [
        (0, [], None),
        (1, ["a"], None),
        (2, ["a", "b"], None),
        (3, ["a", "b"], "one"),
        (4, ["b"], "one"),
        (5, ["a", "b"], "one"),
        (6, ["a", "b"], "two"),
        (7, [], "two"),
        (8, ["c"], "two"),
    ],
)
def test_view_shows_memory_as_it_was_after_each_event(
    store: LogBackend, seq: int, expected: list[str], meta: str | None
) -> None:
    """at(seq) answers scan, count, get and get_meta exactly as the store did right after event seq."""
    _history(store)
    view = store.at(seq)
    assert view.seq == seq
    assert ids(scan_all(view)) == expected
    assert view.count(CountRequest()).count == len(expected)
    assert view.count(CountRequest(time_range=TimeRange(start=1.0, end=2.5))).count == len(
        [i for i in expected if i != "c" and not (i == "a" and 5 <= seq < 7)]
    )
    assert ids(view.get(GetRequest(ids=["a", "b", "c"])).records) == [i for i in "abc" if i in expected]
    assert _meta(view, "k") == meta


def test_view_reads_the_version_current_at_its_point(store: LogBackend) -> None:
    """A record deleted and put again reads as the old version before, the new one after."""
    _history(store)
    assert store.at(2).get(GetRequest(ids=["a"])).records[0].note.text == "text of a"
    assert store.at(5).get(GetRequest(ids=["a"])).records[0].note.text == "again"


def test_view_pages_with_cursors(store: LogBackend) -> None:
    """A view pages exactly with cursors, whatever was written after its point."""
    put(store, *[record(f"r{i}", float(i % 5)) for i in range(20)])
    snapshot = ids(scan_all(store))
    put(store, *[record(f"s{i}", float(i % 5)) for i in range(20)])
    store.delete(DeleteRequest(ids=["r3", "r4"]))
    view = store.at(20)
    assert ids(view.iter_all(page_size=3)) == snapshot


def test_view_writes_raise_read_only(store: LogBackend) -> None:
    """Every write on a view raises ReadOnlyError and appends nothing."""
    put(store, record("a", 1.0))
    view = store.at(1)
    for call in (
        lambda: put(view, record("b", 1.0)),
        lambda: view.delete(DeleteRequest(ids=["a"])),
        lambda: view.set_meta(MetaSetRequest(key="k", value=1)),
        lambda: view.clear(ClearRequest()),
    ):
        with pytest.raises(ReadOnlyError):
            call()
    assert store.head == 1


@pytest.mark.parametrize("seq", [-1, 2, True])
def test_view_point_out_of_range_is_refused(store: LogBackend, seq: int) -> None:
    """A negative seq, one beyond the head, or a non-integer raises ContractError."""
    put(store, record("a", 1.0))
    with pytest.raises(ContractError):
        store.at(seq)


def test_view_by_recorded_time(store: LogBackend) -> None:
    """at(time=t) shows the memory after the last event recorded at or before t; before the first
    event it is empty."""
    put(store, record("a", 1.0))
    t1 = next(store._log.events()).at
    while time.time() <= t1:
        time.sleep(0.001)
    put(store, record("b", 2.0))
    assert store.at(time=t1).seq == 1
    assert store.at(time=t1 - 1).seq == 0
    assert store.at(time=time.time() + 10).seq == 2


def test_map_grows_while_other_threads_read(path: Path) -> None:
    """Readers on three threads keep working while a writer on a 64 KiB map forces it to grow
    several times; nothing raises and every record lands."""
    import threading

    backend = LogBackend(path, map_size=1 << 16)
    put(backend, record("seed", 0.0))
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                assert ids(backend.get(GetRequest(ids=["seed", "nope"])).records) == ["seed"]
                assert backend.count(CountRequest()).count >= 1
                time.sleep(0.0005)
        except BaseException as exc:  # noqa: BLE001 - checked below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for b in range(12):
            put(backend, *[record(f"r{b}-{i}", 1.0 + b, vector=[0.25] * 1024) for i in range(8)])
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    assert backend.count(CountRequest()).count == 97
    assert backend._env.info()["map_size"] > 1 << 16
    backend.close()


def test_store_of_a_newer_format_is_refused(path: Path) -> None:
    """A store whose system table names a newer layout version raises StoreVersionError at open."""
    from coniti.errors import StoreVersionError
    from coniti.log.store import SYS_DB, SYS_LAYOUT

    with LogBackend(path) as backend, backend._env.begin(write=True) as txn:
        txn.put(SYS_LAYOUT, (99).to_bytes(4, "big"), db=backend._log.store.dbs[SYS_DB])
    with pytest.raises(StoreVersionError, match="layout version 99"):
        LogBackend(path)


def test_head_hash_and_namespaces(store: LogBackend) -> None:
    """head_hash names the chain's head (zeros when empty) and equals verify()'s; namespaces() lists
    the namespaces holding records, sorted (one holding only metadata is not listed)."""
    assert store.head_hash == "0" * 64 and store.namespaces() == []
    put(store, record("a", 1.0, namespace=("x",)), record("b", 1.0))
    store.set_meta(MetaSetRequest(key="k", value=1, namespace=("y", "z")))
    assert store.head_hash == store.verify().head_hash != "0" * 64
    assert store.namespaces() == [(), ("x",)]


def test_namespaces_asked_again_after_a_write_see_it(store: LogBackend) -> None:
    """The live namespaces asked, then a write, then asked again: a namespace written to since is
    listed, one whose last record was deleted since is not (the answer kept between asks is the
    head's)."""
    put(store, record("a", 1.0, namespace=("x",)), record("b", 1.0))
    assert store.namespaces() == [(), ("x",)] == store.namespaces()
    put(store, record("c", 1.0, namespace=("w",)))
    assert store.namespaces() == [(), ("w",), ("x",)]
    store.delete(DeleteRequest(ids=["a"], namespace=("x",)))
    assert store.namespaces() == [(), ("w",)]
