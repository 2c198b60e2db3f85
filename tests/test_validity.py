"""Valid time: stored by every backend and format, superseding in one write, recall at a moment."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti.actor import Note, Query
from coniti.container import Container
from coniti.errors import ContractError, RecordNotFound
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.memory import GetRequest, MemoryBackend, MemoryRecord, PutRequest


def _record(id: str, **fields: object) -> MemoryRecord:
    return MemoryRecord(note=Note(id=id, text=f"text of {id}", timestamp=1.0, **fields), vector=np.ones(3))


def _facts(backend: MemoryBackend, ids: list[str]) -> list[object]:
    return [r.note.facts() for r in backend.get(GetRequest(ids=ids)).records]


@pytest.fixture(params=["log", "memory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> MemoryBackend:
    if request.param == "log":
        return LogBackend(tmp_path / "store")
    return InMemoryBackend()


def test_valid_to_before_valid_from_is_refused_naming_the_field() -> None:
    """A note whose valid_to is before its valid_from is a ContractError naming valid_to."""
    with pytest.raises(ContractError, match="valid_to"):
        Note(id="a", text="x", timestamp=1, valid_from=10, valid_to=5)


def test_unset_valid_time_is_not_written_by_to_dict() -> None:
    """A note without valid time or sources writes none of the three keys."""
    assert set(Note(id="a", text="x", timestamp=1).to_dict()) == {"id", "text", "timestamp", "metadata"}


def test_backends_keep_valid_time_and_sources(backend: MemoryBackend) -> None:
    """A put keeps valid_from, valid_to and derived_from; a note without them reads back unset."""
    backend.put(PutRequest(records=[_record("a", valid_from=10, valid_to=20, derived_from=["seq:3"]), _record("b")]))
    assert _facts(backend, ["a", "b"]) == [(10.0, 20.0, ("seq:3",)), None]


def test_log_store_keeps_valid_time_across_reopen_and_export(tmp_path: Path) -> None:
    """A reopened LogBackend and an export/import of its log read the valid time it wrote."""
    with LogBackend(tmp_path / "s") as b:
        b.put(PutRequest(records=[_record("a", valid_from=10, derived_from=["https://x.example/doc"])]))
        b.export_log(tmp_path / "log.jsonl")
    with LogBackend(tmp_path / "s") as b:
        assert _facts(b, ["a"]) == [(10.0, None, ("https://x.example/doc",))]
    with LogBackend.import_log(tmp_path / "log.jsonl", tmp_path / "t") as copy:
        assert _facts(copy, ["a"]) == [(10.0, None, ("https://x.example/doc",))]


def test_memory_file_round_trips_valid_time_and_old_lines_load_unset(backend: MemoryBackend) -> None:
    """dump then load keeps the valid time; a line without the keys (an older file) loads with None."""
    backend.put(PutRequest(records=[_record("a", valid_to=30), _record("b")]))
    text = io.StringIO()
    backend.dump(text)
    assert text.getvalue().count("valid_to") == 1 and "valid_from" not in text.getvalue()
    fresh = InMemoryBackend()
    fresh.load(io.StringIO(text.getvalue()))
    assert _facts(fresh, ["a", "b"]) == [(None, 30.0, ()), None]


def _store(tmp_path: Path) -> Container:
    return Container(memory="log", path=tmp_path / "s")


def test_supersede_ends_the_old_fact_and_adds_the_new_in_one_write(tmp_path: Path) -> None:
    """supersede writes two events in one transaction: the old note ends where the new one starts."""
    with _store(tmp_path) as c:
        c.engine.ingest(Note(id="old", text="launch on March 3", timestamp=1, valid_from=100))
        version = c.memory.get(GetRequest(ids=["old"])).records[0].version
        result = c.engine.supersede("old", Note(id="new", text="launch on April 14", timestamp=2, valid_from=200))
        old, new = c.memory.get(GetRequest(ids=["old", "new"])).records
        assert (old.note.valid_to, new.note.valid_from) == (200.0, 200.0)
        assert new.note.derived_from == (f"supersedes:old@{version}",)
        assert len(result.seqs) == 2 and c.memory.head == result.seqs[-1]


def test_supersede_without_valid_from_uses_the_write_time(tmp_path: Path) -> None:
    """A new note without valid_from starts, and the old one ends, at the write's time."""
    import time

    with _store(tmp_path) as c:
        c.engine.ingest(Note(id="old", text="a", timestamp=1))
        before = time.time()
        c.engine.supersede("old", Note(id="new", text="b", timestamp=2))
        old, new = c.memory.get(GetRequest(ids=["old", "new"])).records
        assert old.note.valid_to == new.note.valid_from and before <= (new.note.valid_from or 0) <= time.time()


def test_supersede_records_the_reason(tmp_path: Path) -> None:
    """The reason and actor given are stamped on the write's events."""
    with _store(tmp_path) as c:
        c.engine.ingest(Note(id="old", text="a", timestamp=1))
        c.engine.supersede("old", Note(id="new", text="b", timestamp=2), reason="slipped", actor="pm")
        events = list(c.memory.history("new"))
        assert (events[-1].actor, events[-1].reason) == ("pm", "slipped")


@pytest.mark.parametrize("old_id", ["missing", "old"])
def test_supersede_of_missing_or_superseded_note_writes_nothing(tmp_path: Path, old_id: str) -> None:
    """Superseding a note that is not live, or one already superseded, raises and writes nothing."""
    with _store(tmp_path) as c:
        c.engine.ingest(Note(id="old", text="a", timestamp=1))
        c.engine.supersede("old", Note(id="mid", text="b", timestamp=2))
        head = c.memory.head
        with pytest.raises((RecordNotFound, ContractError), match=old_id):
            c.engine.supersede(old_id, Note(id="new", text="c", timestamp=3))
        assert c.memory.head == head


def test_recall_hides_superseded_facts_and_marks_them_on_request(tmp_path: Path) -> None:
    """By default an ask leaves out a fact whose validity ended; include_superseded shows it marked."""
    with _store(tmp_path) as c:
        c.engine.ingest(Note(id="old", text="atlas launch march", timestamp=1, valid_from=100))
        c.engine.supersede("old", Note(id="new", text="atlas launch april", timestamp=2, valid_from=200))
        q = Query(text="atlas launch", strategy="keyword")
        assert [h.note.id for h in c.engine.ask(q).hits] == ["new"]
        shown = {h.note.id: h.superseded for h in c.engine.ask(q, include_superseded=True).hits}
        assert shown == {"old": True, "new": False}


def test_valid_at_and_at_seq_combine(tmp_path: Path) -> None:
    """valid_at asks what was true at a moment; at(seq) what coniti knew then: independent axes."""
    with _store(tmp_path) as c:
        c.engine.ingest(Note(id="old", text="atlas launch march", timestamp=1, valid_from=100))
        learned = c.memory.head
        c.engine.supersede("old", Note(id="new", text="atlas launch april", timestamp=2, valid_from=200))
        q = Query(text="atlas launch", strategy="keyword")
        assert [h.note.id for h in c.engine.ask(q, valid_at=150).hits] == ["old"]
        assert [h.note.id for h in c.engine.ask(q, valid_at=250).hits] == ["new"]
        assert [h.note.id for h in c.engine.at(learned).ask(q, valid_at=250).hits] == ["old"]
        assert [h.note.id for h in c.engine.ask(q, valid_at=50).hits] == []


_moments = st.integers(min_value=0, max_value=40).map(float)


@st.composite
def _histories(draw: st.DrawFn) -> list[tuple[str, int, float | None, float | None]]:
    steps = []
    for i in range(draw(st.integers(min_value=1, max_value=8))):
        op = draw(st.sampled_from(["add", "supersede"]))
        start = draw(st.none() | _moments)
        end = draw(st.none() | _moments)
        if start is not None and end is not None and end < start:
            start, end = end, start
        steps.append((op, draw(st.integers(min_value=0, max_value=i)), start, end))
    return steps


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=_histories(), moment=_moments)
def test_recall_at_a_moment_matches_a_brute_force_filter(
    history: list[tuple[str, int, float | None, float | None]], moment: float, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Over random histories of adds and supersessions, the ids an ask with valid_at returns are the
    live notes a brute-force filter finds valid at that moment (valid_from <= t < valid_to)."""
    path = tmp_path_factory.mktemp("v")
    with Container(memory="log", path=path / "s") as c:
        ids: list[str] = []
        for n, (op, target, start, end) in enumerate(history):
            note = Note(id=f"n{n}", text=f"fact {n}", timestamp=float(n), valid_from=start, valid_to=end)
            if op == "supersede" and ids:
                try:
                    c.engine.supersede(ids[target % len(ids)], note)
                except (ContractError, RecordNotFound):
                    continue
            else:
                c.engine.ingest(note)
            ids.append(note.id)
        live = list(c.memory.iter_all())
        expected = sorted(r.id for r in live if r.note.valid_at(moment))
        got = c.engine.ask(Query(text="fact", strategy="keyword", k=100), valid_at=moment)
        assert sorted(h.note.id for h in got.hits) == expected
        now = c.engine.ask(Query(text="fact", strategy="keyword", k=100))  # every moment drawn is past
        assert sorted(h.note.id for h in now.hits) == sorted(r.id for r in live if r.note.valid_to is None)


def test_recall_ranks_deeper_when_ended_facts_fill_the_first_places(tmp_path: Path) -> None:
    """With k=1 and ten ended facts ranked above the one valid note, the answer is that note."""
    with _store(tmp_path) as c:
        c.engine.ingest_many([
            Note(id=f"old{i}", text="atlas launch atlas launch date", timestamp=i, valid_from=0, valid_to=1)
            for i in range(10)
        ])
        c.engine.ingest(Note(id="valid", text="the atlas launch is late", timestamp=20))
        hits = c.engine.ask(Query(text="atlas launch date", strategy="keyword", k=1)).hits
        assert [h.note.id for h in hits] == ["valid"]


def test_cli_ask_hides_superseded_and_answers_at_a_moment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """coniti ask hides the ended fact; --valid-at answers as of that moment; --include-superseded
    shows it marked (superseded, also in --json)."""
    from cli_support import Cli

    with Container(memory="log", path=tmp_path / "s", embedding="local_hash") as c:
        c.engine.ingest(Note(id="old", text="atlas launch march", timestamp=1, valid_from=100))
        c.engine.supersede("old", Note(id="new", text="atlas launch april", timestamp=2, valid_from=200))
    cli = Cli(tmp_path / "s", capsys, monkeypatch)

    def ids(*args: str) -> list[str]:
        return [h["id"] for h in cli.ok("ask", "atlas launch", "--strategy", "keyword", "--json", *args).json()["hits"]]

    assert ids() == ["new"]
    assert ids("--valid-at", "150") == ["old"]
    hits = cli.ok("ask", "atlas launch", "--strategy", "keyword", "--json", "--include-superseded").json()["hits"]
    assert {h["id"]: h["superseded"] for h in hits} == {"old": True, "new": False}
    assert "atlas launch march (superseded)" in cli.ok("ask", "atlas launch", "--include-superseded").out


def test_an_ask_at_a_moment_does_not_prefer_the_newer_note(tmp_path: Path) -> None:
    """An ask about the present moves an older note below a newer one that says the same
    (signal ``superseded_by``); an ask with ``valid_at`` is about that moment, so it moves none."""
    with Container(memory="log", path=tmp_path / "s", embedding="minilm") as c:
        c.engine.ingest_many([
            Note(id="plan", text="The Atlas launch date is set for April 1.", timestamp=1_700_000_000),
            Note(id="moved", text="The Atlas launch date is moved to May 15.", timestamp=1_700_900_000),
        ])  # fmt: skip
        now = c.engine.ask("When is the Atlas launch date?").hits
        assert any(h.signals is not None and h.signals.superseded_by == "moved" for h in now)
        then = c.engine.ask("When is the Atlas launch date?", valid_at=1_700_100_000).hits
        assert then and all(h.signals is None or h.signals.superseded_by is None for h in then)


def test_a_receipt_is_refused_for_an_ask_at_a_moment(tmp_path: Path) -> None:
    """ask(receipt=True) with valid_at or include_superseded is a ContractError and writes nothing
    (a receipt keeps asks about the present)."""
    with Container(memory="log", path=tmp_path / "s", embedding="local_hash") as c:
        c.engine.ingest("a note")
        head = c.memory.head
        for extra in ({"valid_at": 1.0}, {"include_superseded": True}):
            with pytest.raises(ContractError, match="receipt"):
                c.engine.ask("note", receipt=True, **extra)  # type: ignore[arg-type]
        assert c.memory.head == head


def test_include_superseded_must_be_a_bool(tmp_path: Path) -> None:
    """ask and ask_many refuse an include_superseded that is not True or False, naming it, and
    write nothing."""
    with Container(memory="log", path=tmp_path / "s", embedding="local_hash") as c:
        c.engine.ingest("a note")
        head = c.memory.head
        with pytest.raises(ContractError, match="include_superseded"):
            c.engine.ask("note", include_superseded="yes")  # type: ignore[arg-type]
        with pytest.raises(ContractError, match="include_superseded"):
            c.engine.ask_many(["note"], include_superseded=1)  # type: ignore[arg-type]
        assert c.memory.head == head
