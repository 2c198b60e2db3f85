"""A delete of many ids in one call (``EventLog.delete``) ends each live version with the lookup it
already made and adds the Merkle leaves in one run: the projections and the tree it writes equal
those a refold of the log writes."""

from __future__ import annotations

from pathlib import Path

from coniti.impl.log import LogBackend
from coniti.log.checks import _build_tree
from coniti.log.projections import Dbs
from coniti.memory import DeleteRequest, PutRequest
from coniti.requests import UpsertOp, WriteRequest
from tests.helpers_log import assert_verified, db_entries, rec

PROJECTIONS = (b"ver", b"time", b"tver", b"cnt", b"exv", b"tree")


def _projections(path: Path) -> dict[bytes, list[tuple[bytes, bytes]]]:
    return {db: db_entries(path, db) for db in PROJECTIONS}


def test_batch_delete_writes_the_projections_a_refold_writes(tmp_path: Path) -> None:
    """Deleting a batch (records with an expiry, replaced records, the newest timestamp, an
    unknown id) leaves every projection and the Merkle tree byte-equal to rebuilding them from the
    log."""
    path = tmp_path / "store"
    b = LogBackend(path, durability="sync")
    records = [rec(f"r{i}", float(i), ("a",)) for i in range(20)]
    records[:5] = [r.model_copy(update={"expires_at": 1e12}) for r in records[:5]]
    b.put(PutRequest(records=records))
    again = [rec("r3", 50.0, ("a",), text="again"), rec("r7", 60.0, ("a",), text="again")]
    b.write(WriteRequest(ops=[UpsertOp(record=r) for r in again], namespace=("a",)))
    result = b.delete(DeleteRequest(ids=["r0", "r3", "r7", "r19", "nope", "r12"], namespace=("a",)))
    assert result.deleted == ["r0", "r3", "r7", "r19", "r12"] and result.missing == ["nope"]
    b.close()
    written = _projections(path)
    b = LogBackend(path, durability="sync")
    b.rebuild()
    store = b._log.store
    store.write(lambda txn: _build_tree(txn, Dbs(store.dbs)))
    assert_verified(b)
    b.close()
    assert _projections(path) == written


def test_batch_delete_of_a_whole_namespace_newest_first_writes_what_a_refold_writes(tmp_path: Path) -> None:
    """Deleting every record of a namespace, newest timestamp first (each delete ends the last
    position in ``time``, so every count entry records a new last position, and the last none),
    beside another namespace, leaves every projection byte-equal to a refold."""
    path = tmp_path / "store"
    b = LogBackend(path, durability="sync")
    b.put(PutRequest(records=[rec(f"r{i}", float(i), ("a",)) for i in range(12)]))
    b.put(PutRequest(records=[rec(f"r{i}", float(100 + i), ("b",)) for i in range(3)]))
    result = b.delete(DeleteRequest(ids=[f"r{i}" for i in reversed(range(12))], namespace=("a",)))
    assert len(result.deleted) == 12
    b.close()
    written = _projections(path)
    b = LogBackend(path, durability="sync")
    b.rebuild()
    store = b._log.store
    store.write(lambda txn: _build_tree(txn, Dbs(store.dbs)))
    assert_verified(b)
    b.close()
    assert _projections(path) == written
