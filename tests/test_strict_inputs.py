"""String fields take strings only, and results hold only JSON-able finite values: no silent coercion."""

from __future__ import annotations

import pytest

from coniti import ContractError, GetRequest, MetaGetRequest, MetaResult, Note, Query, TimeRange
from coniti.memory import MemoryRecord


@pytest.mark.parametrize(
    "build",
    [
        lambda: Note(id=b"n1", text="x", timestamp=1.0),
        lambda: Note(id="n1", text=b"x", timestamp=1.0),
        lambda: Query(text=b"x"),
        lambda: Query(near=b"n1"),
        lambda: GetRequest(ids=[b"n1"]),
        lambda: MetaGetRequest(key=b"k"),
    ],
    ids=["note.id", "note.text", "query.text", "query.near", "get.ids", "meta.key"],
)
def test_bytes_are_not_coerced_to_str(build: object) -> None:
    """Bytes given for a string field raise ContractError instead of being decoded silently."""
    with pytest.raises(ContractError):
        build()  # type: ignore[operator]


def test_meta_result_refuses_non_finite_value() -> None:
    """MetaResult.from_dict refuses NaN like every other JSON value coniti accepts."""
    with pytest.raises(ContractError, match="value"):
        MetaResult.from_dict({"value": float("nan")})


def test_memory_file_round_trips_a_namespace_with_a_lone_surrogate(tmp_path: object) -> None:
    """A namespace holding a lone surrogate (valid in a Python str, not in UTF-8) dumps as a \\u escape
    and loads back unchanged, instead of failing the dump."""
    import pathlib

    import numpy as np

    from coniti.impl.memory import InMemoryBackend
    from coniti.memory import MemoryRecord, PutRequest

    path = pathlib.Path(str(tmp_path)) / "odd.jsonl"
    namespace = ("a\udc80",)
    source = InMemoryBackend()
    record = MemoryRecord(
        note=Note(id="n1", text="t", timestamp=1.0), vector=np.ones(2, "float32"), namespace=namespace
    )
    source.put(PutRequest(records=[record]))
    assert source.dump(path, namespace=namespace) == 1
    target = InMemoryBackend()
    assert target.load(path) == 1
    assert target.get(target.get_request(["n1"], namespace=namespace)).records == [record]


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Note(id="n1", text="x", timestamp=10**400), "timestamp"),
        (lambda: Note(id="n1", text="x", timestamp=-(10**400)), "timestamp"),
        (lambda: TimeRange(start=10**400), "start"),
        (lambda: TimeRange(end=10**400), "end"),
        (lambda: _record([1.0, 10**400]), "vector"),
        (lambda: _record([10**400], dtype="float32"), "vector"),
    ],
    ids=["note.timestamp", "note.timestamp-negative", "range.start", "range.end", "vector", "vector-f32"],
)
def test_an_integer_beyond_float_range_is_a_contract_error(build: object, field: str) -> None:
    """An int too large for a float (Python's float() raises OverflowError on it) is refused as a
    ContractError naming the field, like every other bad value."""
    with pytest.raises(ContractError, match=field):
        build()  # type: ignore[operator]


def _record(vector: list[float], dtype: str | None = None) -> MemoryRecord:
    note = Note(id="n1", text="x", timestamp=1.0)
    if dtype is None:
        return MemoryRecord(note=note, vector=vector)
    return MemoryRecord(note=note, vector=vector, dtype=dtype)
