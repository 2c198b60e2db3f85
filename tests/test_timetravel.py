"""Time travel on LogBackend beyond the basics in test_log_backend: views by recorded time (floats and
aware datetimes), the empty memory, views as full backends (dump, iter_all, async twins), views
after reopening, and the as-of benchmark's smoke run."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from coniti.actor import TimeRange
from coniti.errors import ContractError, ReadOnlyError
from coniti.impl.log import LogBackend
from coniti.memory import DeleteRequest, GetRequest, MetaSetRequest, ScanRequest
from coniti.testing.helpers import exact, ids, put, record, scan_all, state

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LogBackend]:
    backend = LogBackend(tmp_path / "store")
    yield backend
    backend.close()


def _tick() -> float:
    """Now, after making sure the clock has moved past every event written so far."""
    before = time.time()
    while time.time() <= before:
        time.sleep(0.001)
    return time.time()


def test_views_by_recorded_time_step_through_history(store: LogBackend) -> None:
    """at(time=t) for a t between two writes shows the memory after the first of them."""
    put(store, record("a", 1.0))
    t1 = _tick()
    put(store, record("b", 2.0))
    t2 = _tick()
    store.delete(DeleteRequest(ids=["a"]))
    assert [ids(scan_all(store.at(time=t))) for t in (t1, t2, _tick())] == [["a"], ["a", "b"], ["b"]]


def test_view_by_aware_datetime_equals_view_by_epoch_seconds(store: LogBackend) -> None:
    """An aware datetime (any timezone) names the same point as its epoch seconds."""
    put(store, record("a", 1.0))
    t = _tick()
    put(store, record("b", 2.0))
    as_utc = datetime.fromtimestamp(t, UTC)
    as_plus5 = as_utc.astimezone(timezone(timedelta(hours=5)))
    assert store.at(time=as_utc).seq == store.at(time=as_plus5).seq == store.at(time=t).seq == 1


def test_naive_datetime_is_refused(store: LogBackend) -> None:
    """A naive datetime (its meaning depends on the machine) raises ContractError naming time."""
    put(store, record("a", 1.0))
    with pytest.raises(ContractError, match="time"):
        store.at(time=datetime.now())


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "yesterday", True])
def test_bad_time_is_refused(store: LogBackend, bad: object) -> None:
    """A non-finite, non-numeric or boolean time raises ContractError."""
    with pytest.raises(ContractError, match="time"):
        store.at(time=bad)  # type: ignore[arg-type]


def test_both_seq_and_time_are_refused(store: LogBackend) -> None:
    """Giving a sequence number and a time at once is an error, not a guess."""
    put(store, record("a", 1.0))
    with pytest.raises(ContractError, match="not both"):
        store.at(1, time=time.time())


def test_time_before_the_first_event_and_at_zero_are_the_empty_memory(store: LogBackend) -> None:
    """at(0) and a time before the first event show nothing (records, counts, metadata)."""
    put(store, record("a", 1.0))
    store.set_meta(MetaSetRequest(key="k", value=1))
    for view in (store.at(0), store.at(time=datetime(2000, 1, 1, tzinfo=UTC))):
        assert view.seq == 0
        assert state(view, [()], ["k"]) == {(): ([], {"k": None})}


def test_view_dump_is_the_dump_taken_at_that_point(store: LogBackend, tmp_path: Path) -> None:
    """Dumping a view writes the same records a dump at that moment wrote (same lines after the
    header's creation time)."""
    put(store, *[record(f"r{i}", float(i), metadata={"i": i}) for i in range(5)])
    store.dump(tmp_path / "then.jsonl")
    point = store.head
    store.delete(DeleteRequest(ids=["r1"]))
    put(store, record("later", 9.0))
    assert store.at(point).dump(tmp_path / "view.jsonl") == 5
    then = (tmp_path / "then.jsonl").read_text().splitlines()
    view = (tmp_path / "view.jsonl").read_text().splitlines()
    assert then[1:] == view[1:]


def test_view_iter_all_pages_the_same_records(store: LogBackend) -> None:
    """iter_all on a view with tiny pages gives the records of that point in order."""
    put(store, *[record(f"r{i}", float(i % 3)) for i in range(10)])
    point = store.head
    store.delete(DeleteRequest(ids=["r0", "r5"]))
    view = store.at(point)
    assert [exact(r) for r in view.iter_all(page_size=2)] == [exact(r) for r in scan_all(view)]
    assert len(list(view.iter_all(page_size=2))) == 10


def test_view_async_twins_answer_like_the_sync_calls(store: LogBackend) -> None:
    """aget/ascan/acount on a view equal the sync answers; awaited writes raise ReadOnlyError."""
    put(store, record("a", 1.0), record("b", 2.0))
    view = store.at(1)

    async def main() -> None:
        got = await view.aget(GetRequest(ids=["a", "b"]))
        assert ids(got.records) == ["a"] and got.missing == ["b"]
        assert ids((await view.ascan(view.scan_request())).records) == ["a"]
        assert (await view.acount(view.count_request())).count == 1
        with pytest.raises(ReadOnlyError):
            await view.aput(view.put_request([record("c")]))

    asyncio.run(main())


def test_views_read_the_same_after_reopening(tmp_path: Path) -> None:
    """The version history is stored: views of every point read the same after close and reopen."""
    with LogBackend(tmp_path / "s") as store:
        put(store, record("a", 1.0), record("b", 2.0))
        store.delete(DeleteRequest(ids=["a"]))
        put(store, record("a", 3.0, text="again"))
        before = [state(store.at(seq)) for seq in range(store.head + 1)]
    with LogBackend(tmp_path / "s") as store:
        assert [state(store.at(seq)) for seq in range(store.head + 1)] == before


def test_view_of_a_readonly_handle(tmp_path: Path) -> None:
    """A read-only handle gives views like a writable one."""
    with LogBackend(tmp_path / "s") as store:
        put(store, record("a", 1.0))
        store.delete(DeleteRequest(ids=["a"]))
    with LogBackend(tmp_path / "s", read_only=True) as ro:
        assert ids(scan_all(ro.at(1))) == ["a"] and ids(scan_all(ro)) == []


def test_bench_asof_quick_runs_and_reports_every_point(tmp_path: Path) -> None:
    """tools/bench_asof.py --quick builds its history, times every point for both timestamp orders
    and writes its figures as JSON (no time is asserted)."""
    out = tmp_path / "asof.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench_asof.py"), "--quick", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    report = json.loads(out.read_text())
    assert set(report["orders"]) == {"ordered", "random"}
    for order in report["orders"].values():
        assert set(order["points"]) == {"start", "middle", "head"}
        assert all(p["get_asof_us"] > 0 and p["page_asof_ms"] > 0 for p in order["points"].values())
    assert "worst as-of / current ratio" in proc.stdout


def test_last_page_of_an_early_view_ends_exactly(store: LogBackend) -> None:
    """A view of an early point, scanned from a time near its end with later records after it in
    time: the last page holds the rest and says no more (next_cursor None), and earlier pages say
    more, exactly."""
    put(store, *[record(f"old{i}", float(i)) for i in range(6)])
    point = store.head
    put(store, *[record(f"new{i}", 10.0 + i) for i in range(50)])
    view = store.at(point)
    page = view.scan(ScanRequest(time_range=TimeRange(start=3.0), limit=3))
    assert ids(page.records) == ["old3", "old4", "old5"] and page.next_cursor is None
    first = view.scan(ScanRequest(time_range=TimeRange(start=2.0), limit=3))
    assert ids(first.records) == ["old2", "old3", "old4"] and first.next_cursor is not None
    assert ids(view.scan(ScanRequest(cursor=first.next_cursor)).records) == ["old5"]
    assert view.count(view.count_request(TimeRange(start=3.0))).count == 3


def test_store_written_before_the_later_projections_is_rebuilt_once_at_open(tmp_path: Path) -> None:
    """A store lacking the erx table (written before it existed) reads correctly when opened
    read-only, and a writable open creates it and rebuilds the projections: views and verify() are
    then exact."""
    path = tmp_path / "old"
    with LogBackend(path) as store:
        put(store, *[record(f"r{i}", float(i)) for i in range(8)])
        store.delete(DeleteRequest(ids=["r2"]))
        put(store, *[record(f"s{i}", 20.0 + i) for i in range(5)])
        expected = [state(store.at(seq)) for seq in range(store.head + 1)]
        with store._env.begin(write=True) as txn:
            txn.drop(store._env.open_db(b"erx", txn=txn, create=False), delete=True)
    with LogBackend(path, read_only=True) as ro:
        assert [state(ro.at(seq)) for seq in range(ro.head + 1)] == expected
    with LogBackend(path) as store:
        assert [state(store.at(seq)) for seq in range(store.head + 1)] == expected
        assert store.verify().ok


def test_a_view_declares_the_point_it_reads(tmp_path: Path) -> None:
    """LogView.as_of is its seq; a current LogBackend's as_of is None."""
    with LogBackend(tmp_path / "s") as store:
        store.put(store.put_request([record("a", 1.0)]))
        assert store.as_of is None
        assert store.at(1).as_of == 1 == store.at(1).seq
