"""Audit stamping: who and why on every event, through threads, asyncio tasks and the async twins."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from coniti.errors import DuplicateRecord
from coniti.impl.log import LogBackend
from coniti.memory import ClearRequest, DeleteRequest, MetaSetRequest, PutRequest
from coniti.testing.helpers import put, record


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LogBackend]:
    backend = LogBackend(tmp_path / "store", actor="default-actor")
    yield backend
    backend.close()


def _stamps(store: LogBackend) -> list[tuple[str | None, str | None, str | None]]:
    return [(e.id or e.key, e.actor, e.reason) for e in store.events()]


def test_default_actor_is_stamped_outside_blocks(tmp_path: Path) -> None:
    """Events outside any audit block carry the store's actor (None when not set) and no reason."""
    with LogBackend(tmp_path / "a", actor="svc") as a, LogBackend(tmp_path / "b") as b:
        put(a, record("x"))
        put(b, record("y"))
        assert _stamps(a) == [("x", "svc", None)]
        assert _stamps(b) == [("y", None, None)]


def test_every_kind_of_write_is_stamped(store: LogBackend) -> None:
    """put, delete, set_meta and clear inside a block all carry its actor and reason."""
    with store.audit(actor="alice", reason="ticket 7"):
        put(store, record("x"))
        store.set_meta(MetaSetRequest(key="k", value=1))
        store.delete(DeleteRequest(ids=["x"]))
        store.clear(ClearRequest())
    assert {(e.kind, e.actor, e.reason) for e in store.events()} == {
        ("put", "alice", "ticket 7"), ("meta", "alice", "ticket 7"),
        ("delete", "alice", "ticket 7"), ("clear", "alice", "ticket 7"),
    }


def test_inner_block_wins_and_outer_is_restored(store: LogBackend) -> None:
    """Nested blocks: the innermost stamps; leaving it restores the outer one, then the default."""
    with store.audit(actor="outer", reason="r1"):
        put(store, record("1"))
        with store.audit(actor="inner", reason="r2"):
            put(store, record("2"))
        put(store, record("3"))
    put(store, record("4"))
    assert _stamps(store) == [
        ("1", "outer", "r1"), ("2", "inner", "r2"), ("3", "outer", "r1"), ("4", "default-actor", None)
    ]


def test_block_with_reason_only_keeps_actor_none(store: LogBackend) -> None:
    """audit(reason=...) without an actor stamps actor None (the block replaces the default)."""
    with store.audit(reason="cleanup"):
        put(store, record("x"))
    assert _stamps(store) == [("x", None, "cleanup")]


def test_block_left_by_an_exception_is_undone(store: LogBackend) -> None:
    """An exception leaving the block restores the previous stamp; the failed write appended nothing."""
    put(store, record("x"))
    with pytest.raises(DuplicateRecord), store.audit(actor="mallory"):
        put(store, record("x"))
    put(store, record("y"))
    assert _stamps(store) == [("x", "default-actor", None), ("y", "default-actor", None)]


def test_block_applies_to_other_handles_on_the_same_store(store: LogBackend) -> None:
    """A block on one handle stamps writes through another handle on the same path."""
    other = LogBackend(store.path)
    try:
        with store.audit(actor="alice"):
            put(other, record("x"))
    finally:
        other.close()
    assert _stamps(store) == [("x", "alice", None)]


def test_block_does_not_leak_into_another_store(tmp_path: Path, store: LogBackend) -> None:
    """A block on one store leaves writes to another store with that store's default."""
    with LogBackend(tmp_path / "other", actor="other-default") as other, store.audit(actor="alice"):
        put(other, record("x"))
        put(store, record("y"))
    with LogBackend(tmp_path / "other") as other:
        assert _stamps(other) == [("x", "other-default", None)]
    assert _stamps(store) == [("y", "alice", None)]


def test_threads_stamp_their_own_events(store: LogBackend) -> None:
    """Eight threads, each in its own block, writing interleaved: each event carries its thread's
    actor; a thread without a block gets the default."""
    barrier = threading.Barrier(9)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            barrier.wait()
            if n == 8:
                for i in range(20):
                    put(store, record(f"t{n}-{i}"))
                return
            with store.audit(actor=f"thread-{n}", reason=f"job {n}"):
                for i in range(20):
                    put(store, record(f"t{n}-{i}"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    events = list(store.events())
    assert len(events) == 180
    for e in events:
        n = int(e.id.split("-")[0][1:])  # type: ignore[union-attr]
        want = ("default-actor", None) if n == 8 else (f"thread-{n}", f"job {n}")
        assert (e.actor, e.reason) == want, e


def test_async_twins_carry_the_block_of_their_task(store: LogBackend) -> None:
    """Concurrent asyncio tasks, each in its own block, write through aput/adelete/aset_meta/aclear
    (worker threads): every event carries its task's stamp."""

    async def task(n: int) -> None:
        with store.audit(actor=f"task-{n}", reason="async"):
            for i in range(5):
                await store.aput(PutRequest(records=[record(f"a{n}-{i}", namespace=(f"n{n}",))]))
                await asyncio.sleep(0)
            await store.adelete(DeleteRequest(ids=[f"a{n}-0"], namespace=(f"n{n}",)))
            await store.aset_meta(MetaSetRequest(key="k", value=n, namespace=(f"n{n}",)))
            await store.aclear(ClearRequest(namespace=(f"n{n}",)))

    async def main() -> None:
        await asyncio.gather(*(task(n) for n in range(6)))

    asyncio.run(main())
    events = list(store.events())
    assert len(events) == 6 * 8
    for e in events:
        assert (e.actor, e.reason) == (f"task-{e.namespace[0][1:]}", "async"), e


def test_async_block_ends_with_its_task(store: LogBackend) -> None:
    """After a task's block ends, a later write in the same task gets the default again."""

    async def main() -> None:
        with store.audit(actor="in-block"):
            await store.aput(PutRequest(records=[record("x")]))
        await store.aput(PutRequest(records=[record("y")]))

    asyncio.run(main())
    assert _stamps(store) == [("x", "in-block", None), ("y", "default-actor", None)]


def test_stamps_survive_reopen_and_history_shows_them(tmp_path: Path) -> None:
    """Stamps are stored in the events: after reopening, history() names who changed a record."""
    with LogBackend(tmp_path / "s") as store:
        with store.audit(actor="alice", reason="import"):
            put(store, record("x", 1.0))
        with store.audit(actor="bob", reason="GDPR request 12"):
            store.delete(DeleteRequest(ids=["x"]))
    with LogBackend(tmp_path / "s") as store:
        assert [(e.kind, e.actor, e.reason) for e in store.history("x")] == [
            ("put", "alice", "import"), ("delete", "bob", "GDPR request 12")
        ]


def test_the_audit_module_does_not_import_the_backend() -> None:
    """coniti.impl.log_audit imports nothing of coniti.impl.log, not even for type checking: the
    backend depends on the audit functions, which take the EventLog they read."""
    import ast

    import coniti.impl.log_audit

    tree = ast.parse(Path(coniti.impl.log_audit.__file__).read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    assert "coniti.log" in names  # the walk sees the module's imports
    assert not [n for n in names if n == "coniti.impl.log" or n.startswith("coniti.impl.log.")]
