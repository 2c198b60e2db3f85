"""coniti's MCP server with a scope (``create_server(engine, scope=...)``, ``coniti mcp --scope``)
through the MCP SDK's real Client: every write is stamped with the scope, every read is confined
to it, forged scopes are tool errors that write nothing."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult, Implementation

from coniti import Container, Note, Scope
from coniti.cli import main
from coniti.errors import ContractError
from coniti.impl.log import LogBackend
from coniti.integrations.mcp import create_server

pytestmark = pytest.mark.anyio

ALICE = Scope(user="alice")
BOB = Scope(user="bob")


@asynccontextmanager
async def connect(path: Path, **options: Any) -> AsyncIterator[Client]:
    with Container(memory="log", path=path) as c:
        server = create_server(c.engine, **options)
        async with Client(server, client_info=Implementation(name="test-agent", version="1.0")) as client:
            yield client


def _text(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    assert result.structured_content is not None
    return result.structured_content


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return _text(result)


def head(path: Path) -> int:
    with LogBackend(path, read_only=True) as backend:
        return backend.head


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store where alice and bob each hold note n1 (written through their handles)."""
    path = tmp_path / "store"
    with Container(memory="log", path=path) as c:
        c.scoped(ALICE).ingest(Note(id="n1", text="alice drinks green tea", timestamp=1.0))
        c.scoped(BOB).ingest(Note(id="n1", text="bob drinks black tea", timestamp=1.0))
    return path


async def test_remember_is_stamped_with_the_scope(store: Path) -> None:
    """A note remembered through a scoped server lands in the scope's home."""
    async with connect(store, scope="user=alice") as client:
        made = await ok(client, "remember", {"text": "alice likes mate", "reason": "r", "id": "n2"})
    assert made["namespace"] == list(ALICE.home)
    with Container(memory="log", path=store) as c:
        assert [r.note.text for r in c.scoped(ALICE).get(["n2"]).records] == ["alice likes mate"]


async def test_recall_get_and_changes_see_only_the_scope(store: Path) -> None:
    """recall, get, history and changes of alice's server never show bob's note."""
    async with connect(store, scope=ALICE) as client:
        hits = (await ok(client, "recall", {"query": "drinks tea"}))["hits"]
        got = (await ok(client, "get", {"ids": ["n1"]}))["notes"]
        events = (await ok(client, "changes", {}))["events"]
        history = (await ok(client, "history", {"id": "n1"}))["events"]
    assert [h["text"] for h in hits] == ["alice drinks green tea"]
    assert [n["text"] for n in got] == ["alice drinks green tea"]
    assert {tuple(e["namespace"]) for e in events} == {ALICE.home}
    assert history and {tuple(e["namespace"]) for e in history} == {ALICE.home}


async def test_recall_as_of_a_past_point_stays_in_the_scope(store: Path) -> None:
    """recall with as_of answers through a past handle of the same scope."""
    point = head(store)
    async with connect(store, scope=ALICE) as client:
        await ok(client, "update", {"id": "n1", "text": "alice drinks mate now", "reason": "r"})
        past = (await ok(client, "recall", {"query": "drinks tea", "as_of": point}))["hits"]
        now = (await ok(client, "recall", {"query": "drinks", "k": 10}))["hits"]
    assert [h["text"] for h in past] == ["alice drinks green tea"]
    assert [h["text"] for h in now] == ["alice drinks mate now"]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("remember", {"text": "x", "reason": "r", "namespace": list(BOB.home)}),
        ("update", {"id": "n1", "text": "hijacked", "reason": "r", "namespace": list(BOB.home)}),
        ("forget", {"ids": ["n1"], "reason": "r", "namespace": list(BOB.home)}),
        ("remember", {"text": "x", "reason": "r", "metadata": {"scope": {"user": "bob"}}}),
        ("update", {"id": "n1", "metadata": {"scope": "bob"}, "reason": "r"}),
    ],
)
async def test_forged_scope_writes_are_tool_errors_that_write_nothing(
    store: Path, tool: str, arguments: dict[str, Any]
) -> None:
    """Another scope's namespace, or the reserved metadata key: a tool error, no event."""
    before = head(store)
    async with connect(store, scope=ALICE) as client:
        message = await refused(client, tool, arguments)
    assert "outside" in message or "reserved" in message
    assert head(store) == before


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("recall", {"query": "tea", "prefix": list(BOB.root)}),
        ("recall", {"query": "tea", "filter": {"scope.user": "bob"}}),
        ("get", {"ids": ["n1"], "namespace": list(BOB.home)}),
        ("history", {"id": "n1", "namespace": list(BOB.home)}),
        ("diff", {"a": 0, "b": 1, "prefix": ["@scope"]}),
    ],
)
async def test_forged_scope_reads_are_tool_errors(store: Path, tool: str, arguments: dict[str, Any]) -> None:
    """Reading another scope (by namespace, prefix or filter) is a tool error."""
    async with connect(store, scope=ALICE) as client:
        message = await refused(client, tool, arguments)
    assert "outside" in message or "reserved" in message


def test_scope_and_prefix_together_are_refused(store: Path) -> None:
    """create_server takes a prefix or a scope, not both."""
    with Container(memory="log", path=store) as c, pytest.raises(ContractError, match="prefix and scope"):
        create_server(c.engine, prefix=("x",), scope=ALICE)


async def test_an_unscoped_server_cannot_plant_a_note_in_a_scope(store: Path) -> None:
    """Through a server without scope, remember into alice's home is refused; nothing written."""
    before = head(store)
    async with connect(store) as client:
        message = await refused(client, "remember", {"text": "x", "reason": "r", "namespace": list(ALICE.home)})
    assert "scope" in message and head(store) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scope", "tenant=x"], "unknown scope field 'tenant'"),
        (["--scope", "user=alice", "--prefix", "alice"], "--scope and --prefix"),
    ],
)
def test_the_command_refuses_a_bad_scope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """coniti mcp --scope: an unknown field or --prefix beside it is a usage error naming it."""
    assert main(["mcp", "--store", str(tmp_path / "s"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


async def test_coniti_mcp_scope_serves_through_the_handle_over_stdio(store: Path) -> None:
    """python -m coniti mcp --scope user=alice: remember lands in alice's scope, recall sees only
    alice's notes (bob's note with the same words stays out)."""
    env = {**os.environ, "CONITI_EMBEDDING": "local_hash"}
    env.pop("CONITI_STORE", None)
    args = ["-m", "coniti", "mcp", "--store", str(store), "--scope", "user=alice"]
    params = StdioServerParameters(command=sys.executable, args=args, env=env)
    async with Client(params, client_info=Implementation(name="stdio-agent", version="0.1")) as client:
        made = await ok(client, "remember", {"id": "n3", "text": "alice drinks mate tea", "reason": "told"})
        hits = (await ok(client, "recall", {"query": "drinks tea", "k": 10}))["hits"]
    assert made["namespace"] == list(ALICE.home)
    assert sorted(h["text"] for h in hits) == ["alice drinks green tea", "alice drinks mate tea"]
