"""ConitiSaver's own contracts beyond LangGraph's conformance suite: how it stores (bytes, no
vectors, one atomic write), what it reads (only the threads asked for), pruning that keeps delta
state, concurrency, time travel, and the errors it raises."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import ERROR

from coniti.errors import ContractError, NotSupported, ReadOnlyError
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.integrations.langgraph import ConitiSaver
from coniti.memory import GetRequest, GetResult, ScanRequest, ScanResult

ROOT = ("langgraph", "thread", "t1")


def _config(thread: str = "t1", ns: str = "", checkpoint_id: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _checkpoint(values: dict[str, Any], versions: dict[str, Any] | None = None) -> Checkpoint:
    return Checkpoint(
        v=1,
        id=str(uuid6(clock_seq=-1)),
        ts="2026-12-01T00:00:00+00:00",
        channel_values=values,
        channel_versions=versions if versions is not None else dict.fromkeys(values, "1"),
        versions_seen={},
        updated_channels=None,
    )


def _meta(step: int = 0, **extra: Any) -> CheckpointMetadata:
    return {"source": "loop", "step": step, "parents": {}, **extra}  # type: ignore[typeddict-item]


def _put(
    saver: ConitiSaver, values: dict[str, Any], parent: Any = None, *, new: dict[str, Any] | None = None,
    versions: dict[str, Any] | None = None, step: int = 0, thread: str = "t1", ns: str = "", **meta: Any,
) -> Any:
    cp = _checkpoint(values, versions)
    config = _config(thread, ns) if parent is None else parent
    new_versions = new if new is not None else dict(cp["channel_versions"])
    return saver.put(config, cp, _meta(step, **meta), new_versions)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LogBackend]:
    with LogBackend(tmp_path / "store", durability="nosync") as backend:
        yield backend


@pytest.fixture
def saver(store: LogBackend) -> ConitiSaver:
    return ConitiSaver(store)


# -- how it stores --------------------------------------------------------------------------------


def test_channel_values_are_stored_as_bytes_without_vectors(store: LogBackend, saver: ConitiSaver) -> None:
    """A channel value is a record with no vector whose blob is the serializer's bytes, and no
    record's metadata holds the value."""
    _put(saver, {"data": b"\x00\xffraw bytes"})
    records = list(store.iter_all(namespace=ROOT))
    assert records and all(r.vector is None for r in records)
    blob = next(r for r in records if r.note.metadata["kind"] == "blob")
    assert blob.blob == saver.serde.dumps_typed(b"\x00\xffraw bytes")[1]
    assert all("raw bytes" not in str(r.note.metadata) for r in records)


def test_a_put_is_one_transaction(store: LogBackend, saver: ConitiSaver) -> None:
    """The checkpoint, its channel values and the latest pointer are consecutive events with one
    recorded time (one write transaction)."""
    _put(saver, {"a": 1})
    head = store.head
    _put(saver, {"a": 1, "b": 2, "c": 3}, _config(), new={"b": "2", "c": "2"}, versions={"a": "1", "b": "2", "c": "2"})
    events = list(store.events(after=head))
    assert [e.id for e in events] == ["b:b:2", "b:c:2", events[2].id, "latest"]
    assert events[2].id is not None and events[2].id.startswith("c:")
    assert len({e.at for e in events}) == 1


def test_a_put_carries_the_audit_stamp_of_its_block(store: LogBackend, saver: ConitiSaver) -> None:
    """Inside ``LogBackend.audit(actor, reason)`` every event of a put carries that stamp."""
    head = store.head
    with store.audit(actor="agent-7", reason="turn 1"):
        _put(saver, {"a": 1})
    assert {(e.actor, e.reason) for e in store.events(after=head)} == {("agent-7", "turn 1")}


def test_a_value_too_large_for_a_record_is_refused_and_nothing_is_written(
    store: LogBackend, saver: ConitiSaver
) -> None:
    """A channel value over coniti's blob limit raises ContractError naming the channel, and the
    store is unchanged (no thread index entry either)."""
    with pytest.raises(ContractError, match="channel 'big'"):
        _put(saver, {"big": b"x" * (17 * 1024 * 1024)})
    assert store.head == 0


def test_metadata_that_is_not_json_is_refused_and_nothing_is_written(store: LogBackend, saver: ConitiSaver) -> None:
    """Checkpoint metadata must be JSON-serialisable; otherwise ContractError and no event."""
    with pytest.raises(ContractError, match="checkpoint metadata"):
        _put(saver, {"a": 1}, custom=object())
    assert store.head == 0


def test_pending_writes_may_come_before_their_checkpoint(saver: ConitiSaver) -> None:
    """Writes stored for a checkpoint id before the checkpoint itself (LangGraph's async
    durability does this) are its pending writes once it is put."""
    cp = _checkpoint({"a": 1})
    saver.put_writes(_config(checkpoint_id=cp["id"]), [("a", 5), (ERROR, "boom")], "task-1")
    saver.put(_config(), cp, _meta(), {"a": "1"})
    found = saver.get_tuple(_config())
    assert found is not None and found.pending_writes == [("task-1", ERROR, "boom"), ("task-1", "a", 5)]


def test_a_special_write_is_replaced_and_a_regular_one_kept(saver: ConitiSaver) -> None:
    """A repeated regular write (same task and index) keeps the first value; an error write is
    replaced by the later one."""
    stored = _put(saver, {"a": 1})
    saver.put_writes(stored, [("a", "first"), (ERROR, "first")], "task")
    saver.put_writes(stored, [("a", "second"), (ERROR, "second")], "task")
    found = saver.get_tuple(stored)
    assert found is not None and sorted(found.pending_writes or []) == [
        ("task", ERROR, "second"),
        ("task", "a", "first"),
    ]


# -- what it reads ----------------------------------------------------------------------------


class _Spy(InMemoryBackend):
    """Records the namespaces every get and scan reads, and counts the records scans return."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[tuple[str, ...]] = []
        self.scanned = 0

    def get(self, request: GetRequest) -> GetResult:
        self.read.append(request.namespace)
        return super().get(request)

    def scan(self, request: ScanRequest) -> ScanResult:
        self.read.append(request.namespace)
        result = super().scan(request)
        self.scanned += len(result.records)
        return result


def _uuid6_at(t: float, node: int = 0) -> str:
    """A UUIDv6 whose time is ``t`` (epoch seconds), as LangGraph's ``uuid6`` lays it out."""
    ticks = int(t * 1e7) + 0x01B21DD213814000
    value = ((ticks >> 12) & 0xFFFFFFFFFFFF) << 80 | (0x6000 | (ticks & 0x0FFF)) << 64
    return str(uuid.UUID(int=value | (0x8000 << 48) | node))


def _put_id(saver: ConitiSaver, checkpoint_id: str, step: int = 0) -> Any:
    cp = _checkpoint({"a": step})
    cp["id"] = checkpoint_id
    return saver.put(_config(), cp, _meta(step), {"a": "1"})


def test_reads_of_a_thread_touch_only_its_namespaces() -> None:
    """``get_tuple`` and ``list`` of one thread read its checkpoint namespaces and the thread index,
    never another thread's namespace."""
    spy = _Spy()
    saver = ConitiSaver(spy)
    for thread in ("t1", "t2", "t3"):
        for ns in ("", "child:1"):
            _put(saver, {"a": thread}, thread=thread, ns=ns)
    spy.read.clear()
    assert saver.get_tuple(_config("t2")) is not None
    assert len(list(saver.list({"configurable": {"thread_id": "t2"}}))) == 2
    assert set(spy.read) == {
        ("langgraph", "threads"), ("langgraph", "thread", "t2"), ("langgraph", "thread", "t2", "child:1"),
    }


def test_list_with_a_limit_reads_only_the_newest_checkpoints() -> None:
    """Of 300 checkpoints an hour apart, ``list(limit=3)`` returns the three greatest ids after
    reading a handful of records, not the namespace."""
    spy = _Spy()
    saver = ConitiSaver(spy)
    ids = [_uuid6_at(1.7e9 + 3600 * i, i) for i in range(300)]
    for i, checkpoint_id in enumerate(ids):
        _put_id(saver, checkpoint_id, i)
    spy.scanned = 0
    got = [t.config["configurable"]["checkpoint_id"] for t in saver.list(_config(), limit=3)]
    assert got == sorted(ids, reverse=True)[:3]
    assert spy.scanned < 30


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.builds(_uuid6_at, st.floats(min_value=0, max_value=2e9), st.integers(0, 2**48 - 1)),
            st.text(alphabet="0123456789abcdefz-", min_size=1, max_size=8),
        ),
        min_size=1, max_size=12, unique=True,
    ),
    st.one_of(st.none(), st.integers(min_value=1, max_value=6)),
    st.data(),
)
def test_list_order_before_and_limit_match_a_sort_of_the_ids(
    ids: list[str], limit: int | None, data: st.DataObject
) -> None:
    """For any mix of UUIDv6 and other checkpoint ids, ``list(before=, limit=)`` yields exactly the
    ids below ``before``, greatest first, at most ``limit``."""
    saver = ConitiSaver(InMemoryBackend())
    for i, checkpoint_id in enumerate(ids):
        _put_id(saver, checkpoint_id, i)
    before = data.draw(st.one_of(st.none(), st.sampled_from(ids), st.builds(_uuid6_at, st.floats(0, 2e9))))
    expected = sorted((i for i in ids if before is None or i < before), reverse=True)[:limit]
    got = saver.list(_config(), before=None if before is None else _config(checkpoint_id=before), limit=limit)
    assert [t.config["configurable"]["checkpoint_id"] for t in got] == expected


def test_list_without_config_lists_every_thread(saver: ConitiSaver) -> None:
    """``list(None)`` yields the checkpoints of every thread and namespace, newest first in each."""
    a = _put(saver, {"a": 1}, thread="t1")
    b = _put(saver, {"a": 1}, a, step=1, thread="t1")
    c = _put(saver, {"a": 1}, thread="t2", ns="child:1")
    assert [t.config for t in saver.list(None)] == [b, a, c]


def test_list_filter_compares_metadata_values_exactly(saver: ConitiSaver) -> None:
    """``filter`` keeps checkpoints whose metadata has each key equal to the value, also for
    nested objects."""
    _put(saver, {"a": 1}, tag={"x": [1, 2]})
    kept = _put(saver, {"a": 1}, tag={"x": [1, 2, 3]})
    assert [t.config for t in saver.list(_config(), filter={"tag": {"x": [1, 2, 3]}})] == [kept]


def test_a_view_of_the_past_serves_langgraph_state_as_it_was(store: LogBackend, saver: ConitiSaver) -> None:
    """A ConitiSaver on ``store.at(seq)`` reads the thread as it was at that point, and refuses
    writes with ReadOnlyError."""
    first = _put(saver, {"a": "old"})
    seq = store.head
    _put(saver, {"a": "new"}, first, versions={"a": "2"}, step=1)
    past = ConitiSaver(store.at(seq))
    found = past.get_tuple(_config())
    assert found is not None and found.config == first and found.checkpoint["channel_values"] == {"a": "old"}
    with pytest.raises(ReadOnlyError):
        _put(past, {"a": 1})


# -- pruning ------------------------------------------------------------------------------------


def test_prune_keeps_the_values_the_latest_checkpoint_refers_to(store: LogBackend, saver: ConitiSaver) -> None:
    """After ``prune(keep_latest)`` the latest checkpoint still reads every channel, also those an
    older checkpoint wrote, and only the values it refers to are left."""
    first = _put(saver, {"a": "a1", "b": "b1"}, versions={"a": "1", "b": "1"})
    second = _put(saver, {"a": "a2", "b": "b1"}, first, new={"a": "2"}, versions={"a": "2", "b": "1"}, step=1)
    saver.prune(["t1"])
    found = saver.get_tuple(_config())
    assert found is not None and found.config == second
    assert found.checkpoint["channel_values"] == {"a": "a2", "b": "b1"}
    blobs = sorted(r.id for r in store.iter_all(namespace=ROOT) if r.note.metadata["kind"] == "blob")
    assert blobs == ["b:a:2", "b:b:1"]


def test_prune_keeps_the_ancestors_a_delta_channel_needs(saver: ConitiSaver) -> None:
    """For a channel the latest checkpoint's metadata names in ``counters_since_delta_snapshot``,
    prune keeps each ancestor back to the nearest one storing the channel's value; older ones go."""
    delta = {"counters_since_delta_snapshot": {"d": [2, 2]}}
    c0 = _put(saver, {"d": "snap0"}, versions={"d": "1"})
    c1 = _put(saver, {"d": "snap1"}, c0, versions={"d": "2"}, step=1)
    c2 = _put(saver, {}, c1, new={"d": "3"}, versions={"d": "3"}, step=2, **delta)
    c3 = _put(saver, {}, c2, new={"d": "4"}, versions={"d": "4"}, step=3, **delta)
    saver.prune(["t1"])
    assert [t.config for t in saver.list(_config())] == [c3, c2, c1]


def test_prune_refuses_an_unknown_strategy(saver: ConitiSaver) -> None:
    """A strategy other than keep_latest or delete raises ContractError naming it."""
    with pytest.raises(ContractError, match="'keep_all'"):
        saver.prune(["t1"], strategy="keep_all")


def test_delete_for_runs_moves_latest_to_the_newest_kept_checkpoint(saver: ConitiSaver) -> None:
    """Deleting the run of the latest checkpoint makes the newest remaining one the latest."""
    first = _put(saver, {"a": 1}, run_id="run-1")
    _put(saver, {"a": 2}, first, versions={"a": "2"}, step=1, run_id="run-2")
    saver.delete_for_runs(["run-2"])
    found = saver.get_tuple(_config())
    assert found is not None and found.config == first and found.checkpoint["channel_values"] == {"a": 1}


# -- concurrency --------------------------------------------------------------------------------


def test_concurrent_puts_lose_no_namespace_and_keep_the_greatest_latest(saver: ConitiSaver) -> None:
    """Eight threads putting checkpoints into eight namespaces of one thread at once: the thread
    index lists all of them, and each namespace's latest is its greatest checkpoint id."""
    done: dict[str, list[str]] = {}

    def work(ns: str) -> None:
        done[ns] = [_put(saver, {"a": i}, thread="t1", ns=ns)["configurable"]["checkpoint_id"] for i in range(5)]

    workers = [threading.Thread(target=work, args=(f"child:{i}",)) for i in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(t.config["configurable"]["checkpoint_ns"] for t in saver.list({"configurable": {"thread_id": "t1"}}, limit=None)) == sorted(
        ns for ns in done for _ in range(5)
    )
    for ns, ids in done.items():
        found = saver.get_tuple(_config(ns=ns))
        assert found is not None and found.config["configurable"]["checkpoint_id"] == max(ids)


# -- errors -------------------------------------------------------------------------------------


def test_a_config_without_thread_id_is_refused(saver: ConitiSaver) -> None:
    """A missing or empty thread id raises ContractError naming the config key."""
    with pytest.raises(ContractError, match=r"\['thread_id'\]"):
        saver.get_tuple({"configurable": {"checkpoint_ns": ""}})


def test_memory_of_another_type_is_refused() -> None:
    """Anything but a MemoryBackend or a path raises ContractError naming the type."""
    with pytest.raises(ContractError, match="dict"):
        ConitiSaver({})  # type: ignore[arg-type]


def test_erase_thread_needs_a_log_backend() -> None:
    """On an InMemoryBackend, ``erase_thread`` raises NotSupported."""
    with pytest.raises(NotSupported, match="LogBackend"):
        ConitiSaver(InMemoryBackend()).erase_thread("t1", reason="gdpr")


def test_a_path_opens_a_store_the_saver_closes(tmp_path: Path) -> None:
    """``ConitiSaver(path)`` opens a LogBackend there; closing the saver closes it, and a new saver
    on the path reads what the first wrote."""
    with ConitiSaver(tmp_path / "s") as saver:
        stored = _put(saver, {"a": 1})
    with ConitiSaver(tmp_path / "s") as again:
        found = again.get_tuple(_config())
    assert found is not None and found.config == stored


def test_erase_thread_erases_the_runs_it_took_part_in_and_keeps_the_others_places(
    store: LogBackend, saver: ConitiSaver
) -> None:
    """After ``erase_thread("t1")`` the run index holds no content naming t1 in any version, a run
    that also wrote to t2 still lists t2, and ``delete_for_runs`` still finds t2's checkpoint."""
    _put(saver, {"a": 1}, thread="t1", run_id="run-1")
    _put(saver, {"a": 1}, thread="t2", run_id="run-1")
    receipts = saver.erase_thread("t1", reason="gdpr")
    runs = ("langgraph", "runs")
    assert receipts[runs].erased == ["run-1"]
    live = [e.record for e in store.events(namespace=runs) if e.kind == "put" and e.record is not None]
    assert [r.note.metadata["at"] for r in live] == [[["t2", ""]]]
    saver.delete_for_runs(["run-1"])
    assert saver.get_tuple(_config("t2")) is None
