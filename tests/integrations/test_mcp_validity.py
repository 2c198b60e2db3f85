"""MCP ``recall`` takes valid time like ``engine.ask``: ended facts hidden by default,
``valid_at`` answers about a moment of the world, ``include_superseded`` returns ended facts
marked ``superseded``; a bad ``valid_at`` is refused naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp_types import Implementation

from coniti import Container, Note
from coniti.integrations.mcp import create_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _recall(path: Path, arguments: dict[str, object]) -> tuple[bool, object]:
    with Container(memory="log", path=path, embedding="local_hash") as c:
        if c.memory.head == 0:
            c.engine.ingest(Note(id="old", text="atlas launch march", timestamp=1, valid_from=100))
            c.engine.supersede("old", Note(id="new", text="atlas launch april", timestamp=2, valid_from=200))
        async with Client(create_server(c.engine), client_info=Implementation(name="t", version="1")) as client:
            result = await client.call_tool("recall", {"query": "atlas launch", "strategy": "keyword", **arguments})
    if result.is_error:
        return True, " ".join(getattr(b, "text", "") for b in result.content)
    assert result.structured_content is not None
    return False, {h["id"]: h["superseded"] for h in result.structured_content["hits"]}


async def test_recall_hides_the_ended_fact_by_default(tmp_path: Path) -> None:
    """Without arguments only the fact valid now comes back."""
    assert await _recall(tmp_path / "s", {}) == (False, {"new": False})


async def test_recall_at_a_moment_answers_what_was_true_then(tmp_path: Path) -> None:
    """valid_at (epoch seconds or ISO time) gives the fact valid at that moment."""
    assert await _recall(tmp_path / "s", {"valid_at": 150}) == (False, {"old": False})
    assert await _recall(tmp_path / "s", {"valid_at": "1970-01-01T00:02:30Z"}) == (False, {"old": False})


async def test_recall_with_superseded_marks_the_ended_fact(tmp_path: Path) -> None:
    """include_superseded returns the ended fact too, marked superseded."""
    assert await _recall(tmp_path / "s", {"include_superseded": True}) == (False, {"old": True, "new": False})


async def test_a_bad_valid_at_is_refused_naming_it(tmp_path: Path) -> None:
    """A valid_at that is no time is a tool error naming valid_at."""
    error, text = await _recall(tmp_path / "s", {"valid_at": "next tuesday"})
    assert error and "valid_at" in str(text)
