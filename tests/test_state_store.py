"""StateStore: JSON values by key, namespaced, versioned with compare-and-set, audited on a log store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coniti import StateStore
from coniti.errors import ContractError, NotSupported, VersionConflict
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.memory import MemoryBackend


@pytest.fixture(params=["log", "memory"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryBackend]:
    backend: MemoryBackend = LogBackend(tmp_path / "s") if request.param == "log" else InMemoryBackend()
    yield backend
    backend.close()


def test_set_then_get_gives_the_value(memory: MemoryBackend) -> None:
    """A value set is read back equal; an unset key gives the default."""
    store = StateStore(memory)
    store.set("offset", {"partition": 3, "next": [1, 2.5, None]})
    assert store.get("offset") == {"partition": 3, "next": [1, 2.5, None]}
    assert store.get("missing", "dflt") == "dflt"


def test_set_returns_increasing_versions(memory: MemoryBackend) -> None:
    """Each set returns the new live version, greater than the one before."""
    store = StateStore(memory)
    first = store.set("k", 1)
    second = store.set("k", 2)
    assert second > first and store.version("k") == second


def test_keys_are_sorted_and_filtered_by_prefix(memory: MemoryBackend) -> None:
    """keys() lists the keys set, sorted; a prefix narrows them."""
    store = StateStore(memory)
    for key in ("b/2", "a", "b/1"):
        store.set(key, True)
    assert store.keys() == ["a", "b/1", "b/2"] and store.keys("b/") == ["b/1", "b/2"]


def test_delete_removes_the_key(memory: MemoryBackend) -> None:
    """delete returns True for a set key and the key is gone; False for an unset one."""
    store = StateStore(memory)
    store.set("k", 1)
    assert store.delete("k") is True and store.get("k") is None and store.keys() == []
    assert store.delete("k") is False


def test_compare_and_set_refuses_a_stale_version(memory: MemoryBackend) -> None:
    """set with expected_version other than the live one raises VersionConflict; the value stays."""
    store = StateStore(memory)
    v = store.set("k", "first")
    store.set("k", "second", expected_version=v)
    with pytest.raises(VersionConflict):
        store.set("k", "third", expected_version=v)
    assert store.get("k") == "second"


def test_expected_none_creates_only(memory: MemoryBackend) -> None:
    """expected_version=None sets only a key that is not set."""
    store = StateStore(memory)
    store.set("k", 1, expected_version=None)
    with pytest.raises(VersionConflict):
        store.set("k", 2, expected_version=None)
    assert store.get("k") == 1


def test_compare_and_delete_refuses_a_stale_version(memory: MemoryBackend) -> None:
    """delete with a stale expected_version raises VersionConflict and keeps the key."""
    store = StateStore(memory)
    v = store.set("k", 1)
    store.set("k", 2)
    with pytest.raises(VersionConflict):
        store.delete("k", expected_version=v)
    assert store.get("k") == 2


def test_namespaces_are_separate(memory: MemoryBackend) -> None:
    """Two stores of different namespaces on one backend do not see each other's keys."""
    a, b = StateStore(memory, namespace=("a",)), StateStore(memory, namespace=("b",))
    a.set("k", "in a")
    assert b.get("k") is None and b.keys() == [] and a.keys() == ["k"]


@pytest.mark.parametrize(("key", "value", "named"), [("", 1, "key"), ("k", {1, 2}, "value"), ("k", float("nan"), "value")])
def test_bad_key_or_value_is_refused_and_nothing_written(
    memory: MemoryBackend, key: str, value: object, named: str
) -> None:
    """An empty key, a value that is not JSON or not finite: ContractError naming it; nothing written."""
    store = StateStore(memory)
    with pytest.raises(ContractError, match=named):
        store.set(key, value)
    assert store.keys() == []


def test_bad_expected_version_is_refused(memory: MemoryBackend) -> None:
    """expected_version=0 is refused naming expected_version."""
    with pytest.raises(ContractError, match="expected_version"):
        StateStore(memory).set("k", 1, expected_version=0)


def test_changes_are_audited_events_on_a_log_store(tmp_path: Path) -> None:
    """On a log store each change is an event with its actor and reason, and the value as of an
    earlier point is readable."""
    with LogBackend(tmp_path / "s") as memory:
        store = StateStore(memory)
        first = store.set("k", 1, actor="agent", reason="start")
        store.set("k", 2, actor="agent", reason="advance")
        events = memory.history("k", namespace=("state",))
        assert [(e.kind, e.actor, e.reason) for e in events] == [
            ("put", "agent", "start"), ("put", "agent", "advance")
        ]
        assert StateStore(memory.at(first)).get("k") == 1


def test_values_survive_reopen(tmp_path: Path) -> None:
    """A value set on a log store is read back after reopening it."""
    with LogBackend(tmp_path / "s") as memory:
        StateStore(memory).set("cursor", 42)
    with LogBackend(tmp_path / "s") as memory:
        assert StateStore(memory).get("cursor") == 42


def test_actor_on_a_backend_without_audit_is_refused() -> None:
    """The in-memory backend keeps no audit trail: an actor is refused and nothing is written."""
    store = StateStore(InMemoryBackend())
    with pytest.raises(NotSupported):
        store.set("k", 1, actor="me")
    assert store.keys() == []
