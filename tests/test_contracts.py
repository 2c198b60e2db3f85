"""Contracts: to_dict/from_dict/to_json/from_json/json_schema on every model, vectors, ContractError."""

from __future__ import annotations

import json
from typing import Any

import hypothesis.extra.numpy as hnp
import numpy as np
import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

import coniti.actor
import coniti.records
import coniti.requests
from coniti import ConitiError, ContractError, Note, Query, TimeRange
from coniti.contracts import Contract
from coniti.memory import (
    ClearRequest,
    ClearResult,
    CountRequest,
    CountResult,
    DeleteOp,
    DeleteRequest,
    DeleteResult,
    FeedbackRequest,
    FeedbackResult,
    GetRequest,
    GetResult,
    MemoryRecord,
    MetaGetRequest,
    MetaResult,
    MetaSetRequest,
    PatchOp,
    PutRequest,
    PutResult,
    ScanRequest,
    ScanResult,
    SweepResult,
    UpsertOp,
    WriteRequest,
    WriteResult,
    require,
)
from coniti.testing.helpers import exact
from coniti.testing.properties import VECTOR_ELEMENTS, json_values, stored_times

NOTE = Note(id="n1", text="hello\nworld", timestamp=-0.0, metadata={"a": [1, 1.0, True, None, "s"]})
TRICKY = [1 / 3, -2.5e-5, 1e-40, 6.0e4, -0.0, 0.1]


def rec(dtype: str = "float64", **kwargs: Any) -> MemoryRecord:
    fields: dict[str, Any] = {"note": NOTE, "vector": np.array(TRICKY, dtype=dtype)}
    fields.update(kwargs)
    return MemoryRecord(**fields)


SAMPLES: dict[str, Contract] = {
    "Note": NOTE,
    "TimeRange": TimeRange(start=1.5, end=None),
    "Query": Query(text="budget", time_range=TimeRange(start=1.0, end=2.0), near="n1", k=5),
    "MemoryRecord": rec("float32", embedding_id="emb-1", namespace=("alice", "work")),
    "PutRequest": PutRequest(records=[rec("float16"), rec("float64", namespace=("x",))]),
    "PutResult": PutResult(written=2, versions=[3, 4], seqs=[2, 3, 4]),
    "GetRequest": GetRequest(ids=["a", "b"], namespace=("x",)),
    "GetResult": GetResult(records=[rec("float32")], missing=["z"]),
    "DeleteRequest": DeleteRequest(ids=["a"], namespace=()),
    "DeleteResult": DeleteResult(deleted=["a"], missing=["b"], seqs=[7]),
    "ScanRequest": ScanRequest(time_range=TimeRange(end=3.0), namespace=("x",), limit=5, cursor="c"),
    "ScanResult": ScanResult(records=[rec()], next_cursor="abc"),
    "CountRequest": CountRequest(time_range=TimeRange(start=0.0), namespace=("x",)),
    "CountResult": CountResult(count=3),
    "MetaGetRequest": MetaGetRequest(key="embedding_id", namespace=("x",)),
    "MetaSetRequest": MetaSetRequest(key="k", value={"l": [1, 2.5, None]}, namespace=()),
    "MetaResult": MetaResult(value=[1, "two"]),
    "ClearRequest": ClearRequest(namespace=("x",)),
    "ClearResult": ClearResult(deleted=4),
    "UpsertOp": UpsertOp(record=rec("float32", expires_at=99.5)),
    "PatchOp": PatchOp(id="n1", text="t", vector=np.array([0.5], dtype="float32"), metadata_patch={"a": None}),
    "DeleteOp": DeleteOp(id="n2"),
    "WriteRequest": WriteRequest(
        ops=[UpsertOp(record=rec(namespace=("x",))), PatchOp(id="b", timestamp=2.0), DeleteOp(id="c")],
        namespace=("x",),
        expect={"b": 3, "d": None},
        op_id="run-1/step-2",
    ),
    "WriteResult": WriteResult(
        versions={"n1": 12}, unchanged=["b"], deleted=["c"], missing=[], seqs=[12, 13]
    ),
    "SweepResult": SweepResult(deleted=2),
    "FeedbackRequest": FeedbackRequest(id="n1", weight=0.5, namespace=("x",), reason="helpful"),
    "FeedbackResult": FeedbackResult(id="n1", weight=1.5, seq=7),
}
"""One instance of every contract model in coniti.actor and coniti.memory."""


def _json_only(value: Any) -> bool:
    """True if ``value`` is made only of dict/list/str/int/float/bool/None."""
    if value is None or isinstance(value, str | int | float | bool):
        return True
    if isinstance(value, list):
        return all(_json_only(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_only(v) for k, v in value.items())
    return False


def _same(a: Contract, b: Contract) -> bool:
    """Equal, and every record inside identical bit for bit."""
    if a != b:
        return False
    recs_a = a.records if isinstance(a, PutRequest | GetResult | ScanResult) else []
    recs_b = b.records if isinstance(b, PutRequest | GetResult | ScanResult) else []
    if isinstance(a, MemoryRecord) and isinstance(b, MemoryRecord):
        recs_a, recs_b = [a], [b]
    return [exact(r) for r in recs_a] == [exact(r) for r in recs_b]


# -- every contract model ---------------------------------------------------------------------


def test_every_contract_model_has_a_sample() -> None:
    """SAMPLES covers every Contract subclass defined in coniti.actor, coniti.records and
    coniti.requests (the models coniti.memory re-exports)."""
    modules = {coniti.actor.__name__, coniti.records.__name__, coniti.requests.__name__}
    found: set[str] = set()
    stack = list(Contract.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__ in modules:
            found.add(cls.__name__)
    assert found == set(SAMPLES)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_to_dict_is_plain_json(name: str) -> None:
    """to_dict gives only JSON types (lists, not tuples; no arrays) and json.dumps accepts it strictly."""
    data = SAMPLES[name].to_dict()
    assert _json_only(data)
    json.dumps(data, allow_nan=False)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_from_dict_round_trips(name: str) -> None:
    """from_dict(to_dict()) gives an equal model, records bit for bit."""
    sample = SAMPLES[name]
    assert _same(type(sample).from_dict(sample.to_dict()), sample)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_from_json_round_trips(name: str) -> None:
    """from_json(to_json()) gives an equal model, records bit for bit."""
    sample = SAMPLES[name]
    text = sample.to_json()
    assert isinstance(text, str)
    assert _same(type(sample).from_json(text), sample)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_from_json_accepts_bytes(name: str) -> None:
    """from_json also takes UTF-8 bytes."""
    sample = SAMPLES[name]
    assert _same(type(sample).from_json(sample.to_json().encode()), sample)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_json_schema_describes_to_dict(name: str) -> None:
    """json_schema is an object schema whose properties include every key to_dict writes."""
    sample = SAMPLES[name]
    schema = type(sample).json_schema()
    assert schema["type"] == "object"
    json.dumps(schema)
    assert set(sample.to_dict()) <= set(schema["properties"])


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_constructors_are_classmethods(name: str) -> None:
    """from_dict, from_json and json_schema are called on the class."""
    cls = type(SAMPLES[name])
    for method in ["from_dict", "from_json", "json_schema"]:
        assert getattr(cls, method).__self__ is cls


@pytest.mark.parametrize("name", sorted(SAMPLES))
@pytest.mark.parametrize("bad", [None, [], "text", 5])
def test_from_dict_of_non_object_is_refused(name: str, bad: Any) -> None:
    """from_dict of anything but a dict raises ContractError naming the model."""
    cls = type(SAMPLES[name])
    with pytest.raises(ContractError, match=cls.__name__):
        cls.from_dict(bad)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_from_dict_with_unknown_field_is_refused(name: str) -> None:
    """An unknown field raises ContractError naming it."""
    sample = SAMPLES[name]
    with pytest.raises(ContractError, match="surprise"):
        type(sample).from_dict({**sample.to_dict(), "surprise": 1})


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_from_json_of_invalid_json_is_refused(name: str) -> None:
    """from_json of text that is not JSON raises ContractError."""
    with pytest.raises(ContractError, match="invalid JSON"):
        type(SAMPLES[name]).from_json("{not json")


# -- JSON text ---------------------------------------------------------------------------------


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_from_json_refuses_non_finite_tokens(token: str) -> None:
    """NaN and Infinity tokens are refused, even where any JSON value is allowed."""
    with pytest.raises(ContractError):
        MetaResult.from_json('{"value": ' + token + "}")


def test_from_json_refuses_overflow_to_infinity() -> None:
    """A number that overflows to infinity is refused."""
    with pytest.raises(ContractError):
        MetaResult.from_json('{"value": [1e999]}')


def test_from_json_refuses_deep_nesting_with_contract_error() -> None:
    """Very deep nesting raises ContractError, not RecursionError."""
    with pytest.raises(ContractError):
        MetaResult.from_json('{"value": ' + "[" * 100_000 + "]" * 100_000 + "}")


def test_to_json_refuses_nothing_it_accepted() -> None:
    """A model that validated always serialises (no NaN can have slipped in)."""
    assert json.loads(SAMPLES["MetaSetRequest"].to_json())["value"] == {"l": [1, 2.5, None]}


# -- vectors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_vector_dtype_is_kept(dtype: str) -> None:
    """A float16/32/64 array keeps its dtype in the record."""
    assert rec(dtype).vector.dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_vector_round_trips_bit_for_bit_through_dict(dtype: str) -> None:
    """from_dict(to_dict()) gives the same vector bytes and dtype."""
    original = rec(dtype)
    back = MemoryRecord.from_dict(original.to_dict())
    assert back.vector.dtype == original.vector.dtype
    assert back.vector.tobytes() == original.vector.tobytes()


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_vector_round_trips_bit_for_bit_through_json(dtype: str) -> None:
    """from_json(to_json()) gives the same vector bytes and dtype."""
    original = rec(dtype)
    back = MemoryRecord.from_json(original.to_json())
    assert back.vector.dtype == original.vector.dtype
    assert back.vector.tobytes() == original.vector.tobytes()


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_to_dict_names_a_non_default_dtype(dtype: str) -> None:
    """to_dict adds "dtype" for float16/float32 vectors."""
    assert rec(dtype).to_dict()["dtype"] == dtype


def test_to_dict_leaves_out_float64_dtype() -> None:
    """A float64 vector's to_dict has no dtype key (float64 is the default)."""
    assert "dtype" not in rec("float64").to_dict()


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_vector_is_written_at_full_precision(dtype: str) -> None:
    """to_dict writes each element as the exact float64 value of the stored number."""
    original = rec(dtype)
    assert original.to_dict()["vector"] == [float(x) for x in original.vector]


def test_list_vector_becomes_float64() -> None:
    """A list of numbers becomes a float64 vector."""
    assert rec(vector=[1, 2.5]).vector.dtype == np.float64


def test_integer_array_becomes_float64() -> None:
    """An integer array becomes a float64 vector."""
    assert rec(vector=np.array([1, 2], dtype=np.int32)).vector.dtype == np.float64


def test_dtype_key_sets_the_dtype() -> None:
    """from_dict with "dtype" builds a vector of that dtype."""
    data = {**rec().to_dict(), "dtype": "float32"}
    assert MemoryRecord.from_dict(data).vector.dtype == np.float32


def test_vector_is_copied_in() -> None:
    """Changing the array after building the record leaves the record's vector unchanged."""
    source = np.array([1.0, 2.0])
    record = rec(vector=source)
    source[0] = 99.0
    assert record.vector[0] == 1.0


@pytest.mark.parametrize(
    "bad",
    [
        [],
        [[1.0, 2.0]],
        np.zeros((2, 2)),
        np.array([], dtype=np.float32),
        [1.0, float("nan")],
        [float("inf")],
        np.array([1.0, -np.inf], dtype=np.float16),
        [True, 1.0],
        ["1.0"],
        "1.0",
        np.array([1 + 2j]),
    ],
    ids=[
        "empty",
        "nested-list",
        "2d",
        "empty-array",
        "nan",
        "inf",
        "float16-inf",
        "bool",
        "string-element",
        "string",
        "complex",
    ],
)
def test_bad_vector_is_refused(bad: Any) -> None:
    """Empty, non-1-D, non-finite and non-numeric vectors raise ContractError naming 'vector'."""
    with pytest.raises(ContractError, match="vector"):
        rec(vector=bad)


@pytest.mark.parametrize("dtype", ["int8", "float128", 32, None])
def test_unknown_dtype_key_is_refused(dtype: Any) -> None:
    """A "dtype" other than float16/32/64 raises ContractError naming 'dtype'."""
    with pytest.raises(ContractError, match="dtype"):
        MemoryRecord.from_dict({**rec().to_dict(), "dtype": dtype})


@pytest.mark.parametrize(("dtype", "value"), [("float16", 7e4), ("float32", 1e39)])
def test_value_overflowing_the_dtype_is_refused(dtype: str, value: float) -> None:
    """A value too large for the named dtype (it would become infinity) is refused."""
    with pytest.raises(ContractError, match="vector"):
        MemoryRecord.from_dict({**rec().to_dict(), "vector": [value], "dtype": dtype})


# -- MemoryRecord and namespaces ---------------------------------------------------------------


def test_record_id_is_the_note_id() -> None:
    """record.id is the note's id."""
    assert rec().id == "n1"


def test_record_is_frozen() -> None:
    """A record's fields cannot be reassigned."""
    record = rec()
    with pytest.raises(ValueError):
        record.embedding_id = "x"  # type: ignore[misc]


def test_record_defaults() -> None:
    """embedding_id defaults to None and namespace to ()."""
    record = rec()
    assert (record.embedding_id, record.namespace) == (None, ())


def test_namespace_list_becomes_tuple() -> None:
    """A namespace given as a list is stored as a tuple, and written as a list."""
    record = rec(namespace=["a", "b"])
    assert record.namespace == ("a", "b")
    assert record.to_dict()["namespace"] == ["a", "b"]


@pytest.mark.parametrize("bad", ["alice", ("",), ("a", ""), (1,), None, ("a", None)])
def test_bad_namespace_is_refused(bad: Any) -> None:
    """A string, an empty or non-string part, or None is refused, naming 'namespace'."""
    with pytest.raises(ContractError, match="namespace"):
        GetRequest(ids=[], namespace=bad)


def test_record_with_bad_note_names_the_nested_field() -> None:
    """An error inside a nested note names the path to it."""
    with pytest.raises(ContractError, match=r"note.*\bid\b"):
        MemoryRecord.from_dict({**rec().to_dict(), "note": {**NOTE.to_dict(), "id": ""}})


def test_put_request_error_names_the_record_index() -> None:
    """An error in the second record of a PutRequest names records.1."""
    data = PutRequest(records=[rec(), rec()]).to_dict()
    data["records"][1]["vector"] = []
    with pytest.raises(ContractError, match=r"records\.1"):
        PutRequest.from_dict(data)


# -- request fields ------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "5"])
def test_scan_limit_must_be_a_positive_int(limit: Any) -> None:
    """ScanRequest.limit must be an int >= 1 (or None), naming 'limit'."""
    with pytest.raises(ContractError, match="limit"):
        ScanRequest(limit=limit)


def test_scan_limit_none_is_allowed() -> None:
    """ScanRequest.limit defaults to None (the whole range)."""
    assert ScanRequest().limit is None


@pytest.mark.parametrize("cls", [MetaGetRequest, MetaSetRequest])
def test_meta_key_must_be_non_empty(cls: type[Contract]) -> None:
    """An empty metadata key raises ContractError naming 'key'."""
    with pytest.raises(ContractError, match="key"):
        cls(key="", value=1) if cls is MetaSetRequest else cls(key="")


@pytest.mark.parametrize("value", [float("nan"), [float("inf")], {"x": {1}}, 2**64])
def test_meta_value_must_be_finite_json(value: Any) -> None:
    """A metadata value that is non-finite, non-JSON or an integer beyond 64 bits names 'value'."""
    with pytest.raises(ContractError, match="value"):
        MetaSetRequest(key="k", value=value)


def test_meta_value_is_copied_in() -> None:
    """Changing the caller's value after building the request leaves the request unchanged."""
    value: dict[str, Any] = {"l": [1]}
    request = MetaSetRequest(key="k", value=value)
    value["l"].append(2)
    assert request.value == {"l": [1]}


def test_get_ids_must_be_strings() -> None:
    """GetRequest ids must be strings, naming 'ids'."""
    with pytest.raises(ContractError, match="ids"):
        GetRequest(ids=[1])


# -- ContractError -------------------------------------------------------------------------------


def test_contract_error_is_a_value_error_under_the_root() -> None:
    """ContractError is a ValueError and a ConitiError."""
    assert issubclass(ContractError, ValueError)
    assert issubclass(ContractError, ConitiError)


def test_validation_failure_is_not_a_pydantic_error() -> None:
    """A validation failure raises ContractError, never pydantic's ValidationError."""
    with pytest.raises(ContractError) as info:
        Note(id="", text="x", timestamp=1.0)
    assert not isinstance(info.value, pydantic.ValidationError)


def test_contract_error_names_model_and_field() -> None:
    """The message names the model and the field: 'Note.id: ...'."""
    with pytest.raises(ContractError, match=r"^Note\.id: "):
        Note(id="", text="x", timestamp=1.0)


def test_contract_error_lists_every_problem() -> None:
    """Several bad fields are all named in one message."""
    with pytest.raises(ContractError) as info:
        Note(id="", text=5, timestamp=1.0)
    assert "Note.id" in str(info.value) and "Note.text" in str(info.value)


def test_require_returns_the_request() -> None:
    """require returns a request of the expected type unchanged."""
    request = GetRequest(ids=["a"])
    assert require(request, GetRequest) is request


@pytest.mark.parametrize("wrong", [DeleteRequest(ids=["a"]), {"ids": ["a"]}, None])
def test_require_refuses_other_types(wrong: Any) -> None:
    """require raises ContractError naming the expected and the given type."""
    with pytest.raises(ContractError, match=rf"GetRequest.*{type(wrong).__name__}"):
        require(wrong, GetRequest)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_constructor_builds_what_validation_builds(name: str) -> None:
    """Model.constructor()(every field) equals the validated sample and names every field as set."""
    sample = SAMPLES[name]
    cls = type(sample)
    built = cls.constructor()(dict(sample.__dict__))
    assert type(built) is cls and built.to_dict() == sample.to_dict()
    assert built.model_fields_set == set(cls.model_fields)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_constructor_is_made_once_per_class(name: str) -> None:
    """constructor() hands out the same function every time (hot paths keep it in a module name)."""
    cls = type(SAMPLES[name])
    assert cls.constructor() is cls.constructor()


def test_trusted_note_and_record_equal_validated_ones() -> None:
    """Note.trusted and MemoryRecord.trusted build what the validating constructors build."""
    note = Note(id="n", text="t", timestamp=1.0, metadata={"a": [1]})
    vector = np.array([1.0, 2.0], dtype=np.float32)
    record = MemoryRecord(note=note, vector=vector, embedding_id="emb-x", namespace=("a",))
    trusted = MemoryRecord.trusted(
        Note.trusted("n", "t", 1.0, {"a": [1]}), vector, "emb-x", ("a",)
    )
    assert trusted == record and trusted.note == note


def _hash_or_error(model: object) -> object:
    try:
        return hash(model)
    except TypeError as exc:
        return type(exc)


_stored_rows = st.lists(
    st.tuples(
        st.text(min_size=1, max_size=8),
        stored_times,
        st.dictionaries(st.text(max_size=4), json_values, max_size=3),
        st.sampled_from(VECTOR_ELEMENTS).flatmap(
            lambda de: hnp.arrays(np.dtype(de[0]), st.integers(1, 4), elements=de[1])
        )
        | st.none(),
        st.none() | st.binary(max_size=8),
        st.integers(1, 2**63),
        st.none() | stored_times.map(lambda t: t + 0.0),
    ),
    max_size=4,
)


_KINDS = (None, "message", "my kind")
_FACTS = (None, (1.0, None, ()), (None, 5.0, ("seq:3", "note:a@2")))


@given(_stored_rows, st.lists(st.text(min_size=1, max_size=4), max_size=2).map(tuple))
def test_trusted_rows_build_what_validation_builds(rows: list[tuple[Any, ...]], namespace: tuple[str, ...]) -> None:
    """MemoryRecord.trusted_rows gives, row by row, what the validating constructors build from every
    field: the same type, fields and fields set (record and note), ==, to_dict, model_dump, hash (or
    its error) and frozenness, with the row's own vector (no copy)."""
    stored = [
        (rid, ts, (f"text {rid}", md, None if vec is None else "emb-1", vec, blob, _KINDS[version % 3],
                   _FACTS[version % 3]), version, expires)
        for rid, ts, md, vec, blob, version, expires in rows
    ]
    built = MemoryRecord.trusted_rows(stored, namespace)
    assert len(built) == len(stored)
    for got, (rid, ts, (text, md, emb, vec, blob, kind, facts), version, expires) in zip(built, stored, strict=True):
        vf, vt, df = (None, None, ()) if facts is None else facts
        note = Note(id=rid, text=text, timestamp=ts, metadata=md, kind=kind, valid_from=vf, valid_to=vt, derived_from=df)
        want = MemoryRecord(
            note=note, vector=vec, embedding_id=emb, namespace=namespace, expires_at=expires, blob=blob,
            version=version,
        )
        assert type(got) is MemoryRecord and type(got.note) is Note
        assert got.vector is vec and got.note.metadata is md
        assert list(got.__dict__) == list(want.__dict__) and got.version == want.version
        assert got.note.__dict__ == note.__dict__ and exact(got) == exact(want)
        assert got.model_fields_set == want.model_fields_set == set(MemoryRecord.model_fields)
        assert got.note.model_fields_set == note.model_fields_set
        assert got == want and got.to_dict() == want.to_dict()
        assert got.model_dump(mode="json") == want.model_dump(mode="json")
        assert (got.__pydantic_extra__, got.__pydantic_private__) == (want.__pydantic_extra__, None)
        assert _hash_or_error(got) == _hash_or_error(want)
        assert _hash_or_error(got.note) == _hash_or_error(note)
        with pytest.raises(pydantic.ValidationError):
            got.blob = b"x"  # type: ignore[misc]
        with pytest.raises(pydantic.ValidationError):
            got.note.text = "x"  # type: ignore[misc]


def test_coniti_builds_no_model_with_pydantic_model_construct() -> None:
    """Unvalidated models are built only through Contract.constructor (or Note/MemoryRecord.trusted
    over it): no module of coniti calls pydantic's model_construct."""
    from pathlib import Path

    root = Path(coniti.actor.__file__).parent
    offenders = [
        str(path.relative_to(root))
        for path in sorted(root.rglob("*.py"))
        if "model_construct(" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []
