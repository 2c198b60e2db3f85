"""engine.context (and its async twin, the scoped handle's, ``coniti ask --context``) chooses its
notes by valid time as ``ask`` does: ended facts hidden by default, ``valid_at`` answers about a
moment of the world, ``include_superseded`` keeps ended facts, marked in the block."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from coniti import Container, Note, Query, Scope
from coniti.engine import Answer
from coniti.errors import ContractError
from coniti.impl.log import LogBackend
from coniti.recall import ContextBlock

Q = Query(text="atlas launch", strategy="keyword")


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Container[LogBackend]]:
    """'old' (valid from 100) superseded at 200 by 'new'."""
    with Container(memory="log", path=tmp_path / "s", embedding="local_hash") as c:
        c.engine.ingest(Note(id="old", text="atlas launch march", timestamp=1, valid_from=100))
        c.engine.supersede("old", Note(id="new", text="atlas launch april", timestamp=2, valid_from=200))
        yield c


def ids(block: Answer | ContextBlock) -> list[str]:
    return [h.note.id for h in block.hits]


def test_context_hides_the_ended_fact_by_default(box: Container[LogBackend]) -> None:
    """Without arguments the block holds only the fact valid now."""
    block = box.engine.context(Q, token_budget=500)
    assert ids(block) == ["new"] and "march" not in block.text


def test_context_at_a_moment_holds_the_fact_valid_then(box: Container[LogBackend]) -> None:
    """valid_at=150 gives the block of what was true at 150: the old fact alone."""
    assert ids(box.engine.context(Q, token_budget=500, valid_at=150)) == ["old"]


def test_context_with_superseded_marks_the_ended_fact_in_the_text(box: Container[LogBackend]) -> None:
    """include_superseded keeps the ended fact; its hit is marked and its line says superseded."""
    block = box.engine.context(Q, token_budget=500, include_superseded=True)
    assert {h.note.id: getattr(h, "superseded", None) for h in block.hits} == {"old": True, "new": False}
    assert "atlas launch march (old, superseded)" in block.text
    assert "atlas launch april (new)" in block.text


def test_context_refuses_a_bad_include_superseded(box: Container[LogBackend]) -> None:
    """include_superseded that is not a bool is a ContractError naming it."""
    with pytest.raises(ContractError, match="include_superseded"):
        box.engine.context(Q, token_budget=500, include_superseded="yes")  # type: ignore[arg-type]


def test_the_async_twin_and_the_scoped_handle_pass_valid_time_on(tmp_path: Path) -> None:
    """acontext(valid_at=...) and a scoped handle's context/ask(valid_at=...) answer at that moment."""
    with Container(memory="log", path=tmp_path / "s", embedding="local_hash") as c:
        a = c.scoped(Scope(user="alice"))
        a.ingest(Note(id="old", text="atlas launch march", timestamp=1, valid_from=100, valid_to=200))
        a.ingest(Note(id="new", text="atlas launch april", timestamp=2, valid_from=200))
        assert ids(a.context(Q, token_budget=500)) == ["new"]
        assert ids(a.context(Q, token_budget=500, valid_at=150)) == ["old"]
        assert {h.note.id: h.superseded for h in a.ask(Q, include_superseded=True).hits} == {"old": True, "new": False}
        block = asyncio.run(c.engine.acontext(Q, token_budget=500, namespace=a.home, valid_at=150))
        assert ids(block) == ["old"]


def test_cli_ask_context_takes_valid_at_and_include_superseded(
    box: Container[LogBackend], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """coniti ask --context --valid-at renders the fact valid then; --include-superseded marks the ended one."""
    from cli_support import Cli

    box.close()
    cli = Cli(tmp_path / "s", capsys, monkeypatch)
    then = cli.ok("ask", "atlas launch", "--strategy", "keyword", "--context", "--valid-at", "150").out
    assert "atlas launch march (old)" in then and "april" not in then
    marked = cli.ok("ask", "atlas launch", "--strategy", "keyword", "--context", "--include-superseded").out
    assert "atlas launch march (old, superseded)" in marked and "atlas launch april (new)" in marked
