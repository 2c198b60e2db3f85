"""Several processes and threads on one LogBackend store, shared environments, and fork().

4 writer processes put 1000 records each into one store (the first 100 of each as single puts, so
single-record transactions from several processes interleave; the rest in batches) while a reader
process polls count and head. No write may be lost, sequence numbers are 1..head without gap or
repeat, and the reader never sees a count or head go backwards.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers_log import (
    assert_verified,
    count,
    lmdb_env,
    missing,
    put,
    rec,
    records_of,
    spawn,
)

from coniti.impl.log import LogBackend
from coniti.log import EventLog
from coniti.memory import GetRequest

WRITERS = 4
PER_WRITER = 1000
NS = ("mp",)


def _ready(proc: Any) -> None:
    line = proc.stdout.readline()
    assert json.loads(line) == {"ready": True}, line + proc.stderr.read()


def _finish(proc: Any, timeout: float = 120) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def contended_store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store filled by 4 concurrent writer processes while a reader process polls it."""
    path = str(tmp_path_factory.mktemp("mp") / "store")
    LogBackend(path).close()
    writers = [
        spawn("mp-writer", {"store": path, "ns": list(NS), "writer": w, "n": PER_WRITER,
                            "single": 100, "batch": 25})
        for w in range(WRITERS)
    ]
    reader = spawn("mp-reader", {"store": path, "ns": list(NS), "target": WRITERS * PER_WRITER,
                                 "timeout": 120})
    for proc in [*writers, reader]:
        _ready(proc)
    for proc in [*writers, reader]:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    written = [_finish(proc) for proc in writers]
    read = _finish(reader)
    return {"path": path, "writers": written, "reader": read}


def test_no_write_is_lost(contended_store: dict[str, Any]) -> None:
    """Every one of the 4 x 1000 records is readable afterwards, and nothing else is there."""
    with LogBackend(contended_store["path"]) as store:
        ids = [f"w{w}-{k:05d}" for w in range(WRITERS) for k in range(PER_WRITER)]
        assert missing(store, ids, NS) == []
        assert count(store, NS) == WRITERS * PER_WRITER
        got = store.get(GetRequest(ids=ids[:5] + ids[-5:], namespace=NS)).records
        assert [r.note.metadata for r in got] == [
            {"w": int(i[1]), "k": int(i.split("-")[1])} for i in ids[:5] + ids[-5:]
        ]


def test_sequence_numbers_are_gap_free_and_verified(contended_store: dict[str, Any]) -> None:
    """head == 4000 events, verify() walks 4000 events without a problem."""
    with LogBackend(contended_store["path"]) as store:
        assert store.head == WRITERS * PER_WRITER
        report = assert_verified(store)
        assert report.events_checked == WRITERS * PER_WRITER


def test_events_hold_each_write_once_in_each_writers_order(contended_store: dict[str, Any]) -> None:
    """The log holds seqs 1..4000 once each, one put per record, each writer's puts in its own
    order, and the single puts of different processes interleaved."""
    log = EventLog(contended_store["path"])
    try:
        events = list(log.events())
    finally:
        log.close()
    assert [e.seq for e in events] == list(range(1, WRITERS * PER_WRITER + 1))
    assert {e.kind for e in events} == {"put"}
    ids = [e.id for e in events]
    assert len(set(ids)) == len(ids) == WRITERS * PER_WRITER
    for w in range(WRITERS):
        mine = [i for i in ids if i.startswith(f"w{w}-")]
        assert mine == sorted(mine)
    singles = [i for i in ids if int(i.split("-")[1]) < 100]
    switches = sum(a[:2] != b[:2] for a, b in zip(singles, singles[1:], strict=False))
    assert switches >= 3, "the single puts of the 4 processes did not interleave"


def test_concurrent_reader_never_sees_the_count_go_backwards(contended_store: dict[str, Any]) -> None:
    """The polling reader saw growth (many distinct counts) and never a count or head regression."""
    read = contended_store["reader"]
    assert read["regressions"] == []
    assert read["last"] == WRITERS * PER_WRITER
    assert read["distinct"] >= 5, read


def test_verify_while_other_processes_write_is_clean(contended_store: dict[str, Any]) -> None:
    """verify() run by the reader halfway through, with 4 writers busy, found no problem and
    checked a gap-free prefix of the log (at least the records it had counted)."""
    mid = contended_store["reader"]["verified_mid_run"]
    assert mid is not None
    assert mid["problems"] == []
    assert mid["events_checked"] == mid["head_seq"] >= mid["count_before"]


# -- a read never sees an older snapshot than one already seen ----------------------------------
#
# LMDB (0.9, mdb_txn_renew0) begins a read transaction by loading the last committed txnid from the
# lock file, then copying the meta page of that txnid's parity. A writer writes its meta page (into
# the page cache, where the read-only map sees it at once; with sync, O_DSYNC holds it there for the
# whole flush) before it publishes its txnid in the lock file. So a reader that loads txnid t, and
# stalls until commit t+1 is published and commit t+2 has written its meta page (over t's), reads
# snapshot t+2; its next transaction, begun before t+2 is published, reads t+1: an older head.


def _offsets_holding(path: str, txnid: int) -> set[int]:
    """The 8-aligned offsets among the first 128 bytes of LMDB's lock file that hold ``txnid``."""
    raw = (Path(path) / "lock.mdb").read_bytes()[:128]
    return {at for at in range(0, 128, 8) if struct.unpack_from("<Q", raw, at)[0] == txnid}


def test_a_reader_that_stalled_across_commits_then_sees_no_older_head(tmp_path: Path) -> None:
    """The race above, with the lock file showing the reader what each step of it shows: after a
    read begun on txnid t while the meta pages name t+1 and t+2 (the stalled reader) and a read
    begun on t+1 with t+2 written but not yet published, the heads seen never decrease."""
    path = str(tmp_path / "store")
    with LogBackend(path) as store:
        env = lmdb_env(store)
        txnids = []
        holding: list[set[int]] = []
        for k in range(3):
            put(store, [rec(f"r{k}", float(k))])
            txnids.append(env.info()["last_txnid"])
            holding.append(_offsets_holding(path, txnids[-1]))
        newest = txnids[-1]
        assert txnids == [newest - 2, newest - 1, newest]  # one commit per put: heads 1, 2, 3
        # Where the lock file publishes the last committed txnid (mti_txnid: 48 on 64-bit Linux):
        # the one place that followed every commit.
        (at,) = set.intersection(*holding)
        seen: list[int] = []
        with open(Path(path) / "lock.mdb", "r+b") as f, mmap.mmap(f.fileno(), 4096) as lock:
            struct.pack_into("<Q", lock, at, newest - 2)  # the stalled reader's load
            try:
                stalled = threading.Thread(target=lambda: seen.append(store.head))
                stalled.start()
                stalled.join(0.3)
                struct.pack_into("<Q", lock, at, newest - 1)  # t+1 published, t+2 in flight
                stalled.join(10)
                assert not stalled.is_alive()
                seen.append(store.head)
            finally:
                struct.pack_into("<Q", lock, at, newest)  # t+2 published
            seen.append(store.head)
    assert seen == sorted(seen), f"the head went backwards: {seen}"
    assert seen[-1] == 3


@pytest.mark.slow
def test_readers_never_see_the_head_go_back_while_writers_commit_one_record_each(
    tmp_path: Path,
) -> None:
    """A soak for the race above: 3 writer processes put 500 records each, one per commit, while
    4 reader processes poll count and head; no reader sees either decrease."""
    path = str(tmp_path / "store")
    LogBackend(path).close()
    writers = [
        spawn("mp-writer", {"store": path, "ns": list(NS), "writer": w, "n": 500, "single": 500,
                            "batch": 1})
        for w in range(3)
    ]
    readers = [
        spawn("mp-reader", {"store": path, "ns": list(NS), "target": 1500, "timeout": 600})
        for _ in range(4)
    ]
    for proc in [*writers, *readers]:
        _ready(proc)
    for proc in [*writers, *readers]:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in writers:
        _finish(proc, timeout=600)
    reads = [_finish(proc, timeout=600) for proc in readers]
    assert [r["regressions"] for r in reads] == [[]] * 4
    assert [r["last"] for r in reads] == [1500] * 4


def test_threads_on_two_handles_lose_nothing(tmp_path: Path) -> None:
    """4 threads x 100 single puts through two handles on one path: all 400 there, verify clean."""
    path = str(tmp_path / "store")
    handles = [LogBackend(path), LogBackend(path)]
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for k in range(100):
                put(handles[t % 2], [rec(f"t{t}-{k}", ts=float(k))])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert count(handles[0]) == count(handles[1]) == 400
    assert handles[1].head == 400
    assert_verified(handles[0])
    for h in handles:
        h.close()


def test_two_handles_on_one_path_share_one_environment(tmp_path: Path) -> None:
    """Two LogBackends on one path in one process use the same LMDB environment."""
    path = str(tmp_path / "store")
    with LogBackend(path) as a, LogBackend(path) as b:
        assert lmdb_env(a) is lmdb_env(b)


def test_a_write_through_one_handle_is_seen_by_the_other(tmp_path: Path) -> None:
    """A put through handle a is immediately readable through handle b on the same path."""
    path = str(tmp_path / "store")
    with LogBackend(path) as a, LogBackend(path) as b:
        put(a, [rec("x", 1.0)])
        assert missing(b, ["x"]) == []
        assert b.head == 1


def test_closing_one_handle_leaves_the_other_working(tmp_path: Path) -> None:
    """Closing handle a does not close the shared environment under handle b."""
    path = str(tmp_path / "store")
    a = LogBackend(path)
    b = LogBackend(path)
    put(a, [rec("x", 1.0)])
    a.close()
    put(b, [rec("y", 2.0)])
    assert [r.id for r in records_of(b)] == ["x", "y"]
    b.close()
    with LogBackend(path) as c:
        assert count(c) == 2


def test_handle_used_after_fork_raises_a_clear_error_in_the_child(tmp_path: Path) -> None:
    """In a forked child, the parent's handle (and a view of it) raises StoreForked on read and on
    write; a handle opened in the child works; the parent's handle is unharmed."""
    path = str(tmp_path / "store")
    store = LogBackend(path)
    put(store, [rec("before", 1.0)])
    view = store.at(1)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        out: dict[str, Any] = {}
        try:
            from coniti.errors import StoreForked

            calls = [
                ("read", lambda: count(store)),
                ("write", lambda: put(store, [rec("child", 2.0)])),
                ("view", lambda: count(view)),
            ]
            for name, call in calls:
                try:
                    call()
                    out[name] = "no error"
                except StoreForked as exc:
                    out[name] = "StoreForked: " + str(exc)
                except BaseException as exc:
                    out[name] = f"{type(exc).__name__}: {exc}"
            fresh = LogBackend(path)
            put(fresh, [rec("from-child", 3.0)])
            out["fresh"] = count(fresh)
            fresh.close()
        except BaseException as exc:
            out["crash"] = f"{type(exc).__name__}: {exc}"
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as pipe:
        out = json.loads(pipe.read())
    _, status = os.waitpid(pid, 0)
    assert status == 0
    assert out["read"].startswith("StoreForked"), out
    assert out["write"].startswith("StoreForked"), out
    assert out["view"].startswith("StoreForked"), out
    assert "fork" in out["write"].lower()
    assert out["fresh"] == 2, out
    assert [r.id for r in records_of(store)] == ["before", "from-child"]
    assert_verified(store)
    store.close()
