"""The write path keeps the bytes of the store: a fixed workload, recorded time frozen, leaves every
table of the log and its projections exactly as the code of layout 5 / event format 3 left them.

The workload goes through every put path of :class:`LogBackend` (``put_batch`` with and without its
claiming meta event, ``put`` of records with expiries, blobs, hashed long ids and non-ASCII ids,
``put_batches``, a delete then a re-put, a replace by ``write``) over three
namespaces, timestamps out of order and ``-0.0`` included. The digest pinned below was taken from
the tables main wrote for it (commit 5d8e5ad); a change of any byte of any key or value changes it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from coniti.actor import Note
from coniti.batch import NoteBatch, RecordBatch
from coniti.impl.log import LogBackend
from coniti.log.store import ALL_DBS, SYS_DB, SYS_HEAD, TREE_DB
from coniti.memory import (
    DeleteRequest,
    MemoryRecord,
    MetaSetRequest,
    PutRequest,
    UpsertOp,
    WriteRequest,
)
from coniti.proofs import leaf_hash, merkle_root

PINNED = "3618e743a86aebd4587af6351cd3395bb9fe12e304005a592684973dc419ef01"
"""SHA-256 of :func:`_tables` after :func:`_workload`, as main's write path left them."""


@pytest.fixture
def frozen_clock() -> Iterator[None]:
    """The log's recorded time fixed, so the frames' ``t`` fields are the same on every run."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("coniti.log.projections.time.time", lambda: 1_800_000_000.0)
        yield


def _record(i: int, ns: tuple[str, ...], **extra: object) -> MemoryRecord:
    rng = np.random.default_rng(i)
    return MemoryRecord(
        note=Note(id=f"r{i}", text=f"text {i} \u00e9", timestamp=1e9 - 7.5 * i, metadata={"i": i, "k": [i, "x"]}),
        vector=rng.standard_normal(3).astype(np.float32),
        embedding_id="emb",
        namespace=ns,
        **extra,  # type: ignore[arg-type]
    )


def _columns(start: int, n: int, ns: tuple[str, ...], dtype: type, ids: list[str] | None = None) -> RecordBatch:
    ids = ids or [f"b{start + k}" for k in range(n)]
    texts = [f"batch text {start + k}" for k in range(n)]
    stamps = [float((start + k) * 37 % 11) - 5.0 for k in range(n)]
    stamps[0] = -0.0
    metadata = [{"n": start + k, "f": 0.5} if k % 2 else {} for k in range(n)]
    vectors = np.random.default_rng(start).standard_normal((n, 4)).astype(dtype)
    return RecordBatch(NoteBatch(ids, texts, stamps, metadata), vectors, "emb4", ns)


def _workload(store: LogBackend) -> None:
    claim = MetaSetRequest(key="embedding_id", value="emb4", namespace=("a",))
    store.put_batch(_columns(0, 7, ("a",), np.float32), claim)
    store.put_batch(_columns(7, 5, ("a",), np.float16))
    store.put_batch(_columns(0, 3, ("b", "c"), np.float32))
    store.put(PutRequest(records=[
        _record(1, ()),
        _record(2, (), expires_at=2e9),
        _record(3, ("a",), blob=b"\x00\xffblob"),
        MemoryRecord(note=Note(id="x" * 450, text="long id", timestamp=3.0), vector=None, namespace=("a",)),
        MemoryRecord(note=Note(id="\u00fcn\u00ef \U0001f600", text="\u2603", timestamp=-2.0), vector=None),
    ]))
    store.put_batches([[_record(10 + k, ("b", "c")) for k in range(4)], [_record(20, ()), _record(21, ("a",))]])
    store.put(PutRequest(records=[_record(30, ("b", "c"), expires_at=1.5e9)]))
    store.delete(DeleteRequest(ids=["b3", "r1"], namespace=("a",)))
    store.delete(DeleteRequest(ids=["r1"]))
    store.put(PutRequest(records=[_record(1, ())]))  # a re-put of a deleted id
    store.put_batch(_columns(3, 2, ("a",), np.float32, ["b3", "b40"]))  # b3 again, after its delete
    replaced = MemoryRecord(note=Note(id="r2", text="replaced", timestamp=4.0), vector=None)
    store.write(WriteRequest(ops=[UpsertOp(record=replaced)]))


def _tables(store: LogBackend) -> str:
    """SHA-256 over every (table, key, value) of the log and the projections but the Merkle tree
    (layout 6 added it; every other byte is pinned as layout 5 wrote it), and the head."""
    h = hashlib.sha256()
    env = store._log.store
    with env.read() as txn:
        for name in ALL_DBS:
            if name in (SYS_DB, TREE_DB):
                continue  # the store id and its secret are random; the tree: below
            for key, value in txn.cursor(db=env.dbs[name]):
                for part in (name, bytes(key), bytes(value)):
                    h.update(len(part).to_bytes(4, "big") + part)
        h.update(bytes(txn.get(SYS_HEAD, db=env.dbs[SYS_DB])))
    return h.hexdigest()


def test_the_write_path_writes_the_pinned_bytes(tmp_path: Path, frozen_clock: None) -> None:
    """Every table after the fixed workload is byte for byte what main's write path wrote."""
    with LogBackend(tmp_path / "s") as store:
        _workload(store)
        assert store.verify().ok
        assert _tables(store) == PINNED
        hashes = [bytes.fromhex(event.hash) for event in store.events()]
        assert store.root() == (store.head, merkle_root(leaf_hash(x) for x in hashes))


def _usual_puts(store: LogBackend) -> list[list[MemoryRecord]]:
    """Put calls of usual records (one namespace, embedding id and vector dtype and shape each; no
    expiry, blob, kind or valid time), with hashed and non-ASCII ids, the largest 64-bit integer,
    ``-0.0`` and out-of-order timestamps, a float16 call, a repeat of a deleted id."""
    rng = np.random.default_rng(5)

    def rec(rid: str, ts: float, ns: tuple[str, ...], dtype: type = np.float32, **md: object) -> MemoryRecord:
        return MemoryRecord(
            note=Note(id=rid, text=f"t {rid[:5]}", timestamp=ts, metadata=md),
            vector=rng.standard_normal(5).astype(dtype), embedding_id="e5", namespace=ns,
        )

    calls = [
        [rec("a", 3.0, ()), rec("x" * 450, -0.0, ()), rec("\u00fcn\u00ef \U0001f600", -2.5, (), big=2**63 - 1)],
        [rec(f"h{k}", 10.0 - k, ("n", "m"), np.float16, k=k) for k in range(6)],
        [rec("b", 1.0, ()), rec("c", 1.0, ())],
    ]
    for call in calls:
        store.put(PutRequest(records=call))
    store.delete(DeleteRequest(ids=["b"]))
    again = [rec("b", 0.5, ()), rec("d", 9.0, ())]
    store.put(PutRequest(records=again))
    return [*calls, again]


def test_a_put_of_usual_records_writes_the_bytes_of_the_item_path(tmp_path: Path, frozen_clock: None) -> None:
    """LogBackend.put encodes a call of usual records from columns (EventLog.put_columns); every
    table, the head and the Merkle tree are byte for byte what the item path (EventLog.put) writes
    for the same calls."""
    from coniti.impl import log as impl_log

    with LogBackend(tmp_path / "columns") as store:
        calls = _usual_puts(store)
        assert all(impl_log._put_columns(call) is not None for call in calls)  # the columnar route ran
        columns = (_tables(store), store.root())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(impl_log, "_put_columns", lambda records: None)  # every call takes the item path
        with LogBackend(tmp_path / "items") as store:
            _usual_puts(store)
            items = (_tables(store), store.root())
    assert columns == items


def test_a_put_of_mixed_records_is_put_as_items() -> None:
    """A call whose records differ in namespace, embedding id, vector dtype or shape, or carry an
    expiry, a blob, a kind or a valid time, or a single record, is not put from columns."""
    from coniti.impl.log import _put_columns

    def rec(rid: str, vector: np.ndarray | None = None, ns: tuple[str, ...] = (), emb: str = "e", **note: object) -> MemoryRecord:
        return MemoryRecord(
            note=Note(id=rid, text="t", timestamp=1.0, **note),  # type: ignore[arg-type]
            vector=np.ones(3, np.float32) if vector is None else vector, embedding_id=emb, namespace=ns,
        )

    base = rec("a")
    assert _put_columns([base, rec("b")]) is not None
    for other in (
        rec("b", ns=("x",)), rec("b", emb="f"), rec("b", np.ones(3, np.float16)), rec("b", np.ones(4, np.float32)),
        rec("b", kind="fact"), rec("b", valid_from=0.5),
        MemoryRecord(note=Note(id="b", text="t", timestamp=1.0), vector=None),
        base.model_copy(update={"note": base.note.model_copy(update={"id": "b"}), "expires_at": 5.0}),
        base.model_copy(update={"note": base.note.model_copy(update={"id": "b"}), "blob": b"x"}),
    ):
        assert _put_columns([base, other]) is None
    assert _put_columns([base]) is None
