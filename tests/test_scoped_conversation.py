"""A conversation through a scoped handle (``ScopedEngine.conversation``,
``Container.scoped(scope).conversation``): appends go through the handle's write path, reads,
windows, recall and state stay in its scope, another scope's conversation is not reached."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coniti import Container, Scope, ScopeError
from coniti.conversation import Conversation, FromCheckpoint, Turn
from coniti.errors import NotSupported, ReadOnlyError
from coniti.impl.log import LogBackend
from coniti.scope import scope_of

ALICE = Scope(user="alice")
BOB = Scope(user="bob")


def said(id: str, speaker: str, text: str, at: float) -> Turn:
    return Turn(id=id, speaker=speaker, text=text, timestamp=at, role="user")


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Container[LogBackend]]:
    """A log store where alice and bob each hold a conversation 'chat' with the same turn ids."""
    with Container(memory="log", path=tmp_path / "store") as c:
        c.scoped(ALICE).conversation("chat").append(
            [said("t1", "alice", "alice orders green tea", 1.0), said("t2", "alice", "alice pays by card", 2.0)]
        )
        c.scoped(BOB).conversation("chat").append(
            [said("t1", "bob", "bob orders black coffee", 1.0), said("t2", "bob", "bob pays in cash", 2.0)]
        )
        yield c


def test_append_lands_under_the_handles_scope(box: Container[LogBackend]) -> None:
    """The turns appended through a handle are put in (*home, 'conversations', name) of its scope."""
    puts = [e for e in box.memory.events() if e.kind == "put"]
    assert {e.namespace for e in puts} == {(*ALICE.home, "conversations", "chat"), (*BOB.home, "conversations", "chat")}
    assert all(scope_of(e.namespace) is not None for e in puts)
    assert box.scoped(ALICE).conversation("chat").namespace == (*ALICE.home, "conversations", "chat")


def test_window_reads_only_the_scopes_turns(box: Container[LogBackend]) -> None:
    """window and turns through alice's handle are alice's turns, in order."""
    chat = box.scoped(ALICE).conversation("chat")
    assert [t.text for t in chat.window()] == ["alice orders green tea", "alice pays by card"]
    assert [t.text for t in chat.window(last=1)] == ["alice pays by card"]
    assert "bob" not in chat.context(token_budget=500).text


def test_recall_finds_only_the_scopes_turns(box: Container[LogBackend]) -> None:
    """recall through bob's handle ranks bob's turns only, even for a query about alice's."""
    hits = box.scoped(BOB).conversation("chat").recall("green tea order", k=10)
    assert hits and {h.turn.speaker for h in hits} == {"bob"}


def test_state_folds_the_scopes_turns_and_resumes(box: Container[LogBackend]) -> None:
    """state through a handle folds its own turns; a checkpoint resumes after a later append."""
    chat = box.scoped(ALICE).conversation("chat")
    first = chat.state([], lambda s, t: [*s, t.id + ":" + t.speaker])
    assert first.value == ["t1:alice", "t2:alice"]
    chat.append(said("t3", "alice", "alice leaves", 3.0))
    resumed = chat.state(None, lambda s, t: [*s, t.id + ":" + t.speaker], FromCheckpoint(first.checkpoint()))
    assert resumed.value == ["t1:alice", "t2:alice", "t3:alice"] and resumed.turns == 3


def test_the_container_and_the_engine_open_the_same_scoped_conversation(box: Container[LogBackend]) -> None:
    """Container.scoped(s).conversation and engine.scoped(s).conversation read the same turns."""
    a = box.scoped(ALICE).conversation("chat").turns()
    b = box.engine.scoped(ALICE).conversation("chat").turns()
    assert a == b and len(a) == 2


def test_another_scopes_conversation_is_unreachable(box: Container[LogBackend]) -> None:
    """A namespace of bob's scope through alice's handle is refused before anything is read."""
    with pytest.raises(ScopeError, match="conversation namespace .* outside this handle's scope"):
        box.scoped(ALICE).conversation("chat", namespace=BOB.home)


def test_a_forged_scope_in_a_turns_metadata_is_refused_and_writes_nothing(box: Container[LogBackend]) -> None:
    """A turn whose metadata holds 'scope' is refused naming turns[i].metadata; nothing written."""
    head = box.memory.head
    bad = Turn(id="t9", speaker="alice", text="x", timestamp=9.0, metadata={"scope": "user=bob"})
    with pytest.raises(ScopeError, match=r"turns\[1\]\.metadata"):
        box.scoped(ALICE).conversation("chat").append([said("t8", "alice", "fine", 8.0), bad])
    assert box.memory.head == head


def test_a_past_handle_refuses_an_append(box: Container[LogBackend]) -> None:
    """A conversation of a handle of the past reads that past and refuses to append."""
    past = box.scoped(ALICE).at(box.memory.head)
    try:
        chat = past.conversation("chat")
        assert len(chat) == 2
        with pytest.raises(ReadOnlyError):
            chat.append(said("t5", "alice", "later", 5.0))
    finally:
        past.close()


def test_a_scoped_conversation_does_not_hand_out_the_engine(box: Container[LogBackend]) -> None:
    """conversation.engine of a scoped conversation raises NotSupported (the handle is the way in)."""
    chat = box.scoped(ALICE).conversation("chat")
    assert chat.scope == ALICE
    with pytest.raises(NotSupported, match="scoped handle"):
        _ = chat.engine


def test_the_unscoped_conversation_cannot_append_into_a_scope(box: Container[LogBackend]) -> None:
    """Conversation(engine, ...) under a scope's home is refused like any unscoped write."""
    head = box.memory.head
    with pytest.raises(ScopeError, match="is a scope's"):
        Conversation(box.engine, "chat", namespace=ALICE.home).append(said("t6", "x", "y", 6.0))
    assert box.memory.head == head
