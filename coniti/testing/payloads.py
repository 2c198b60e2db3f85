"""Conformance: records without a vector and records with a blob (binary payload).

Such records are stored and read like any other: get, scan, count, filters, namespaces, delete,
clear, the memory file (dump/load, with the blob as ``{"base64": text}``), and where declared
``write`` (upsert, patch), views of past points (``supports_time_travel``) and the event feed
(``supports_event_feed``). Property tests (hypothesis) mix them with the usual records.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti.errors import ContractError, MemoryFileError
from coniti.memory import (
    GetRequest,
    MemoryBackend,
    MemoryRecord,
    PatchOp,
    UpsertOp,
    WriteRequest,
    event_feed,
    time_travel,
)
from coniti.testing.fixtures import BackendFactory, BackendFixtures
from coniti.testing.helpers import count, exact, ids, put, record, scan_all, vector_of

__all__ = ["ALL_BYTES", "PayloadTests"]

ALL_BYTES = bytes(range(256)) * 3
"""Every byte value: a blob no text encoding carries unchanged."""

SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.differing_executors,
    ],
)


@st.composite
def payload_records(draw: st.DrawFn, record_id: str) -> MemoryRecord:
    """A record with or without a vector, with or without a blob (any bytes, empty included)."""
    vectorless = draw(st.booleans())
    vector = draw(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=4))
    return record(
        record_id,
        draw(st.sampled_from([-1.0, 0.0, 2.5])),
        text=draw(st.text(max_size=12)),
        vector=vector,
        vectorless=vectorless,
        embedding_id=None if vectorless else draw(st.none() | st.just("emb-1")),
        blob=draw(st.none() | st.binary(max_size=64)),
        metadata={"n": draw(st.integers(0, 3))},
    )


@st.composite
def payload_lists(draw: st.DrawFn) -> list[MemoryRecord]:
    return [draw(payload_records(f"p{i}")) for i in range(draw(st.integers(0, 6)))]


def _get(backend: MemoryBackend, record_id: str) -> MemoryRecord | None:
    found = backend.get(GetRequest(ids=[record_id])).records
    return found[0] if found else None


def _dumped(backend: MemoryBackend) -> str:
    stream = io.StringIO()
    backend.dump(stream)
    return stream.getvalue()


def _mixed() -> list[MemoryRecord]:
    return [
        record("plain", 1.0, vectorless=True, metadata={"kind": "plain"}),
        record("bytes", 2.0, vectorless=True, blob=ALL_BYTES, metadata={"kind": "blob"}),
        record("empty", 3.0, vectorless=True, blob=b""),
        record("both", 4.0, dtype="float32", blob=b"\x00\xff", embedding_id="emb-1"),
        record("usual", 5.0),
    ]


class PayloadTests(BackendFixtures):
    """Records without a vector, and blobs, through every operation the backend declares."""

    # -- reads ---------------------------------------------------------------------------------

    def test_a_record_without_a_vector_reads_back_as_written(self, backend: MemoryBackend) -> None:
        """A record without a vector is read back by get and scan bit for bit, vector None."""
        original = record("a", 1.0, vectorless=True, metadata={"k": [1, 2.5]})
        put(backend, original)
        got = _get(backend, "a")
        assert got is not None and got.vector is None and got.embedding_id is None
        assert exact(got) == exact(original)
        assert [exact(r) for r in scan_all(backend)] == [exact(original)]

    def test_a_blob_reads_back_byte_for_byte(self, backend: MemoryBackend) -> None:
        """Blobs (every byte value, empty, beside a vector) are read back exactly, as bytes."""
        written = _mixed()
        put(backend, *written)
        got = backend.get(GetRequest(ids=[r.id for r in written])).records
        assert [exact(r) for r in got] == [exact(r) for r in written]
        assert [r.blob for r in got] == [None, ALL_BYTES, b"", b"\x00\xff", None]
        assert all(type(r.blob) is bytes for r in got if r.blob is not None)

    def test_scan_orders_every_kind_of_record_together(self, backend: MemoryBackend) -> None:
        """Records with and without vectors and blobs scan in (timestamp, write order) together."""
        put(backend, *reversed(_mixed()))
        assert ids(scan_all(backend)) == ["plain", "bytes", "empty", "both", "usual"]

    def test_count_and_filters_see_records_without_a_vector(self, backend: MemoryBackend) -> None:
        """count and metadata filters count and match records without a vector like any other."""
        put(backend, *_mixed())
        assert count(backend) == 5
        assert count(backend, filter={"kind": "blob"}) == 1
        assert ids(scan_all(backend, filter={"kind": {"$in": ["plain", "blob"]}})) == ["plain", "bytes"]

    def test_a_namespace_of_records_without_vectors_is_listed(self, backend: MemoryBackend) -> None:
        """A namespace holding only records without a vector is a live namespace."""
        put(backend, record("a", 1.0, namespace=("t", "u"), vectorless=True, blob=b"x"))
        assert backend.namespaces(("t",)) == [("t", "u")]

    def test_delete_and_clear_remove_them(self, backend: MemoryBackend) -> None:
        """delete and clear remove records without a vector and with a blob."""
        put(backend, *_mixed())
        result = backend.delete(backend.delete_request(["plain", "bytes"]))
        assert result.deleted == ["plain", "bytes"]
        assert ids(scan_all(backend)) == ["empty", "both", "usual"]
        backend.clear(backend.clear_request())
        assert count(backend) == 0

    # -- the memory file -----------------------------------------------------------------------

    def test_dump_writes_null_vectors_and_base64_blobs(self, backend: MemoryBackend) -> None:
        """dump writes ``"vector": null`` and the blob as ``{"base64": ...}`` (standard base64)."""
        put(backend, *_mixed())
        lines = [json.loads(line) for line in _dumped(backend).splitlines()[1:]]
        by_id = {line["note"]["id"]: line for line in lines}
        assert by_id["plain"]["vector"] is None and "blob" not in by_id["plain"]
        assert base64.b64decode(by_id["bytes"]["blob"]["base64"], validate=True) == ALL_BYTES
        assert by_id["empty"]["blob"] == {"base64": ""}
        assert "blob" not in by_id["usual"]

    def test_dump_then_load_round_trips_them(self, make_backend: BackendFactory) -> None:
        """dump then load into a fresh backend gives records without vectors and blobs back exactly."""
        source, target = make_backend(), make_backend()
        put(source, *_mixed())
        assert target.load(io.StringIO(_dumped(source))) == 5
        assert [exact(r) for r in scan_all(target)] == [exact(r) for r in scan_all(source)]

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("blob", "AAEC"),
            ("blob", {"base64": "not base64!"}),
            ("blob", {"base64": "YQ"}),
            ("blob", {"base64": 12}),
            ("blob", {"b64": "AAEC"}),
            ("blob", {"base64": "AAEC", "extra": 1}),
            ("blob", [0, 1, 2]),
            ("embedding_id", "emb-1"),
        ],
        ids=["bare-string", "bad-chars", "no-padding", "number", "wrong-key", "extra-key", "list", "vectorless-emb"],
    )
    def test_load_refuses_a_malformed_payload_naming_line_and_field(
        self, backend: MemoryBackend, field: str, value: Any
    ) -> None:
        """A malformed blob (or an embedding id on a record without a vector) is refused with
        MemoryFileError naming the line and the field; nothing is loaded."""
        good = record("ok", 1.0).to_dict()
        bad = {**record("bad", 2.0, vectorless=True).to_dict(), field: value}
        header: dict[str, Any] = {"format": "coniti-memory", "version": "1.1.0", "embedding_id": None,
                  "namespace": [], "created_at": "2026-01-01T00:00:00Z", "count": 2}
        text = "".join(json.dumps(x) + "\n" for x in (header, good, bad))
        with pytest.raises(MemoryFileError, match=rf"line 3: .*{field}"):
            backend.load(io.StringIO(text))
        assert count(backend) == 0

    # -- writes ----------------------------------------------------------------------------------

    def _write(self, backend: MemoryBackend, mode: str, request: WriteRequest) -> Any:
        if not type(backend).supports_write:
            pytest.skip("the backend does not declare supports_write")
        if mode == "sync":
            return backend.write(request)
        return asyncio.run(backend.awrite(request))

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_an_upsert_replaces_the_blob(self, backend: MemoryBackend, mode: str) -> None:
        """An upsert with another blob writes a new version; with the same blob it is unchanged."""
        put(backend, record("a", 1.0, vectorless=True, blob=b"one"))
        changed = self._write(backend, mode, WriteRequest(ops=[UpsertOp(record=record("a", 1.0, vectorless=True, blob=b"two"))]))
        assert changed.unchanged == [] and _get(backend, "a").blob == b"two"  # type: ignore[union-attr]
        same = self._write(backend, mode, WriteRequest(ops=[UpsertOp(record=record("a", 1.0, vectorless=True, blob=b"two"))]))
        assert same.unchanged == ["a"]

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_a_patch_sets_keeps_and_clears_the_blob(self, backend: MemoryBackend, mode: str) -> None:
        """A patch with ``blob`` replaces it, one without keeps it, ``clear_blob`` removes it."""
        put(backend, record("a", 1.0, blob=b"one"))
        self._write(backend, mode, WriteRequest(ops=[PatchOp(id="a", metadata={"k": 1})]))
        assert _get(backend, "a").blob == b"one"  # type: ignore[union-attr]
        self._write(backend, mode, WriteRequest(ops=[PatchOp(id="a", blob=b"\x00two")]))
        assert _get(backend, "a").blob == b"\x00two"  # type: ignore[union-attr]
        self._write(backend, mode, WriteRequest(ops=[PatchOp(id="a", clear_blob=True)]))
        got = _get(backend, "a")
        assert got is not None and got.blob is None and vector_of(got).tolist() == [1.0, 0.5, -0.25]

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_a_text_patch_of_a_record_without_a_vector_needs_none(
        self, backend: MemoryBackend, mode: str
    ) -> None:
        """A record without a vector takes a text patch without a vector and still has none."""
        put(backend, record("a", 1.0, vectorless=True, blob=b"b"))
        self._write(backend, mode, WriteRequest(ops=[PatchOp(id="a", text="new")]))
        got = _get(backend, "a")
        assert got is not None and (got.note.text, got.vector, got.blob) == ("new", None, b"b")

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_a_patch_may_give_a_record_without_a_vector_one(self, backend: MemoryBackend, mode: str) -> None:
        """A patch with a vector gives a record without one that vector (of any dtype)."""
        put(backend, record("a", 1.0, vectorless=True))
        vector = np.array([0.5, 0.25], dtype=np.float32)
        self._write(backend, mode, WriteRequest(ops=[PatchOp(id="a", vector=vector)]))
        got = _get(backend, "a")
        assert got is not None and vector_of(got).dtype == np.float32
        assert vector_of(got).tobytes() == vector.tobytes()

    # -- the past ------------------------------------------------------------------------------

    def test_a_view_of_the_past_shows_the_blob_of_its_time(self, backend: MemoryBackend) -> None:
        """With time travel, a view right after each put shows the blob (and vector) of that time."""
        past = time_travel(backend)
        feed = event_feed(backend)
        if past is None or feed is None:
            pytest.skip("the backend does not declare time travel and an event feed")
        put(backend, record("a", 1.0, vectorless=True, blob=b"first"))
        first = feed.head
        backend.delete(backend.delete_request(["a"]))
        put(backend, record("a", 1.0, blob=ALL_BYTES))
        then = past.at(first).get(GetRequest(ids=["a"])).records
        assert [(r.vector, r.blob) for r in then] == [(None, b"first")]
        now = past.at(feed.head).get(GetRequest(ids=["a"])).records
        assert [r.blob for r in now] == [ALL_BYTES] and now[0].vector is not None

    def test_the_event_feed_carries_the_content(self, backend: MemoryBackend) -> None:
        """With an event feed, each put event's record carries the blob and the missing vector."""
        feed = event_feed(backend)
        if feed is None:
            pytest.skip("the backend does not declare an event feed")
        put(backend, *_mixed())
        records = [e.record for e in feed.events() if e.kind == "put"]
        assert [exact(r) for r in records if r is not None] == [exact(r) for r in _mixed()]

    # -- the contract, as every backend sees it ------------------------------------------------

    def test_a_record_without_a_vector_may_not_name_an_embedding(self) -> None:
        """A record with vector None and an embedding id is refused, naming embedding_id."""
        with pytest.raises(ContractError, match="embedding_id"):
            record("a", vectorless=True, embedding_id="emb-1")

    # -- properties ----------------------------------------------------------------------------

    @SETTINGS
    @given(records=payload_lists())
    def test_any_mix_reads_back_and_round_trips_the_memory_file(
        self, backend_factory: BackendFactory, records: list[MemoryRecord]
    ) -> None:
        """For any mix of records with and without vectors and blobs, scan returns them exactly,
        and dump then load into a fresh backend gives the same records."""
        with backend_factory() as source, backend_factory() as target:
            put(source, *records)
            expected = [exact(r) for _, r in sorted(enumerate(records), key=lambda p: (p[1].note.timestamp, p[0]))]
            assert [exact(r) for r in scan_all(source)] == expected
            target.load(io.StringIO(_dumped(source)))
            assert [exact(r) for r in scan_all(target)] == expected
