"""The record contract for records without a vector and blobs: what is accepted and refused (naming
the field), the JSON form, equality, and the write request digest of older requests."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import numpy as np
import pytest

from coniti import records as records_module
from coniti.actor import Note
from coniti.errors import ContractError
from coniti.impl.memory import InMemoryBackend
from coniti.jsonl import MAX_BLOB_BYTES, MAX_LINE_BYTES
from coniti.memory import (
    DeleteOp,
    GetRequest,
    MemoryRecord,
    PatchOp,
    PutRequest,
    UpsertOp,
    WriteRequest,
)

NOTE = Note(id="a", text="t", timestamp=1.0)


def rec(**fields: Any) -> MemoryRecord:
    return MemoryRecord(note=NOTE, **{"vector": None, **fields})


def test_the_vector_must_be_given() -> None:
    """Leaving the vector out is refused naming it: no vector is a choice, written as None."""
    with pytest.raises(ContractError, match="vector"):
        MemoryRecord(note=NOTE)  # type: ignore[call-arg]


def test_a_record_without_a_vector_has_no_embedding_id() -> None:
    """vector None with an embedding id is refused naming embedding_id."""
    with pytest.raises(ContractError, match="embedding_id must be None for a record without a vector"):
        rec(embedding_id="emb-1")


def test_a_dtype_without_a_vector_is_refused() -> None:
    """A JSON form with a dtype and a null vector is refused naming the dtype."""
    with pytest.raises(ContractError, match="dtype is given but vector is null"):
        MemoryRecord.from_dict({**rec().to_dict(), "dtype": "float32"})


@pytest.mark.parametrize("value", [b"\x00\xff", bytearray(b"\x00\xff"), memoryview(b"\x00\xff")])
def test_a_blob_is_bytes_in_python(value: Any) -> None:
    """bytes, bytearray and memoryview give a bytes blob, copied in."""
    record = rec(blob=value)
    assert type(record.blob) is bytes and record.blob == b"\x00\xff"


@pytest.mark.parametrize("value", ["text", 12, [0, 1], {"base64": "AA==", "x": 1}, {"b64": "AA=="}])
def test_a_blob_of_another_type_is_refused(value: Any) -> None:
    """A str, number, list or any other object than {"base64": text} is refused naming the blob."""
    with pytest.raises(ContractError, match="blob"):
        rec(blob=value)


@pytest.mark.parametrize("text", ["AA", "A=A=", "!!!!", "AAAA\n", "\u00e9AAA"])
def test_malformed_base64_is_refused(text: str) -> None:
    """Base64 without padding, with characters outside the alphabet or misplaced padding is refused."""
    with pytest.raises(ContractError, match=r"blob.base64 is not valid base64"):
        rec(blob={"base64": text})


def test_a_blob_over_the_bound_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A blob longer than MAX_BLOB_BYTES is refused naming its size and the bound, as bytes and as
    base64 (whose text is bounded before it is decoded)."""
    monkeypatch.setattr(records_module, "MAX_BLOB_BYTES", 4)
    with pytest.raises(ContractError, match="blob is 5 bytes; at most 4 allowed"):
        rec(blob=b"12345")
    with pytest.raises(ContractError, match="blob is larger than 4 bytes"):
        rec(blob={"base64": base64.b64encode(b"123456789").decode()})
    assert rec(blob=b"1234").blob == b"1234"


def test_the_bound_leaves_room_in_a_line() -> None:
    """The largest blob, in base64, leaves at least 10 MiB of the longest line a reader accepts."""
    assert MAX_LINE_BYTES - (MAX_BLOB_BYTES + 2) // 3 * 4 >= 10 * 1024 * 1024


def test_a_record_with_the_largest_blob_round_trips_the_memory_file() -> None:
    """A record with a blob of exactly MAX_BLOB_BYTES (and a vector) dumps to one line that loads
    back byte for byte."""
    blob = bytes(range(256)) * (MAX_BLOB_BYTES // 256)
    source, target = InMemoryBackend(), InMemoryBackend()
    source.put(PutRequest(records=[MemoryRecord(note=NOTE, vector=np.ones(384), blob=blob)]))
    stream = io.StringIO()
    source.dump(stream)
    stream.seek(0)
    assert target.load(stream) == 1
    assert target.get(GetRequest(ids=["a"])).records[0].blob == blob


def test_to_dict_writes_the_blob_as_base64_only_when_set() -> None:
    """to_dict writes {"base64": standard base64} for a blob and no key without one; from_dict
    reads it back byte for byte."""
    blob = bytes(range(256))
    data = rec(blob=blob).to_dict()
    assert data["blob"] == {"base64": base64.b64encode(blob).decode("ascii")} and data["vector"] is None
    assert "blob" not in rec().to_dict()
    assert MemoryRecord.from_dict(data).blob == blob
    assert MemoryRecord.from_json(json.dumps(data)) == rec(blob=blob)


def test_the_json_schema_describes_the_blob() -> None:
    """The JSON schema has a blob property: an object with a base64 string."""
    schema = json.dumps(MemoryRecord.json_schema())
    assert '"base64"' in schema and "contentEncoding" in schema


def test_the_blob_counts_for_equality_and_identity() -> None:
    """Records that differ only in their blob are neither equal nor identical; an empty blob is not
    no blob; two records without a vector are identical."""
    assert rec(blob=b"a") != rec(blob=b"b")
    assert rec(blob=b"") != rec()
    assert not rec(blob=b"a").identical(rec(blob=b"b"))
    assert rec(blob=b"a").identical(rec(blob=b"a"))
    assert rec() != MemoryRecord(note=NOTE, vector=np.ones(1))


def test_copy_out_keeps_the_blob_and_the_missing_vector() -> None:
    """copy_out and with_version keep the blob and a None vector."""
    original = rec(blob=b"xyz")
    for copy in (original.copy_out(), original.with_version(3)):
        assert (copy.vector, copy.blob) == (None, b"xyz")


def test_a_patch_gives_blob_or_clear_blob() -> None:
    """A patch with both blob and clear_blob is refused naming both."""
    with pytest.raises(ContractError, match="give blob or clear_blob, not both"):
        PatchOp(id="a", blob=b"x", clear_blob=True)


def test_the_digest_of_a_request_without_blobs_is_that_of_before() -> None:
    """Adding blobs changed no digest of an older request: an op id recorded before keeps matching
    (the value was computed by the release before blobs)."""
    record = MemoryRecord(
        note=Note(id="a", text="t", timestamp=1.5, metadata={"k": 1}),
        vector=np.array([1.0, 2.0], dtype=np.float32),
        embedding_id="emb",
    )
    request = WriteRequest(
        ops=[UpsertOp(record=record), PatchOp(id="b", text="x", vector=[3.0]),
             PatchOp(id="c", metadata_patch={"z": None}, expires_at=5.0), DeleteOp(id="d")],
        op_id="o",
    )
    assert request.digest() == "f0551f335c2ee529aa7c90589778bca81c6350ee3ffe322abc62d6bfe0246bf5"


def test_the_digest_binds_the_blob() -> None:
    """Requests that differ only in a blob, or in clear_blob, have different digests."""
    def digest(**patch: Any) -> str:
        return WriteRequest(ops=[PatchOp(id="a", **patch)]).digest()

    assert len({digest(), digest(blob=b"x"), digest(blob=b"y"), digest(clear_blob=True)}) == 4
    upsert = [WriteRequest(ops=[UpsertOp(record=rec(blob=b))]).digest() for b in (b"x", b"y", None)]
    assert len(set(upsert)) == 3
