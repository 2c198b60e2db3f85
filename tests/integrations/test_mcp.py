"""coniti's MCP server (coniti.integrations.mcp) through the MCP SDK's real Client, in process.

Each test connects ``mcp.Client`` to a server over a fresh LogBackend store (local_hash embedder:
the model is not the point, except in the minilm test) and checks one behaviour through the protocol:
tool listing, structured results, tool errors, resources.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Implementation, TextResourceContents

from coniti import Container, Note
from coniti.errors import ContractError
from coniti.impl.log import LogBackend
from coniti.integrations.mcp import create_server

pytestmark = pytest.mark.anyio

WRITE_TOOLS = ["remember", "update", "forget", "append_turns"]
READ_TOOLS = ["recall", "get", "history", "changes", "diff", "verify", "window"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@contextmanager
def serving(path: Path, embedding: str = "local_hash", **options: Any) -> Iterator[MCPServer[Any]]:
    with Container(memory="log", path=path, embedding=embedding) as c:
        yield create_server(c.engine, **options)


@asynccontextmanager
async def connect(path: Path, client: str = "test-agent", **options: Any) -> AsyncIterator[Client]:
    with serving(path, **options) as server:
        async with Client(server, client_info=Implementation(name=client, version="1.0")) as c:
            yield c


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call ``tool`` and return its structured result, failing on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    assert result.structured_content is not None
    return result.structured_content


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    """Call ``tool``, expect a tool error, return its text."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return _text(result)


def _text(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


def head(path: Path) -> int:
    with LogBackend(path, read_only=True) as backend:
        return backend.head


async def remember(client: Client, id: str, text: str, **more: Any) -> dict[str, Any]:
    return await ok(client, "remember", {"id": id, "text": text, "reason": "test", **more})


# -- listing -------------------------------------------------------------------------------------


async def test_tools_are_listed_with_schemas_and_erase_is_not(store: Path) -> None:
    """Without allow_erase the server lists the eleven tools, each with an input and an output schema."""
    async with connect(store) as client:
        tools = (await client.list_tools()).tools
    assert sorted(t.name for t in tools) == sorted(WRITE_TOOLS + READ_TOOLS)
    assert all(t.input_schema.get("type") == "object" and t.output_schema for t in tools)


async def test_erase_is_listed_with_allow_erase(store: Path) -> None:
    """allow_erase adds the erase tool, marked destructive."""
    async with connect(store, allow_erase=True) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["erase"].annotations is not None and tools["erase"].annotations.destructive_hint


async def test_read_tools_are_annotated_read_only(store: Path) -> None:
    """Each read tool carries readOnlyHint, each write tool does not."""
    async with connect(store) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    hints = {name: bool(t.annotations and t.annotations.read_only_hint) for name, t in tools.items()}
    assert hints == {**dict.fromkeys(READ_TOOLS, True), **dict.fromkeys(WRITE_TOOLS, False)}


# -- remember and recall ---------------------------------------------------------------------------


async def test_recall_ranks_by_the_strategy_asked(store: Path) -> None:
    """strategy="keyword" finds a note by a literal code the question shares; an unknown strategy
    is refused naming the argument."""
    async with connect(store) as client:
        await remember(client, "inv", "Invoice INV-7731 was paid late", namespace=["alice"])
        await remember(client, "tea", "Alice drinks green tea", namespace=["alice"])
        found = await ok(client, "recall", {"query": "INV-7731", "k": 1, "strategy": "keyword"})
        message = await refused(client, "recall", {"query": "tea", "strategy": "vibes"})
    assert [h["id"] for h in found["hits"]] == ["inv"]
    assert "strategy" in message


async def test_remember_then_recall_finds_the_note(store: Path) -> None:
    """A remembered note comes back from recall with its namespace, version and score."""
    async with connect(store) as client:
        made = await remember(client, "a1", "Alice lives in Lyon", namespace=["alice"])
        found = await ok(client, "recall", {"query": "Alice lives in Lyon", "k": 1, "strategy": "semantic"})
    assert made["admitted"] and made["version"] is not None
    hit = found["hits"][0]
    assert (hit["id"], hit["namespace"], hit["version"]) == ("a1", ["alice"], made["version"])
    assert hit["score"] > 0.9


async def test_remember_keeps_timestamp_and_metadata(store: Path) -> None:
    """remember stores the given ISO timestamp (UTC) and metadata."""
    async with connect(store) as client:
        await remember(client, "m", "Budget approved", timestamp="2025-03-01T09:30:00Z",
                       metadata={"kind": "fact"})
        note = (await ok(client, "get", {"ids": ["m"]}))["notes"][0]
    assert note["timestamp"] == datetime(2025, 3, 1, 9, 30, tzinfo=UTC).timestamp()
    assert note["time"] == "2025-03-01T09:30:00Z" and note["metadata"] == {"kind": "fact"}


async def test_writes_are_stamped_with_the_client_name_and_the_reason(store: Path) -> None:
    """The event a write appends carries the client's name as actor and the call's reason."""
    async with connect(store, client="claude-desktop") as client:
        await ok(client, "remember", {"id": "a", "text": "Ada drinks tea", "reason": "she told me"})
        events = (await ok(client, "history", {"id": "a"}))["events"]
    assert [(e["kind"], e["actor"], e["reason"]) for e in events] == [
        ("put", "claude-desktop", "she told me")
    ]


async def test_actor_option_overrides_the_client_name(store: Path) -> None:
    """A server built with actor= stamps that actor, whatever the client calls itself."""
    async with connect(store, client="some-client", actor="ops-bot") as client:
        await remember(client, "a", "Ada drinks tea")
        events = (await ok(client, "history", {"id": "a"}))["events"]
    assert events[0]["actor"] == "ops-bot"


async def test_a_write_without_reason_is_refused_and_writes_nothing(store: Path) -> None:
    """A write with no reason (and no server default) is a tool error naming reason; no event."""
    async with connect(store) as client:
        before = (await ok(client, "changes", {}))["head"]
        message = await refused(client, "remember", {"text": "Ada drinks tea"})
        after = (await ok(client, "changes", {}))["head"]
    assert "reason" in message and before == after


async def test_the_server_reason_is_the_default(store: Path) -> None:
    """A server built with reason= stamps it on a write whose call gives none."""
    async with connect(store, reason="imported from chat") as client:
        await ok(client, "remember", {"id": "a", "text": "Ada drinks tea"})
        events = (await ok(client, "history", {"id": "a"}))["events"]
    assert events[0]["reason"] == "imported from chat"


async def test_a_duplicate_is_refused_with_the_strategy_reason(store: Path) -> None:
    """remember of an exact duplicate returns admitted false and says why; nothing is written."""
    async with connect(store) as client:
        await remember(client, "a", "Ada drinks tea", timestamp=100.0)
        second = await remember(client, "b", "Ada drinks tea", timestamp=100.0)
        missing = (await ok(client, "get", {"ids": ["b"]}))["missing"]
    assert not second["admitted"] and "duplicate" in second["refused"] and missing == ["b"]


async def test_remember_with_an_op_id_is_idempotent(store: Path) -> None:
    """A retried remember with the same op_id (no id, no timestamp) writes nothing the second time
    and reports the same note."""
    call = {"text": "Ada drinks tea", "reason": "r", "op_id": "run-1/step-1"}
    async with connect(store) as client:
        first = await ok(client, "remember", call)
        before = (await ok(client, "changes", {}))["head"]
        retry = await ok(client, "remember", call)
        after = (await ok(client, "changes", {}))["head"]
    assert retry == first and before == after


async def test_a_retried_update_of_the_text_with_an_op_id_replays(store: Path) -> None:
    """update with a new text and an op_id, sent twice: the retry is replayed, writes nothing, and
    reports the first call's version."""
    call = {"id": "a", "text": "Ada drinks coffee", "reason": "r", "op_id": "run-1/step-2"}
    async with connect(store) as client:
        await remember(client, "a", "Ada drinks tea")
        first = await ok(client, "update", call)
        before = (await ok(client, "changes", {}))["head"]
        retry = await ok(client, "update", call)
        after = (await ok(client, "changes", {}))["head"]
    assert retry == {**first, "replayed": True} and not first["replayed"] and before == after


async def test_an_op_id_reused_for_other_text_is_a_conflict(store: Path) -> None:
    """remember with an op_id already used for another note is a tool error naming the op id."""
    async with connect(store) as client:
        await ok(client, "remember", {"text": "Ada drinks tea", "reason": "r", "op_id": "k1"})
        message = await refused(client, "remember", {"text": "Ada drinks gin", "reason": "r", "op_id": "k1"})
    assert "'k1'" in message


async def test_recall_with_a_receipt_keeps_one_that_replays(store: Path) -> None:
    """recall with receipt=true appends a recall receipt stamped with the client's name and
    returns its seq; engine.replay of it gives the same hits. Without it recall writes nothing."""
    async with connect(store) as client:
        await ok(client, "remember", {"text": "Alice lives in Lyon", "reason": "r"})
        await ok(client, "remember", {"text": "Bob lives in Oslo", "reason": "r"})
        before = head(store)
        plain = await ok(client, "recall", {"query": "Alice lives"})
        assert plain["receipt"] is None and head(store) == before
        found = await ok(client, "recall", {"query": "Alice lives", "receipt": True})
        assert found["receipt"] == before + 1 == head(store)
    with Container(memory="log", path=store, embedding="local_hash") as c:
        [event] = c.memory.events(after=before)
        assert event.actor == "test-agent"
        replayed, same = c.engine.replay(found["receipt"], "Alice lives")
        assert same and [h.note.id for h in replayed.hits] == [h["id"] for h in found["hits"]]


async def test_recall_receipt_is_refused_with_as_of_and_by_a_read_only_server(store: Path) -> None:
    """receipt with as_of, or on a read-only server: a tool error naming receipt, nothing written."""
    async with connect(store) as client:
        await ok(client, "remember", {"text": "Alice lives in Lyon", "reason": "r"})
        before = head(store)
        message = await refused(client, "recall", {"query": "Alice", "receipt": True, "as_of": before})
        assert "receipt, as_of" in message and head(store) == before
    async with connect(store, read_only=True) as client:
        message = await refused(client, "recall", {"query": "Alice", "receipt": True})
        assert "receipt: a read-only server keeps no receipt" in message and head(store) == before


async def test_recall_with_a_prefix_ranks_its_namespaces_together(store: Path) -> None:
    """recall with a prefix answers from every namespace under it, and none outside."""
    async with connect(store) as client:
        await remember(client, "h", "Alice lives in Lyon", namespace=["alice", "home"])
        await remember(client, "w", "Alice leads Atlas", namespace=["alice", "work"])
        await remember(client, "b", "Bob lives in Ghent", namespace=["bob"])
        found = await ok(client, "recall", {"query": "Alice lives", "prefix": ["alice"]})
    assert sorted(h["id"] for h in found["hits"]) == ["h", "w"] and found["prefix"] == ["alice"]


async def test_recall_with_a_namespace_answers_from_it_alone(store: Path) -> None:
    """recall with a namespace answers from that namespace only."""
    async with connect(store) as client:
        await remember(client, "h", "Alice lives in Lyon", namespace=["alice", "home"])
        await remember(client, "w", "Alice works in Lyon", namespace=["alice", "work"])
        found = await ok(client, "recall", {"query": "Lyon", "namespace": ["alice", "work"]})
    assert [h["id"] for h in found["hits"]] == ["w"]


async def test_recall_filters_on_metadata(store: Path) -> None:
    """recall's filter keeps only notes whose metadata match."""
    async with connect(store) as client:
        await remember(client, "f", "Alice is vegetarian", metadata={"kind": "fact"})
        await remember(client, "p", "Alice prefers tea", metadata={"kind": "preference"})
        found = await ok(client, "recall", {"query": "Alice", "filter": {"kind": "fact"}})
    assert [h["id"] for h in found["hits"]] == ["f"]


async def test_recall_over_a_time_window(store: Path) -> None:
    """recall with start/end alone (ISO or epoch seconds) returns the notes of that window."""
    async with connect(store) as client:
        await remember(client, "jan", "January note", timestamp="2025-01-15")
        await remember(client, "feb", "February note", timestamp="2025-02-15")
        await remember(client, "mar", "March note", timestamp="2025-03-15")
        end = datetime(2025, 3, 1, tzinfo=UTC).timestamp()
        found = await ok(client, "recall", {"start": "2025-02-01", "end": end})
    assert [h["id"] for h in found["hits"]] == ["feb"]


async def test_recall_as_of_a_sequence_number_sees_the_old_version(store: Path) -> None:
    """recall with as_of=seq answers from the memory as it was then, and says so in seq."""
    async with connect(store) as client:
        v1 = (await remember(client, "s", "Stand-up is at 9:30"))["version"]
        await ok(client, "update", {"id": "s", "text": "Stand-up is at 10:00", "reason": "moved"})
        then = await ok(client, "recall", {"query": "stand-up", "as_of": v1})
        now = await ok(client, "recall", {"query": "stand-up"})
    assert then["seq"] == v1 and then["hits"][0]["text"] == "Stand-up is at 9:30"
    assert now["hits"][0]["text"] == "Stand-up is at 10:00"


async def test_recall_as_of_a_time_before_the_first_event_is_empty(store: Path) -> None:
    """recall with as_of an ISO time before any event reads the empty memory (seq 0)."""
    async with connect(store) as client:
        await remember(client, "s", "Stand-up is at 9:30")
        found = await ok(client, "recall", {"query": "stand-up", "as_of": "2000-01-01T00:00:00Z"})
    assert found["seq"] == 0 and found["hits"] == []


async def test_recall_refuses_namespace_and_prefix_together(store: Path) -> None:
    """recall with both namespace and prefix is a tool error naming both."""
    async with connect(store) as client:
        message = await refused(client, "recall", {"query": "x", "namespace": ["a"], "prefix": ["a"]})
    assert "namespace, prefix" in message


async def test_recall_needs_a_query_or_a_window(store: Path) -> None:
    """recall with neither query nor start/end is a tool error naming query."""
    async with connect(store) as client:
        message = await refused(client, "recall", {"k": 3})
    assert "query:" in message


# -- get, update, forget, erase ------------------------------------------------------------------


async def test_get_reports_missing_ids(store: Path) -> None:
    """get returns the live notes asked for and lists the others in missing."""
    async with connect(store) as client:
        await remember(client, "a", "Ada drinks tea")
        got = await ok(client, "get", {"ids": ["a", "nope"]})
    assert [n["id"] for n in got["notes"]] == ["a"] and got["missing"] == ["nope"]


async def test_get_as_of_reads_a_past_version(store: Path) -> None:
    """get with as_of returns the version live at that point."""
    async with connect(store) as client:
        v1 = (await remember(client, "a", "Ada drinks tea"))["version"]
        await ok(client, "update", {"id": "a", "text": "Ada drinks coffee", "reason": "switched"})
        got = await ok(client, "get", {"ids": ["a"], "as_of": v1})
    assert got["seq"] == v1 and got["notes"][0]["text"] == "Ada drinks tea"


async def test_update_writes_a_new_version_that_names_the_old_one(store: Path) -> None:
    """update returns the new version; history shows it replacing the first, with its reason."""
    async with connect(store) as client:
        v1 = (await remember(client, "a", "Ada drinks tea", metadata={"src": "chat"}))["version"]
        result = await ok(client, "update", {"id": "a", "metadata_patch": {"src": None, "ok": True},
                                             "reason": "checked", "expected_version": v1})
        events = (await ok(client, "history", {"id": "a"}))["events"]
    assert result["version"] > v1 and not result["unchanged"]
    assert (events[-1]["replaces"], events[-1]["reason"]) == (v1, "checked")
    assert events[-1]["note"]["metadata"] == {"ok": True}


async def test_update_with_a_stale_version_is_a_conflict_that_writes_nothing(store: Path) -> None:
    """update with an expected_version that is not live is a tool error naming both versions."""
    async with connect(store) as client:
        v1 = (await remember(client, "a", "Ada drinks tea"))["version"]
        await ok(client, "update", {"id": "a", "text": "Ada drinks coffee", "reason": "r"})
        before = (await ok(client, "changes", {}))["head"]
        message = await refused(client, "update", {"id": "a", "text": "Ada drinks water",
                                                   "reason": "r", "expected_version": v1})
        after = (await ok(client, "changes", {}))["head"]
    assert f"expected version {v1}" in message and before == after


async def test_update_of_an_unknown_note_names_it(store: Path) -> None:
    """update of an id that is not live is a tool error naming the id."""
    async with connect(store) as client:
        message = await refused(client, "update", {"id": "ghost", "text": "x", "reason": "r"})
    assert "'ghost'" in message


async def test_update_with_nothing_to_change_is_refused(store: Path) -> None:
    """update with only an id is a tool error listing what can be given."""
    async with connect(store) as client:
        await remember(client, "a", "Ada drinks tea")
        message = await refused(client, "update", {"id": "a", "reason": "r"})
    assert "nothing to update" in message


async def test_forget_deletes_and_keeps_the_history(store: Path) -> None:
    """forget deletes the note from reads; its history still holds the put and the delete."""
    async with connect(store) as client:
        await remember(client, "a", "Ada drinks tea")
        gone = await ok(client, "forget", {"ids": ["a", "nope"], "reason": "outdated"})
        got = await ok(client, "get", {"ids": ["a"]})
        events = (await ok(client, "history", {"id": "a"}))["events"]
    assert (gone["deleted"], gone["missing"], got["missing"]) == (["a"], ["nope"], ["a"])
    assert [(e["kind"], e["reason"]) for e in events] == [("put", "test"), ("delete", "outdated")]


async def test_erase_returns_the_receipt_and_removes_the_content(store: Path) -> None:
    """erase returns one receipt per id; history keeps the events without their content, and
    recall no longer finds the note."""
    async with connect(store, allow_erase=True) as client:
        await remember(client, "p", "Alice's phone is 555-0100")
        receipt = await ok(client, "erase", {"ids": ["p"], "reason": "privacy request 7"})
        events = (await ok(client, "history", {"id": "p"}))["events"]
        found = await ok(client, "recall", {"query": "Alice's phone is 555-0100"})
    assert receipt["erased"] == ["p"] and receipt["receipts"] == [events[-1]["seq"]]
    assert [(e["kind"], e["erased"], e["note"]) for e in events] == [
        ("put", True, None), ("erase", False, None)
    ]
    assert events[-1]["reason"] == "privacy request 7" and found["hits"] == []


# -- the audit trail -------------------------------------------------------------------------------


async def test_changes_pages_through_the_trail(store: Path) -> None:
    """changes returns at most limit events after a sequence number; next_after continues."""
    async with connect(store) as client:
        for i in range(3):
            await remember(client, f"n{i}", f"note number {i}")
        first = await ok(client, "changes", {"limit": 2})
        rest = await ok(client, "changes", {"after": first["next_after"]})
    seqs = [e["seq"] for e in first["events"] + rest["events"]]
    assert seqs == list(range(1, first["head"] + 1)) and len(first["events"]) == 2


async def test_diff_lists_what_changed_between_two_points(store: Path) -> None:
    """diff between two sequence numbers lists the ids added, removed and changed."""
    async with connect(store) as client:
        await remember(client, "a", "Ada drinks tea")
        mid = (await remember(client, "b", "Bob drinks milk"))["version"]
        await ok(client, "update", {"id": "a", "text": "Ada drinks coffee", "reason": "r"})
        await ok(client, "forget", {"ids": ["b"], "reason": "r"})
        await remember(client, "c", "Cat drinks water")
        d = await ok(client, "diff", {"a": mid, "b": (await ok(client, "changes", {}))["head"]})
    assert [(c["namespace"], c["added"], c["removed"], c["changed"]) for c in d["changes"]] == [
        ([], ["c"], ["b"], ["a"])
    ]


async def test_diff_covers_every_namespace_served(store: Path) -> None:
    """diff without a namespace lists the changes of every namespace the server serves, per
    namespace; prefix narrows it, namespace gives one."""
    async with connect(store) as client:
        await remember(client, "a", "Ada drinks tea", namespace=["ada"])
        mid = (await ok(client, "changes", {}))["head"]
        await remember(client, "b", "Bob drinks milk", namespace=["bob", "home"])
        await remember(client, "c", "Cat drinks water", namespace=["cat"])
        await ok(client, "forget", {"ids": ["a"], "reason": "r", "namespace": ["ada"]})
        head = (await ok(client, "changes", {}))["head"]
        whole = await ok(client, "diff", {"a": mid, "b": head})
        under = await ok(client, "diff", {"a": mid, "b": head, "prefix": ["bob"]})
        one = await ok(client, "diff", {"a": mid, "b": head, "namespace": ["cat"]})
    assert [(c["namespace"], c["added"], c["removed"]) for c in whole["changes"]] == [
        (["ada"], [], ["a"]), (["bob", "home"], ["b"], []), (["cat"], ["c"], []),
    ]
    assert whole["prefix"] == [] and whole["namespace"] is None
    assert [c["namespace"] for c in under["changes"]] == [["bob", "home"]]
    assert one["namespace"] == ["cat"] and [c["added"] for c in one["changes"]] == [["c"]]


async def test_verify_reports_a_clean_store(store: Path) -> None:
    """verify on an intact store reports ok with every event checked."""
    async with connect(store) as client:
        await remember(client, "a", "Ada drinks tea")
        report = await ok(client, "verify", {})
    assert report["ok"] and report["problems"] == [] and report["events_checked"] == report["head_seq"]


# -- resources -----------------------------------------------------------------------------------


async def _read(client: Client, uri: str) -> Any:
    contents = (await client.read_resource(uri)).contents
    assert isinstance(contents[0], TextResourceContents)
    return json.loads(contents[0].text)


async def test_head_resource_is_the_last_event(store: Path) -> None:
    """coniti://head gives the store's head sequence number and hash."""
    async with connect(store) as client:
        await remember(client, "a", "Ada drinks tea")
        read = await _read(client, "coniti://head")
    with LogBackend(store, read_only=True) as backend:
        assert read == {"seq": backend.head, "hash": backend.head_hash}


async def test_note_resource_by_namespace_and_id(store: Path) -> None:
    """coniti://notes/<parts>/<id> gives the live note; parts and id are percent-encoded."""
    async with connect(store) as client:
        await remember(client, "x/1", "Ada drinks tea", namespace=["alice", "a/b"])
        read = await _read(client, "coniti://notes/alice/a%2Fb/x%2F1")
    assert (read["id"], read["namespace"], read["text"]) == ("x/1", ["alice", "a/b"], "Ada drinks tea")


async def test_note_resource_of_the_root_namespace(store: Path) -> None:
    """coniti://notes/<id> is a note of the root namespace."""
    async with connect(store) as client:
        await remember(client, "a", "Ada drinks tea")
        read = await _read(client, "coniti://notes/a")
    assert (read["id"], read["namespace"]) == ("a", [])


async def test_a_missing_note_resource_is_an_error_naming_it(store: Path) -> None:
    """Reading the resource of a note that is not live is a protocol error naming the id."""
    async with connect(store) as client:
        with pytest.raises(MCPError, match="'ghost'"):
            await client.read_resource("coniti://notes/ghost")


# -- scope and refusals ----------------------------------------------------------------------------


async def test_prefix_is_the_default_namespace(store: Path) -> None:
    """On a server confined to a prefix, a write without namespace goes to the prefix."""
    async with connect(store, prefix=("alice",)) as client:
        made = await remember(client, "a", "Alice drinks tea")
    assert made["namespace"] == ["alice"]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("remember", {"text": "x", "reason": "r", "namespace": ["bob"]}),
        ("recall", {"query": "x", "prefix": []}),
        ("get", {"ids": ["a"], "namespace": ["bob", "alice"]}),
        ("changes", {"namespace": ["bob"]}),
    ],
)
async def test_prefix_refuses_namespaces_outside_it(store: Path, tool: str, arguments: dict[str, Any]) -> None:
    """A confined server refuses a namespace outside its prefix, naming the argument."""
    async with connect(store, prefix=("alice",)) as client:
        message = await refused(client, tool, arguments)
    field = "prefix" if "prefix" in arguments else "namespace"
    assert f"{field}: " in message and "outside" in message


async def test_prefix_confines_recall_and_changes_to_the_subtree(store: Path) -> None:
    """A confined server's recall and changes see only its subtree."""
    with serving(store) as server:
        async with Client(server) as client:
            await remember(client, "a", "Alice drinks tea", namespace=["alice", "home"])
            await remember(client, "b", "Bob drinks tea", namespace=["bob"])
    async with connect(store, prefix=("alice",)) as client:
        hits = (await ok(client, "recall", {"query": "drinks tea"}))["hits"]
        events = (await ok(client, "changes", {}))["events"]
    assert [h["id"] for h in hits] == ["a"]
    assert {tuple(e["namespace"][:1]) for e in events} == {("alice",)}


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("remember", {"text": "Ada drinks water", "reason": "r"}),
        ("update", {"id": "a", "text": "Ada drinks water", "reason": "r"}),
        ("forget", {"ids": ["a"], "reason": "r"}),
    ],
)
async def test_read_only_refuses_each_write(store: Path, tool: str, arguments: dict[str, Any]) -> None:
    """A read-only server refuses a write tool, saying it is read-only; nothing is written."""
    with serving(store) as server:
        async with Client(server) as client:
            await remember(client, "a", "Ada drinks tea")
    before = head(store)
    async with connect(store, read_only=True) as client:
        message = await refused(client, tool, arguments)
        assert (await ok(client, "get", {"ids": ["a"]}))["notes"][0]["text"] == "Ada drinks tea"
    assert "read-only" in message and head(store) == before


async def test_an_unknown_argument_is_refused_by_name(store: Path) -> None:
    """A misspelt argument (namesapce) is a tool error naming it, not silently ignored."""
    async with connect(store) as client:
        message = await refused(client, "remember", {"text": "x", "reason": "r", "namesapce": ["a"]})
        assert (await ok(client, "changes", {}))["events"] == []
    assert "namesapce: not an argument" in message


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"query": "x", "k": 0}, "k: input should be greater than or equal to 1 (got 0)"),
        ({"query": "x", "filter": {"kind": {"$near": 1}}}, "filter: "),
        ({"query": "x", "start": "last week"}, "start: 'last week' is not epoch seconds"),
        ({"query": "x", "start": True}, "start: input should be a valid number or a valid string (got true)"),
        ({"query": "x", "as_of": "12"}, "as_of: '12' is not an ISO 8601 time"),
        ({"query": "x", "as_of": 99}, "as_of: must be between 0 and the head"),
        ({"query": "x", "namespace": [""]}, "namespace.0: "),
        ({"query": 5}, "query: "),
        ({"query": "x", "k": "5"}, "k: input should be a valid integer (got \"5\")"),
        ({"query": "x", "k": 5.0}, "k: input should be a valid integer (got 5.0)"),
    ],
    ids=["k", "filter", "start", "start-type", "as_of-text", "as_of-beyond", "namespace-part", "query-type",
         "k-string", "k-float"],
)
async def test_bad_input_is_a_tool_error_naming_the_argument(
    store: Path, arguments: dict[str, Any], expected: str
) -> None:
    """Bad recall input is one line naming the argument, without pydantic's type codes or URLs."""
    async with connect(store) as client:
        message = await refused(client, "recall", arguments)
    assert expected in message and "errors.pydantic.dev" not in message and "\n" not in message


async def test_a_query_past_the_engine_limit_is_a_tool_error(store: Path) -> None:
    """recall with a query one character longer than the engine's max_query_chars is a tool error
    naming the query text and the limit."""
    async with connect(store) as client:
        message = await refused(client, "recall", {"query": "x" * 100_001})
    assert "query text is 100,001 characters, more than max_query_chars (100,000)" in message


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("remember", {"text": "x", "timestamp": 1e20}),
        ("remember", {"text": "x", "timestamp": "9999-12-31T23:30:00-01:00"}),
        ("update", {"id": "a", "timestamp": -1e11}),
    ],
    ids=["remember-seconds", "remember-iso", "update-before-year-1"],
)
async def test_a_time_outside_years_1_to_9999_is_a_tool_error(
    store: Path, tool: str, arguments: dict[str, Any]
) -> None:
    """A note time past the horizon is a tool error naming timestamp, and nothing is written."""
    async with connect(store) as client:
        await remember(client, "a", "Ada drinks tea")
        before = (await ok(client, "changes", {}))["head"]
        message = await refused(client, tool, {**arguments, "reason": "r"})
        after = (await ok(client, "changes", {}))["head"]
    assert "timestamp: " in message and "is outside years 1 to 9999 (UTC)" in message and before == after


async def test_changes_refuses_a_limit_given_as_a_string(store: Path) -> None:
    """changes with limit "5" is a tool error naming limit: numbers are numbers, as for k."""
    async with connect(store) as client:
        message = await refused(client, "changes", {"limit": "5"})
    assert "limit: input should be a valid integer" in message


async def test_a_missing_argument_is_named(store: Path) -> None:
    """A call without a required argument says which one."""
    async with connect(store) as client:
        message = await refused(client, "history", {})
    assert message.endswith("id: required")


async def test_history_of_an_unknown_id_names_it(store: Path) -> None:
    """history of an id no event touched is a tool error naming it."""
    async with connect(store) as client:
        message = await refused(client, "history", {"id": "ghost"})
    assert "'ghost'" in message


# -- the engine and the store ----------------------------------------------------------------------


async def test_reads_see_writes_made_by_another_handle(store: Path) -> None:
    """recall answers notes that another handle wrote after the server had loaded the namespace."""
    with serving(store) as server:
        async with Client(server) as client:
            await remember(client, "early", "Ada drinks tea")
            await ok(client, "recall", {"query": "Ada", "k": 1})
            with Container(memory="log", path=store, embedding="local_hash") as other:
                other.engine.ingest(Note(id="late", text="Carol adopted a cat", timestamp=1.0))
            found = await ok(client, "recall", {"query": "Carol adopted a cat", "k": 1})
    assert [h["id"] for h in found["hits"]] == ["late"]


async def test_remember_sees_duplicates_written_by_another_handle(store: Path) -> None:
    """remember refuses an exact duplicate of a note another handle wrote after the server had
    loaded the namespace."""
    with serving(store) as server:
        async with Client(server) as client:
            await remember(client, "early", "Ada drinks tea")
            with Container(memory="log", path=store, embedding="local_hash") as other:
                other.engine.ingest(Note(id="first", text="Carol adopted a cat", timestamp=5.0))
            again = await remember(client, "second", "Carol adopted a cat", timestamp=5.0)
    assert not again["admitted"] and "'first'" in again["refused"]


async def test_minilm_recalls_by_meaning(store: Path) -> None:
    """With the real minilm embedder, recall finds a paraphrase's answer."""
    async with connect(store, embedding="minilm") as client:
        await remember(client, "home", "Alice lives in Lyon.")
        await remember(client, "food", "Alice is vegetarian.")
        found = await ok(client, "recall", {"query": "Where is Alice's home town?", "k": 1})
    assert found["hits"][0]["id"] == "home"


def test_create_server_needs_a_log_backend() -> None:
    """create_server over in-memory memory raises ContractError: tools need the audit trail."""
    with Container() as c, pytest.raises(ContractError, match="LogBackend"):
        create_server(c.engine)


def test_create_server_refuses_erase_with_read_only(store: Path) -> None:
    """allow_erase together with read_only raises ContractError."""
    with pytest.raises(ContractError, match="read_only"), serving(store, read_only=True, allow_erase=True):
        pass
