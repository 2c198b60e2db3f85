"""diff(a, b): record ids added, removed and changed between two points of a LogBackend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coniti.errors import ContractError
from coniti.events import Diff
from coniti.impl.log import LogBackend
from coniti.memory import ClearRequest, DeleteRequest, MetaSetRequest
from coniti.testing.helpers import put, record


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LogBackend]:
    backend = LogBackend(tmp_path / "store")
    yield backend
    backend.close()


def _d(diff: Diff) -> tuple[list[str], list[str], list[str]]:
    return diff.added, diff.removed, diff.changed


def test_added_and_removed(store: LogBackend) -> None:
    """Ids put between the points are added; ids deleted between them are removed."""
    put(store, record("a"), record("b"))  # 1, 2
    store.delete(DeleteRequest(ids=["a"]))  # 3
    put(store, record("c"))  # 4
    assert _d(store.diff(2, 4)) == (["c"], ["a"], [])
    assert _d(store.diff(0, 2)) == (["a", "b"], [], [])


def test_reversed_points_swap_added_and_removed(store: LogBackend) -> None:
    """diff(b, a) is diff(a, b) with added and removed swapped."""
    put(store, record("a"), record("b"))
    store.delete(DeleteRequest(ids=["a"]))
    put(store, record("c"))
    forward, backward = store.diff(2, 4), store.diff(4, 2)
    assert (backward.added, backward.removed, backward.changed) == (
        forward.removed, forward.added, forward.changed
    )
    assert (backward.a, backward.b) == (4, 2)


def test_replaced_record_with_new_content_is_changed(store: LogBackend) -> None:
    """A record deleted and put again with other text (or timestamp, metadata, vector) is changed."""
    put(store, record("t"), record("ts", 1.0), record("m", metadata={"x": 1}), record("v"))
    store.delete(DeleteRequest(ids=["t", "ts", "m", "v"]))
    put(
        store,
        record("t", text="new"),
        record("ts", 2.0),
        record("m", metadata={"x": 1.0}),
        record("v", vector=[1.0, 0.5, -0.5]),
    )
    assert _d(store.diff(4, store.head)) == ([], [], ["m", "t", "ts", "v"])


def test_replaced_record_with_same_content_is_not_changed(store: LogBackend) -> None:
    """A record deleted and put again identically is neither added, removed nor changed."""
    put(store, record("a", 1.0, metadata={"k": [1, 2]}))
    store.delete(DeleteRequest(ids=["a"]))
    put(store, record("a", 1.0, metadata={"k": [1, 2]}))
    assert store.diff(1, 3).empty


def test_record_gone_and_back_is_judged_by_its_ends(store: LogBackend) -> None:
    """Only the two points matter: put after a, deleted before b gives nothing."""
    put(store, record("keep"))
    put(store, record("x"))
    store.delete(DeleteRequest(ids=["x"]))
    assert store.diff(1, 3).empty


def test_clear_between_the_points_removes_every_record(store: LogBackend) -> None:
    """A clear between the points removes every record visible at the first one."""
    put(store, *[record(f"r{i}", float(i)) for i in range(5)])
    store.clear(ClearRequest())
    put(store, record("r2", 2.0))
    assert _d(store.diff(5, 7)) == ([], ["r0", "r1", "r3", "r4"], [])


def test_namespaces_are_separate(store: LogBackend) -> None:
    """diff compares one namespace; changes elsewhere do not show."""
    put(store, record("a", namespace=("x",)))
    put(store, record("b"))
    store.clear(ClearRequest(namespace=("x",)))
    assert _d(store.diff(0, 3)) == (["b"], [], [])
    assert _d(store.diff(0, 3, namespace=("x",))) == ([], [], [])
    assert _d(store.diff(1, 3, namespace=("x",))) == ([], ["a"], [])
    assert store.diff(0, 3, namespace=("never",)).empty


def _spread(store: LogBackend) -> None:
    """Changes in four namespaces between events 4 and 9 (and none in ("quiet",)): one added in
    bob/home, one removed in alice, one changed in team/atlas, a clear in x."""
    put(store, record("a1", namespace=("alice",)), record("t1", namespace=("team", "atlas")))  # 1, 2
    put(store, record("x1", namespace=("x",)), record("q1", namespace=("quiet",)))  # 3, 4
    put(store, record("b1", namespace=("bob", "home")))  # 5
    store.delete(DeleteRequest(ids=["a1"], namespace=("alice",)))  # 6
    store.delete(DeleteRequest(ids=["t1"], namespace=("team", "atlas")))  # 7
    put(store, record("t1", namespace=("team", "atlas"), text="moved"))  # 8
    store.clear(ClearRequest(namespace=("x",)))  # 9


def test_diff_all_covers_every_namespace(store: LogBackend) -> None:
    """diff_all gives one Diff per namespace with a change, sorted, each equal to diff of that
    namespace; namespaces without a change are left out."""
    _spread(store)
    found = store.diff_all(4, 9)
    assert [d.namespace for d in found] == [("alice",), ("bob", "home"), ("team", "atlas"), ("x",)]
    for d in found:
        assert d == store.diff(4, 9, namespace=d.namespace)
    assert [_d(d) for d in found] == [([], ["a1"], []), (["b1"], [], []), ([], [], ["t1"]), ([], ["x1"], [])]


def test_diff_all_under_a_prefix(store: LogBackend) -> None:
    """diff_all with a prefix covers that namespace and those under it only."""
    _spread(store)
    assert [d.namespace for d in store.diff_all(0, 9, prefix=("team",))] == [("team", "atlas")]
    assert store.diff_all(4, 9, prefix=("quiet",)) == [] and store.diff_all(9, 9) == []


def test_metadata_writes_are_not_record_changes(store: LogBackend) -> None:
    """set_meta between the points changes no record."""
    put(store, record("a"))
    store.set_meta(MetaSetRequest(key="k", value=1))
    assert store.diff(1, 2).empty


def test_same_point_is_empty(store: LogBackend) -> None:
    """diff(a, a) is empty."""
    put(store, record("a"))
    assert store.diff(1, 1).empty and store.diff(0, 0).empty


def test_diff_agrees_with_views(store: LogBackend) -> None:
    """For every pair of points, added/removed equal the set differences of the views' ids."""
    put(store, *[record(f"r{i}", float(i)) for i in range(4)])
    store.delete(DeleteRequest(ids=["r1", "r3"]))
    put(store, record("r1", 5.0, text="again"))
    store.clear(ClearRequest())
    put(store, record("r3", 0.0))
    head = store.head
    visible = [{r.id for r in store.at(s).iter_all()} for s in range(head + 1)]
    for a in range(head + 1):
        for b in range(head + 1):
            d = store.diff(a, b)
            assert set(d.added) == visible[b] - visible[a]
            assert set(d.removed) == visible[a] - visible[b]
            assert set(d.changed) <= visible[a] & visible[b]


def test_diff_is_a_contract(store: LogBackend) -> None:
    """Diff round-trips through JSON and names its points and namespace."""
    put(store, record("a", namespace=("n",)))
    d = store.diff(0, 1, namespace=("n",))
    assert Diff.from_json(d.to_json()) == d
    assert d.to_dict() == {"a": 0, "b": 1, "namespace": ["n"], "added": ["a"], "removed": [], "changed": []}


@pytest.mark.parametrize(("a", "b", "field"), [(-1, 0, "a"), (0, 5, "b"), (1.0, 0, "a"), (0, None, "b")])
def test_points_out_of_range_are_refused(store: LogBackend, a: object, b: object, field: str) -> None:
    """A point that is negative, beyond the head or not an integer raises ContractError naming it."""
    put(store, record("a"))
    with pytest.raises(ContractError, match=f"^{field} "):
        store.diff(a, b)  # type: ignore[arg-type]
