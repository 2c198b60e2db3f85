"""ContinuityEngine.revert / coniti revert: the compensating writes that make a namespace's records
now what they were at an earlier point (a property over random histories), history untouched, and
bad input refused with nothing written."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from cli_support import Cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti import Container, Note
from coniti.errors import ContractError
from coniti.memory import MemoryRecord

IDS = ["a", "b", "c", "d"]
OPS = st.lists(
    st.tuples(st.sampled_from(["upsert", "remove", "other"]), st.sampled_from(IDS), st.integers(0, 3)),
    min_size=1, max_size=14,
)


def _records(memory: object, namespace: tuple[str, ...]) -> dict[str, MemoryRecord]:
    return {r.id: r for r in memory.iter_all(namespace=namespace)}  # type: ignore[attr-defined]


def _same(a: dict[str, MemoryRecord], b: dict[str, MemoryRecord]) -> bool:
    return a.keys() == b.keys() and all(a[k].identical(b[k]) for k in a)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, cut=st.floats(0, 1))
def test_after_a_revert_the_namespace_is_what_it_was_at_the_point(ops: list[tuple[str, str, int]], cut: float) -> None:
    """For random upserts and removals in two namespaces, revert(to=SEQ) makes the records of the
    namespace at the head identical to its records at SEQ; the other namespace is untouched and
    every event up to the old head keeps its hash."""
    ns, other = ("work",), ("home",)
    with tempfile.TemporaryDirectory() as tmp, Container(
        memory="log", path=Path(tmp) / "s", embedding="local_hash"
    ) as c:
        engine, memory = c.engine, c.memory
        for kind, rid, n in ops:
            if kind == "upsert":
                engine.upsert(Note(id=rid, text=f"{rid} says {n}", timestamp=float(n), metadata={"n": n}), namespace=ns)
            elif kind == "remove":
                engine.remove([rid], namespace=ns)
            else:
                engine.upsert(Note(id=rid, text=f"home {n}", timestamp=1.0), namespace=other)
        head = memory.head
        to = int(cut * head)
        hashes = [e.hash for e in memory.events()]
        others = _records(memory, other)
        engine.revert(to=to, namespace=ns, reason="undo")
        assert _same(_records(memory, ns), _records(memory.at(to), ns))
        assert _same(_records(memory, other), others)
        assert [e.hash for e in memory.events(until=head)] == hashes
        assert all(e.reason == "undo" for e in memory.events(after=head))


def test_revert_brings_the_engine_along(tmp_path: Path) -> None:
    """After a revert the engine's recall finds the restored note and not the removed one."""
    with Container(memory="log", path=tmp_path / "s", embedding="local_hash") as c:
        c.engine.upsert(Note(id="a", text="the cat sleeps on the sofa", timestamp=1.0))
        point = c.memory.head
        c.engine.remove(["a"])
        c.engine.upsert(Note(id="b", text="the dog barks at the mailman", timestamp=2.0))
        c.engine.revert(to=point, reason="undo")
        assert [h.note.id for h in c.engine.ask("cat sofa").hits] == ["a"]


def test_a_revert_past_the_head_or_without_a_reason_writes_nothing(tmp_path: Path) -> None:
    """to past the head, or an empty reason: ContractError in one line, no event appended."""
    with Container(memory="log", path=tmp_path / "s", embedding="local_hash") as c:
        c.engine.upsert(Note(id="a", text="x", timestamp=1.0))
        head = c.memory.head
        with pytest.raises(ContractError) as caught:
            c.engine.revert(to=head + 1, reason="undo")
        assert str(caught.value) == f"revert point to must be a seq between 0 and the head ({head}), got {head + 1}"
        with pytest.raises(ContractError, match="revert needs a reason"):
            c.engine.revert(to=0, reason=" ")
        assert c.memory.head == head


def test_coniti_revert(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """coniti revert --to SEQ --reason R --json: the namespace's records are those of SEQ again."""
    cli = Cli(tmp_path / "store", capsys, monkeypatch)
    cli.ok("add", "Alice likes tea", "--ns", "alice", "--id", "a")
    point = cli.ok("stats", "--json").json()["head_seq"]
    cli.ok("add", "Alice moved to Lyon", "--ns", "alice", "--id", "c")
    cli.ok("rm", "a", "--ns", "alice")
    result = cli.ok("revert", "--to", str(point), "--ns", "alice", "--reason", "mistake", "--json").json()
    assert (sorted(result["written"]), sorted(result["deleted"])) == (["a"], ["c"])
    assert [r["id"] for r in cli.ok("ls", "--ns", "alice", "--json").lines()] == ["a"]
    refused = cli("revert", "--to", "999", "--ns", "alice", "--reason", "x")
    assert refused.code == 1 and "revert point to must be a seq between 0 and the head" in refused.err
