"""Conformance: a write returns what it wrote.

The versions in the result of ``put``, ``put_with_meta``, ``put_batch`` and ``write`` are the versions
a later ``get`` shows for those records; on a backend that declares an event feed, the ``seqs`` of a
put, write or delete result are exactly the sequence numbers of the events the call appended (its
own, in order, whatever other writers do at the same time); elsewhere they are empty or number the
call's changes in order.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import pytest

from coniti.batch import NoteBatch, RecordBatch
from coniti.memory import (
    DeleteOp,
    GetRequest,
    MemoryBackend,
    MetaSetRequest,
    PatchOp,
    PutRequest,
    UpsertOp,
    WriteRequest,
    event_feed,
)
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import put, record

__all__ = ["WrittenTests"]


def _versions(backend: MemoryBackend, ids: Sequence[str], namespace: tuple[str, ...] = ()) -> list[int | None]:
    """The version ``get`` shows for each id, in the order of ``ids``."""
    found = {r.id: r.version for r in backend.get(GetRequest(ids=list(ids), namespace=namespace)).records}
    return [found.get(i) for i in ids]


def _batch(ids: Sequence[str], namespace: tuple[str, ...] = ()) -> RecordBatch:
    notes = NoteBatch(list(ids), [f"text of {i}" for i in ids], [float(n) for n in range(len(ids))])
    return RecordBatch(notes, np.ones((len(ids), 3)), None, namespace)


class WrittenTests(BackendFixtures):
    """The versions and sequence numbers in write results equal what reads and the feed show."""

    supports_threads: ClassVar[bool] = False
    """As :class:`~coniti.testing.ConcurrencyTests`: declare True to run the test with threads."""

    def _appended(self, backend: MemoryBackend, before: int) -> list[tuple[int, str]]:
        """``(seq, kind)`` of every event after ``before``."""
        feed = event_feed(backend)
        assert feed is not None
        return [(e.seq, e.kind) for e in feed.events(after=before)]

    def _head(self, backend: MemoryBackend) -> int | None:
        feed = event_feed(backend)
        return None if feed is None else feed.head

    # -- versions, every backend -----------------------------------------------------------------

    def test_put_returns_the_versions_get_shows(self, backend: MemoryBackend) -> None:
        """put's result lists one version per record, in request order, each the one get shows."""
        put(backend, record("old", 0.0))
        result = put(backend, record("c", 3.0), record("a", 1.0), record("b", 2.0, namespace=("x",)))
        assert result.written == 3 and len(result.versions) == 3
        assert result.versions[:2] == _versions(backend, ["c", "a"])
        assert result.versions[2:] == _versions(backend, ["b"], ("x",))

    def test_an_empty_put_returns_no_versions(self, backend: MemoryBackend) -> None:
        """A put of no records returns no versions and no seqs."""
        result = backend.put(PutRequest(records=[]))
        assert (result.written, result.versions, result.seqs) == (0, [], [])

    def test_put_batch_returns_the_versions_get_shows(self, backend: MemoryBackend) -> None:
        """put_batch's result lists one version per row, in batch order, each the one get shows."""
        put(backend, record("old", 0.0, namespace=("x",)))
        result = backend.put_batch(_batch(["n2", "n0", "n1"], ("x",)))
        assert result.written == 3
        assert result.versions == _versions(backend, ["n2", "n0", "n1"], ("x",))

    def test_put_with_meta_returns_the_versions_get_shows(self, backend: MemoryBackend) -> None:
        """put_with_meta (where declared), and put_batch with a metadata value, return the versions
        get shows."""
        if not type(backend).supports_put_with_meta:
            pytest.skip("the backend does not declare supports_put_with_meta")
        meta = MetaSetRequest(key="k", value=1)
        result = backend.put_with_meta(PutRequest(records=[record("a", 1.0), record("b", 0.5)]), meta)
        assert result.versions == _versions(backend, ["a", "b"])
        batch = backend.put_batch(_batch(["c", "d"]), MetaSetRequest(key="k", value=2))
        assert batch.versions == _versions(backend, ["c", "d"])

    def test_write_returns_the_versions_get_shows(self, backend: MemoryBackend) -> None:
        """write's result gives every upserted or patched id the version get shows afterwards."""
        if not type(backend).supports_write:
            pytest.skip("the backend does not declare supports_write")
        put(backend, record("p", 1.0), record("d", 2.0))
        result = backend.write(
            WriteRequest(ops=[UpsertOp(record=record("u", 3.0)), PatchOp(id="p", text="new", vector=[0.0, 1.0, 0.0]), DeleteOp(id="d")])
        )
        assert [result.versions[i] for i in ("u", "p")] == _versions(backend, ["u", "p"])

    # -- sequence numbers -------------------------------------------------------------------------

    def test_seqs_number_the_changes_of_each_call(self, backend: MemoryBackend) -> None:
        """Without an event feed, the seqs of put, put_batch, write and delete are empty, or one
        per change of the call, increasing from call to call, a put's equal to its versions."""
        if event_feed(backend) is not None:
            pytest.skip("the backend declares an event feed (its events are checked)")
        puts = [put(backend, record("a", 1.0), record("b", 0.5)), backend.put_batch(_batch(["c"]))]
        calls = [(p.seqs, len(p.versions)) for p in puts]
        if type(backend).supports_write:
            written = backend.write(WriteRequest(ops=[UpsertOp(record=record("d", 1.0)), DeleteOp(id="c")]))
            calls.append((written.seqs, 2))
        calls.append((backend.delete(backend.delete_request(["a", "zz"])).seqs, 1))
        if all(seqs == [] for seqs, _ in calls):
            return
        assert [len(seqs) for seqs, _ in calls] == [n for _, n in calls]
        flat = [s for seqs, _ in calls for s in seqs]
        assert flat == sorted(set(flat))
        assert [p.seqs for p in puts] == [p.versions for p in puts]

    def test_put_returns_the_seqs_of_its_events(self, backend: MemoryBackend) -> None:
        """With an event feed, put's seqs are the put events it appended, and each record's
        version is its event's seq."""
        before = self._head(backend)
        if before is None:
            pytest.skip("the backend does not declare an event feed")
        result = put(backend, record("a", 2.0), record("b", 1.0))
        assert [(s, "put") for s in result.seqs] == self._appended(backend, before)
        assert result.versions == result.seqs

    def test_put_with_meta_returns_the_meta_event_first(self, backend: MemoryBackend) -> None:
        """With an event feed, put_with_meta's seqs are its meta event, then one put event per
        record (the versions)."""
        before = self._head(backend)
        if before is None or not type(backend).supports_put_with_meta:
            pytest.skip("the backend does not declare an event feed and put_with_meta")
        result = backend.put_with_meta(PutRequest(records=[record("a", 1.0)]), MetaSetRequest(key="k", value=1))
        assert list(zip(result.seqs, ["meta", "put"], strict=True)) == self._appended(backend, before)
        assert result.versions == result.seqs[1:]

    def test_put_batch_returns_the_seqs_of_its_events(self, backend: MemoryBackend) -> None:
        """With an event feed, put_batch's seqs are the events it appended (with a metadata value,
        its meta event first)."""
        before = self._head(backend)
        if before is None:
            pytest.skip("the backend does not declare an event feed")
        result = backend.put_batch(_batch(["a", "b", "c"]))
        assert [(s, "put") for s in result.seqs] == self._appended(backend, before)
        if type(backend).supports_put_with_meta:
            middle = self._head(backend)
            assert middle is not None
            with_meta = backend.put_batch(_batch(["d"]), MetaSetRequest(key="k", value=1))
            assert list(zip(with_meta.seqs, ["meta", "put"], strict=True)) == self._appended(backend, middle)

    def test_write_returns_the_seqs_of_its_events(self, backend: MemoryBackend) -> None:
        """With an event feed, a write's seqs are the events it appended: one per record written or
        deleted, in op order, then its op event."""
        before = self._head(backend)
        if before is None or not type(backend).supports_write:
            pytest.skip("the backend does not declare an event feed and write")
        put(backend, record("p", 1.0), record("d", 2.0))
        middle = self._head(backend)
        assert middle is not None
        result = backend.write(
            WriteRequest(
                ops=[DeleteOp(id="d"), UpsertOp(record=record("u", 3.0)), PatchOp(id="p", metadata={"k": 1})],
                op_id="op-1",
            )
        )
        kinds = ["delete", "put", "put", "op"]
        assert list(zip(result.seqs, kinds, strict=True)) == self._appended(backend, middle)
        assert [result.versions["u"], result.versions["p"]] == result.seqs[1:3]

    def test_an_unchanged_write_returns_no_seqs(self, backend: MemoryBackend) -> None:
        """With an event feed, a write whose ops change nothing (and no op id) appends no event
        and returns no seqs."""
        before = self._head(backend)
        if before is None or not type(backend).supports_write:
            pytest.skip("the backend does not declare an event feed and write")
        put(backend, record("a", 1.0))
        head = self._head(backend)
        unchanged = backend.write(WriteRequest(ops=[UpsertOp(record=record("a", 1.0))]))
        assert (unchanged.unchanged, unchanged.seqs) == (["a"], [])
        assert self._head(backend) == head

    def test_a_replay_returns_the_first_writes_seqs(self, backend: MemoryBackend) -> None:
        """With an event feed, the replay of an op id (and op_result) carries the versions and
        seqs of the first write, and appends nothing."""
        before = self._head(backend)
        if before is None or not type(backend).supports_write:
            pytest.skip("the backend does not declare an event feed and write")
        put(backend, record("d", 1.0), record("same", 1.0))
        request = WriteRequest(
            ops=[UpsertOp(record=record("b", 1.0)), DeleteOp(id="d"), UpsertOp(record=record("same", 1.0))],
            op_id="once",
        )
        first = backend.write(request)
        head = self._head(backend)
        assert head is not None and first.seqs[-1] == head and len(first.seqs) == 3
        replay = backend.write(request)
        recorded = backend.op_result("once")
        assert (replay.replayed, replay.seqs, replay.versions) == (True, first.seqs, first.versions)
        assert recorded is not None and recorded.seqs == first.seqs
        assert self._head(backend) == head

    def test_delete_returns_the_seqs_of_its_events(self, backend: MemoryBackend) -> None:
        """With an event feed, delete's seqs are one delete event per deleted id, in the order of
        ``deleted``; missing ids have none."""
        before = self._head(backend)
        if before is None:
            pytest.skip("the backend does not declare an event feed")
        put(backend, record("a", 1.0), record("b", 2.0))
        middle = self._head(backend)
        assert middle is not None
        result = backend.delete(backend.delete_request(["b", "zz", "a"]))
        assert result.deleted == ["b", "a"]
        assert [(s, "delete") for s in result.seqs] == self._appended(backend, middle)
        feed = event_feed(backend)
        assert feed is not None
        assert [e.id for e in feed.events(after=middle)] == result.deleted

    def test_concurrent_puts_each_return_their_own_seqs(self, backend: MemoryBackend) -> None:
        """Puts from 8 threads at once (which a backend may commit together): each put's versions
        are those get shows for its records, and with an event feed its seqs are the events of
        its records."""
        if not self.supports_threads:
            pytest.skip(f"{type(self).__name__} does not declare supports_threads")
        results: dict[int, list[tuple[list[str], list[int], list[int]]]] = {i: [] for i in range(8)}
        start = threading.Barrier(8)

        def work(i: int) -> None:
            start.wait()
            for j in range(10):
                ids = [f"t{i}-{j}-{k}" for k in range(1 + (i + j) % 3)]
                result = put(backend, *(record(rid, float(j)) for rid in ids))
                results[i].append((ids, result.versions, result.seqs))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        feed = event_feed(backend)
        owner = {} if feed is None else {e.seq: e.id for e in feed.events()}
        for calls in results.values():
            assert len(calls) == 10
            for ids, versions, seqs in calls:
                assert versions == _versions(backend, ids)
                if feed is not None:
                    assert [owner[s] for s in seqs] == ids
