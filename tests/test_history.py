"""The audit trail (events()) and a record's history (history()) on LogBackend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coniti.errors import ContractError
from coniti.events import Event
from coniti.impl.log import LogBackend
from coniti.memory import ClearRequest, DeleteRequest, MetaSetRequest
from coniti.testing.helpers import exact, put, record

LONG_ID = "h" * 600


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LogBackend]:
    backend = LogBackend(tmp_path / "store", actor="svc")
    put(backend, record("a", 1.0, metadata={"v": 1}), record("b", 2.0))  # 1, 2
    backend.set_meta(MetaSetRequest(key="k", value={"x": [1, 2]}))  # 3
    with backend.audit(actor="alice", reason="typo"):
        backend.delete(DeleteRequest(ids=["a"]))  # 4
        put(backend, record("a", 1.5, text="fixed"))  # 5
    put(backend, record("o", 0.0, namespace=("other",)))  # 6
    backend.clear(ClearRequest())  # 7
    put(backend, record("a", 9.0, text="third"))  # 8
    yield backend
    backend.close()


def test_events_are_every_change_in_order(store: LogBackend) -> None:
    """events() yields one Event per change, seq 1..head, with kind, namespace, id and key."""
    got = [(e.seq, e.kind, e.namespace, e.id, e.key) for e in store.events()]
    assert got == [
        (1, "put", (), "a", None),
        (2, "put", (), "b", None),
        (3, "meta", (), None, "k"),
        (4, "delete", (), "a", None),
        (5, "put", (), "a", None),
        (6, "put", ("other",), "o", None),
        (7, "clear", (), None, None),
        (8, "put", (), "a", None),
    ]


def test_events_carry_the_record_and_the_meta_value(store: LogBackend) -> None:
    """A put event holds the record exactly as written; a meta event its key and value."""
    events = list(store.events())
    assert exact(events[0].record) == exact(record("a", 1.0, metadata={"v": 1}))  # type: ignore[arg-type]
    assert events[0].timestamp == 1.0 and not events[0].erased
    assert events[2].value == {"x": [1, 2]} and events[2].record is None
    assert events[3].record is None and events[3].value is None


def test_events_carry_actor_reason_and_a_hash_chain(store: LogBackend) -> None:
    """Each event names its actor and reason; prev of each is the hash of the one before, the
    first's is zeros and the last's hash is the head hash."""
    events = list(store.events())
    assert [(e.actor, e.reason) for e in events[2:6]] == [
        ("svc", None), ("alice", "typo"), ("alice", "typo"), ("svc", None)
    ]
    assert events[0].prev == "0" * 64
    assert all(later.prev == earlier.hash for earlier, later in zip(events, events[1:], strict=False))
    assert events[-1].hash == store.head_hash


def test_recorded_times_never_decrease(store: LogBackend) -> None:
    """Events' recorded times `at` are non-decreasing along the log."""
    times = [e.at for e in store.events()]
    assert times == sorted(times)


@pytest.mark.parametrize(
    ("after", "until", "limit", "expected"),
    [
        (0, None, None, [1, 2, 3, 4, 5, 6, 7, 8]),
        (3, None, None, [4, 5, 6, 7, 8]),
        (3, 5, None, [4, 5]),
        (0, 0, None, []),
        (2, None, 2, [3, 4]),
        (8, None, None, []),
        (50, None, None, []),
        (6, 100, None, [7, 8]),
    ],
)
def test_events_range_is_after_exclusive_until_inclusive(
    store: LogBackend, after: int, until: int | None, limit: int | None, expected: list[int]
) -> None:
    """events(after, until=..., limit=...) gives after < seq <= until, at most limit events."""
    assert [e.seq for e in store.events(after, until=until, limit=limit)] == expected


def test_events_of_one_namespace(store: LogBackend) -> None:
    """namespace= keeps only that namespace's events; () is the root namespace, not 'all'."""
    assert [e.seq for e in store.events(namespace=("other",))] == [6]
    assert [e.seq for e in store.events(namespace=())] == [1, 2, 3, 4, 5, 7, 8]
    assert [e.seq for e in store.events(namespace=[], limit=2, after=3)] == [4, 5]
    assert list(store.events(namespace=("never",))) == []


def test_events_are_read_in_batches_across_many_events(tmp_path: Path) -> None:
    """More events than one read batch come back complete and in order, also with a namespace filter."""
    with LogBackend(tmp_path / "s") as backend:
        put(backend, *[record(f"r{i}", float(i), namespace=("n", str(i % 3))) for i in range(700)])
        assert [e.seq for e in backend.events()] == list(range(1, 701))
        assert [e.id for e in backend.events(namespace=("n", "1"))] == [f"r{i}" for i in range(1, 700, 3)]
        assert len(list(backend.events(limit=300))) == 300


def test_events_see_writes_made_while_iterating(tmp_path: Path) -> None:
    """events() without until reads up to the head as each batch begins: a later write is seen."""
    with LogBackend(tmp_path / "s") as backend:
        put(backend, *[record(f"r{i}", 0.0) for i in range(300)])
        it = backend.events()
        first = next(it)
        put(backend, record("late", 0.0))
        assert first.seq == 1 and [e.id for e in it][-1] == "late"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"after": -1}, "after"),
        ({"after": 1.5}, "after"),
        ({"after": True}, "after"),
        ({"until": -2}, "until"),
        ({"limit": 0}, "limit"),
        ({"limit": "3"}, "limit"),
        ({"namespace": "abc"}, "namespace"),
        ({"namespace": ("",)}, "namespace"),
    ],
)
def test_events_bad_arguments_are_refused(store: LogBackend, kwargs: dict[str, object], field: str) -> None:
    """A bad after/until/limit/namespace raises ContractError naming it, before anything is read."""
    after = kwargs.pop("after", 0)
    with pytest.raises(ContractError, match=field):
        store.events(after, **kwargs)  # type: ignore[arg-type]


def test_event_model_is_frozen_and_round_trips(store: LogBackend) -> None:
    """Event is a frozen contract; to_json/from_json give an equal event, records bit for bit."""
    for event in store.events():
        again = Event.from_json(event.to_json())
        assert again.model_dump(exclude={"record"}) == event.model_dump(exclude={"record"})
        if event.record is not None:
            assert again.record is not None and exact(again.record) == exact(event.record)
    with pytest.raises(Exception, match="frozen"):
        event.seq = 99  # type: ignore[misc]


def test_mutating_a_returned_event_changes_nothing_stored(store: LogBackend) -> None:
    """Records inside events are fresh copies: mutating one leaves the log as it was."""
    first = next(store.events())
    assert first.record is not None
    first.record.vector[:] = 0
    first.record.note.metadata["v"] = 99
    again = next(store.events())
    assert again.record is not None and exact(again.record) == exact(record("a", 1.0, metadata={"v": 1}))


# -- history ---------------------------------------------------------------------------------


def test_history_lists_every_event_that_touched_a_record(store: LogBackend) -> None:
    """history(id) gives puts, the delete, the re-put and the clear that removed it, then the
    latest put, oldest first."""
    hist = store.history("a")
    assert [(e.seq, e.kind) for e in hist] == [
        (1, "put"), (4, "delete"), (5, "put"), (7, "clear"), (8, "put")
    ]
    assert [e.record.note.text for e in hist if e.record is not None] == ["text of a", "fixed", "third"]
    assert hist[1].actor == "alice" and hist[1].reason == "typo"


def test_history_is_per_namespace(store: LogBackend) -> None:
    """The same id in another namespace has its own history; unknown ids and namespaces have none."""
    assert [e.seq for e in store.history("o", ("other",))] == [6]
    assert store.history("o") == []
    assert store.history("a", ("other",)) == []
    assert store.history("never") == [] and store.history("a", ("nope",)) == []


def test_history_of_a_record_still_live(store: LogBackend) -> None:
    """A record removed by a clear has its put and the clear; one put and still live: one event."""
    assert [e.seq for e in store.history("b")] == [2, 7]
    put(store, record("fresh", 1.0))
    assert [(e.kind, e.id) for e in store.history("fresh")] == [("put", "fresh")]


def test_history_of_a_long_id(tmp_path: Path) -> None:
    """An id longer than an LMDB key has its history like any other, not mixed with a neighbour's."""
    with LogBackend(tmp_path / "s") as backend:
        put(backend, record(LONG_ID, 1.0), record(LONG_ID + "x", 1.0))
        backend.delete(DeleteRequest(ids=[LONG_ID]))
        assert [(e.seq, e.kind) for e in backend.history(LONG_ID)] == [(1, "put"), (3, "delete")]
        assert [e.seq for e in backend.history(LONG_ID + "x")] == [2]


@pytest.mark.parametrize("bad", ["", 3, None])
def test_history_bad_id_is_refused(store: LogBackend, bad: object) -> None:
    """history() of an empty or non-string id raises ContractError naming the id."""
    with pytest.raises(ContractError, match="id"):
        store.history(bad)  # type: ignore[arg-type]


def test_history_reads_views_consistently(store: LogBackend) -> None:
    """For each put in a record's history, the view right after it shows that version."""
    for event in store.history("a"):
        view = store.at(event.seq)
        got = view.get(view.get_request(["a"])).records
        if event.kind == "put":
            assert event.record is not None and [exact(r) for r in got] == [exact(event.record)]
        else:
            assert got == []
