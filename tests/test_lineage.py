"""Lineage: derived_from indexed both ways, explain/blame in the engine and the CLI, kept through
export/import and erasure."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import Cli

from coniti.actor import Note
from coniti.container import Container
from coniti.engine.lineage import parse_ref
from coniti.errors import ContractError, RecordNotFound
from coniti.impl.log import LogBackend


def _history(c: Container) -> int:
    """m1 (a message), f1 derived from m1's version and a URL, f2 superseding f1 citing m1 by seq;
    returns m1's version."""
    c.engine.ingest(Note(id="m1", text="Ana: the launch is March 3", timestamp=1, kind="message"))
    v = c.memory.head
    c.engine.ingest(Note(id="f1", text="Atlas launches March 3", timestamp=2, kind="fact",
                         derived_from=[f"note:m1@{v}", "https://wiki.example/atlas"]))  # fmt: skip
    with c.memory.audit(actor="pm", reason="launch slipped"):
        c.engine.supersede("f1", Note(id="f2", text="Atlas launches April 14", timestamp=3, derived_from=[f"seq:{v}"]))
    return v


def test_parse_ref_reads_every_form() -> None:
    """note:ID, note:ID@V, seq:N, supersedes:ID@V and anything else (external) are told apart."""
    assert parse_ref("note:a") == ("note", "a", None)
    assert parse_ref("note:a@b@7") == ("note", "a@b", 7)
    assert parse_ref("seq:12") == ("seq", None, 12)
    assert parse_ref("supersedes:x@3") == ("supersedes", "x", 3)
    assert parse_ref("https://e.example/x") == ("external", None, None)


def test_bad_sources_are_refused_naming_derived_from() -> None:
    """A string (not a list), a blank entry or a repeated entry is refused naming derived_from."""
    for bad in ("note:a", [" x"], ["a", "a"], [3]):
        with pytest.raises(ContractError, match="derived_from"):
            Note(id="n", text="t", timestamp=1, derived_from=bad)


def test_explain_gives_versions_sources_and_supersessions(tmp_path: Path) -> None:
    """explain of a superseded fact: both versions with who/why, its sources resolved, and its successor."""
    with Container(memory="log", path=tmp_path / "s") as c:
        v = _history(c)
        e = c.engine.explain("f1")
        assert [(x.kind, x.actor, x.reason) for x in e.versions] == [("put", None, None), ("put", "pm", "launch slipped")]
        assert [(s.id, s.version, s.text) for s in e.sources] == [("m1", v, "Ana: the launch is March 3"), (None, None, None)]
        assert e.sources[1].ref == "https://wiki.example/atlas"
        assert e.superseded_by == ["f2"]
        f2 = c.engine.explain("f2")
        assert [s.id for s in f2.supersedes] == ["f1"] and [s.id for s in f2.sources] == ["m1"]


def test_the_index_answers_both_ways(tmp_path: Path) -> None:
    """A source's explanation names the notes derived from it (by note ref and by seq ref)."""
    with Container(memory="log", path=tmp_path / "s") as c:
        _history(c)
        assert c.engine.explain("m1").derived == ["f1", "f2"]


def test_sources_are_followed_recursively(tmp_path: Path) -> None:
    """A summary of a fact of a message shows the message under the fact."""
    with Container(memory="log", path=tmp_path / "s") as c:
        _history(c)
        c.engine.ingest(Note(id="s", text="summary", timestamp=4, derived_from=["note:f2"]))
        (f2,) = c.engine.explain("s").sources
        assert f2.id == "f2" and [n.id for n in f2.sources] == ["m1", "f1"]


def test_erased_source_keeps_its_id_and_receipt_not_its_text(tmp_path: Path) -> None:
    """After m1 is erased, f2 still cites m1 with the erasure's receipt seq and no text."""
    with Container(memory="log", path=tmp_path / "s") as c:
        _history(c)
        receipt = c.memory.erase(["m1"], reason="asked to forget").receipts[0]
        (m1,) = c.engine.explain("f2").sources
        assert (m1.id, m1.erased, m1.text, m1.receipt) == ("m1", True, None, receipt)


def test_lineage_survives_export_and_import(tmp_path: Path) -> None:
    """A store imported from an export explains the same lineage."""
    with Container(memory="log", path=tmp_path / "s") as c:
        _history(c)
        before = c.engine.explain("f1").to_dict()
        c.memory.export_log(tmp_path / "log.jsonl")
    with LogBackend.import_log(tmp_path / "log.jsonl", tmp_path / "t") as copy, Container(memory=copy) as c:
        after = c.engine.explain("f1").to_dict()
    assert after == before


def test_explain_of_an_unknown_id_is_record_not_found(tmp_path: Path) -> None:
    """explain of an id no event touched raises RecordNotFound naming it."""
    with Container(memory="log", path=tmp_path / "s") as c, pytest.raises(RecordNotFound, match="nope"):
        c.engine.explain("nope")


def test_explain_writes_nothing(tmp_path: Path) -> None:
    """explain and blame leave the head where it was."""
    with Container(memory="log", path=tmp_path / "s") as c:
        _history(c)
        head = c.memory.head
        c.engine.explain("f1"), c.engine.blame("f2")
        assert c.memory.head == head


def test_cli_explain_and_blame(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """coniti explain prints versions and sources, --json the document; coniti blame one line."""
    with Container(memory="log", path=tmp_path / "s") as c:
        _history(c)
    cli = Cli(tmp_path / "s", capsys, monkeypatch)
    out = cli.ok("explain", "f1").out
    assert "launch slipped" in out and "https://wiki.example/atlas" in out and "superseded by: f2" in out
    assert cli.ok("explain", "f2", "--json").json()["supersedes"][0]["id"] == "f1"
    line = cli.ok("blame", "f2").out.strip()
    assert line.startswith("f2 @") and "by pm: launch slipped" in line and "supersedes f1@" in line
    assert len(line.splitlines()) == 1
    assert cli("blame", "nope").code != 0
