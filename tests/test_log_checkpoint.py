"""Signed checkpoints of a store (``LogBackend.checkpoint`` / ``verify_checkpoint``): kept in the log
as audited events, verified after reopen, export/import and compaction, and refused for another key,
another origin or a history that does not extend them (import included: nothing created)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_log import rec

from coniti.checkpoint import Checkpoint, generate_key
from coniti.errors import CheckpointError
from coniti.impl.log import LogBackend
from coniti.impl.proving import CHECKPOINT_KEY, CHECKPOINTS
from coniti.memory import PutRequest

SIGNER, VERIFIER = generate_key("example.org/memory")


def _store(path: Path, n: int, prefix: str = "r") -> LogBackend:
    store = LogBackend(path, durability="nosync")
    for i in range(n):
        store.put(PutRequest(records=[rec(f"{prefix}{i}", ts=float(i))]))
    return store


def test_a_checkpoint_signs_the_head_and_is_kept_as_an_audited_event(tmp_path: Path) -> None:
    """checkpoint() signs (origin, head, root) and appends it as the next event, stamped with the
    audit block's actor and reason; verify_checkpoint() accepts it."""
    with _store(tmp_path / "s", 5) as store:
        size, root = store.root()
        with store.audit(actor="ops", reason="nightly"):
            note = store.checkpoint(SIGNER)
        assert store.head == 6
        [event] = store.events(after=5)
        assert (event.kind, event.namespace, event.key, event.actor, event.reason) == (
            "meta", CHECKPOINTS, CHECKPOINT_KEY, "ops", "nightly"
        )
        assert store.checkpoints() == [(6, note)]
        assert store.verify_checkpoint(note, VERIFIER) == Checkpoint(store.origin, size, root)
        assert store.origin == f"coniti/{store.store_id}"


def test_a_checkpoint_verifies_after_reopen_compaction_and_more_writes(tmp_path: Path) -> None:
    """A checkpoint still verifies once the store is reopened, compacted and written to."""
    with _store(tmp_path / "s", 4) as store:
        note = store.checkpoint(SIGNER)
    with LogBackend(tmp_path / "s") as store:
        store.compact()
        store.put(PutRequest(records=[rec("later")]))
        assert store.verify_checkpoint(note, VERIFIER).size == 4


def test_an_imported_store_verifies_the_checkpoints_of_its_source(tmp_path: Path) -> None:
    """Export then import: the new store (a new store id) keeps its source's origin through the
    checkpoint events and verifies the source's checkpoint."""
    with _store(tmp_path / "a", 4) as a:
        note = a.checkpoint(SIGNER)
        a.put(PutRequest(records=[rec("more")]))
        a.export_log(tmp_path / "log.jsonl")
        origin = a.origin
    with LogBackend.import_log(tmp_path / "log.jsonl", tmp_path / "b", checkpoint=note, verifier=VERIFIER) as b:
        assert b.origin == origin
        assert b.verify_checkpoint(note, VERIFIER).size == 4


def test_a_checkpoint_of_another_key_or_origin_is_refused(tmp_path: Path) -> None:
    """A checkpoint signed by another key, or for another origin, is refused in one line."""
    _, other_verifier = generate_key("example.org/memory")
    with _store(tmp_path / "s", 3) as store:
        note = store.checkpoint(SIGNER)
        with pytest.raises(CheckpointError, match="the note is not signed by key example.org/memory"):
            store.verify_checkpoint(note, other_verifier)
        foreign = store.checkpoint(SIGNER, origin="example.org/other")
        with pytest.raises(CheckpointError, match="is for origin 'example.org/other'"):
            store.verify_checkpoint(foreign, VERIFIER, origin=f"coniti/{store.store_id}")


def test_a_history_that_does_not_extend_the_checkpoint_is_refused(tmp_path: Path) -> None:
    """Another store's checkpoint (same origin pinned): refused naming both sizes, when it is
    longer than this history and when its root at that size differs."""
    with _store(tmp_path / "a", 6) as a:
        longer = a.checkpoint(SIGNER, origin="o")
    with _store(tmp_path / "b", 3, prefix="x") as b:
        with pytest.raises(CheckpointError) as caught:
            b.verify_checkpoint(longer, VERIFIER, origin="o")
        assert str(caught.value) == (
            "the history has 3 events, fewer than the checkpoint's size 6: it does not extend the checkpoint"
        )
        b.put(PutRequest(records=[rec(f"y{i}") for i in range(5)]))
        with pytest.raises(CheckpointError) as caught:
            b.verify_checkpoint(longer, VERIFIER, origin="o")
        assert str(caught.value) == (
            "the history of 8 events does not extend the checkpoint of size 6: its root at size 6 differs"
        )


def test_an_import_that_does_not_extend_the_checkpoint_creates_nothing(tmp_path: Path) -> None:
    """Importing a history against a checkpoint it does not extend (a shorter export, another
    history): CheckpointError naming both sizes, and no store at the target."""
    with _store(tmp_path / "a", 2) as a:
        a.export_log(tmp_path / "short.jsonl")
        a.put(PutRequest(records=[rec("more")]))
        note = a.checkpoint(SIGNER)
    with _store(tmp_path / "c", 5, prefix="z") as c:
        c.export_log(tmp_path / "other.jsonl")
    with pytest.raises(CheckpointError, match="the history has 2 events, fewer than the checkpoint's size 3"):
        LogBackend.import_log(tmp_path / "short.jsonl", tmp_path / "b", checkpoint=note, verifier=VERIFIER)
    assert not (tmp_path / "b").exists()
    with pytest.raises(CheckpointError, match="history of 5 events does not extend the checkpoint of size 3"):
        LogBackend.import_log(tmp_path / "other.jsonl", tmp_path / "b", checkpoint=note, verifier=VERIFIER)
    assert not (tmp_path / "b").exists()


def test_a_bad_signer_key_writes_nothing(tmp_path: Path) -> None:
    """checkpoint() with a malformed signer key raises CheckpointError and appends no event."""
    with _store(tmp_path / "s", 2) as store:
        with pytest.raises(CheckpointError):
            store.checkpoint("PRIVATE+KEY+nope")
        assert store.head == 2
