"""Group commit on LogBackend (coniti/log/group.py): concurrent write calls share one transaction and
one flush, each still all or nothing, each acknowledged only once its group is on disk.

Deterministic groups: a *blocker* call holds the store's write transaction (it runs through the same
queue and waits on an event) while the calls under test queue up behind it; released, the next
leader takes every one of them into a single group.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from coniti.actor import Note
from coniti.errors import DuplicateRecord, StoreError
from coniti.impl.log import LogBackend
from coniti.log.group import GroupCommit
from coniti.memory import (
    ClearRequest,
    DeleteRequest,
    GetRequest,
    MemoryRecord,
    MetaGetRequest,
    MetaSetRequest,
    PutRequest,
)

HERE = Path(__file__).resolve()


def rec(rid: str, ts: float = 0.0, ns: Sequence[str] = (), dim: int = 4) -> MemoryRecord:
    return MemoryRecord(
        note=Note(id=rid, text=f"text of {rid}", timestamp=ts, metadata={"id": rid}),
        vector=np.full(dim, len(rid), dtype=np.float32),
        embedding_id=None,
        namespace=tuple(ns),
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LogBackend]:
    backend = LogBackend(tmp_path / "store")
    yield backend
    backend.close()


def group_of(backend: LogBackend) -> GroupCommit:
    group = backend._log.group
    assert group is not None
    return group


def in_one_group(backend: LogBackend, calls: Sequence[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` on threads so that they all land in one group; returns each call's result or
    the exception it raised, in order. Asserts that exactly one commit carried them."""
    group = group_of(backend)
    release = threading.Event()
    held = threading.Event()

    def blocker(txn: Any) -> None:
        held.set()
        assert release.wait(30)

    lead = threading.Thread(target=group.run, args=(blocker,))
    lead.start()
    assert held.wait(30)
    outcomes: list[Any] = [None] * len(calls)

    def call(i: int) -> None:
        try:
            outcomes[i] = calls[i]()
        except BaseException as exc:  # recorded for the test to check
            outcomes[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(calls))]
    commits = group.commits
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while group.pending() < len(calls) + 1:
        assert time.monotonic() < deadline, "calls did not queue"
        time.sleep(0.001)
    assert all(t.is_alive() for t in threads), "a queued call returned before its group committed"
    release.set()
    lead.join(30)
    for t in threads:
        t.join(30)
    assert group.commits == commits + 1, "the queued calls were not committed as one group"
    return outcomes


def put_call(backend: LogBackend, *records: MemoryRecord) -> Callable[[], Any]:
    return lambda: backend.put(PutRequest(records=list(records))).written


def assert_clean(backend: LogBackend) -> None:
    report = backend.verify()
    assert list(report.problems) == []
    assert report.events_checked == report.head_seq == backend.head


def test_concurrent_puts_from_many_threads_all_land_with_gap_free_seqs(store: LogBackend) -> None:
    """8 threads x 25 one-record puts: every record lands once, seqs run 1..200 without a gap, each
    thread's puts are in its own call order, calls were merged (fewer commits than calls), and
    verify() is clean."""
    writers, per = 8, 25
    barrier = threading.Barrier(writers)

    def writer(k: int) -> None:
        barrier.wait()
        for i in range(per):
            assert store.put(PutRequest(records=[rec(f"w{k}-{i:02d}", float(i))])).written == 1

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = list(store.events())
    assert [e.seq for e in events] == list(range(1, writers * per + 1))
    assert sorted(e.id or "" for e in events) == sorted(
        f"w{k}-{i:02d}" for k in range(writers) for i in range(per)
    )
    for k in range(writers):
        mine = [e.id for e in events if (e.id or "").startswith(f"w{k}-")]
        assert mine == [f"w{k}-{i:02d}" for i in range(per)]
    group = group_of(store)
    assert group.calls == writers * per
    assert group.commits < group.calls
    assert_clean(store)


def test_queued_calls_commit_as_one_group_in_queue_order(store: LogBackend) -> None:
    """Six puts queued behind a held transaction commit in one group; each gets its own result,
    and their events are consecutive, one recorded time never going backwards."""
    outcomes = in_one_group(store, [put_call(store, rec(f"r{i}", float(i))) for i in range(6)])
    assert outcomes == [1] * 6
    events = list(store.events())
    assert [e.seq for e in events] == [1, 2, 3, 4, 5, 6]
    assert [e.at for e in events] == sorted(e.at for e in events)
    assert store.count(store.count_request()).count == 6
    assert_clean(store)


def test_a_failing_call_in_a_group_fails_alone(store: LogBackend) -> None:
    """In one group: a put of a live id and a put that repeats an id an earlier call of the same
    group wrote each raise DuplicateRecord and write nothing; every other call commits."""
    store.put(PutRequest(records=[rec("old")]))
    outcomes = in_one_group(
        store,
        [
            put_call(store, rec("a"), rec("b")),
            put_call(store, rec("c"), rec("old")),  # "old" is live: the whole call fails
            put_call(store, rec("d")),
            put_call(store, rec("e"), rec("a")),  # "a" was written by the first call of the group
            put_call(store, rec("f")),
        ],
    )
    assert outcomes[0] == 2 and outcomes[2] == 1 and outcomes[4] == 1
    assert isinstance(outcomes[1], DuplicateRecord) and "'old'" in str(outcomes[1])
    assert isinstance(outcomes[3], DuplicateRecord) and "'a'" in str(outcomes[3])
    got = store.get(GetRequest(ids=["a", "b", "c", "d", "e", "f", "old"]))
    assert got.missing == ["c", "e"]
    assert store.head == 5  # old, a, b, d, f
    assert_clean(store)


def test_every_kind_of_write_merges_and_applies_in_order(store: LogBackend) -> None:
    """put, delete, set_meta and clear queued in one group apply in queue order: a delete sees the
    put before it, a clear ends what the group put into its namespace, metadata is set."""
    outcomes = in_one_group(
        store,
        [
            put_call(store, rec("x"), rec("y")),
            lambda: store.delete(DeleteRequest(ids=["x", "nope"])).deleted,
            lambda: store.set_meta(MetaSetRequest(key="k", value=[1, 2])).value,
            put_call(store, rec("s1", ns=["scratch"]), rec("s2", ns=["scratch"])),
            lambda: store.clear(ClearRequest(namespace=("scratch",))).deleted,
        ],
    )
    assert outcomes == [2, ["x"], [1, 2], 2, 2]
    assert store.get(GetRequest(ids=["x", "y"])).missing == ["x"]
    assert store.get_meta(MetaGetRequest(key="k")).value == [1, 2]
    assert store.count(store.count_request(namespace=("scratch",))).count == 0
    assert [e.kind for e in store.events()] == ["put", "put", "delete", "meta", "put", "put", "clear"]
    assert_clean(store)


def test_merged_puts_apply_in_order_with_deletes_between(store: LogBackend) -> None:
    """Consecutive puts of a group are merged, the delete after them sees them, and the put after
    the delete may write the deleted id again: the queue order holds across merged runs."""
    outcomes = in_one_group(
        store,
        [
            put_call(store, rec("x"), rec("y")),
            put_call(store, rec("z")),
            lambda: store.delete(DeleteRequest(ids=["x"])).deleted,
            put_call(store, rec("x", 5.0)),
            put_call(store, rec("y")),  # still live: refused
        ],
    )
    assert outcomes[:4] == [2, 1, ["x"], 1]
    assert isinstance(outcomes[4], DuplicateRecord)
    assert [(e.kind, e.id) for e in store.events()] == [
        ("put", "x"), ("put", "y"), ("put", "z"), ("delete", "x"), ("put", "x"),
    ]
    assert store.get(GetRequest(ids=["x"])).records[0].note.timestamp == 5.0
    assert_clean(store)


def test_a_refused_call_leaves_no_namespace_behind(store: LogBackend) -> None:
    """A merged put refused for a live id writes nothing, not even the new namespace its other
    record would have opened: the next call's new namespace comes right after the existing one,
    and verify() (which refolds the namespace table from the log) is clean."""
    store.put(PutRequest(records=[rec("old")]))
    outcomes = in_one_group(
        store,
        [
            put_call(store, rec("a", ns=["first"]), rec("old")),
            put_call(store, rec("b", ns=["second"])),
        ],
    )
    assert isinstance(outcomes[0], DuplicateRecord) and outcomes[1] == 1
    assert store._log.namespaces() == [(), ("second",)]
    assert_clean(store)


def test_a_merger_that_fails_falls_back_to_one_call_at_a_time(tmp_path: Path) -> None:
    """If a group's merger raises, its calls run one by one in nested transactions: each gets its
    own result and everything they wrote is there."""
    from coniti.log.store import Store

    store = Store(tmp_path / "raw")
    try:
        group = GroupCommit(store)
        db = store.dbs[b"sys"]
        merged: list[int] = []

        def merger(txn: Any, data: list[Any]) -> list[Any]:
            merged.append(len(data))
            txn.put(b"x:merged", b"1", db=db)  # rolled back: the merger fails after writing
            raise RuntimeError("merger broke")

        def call(k: int) -> Callable[[], Any]:
            def fn(txn: Any) -> int:
                txn.put(f"x:{k}".encode(), b"v", db=db)
                return k

            return lambda: group.run(fn, merge=(merger, k))

        release = threading.Event()
        held = threading.Event()

        def blocker(txn: Any) -> None:
            held.set()
            assert release.wait(30)

        lead = threading.Thread(target=group.run, args=(blocker,))
        lead.start()
        assert held.wait(30)
        results: list[Any] = [None] * 4
        threads = [
            threading.Thread(target=lambda k=k: results.__setitem__(k, call(k)())) for k in range(4)
        ]
        for t in threads:
            t.start()
        while group.pending() < 5:
            time.sleep(0.001)
        release.set()
        for t in [lead, *threads]:
            t.join(30)
        assert results == [0, 1, 2, 3]
        assert merged == [4]
        with store.read() as txn:
            assert [txn.get(f"x:{k}".encode(), db=db) for k in range(4)] == [b"v"] * 4
            assert txn.get(b"x:merged", db=db) is None
    finally:
        store.close()


def test_audit_stamps_stay_with_each_call(store: LogBackend) -> None:
    """Calls made under different audit() blocks, merged into one group, keep their own actor and
    reason on their own events."""

    def stamped(k: int) -> Callable[[], Any]:
        def call() -> Any:
            with store.audit(actor=f"actor{k}", reason=f"reason{k}"):
                return store.put(PutRequest(records=[rec(f"s{k}-a"), rec(f"s{k}-b")])).written

        return call

    outcomes = in_one_group(store, [stamped(k) for k in range(5)])
    assert outcomes == [2] * 5
    events = list(store.events())
    assert len(events) == 10
    for e in events:
        k = (e.id or "")[1]
        assert (e.actor, e.reason) == (f"actor{k}", f"reason{k}")


def test_async_tasks_merge_and_keep_their_stamps(tmp_path: Path) -> None:
    """aput from 16 asyncio tasks, each in its own audit() block: every record lands once with its
    task's actor, the log is gap-free and verify() is clean."""

    async def main(backend: LogBackend) -> None:
        async def task(k: int) -> None:
            with backend.audit(actor=f"task{k:02d}"):
                for i in range(3):
                    await backend.aput(PutRequest(records=[rec(f"t{k:02d}-{i}", float(i))]))

        await asyncio.gather(*(task(k) for k in range(16)))

    with LogBackend(tmp_path / "store") as backend:
        asyncio.run(main(backend))
        events = list(backend.events())
        assert [e.seq for e in events] == list(range(1, 49))
        for e in events:
            assert e.actor == f"task{(e.id or '')[1:3]}"
        assert_clean(backend)


def test_an_interrupted_group_writes_nothing_and_fails_every_call(store: LogBackend) -> None:
    """When the group's transaction itself fails (here an interrupt raised in one call's work), no
    call of the group is written; the leading thread gets the interrupt and every other call a
    StoreError naming it. The queue keeps working afterwards."""

    class Interrupt(BaseException):
        pass

    group = group_of(store)

    def interrupt(txn: Any) -> None:
        raise Interrupt

    calls: list[Callable[[], Any]] = [put_call(store, rec(f"i{k}")) for k in range(3)]
    calls.insert(1, lambda: group.run(interrupt))
    outcomes = in_one_group(store, calls)
    interrupts = [o for o in outcomes if isinstance(o, Interrupt)]
    failures = [o for o in outcomes if isinstance(o, StoreError) and "Interrupt" in str(o)]
    assert len(interrupts) == 1 and len(failures) == 3, outcomes
    assert store.head == 0
    store.put(PutRequest(records=[rec("after")]))
    assert store.head == 1
    assert_clean(store)


def test_a_full_map_grows_and_the_whole_group_runs_again(tmp_path: Path) -> None:
    """A group whose records overflow a 64 KiB map grows it and commits every call; verify() clean."""
    with LogBackend(tmp_path / "store", map_size=1 << 16) as backend:
        before = backend._env.info()["map_size"]
        outcomes = in_one_group(
            backend,
            [put_call(backend, *(rec(f"g{k}-{j}", dim=512) for j in range(8))) for k in range(6)],
        )
        assert outcomes == [8] * 6
        assert backend._env.info()["map_size"] > before
        assert backend.count(backend.count_request()).count == 48
        assert_clean(backend)


def test_group_commit_off_commits_every_call_alone(tmp_path: Path) -> None:
    """With group_commit=False there is no queue; concurrent puts still all land, gap-free."""
    with LogBackend(tmp_path / "store", group_commit=False) as backend:
        assert backend._log.group is None

        def writer(k: int) -> None:
            for i in range(5):
                backend.put(PutRequest(records=[rec(f"n{k}-{i}")]))

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [e.seq for e in backend.events()] == list(range(1, 21))
        assert_clean(backend)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_write_in_a_forked_child_raises_store_forked_even_mid_group(store: LogBackend) -> None:
    """fork() while a group is being committed (its queue lock and the store's write lock held by
    the parent's threads): the child's write raises StoreForked at once instead of waiting on them."""
    from coniti.errors import StoreForked

    group = group_of(store)
    release = threading.Event()
    held = threading.Event()

    def blocker(txn: Any) -> None:
        held.set()
        assert release.wait(30)

    lead = threading.Thread(target=group.run, args=(blocker,))
    lead.start()
    assert held.wait(30)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.alarm(20)
            try:
                store.put(PutRequest(records=[rec("child")]))
            except StoreForked:
                code = 0
        finally:
            os._exit(code)
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        release.set()
        lead.join(30)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    store.put(PutRequest(records=[rec("parent")]))
    assert store.head == 1


# -- acknowledged means flushed: writers killed at random -------------------------------------------


def child_writers(path: str, writers: int) -> None:
    """8 threads putting two-record calls forever; prints ``ACK w<k>-<i>`` once each call returned."""
    backend = LogBackend(path)

    def writer(k: int) -> None:
        i = 0
        while True:
            backend.put(PutRequest(records=[rec(f"w{k}-{i}-a"), rec(f"w{k}-{i}-b")]))
            os.write(1, f"ACK w{k}-{i}\n".encode())
            i += 1

    for k in range(writers):
        threading.Thread(target=writer, args=(k,), daemon=True).start()
    threading.Event().wait()


@pytest.mark.parametrize("trial", range(4))
def test_concurrent_writers_killed_at_random_lose_no_acknowledged_call(
    tmp_path: Path, trial: int
) -> None:
    """A process whose 8 threads write through group commit is SIGKILLed at a random moment: every
    acknowledged call is in the store, no call is partial, each thread's calls that landed are a
    prefix of its sequence (the last possibly unacknowledged), and verify() is clean."""
    path = tmp_path / "store"
    writers = 8
    proc = subprocess.Popen(
        [sys.executable, str(HERE), json.dumps({"path": str(path), "writers": writers})],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith(b"ACK"), proc.stderr.read() if proc.stderr else first
    time.sleep(random.Random(trial).uniform(0.05, 0.4))
    proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate(timeout=30)
    acked = [line.split()[1].decode() for line in (first + rest).splitlines() if line.startswith(b"ACK")]
    assert len(acked) > 1
    with LogBackend(path) as backend:
        assert_clean(backend)
        landed = {e.id for e in backend.events()}
        for call in acked:
            assert {f"{call}-a", f"{call}-b"} <= landed, f"acknowledged call {call} was lost"
        for k in range(writers):
            done = sorted(
                int(rid.split("-")[1]) for rid in landed if rid.startswith(f"w{k}-") and rid.endswith("-a")
            )
            assert done == list(range(len(done))), f"writer {k}: calls {done} are not a prefix"
            for i in done:
                assert f"w{k}-{i}-b" in landed, f"call w{k}-{i} is partial"


if __name__ == "__main__":
    args = json.loads(sys.argv[1])
    child_writers(args["path"], args["writers"])
