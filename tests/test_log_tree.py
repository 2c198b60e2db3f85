"""The Merkle tree kept in the store (layout 6, ``log/FORMAT.md`` §16): roots and proofs of every size
against RFC 9162 as written, the tree through rebuild, verify, export/import, erasure, compaction,
upgrade from layout 5, damage and SIGKILL, and the errors for bad input."""

from __future__ import annotations

import os
import signal
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from helpers_log import db_entries, rec, rewrite_db, spawn, to_layout_5
from test_proofs import _Reference

from coniti.errors import ProofError, StoreCorrupted, StoreError
from coniti.impl.log import LogBackend
from coniti.log.codec import event_hash
from coniti.memory import DeleteRequest, MetaSetRequest, PutRequest
from coniti.proofs import EMPTY_ROOT, leaf_hash, verify_consistency, verify_inclusion

SIZE = 300


def _fill(store: LogBackend, n: int) -> None:
    """``n`` events of every path of the append routine: single puts, runs of puts (the bulk
    path), deletes, metadata writes and replacements."""
    i = 0
    while store.head < n:
        left = n - store.head
        if i % 7 == 3 and left >= 9:
            store.put(PutRequest(records=[rec(f"b{i}-{k}", ts=float(k)) for k in range(9)]))
        elif i % 7 == 5:
            store.delete(DeleteRequest(ids=[f"s{i - 1}"]))
        elif i % 7 == 6:
            store.set_meta(MetaSetRequest(key="k", value=i))
        else:
            store.put(PutRequest(records=[rec(f"s{i}", ts=float(i))]))
        i += 1
    assert store.head == n


def _hashes(store: LogBackend) -> list[bytes]:
    return [bytes.fromhex(event.hash) for event in store.events()]


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> LogBackend:
    store = LogBackend(tmp_path_factory.mktemp("tree") / "s", durability="nosync")
    _fill(store, SIZE)
    return store


@pytest.fixture(scope="module")
def reference(filled: LogBackend) -> _Reference:
    return _Reference(_hashes(filled))


def _tree(path: Path) -> list[tuple[bytes, bytes]]:
    return db_entries(path, b"tree")


def test_roots_of_every_size_are_rfc_9162_mth(filled: LogBackend, reference: _Reference) -> None:
    """root(size) for every size 0..300 is the RFC's MTH over the events' chain hashes (size 0:
    SHA-256 of nothing); root() is the head's."""
    assert filled.root(0) == (0, EMPTY_ROOT)
    for size in range(1, SIZE + 1):
        assert filled.root(size) == (size, reference.mth(0, size))
    assert filled.root() == (SIZE, reference.mth(0, SIZE))


def test_inclusion_proofs_of_every_event_and_size_are_rfc_9162_paths(
    filled: LogBackend, reference: _Reference
) -> None:
    """prove_inclusion(seq, size) for every size up to 300 and every event in it is the RFC's PATH
    of leaf seq - 1, and verify_inclusion accepts it with the event's hash."""
    hashes = _hashes(filled)
    for size in range(1, SIZE + 1):
        root = reference.mth(0, size)
        for seq in range(1, size + 1):
            proof = filled.prove_inclusion(seq, size)
            assert proof == reference.path(seq - 1, 0, size), (seq, size)
            if size % 37 == 0:
                verify_inclusion(proof, leaf_hash=leaf_hash(hashes[seq - 1]), index=seq - 1, size=size, root=root)


def test_consistency_proofs_of_every_pair_of_sizes_are_rfc_9162_proofs(
    filled: LogBackend, reference: _Reference
) -> None:
    """prove_consistency(old, new) for every 0 <= old <= new <= 300 is the RFC's PROOF, and
    verify_consistency accepts it with the two roots."""
    for new in range(1, SIZE + 1):
        for old in range(0, new + 1):
            proof = filled.prove_consistency(old, new)
            assert proof == (reference.proof(old, new) if 0 < old < new else []), (old, new)
            if new % 41 == 0:
                verify_consistency(
                    proof, old_size=old, new_size=new,
                    old_root=reference.mth(0, old), new_root=reference.mth(0, new),
                )
    assert filled.prove_consistency(17) == filled.prove_consistency(17, SIZE)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.prove_inclusion(0), "seq must be a whole number >= 1, got 0"),
        (lambda s: s.prove_inclusion(11, 10), "event 11 is past the tree of size 10"),
        (lambda s: s.prove_inclusion(3, 31), "tree size 31 is past the log's head (event 30)"),
        (lambda s: s.prove_inclusion(31), "event 31 is past the tree of size 30"),
        (lambda s: s.root(31), "tree size 31 is past the log's head (event 30)"),
        (lambda s: s.root(-1), "tree size must be a whole number >= 0, got -1"),
        (lambda s: s.prove_consistency(5, 4), "old size 5 is past new size 4"),
        (lambda s: s.prove_consistency(5, 31), "new size 31 is past the log's head (event 30)"),
        (lambda s: s.prove_consistency(True, 4), "old size must be a whole number >= 0, got True"),
    ],
)
def test_bad_proof_requests_are_refused_in_one_line(tmp_path: Path, call: Any, message: str) -> None:
    """A seq or size out of range, or sizes out of order: ProofError, one line naming it."""
    with LogBackend(tmp_path / "s", durability="nosync") as store:
        _fill(store, 30)
        with pytest.raises(ProofError) as caught:
            call(store)
        assert str(caught.value) == message


def test_the_tree_is_what_a_rebuild_writes(tmp_path: Path) -> None:
    """The node table the appends wrote is byte for byte the one rebuild() writes from the log: the
    n - popcount(n) nodes above the leaves."""
    with LogBackend(tmp_path / "s", durability="nosync") as store:
        _fill(store, 150)
    written = _tree(tmp_path / "s")
    with LogBackend(tmp_path / "s", durability="nosync") as store:
        store.rebuild()
        assert store.verify().ok
    assert _tree(tmp_path / "s") == written
    assert len(written) == 150 - bin(150).count("1")  # every node but the leaves


def test_an_import_has_the_same_root_at_every_size(tmp_path: Path) -> None:
    """A store imported from an export has the exported store's root at every size."""
    with LogBackend(tmp_path / "a", durability="nosync") as a:
        _fill(a, 80)
        a.export_log(tmp_path / "log.jsonl")
        roots = [a.root(size) for size in range(81)]
    with LogBackend.import_log(tmp_path / "log.jsonl", tmp_path / "b") as b:
        assert [b.root(size) for size in range(81)] == roots
        assert b.verify().ok


def test_erasure_and_compaction_keep_the_root(tmp_path: Path) -> None:
    """Erasing a record and compacting the store change no root (the leaves are chain hashes)."""
    with LogBackend(tmp_path / "s", durability="nosync") as store:
        _fill(store, 40)
        before = [store.root(size) for size in range(41)]
        store.erase(["s0"], reason="asked")
        store.compact()
        assert [store.root(size) for size in range(41)] == before
        assert store.verify().ok


def test_a_layout_5_store_gets_its_tree_on_a_writable_open(tmp_path: Path) -> None:
    """A layout-5 store (no tree table) opened read-only refuses roots, saying how to build the
    tree; a writable open builds it (the same root as before) and marks the store layout 6."""
    with LogBackend(tmp_path / "s", durability="nosync") as store:
        _fill(store, 60)
        root = store.root()
    to_layout_5(tmp_path / "s")
    with LogBackend(tmp_path / "s", read_only=True) as old, pytest.raises(StoreError, match="open it writable once"):
        old.root()
    with LogBackend(tmp_path / "s") as store:
        assert store.root() == root
        assert store.verify().ok
    assert struct.unpack(">I", dict(db_entries(tmp_path / "s", b"sys"))[b"format"])[0] == 6


def test_a_rewritten_event_fails_verify_and_its_proofs(tmp_path: Path) -> None:
    """An event whose envelope is rewritten (its actor) fails verify(), the store refuses to prove
    it, and a proof of it verified with its new hash fails against the root signed before."""
    with LogBackend(tmp_path / "s", durability="nosync", actor="alice") as store:
        _fill(store, 20)
        size, root = store.root()
        honest = store.prove_inclusion(7)
    key = struct.pack(">Q", 7)

    def edit(txn: Any, db: Any) -> None:
        frame = bytes(txn.get(key, db=db))
        assert frame.count(b"alice") == 1
        txn.put(key, frame.replace(b"alice", b"mallo"), db=db)

    rewrite_db(tmp_path / "s", b"log", edit)
    with LogBackend(tmp_path / "s", read_only=True) as store:
        assert not store.verify().ok
        with pytest.raises(StoreCorrupted, match="event 7 is not in the stored Merkle tree of size 20"):
            store.prove_inclusion(7)
    forged = event_hash(dict(db_entries(tmp_path / "s", b"log"))[key])
    with pytest.raises(ProofError, match="does not lead to the root"):
        verify_inclusion(honest, leaf_hash=leaf_hash(forged), index=6, size=size, root=root)


def test_a_damaged_node_fails_verify_and_the_proofs_that_read_it(tmp_path: Path) -> None:
    """A node of the tree changed in place: verify() names the tree table, and the store refuses
    the proofs that read it (each is checked against the stored roots before it is returned)."""
    with LogBackend(tmp_path / "s", durability="nosync") as store:
        _fill(store, 20)
    node = struct.pack(">Q", 8) + b"\x02"  # node (level 2, index 1): leaves 4..7

    def edit(txn: Any, db: Any) -> None:
        assert txn.get(node, db=db) is not None
        txn.put(node, bytes(32), db=db)

    rewrite_db(tmp_path / "s", b"tree", edit)
    with LogBackend(tmp_path / "s", read_only=True) as store:
        problems = store.verify().problems
        assert any(p.startswith("projection tree differs") for p in problems), problems
        with pytest.raises(StoreCorrupted, match="is not in the stored Merkle tree"):
            store.prove_inclusion(2)  # leaf 1's path reads node (2, 1)
        with pytest.raises(StoreCorrupted, match="from size 4 to size 8 does not hold"):
            store.prove_consistency(4, 8)  # the proof is node (2, 1) alone


def test_a_tree_that_disagrees_with_the_head_is_refused(tmp_path: Path) -> None:
    """A tree table missing the nodes of its last event: roots are refused (never a root of another
    size) and the next append refuses to extend it; rebuild() restores it."""
    with LogBackend(tmp_path / "s", durability="nosync") as store:
        _fill(store, 12)
        root = store.root()
    last = struct.pack(">Q", 12)
    rewrite_db(
        tmp_path / "s", b"tree",
        lambda txn, db: [txn.delete(last + bytes((h,)), db=db) for h in (1, 2)],
    )
    with LogBackend(tmp_path / "s", durability="nosync") as store:
        with pytest.raises(StoreCorrupted, match="covers 10 events but the log's head is event 12"):
            store.root()
        with pytest.raises(StoreCorrupted, match="event 13 cannot join the Merkle tree, which covers 10 events"):
            store.put(PutRequest(records=[rec("late")]))
        assert store.head == 12
        store.rebuild()
        assert store.root() == root


def test_writers_killed_mid_append_leave_a_tree_equal_to_a_rebuild(tmp_path: Path) -> None:
    """A writer process SIGKILLed while it appends (single puts, then runs) leaves a tree whose
    table is byte for byte what rebuild() writes from the log that survived, three times over."""
    path = tmp_path / "s"
    for round_, delay in enumerate((0.4, 0.9, 1.5)):
        child = spawn("mp-writer", {"store": str(path), "ns": ["w"], "writer": round_, "n": 200_000,
                                    "single": 40, "batch": 25})
        assert child.stdout is not None and child.stdin is not None
        assert '"ready"' in child.stdout.readline()
        child.stdin.write("go\n")
        child.stdin.flush()
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL
        written = _tree(path)
        with LogBackend(path) as store:
            head = store.head
            assert store.root() == (head, _Reference(_hashes(store)).mth(0, head))
            store.rebuild()
        assert _tree(path) == written
    assert head > 40
