"""The MCP tools of conversations (append_turns, window, recall with a conversation) through the SDK's
real Client, in process, over a fresh LogBackend store (local_hash embedder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_mcp import connect, head, ok, refused

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


TURNS = [
    {"id": "t1", "speaker": "alice", "role": "user", "text": "I drink green tea every morning", "timestamp": 100.0,
     "session": "s1"},
    {"id": "t2", "speaker": "bot", "role": "assistant", "text": "noted, green tea it is", "timestamp": 101.0},
    {"id": "t3", "speaker": "alice", "role": "user", "text": "and coffee on mondays", "timestamp": 102.0},
]


async def _append(client: Any, turns: list[dict[str, Any]] = TURNS) -> dict[str, Any]:
    return await ok(client, "append_turns", {
        "conversation": "support", "namespace": ["alice"], "turns": turns, "reason": "chat",
    })  # fmt: skip


async def test_append_turns_returns_ids_and_versions(store: Path) -> None:
    """append_turns writes the turns and returns their ids and increasing versions."""
    async with connect(store) as client:
        done = await _append(client)
    assert done["namespace"] == ["alice", "conversations", "support"]
    assert done["ids"] == ["t1", "t2", "t3"] and done["versions"] == sorted(done["versions"])


async def test_append_turns_is_stamped_with_client_and_reason(store: Path) -> None:
    """Each turn's history names the client and the reason."""
    async with connect(store, client="agent-x") as client:
        await _append(client)
        hist = await ok(client, "history", {"id": "t2", "namespace": ["alice", "conversations", "support"]})
    assert [(e["actor"], e["reason"]) for e in hist["events"]] == [("agent-x", "chat")]


async def test_append_turns_with_an_empty_speaker_is_refused_and_writes_nothing(store: Path) -> None:
    """A turn with an empty speaker is a tool error naming turns.0 and speaker; nothing written."""
    async with connect(store) as client:
        text = await refused(client, "append_turns", {
            "conversation": "c", "turns": [{"speaker": "", "text": "hi"}], "reason": "r",
        })  # fmt: skip
    assert "turns.0" in text and "speaker" in text
    assert head(store) == 0


async def test_append_turns_with_a_stored_id_writes_none(store: Path) -> None:
    """A batch repeating a stored id is refused whole: the head does not move."""
    async with connect(store) as client:
        await _append(client)
        moved = head(store)
        text = await refused(client, "append_turns", {
            "conversation": "support", "namespace": ["alice"], "reason": "r",
            "turns": [{"id": "t9", "speaker": "a", "text": "x"}, {"id": "t1", "speaker": "a", "text": "y"}],
        })  # fmt: skip
    assert "t1" in text and head(store) == moved


async def test_window_gives_the_last_matching_turns_in_order(store: Path) -> None:
    """window with roles and last gives the last N turns of that role, oldest first."""
    async with connect(store) as client:
        await _append(client)
        got = await ok(client, "window", {"conversation": "support", "namespace": ["alice"], "roles": ["user"], "last": 2})
    assert [(t["id"], t["speaker"]) for t in got["turns"]] == [("t1", "alice"), ("t3", "alice")]
    assert all(isinstance(t["version"], int) for t in got["turns"])


async def test_window_with_an_unknown_turn_is_a_tool_error_naming_until(store: Path) -> None:
    """until naming no turn is a tool error naming until."""
    async with connect(store) as client:
        await _append(client)
        text = await refused(client, "window", {"conversation": "support", "namespace": ["alice"], "until": "nope"})
    assert "until" in text


async def test_recall_with_a_conversation_names_speaker_and_session(store: Path) -> None:
    """recall with conversation answers from its turns; each hit names the turn's speaker and session."""
    async with connect(store) as client:
        await _append(client)
        await ok(client, "remember", {"id": "n", "text": "green tea facts", "namespace": ["alice"], "reason": "r"})
        got = await ok(client, "recall", {"query": "green tea", "conversation": "support", "namespace": ["alice"]})
    assert got["hits"] and {h["id"] for h in got["hits"]} <= {"t1", "t2", "t3"}
    by_id = {h["id"]: h for h in got["hits"]}
    assert by_id["t1"]["turn"] == {"speaker": "alice", "role": "user", "session": "s1"}
    assert by_id["t1"]["kind"] == "message"


async def test_remember_takes_a_kind_and_recall_filters_on_it(store: Path) -> None:
    """remember with kind stores it; recall with filter {"$kind": ...} answers with that kind only."""
    async with connect(store) as client:
        await ok(client, "remember", {"id": "f", "text": "Alice likes tea", "kind": "fact", "reason": "r"})
        await ok(client, "remember", {"id": "p", "text": "Alice likes tea a lot", "reason": "r"})
        got = await ok(client, "recall", {"query": "Alice tea", "filter": {"$kind": "fact"}})
    assert [(h["id"], h["kind"]) for h in got["hits"]] == [("f", "fact")]
