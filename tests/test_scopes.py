"""Scopes and the scoped handle (coniti/scope.py, coniti/scoped.py): every write through a handle
is stamped with its scope, every read honours it, forged scopes and foreign records are refused
with nothing written, and the unscoped engine cannot write into a scope."""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti import (
    Container,
    Note,
    NoteBatch,
    Query,
    RecordNotFound,
    Scope,
    ScopedEngine,
    ScopeError,
    TimeRange,
)
from coniti.errors import ContractError
from coniti.impl.log import LogBackend
from coniti.scope import scope_of

ALICE = Scope(user="alice")
BOB = Scope(user="bob")


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Container[LogBackend]]:
    """A log store where alice and bob each hold note n1 ('tea' / 'coffee') and n2."""
    with Container(memory="log", path=tmp_path / "store") as c:
        a, b = c.scoped(ALICE), c.scoped(BOB)
        a.ingest_many([Note(id="n1", text="alice likes green tea", timestamp=1.0, metadata={"t": 1}),
                       Note(id="n2", text="alice walks the dog", timestamp=2.0)])  # fmt: skip
        b.ingest_many([Note(id="n1", text="bob likes black coffee", timestamp=1.0, metadata={"t": 1}),
                       Note(id="n2", text="bob walks the dog", timestamp=2.0)])  # fmt: skip
        yield c


def texts(records: Any) -> set[str]:
    return {r.note.text for r in records}


# -- the Scope value ------------------------------------------------------------------------------


def test_a_scope_lives_in_the_namespace_in_field_order() -> None:
    """Scope fields become namespace parts in the order app, user, agent, conversation."""
    s = Scope(conversation="c1", user="alice", app="notes")
    assert s.home == ("@scope", "app=notes", "user=alice", "conversation=c1", "@")
    assert scope_of((*s.home, "x")) == (s, ("x",))


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Scope(), "at least one"),
        (lambda: Scope(user=""), "user"),
        (lambda: Scope(agent=" bot"), "agent"),
        (lambda: Scope(user=3), "user"),
        (lambda: Scope(tenant="x"), "tenant"),
        (lambda: Scope.parse("tenant=x"), "tenant"),
        (lambda: Scope.parse("user"), "user"),
        (lambda: Scope.parse("user=a,user=b"), "user"),
    ],
)
def test_a_bad_scope_is_refused_naming_the_field(make: Callable[[], Scope], field: str) -> None:
    """Unknown fields, empty or padded values, no field: one-line ContractError naming it."""
    with pytest.raises(ContractError, match=field) as info:
        make()
    assert "\n" not in str(info.value)


def test_scoped_accepts_the_command_line_form_and_a_mapping() -> None:
    """engine.scoped takes 'user=alice,agent=bot' and {'user': 'alice'} too."""
    with Container() as c:
        assert c.scoped("user=alice,agent=bot").scope == Scope(user="alice", agent="bot")
        assert c.scoped({"user": "alice"}).scope == ALICE


# -- writes are stamped ---------------------------------------------------------------------------


def test_every_write_of_a_handle_lands_under_its_scope(box: Container[LogBackend]) -> None:
    """ingest, upsert and update through a handle write only scope namespaces."""
    a = box.scoped(ALICE)
    a.upsert(Note(id="n3", text="alice upserts", timestamp=3.0), namespace=("work",))
    a.update("n1", metadata_patch={"t": 2})
    puts = [e for e in box.memory.events() if e.kind == "put"]
    assert puts and all(scope_of(e.namespace) is not None for e in puts)
    assert (e.namespace for e in puts if e.id == "n3").__next__() == (*ALICE.home, "work")


# -- reads honour the scope -----------------------------------------------------------------------


def test_get_sees_only_the_handles_record(box: Container[LogBackend]) -> None:
    """get of n1 through alice's handle is alice's note."""
    assert texts(box.scoped(ALICE).get(["n1"]).records) == {"alice likes green tea"}


def test_ask_in_the_home_namespace_sees_only_the_scope(box: Container[LogBackend]) -> None:
    """ask answers from the scope's home only."""
    hits = box.scoped(ALICE).ask(Query(text="likes", k=10)).hits
    assert {h.note.text for h in hits} <= {"alice likes green tea", "alice walks the dog"} and hits


def test_ask_over_the_whole_scope_sees_only_the_scope(box: Container[LogBackend]) -> None:
    """ask(prefix=()) of a handle reads every namespace of its scope, none of another."""
    box.scoped(ALICE).ingest(Note(id="w", text="alice likes work", timestamp=3.0), namespace=("work",))
    hits = box.scoped(ALICE).ask(Query(text="likes", k=10), prefix=()).hits
    assert {h.note.text for h in hits} == {"alice likes green tea", "alice walks the dog", "alice likes work"}


def test_recent_and_filtered_asks_see_only_the_scope(box: Container[LogBackend]) -> None:
    """A recency ask with a metadata filter over the whole scope stays in it."""
    q = Query(time_range=TimeRange(start=0.0), strategy="recent", filter={"t": 1}, k=10)
    assert [h.note.text for h in box.scoped(BOB).ask(q, prefix=()).hits] == ["bob likes black coffee"]


def test_context_sees_only_the_scope(box: Container[LogBackend]) -> None:
    """context renders the scope's notes only."""
    block = box.scoped(ALICE).context("likes", token_budget=500, prefix=())
    assert "alice" in block.text and "bob" not in block.text


def test_scan_and_count_see_only_the_scope(box: Container[LogBackend]) -> None:
    """scan and count of the home namespace are the scope's records."""
    a = box.scoped(ALICE)
    assert texts(a.scan().records) == {"alice likes green tea", "alice walks the dog"}
    assert a.count() == 2 and a.count(filter={"t": 1}) == 1


def test_namespaces_lists_only_the_scope(box: Container[LogBackend]) -> None:
    """namespaces() (ls) lists the scope's namespaces only."""
    assert box.scoped(ALICE).namespaces() == [ALICE.home]


def test_history_sees_only_the_scopes_record(box: Container[LogBackend]) -> None:
    """history of n1 is the scope's n1."""
    events = box.scoped(ALICE).history("n1")
    assert [e.record.note.text for e in events if e.record] == ["alice likes green tea"]


def test_events_and_follow_carry_only_the_scope(box: Container[LogBackend]) -> None:
    """The audit trail of a handle (events, follow) holds only its scope's events."""
    a = box.scoped(ALICE)
    assert {e.namespace for e in a.events()} == {ALICE.home}
    assert len(list(a.events(limit=1))) == 1
    box.scoped(BOB).ingest(Note(id="n9", text="bob again", timestamp=5.0))
    a.ingest(Note(id="n9", text="alice again", timestamp=5.0))
    tail = list(a.follow(after=0, timeout=0.05))
    assert tail and {e.namespace for e in tail} == {ALICE.home}


def test_diff_sees_only_the_scope(box: Container[LogBackend]) -> None:
    """diff over the whole scope names only its namespaces."""
    diffs = box.scoped(ALICE).diff(0, box.memory.head)
    assert [d.namespace for d in diffs] == [ALICE.home] and diffs[0].added == ["n1", "n2"]


def test_a_past_handle_sees_only_the_scope(box: Container[LogBackend]) -> None:
    """at(seq): the same scope as of that point; bob's later note stays invisible too."""
    seq = box.memory.head
    box.scoped(ALICE).update("n1", text="alice now likes mate")
    past = box.scoped(ALICE).at(seq)
    try:
        assert texts(past.get(["n1"]).records) == {"alice likes green tea"}
        assert {h.note.text for h in past.ask(Query(text="likes", k=10), prefix=()).hits} <= {
            "alice likes green tea", "alice walks the dog"}  # fmt: skip
        with pytest.raises(Exception, match="read-only"):
            past.ingest("no")
    finally:
        past.close()


def test_dump_and_snapshot_hold_only_the_scope(box: Container[LogBackend]) -> None:
    """A dump (export) and a snapshot of the handle hold the scope's records only."""
    a = box.scoped(ALICE)
    out = io.StringIO()
    assert a.dump(out) == 2 and "bob" not in out.getvalue()
    assert texts(a.snapshot().records) == {"alice likes green tea", "alice walks the dog"}


def test_feedback_is_per_scope(box: Container[LogBackend]) -> None:
    """improve through alice's handle moves alice's n1, not bob's."""
    box.scoped(ALICE).improve("n1", 1.0, reason="good")
    assert box.scoped(ALICE).feedback() == {"n1": 1.0} and box.scoped(BOB).feedback() == {}


def test_a_wider_scope_sees_the_narrower_ones_under_it(box: Container[LogBackend]) -> None:
    """Scope(user=alice) reads Scope(user=alice, conversation=c1); the converse does not hold."""
    c1 = box.scoped(Scope(user="alice", conversation="c1"))
    c1.ingest(Note(id="t1", text="alice said hello in c1", timestamp=4.0))
    assert "alice said hello in c1" in {h.note.text for h in box.scoped(ALICE).ask("hello", prefix=()).hits}
    assert {h.note.text for h in c1.ask(Query(text="likes", k=10), prefix=()).hits} == {"alice said hello in c1"}
    assert texts(box.scoped(ALICE).get(["t1"], namespace=c1.home).records) == {"alice said hello in c1"}


# -- forged scopes and foreign records are refused, nothing written ------------------------------


def _bob_batch() -> NoteBatch:
    return NoteBatch(ids=["x"], texts=["x"], timestamps=[1.0])


FORGED_NAMESPACE: dict[str, Callable[[ScopedEngine], Any]] = {
    "ingest": lambda a: a.ingest(Note(id="x", text="x", timestamp=1.0), namespace=BOB.home),
    "ingest_many": lambda a: a.ingest_many(["x", "y"], namespace=(*BOB.home, "deep")),
    "batch": lambda a: a.ingest_many(_bob_batch(), namespace=BOB.home),
    "upsert": lambda a: a.upsert(Note(id="n1", text="x", timestamp=1.0), namespace=BOB.home),
    "expire": lambda a: a.upsert(
        Note(id="n1", text="x", timestamp=1.0), namespace=BOB.home, expires_at=time.time() + 1),
    "update": lambda a: a.update("n1", text="x", namespace=BOB.home),
    "patch": lambda a: a.update("n1", metadata_patch={"t": 9}, namespace=BOB.home),
    "remove": lambda a: a.remove(["n1"], namespace=BOB.home),
    "improve": lambda a: a.improve("n1", 1.0, namespace=BOB.home),
    "erase": lambda a: a.erase(["n1"], namespace=BOB.home, reason="gdpr"),
    "restore": lambda a: a.restore(a.snapshot(), namespace=BOB.home),
    "restore-foreign-snapshot": lambda a: a.restore(a.snapshot().model_copy(update={"namespace": BOB.home})),
    "malformed-scope": lambda a: a.ingest("x", namespace=("@scope", "user=alice", "agent")),
}


@pytest.mark.parametrize("call", FORGED_NAMESPACE.values(), ids=FORGED_NAMESPACE.keys())
def test_a_write_into_another_scope_is_refused_and_writes_nothing(
    box: Container[LogBackend], call: Callable[[ScopedEngine], Any]
) -> None:
    """Every mutating path refuses a namespace of another scope: ScopeError, no event."""
    head = box.memory.head
    with pytest.raises(ScopeError, match="outside this handle's scope user=alice") as info:
        call(box.scoped(ALICE))
    assert "\n" not in str(info.value)
    assert box.memory.head == head


def test_the_refusal_names_the_record(box: Container[LogBackend]) -> None:
    """A refused mutation by id names the record."""
    with pytest.raises(ScopeError, match="record 'n1'"):
        box.scoped(ALICE).remove(["n1"], namespace=BOB.home)


FORGED_READ: dict[str, Callable[[ScopedEngine], Any]] = {
    "get": lambda a: a.get(["n1"], namespace=BOB.home),
    "ask": lambda a: a.ask("likes", namespace=BOB.home),
    "ask-prefix": lambda a: a.ask("likes", prefix=BOB.root),
    "ask-root": lambda a: a.ask("likes", prefix=("@scope",)),
    "context": lambda a: a.context("likes", token_budget=100, prefix=BOB.root),
    "scan": lambda a: a.scan(namespace=BOB.home),
    "count": lambda a: a.count(namespace=BOB.home),
    "ls": lambda a: a.namespaces(BOB.root),
    "history": lambda a: a.history("n1", BOB.home),
    "events": lambda a: list(a.events(namespace=BOB.home)),
    "diff": lambda a: a.diff(0, 1, namespace=BOB.home),
    "diff-prefix": lambda a: a.diff(0, 1, prefix=BOB.root),
    "dump": lambda a: a.dump(io.StringIO(), BOB.home),
    "snapshot": lambda a: a.snapshot(BOB.home),
    "feedback": lambda a: a.feedback(BOB.home),
}


@pytest.mark.parametrize("call", FORGED_READ.values(), ids=FORGED_READ.keys())
def test_a_read_of_another_scope_is_refused(box: Container[LogBackend], call: Callable[[ScopedEngine], Any]) -> None:
    """Every read path refuses a namespace or prefix of another scope."""
    with pytest.raises(ScopeError, match="outside this handle's scope"):
        call(box.scoped(ALICE))


FORGED_METADATA: dict[str, Callable[[ScopedEngine], Any]] = {
    "ingest": lambda a: a.ingest(Note(id="x", text="x", timestamp=1.0, metadata={"scope": {"user": "bob"}})),
    "batch": lambda a: a.ingest_many(["ok", Note(id="x", text="x", timestamp=1.0, metadata={"scope": "bob"})]),
    "upsert": lambda a: a.upsert(Note(id="n1", text="x", timestamp=1.0, metadata={"scope": "bob"})),
    "update": lambda a: a.update("n1", metadata={"scope": "bob"}),
    "patch": lambda a: a.update("n1", metadata_patch={"scope": {"user": "bob"}}),
    "restore": lambda a: a.restore(a.snapshot().model_copy(update={"records": [
        r.model_copy(update={"note": r.note.model_copy(update={"metadata": {"scope": "bob"}, "id": "z"})})
        for r in a.snapshot().records]})),  # fmt: skip
}


@pytest.mark.parametrize("call", FORGED_METADATA.values(), ids=FORGED_METADATA.keys())
def test_forged_scope_in_metadata_is_refused_and_writes_nothing(
    box: Container[LogBackend], call: Callable[[ScopedEngine], Any]
) -> None:
    """The reserved metadata key 'scope' is refused on every write path; no event."""
    head = box.memory.head
    with pytest.raises(ScopeError, match="'scope' is reserved"):
        call(box.scoped(ALICE))
    assert box.memory.head == head


FORGED_FILTER: dict[str, Callable[[ScopedEngine], Any]] = {
    "ask": lambda a: a.ask(Query(text="likes", filter={"scope.user": "bob"})),
    "ask-or": lambda a: a.ask(Query(text="likes", filter={"$or": [{"t": 1}, {"scope": {"user": "bob"}}]})),
    "context": lambda a: a.context(Query(text="likes", filter={"$not": {"scope": "x"}}), token_budget=50),
    "scan": lambda a: a.scan(filter={"scope": "bob"}),
    "count": lambda a: a.count(filter={"$and": [{"scope.user": "bob"}]}),
}


@pytest.mark.parametrize("call", FORGED_FILTER.values(), ids=FORGED_FILTER.keys())
def test_forged_scope_in_a_filter_is_refused(box: Container[LogBackend], call: Callable[[ScopedEngine], Any]) -> None:
    """A filter on the reserved path 'scope' is refused, also inside $and/$or/$not."""
    with pytest.raises(ScopeError, match="reserved"):
        call(box.scoped(ALICE))


def test_ids_of_another_scope_are_not_reached(box: Container[LogBackend]) -> None:
    """Mutations by id through alice's handle never reach bob's record: an id only bob holds is
    missing or not found for alice, and bob's record is intact."""
    box.scoped(BOB).ingest(Note(id="b3", text="bob's secret", timestamp=3.0))
    a = box.scoped(ALICE)
    assert a.remove(["b3"]).missing == ["b3"]
    with pytest.raises(RecordNotFound):
        a.update("b3", text="hijack")
    with pytest.raises(RecordNotFound):
        a.improve("b3", 1.0)
    assert a.erase(["b3"], reason="gdpr").missing == ["b3"]
    assert a.get(["b3"]).missing == ["b3"]
    assert texts(box.scoped(BOB).get(["b3"]).records) == {"bob's secret"}


# -- the unscoped engine cannot forge a scope ---------------------------------------------------

UNSCOPED: dict[str, Callable[[Container[LogBackend]], Any]] = {
    "ingest": lambda c: c.engine.ingest("planted", namespace=ALICE.home),
    "ingest_many": lambda c: c.engine.ingest_many(["planted"], namespace=(*ALICE.home, "x")),
    "upsert": lambda c: c.engine.upsert(Note(id="n1", text="planted", timestamp=1.0), namespace=ALICE.home),
    "update": lambda c: c.engine.update("n1", text="planted", namespace=ALICE.home),
    "remove": lambda c: c.engine.remove(["n1"], namespace=ALICE.home),
    "improve": lambda c: c.engine.improve("n1", 5.0, namespace=ALICE.home),
    "restore": lambda c: c.engine.restore(c.engine.snapshot(ALICE.home), namespace=(*ALICE.home, "copy")),
}


@pytest.mark.parametrize("call", UNSCOPED.values(), ids=UNSCOPED.keys())
def test_the_unscoped_engine_cannot_write_into_a_scope(
    box: Container[LogBackend], call: Callable[[Container[LogBackend]], Any]
) -> None:
    """Every engine write path refuses a scope's namespace outside a handle; nothing written."""
    head = box.memory.head
    with pytest.raises(ScopeError, match="is a scope's"):
        call(box)
    assert box.memory.head == head
    assert texts(box.scoped(ALICE).get(["n1"]).records) == {"alice likes green tea"}


def test_a_handle_cannot_lend_its_scope_to_another(box: Container[LogBackend]) -> None:
    """A write of bob's handle inside alice's call context is still checked against bob's scope."""
    a, b = box.scoped(ALICE), box.scoped(BOB)
    with pytest.raises(ScopeError):
        b.ingest("x", namespace=a.home)


def test_the_unscoped_engine_reads_every_scope(box: Container[LogBackend]) -> None:
    """The administrator's engine sees all scopes (the trust model)."""
    hits = box.engine.ask(Query(text="likes", k=10), prefix=()).hits
    assert {h.note.text for h in hits} >= {"alice likes green tea", "bob likes black coffee"}


def test_scopes_work_in_memory_too() -> None:
    """Over InMemoryBackend the handle isolates the same way (no audit trail calls)."""
    with Container() as c:
        c.scoped(ALICE).ingest(Note(id="n1", text="alice tea", timestamp=1.0))
        c.scoped(BOB).ingest(Note(id="n1", text="bob coffee", timestamp=1.0))
        assert texts(c.scoped(ALICE).get(["n1"]).records) == {"alice tea"}
        assert [h.note.text for h in c.scoped(BOB).ask("tea coffee", prefix=()).hits] == ["bob coffee"]


# -- a property: whatever the handles write, each reads exactly its own --------------------------

SCOPES = [Scope(user="alice"), Scope(user="bob"), Scope(user="alice", conversation="c1"), Scope(app="x", user="alice")]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["n1", "n2", "n3"]), st.booleans()), max_size=12))
def test_every_handle_reads_exactly_what_its_scope_holds(ops: list[tuple[int, str, bool]]) -> None:
    """Random upserts and removes through four handles (two nested): each handle's get, scan,
    count and ask(prefix=()) equal a model of the records under its scope."""
    model: dict[tuple[tuple[str, ...], str], str] = {}
    with Container() as c:
        handles = [c.scoped(s) for s in SCOPES]
        for n, (who, id_, put) in enumerate(ops):
            h = handles[who]
            if put:
                text = f"note {n} by {SCOPES[who]}"
                h.upsert(Note(id=id_, text=text, timestamp=float(n)))
                model[(h.home, id_)] = text
            else:
                h.remove([id_])
                model.pop((h.home, id_), None)
        for scope, h in zip(SCOPES, handles, strict=True):
            own = {i: t for (home, i), t in model.items() if home == scope.home}
            seen = {t for (home, _), t in model.items() if scope.holds(home)}
            assert {r.note.id: r.note.text for r in h.get(["n1", "n2", "n3"]).records} == own
            assert {r.note.text for r in h.scan().records} == set(own.values()) and h.count() == len(own)
            hits = h.ask(Query(text="note", k=50), prefix=()).hits
            assert {x.note.text for x in hits} <= seen
            assert {x.note.text for x in h.ask(Query(time_range=TimeRange(start=-1.0), k=50), prefix=()).hits} == seen


def test_the_async_twins_keep_the_scope(box: Container[LogBackend]) -> None:
    """aingest, aask and aget of a handle write and read its scope only; a forged namespace is
    refused the same way."""
    import asyncio

    async def run() -> tuple[set[str], set[str]]:
        a = box.scoped(ALICE)
        await a.aingest(Note(id="n7", text="alice async tea", timestamp=7.0))
        got = await a.aget(["n7", "n1"])
        hits = (await a.aask(Query(text="tea", k=10), prefix=())).hits
        with pytest.raises(ScopeError):
            await a.aingest("x", namespace=BOB.home)
        return texts(got.records), {h.note.text for h in hits}

    got, hits = asyncio.run(run())
    assert got == {"alice async tea", "alice likes green tea"} and all(t.startswith("alice") for t in hits)
    assert box.scoped(BOB).get(["n7"]).missing == ["n7"]
