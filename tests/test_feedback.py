"""Feedback, audited: engine.improve records a feedback event (event version 3); its weights are a
projection read as of any point, carried by export/import, removed by erase, kept by rebuild."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import Cli, no_traceback

from coniti import Container, Note, Query
from coniti.engine import ContinuityEngine
from coniti.errors import ContractError, NotSupported, ReadOnlyError, RecordNotFound
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.log.codec import EVENT_VERSION, UPCASTERS
from coniti.memory import FeedbackRequest

NOTES = [
    Note(id="a", text="the cat sat on the mat", timestamp=1.0),
    Note(id="b", text="the cat slept on the rug", timestamp=2.0),
    Note(id="c", text="a dog in the garden", timestamp=3.0),
]


@pytest.fixture
def log_engine(tmp_path: Path) -> Iterator[ContinuityEngine]:
    with Container(memory="log", path=tmp_path / "store") as c:
        c.engine.ingest_many(NOTES)
        yield c.engine


def store_of(engine: ContinuityEngine) -> LogBackend:
    assert isinstance(engine.memory, LogBackend)
    return engine.memory


def test_improve_appends_one_feedback_event(log_engine: ContinuityEngine) -> None:
    """improve writes one event of kind feedback naming the id, the weight and the reason."""
    store = store_of(log_engine)
    head = store.head
    result = log_engine.improve("a", 0.5, reason="user liked it")
    assert store.head == head + 1 == result.seq
    (event,) = list(store.events(after=head))
    assert (event.kind, event.id, event.value, event.reason) == ("feedback", "a", 0.5, "user liked it")


def test_a_records_history_lists_the_feedback_given_to_it(log_engine: ContinuityEngine) -> None:
    """history(id) holds each feedback event of that id, in sequence order between its puts and
    deletes, with weight, actor and reason; another id's feedback is not in it."""
    store = store_of(log_engine)
    with store.audit(actor="alice"):
        given = log_engine.improve("a", 0.5, reason="helpful").seq
    log_engine.improve("b", 2.0)
    log_engine.remove(["a"])
    kinds = [(e.kind, e.seq) for e in store.history("a")]
    assert kinds == [("put", kinds[0][1]), ("feedback", given), ("delete", store.head)]
    (event,) = [e for e in store.history("a") if e.kind == "feedback"]
    assert (event.value, event.actor, event.reason) == (0.5, "alice", "helpful")
    assert all(e.id == "b" for e in store.history("b") if e.kind == "feedback")


def test_feedback_events_are_written_in_the_current_version() -> None:
    """Event version 3 writes feedback; version 2 events are upcast to it."""
    assert EVENT_VERSION == 3 and 2 in UPCASTERS


def test_feedback_carries_the_audit_actor(log_engine: ContinuityEngine) -> None:
    """An improve inside store.audit(actor=...) is stamped with that actor."""
    store = store_of(log_engine)
    with store.audit(actor="alice", reason="review"):
        log_engine.improve("b", 1.0)
    event = list(store.events(after=store.head - 1))[0]
    assert (event.actor, event.reason) == ("alice", "review")


def test_weights_add_up(log_engine: ContinuityEngine) -> None:
    """Each improve adds its weight; the result and feedback() give the sum."""
    log_engine.improve("a", 1.0)
    assert log_engine.improve("a", -0.25).weight == 0.75
    assert log_engine.feedback() == {"a": 0.75}


def test_improve_of_an_unknown_id_raises_and_appends_nothing(log_engine: ContinuityEngine) -> None:
    """A feedback on an id that is not live raises RecordNotFound naming it; the log is unchanged."""
    store = store_of(log_engine)
    head = store.head
    with pytest.raises(RecordNotFound, match="'ghost'"):
        log_engine.improve("ghost", 1.0)
    assert store.head == head


def test_improve_of_a_deleted_id_is_refused(log_engine: ContinuityEngine) -> None:
    """Feedback needs a live record."""
    log_engine.remove(["c"])
    with pytest.raises(RecordNotFound):
        log_engine.improve("c", 1.0)


@pytest.mark.parametrize("weight", [float("nan"), float("inf"), True, "1"])
def test_a_weight_that_is_not_a_finite_number_is_refused(log_engine: ContinuityEngine, weight: object) -> None:
    """The weight must be a finite number; nothing is written."""
    head = store_of(log_engine).head
    with pytest.raises(ContractError, match="weight"):
        log_engine.improve("a", weight)  # type: ignore[arg-type]
    assert store_of(log_engine).head == head


def test_feedback_is_per_namespace(log_engine: ContinuityEngine) -> None:
    """The same id in another namespace has its own weights."""
    log_engine.ingest(Note(id="a", text="other a", timestamp=1.0), namespace=("team",))
    log_engine.improve("a", 2.0, namespace=("team",))
    assert log_engine.feedback() == {} and log_engine.feedback(("team",)) == {"a": 2.0}


def test_weights_as_of_a_point(log_engine: ContinuityEngine) -> None:
    """engine.at(seq) reads the weights as they were right after seq."""
    first = log_engine.improve("a", 1.0).seq
    log_engine.improve("a", 2.0)
    log_engine.improve("b", 1.0)
    assert first is not None
    assert log_engine.at(first - 1).feedback() == {}
    assert log_engine.at(first).feedback() == {"a": 1.0}
    assert log_engine.feedback() == {"a": 3.0, "b": 1.0}


def test_hybrid_ranking_as_of_a_point_uses_the_weights_of_then(log_engine: ContinuityEngine) -> None:
    """A past engine ranks by the feedback it had then, not by later feedback."""
    query = Query(text="cat", strategy="hybrid")
    before = [h.note.id for h in log_engine.ask(query).hits]
    point = store_of(log_engine).head
    log_engine.improve(before[1], 5.0)
    assert log_engine.ask(query).hits[0].note.id == before[1]
    assert [h.note.id for h in log_engine.at(point).ask(query).hits] == before


def test_feedback_survives_reopen(tmp_path: Path) -> None:
    """Weights are on disk: a reopened store reads them."""
    with Container(memory="log", path=tmp_path / "s") as c:
        c.engine.ingest_many(NOTES)
        c.engine.improve("b", 1.5)
    with Container(memory="log", path=tmp_path / "s") as c:
        assert c.engine.feedback() == {"b": 1.5}


def test_export_and_import_carry_feedback(log_engine: ContinuityEngine, tmp_path: Path) -> None:
    """A store imported from an export has the same feedback events and weights, as of every point."""
    log_engine.improve("a", 1.0, reason="r1")
    log_engine.improve("b", -1.0)
    store = store_of(log_engine)
    store.export_log(tmp_path / "log.jsonl")
    with LogBackend.import_log(tmp_path / "log.jsonl", tmp_path / "copy") as copy:
        assert copy.feedback_weights() == store.feedback_weights()
        for seq in range(store.head + 1):
            assert copy.at(seq).feedback_weights() == store.at(seq).feedback_weights()
        assert copy.head_hash == store.head_hash


def test_erase_removes_the_records_feedback_now_and_as_of(log_engine: ContinuityEngine) -> None:
    """Erasing a record drops the payload of its feedback events: its weight is gone from every
    point; other records keep theirs and the store verifies."""
    log_engine.improve("a", 1.0, reason="private")
    point = store_of(log_engine).head
    log_engine.improve("b", 2.0)
    store = store_of(log_engine)
    store.erase(["a"], reason="privacy request")
    assert store.feedback_weights() == {"b": 2.0}
    assert store.at(point).feedback_weights() == {}
    assert store.verify().ok
    erased = [e for e in store.events() if e.kind == "feedback" and e.id == "a"]
    assert erased and all(e.erased and e.value is None for e in erased)


def test_rebuild_refolds_feedback(log_engine: ContinuityEngine) -> None:
    """rebuild() recomputes the fbk projection from the log: weights are unchanged, verify is clean."""
    log_engine.improve("a", 1.0)
    log_engine.improve("c", 0.5)
    store = store_of(log_engine)
    before = {seq: store.at(seq).feedback_weights() for seq in range(store.head + 1)}
    store.rebuild()
    assert {seq: store.at(seq).feedback_weights() for seq in range(store.head + 1)} == before
    assert store.verify().ok


def test_a_view_refuses_feedback(log_engine: ContinuityEngine) -> None:
    """A time-travel view is read-only, feedback included."""
    with pytest.raises(ReadOnlyError):
        store_of(log_engine).at(1).feedback(FeedbackRequest(id="a", weight=1.0))
    with pytest.raises(ReadOnlyError):
        log_engine.at(1).improve("a", 1.0)


def test_in_memory_backend_has_the_same_feedback() -> None:
    """InMemoryBackend records and sums feedback like the log and refuses unknown ids."""
    with Container() as c:
        c.engine.ingest_many(NOTES)
        c.engine.improve("a", 1.0)
        assert c.engine.improve("a", 0.5).weight == 1.5
        assert c.engine.feedback() == {"a": 1.5}
        with pytest.raises(RecordNotFound):
            c.engine.improve("ghost", 1.0)


def test_in_memory_versions_advance_with_feedback_like_the_log(tmp_path: Path) -> None:
    """Feedback advances InMemoryBackend's change counter as it advances the log's head, so both
    give the next record the same version."""
    versions = []
    for memory in (InMemoryBackend(), LogBackend(tmp_path / "v")):
        with Container(memory=memory) as c:
            c.engine.ingest_many(NOTES)
            c.engine.improve("a", 1.0)
            c.engine.ingest(Note(id="d", text="late", timestamp=4.0))
            versions.append(c.engine.get(["d"]).records[0].version)
        memory.close()
    assert versions[0] == versions[1]


def test_a_backend_without_feedback_refuses_improve() -> None:
    """Over a backend that does not declare supports_feedback, improve raises NotSupported."""

    class Plain(InMemoryBackend):
        supports_feedback = False

    with Container(memory=Plain()) as c:
        c.engine.ingest_many(NOTES)
        with pytest.raises(NotSupported, match="feedback"):
            c.engine.improve("a", 1.0)
        assert c.engine.feedback() == {}


def test_aimprove_equals_improve(log_engine: ContinuityEngine) -> None:
    """The async twin records the same feedback."""
    result = asyncio.run(log_engine.aimprove("a", 2.0, reason="async"))
    assert result.weight == 2.0 and log_engine.feedback() == {"a": 2.0}


def test_feedback_is_a_public_event(log_engine: ContinuityEngine) -> None:
    """events() shows a feedback event with its weight as value."""
    log_engine.improve("c", 0.25)
    event = list(store_of(log_engine).events())[-1]
    assert (event.kind, event.id, event.value) == ("feedback", "c", 0.25)


# -- CLI --------------------------------------------------------------------------------------


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("CONITI_EMBEDDING", "local_hash")
    return Cli(tmp_path / "store", capsys, monkeypatch)


def test_cli_improve_records_feedback(cli: Cli) -> None:
    """coniti improve ID WEIGHT --reason writes one feedback event and prints the total."""
    cli.ok("add", "invoice INV-7 paid", "--id", "n1")
    out = cli.ok("improve", "n1", "1.5", "--reason", "helpful", "--json").json()
    assert out["weight"] == 1.5 and out["seq"] >= 2
    with LogBackend(cli.store, read_only=True) as store:
        event = list(store.events())[-1]
        assert (event.kind, event.reason, event.value) == ("feedback", "helpful", 1.5)


def test_cli_improve_of_an_unknown_id_fails_cleanly(cli: Cli) -> None:
    """improve of an id that is not stored exits 1 with a one-line message naming it."""
    cli.ok("add", "something", "--id", "n1")
    result = cli("improve", "ghost", "1")
    assert result.code == 1 and "'ghost'" in result.err and no_traceback(result)


def test_cli_ask_with_strategy_keyword(cli: Cli) -> None:
    """coniti ask --strategy keyword finds the literal code; --json shows the signals."""
    cli.ok("add", "invoice INV-7 paid", "--id", "n1")
    cli.ok("add", "lunch with Ana", "--id", "n2")
    out = cli.ok("ask", "INV-7", "--strategy", "keyword", "--json").json()
    assert [h["id"] for h in out["hits"]] == ["n1"]
    assert out["hits"][0]["signals"]["strategy"] == "keyword"


def test_cli_ask_with_mmr_and_signals(cli: Cli) -> None:
    """--mmr 0.5 --signals prints a table of ranks and signals."""
    cli.ok("add", "invoice INV-7 paid", "--id", "n1")
    cli.ok("add", "invoice INV-8 paid", "--id", "n2")
    out = cli.ok("ask", "invoice", "--mmr", "0.5", "--signals").out
    assert "semantic" in out and "keyword=" in out and "n1" in out


def test_cli_ask_refuses_mmr_out_of_range(cli: Cli) -> None:
    """--mmr must be in [0, 1]."""
    cli.ok("add", "x", "--id", "n1")
    assert cli("ask", "x", "--mmr", "1.5").code == 2


def test_refresh_sees_feedback_written_by_another_handle(tmp_path: Path) -> None:
    """Feedback given through a second engine on the same store moves the first engine's hybrid
    ranking at its next ask (the weights are read from memory, not cached)."""
    with Container(memory="log", path=tmp_path / "s") as first:
        first.engine.ingest_many(NOTES)
        query = Query(text="cat", strategy="hybrid")
        order = [h.note.id for h in first.engine.ask(query).hits]
        second = ContinuityEngine(first.memory, first.embedder, first.structure.spawn(), first.strategy)
        second.improve(order[1], 5.0)
        assert first.engine.refresh() == 1
        assert first.engine.ask(query).hits[0].note.id == order[1]


def test_cli_log_shows_the_feedback_weight(cli: Cli) -> None:
    """coniti log prints a feedback event with its weight and the record id."""
    cli.ok("add", "invoice INV-7 paid", "--id", "n1")
    cli.ok("improve", "n1", "-0.5", "--reason", "stale")
    last = cli.ok("log").out.splitlines()[-1]
    assert "feedback" in last and "weight -0.5 on n1" in last and "(stale)" in last
