"""A note's kind: validated, stored by every backend and format, filterable, shown by the CLI."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from cli_support import Cli

from coniti.actor import KINDS, Note
from coniti.errors import ContractError
from coniti.filters import check_filter, compile_record_filter
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.memory import GetRequest, MemoryBackend, MemoryRecord, PutRequest, ScanRequest


def _record(id: str, kind: str | None, vector: bool = True) -> MemoryRecord:
    return MemoryRecord(
        note=Note(id=id, text=f"text of {id}", timestamp=float(len(id)), kind=kind),
        vector=np.ones(3) if vector else None,
    )


def _kinds(backend: MemoryBackend, ids: list[str]) -> list[str | None]:
    return [r.note.kind for r in backend.get(GetRequest(ids=ids)).records]


@pytest.fixture(params=["log", "memory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> MemoryBackend:
    if request.param == "log":
        return LogBackend(tmp_path / "store")
    return InMemoryBackend()


def test_kind_defaults_to_none() -> None:
    """A note made without a kind is a plain note: kind None, and to_dict writes no kind key."""
    note = Note(id="a", text="x", timestamp=1)
    assert note.kind is None and "kind" not in note.to_dict()


def test_named_kinds_and_user_strings_are_accepted() -> None:
    """Every named kind and any other non-blank string is a kind; to_dict writes it."""
    for kind in (*KINDS, "my-own kind"):
        assert Note(id="a", text="x", timestamp=1, kind=kind).to_dict()["kind"] == kind


@pytest.mark.parametrize("bad", ["", "  ", " fact", 3, "x" * 65])
def test_bad_kind_is_a_contract_error_naming_kind(bad: object) -> None:
    """An empty, blank, padded, non-string or overlong kind is refused, the message naming kind."""
    with pytest.raises(ContractError, match="kind"):
        Note(id="a", text="x", timestamp=1, kind=bad)


def test_create_takes_kind_as_keyword_and_the_rest_as_metadata() -> None:
    """Note.create(text, kind=...) sets the kind; other keywords stay metadata."""
    note = Note.create("hi", kind="fact", topic="t")
    assert (note.kind, note.metadata) == ("fact", {"topic": "t"})


def test_backends_keep_the_kind(backend: MemoryBackend) -> None:
    """A put keeps each note's kind, with and without a vector; a plain note reads back as None."""
    backend.put(PutRequest(records=[_record("a", "fact"), _record("bb", None), _record("ccc", "mine", False)]))
    assert _kinds(backend, ["a", "bb", "ccc"]) == ["fact", None, "mine"]


def test_log_backend_keeps_the_kind_across_reopen(tmp_path: Path) -> None:
    """A LogBackend reopened reads the kinds it wrote."""
    with LogBackend(tmp_path / "s") as backend:
        backend.put(PutRequest(records=[_record("a", "summary"), _record("bb", None)]))
    with LogBackend(tmp_path / "s") as backend:
        assert _kinds(backend, ["a", "bb"]) == ["summary", None]


def test_memory_file_round_trips_the_kind(backend: MemoryBackend) -> None:
    """dump then load into a fresh store gives the same kinds."""
    backend.put(PutRequest(records=[_record("a", "event"), _record("bb", None)]))
    text = io.StringIO()
    backend.dump(text)
    fresh = InMemoryBackend()
    fresh.load(io.StringIO(text.getvalue()))
    assert _kinds(fresh, ["a", "bb"]) == ["event", None]


def test_memory_file_line_without_kind_loads_as_plain_note() -> None:
    """A memory file written before kinds (no kind key in the note) loads with kind None."""
    source = InMemoryBackend()
    source.put(PutRequest(records=[_record("a", None)]))
    text = io.StringIO()
    source.dump(text)
    assert '"kind"' not in text.getvalue()
    fresh = InMemoryBackend()
    fresh.load(io.StringIO(text.getvalue()))
    assert _kinds(fresh, ["a"]) == [None]


def test_log_export_and_import_keep_the_kind(tmp_path: Path) -> None:
    """export_log then import_log gives a store with the same kinds."""
    with LogBackend(tmp_path / "s") as backend:
        backend.put(PutRequest(records=[_record("a", "preference")]))
        backend.export_log(tmp_path / "log.jsonl")
    with LogBackend.import_log(tmp_path / "log.jsonl", tmp_path / "t") as copy:
        assert _kinds(copy, ["a"]) == ["preference"]


def test_scan_filters_by_kind(backend: MemoryBackend) -> None:
    """A scan filter {"$kind": ...} keeps the notes of that kind; $exists false keeps plain notes."""
    backend.put(PutRequest(records=[_record("a", "fact"), _record("bb", None), _record("ccc", "message")]))

    def ids(where: dict[str, object]) -> list[str]:
        return [r.id for r in backend.scan(ScanRequest(filter=where)).records]

    assert ids({"$kind": "fact"}) == ["a"]
    assert ids({"$kind": {"$in": ["fact", "message"]}}) == ["a", "ccc"]
    assert ids({"$kind": {"$exists": False}}) == ["bb"]
    assert ids({"$or": [{"$kind": "message"}, {"$kind": "fact"}]}) == ["a", "ccc"]


def test_kind_filter_does_not_read_metadata() -> None:
    """{"$kind": "fact"} is about the note's kind: metadata {"kind": "fact"} does not match it."""
    match = compile_record_filter({"$kind": "fact"})
    assert match({"kind": "fact"}, None) is False and match({}, "fact") is True


def test_kind_inside_a_path_is_refused() -> None:
    """$kind nested under a metadata path is refused, naming $kind."""
    with pytest.raises(ContractError, match=r"\$kind"):
        check_filter({"a": {"$kind": "fact"}})


def test_cli_shows_the_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """get prints a kind line, get --json a kind field, ls the kind before the text."""
    with LogBackend(tmp_path / "store") as backend:
        backend.put(PutRequest(records=[_record("a", "fact"), _record("bb", None)]))
    cli = Cli(tmp_path / "store", capsys, monkeypatch)
    assert any(line.split() == ["kind", "fact"] for line in cli.ok("get", "a").out.splitlines())
    assert cli.ok("get", "a", "--json").json()["kind"] == "fact"
    assert cli.ok("get", "bb", "--json").json()["kind"] is None
    assert "[fact] text of a" in cli.ok("ls").out


def test_engine_ingest_keeps_the_kind_and_ask_filters_by_it() -> None:
    """Notes ingested by the engine keep their kinds; an ask filtered by $kind answers only that kind."""
    from coniti.actor import Query
    from coniti.container import Container

    with Container() as c:
        c.engine.ingest_many([
            Note(id="f", text="alice likes green tea", timestamp=1, kind="fact"),
            Note(id="m", text="alice said she likes green tea", timestamp=2, kind="message"),
            Note(id="p", text="green tea every morning", timestamp=3),
        ])
        assert _kinds(c.memory, ["f", "m", "p"]) == ["fact", "message", None]
        hits = c.engine.ask(Query(text="green tea", filter={"$kind": "message"})).hits
        assert [h.note.id for h in hits] == ["m"]


def test_cli_add_takes_a_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """coniti add --kind stores the kind; ls --filter '{"$kind": ...}' lists by it; a blank kind fails."""
    monkeypatch.setenv("CONITI_EMBEDDING", "local_hash")
    cli = Cli(tmp_path / "store", capsys, monkeypatch)
    cli.ok("add", "Alice likes tea", "--id", "a", "--kind", "fact")
    cli.ok("add", "hello", "--id", "b")
    assert cli.ok("get", "a", "--json").json()["kind"] == "fact"
    assert [r["id"] for r in cli.ok("ls", "--filter", '{"$kind": "fact"}', "--json").lines()] == ["a"]
    result = cli("add", "x", "--kind", " ")
    assert result.code == 1 and "kind" in result.err


@pytest.mark.parametrize("case", ["v2/basic", "v3/payloads"])
def test_golden_logs_written_before_kinds_read_as_plain_notes(case: str, tmp_path: Path) -> None:
    """A committed golden log from before kinds imports and every note reads back with kind None."""
    source = Path(__file__).resolve().parent.parent / "log" / "golden" / case / "events.jsonl"
    with LogBackend.import_log(source, tmp_path / "s") as backend:
        records = [r for ns in backend.namespaces() for r in backend.iter_all(namespace=ns)]
    assert records and all(r.note.kind is None for r in records)


def test_codec_reads_kd_and_refuses_a_kd_that_is_not_a_string() -> None:
    """A put payload's kd is the record's kind; a kd that is not a non-empty string is corruption."""
    from coniti.errors import StoreCorrupted
    from coniti.log.codec import GENESIS, PUT, decode_event, encode_event
    from coniti.log.payloads import encode_put_payload, packb

    good, _ = encode_event(1, 1.0, PUT, [], GENESIS, encode_put_payload("t", {}, None, None, None, "fact"), id="a",
                           timestamp=1.0)
    event = decode_event(good, 1)
    assert event.record is not None and event.record.kind == "fact"
    bad, _ = encode_event(1, 1.0, PUT, [], GENESIS, packb({"tx": "t", "md": {}, "e": None, "kd": 3}), id="a",
                          timestamp=1.0)
    with pytest.raises(StoreCorrupted, match="kd"):
        decode_event(bad, 1)
