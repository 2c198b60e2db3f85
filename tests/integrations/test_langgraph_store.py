"""ConitiStore's own contracts: writes and their audit trail, vectors, search, namespaces, TTL
leases, time travel, async. LangGraph's behaviour itself is checked by LangGraph's tests
(test_langgraph_store_suite.py)."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langgraph.store.base import InvalidNamespaceError, PutOp, SearchOp

from coniti.embedding import LocalHashEmbedder
from coniti.errors import ContractError, NotSupported, ReadOnlyError
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.integrations.langgraph import ConitiStore
from coniti.memory import GetRequest, MemoryRecord, WriteRequest, WriteResult


class Clock:
    """A settable clock (epoch seconds) shared by a store and its backend."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class CountingBackend(InMemoryBackend):
    """An InMemoryBackend that records every write request it is given."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self.writes: list[WriteRequest] = []

    def write(self, request: WriteRequest) -> WriteResult:
        self.writes.append(request)
        return super().write(request)


def embed(texts: list[str]) -> list[list[float]]:
    """A deterministic 3-d embedding: counts of the letters a, b and c."""
    return [[float(t.count("a")), float(t.count("b")), float(t.count("c"))] for t in texts]


def record(store: ConitiStore, namespace: tuple[str, ...], key: str) -> MemoryRecord:
    [found] = store.memory.get(GetRequest(ids=[key], namespace=namespace)).records
    return found


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def log(tmp_path: Path) -> LogBackend:
    backend = LogBackend(tmp_path / "store")
    yield backend
    backend.close()


# -- writes and their audit trail ------------------------------------------------------------------


def test_put_is_one_event_with_the_audit_stamp_of_its_block(log: LogBackend) -> None:
    """A put appends exactly one put event, stamped with the actor and reason of the audit block."""
    store = ConitiStore(log)
    with log.audit("ana", "remember the budget"):
        store.put(("users", "ana"), "budget", {"amount": 40})
    [event] = list(log.events())
    assert (event.kind, event.id, event.actor, event.reason) == ("put", "budget", "ana", "remember the budget")
    assert event.namespace == ("users", "ana")


def test_the_puts_of_one_namespace_are_one_write(clock: Clock) -> None:
    """A batch's puts become one WriteRequest per namespace, in order of first appearance."""
    backend = CountingBackend(clock)
    store = ConitiStore(backend, clock=clock)
    store.batch(
        [
            PutOp(("a",), "1", {"v": 1}),
            PutOp(("b",), "2", {"v": 2}),
            PutOp(("a",), "3", None),
            PutOp(("a",), "4", {"v": 4}),
        ]
    )
    assert [(w.namespace, [op.kind for op in w.ops]) for w in backend.writes] == [
        (("a",), ["upsert", "delete", "upsert"]),
        (("b",), ["upsert"]),
    ]


def test_a_bad_op_fails_the_whole_batch_and_writes_nothing(clock: Clock) -> None:
    """A value that is not JSON fails the batch before anything is written, naming the key."""
    backend = CountingBackend(clock)
    store = ConitiStore(backend, clock=clock)
    with pytest.raises(ContractError, match="'bad'"):
        store.batch([PutOp(("a",), "good", {"v": 1}), PutOp(("a",), "bad", {"v": object()})])
    assert backend.writes == []
    assert store.get(("a",), "good") is None


def test_an_update_keeps_created_at_and_moves_updated_at(clock: Clock) -> None:
    """Putting an existing key keeps its created_at; updated_at is the time of the last put."""
    store = ConitiStore(InMemoryBackend(clock=clock), clock=clock)
    store.put(("a",), "k", {"v": 1})
    clock.now += 30
    store.put(("a",), "k", {"v": 2})
    item = store.get(("a",), "k")
    assert item is not None and item.value == {"v": 2}
    assert (item.updated_at - item.created_at).total_seconds() == 30


def test_history_shows_every_version_and_the_delete(log: LogBackend) -> None:
    """history() lists the puts of an item (each replacing the one before) and its delete."""
    store = ConitiStore(log)
    store.put(("a",), "k", {"v": 1})
    store.put(("a",), "k", {"v": 2})
    store.delete(("a",), "k")
    events = store.history(("a",), "k")
    assert [e.kind for e in events] == ["put", "put", "delete"]
    assert events[1].replaces == events[0].seq
    assert [e.record.note.metadata["value"] for e in events[:2] if e.record] == [{"v": 1}, {"v": 2}]


def test_the_last_put_of_a_key_in_a_batch_wins(clock: Clock) -> None:
    """Two puts of one key in a batch write the last value only."""
    store = ConitiStore(InMemoryBackend(clock=clock), clock=clock)
    store.batch([PutOp(("a",), "k", {"v": 1}), PutOp(("a",), "k", {"v": 2})])
    item = store.get(("a",), "k")
    assert item is not None and item.value == {"v": 2}


def test_reads_of_a_batch_see_the_state_before_its_puts(clock: Clock) -> None:
    """A search in the same batch as a put does not see that put."""
    store = ConitiStore(InMemoryBackend(clock=clock), clock=clock)
    found, _ = store.batch([SearchOp(("a",)), PutOp(("a",), "k", {"v": 1})])
    assert found == []
    assert store.get(("a",), "k") is not None


def test_an_empty_namespace_or_key_is_refused(clock: Clock) -> None:
    """A put needs a namespace and a non-empty key."""
    store = ConitiStore(InMemoryBackend(clock=clock), clock=clock)
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp((), "k", {"v": 1})])
    with pytest.raises(ContractError, match="key"):
        store.batch([PutOp(("a",), "", {"v": 1})])


# -- vectors ------------------------------------------------------------------------------------------


def test_an_item_not_indexed_is_stored_without_a_vector(clock: Clock) -> None:
    """index=False (and a store without an index) store the item with no vector, no blob, no text."""
    indexed = ConitiStore(InMemoryBackend(clock=clock), index={"dims": 3, "embed": embed}, clock=clock)
    indexed.put(("a",), "k", {"text": "abc"}, index=False)
    plain = ConitiStore(InMemoryBackend(clock=clock), clock=clock)
    plain.put(("a",), "k", {"text": "abc"})
    for store in (indexed, plain):
        r = record(store, ("a",), "k")
        assert (r.vector, r.blob, r.note.text) == (None, None, "")


def test_each_indexed_text_is_one_vector_and_the_best_one_scores(clock: Clock) -> None:
    """An item with two indexed fields holds two vectors (the first as its vector, the other in its
    blob); a query scores it by the one it matches best."""
    store = ConitiStore(InMemoryBackend(clock=clock), index={"dims": 3, "embed": embed, "fields": ["x", "y"]}, clock=clock)
    store.put(("a",), "k", {"x": "aaa", "y": "bbb"})
    r = record(store, ("a",), "k")
    assert r.vector is not None and r.blob is not None
    assert np.frombuffer(r.blob, dtype=np.float32).tolist() == [0.0, 3.0, 0.0]
    assert r.note.text == "aaa\nbbb"
    [hit] = store.search(("a",), query="b")
    assert hit.score == pytest.approx(1.0)


def test_a_coniti_embedder_in_the_index_config(clock: Clock) -> None:
    """A coniti Embedder as `embed` sets dims from the embedder and stamps records with its spec id."""
    embedder = LocalHashEmbedder()
    store = ConitiStore(InMemoryBackend(clock=clock), index={"embed": embedder, "fields": ["text"]}, clock=clock)
    store.put(("a",), "fruit", {"text": "apples and pears"})
    store.put(("a",), "sky", {"text": "the sky is blue"})
    assert record(store, ("a",), "fruit").embedding_id == embedder.spec_id
    assert [hit.key for hit in store.search(("a",), query="pears")][0] == "fruit"


def test_items_not_indexed_follow_the_scored_ones(clock: Clock) -> None:
    """A query search lists the items without vectors after the scored ones, with score None."""
    store = ConitiStore(InMemoryBackend(clock=clock), index={"dims": 3, "embed": embed}, clock=clock)
    store.put(("a",), "plain", {"t": "a"}, index=False)
    clock.now += 1
    store.put(("a",), "vec", {"t": "a"})
    assert [(h.key, h.score is None) for h in store.search(("a",), query="a")] == [("vec", False), ("plain", True)]


def test_an_embedding_of_the_wrong_width_is_refused(clock: Clock) -> None:
    """Vectors that do not have `dims` columns fail the put, and nothing is written."""
    store = ConitiStore(InMemoryBackend(clock=clock), index={"dims": 4, "embed": embed}, clock=clock)
    with pytest.raises(ContractError, match="dims=4"):
        store.put(("a",), "k", {"t": "a"})
    assert store.get(("a",), "k") is None


# -- search and namespaces ---------------------------------------------------------------------------


def test_a_search_lists_the_newest_update_first(clock: Clock) -> None:
    """Without a query, results are in updated_at order, newest first."""
    store = ConitiStore(InMemoryBackend(clock=clock), clock=clock)
    for key in ("x", "y", "z"):
        clock.now += 1
        store.put(("a", key), key, {})
    clock.now += 1
    store.put(("a", "x"), "x", {"again": True})
    assert [h.key for h in store.search(("a",))] == ["x", "z", "y"]


def test_filters_walk_dotted_keys_with_operators(clock: Clock) -> None:
    """A filter key with dots reads a nested value; operators compare it."""
    store = ConitiStore(InMemoryBackend(clock=clock), clock=clock)
    store.put(("a",), "old", {"user": {"age": 40}})
    store.put(("a",), "young", {"user": {"age": 20}})
    assert [h.key for h in store.search(("a",), filter={"user.age": {"$gte": 30}})] == ["old"]
    assert [h.key for h in store.search(("a",), filter={"user": {"age": 20}})] == ["young"]


@pytest.mark.parametrize(
    ("condition", "keys"),
    [
        ({"$lt": math.inf}, ["n1", "n2"]),
        ({"$gt": -math.inf}, ["n1", "n2"]),
        ({"$gt": math.inf}, []),
        ({"$eq": math.nan}, []),
        ({"$ne": math.nan}, ["n1", "n2", "s"]),
        ({"$lt": 10**100}, ["n1", "n2"]),
        ({"$gt": -(10**100)}, ["n1", "n2"]),
        ({"$eq": 10**100}, []),
    ],
)
def test_filter_operands_coniti_refuses_keep_their_meaning(
    clock: Clock, condition: dict[str, Any], keys: list[str]
) -> None:
    """NaN, infinities and integers beyond 64 bits in a filter compare as numbers do (no stored
    value equals them) instead of being refused."""
    store = ConitiStore(InMemoryBackend(clock=clock), clock=clock)
    store.put(("a",), "n1", {"p": 1})
    store.put(("a",), "n2", {"p": -5.5})
    store.put(("a",), "s", {"p": "text"})
    assert sorted(h.key for h in store.search(("a",), filter={"p": condition})) == keys


def test_a_malformed_filter_or_page_is_refused(clock: Clock) -> None:
    """An unknown operator, a negative limit or offset fail with an error naming the op."""
    store = ConitiStore(InMemoryBackend(clock=clock), clock=clock)
    with pytest.raises(ContractError, match=r"ops\[0\]"):
        store.search(("a",), filter={"p": {"$near": 1}})
    with pytest.raises(ContractError, match="limit"):
        store.search(("a",), limit=-1)
    with pytest.raises(ContractError, match="offset"):
        store.search(("a",), offset=-2)


def test_list_namespaces_with_wildcards_depth_and_pages(clock: Clock) -> None:
    """Prefix and suffix conditions match whole labels, "*" one label; max_depth cuts and dedupes;
    limit and offset page the sorted listing."""
    store = ConitiStore(InMemoryBackend(clock=clock), clock=clock)
    for ns in [("u", "ana", "notes"), ("u", "bo", "notes"), ("u", "bo", "todo"), ("ux", "ana", "notes")]:
        store.put(ns, "k", {})
    assert store.list_namespaces(prefix=("u", "*", "notes")) == [("u", "ana", "notes"), ("u", "bo", "notes")]
    assert store.list_namespaces(suffix=("todo",)) == [("u", "bo", "todo")]
    assert store.list_namespaces(max_depth=2) == [("u", "ana"), ("u", "bo"), ("ux", "ana")]
    assert store.list_namespaces(limit=2, offset=1) == [("u", "bo", "notes"), ("u", "bo", "todo")]


# -- TTL ------------------------------------------------------------------------------------------------


def test_a_ttl_is_conitis_expiry_hidden_from_every_read(clock: Clock) -> None:
    """A put with a ttl of m minutes writes expires_at = now + 60 m; once passed, the backend itself
    hides the record (not only the store)."""
    backend = InMemoryBackend(clock=clock)
    store = ConitiStore(backend, clock=clock)
    store.put(("a",), "k", {"v": 1}, ttl=2)
    assert record(store, ("a",), "k").expires_at == clock.now + 120
    clock.now += 121
    assert backend.get(GetRequest(ids=["k"], namespace=("a",))).missing == ["k"]
    assert store.get(("a",), "k") is None


def test_a_ttl_whose_expiry_would_pass_year_9999_is_refused(clock: Clock) -> None:
    """A put whose ttl puts now + 2 ttl (the expiry a refresh writes) after year 9999 raises
    ContractError naming the ttl, and nothing is stored."""
    store = ConitiStore(InMemoryBackend(clock=clock), clock=clock)
    with pytest.raises(ContractError, match=r"ops\[0\]\.ttl: .* ends after year 9999 UTC"):
        store.put(("a",), "k", {"v": 1}, ttl=1e15)
    assert store.get(("a",), "k") is None


def test_refreshing_reads_write_at_most_one_event_per_ttl(clock: Clock) -> None:
    """Reads that refresh an item's ttl write nothing while the new deadline fits under the expiry
    in the log; the one that would outlive it patches the expiry to now + 2 ttl, once."""
    backend = CountingBackend(clock)
    store = ConitiStore(backend, ttl={"refresh_on_read": True}, clock=clock)
    store.put(("a",), "k", {"v": 1}, ttl=1)
    for _ in range(10):
        clock.now += 5
        assert store.get(("a",), "k") is not None
    patches = [op for w in backend.writes for op in w.ops if op.kind == "patch"]
    assert len(patches) == 1
    assert record(store, ("a",), "k").expires_at == 1_000_000.0 + 5 + 120


def test_a_lease_hides_the_item_once_it_passes(clock: Clock) -> None:
    """A refreshed item is hidden from the store once its lease (last refresh + ttl) passes, even
    while the expiry in the log is later."""
    store = ConitiStore(InMemoryBackend(clock=clock), ttl={"refresh_on_read": True}, clock=clock)
    store.put(("a",), "k", {"v": 1}, ttl=1)
    clock.now += 30
    store.get(("a",), "k")  # lease until +90; the log's expiry moves to +150
    clock.now += 61
    assert store.get(("a",), "k") is None
    assert store.search(("a",)) == []
    assert record(store, ("a",), "k").expires_at == 1_000_000.0 + 150


def test_reads_refresh_only_when_the_config_says_refresh_on_read(clock: Clock) -> None:
    """Without refresh_on_read in the ttl config a read renews nothing, as in LangGraph's SQL stores."""
    backend = CountingBackend(clock)
    store = ConitiStore(backend, ttl={"default_ttl": 1}, clock=clock)
    store.put(("a",), "k", {"v": 1})
    clock.now += 50
    store.get(("a",), "k", refresh_ttl=True)
    assert len(backend.writes) == 1
    clock.now += 11
    assert store.get(("a",), "k") is None


def test_sweep_ttl_deletes_leased_and_expired_items_stamped_coniti_ttl(log: LogBackend) -> None:
    """sweep_ttl deletes items whose lease passed and those the log's expiry hides, each with a
    delete event by coniti-ttl, reason expired."""
    clock = Clock(time.time())
    store = ConitiStore(log, ttl={"refresh_on_read": True}, clock=clock)
    store.put(("a",), "leased", {"v": 1}, ttl=1)
    store.put(("a",), "expired", {"v": 2}, ttl=1e-6)
    clock.now += 30
    store.get(("a",), "leased")
    clock.now += 61
    assert store.sweep_ttl() == 2
    for key in ("leased", "expired"):
        last = store.history(("a",), key)[-1]
        assert (last.kind, last.actor, last.reason) == ("delete", "coniti-ttl", "expired")


def test_the_background_sweeper_deletes_and_stops() -> None:
    """start_ttl_sweeper runs sweeps on a thread until stop_ttl_sweeper, which reports it stopped."""
    store = ConitiStore(InMemoryBackend())
    store.put(("a",), "k", {"v": 1}, ttl=1e-4)
    done = store.start_ttl_sweeper(sweep_interval_minutes=0.0005)
    assert store.start_ttl_sweeper() is done
    deadline = time.monotonic() + 10
    while store.memory.namespaces() and time.monotonic() < deadline:  # until swept, not only expired
        time.sleep(0.02)
    assert store.memory.namespaces() == []
    assert store.stop_ttl_sweeper(timeout=5)
    assert done.done()


def test_a_bad_ttl_is_refused(clock: Clock) -> None:
    """A negative or non-numeric ttl, or default_ttl, fails with an error naming it."""
    store = ConitiStore(InMemoryBackend(clock=clock), clock=clock)
    with pytest.raises(ContractError, match="ttl"):
        store.batch([PutOp(("a",), "k", {"v": 1}, ttl=-1)])
    with pytest.raises(ContractError, match="default_ttl"):
        ConitiStore(InMemoryBackend(), ttl={"default_ttl": "soon"})  # type: ignore[typeddict-item]


# -- time travel --------------------------------------------------------------------------------------


def test_at_is_a_read_only_store_of_that_point(log: LogBackend) -> None:
    """at(seq) reads the items as they were right after that event; puts on it raise ReadOnlyError."""
    store = ConitiStore(log)
    store.put(("a",), "k", {"v": 1})
    first = log.head
    store.put(("a",), "k", {"v": 2})
    past = store.at(first)
    item = past.get(("a",), "k")
    assert item is not None and item.value == {"v": 1}
    assert [h.value for h in past.search(("a",))] == [{"v": 1}]
    with pytest.raises(ReadOnlyError):
        past.put(("a",), "k", {"v": 3})
    assert store.at(0).get(("a",), "k") is None


def test_at_time_reads_the_last_event_at_or_before_it(log: LogBackend) -> None:
    """at(time=t) shows the state after the last event recorded at or before t."""
    store = ConitiStore(log)
    store.put(("a",), "k", {"v": 1})
    [event] = list(log.events())
    store.put(("a",), "k", {"v": 2})
    item = store.at(time=event.at).get(("a",), "k")
    assert item is not None and item.value == {"v": 1}


def test_history_and_at_need_a_backend_that_keeps_them(clock: Clock) -> None:
    """On an InMemoryBackend, at() and history() raise NotSupported."""
    store = ConitiStore(InMemoryBackend(clock=clock), clock=clock)
    with pytest.raises(NotSupported):
        store.at(0)
    with pytest.raises(NotSupported):
        store.history(("a",), "k")


# -- async and lifecycle ------------------------------------------------------------------------------


def test_abatch_awaits_an_async_embedding_function(clock: Clock) -> None:
    """With an async embedding function, aput embeds by awaiting it and asearch scores with it."""

    async def aembed(texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(0)
        return embed(texts)

    store = ConitiStore(InMemoryBackend(clock=clock), index={"dims": 3, "embed": aembed}, clock=clock)

    async def scenario() -> list[str]:
        await store.aput(("a",), "as", {"t": "aaa"})
        await store.aput(("a",), "bs", {"t": "bbb"})
        return [h.key for h in await store.asearch(("a",), query="bb")]

    assert asyncio.run(scenario()) == ["bs", "as"]


def test_async_results_equal_sync_results(clock: Clock) -> None:
    """aget, asearch and alist_namespaces return what their sync twins return."""
    store = ConitiStore(InMemoryBackend(clock=clock), clock=clock)
    store.put(("a", "b"), "k", {"v": 1})

    async def scenario() -> tuple[Any, Any, Any]:
        return (
            await store.aget(("a", "b"), "k"),
            await store.asearch(("a",)),
            await store.alist_namespaces(prefix=("a",)),
        )

    assert asyncio.run(scenario()) == (
        store.get(("a", "b"), "k"),
        store.search(("a",)),
        store.list_namespaces(prefix=("a",)),
    )


def test_a_store_from_a_path_opens_and_closes_its_log_backend(tmp_path: Path) -> None:
    """ConitiStore(path) opens a LogBackend there and closes it on close(); the items persist."""
    with ConitiStore(tmp_path / "s") as store:
        assert isinstance(store.memory, LogBackend)
        store.put(("a",), "k", {"v": 1})
    with ConitiStore(tmp_path / "s") as again:
        item = again.get(("a",), "k")
        assert item is not None and item.value == {"v": 1}


def test_a_backend_without_write_is_refused() -> None:
    """A backend that does not declare supports_write cannot hold a store."""

    class NoWrite(InMemoryBackend):
        supports_write = False

    with pytest.raises(NotSupported, match="write"):
        ConitiStore(NoWrite())
