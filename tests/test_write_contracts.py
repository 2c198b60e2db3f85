"""WriteRequest and its ops refuse bad input with ContractError naming the field; digests are exact."""

from __future__ import annotations

import numpy as np
import pytest

from coniti.actor import Note
from coniti.errors import ContractError
from coniti.memory import DeleteOp, MemoryRecord, PatchOp, UpsertOp, WriteRequest


def rec(rid: str = "a", ts: float = 1.0, **kw: object) -> MemoryRecord:
    return MemoryRecord(note=Note(id=rid, text="t", timestamp=ts), vector=np.ones(2), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "names"),
    [
        ({"ops": ["not an op"]}, "ops[0]"),
        ({"ops": [{"kind": "zap", "id": "a"}]}, "ops.0"),
        ({"ops": [{"kind": "patch", "id": "a", "metadata_patch": [1]}]}, "metadata_patch"),
        ({"ops": [{"kind": "patch", "id": "a", "metadata": "x"}]}, "metadata"),
        ({"ops": [], "op_id": ""}, "op_id"),
        ({"ops": [], "expect": {"a": 0}}, "expect.a"),
        ({"ops": [DeleteOp(id="a"), DeleteOp(id="a")]}, "ops[1]"),
        ({"ops": [UpsertOp(record=rec())], "namespace": ("x",)}, "ops[0].record.namespace"),
        ({"ops": [{"kind": "patch", "id": "a", "vector": [1, "x"]}]}, "vector"),
        ({"ops": [{"kind": "patch", "id": "a", "metadata": {}, "metadata_patch": {}}]}, "metadata_patch"),
        ({"ops": [{"kind": "patch", "id": "a", "expires_at": 8.64e15}]}, "expires_at must lie in years 1 to 9999"),
        ({"ops": [{"kind": "patch", "id": "a", "timestamp": -1e11}]}, "timestamp must lie in years 1 to 9999"),
        ({"ops": [{"kind": "upsert", "record": {**rec().to_dict(), "expires_at": 2.6e11}}]}, "expires_at must lie"),
    ],
)
def test_bad_request_names_the_field(fields: dict[str, object], names: str) -> None:
    """Each kind of malformed request raises ContractError whose message names the field."""
    with pytest.raises(ContractError) as caught:
        WriteRequest(**fields)  # type: ignore[arg-type]
    assert names in str(caught.value)


def test_digest_ignores_the_op_id_and_survives_a_round_trip() -> None:
    """The digest is the same for the same request under any op id and after to_dict/from_dict."""
    a = WriteRequest(ops=[UpsertOp(record=rec()), PatchOp(id="b", metadata_patch={"k": None})], op_id="x")
    b = WriteRequest.from_dict({**a.to_dict(), "op_id": "y"})
    assert a.digest() == b.digest()


@pytest.mark.parametrize(
    "other",
    [
        WriteRequest(ops=[UpsertOp(record=rec(ts=-0.0))]),
        WriteRequest(ops=[UpsertOp(record=rec(expires_at=5.0))]),
        WriteRequest(ops=[UpsertOp(record=MemoryRecord(note=Note(id="a", text="t", timestamp=0.0), vector=np.ones(2, dtype="float32")))]),
        WriteRequest(ops=[UpsertOp(record=rec(ts=0.0))], expect={"a": None}),
        WriteRequest(ops=[UpsertOp(record=rec(ts=0.0))], namespace=()).model_copy(update={"missing_ok": True}),
    ],
)
def test_digest_tells_requests_apart_bit_for_bit(other: WriteRequest) -> None:
    """Requests differing in a timestamp's sign, an expiry, a vector dtype, an expectation or a
    flag have different digests."""
    base = WriteRequest(ops=[UpsertOp(record=rec(ts=0.0))])
    assert base.digest() != other.digest()
