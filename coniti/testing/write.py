"""Conformance: ``write`` (upsert, patch, delete, compare-and-set, op ids), versions, and expiry,
one mixin per concern (:class:`WriteOpTests`, :class:`PatchTests`, :class:`CompareAndSetTests`,
:class:`OpIdTests`, :class:`ExpiryTests`) and :class:`WriteTests`, all of them.

Every test runs on the sync (``write``) and the async (``awrite``) path. Only for backends that
declare :attr:`~coniti.memory.MemoryBackend.supports_write`; others skip. A backend that persists
overrides the ``reopen`` fixture (a callable ``backend -> backend`` that closes and reopens the
same store) to run the across-reopen tests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from coniti.errors import (
    ContractError,
    DuplicateRecord,
    IdempotencyConflict,
    RecordNotFound,
    VersionConflict,
)
from coniti.memory import (
    DeleteOp,
    GetRequest,
    MemoryBackend,
    MemoryRecord,
    PatchOp,
    UpsertOp,
    WriteRequest,
    WriteResult,
)
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import count, exact, ids, put, record, scan_all, state, vector_of
from coniti.testing.mergepatch_cases import OBJECT_CASES

__all__ = [
    "CompareAndSetTests",
    "ExpiryTests",
    "OpIdTests",
    "PatchTests",
    "WriteFixtures",
    "WriteOpTests",
    "WriteTests",
]

Write = Callable[[WriteRequest], WriteResult]
Reopen = Callable[[MemoryBackend], MemoryBackend]


def _get(backend: MemoryBackend, record_id: str, namespace: tuple[str, ...] = ()) -> MemoryRecord | None:
    found = backend.get(GetRequest(ids=[record_id], namespace=namespace)).records
    return found[0] if found else None


def _version(backend: MemoryBackend, record_id: str, namespace: tuple[str, ...] = ()) -> int | None:
    found = _get(backend, record_id, namespace)
    return None if found is None else found.version


def _upsert(*records: MemoryRecord, **kwargs: Any) -> WriteRequest:
    namespace = records[0].namespace if records else ()
    return WriteRequest(ops=[UpsertOp(record=r) for r in records], namespace=namespace, **kwargs)


def _everything(backend: MemoryBackend) -> Any:
    return state(backend, [(), ("x",)]), [(r.id, r.version) for r in scan_all(backend)]


class WriteFixtures(BackendFixtures):
    """What every write mixin uses: skips unless the backend declares ``supports_write``, the
    ``write`` fixture (sync and async), and the ``reopen`` fixture a persistent backend overrides."""

    @pytest.fixture(autouse=True)
    def _needs_write(self, backend: MemoryBackend) -> None:
        if not type(backend).supports_write:
            pytest.skip("the backend does not declare supports_write")

    @pytest.fixture(params=["sync", "async"])
    def write(self, request: pytest.FixtureRequest, backend: MemoryBackend) -> Write:
        """``backend.write`` or ``backend.awrite`` in a fresh event loop."""
        if request.param == "sync":
            return backend.write
        return lambda req: asyncio.run(backend.awrite(req))

    @pytest.fixture
    def reopen(self) -> Reopen | None:
        """Override in a persistent backend: close the backend and open the same store again."""
        return None


class WriteOpTests(WriteFixtures):
    """write: upserts, delete ops and mixed ops, all or nothing; the versions writes give."""

    # -- versions ------------------------------------------------------------------------------

    def test_put_gives_increasing_versions(self, backend: MemoryBackend) -> None:
        """Every read fills ``version``; later writes get greater versions."""
        put(backend, record("a", 1.0))
        put(backend, record("b", 2.0))
        va, vb = _version(backend, "a"), _version(backend, "b")
        assert isinstance(va, int) and isinstance(vb, int) and va < vb
        assert [r.version for r in scan_all(backend)] == [va, vb]

    def test_put_existing_id_still_raises_duplicate(self, backend: MemoryBackend, write: Write) -> None:
        """put keeps its rule after an upsert: an existing id raises DuplicateRecord."""
        write(_upsert(record("a", 1.0)))
        with pytest.raises(DuplicateRecord):
            put(backend, record("a", 2.0))

    # -- upsert ----------------------------------------------------------------------------------

    def test_upsert_creates(self, backend: MemoryBackend, write: Write) -> None:
        """An upsert of a new id creates it; the result names its version, which get reads."""
        result = write(_upsert(record("a", 1.0)))
        assert result.versions == {"a": _version(backend, "a")}
        assert (result.unchanged, result.deleted, result.missing, result.replayed) == ([], [], [], False)

    def test_upsert_replaces_whole_record(self, backend: MemoryBackend, write: Write) -> None:
        """An upsert of a live id replaces note, vector and metadata, under a greater version."""
        put(backend, record("a", 1.0, text="old", metadata={"k": 1}))
        before = _version(backend, "a")
        new = record("a", 5.0, text="new", vector=[0.0, 2.0], dtype="float32")
        result = write(_upsert(new))
        got = _get(backend, "a")
        assert got is not None and exact(got) == exact(new)
        assert before is not None and result.versions["a"] == got.version and got.version > before
        assert count(backend) == 1

    def test_upsert_moves_the_record_in_time_order(self, backend: MemoryBackend, write: Write) -> None:
        """A replaced record is scanned at its new timestamp, once."""
        put(backend, record("a", 1.0), record("b", 2.0))
        write(_upsert(record("a", 3.0)))
        assert ids(scan_all(backend)) == ["b", "a"]

    def test_identical_upsert_is_unchanged(self, backend: MemoryBackend, write: Write) -> None:
        """An upsert identical to the live record writes nothing: listed unchanged, same version."""
        put(backend, record("a", 1.0, metadata={"k": [1]}))
        before = _everything(backend)
        result = write(_upsert(record("a", 1.0, metadata={"k": [1]})))
        assert result.unchanged == ["a"]
        assert result.versions == {"a": _version(backend, "a")}
        assert _everything(backend) == before

    def test_upsert_differing_only_in_json_type_is_a_change(self, backend: MemoryBackend, write: Write) -> None:
        """1 and 1.0 in metadata are different content: the upsert writes a new version."""
        put(backend, record("a", 1.0, metadata={"k": 1}))
        result = write(_upsert(record("a", 1.0, metadata={"k": 1.0})))
        assert result.unchanged == []
        got = _get(backend, "a")
        assert got is not None and type(got.note.metadata["k"]) is float

    # -- delete and mixed ops -------------------------------------------------------------------

    def test_delete_op(self, backend: MemoryBackend, write: Write) -> None:
        """A delete op ends a live id (``deleted``); an unknown id is ``missing``."""
        put(backend, record("a", 1.0))
        result = write(WriteRequest(ops=[DeleteOp(id="a"), DeleteOp(id="b")]))
        assert (result.deleted, result.missing) == (["a"], ["b"])
        assert count(backend) == 0

    def test_mixed_ops_apply_together(self, backend: MemoryBackend, write: Write) -> None:
        """Upsert, patch and delete of one request all take effect."""
        put(backend, record("p", 1.0), record("d", 2.0))
        result = write(
            WriteRequest(
                ops=[UpsertOp(record=record("u", 3.0)), PatchOp(id="p", timestamp=4.0), DeleteOp(id="d")]
            )
        )
        assert set(result.versions) == {"u", "p"} and result.deleted == ["d"]
        assert ids(scan_all(backend)) == ["u", "p"]

    def test_failing_op_writes_nothing(self, backend: MemoryBackend, write: Write) -> None:
        """When the last op fails, the ops before it are not written either."""
        put(backend, record("p", 1.0), record("d", 2.0))
        before = _everything(backend)
        with pytest.raises(ContractError):
            write(
                WriteRequest(
                    ops=[UpsertOp(record=record("u", 3.0)), DeleteOp(id="d"), PatchOp(id="p", text="x")]
                )
            )
        assert _everything(backend) == before

    def test_ops_in_other_namespace_are_isolated(self, backend: MemoryBackend, write: Write) -> None:
        """A write in namespace x leaves the same id in the root namespace alone."""
        put(backend, record("a", 1.0, text="root"))
        write(_upsert(record("a", 2.0, text="in x", namespace=("x",))))
        root, in_x = _get(backend, "a"), _get(backend, "a", ("x",))
        assert root is not None and root.note.text == "root"
        assert in_x is not None and in_x.note.text == "in x"

    # -- bad input ------------------------------------------------------------------------------

    def test_wrong_request_type_is_refused(self, backend: MemoryBackend) -> None:
        """write of something that is not a WriteRequest raises ContractError."""
        with pytest.raises(ContractError, match="WriteRequest"):
            backend.write("nope")  # type: ignore[arg-type]


class PatchTests(WriteFixtures):
    """write: patch ops (note, vector, time, expiry; metadata by RFC 7386)."""

    def test_patch_keeps_what_is_not_given(self, backend: MemoryBackend, write: Write) -> None:
        """A patch of the timestamp keeps text, metadata, vector and embedding id."""
        original = record("a", 1.0, metadata={"k": "v"}, embedding_id="emb")
        put(backend, original)
        write(WriteRequest(ops=[PatchOp(id="a", timestamp=9.0)]))
        got = _get(backend, "a")
        assert got is not None
        assert (got.note.text, got.note.metadata, got.note.timestamp) == ("text of a", {"k": "v"}, 9.0)
        assert got.embedding_id == "emb" and np.array_equal(vector_of(got), vector_of(original))

    def test_patch_text_with_vector(self, backend: MemoryBackend, write: Write) -> None:
        """A patch of text and vector changes both and keeps the timestamp."""
        put(backend, record("a", 1.0))
        write(WriteRequest(ops=[PatchOp(id="a", text="new", vector=[9.0, 9.0])]))
        got = _get(backend, "a")
        assert got is not None and got.note.text == "new" and vector_of(got).tolist() == [9.0, 9.0]
        assert got.note.timestamp == 1.0

    def test_patch_text_without_vector_is_refused(self, backend: MemoryBackend, write: Write) -> None:
        """Changing the text without a vector raises ContractError naming the field; nothing written."""
        put(backend, record("a", 1.0))
        before = _everything(backend)
        with pytest.raises(ContractError, match=r"vector"):
            write(WriteRequest(ops=[PatchOp(id="a", text="new")]))
        assert _everything(backend) == before

    def test_patch_same_text_needs_no_vector(self, backend: MemoryBackend, write: Write) -> None:
        """A patch whose text equals the stored text is not a text change: no vector needed."""
        put(backend, record("a", 1.0, text="same"))
        result = write(WriteRequest(ops=[PatchOp(id="a", text="same")]))
        assert result.unchanged == ["a"]

    def test_patch_vector_of_other_dtype_is_refused(self, backend: MemoryBackend, write: Write) -> None:
        """A patch vector whose dtype is not the stored one raises ContractError; nothing written."""
        put(backend, record("a", 1.0, dtype="float64"))
        before = _everything(backend)
        with pytest.raises(ContractError, match=r"ops\[0\]\.vector"):
            write(WriteRequest(ops=[PatchOp(id="a", text="n", vector=np.ones(3, dtype=np.float32))]))
        assert _everything(backend) == before

    def test_patch_metadata_replaces_the_object(self, backend: MemoryBackend, write: Write) -> None:
        """``metadata`` replaces the whole metadata object."""
        put(backend, record("a", 1.0, metadata={"x": 1, "y": 2}))
        write(WriteRequest(ops=[PatchOp(id="a", metadata={"z": 3})]))
        got = _get(backend, "a")
        assert got is not None and got.note.metadata == {"z": 3}

    @pytest.mark.parametrize(("original", "patch", "result"), OBJECT_CASES)
    def test_metadata_patch_is_rfc7386(
        self, backend: MemoryBackend, write: Write, original: Any, patch: Any, result: Any
    ) -> None:
        """``metadata_patch`` merges as RFC 7386 says (its appendix A and section 3 cases)."""
        put(backend, record("a", 1.0, metadata=original))
        write(WriteRequest(ops=[PatchOp(id="a", metadata_patch=patch)]))
        got = _get(backend, "a")
        assert got is not None and got.note.metadata == result

    def test_patch_of_missing_id_raises(self, backend: MemoryBackend, write: Write) -> None:
        """A patch of an id that is not live raises RecordNotFound; nothing of the request is written."""
        with pytest.raises(RecordNotFound, match="'zz'"):
            write(WriteRequest(ops=[UpsertOp(record=record("a", 1.0)), PatchOp(id="zz", text="t")]))
        assert count(backend) == 0

    def test_patch_of_missing_id_with_missing_ok(self, backend: MemoryBackend, write: Write) -> None:
        """With ``missing_ok``, a patch of an id that is not live is listed in ``missing``."""
        result = write(WriteRequest(ops=[PatchOp(id="zz", text="t")], missing_ok=True))
        assert result.missing == ["zz"] and result.versions == {}

    def test_patch_sets_and_clears_expiry(self, backend: MemoryBackend, write: Write) -> None:
        """``expires_at`` sets the expiry; ``clear_expiry`` removes it."""
        put(backend, record("a", 1.0))
        later = time.time() + 3600
        write(WriteRequest(ops=[PatchOp(id="a", expires_at=later)]))
        got = _get(backend, "a")
        assert got is not None and got.expires_at == later
        write(WriteRequest(ops=[PatchOp(id="a", clear_expiry=True)]))
        got = _get(backend, "a")
        assert got is not None and got.expires_at is None


class CompareAndSetTests(WriteFixtures):
    """write: expected versions (compare-and-set), absent ids expected as None."""

    def test_expected_version_matches(self, backend: MemoryBackend, write: Write) -> None:
        """A write whose expected version is the live one is applied."""
        put(backend, record("a", 1.0))
        version = _version(backend, "a")
        assert version is not None
        result = write(_upsert(record("a", 2.0), expect={"a": version}))
        assert result.versions["a"] == _version(backend, "a") != version

    def test_stale_expected_version_conflicts(self, backend: MemoryBackend, write: Write) -> None:
        """A stale expected version raises VersionConflict naming id, expected and actual; nothing written."""
        put(backend, record("a", 1.0))
        old = _version(backend, "a")
        assert old is not None
        write(_upsert(record("a", 2.0)))
        now = _version(backend, "a")
        before = _everything(backend)
        with pytest.raises(VersionConflict) as caught:
            write(WriteRequest(ops=[PatchOp(id="a", timestamp=3.0)], expect={"a": old}))
        assert (caught.value.id, caught.value.expected, caught.value.actual) == ("a", old, now)
        assert _everything(backend) == before

    def test_expect_absent_on_live_id_conflicts(self, backend: MemoryBackend, write: Write) -> None:
        """``expect={id: None}`` on a live id raises VersionConflict."""
        put(backend, record("a", 1.0))
        with pytest.raises(VersionConflict):
            write(_upsert(record("a", 2.0), expect={"a": None}))

    def test_expect_absent_on_new_id_creates(self, backend: MemoryBackend, write: Write) -> None:
        """``expect={id: None}`` on an id that does not exist lets the write create it."""
        assert write(_upsert(record("a", 1.0), expect={"a": None})).versions["a"] >= 1

    def test_expect_version_on_missing_id_conflicts(self, backend: MemoryBackend, write: Write) -> None:
        """An expected version of an id that does not exist conflicts, ``actual`` None."""
        with pytest.raises(VersionConflict) as caught:
            write(_upsert(record("a", 1.0), expect={"a": 1}))
        assert caught.value.actual is None
        assert count(backend) == 0

    def test_expect_on_id_outside_the_ops(self, backend: MemoryBackend, write: Write) -> None:
        """An expectation may guard an id the request does not write."""
        put(backend, record("guard", 1.0))
        with pytest.raises(VersionConflict):
            write(_upsert(record("a", 1.0), expect={"guard": None}))
        assert ids(scan_all(backend)) == ["guard"]

    def test_expect_after_delete_is_absent(self, backend: MemoryBackend, write: Write) -> None:
        """After a delete, the id's expected version is None."""
        put(backend, record("a", 1.0))
        write(WriteRequest(ops=[DeleteOp(id="a")]))
        assert write(_upsert(record("a", 1.0), expect={"a": None})).versions


class OpIdTests(WriteFixtures):
    """write: op ids replay the first result, per namespace, durably."""

    def test_op_id_replays_the_first_result(self, backend: MemoryBackend, write: Write) -> None:
        """The same request with the same op id returns the first result, replayed, and writes nothing."""
        put(backend, record("d", 0.5))
        request = WriteRequest(
            ops=[UpsertOp(record=record("a", 1.0)), DeleteOp(id="d")], op_id="run-1/step-1"
        )
        first = write(request)
        after = _everything(backend)
        again = write(WriteRequest.from_dict(request.to_dict()))
        assert again.replayed is True and first.replayed is False
        assert again.model_copy(update={"replayed": False}) == first
        assert _everything(backend) == after

    def test_op_result_reads_a_recorded_op_id(self, backend: MemoryBackend, write: Write) -> None:
        """op_result gives the recorded result of an op id (replayed), None for an unknown one."""
        first = write(_upsert(record("a", 1.0), op_id="known"))
        recorded = backend.op_result("known")
        assert recorded is not None and recorded.replayed
        assert recorded.model_copy(update={"replayed": False}) == first
        assert backend.op_result("unknown") is None
        assert backend.op_result("known", ("x",)) is None

    def test_op_id_with_other_request_conflicts(self, backend: MemoryBackend, write: Write) -> None:
        """The same op id with a different request raises IdempotencyConflict; nothing written."""
        write(_upsert(record("a", 1.0), op_id="op-1"))
        before = _everything(backend)
        with pytest.raises(IdempotencyConflict, match="op-1"):
            write(_upsert(record("a", 2.0), op_id="op-1"))
        assert _everything(backend) == before

    def test_op_id_of_unchanged_request_replays(self, backend: MemoryBackend, write: Write) -> None:
        """A request that wrote nothing (all unchanged) still binds its op id: a retry replays."""
        put(backend, record("a", 1.0))
        first = write(_upsert(record("a", 1.0), op_id="noop"))
        assert first.unchanged == ["a"]
        assert write(_upsert(record("a", 1.0), op_id="noop")).replayed is True
        with pytest.raises(IdempotencyConflict):
            write(_upsert(record("a", 7.0), op_id="noop"))

    def test_op_id_replay_ignores_later_changes(self, backend: MemoryBackend, write: Write) -> None:
        """A retry after others changed the record still replays (it does not write again)."""
        write(_upsert(record("a", 1.0), op_id="first"))
        write(_upsert(record("a", 2.0)))
        latest = _everything(backend)
        assert write(_upsert(record("a", 1.0), op_id="first")).replayed
        assert _everything(backend) == latest

    def test_failed_request_does_not_bind_its_op_id(self, backend: MemoryBackend, write: Write) -> None:
        """A request that raised records no op id: the same op id with another request works."""
        put(backend, record("a", 1.0))
        with pytest.raises(VersionConflict):
            write(_upsert(record("a", 2.0), expect={"a": None}, op_id="try"))
        assert write(_upsert(record("a", 2.0), op_id="try")).replayed is False

    def test_op_ids_are_per_namespace(self, backend: MemoryBackend, write: Write) -> None:
        """The same op id in another namespace is another key."""
        write(_upsert(record("a", 1.0), op_id="same"))
        result = write(_upsert(record("a", 1.0, namespace=("x",)), op_id="same"))
        assert result.replayed is False and count(backend, ("x",)) == 1

    def test_op_id_survives_reopen(self, make_backend: Callable[[], MemoryBackend], reopen: Reopen | None) -> None:
        """Op ids are durable: after a reopen, a retry replays and another request conflicts."""
        if reopen is None:
            pytest.skip("the backend does not persist (no reopen fixture)")
        backend = make_backend()
        if not type(backend).supports_write:
            pytest.skip("the backend does not declare supports_write")
        first = backend.write(_upsert(record("a", 1.0), op_id="durable"))
        backend = reopen(backend)
        try:
            again = backend.write(_upsert(record("a", 1.0), op_id="durable"))
            assert again.replayed and again.versions == first.versions
            with pytest.raises(IdempotencyConflict):
                backend.write(_upsert(record("a", 2.0), op_id="durable"))
        finally:
            backend.close()


class ExpiryTests(WriteFixtures):
    """expiry: ``expires_at`` hides a record from every read; ``sweep`` deletes it."""

    def test_expired_record_is_hidden_before_any_sweep(self, backend: MemoryBackend) -> None:
        """A record whose expires_at has passed is hidden from get, scan and count."""
        past = time.time() - 10
        put(backend, record("old", 1.0, expires_at=past), record("keep", 2.0, expires_at=time.time() + 3600))
        assert backend.get(GetRequest(ids=["old", "keep"])).missing == ["old"]
        assert ids(scan_all(backend)) == ["keep"]
        assert count(backend) == 1

    def test_record_expires_while_stored(self, backend: MemoryBackend) -> None:
        """A record is visible until its expires_at and hidden from that moment on."""
        put(backend, record("a", 1.0, expires_at=time.time() + 0.3))
        assert count(backend) == 1
        time.sleep(0.4)
        assert count(backend) == 0 and _get(backend, "a") is None

    def test_sweep_deletes_expired_records(self, backend: MemoryBackend) -> None:
        """sweep deletes what expired by ``now`` and reports how many; others stay."""
        now = time.time()
        put(backend, record("a", 1.0, expires_at=now + 100), record("b", 2.0, expires_at=now + 1000), record("c", 3.0))
        assert backend.sweep(now=now + 500).deleted == 1
        assert backend.sweep(now=now + 500).deleted == 0
        assert ids(scan_all(backend)) == ["b", "c"]

    def test_upsert_over_expired_record_creates(self, backend: MemoryBackend, write: Write) -> None:
        """An expired, unswept record counts as absent: expect None holds, the upsert makes it live."""
        put(backend, record("a", 1.0, expires_at=time.time() - 1))
        result = write(_upsert(record("a", 2.0), expect={"a": None}))
        got = _get(backend, "a")
        assert got is not None and got.version == result.versions["a"] and got.expires_at is None

    def test_load_hides_the_expired_records_it_writes(self, backend: MemoryBackend) -> None:
        """Records written by ``put_batches`` whose expires_at has passed are hidden as a put's are."""
        if not type(backend).supports_put_batches:
            pytest.skip("the backend does not declare supports_put_batches")
        backend.put_batches([[record("old", 1.0, expires_at=time.time() - 10), record("keep", 2.0)]])
        assert backend.get(GetRequest(ids=["old", "keep"])).missing == ["old"]
        assert ids(scan_all(backend)) == ["keep"] and count(backend) == 1

    def test_load_keeps_hiding_expired_records_already_held(self, backend: MemoryBackend) -> None:
        """A ``put_batches`` into a namespace holding an expired record leaves that record hidden."""
        if not type(backend).supports_put_batches:
            pytest.skip("the backend does not declare supports_put_batches")
        put(backend, record("old", 1.0, expires_at=time.time() - 10))
        backend.put_batches([[record("new", 2.0)]])
        assert backend.get(GetRequest(ids=["old", "new"])).missing == ["old"]
        assert ids(scan_all(backend)) == ["new"] and count(backend) == 1

    def test_paged_scan_skips_expired(self, backend: MemoryBackend) -> None:
        """Pages of a scan hold only unexpired records and page exactly."""
        past = time.time() - 1
        put(backend, *[record(f"r{i}", float(i), expires_at=past if i % 2 else None) for i in range(7)])
        seen: list[str] = []
        cursor = None
        while True:
            page = backend.scan(backend.scan_request(limit=2, cursor=cursor))
            assert len(page.records) <= 2
            seen += ids(page.records)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert seen == ["r0", "r2", "r4", "r6"]


class WriteTests(WriteOpTests, PatchTests, CompareAndSetTests, OpIdTests, ExpiryTests):
    """write: atomic mixed ops, versions, expectations, op ids, patch semantics, expiry (every
    write mixin of this module)."""
