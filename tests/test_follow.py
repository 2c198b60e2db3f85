"""The change feed: follow()/afollow() live tails and durable named subscriptions, in one process and
across processes (children run this file as a script: ``python tests/test_follow.py <command> <json>``).
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve()
if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent.parent))

from coniti.errors import ContractError, ReadOnlyError  # noqa: E402
from coniti.impl.log import LogBackend  # noqa: E402
from coniti.memory import DeleteRequest  # noqa: E402
from coniti.testing.helpers import put, record  # noqa: E402

# -- children --------------------------------------------------------------------------------------


def _say(obj: Any) -> None:
    os.write(1, (json.dumps(obj) + "\n").encode())


def child_writer(a: dict[str, Any]) -> None:
    """Put ``n`` one-record calls ``<prefix>-<i>``, ``gap`` seconds apart; say each head."""
    with LogBackend(a["store"]) as store:
        _say({"ready": True})
        for i in range(a["n"]):
            put(store, record(f"{a['prefix']}-{i}", float(i)))
            _say({"head": store.head})
            time.sleep(a["gap"])


def child_consumer(a: dict[str, Any]) -> None:
    """Follow subscription ``name`` (``timeout`` s of quiet ends it); say each event as it is
    received, then acknowledge it and say so."""
    with LogBackend(a["store"]) as store:
        sub = store.subscription(a["name"])
        _say({"start": sub.position})
        for event in sub.follow(timeout=a["timeout"]):
            _say({"got": event.seq, "id": event.id})
            sub.ack(event.seq)
            _say({"acked": event.seq})
        _say({"done": sub.position})


COMMANDS = {"writer": child_writer, "consumer": child_consumer}


def spawn(command: str, args: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE), command, json.dumps(args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def read_line(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        err = proc.stderr.read() if proc.stderr else ""
        raise AssertionError(f"child ended early: {err[-2000:]}")
    out: dict[str, Any] = json.loads(line)
    return out


# -- tests ------------------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LogBackend]:
    backend = LogBackend(tmp_path / "store")
    yield backend
    backend.close()


def test_follow_yields_existing_events_then_stops_after_quiet(store: LogBackend) -> None:
    """follow(after=0, timeout=t) yields every event already there, then returns once t seconds pass
    without a new one."""
    put(store, record("a"), record("b"))
    started = time.monotonic()
    got = [e.seq for e in store.follow(after=0, timeout=0.2)]
    elapsed = time.monotonic() - started
    assert got == [1, 2]
    assert 0.2 <= elapsed < 3.0


def test_follow_defaults_to_events_after_the_current_head(store: LogBackend) -> None:
    """follow() without after starts at the head at the call: earlier events are not yielded."""
    put(store, record("old"))
    feed = store.follow(timeout=0.3)
    put(store, record("new"))
    assert [e.id for e in feed] == ["new"]


def test_follow_yields_events_as_another_thread_commits_them(store: LogBackend) -> None:
    """A writer thread commits 40 events with pauses; the tail yields each, in order, once."""

    def writer() -> None:
        for i in range(40):
            put(store, record(f"w{i}"))
            time.sleep(0.002)

    t = threading.Thread(target=writer)
    t.start()
    got = [e.id for e in store.follow(after=0, timeout=1.0)]
    t.join()
    assert got == [f"w{i}" for i in range(40)]


def test_follow_of_one_namespace(store: LogBackend) -> None:
    """follow(namespace=ns) yields only that namespace's events."""
    put(store, record("a", namespace=("x",)), record("b"), record("c", namespace=("x",)))
    assert [e.id for e in store.follow(after=0, timeout=0.1, namespace=("x",))] == ["a", "c"]


def test_follow_zero_timeout_drains_and_returns(store: LogBackend) -> None:
    """timeout=0 yields what is there and returns at once."""
    put(store, record("a"))
    assert [e.seq for e in store.follow(after=0, timeout=0)] == [1]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"after": -1}, "after"), ({"timeout": -1}, "timeout"), ({"timeout": float("nan")}, "timeout"),
     ({"namespace": "x"}, "namespace")],
)
def test_follow_bad_arguments_are_refused_at_the_call(
    store: LogBackend, kwargs: dict[str, Any], field: str
) -> None:
    """Bad after/timeout/namespace raise ContractError when follow() is called, not on first next()."""
    with pytest.raises(ContractError, match=field):
        store.follow(**kwargs)
    with pytest.raises(ContractError, match=field):
        store.afollow(**kwargs)


def test_afollow_yields_events_without_blocking_the_loop(store: LogBackend) -> None:
    """afollow() in one task sees events another task writes through aput, in order; the loop keeps
    running meanwhile."""
    ticks = 0

    async def ticker(stop: asyncio.Event) -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.001)

    async def writer() -> None:
        for i in range(20):
            await store.aput(store.put_request([record(f"a{i}")]))
            await asyncio.sleep(0.003)

    async def main() -> list[str | None]:
        stop = asyncio.Event()
        tick = asyncio.create_task(ticker(stop))
        write = asyncio.create_task(writer())
        got = [e.id async for e in store.afollow(after=0, timeout=0.5)]
        await write
        stop.set()
        await tick
        return got

    assert asyncio.run(main()) == [f"a{i}" for i in range(20)]
    assert ticks > 20


def test_follow_sees_commits_of_another_process(store: LogBackend) -> None:
    """A child process writes 30 records; the parent's tail yields all 30, in order, as they commit."""
    proc = spawn("writer", {"store": store.path, "n": 30, "gap": 0.005, "prefix": "child"})
    try:
        assert read_line(proc) == {"ready": True}
        got = []
        for event in store.follow(after=0, timeout=10.0):
            got.append(event.id)
            if len(got) == 30:
                break
    finally:
        proc.wait(timeout=30)
    assert got == [f"child-{i}" for i in range(30)]
    assert proc.returncode == 0


# -- subscriptions ------------------------------------------------------------------------------------


def test_new_subscription_starts_at_zero_or_at_start(store: LogBackend) -> None:
    """A new subscription is at 0 (or start=); pending() yields everything after its position."""
    put(store, record("a"), record("b"), record("c"))
    sub = store.subscription("all")
    assert sub.position == 0 and [e.seq for e in sub.pending()] == [1, 2, 3]
    late = store.subscription("late", start=store.head)
    assert late.position == 3 and list(late.pending()) == []


def test_ack_moves_the_position_durably(tmp_path: Path) -> None:
    """ack(seq) stores the position in the store: after reopening, pending() resumes after it."""
    with LogBackend(tmp_path / "s") as store:
        put(store, *[record(f"r{i}") for i in range(5)])
        sub = store.subscription("indexer")
        sub.ack(2)
    with LogBackend(tmp_path / "s") as store:
        sub = store.subscription("indexer", start=5)
        assert sub.position == 2
        assert [e.seq for e in sub.pending()] == [3, 4, 5]
        assert store.subscriptions() == {"indexer": 2}


def test_ack_appends_no_event_and_verify_stays_clean(store: LogBackend) -> None:
    """Acknowledging changes neither the head nor the hash chain; verify() is clean."""
    put(store, record("a"))
    head, head_hash = store.head, store.head_hash
    sub = store.subscription("s")
    sub.ack(1)
    assert (store.head, store.head_hash) == (head, head_hash)
    assert store.verify().ok


def test_ack_cannot_go_back_or_past_the_head(store: LogBackend) -> None:
    """ack behind the position or beyond the head raises ContractError and changes nothing."""
    put(store, record("a"), record("b"))
    sub = store.subscription("s")
    sub.ack(2)
    with pytest.raises(ContractError, match="back"):
        sub.ack(1)
    with pytest.raises(ContractError, match="beyond the head"):
        sub.ack(3)
    with pytest.raises(ContractError, match="seq"):
        sub.ack(-1)
    assert sub.position == 2


def test_seek_moves_back_to_replay(store: LogBackend) -> None:
    """seek(seq) moves the position anywhere in 0..head, backwards included."""
    put(store, record("a"), record("b"))
    sub = store.subscription("s")
    sub.ack(2)
    sub.seek(0)
    assert [e.seq for e in sub.pending()] == [1, 2]


def test_subscriptions_are_independent_and_can_be_deleted(store: LogBackend) -> None:
    """Two names keep two positions; delete() removes one, and using it afterwards is refused."""
    put(store, record("a"), record("b"))
    one, two = store.subscription("one"), store.subscription("two")
    one.ack(1)
    two.ack(2)
    assert store.subscriptions() == {"one": 1, "two": 2}
    one.delete()
    assert store.subscriptions() == {"two": 2}
    with pytest.raises(ContractError, match="one"):
        one.ack(2)


@pytest.mark.parametrize("name", ["", "x" * 201, 7])
def test_bad_subscription_names_are_refused(store: LogBackend, name: object) -> None:
    """An empty, over-long (over 200 bytes) or non-string name raises ContractError."""
    with pytest.raises(ContractError, match="subscription name"):
        store.subscription(name)  # type: ignore[arg-type]


def test_subscription_start_beyond_the_head_is_refused(store: LogBackend) -> None:
    """start= beyond the head raises ContractError and creates nothing."""
    with pytest.raises(ContractError, match="beyond the head"):
        store.subscription("s", start=1)
    assert store.subscriptions() == {}


def test_readonly_handle_reads_positions_but_cannot_ack(tmp_path: Path) -> None:
    """A read-only handle sees an existing subscription's position; ack raises ReadOnlyError."""
    with LogBackend(tmp_path / "s") as store:
        put(store, record("a"))
        store.subscription("s")
    with LogBackend(tmp_path / "s", read_only=True) as ro:
        sub = ro.subscription("s")
        assert sub.position == 0 and [e.seq for e in sub.pending()] == [1]
        with pytest.raises(ReadOnlyError):
            sub.ack(1)


def test_subscription_follow_and_async_ack(store: LogBackend) -> None:
    """afollow() of a subscription resumes after its position; aack() stores progress."""
    put(store, record("a"), record("b"), record("c"))
    sub = store.subscription("s")
    sub.ack(1)

    async def main() -> list[int]:
        seen = []
        async for event in sub.afollow(timeout=0.1):
            seen.append(event.seq)
            await sub.aack(event.seq)
        return seen

    assert asyncio.run(main()) == [2, 3]
    assert sub.position == 3


def test_subscription_resumes_after_kill_9_with_nothing_missed_or_repeated(store: LogBackend) -> None:
    """A consumer process acknowledging each event is SIGKILLed at random moments while a writer
    keeps writing; each restart resumes right after the stored position. Over all runs every event
    is acknowledged exactly once, and each run starts right after the previous run's last ack."""
    rng = random.Random(4)
    put(store, *[record(f"pre-{i}") for i in range(60)])
    acked: list[int] = []
    for _ in range(3):
        proc = spawn("consumer", {"store": store.path, "name": "worker", "timeout": 5.0})
        start = read_line(proc)["start"]
        assert start == (acked[-1] if acked else 0) or start == acked[-1] + 1
        if acked and start == acked[-1] + 1:  # the ack committed, the kill came before it was said
            acked.append(start)
        kill_after = rng.randrange(5, 25)
        seen = 0
        while seen < kill_after:
            line = read_line(proc)
            if "acked" in line:
                acked.append(line["acked"])
                seen += 1
            elif "got" in line:
                assert line["got"] == (acked[-1] if acked else 0) + 1
        put(store, *[record(f"mid-{len(acked)}-{i}") for i in range(10)])
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.stdout is not None
        rest = proc.stdout.read()  # through the same buffer readline() filled, not communicate()
        for raw in rest.splitlines():  # what it said before dying
            line = json.loads(raw)
            if "acked" in line:
                acked.append(line["acked"])
    final = spawn("consumer", {"store": store.path, "name": "worker", "timeout": 0.5})
    start = read_line(final)["start"]
    if acked and start == acked[-1] + 1:
        acked.append(start)
    while True:
        line = read_line(final)
        if "done" in line:
            assert line["done"] == store.head
            break
        if "acked" in line:
            acked.append(line["acked"])
    final.wait(timeout=30)
    assert acked == list(range(1, store.head + 1))
    assert store.subscription("worker").position == store.head


def test_delete_events_reach_the_tail(store: LogBackend) -> None:
    """Every kind of event flows through the tail, deletes included."""
    put(store, record("a"))
    feed = store.follow(timeout=0.2)
    store.delete(DeleteRequest(ids=["a"]))
    assert [(e.kind, e.id) for e in feed] == [("delete", "a")]


if __name__ == "__main__":
    COMMANDS[sys.argv[1]](json.loads(sys.argv[2]))
