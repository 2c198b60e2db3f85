"""ConitiStore under real LangGraph and LangMem code: a compiled StateGraph whose nodes use the store,
and LangMem's memory tools (called directly, no LLM)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langmem import create_manage_memory_tool, create_search_memory_tool

from coniti.embedding import LocalHashEmbedder
from coniti.impl.log import LogBackend
from coniti.integrations.langgraph import ConitiStore


class State(TypedDict, total=False):
    fact: str
    question: str
    found: list[str]


class Context(TypedDict):
    user: str


def remember(state: State, runtime: Runtime[Context]) -> State:
    assert runtime.store is not None
    user = runtime.context["user"]
    runtime.store.put(("memories", user), f"fact-{len(state['fact'])}", {"text": state["fact"]})
    return {}


def recall(state: State, runtime: Runtime[Context]) -> State:
    assert runtime.store is not None
    hits = runtime.store.search(("memories", runtime.context["user"]), query=state["question"], limit=1)
    return {"found": [hit.value["text"] for hit in hits]}


@pytest.fixture
def log(tmp_path: Path) -> LogBackend:
    backend = LogBackend(tmp_path / "store")
    yield backend
    backend.close()


@pytest.fixture
def store(log: LogBackend) -> ConitiStore:
    return ConitiStore(log, index={"embed": LocalHashEmbedder(), "fields": ["text", "content"]})


def test_a_state_graph_writes_and_searches_through_the_store(log: LogBackend, store: ConitiStore) -> None:
    """A graph compiled with store=ConitiStore: one node puts a memory, the next finds it by
    meaning; the put is one event in coniti's log, stamped by the audit block around the run."""
    builder = StateGraph(State, context_schema=Context)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    graph = builder.compile(store=store)
    store.put(("memories", "ana"), "older", {"text": "the printer on floor two is broken"})
    with log.audit("graph", "onboarding"):
        out = graph.invoke(
            {"fact": "Ana prefers tea over coffee", "question": "does Ana like tea or coffee"},
            context={"user": "ana"},
        )
    assert out["found"] == ["Ana prefers tea over coffee"]
    stamped = [(e.kind, e.actor, e.reason) for e in log.events() if e.actor == "graph"]
    assert stamped == [("put", "graph", "onboarding")]


def _config(user: str) -> dict[str, Any]:
    return {"configurable": {"langgraph_user_id": user}}


def test_langmem_memory_tools_create_update_search_and_delete(log: LogBackend, store: ConitiStore) -> None:
    """LangMem's manage tool creates, updates and deletes memories in the user's namespace, and its
    search tool finds them by meaning; each change is one event of the item's history."""
    manage = create_manage_memory_tool(namespace=("memories", "{langgraph_user_id}"), store=store)
    search = create_search_memory_tool(namespace=("memories", "{langgraph_user_id}"), store=store)
    created = manage.invoke({"content": "Bo's birthday is in May", "action": "create"}, config=_config("bo"))
    memory_id = created.split()[-1]
    manage.invoke({"content": "the team lunch is on Fridays", "action": "create"}, config=_config("bo"))
    manage.invoke(
        {"content": "Bo's birthday is on the 3rd of May", "action": "update", "id": memory_id},
        config=_config("bo"),
    )
    found = json.loads(search.invoke({"query": "when is the birthday of Bo", "limit": 1}, config=_config("bo")))
    assert [(m["key"], m["value"]["content"]) for m in found] == [(memory_id, "Bo's birthday is on the 3rd of May")]
    assert json.loads(search.invoke({"query": "birthday"}, config=_config("ana"))) == []
    manage.invoke({"action": "delete", "id": memory_id}, config=_config("bo"))
    assert store.get(("memories", "bo"), memory_id) is None
    assert [e.kind for e in store.history(("memories", "bo"), memory_id)] == ["put", "put", "delete"]


def test_langmem_tools_inside_a_graph_use_the_compiled_store(store: ConitiStore) -> None:
    """Without store=, LangMem's tools find the store a graph was compiled with (get_store())."""
    manage = create_manage_memory_tool(namespace=("memories", "{langgraph_user_id}"))
    search = create_search_memory_tool(namespace=("memories", "{langgraph_user_id}"))

    def node(state: State) -> State:
        manage.invoke({"content": state["fact"], "action": "create"})
        hits = json.loads(search.invoke({"query": state["question"], "limit": 1}))
        return {"found": [hit["value"]["content"] for hit in hits]}

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    graph = builder.compile(store=store)
    out = graph.invoke(
        {"fact": "the wifi password is on the fridge", "question": "where is the wifi password"},
        config=_config("cy"),
    )
    assert out["found"] == ["the wifi password is on the fridge"]
    assert store.list_namespaces() == [("memories", "cy")]
