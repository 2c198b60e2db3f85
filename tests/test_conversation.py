"""Conversations: turns appended atomically, windows, context blocks, recall and folded state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti import (
    At,
    Chain,
    Checkpoint,
    Conversation,
    FoldError,
    FromCheckpoint,
    FromSeq,
    Full,
    Last,
    LastN,
    RoleFilter,
    StateStore,
    TokenBudget,
    Turn,
)
from coniti.container import Container
from coniti.errors import ContractError, DuplicateRecord, NotSupported
from coniti.memory import CountRequest, GetRequest
from coniti.recall import estimate_tokens


def _turns(n: int, start: int = 0) -> list[Turn]:
    """Turns t{start}..: even ones by alice (user), odd ones by bot (assistant), session s1 then s2."""
    return [
        Turn(
            id=f"t{i}", speaker="alice" if i % 2 == 0 else "bot", role="user" if i % 2 == 0 else "assistant",
            text=f"turn number {i}", timestamp=1000.0 + i, session="s1" if i < 4 else "s2",
        )
        for i in range(start, start + n)
    ]  # fmt: skip


@pytest.fixture(params=["log", "memory"])
def container(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Container[Any]]:
    c: Container[Any] = Container(memory="log", path=tmp_path / "s") if request.param == "log" else Container()
    with c:
        yield c


@pytest.fixture
def conv(container: Container[Any]) -> Conversation:
    conversation = container.conversation("support", namespace=("alice",))
    conversation.append(_turns(8))
    return conversation


def _ids(turns: list[Turn]) -> list[str]:
    return [t.id for t in turns]


def _count(c: Container[Any], conv: Conversation) -> int:
    return c.memory.count(CountRequest(namespace=conv.namespace)).count


# -- Turn ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"speaker": ""}, "speaker"),
        ({"speaker": "  "}, "speaker"),
        ({"role": "wizard"}, "role"),
        ({"text": " "}, "text"),
        ({"session": ""}, "session"),
        ({"metadata": {"turn": 1}}, "metadata"),
        ({"timestamp": float("nan")}, "timestamp"),
    ],
)
def test_bad_turn_is_a_contract_error_naming_the_field(fields: dict[str, Any], named: str) -> None:
    """An empty speaker, unknown role, blank text, empty session, reserved metadata key or bad time
    is refused, the one-line message naming the field."""
    base: dict[str, Any] = {"id": "a", "speaker": "alice", "text": "hi", "timestamp": 1.0}
    with pytest.raises(ContractError, match=named) as info:
        Turn(**{**base, **fields})
    assert "\n" not in str(info.value)


def test_turn_create_gives_a_random_id_and_now() -> None:
    """Turn.create makes distinct ids and a current timestamp; keywords other than role/session
    are metadata."""
    a, b = Turn.create("alice", "hi", topic="x"), Turn.create("alice", "hi")
    assert a.id != b.id and a.timestamp > 1e9 and a.metadata == {"topic": "x"}


def test_turn_is_frozen() -> None:
    """A turn cannot be changed after construction."""
    turn = _turns(1)[0]
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        turn.text = "other"  # type: ignore[misc]


# -- append ----------------------------------------------------------------------------------------


def test_turns_are_notes_of_kind_message(container: Container[Any], conv: Conversation) -> None:
    """A turn is stored as a note of kind message in the conversation's namespace, its speaker,
    role and session under metadata 'turn'; reading it back gives the same turn."""
    record = container.memory.get(GetRequest(ids=["t1"], namespace=conv.namespace)).records[0]
    assert conv.namespace == ("alice", "conversations", "support")
    assert record.note.kind == "message"
    assert record.note.metadata["turn"] == {"speaker": "bot", "role": "assistant", "session": "s1"}
    assert Turn.from_record(record) == _turns(2)[1]


def test_append_returns_increasing_versions_in_order(container: Container[Any]) -> None:
    """append gives each turn's version, in order, increasing; the turns read back carry them."""
    conv = container.conversation("c")
    versions = conv.append(_turns(3))
    assert versions == sorted(versions) and len(set(versions)) == 3
    assert [t.version for t in conv.turns()] == versions


def test_append_is_all_or_nothing_on_a_stored_id(container: Container[Any], conv: Conversation) -> None:
    """A batch holding an id already stored raises DuplicateRecord and writes none of its turns."""
    with pytest.raises(DuplicateRecord):
        conv.append([*_turns(2, start=20), _turns(1)[0]])
    assert _count(container, conv) == 8


def test_append_refuses_a_non_turn_and_writes_nothing(container: Container[Any], conv: Conversation) -> None:
    """A value that is not a Turn is refused naming turns[i]; nothing is written."""
    with pytest.raises(ContractError, match=r"turns\[1\]"):
        conv.append([_turns(1, start=30)[0], "hello"])  # type: ignore[list-item]
    assert _count(container, conv) == 8


def test_append_keeps_turns_the_strategy_would_refuse(container: Container[Any]) -> None:
    """Two turns with the same text at the same time are both kept (a conversation is what was said)."""
    conv = container.conversation("c")
    same = [Turn(id=i, speaker="alice", text="ok", timestamp=5.0) for i in ("a", "b")]
    conv.append(same)
    assert _ids(conv.turns()) == ["a", "b"]


def test_append_stamps_actor_and_reason_in_history(tmp_path: Path) -> None:
    """On a log store the turn's history names the actor and reason given to append."""
    with Container(memory="log", path=tmp_path / "s") as c:
        conv = c.conversation("c")
        conv.append(_turns(1), actor="agent-7", reason="user said hi")
        event = c.memory.history("t0", namespace=conv.namespace)[0]
        assert (event.actor, event.reason) == ("agent-7", "user said hi")


def test_append_with_reason_on_a_backend_without_audit_is_refused() -> None:
    """The in-memory backend keeps no audit trail: a reason is refused, nothing written."""
    with Container() as c:
        conv = c.conversation("c")
        with pytest.raises(NotSupported, match="audit"):
            conv.append(_turns(1), reason="why")
        assert conv.turns() == []


def test_turns_are_erasable_and_readable_as_of(tmp_path: Path) -> None:
    """Turns are notes: at(seq) reads the conversation as of a point, erase removes a turn's content."""
    with Container(memory="log", path=tmp_path / "s") as c:
        conv = c.conversation("c")
        first = conv.append(_turns(2))
        conv.append(_turns(2, start=2))
        assert _ids(conv.window(until=first[-1])) == ["t0", "t1"]
        c.engine.refresh()
        c.memory.erase(["t1"], namespace=conv.namespace, reason="user asked")
        assert "t1" not in _ids(conv.turns())


# -- window ----------------------------------------------------------------------------------------


def test_window_is_chronological_whatever_the_write_order(container: Container[Any]) -> None:
    """Turns appended out of time order come back by timestamp."""
    conv = container.conversation("c")
    conv.append(list(reversed(_turns(4))))
    assert _ids(conv.window()) == ["t0", "t1", "t2", "t3"]


def test_window_last_n(conv: Conversation) -> None:
    """last=N gives the last N turns, oldest first."""
    assert _ids(conv.window(last=3)) == ["t5", "t6", "t7"]


def test_window_filters_first_then_last_n(conv: Conversation) -> None:
    """roles, speakers and sessions filter first; last=N then takes the last N matching turns."""
    assert _ids(conv.window(last=2, roles=["user"])) == ["t4", "t6"]
    assert _ids(conv.window(last=3, speakers=["bot"], sessions=["s1"])) == ["t1", "t3"]


def test_window_last_zero_is_empty(conv: Conversation) -> None:
    """last=0 gives no turns."""
    assert conv.window(last=0) == []


def test_token_budget_keeps_the_newest_that_fit(conv: Conversation) -> None:
    """A token budget keeps the newest turns whose lines fit, oldest first in the result."""
    kept = conv.window(token_budget=40)
    assert kept and _ids(kept) == _ids(conv.window())[-len(kept) :]
    assert 1 < len(kept) < 8


def test_token_budget_always_keeps_the_newest(conv: Conversation) -> None:
    """A budget too small for any turn still keeps the newest one."""
    assert _ids(conv.window(token_budget=1)) == ["t7"]


def test_token_budget_uses_the_estimator(conv: Conversation) -> None:
    """An estimator counting lines keeps as many turns as the budget allows lines (one for the
    omitted line)."""
    kept = conv.window(token_budget=3, estimator=lambda text: text.count("\n") + 1)
    assert _ids(kept) == ["t6", "t7"]


def test_until_a_turn_ends_the_window_before_it(conv: Conversation) -> None:
    """until=turn id gives the turns before that turn; with last, the last N of them."""
    assert _ids(conv.window(until="t5", last=2)) == ["t3", "t4"]


def test_until_a_seq_reads_the_conversation_as_of_it(container: Container[Any]) -> None:
    """until=seq gives the turns written at or before that seq."""
    conv = container.conversation("c")
    first = conv.append(_turns(3))
    conv.append(_turns(3, start=3))
    assert _ids(conv.window(until=first[-1])) == ["t0", "t1", "t2"]


def test_policies_compose_like_the_keywords(conv: Conversation) -> None:
    """Chain(RoleFilter, LastN, TokenBudget) gives what the keyword arguments give."""
    chained = conv.window(Chain(RoleFilter(["assistant"]), LastN(3), TokenBudget(20)))
    assert chained == conv.window(roles=["assistant"], last=3, token_budget=20)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"roles": ["wizard"]}, "roles"),
        ({"roles": "user"}, "roles"),
        ({"speakers": [""]}, "speakers"),
        ({"last": -1}, "last"),
        ({"token_budget": 0}, "token_budget"),
        ({"until": "nope"}, "until"),
        ({"until": 10_000}, "until"),
    ],
)
def test_bad_window_arguments_name_the_argument(conv: Conversation, kwargs: dict[str, Any], named: str) -> None:
    """An unknown role, a bare string for a list, an empty speaker, a negative last, a zero budget,
    an unknown turn or a seq past the head: ContractError naming the argument."""
    with pytest.raises(ContractError, match=named):
        conv.window(**kwargs)


def test_bad_conversation_name_is_refused(container: Container[Any]) -> None:
    """An empty conversation name is refused naming conversation."""
    with pytest.raises(ContractError, match="conversation"):
        container.conversation("")


# -- context ---------------------------------------------------------------------------------------


def test_context_renders_chronologically_with_an_omitted_line(conv: Conversation) -> None:
    """context renders the newest turns that fit, oldest first, after the line for the omitted
    ones; tokens is the estimate of the text and within the budget."""
    block = conv.context(token_budget=40)
    lines = block.text.splitlines()
    assert lines[0] == f"[... {block.omitted} earlier turns omitted ...]" and block.omitted > 0
    assert lines[-1].endswith("bot (assistant): turn number 7")
    assert [h.note.id for h in block.hits] == _ids(conv.window())[block.omitted :]
    assert block.tokens == estimate_tokens(block.text) <= 40


def test_context_always_renders_the_newest_turn(conv: Conversation) -> None:
    """With a budget of one token the newest turn still renders."""
    block = conv.context(token_budget=1)
    assert [h.note.id for h in block.hits] == ["t7"] and block.omitted == 7


# -- recall ----------------------------------------------------------------------------------------


def test_recall_equals_the_engines_ask_on_the_same_notes(container: Container[Any], conv: Conversation) -> None:
    """recall gives the hits engine.ask gives on the conversation's namespace, same order and scores."""
    conv.append([Turn(id="tea", speaker="alice", text="I drink green tea every morning", timestamp=2000.0)])
    hits = conv.recall("green tea", k=4)
    asked = container.engine.ask("green tea", namespace=conv.namespace).hits[:4]
    assert [(h.id, h.score) for h in hits] == [(h.note.id, h.score) for h in asked]
    assert hits[0].id == "tea"


def test_recall_hits_name_turn_speaker_and_session(conv: Conversation) -> None:
    """Each hit names its turn id, speaker and session, and carries the version."""
    hit = conv.recall("turn number 3", k=1, strategy="keyword")[0]
    assert (hit.id, hit.speaker, hit.session) == ("t3", "bot", "s1")
    assert hit.turn.version is not None


def test_recall_filters_by_speaker(conv: Conversation) -> None:
    """speakers= keeps only that speaker's turns."""
    assert {h.speaker for h in conv.recall("turn number", k=8, speakers=["alice"])} == {"alice"}


def test_ask_across_conversations_under_a_prefix(container: Container[Any]) -> None:
    """engine.ask with prefix (*namespace, 'conversations') ranks turns of every conversation."""
    container.conversation("a", namespace=("u",)).append([Turn(id="x", speaker="s", text="blue whale", timestamp=1)])
    container.conversation("b", namespace=("u",)).append([Turn(id="y", speaker="s", text="blue sky", timestamp=2)])
    hits = container.engine.ask("blue", prefix=("u", "conversations")).hits
    assert {h.note.id for h in hits} == {"x", "y"}


# -- state -----------------------------------------------------------------------------------------


def _collect(state: list[str], turn: Turn) -> list[str]:
    return [*state, turn.id]


def test_full_fold_sees_every_turn_in_write_order(container: Container[Any]) -> None:
    """The full fold sees the turns in the order they were written, not by timestamp."""
    conv = container.conversation("c")
    conv.append(list(reversed(_turns(3))))
    state = conv.state([], _collect)
    assert state.value == ["t2", "t1", "t0"] and state.turns == 3


def test_last_n_folds_the_last_turns_written(conv: Conversation) -> None:
    """Last(n) folds the last n turns written, from init."""
    assert conv.state([], _collect, bound=Last(2)).value == ["t6", "t7"]
    assert conv.state([], _collect, bound=Last(0)).value == []


def test_from_seq_folds_turns_of_that_version_on(conv: Conversation) -> None:
    """FromSeq(s) folds the turns of version >= s."""
    versions = [t.version for t in conv.turns()]
    assert conv.state([], _collect, bound=FromSeq(versions[5] or 0)).value == ["t5", "t6", "t7"]


def test_fold_from_a_checkpoint_equals_the_full_fold(conv: Conversation) -> None:
    """A checkpoint taken, more turns appended, then a fold from the checkpoint equals the full fold."""
    cp = conv.state([], _collect).checkpoint()
    conv.append(_turns(3, start=8))
    resumed = conv.state(None, _collect, bound=FromCheckpoint(cp))
    full = conv.state([], _collect)
    assert resumed.value == full.value and resumed.turns == full.turns == 11
    assert resumed.next_seq == full.next_seq


def test_at_a_checkpoint_gives_the_state_then(conv: Conversation) -> None:
    """At(cp) folds again from init the turns written before the checkpoint: its state."""
    cp = conv.state([], _collect).checkpoint()
    conv.append(_turns(2, start=8))
    assert conv.state([], _collect, bound=At(cp)).value == cp.state


def test_checkpoint_survives_reopen(tmp_path: Path) -> None:
    """A checkpoint kept in a StateStore is read back after the store is reopened and resumes the
    fold to the full fold's value."""
    path = tmp_path / "s"
    with Container(memory="log", path=path) as c:
        conv = c.conversation("c")
        conv.append(_turns(4))
        StateStore(c.memory).set("cp", conv.state([], _collect).checkpoint().to_dict())
    with Container(memory="log", path=path) as c:
        conv = c.conversation("c")
        conv.append(_turns(2, start=4))
        cp = Checkpoint.from_dict(StateStore(c.memory).get("cp"))
        assert conv.state([], _collect, bound=FromCheckpoint(cp)).value == conv.state([], _collect).value


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 5), min_size=0, max_size=12), st.integers(0, 12))
def test_property_fold_from_checkpoint_equals_full_fold(words: list[int], cut: int) -> None:
    """For any turns and any point, fold(prefix) -> checkpoint -> fold(rest) equals the full fold."""
    with Container() as c:
        conv = c.conversation("p")
        turns = [Turn(id=f"t{i}", speaker="s", text=f"w{w}", timestamp=float(w)) for i, w in enumerate(words)]
        cut = min(cut, len(turns))

        def fold(state: dict[str, int], turn: Turn) -> dict[str, int]:
            return {**state, turn.text: state.get(turn.text, 0) * 2 + 1}

        conv.append(turns[:cut])
        cp = conv.state({}, fold).checkpoint()
        conv.append(turns[cut:])
        assert conv.state({}, fold, bound=FromCheckpoint(cp)).value == conv.state({}, fold, bound=Full()).value


def test_bound_past_the_head_is_refused(conv: Conversation) -> None:
    """FromSeq past the head + 1 is refused naming bound.seq."""
    head = max(t.version or 0 for t in conv.turns())
    with pytest.raises(ContractError, match=r"bound\.seq"):
        conv.state([], _collect, bound=FromSeq(head + 2))


def test_checkpoint_of_another_conversation_is_refused(container: Container[Any], conv: Conversation) -> None:
    """A checkpoint of another conversation is refused naming bound.checkpoint."""
    other = container.conversation("other")
    other.append(_turns(1, start=50))
    cp = other.state([], _collect).checkpoint()
    with pytest.raises(ContractError, match=r"bound\.checkpoint.*conversation"):
        conv.state([], _collect, bound=FromCheckpoint(cp))


def test_checkpoint_of_another_store_is_refused(conv: Conversation) -> None:
    """A checkpoint of another store is refused naming bound.checkpoint and the store."""
    cp = conv.state([], _collect).checkpoint()
    forged = Checkpoint(conversation=cp.conversation, store="elsewhere", next_seq=cp.next_seq, state=cp.state)
    with pytest.raises(ContractError, match=r"bound\.checkpoint.*store"):
        conv.state([], _collect, bound=At(forged))


def test_a_fold_that_raises_is_a_fold_error_naming_the_turn(container: Container[Any], conv: Conversation) -> None:
    """A fold raising on a turn gives FoldError (a ContractError) naming it; nothing is written."""
    def fold(state: int, turn: Turn) -> int:
        if turn.id == "t3":
            raise KeyError("boom")
        return state + 1

    with pytest.raises(FoldError, match="'t3'"):
        conv.state(0, fold)
    assert _count(container, conv) == 8


def test_checkpoint_of_a_non_json_state_is_refused(conv: Conversation) -> None:
    """A state that is not JSON cannot be checkpointed: ContractError naming state."""
    state = conv.state(set(), lambda s, t: s | {t.id})
    with pytest.raises(ContractError, match="state"):
        state.checkpoint()


@pytest.mark.parametrize(("make", "named"), [(lambda: Last(-1), r"bound\.n"), (lambda: FromSeq(0), r"bound\.seq")])
def test_bad_bound_values_are_refused(make: Any, named: str) -> None:
    """Last(-1) and FromSeq(0) are refused naming the bound's field."""
    with pytest.raises(ContractError, match=named):
        make()


def test_checkpoint_past_the_head_is_refused(conv: Conversation) -> None:
    """A checkpoint whose next_seq lies past the conversation's head is refused naming bound.checkpoint."""
    cp = conv.state([], _collect).checkpoint()
    ahead = Checkpoint(conversation=cp.conversation, store=cp.store, next_seq=cp.next_seq + 5, state=[])
    with pytest.raises(ContractError, match=r"bound\.checkpoint\.next_seq"):
        conv.state([], _collect, bound=FromCheckpoint(ahead))


def test_a_bound_that_is_not_one_is_refused(conv: Conversation) -> None:
    """A bound of another type is refused naming bound."""
    with pytest.raises(ContractError, match="bound"):
        conv.state([], _collect, bound=3)  # type: ignore[arg-type]


@settings(max_examples=8, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=8), st.integers(0, 8))
def test_property_fold_from_checkpoint_equals_full_fold_on_a_log_store(words: list[int], cut: int) -> None:
    """The same property on a LogBackend, the checkpoint carried through its dict form."""
    import tempfile

    with tempfile.TemporaryDirectory() as d, Container(memory="log", path=Path(d) / "s") as c:
        conv = c.conversation("p")
        turns = [Turn(id=f"t{i}", speaker="s", text=f"w{w}", timestamp=float(i)) for i, w in enumerate(words)]
        conv.append(turns[: min(cut, len(turns))])
        cp = Checkpoint.from_dict(conv.state([], _collect).checkpoint().to_dict())
        conv.append(turns[min(cut, len(turns)) :])
        assert conv.state(None, _collect, bound=FromCheckpoint(cp)).value == conv.state([], _collect).value
