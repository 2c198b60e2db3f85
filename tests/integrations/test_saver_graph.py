"""A real LangGraph ``StateGraph`` compiled with ``checkpointer=ConitiSaver(...)`` on a LogBackend:
state across invocations, state history, replay and forks from a past checkpoint, ``delete_thread``,
and coniti's erasure of the thread's content with its receipts."""

from __future__ import annotations

import asyncio
import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from coniti.impl.log import LogBackend
from coniti.integrations.langgraph import ConitiSaver

SECRET = "card number 4111-1111-1111-1111"


class Chat(TypedDict):
    messages: Annotated[list[str], operator.add]
    turns: int


def _reply(state: Chat) -> dict[str, Any]:
    return {"messages": [f"echo: {state['messages'][-1]}"], "turns": state.get("turns", 0) + 1}


def _graph(saver: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    builder = StateGraph(Chat)
    builder.add_node("reply", _reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


@pytest.fixture
def store(tmp_path: Path) -> LogBackend:
    with LogBackend(tmp_path / "store", durability="nosync") as backend:
        yield backend


@pytest.fixture
def saver(store: LogBackend) -> ConitiSaver:
    return ConitiSaver(store)


def _thread(name: str) -> Any:
    return {"configurable": {"thread_id": name}}


def _store_bytes(store: LogBackend) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(Path(store.path).rglob("*")) if p.is_file())


def test_state_survives_across_invocations_and_reopening(store: LogBackend, tmp_path: Path) -> None:
    """A second invocation on the thread continues its state; a new saver on a reopened store
    reads the same state."""
    graph = _graph(ConitiSaver(store))
    graph.invoke({"messages": ["hi"]}, _thread("t1"))
    out = graph.invoke({"messages": ["again"]}, _thread("t1"))
    assert out == {"messages": ["hi", "echo: hi", "again", "echo: again"], "turns": 2}
    store.close()
    with ConitiSaver(tmp_path / "store") as reopened:
        state = _graph(reopened).get_state(_thread("t1"))
    assert state.values == out


def _history(graph: CompiledStateGraph[Any, Any, Any, Any], thread: str) -> list[Any]:
    return list(graph.get_state_history(_thread(thread)))


def _two_turns(graph: CompiledStateGraph[Any, Any, Any, Any], thread: str = "t1") -> None:
    graph.invoke({"messages": ["hi"]}, _thread(thread))
    graph.invoke({"messages": ["again"]}, _thread(thread))


def test_state_history_lists_every_step_newest_first(saver: ConitiSaver) -> None:
    """``get_state_history`` after two turns holds the six checkpoints LangGraph writes (an input
    and two loop steps per turn), newest first, each one's parent the next one down."""
    graph = _graph(saver)
    _two_turns(graph)
    history = _history(graph, "t1")
    steps = [(s.metadata["source"], s.metadata["step"]) for s in history]
    assert steps == [("loop", 4), ("loop", 3), ("input", 2), ("loop", 1), ("loop", 0), ("input", -1)]
    assert [s.values.get("messages") for s in history] == [
        ["hi", "echo: hi", "again", "echo: again"],
        ["hi", "echo: hi", "again"],
        ["hi", "echo: hi"],
        ["hi", "echo: hi"],
        ["hi"],
        [],
    ]
    parents = [s.parent_config["configurable"]["checkpoint_id"] for s in history[:-1]]
    assert parents == [s.config["configurable"]["checkpoint_id"] for s in history[1:]]
    assert history[-1].parent_config is None


def test_history_with_limit_and_before_pages_through_it(saver: ConitiSaver) -> None:
    """``limit`` and ``before`` page the history: two pages of three are the whole history."""
    graph = _graph(saver)
    _two_turns(graph)
    whole = _history(graph, "t1")
    first = list(graph.get_state_history(_thread("t1"), limit=3))
    second = list(graph.get_state_history(_thread("t1"), before=first[-1].config, limit=3))
    assert [s.config for s in first + second] == [s.config for s in whole]


def test_replay_from_a_past_checkpoint_reruns_the_steps_after_it(saver: ConitiSaver) -> None:
    """Invoking with no input from a past checkpoint whose next node is ``reply`` runs ``reply``
    again from that state: LangGraph writes a ``fork`` copy of it, then the step, which reaches
    the state the first run reached."""
    graph = _graph(saver)
    _two_turns(graph)
    past = next(s for s in _history(graph, "t1") if s.metadata["step"] == 3)
    assert past.next == ("reply",)
    out = graph.invoke(None, past.config)
    assert out == {"messages": ["hi", "echo: hi", "again", "echo: again"], "turns": 2}
    newest, fork = _history(graph, "t1")[:2]
    assert (newest.metadata["source"], fork.metadata["source"]) == ("loop", "fork")
    assert newest.parent_config == fork.config
    assert fork.parent_config == past.config
    assert fork.values == past.values


def _scenario(graph: CompiledStateGraph[Any, Any, Any, Any]) -> list[tuple[Any, ...]]:
    """Two turns, a replay and a fork on one thread; its history without the ids."""
    _two_turns(graph)
    history = _history(graph, "t1")
    graph.invoke(None, next(s for s in history if s.metadata["step"] == 3).config)
    graph.invoke({"messages": ["other"]}, next(s for s in history if s.metadata["step"] == 1).config)
    return [
        (s.metadata, s.values, s.next, [(t.name, t.error, t.interrupts) for t in s.tasks])
        for s in _history(graph, "t1")
    ]


def test_history_equals_the_one_langgraphs_in_memory_saver_gives(saver: ConitiSaver) -> None:
    """The same runs, replay and fork give the same history (metadata, values, next nodes, tasks)
    on ConitiSaver as on LangGraph's ``InMemorySaver``."""
    assert _scenario(_graph(saver)) == _scenario(_graph(InMemorySaver()))


def test_forking_from_a_past_checkpoint_keeps_both_branches(saver: ConitiSaver) -> None:
    """New input from the checkpoint after the first turn forks the thread: the thread's state is
    the fork's, and the original branch's checkpoints stay readable by id."""
    graph = _graph(saver)
    _two_turns(graph)
    original = _history(graph, "t1")
    after_first = next(s for s in original if s.metadata["step"] == 1)
    out = graph.invoke({"messages": ["other"]}, after_first.config)
    assert out["messages"] == ["hi", "echo: hi", "other", "echo: other"]
    assert graph.get_state(_thread("t1")).values == out
    assert graph.get_state(original[0].config).values["messages"][-1] == "echo: again"
    assert len(_history(graph, "t1")) == len(original) + 3


def test_async_graph_runs_on_the_async_twins(saver: ConitiSaver) -> None:
    """``ainvoke`` and ``aget_state_history`` (the saver's async methods) give what the sync path
    gives."""
    graph = _graph(saver)

    async def run() -> tuple[dict[str, Any], list[Any]]:
        await graph.ainvoke({"messages": ["hi"]}, _thread("a"))
        out = await graph.ainvoke({"messages": ["again"]}, _thread("a"))
        return out, [s async for s in graph.aget_state_history(_thread("a"))]

    out, history = asyncio.run(run())
    assert out == {"messages": ["hi", "echo: hi", "again", "echo: again"], "turns": 2}
    assert [s.metadata["step"] for s in history] == [4, 3, 2, 1, 0, -1]


def test_delete_thread_forgets_the_thread_and_keeps_others(saver: ConitiSaver) -> None:
    """After ``delete_thread`` the thread has no state and no history; another thread is intact."""
    graph = _graph(saver)
    _two_turns(graph, "t1")
    _two_turns(graph, "t2")
    saver.delete_thread("t1")
    assert graph.get_state(_thread("t1")).values == {}
    assert _history(graph, "t1") == []
    assert len(_history(graph, "t2")) == 6


def test_deleted_thread_is_still_in_the_stores_past(store: LogBackend, saver: ConitiSaver) -> None:
    """``delete_thread`` is an ordinary delete: a saver on the store as of before the delete still
    reads the thread's state (coniti's time travel)."""
    graph = _graph(saver)
    _two_turns(graph)
    before = store.head
    saver.delete_thread("t1")
    past = _graph(ConitiSaver(store.at(before)))
    assert past.get_state(_thread("t1")).values["messages"][-1] == "echo: again"


def test_erase_thread_removes_the_content_from_the_store_with_receipts(store: LogBackend, saver: ConitiSaver) -> None:
    """``erase_thread`` (after ``delete_thread``) erases every record of the thread with a receipt
    per record id; after ``compact`` no byte of the state is in the store's files, and the history
    still shows the puts (content gone) and the erase events with their reason."""
    graph = _graph(saver)
    graph.invoke({"messages": [SECRET]}, _thread("t1"))
    _two_turns(graph, "t2")
    saver.delete_thread("t1")
    assert SECRET.encode() in _store_bytes(store)  # deleting keeps the past

    receipts = saver.erase_thread("t1", reason="user asked to be forgotten")

    namespace = ("langgraph", "thread", "t1")
    result = receipts[namespace]
    assert result.missing == [] and len(result.receipts) == len(result.erased) > 0
    assert receipts[("langgraph", "threads")].erased == ["t1"]
    store.compact()
    assert SECRET.encode() not in _store_bytes(store)
    events = list(store.events(namespace=namespace))
    puts = [e for e in events if e.kind == "put"]
    erases = [e for e in events if e.kind == "erase"]
    assert puts and all(e.erased and e.record is None for e in puts)
    assert sorted(e.seq for e in erases) == sorted(result.receipts)
    assert {e.reason for e in erases} == {"user asked to be forgotten"}
    assert store.verify().ok
    assert len(_history(graph, "t2")) == 6


def _concat(state: list[str], batches: list[list[str]]) -> list[str]:
    return [*state, *(item for batch in batches for item in batch)]


class Log(TypedDict):
    log: Annotated[list[str], DeltaChannel(_concat, snapshot_frequency=4)]


def _append(state: Log) -> dict[str, Any]:
    return {"log": [f"n{len(state['log'])}"]}


def test_prune_keep_latest_keeps_a_delta_channels_state(saver: ConitiSaver) -> None:
    """On a graph with a ``DeltaChannel`` (a value stored only every 4th update), ``prune`` keeps
    fewer checkpoints than it found but more than one, and the thread's state is unchanged
    (keeping only the latest would reconstruct the channel as empty)."""
    builder = StateGraph(Log)
    builder.add_node("append", _append)
    builder.add_edge(START, "append")
    builder.add_edge("append", END)
    graph = builder.compile(checkpointer=saver)
    for i in range(7):
        graph.invoke({"log": [f"in{i}"]}, _thread("d"))
    before = graph.get_state(_thread("d")).values
    found = len(_history(graph, "d"))
    saver.prune(["d"])
    kept = len(list(saver.list(_thread("d"))))
    assert 1 < kept < found
    assert graph.get_state(_thread("d")).values == before
    assert len(before["log"]) == 14
