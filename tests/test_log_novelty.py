"""A put's ids must be new: the write path checks a whole call at once (one sorted walk of ``ver``
per namespace) and refuses exactly what a check row by row refuses, naming the same row.

The reference below is the row-by-row check (each row: a repeat of an earlier row of its namespace,
then a live version in the store, by ``Projections.live_seq``); the property compares the error a
put raises, type and message, with it, over stores holding live, deleted and erased ids in several
namespaces.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti.actor import Note
from coniti.batch import NoteBatch, RecordBatch
from coniti.errors import DuplicateRecord, namespace_text
from coniti.impl.log import LogBackend
from coniti.log import EventLog, PutItem
from coniti.log.keys import name_key, ns_bytes
from coniti.log.projections import Projections
from coniti.memory import DeleteRequest, GetRequest, MemoryRecord, PutRequest

NAMESPACES = [(), ("a",), ("a", "b")]


def _item(record_id: str, ns: tuple[str, ...] = ()) -> PutItem:
    return PutItem(ns, record_id, f"text of {record_id[:20]}", 1.0, {}, None, None)


def _batch(ids: list[str], ns: tuple[str, ...] = ()) -> RecordBatch:
    notes = NoteBatch(ids, [f"t {i}" for i in ids], [float(k) for k in range(len(ids))])
    return RecordBatch(notes, np.ones((len(ids), 2), dtype=np.float32), "emb", ns)


def _record(record_id: str, ns: tuple[str, ...] = ()) -> MemoryRecord:
    return MemoryRecord(note=Note(id=record_id, text="x", timestamp=0.0), vector=None, namespace=ns)


def _reference(log: EventLog, items: list[PutItem]) -> str | None:
    """The error a row-by-row check gives ``items`` against the store (``None``: none)."""
    with log.store.read() as txn:
        p = Projections(txn, log._dbs)
        seen: set[tuple[tuple[str, ...], str]] = set()
        for item in items:
            ns = item.namespace
            if (ns, item.id) in seen:
                return f"DuplicateRecord: record id {item.id!r} appears twice in one put (namespace {namespace_text(ns)})"
            seen.add((ns, item.id))
            nsid = p.nsid(ns_bytes(ns))
            if nsid is not None and p.live_seq(nsid, name_key(item.id)) is not None:
                return f"DuplicateRecord: record id {item.id!r} already exists in namespace {namespace_text(ns)}"
    return None


def _outcome(call: Any) -> str | None:
    try:
        call()
    except DuplicateRecord as exc:
        return f"DuplicateRecord: {exc}"
    return None


def _events(log: EventLog) -> int:
    return log.head().seq


ids = st.sampled_from(["a", "b", "c", "d", "e", "x" * 420, "y" * 420])
rows = st.lists(st.tuples(st.sampled_from(NAMESPACES), ids), min_size=1, max_size=8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.tuples(st.sampled_from(["put", "delete", "erase"]), st.sampled_from(NAMESPACES), ids), max_size=12),
    rows,
)
def test_a_put_refuses_what_a_row_by_row_check_refuses(
    tmp_path_factory: pytest.TempPathFactory, history: list[tuple[str, tuple[str, ...], str]], batch: list[Any]
) -> None:
    """After any history of puts, deletes and erasures over three namespaces (long hashed ids
    included), a put of any rows (repeats, several namespaces) raises the error, type and
    message, that the row-by-row check gives, naming the same row, or succeeds when it gives
    none; a refused put appends nothing."""
    log = EventLog(tmp_path_factory.mktemp("novelty") / "s")
    try:
        for op, ns, record_id in history:
            if op == "put":
                _outcome(lambda ns=ns, record_id=record_id: log.put([_item(record_id, ns)]))
            elif op == "delete":
                log.delete(ns, [record_id])
            else:
                log.erase(ns, [record_id])
        items = [_item(record_id, ns) for ns, record_id in batch]
        expected = _reference(log, items)
        before = _events(log)
        assert _outcome(lambda: log.put(items)) == expected
        assert _events(log) == (before if expected else before + len(items))
    finally:
        log.close()


def test_a_live_id_refuses_the_batch_and_writes_nothing(tmp_path: Path) -> None:
    """put_batch of ids of which one is live names it and appends no event."""
    with LogBackend(tmp_path / "s") as store:
        store.put_batch(_batch(["a", "b", "c"]))
        head = store.head
        with pytest.raises(DuplicateRecord, match=r"^record id 'b' already exists in namespace /$"):
            store.put_batch(_batch(["z", "b", "y"]))
        assert store.head == head


def test_a_deleted_id_can_be_put_again(tmp_path: Path) -> None:
    """An id deleted (its version ended) is new again: a batch re-putting it among new ids is
    written, and the id reads back with its new version."""
    with LogBackend(tmp_path / "s") as store:
        store.put_batch(_batch(["a", "b"]))
        store.delete(DeleteRequest(ids=["a"]))
        assert store.put_batch(_batch(["n1", "a", "n2"])).written == 3
        assert [r.note.text for r in store.get(GetRequest(ids=["a"])).records] == ["t a"]


def test_an_erased_id_can_be_put_again(tmp_path: Path) -> None:
    """An id erased (content gone, receipt appended) is new again for a batch."""
    with LogBackend(tmp_path / "s") as store:
        store.put_batch(_batch(["a", "b"]))
        store.erase(["a"], reason="test")
        assert store.put_batch(_batch(["a", "c"])).written == 2
        assert store.verify().ok


def test_a_repeat_within_a_batch_names_the_first_repeated_id(tmp_path: Path) -> None:
    """Rows repeating an id refuse the put naming the first row that repeats an earlier one, also
    when a live id comes later in the rows; nothing is appended."""
    log = EventLog(tmp_path / "s")
    try:
        log.put([_item("live")])
        rows = [_item("p"), _item("q"), _item("q"), _item("live"), _item("p")]
        with pytest.raises(DuplicateRecord, match=r"^record id 'q' appears twice in one put"):
            log.put(rows)
        assert _events(log) == 1
    finally:
        log.close()


def test_a_live_id_before_a_repeat_is_the_one_named(tmp_path: Path) -> None:
    """A live id in an earlier row than a repeat is the error, as row by row (the log layer's
    order; a backend checks repeats before it reaches the log)."""
    log = EventLog(tmp_path / "s")
    try:
        log.put([_item("live")])
        with pytest.raises(DuplicateRecord, match=r"^record id 'live' already exists"):
            log.put([_item("p"), _item("live"), _item("p")])
    finally:
        log.close()


def test_ids_are_new_per_namespace(tmp_path: Path) -> None:
    """An id live in one namespace is new in another, and one put may hold it in several; it is
    refused in the namespace where it is live, naming that namespace."""
    with LogBackend(tmp_path / "s") as store:
        store.put(PutRequest(records=[_record("a", ("x",))]))
        assert store.put(PutRequest(records=[_record("a"), _record("a", ("y",)), _record("b", ("x",))])).written == 3
        with pytest.raises(DuplicateRecord, match=r"^record id 'a' already exists in namespace x$"):
            store.put(PutRequest(records=[_record("c", ("y",)), _record("a", ("x",))]))


def test_concurrent_puts_of_one_id_write_it_once(tmp_path: Path) -> None:
    """Puts of the same id from several threads (merged by group commit into one transaction)
    write it once; every other put is refused as a repeat of an id that exists."""
    with LogBackend(tmp_path / "s") as store:
        outcomes: list[str | None] = []
        barrier = threading.Barrier(6)

        def put(k: int) -> None:
            request = PutRequest(records=[_record("same"), _record(f"own{k}")])
            barrier.wait()
            outcomes.append(_outcome(lambda: store.put(request)))

        threads = [threading.Thread(target=put, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert outcomes.count(None) == 1
        assert all(o == "DuplicateRecord: record id 'same' already exists in namespace /" for o in outcomes if o)
        assert store.head == 2


def test_a_load_refuses_an_id_of_an_earlier_batch(tmp_path: Path) -> None:
    """put_batches (one transaction) refuses a batch repeating an id an earlier batch of the load
    wrote, naming it, and writes none of the load."""
    with LogBackend(tmp_path / "s") as store:
        with pytest.raises(DuplicateRecord, match=r"^record id 'a' already exists in namespace /$"):
            store.put_batches([[_record("a"), _record("b")], [_record("c"), _record("a")]])
        assert store.head == 0
