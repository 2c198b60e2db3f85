"""The load fast path (a line exactly as ``dump`` writes it) decides as the strict reader and the
contract decide: same record bit for bit, or a refusal."""

from __future__ import annotations

import base64
import io
import json
import math
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti import memfile
from coniti.contracts import ContractError, check_json_value
from coniti.errors import MemoryFileError
from coniti.impl.memory import InMemoryBackend
from coniti.memory import MemoryRecord
from coniti.testing.helpers import Exact, exact, record
from coniti.testing.memfile_cases import header

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


def _finite(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise ValueError("overflow")
    return value


def _refuse(token: str) -> Any:
    raise ValueError(token)


def reference(line: str) -> Exact | None:
    """The verdict of the standard library's strict parse and the contract (no orjson, no fast path)."""
    try:
        data = json.loads(
            line,
            object_pairs_hook=_no_duplicate_keys,
            parse_float=_finite,
            parse_constant=_refuse,
        )
    except (ValueError, RecursionError):
        return None
    try:
        return exact(MemoryRecord.from_dict(data))
    except (ContractError, OverflowError):
        return None


def fast(line: str) -> Exact | None:
    with np.errstate(over="ignore"):
        got = memfile._canonical_record(line)
    return None if got is None else exact(got)


def general(line: str) -> Exact | None:
    with np.errstate(over="ignore"):
        try:
            return exact(memfile._record_of_line(line, 2))
        except MemoryFileError:
            return None


ABSENT = object()


def line_of(
    note: dict[str, Any], vector: Any, embedding_id: Any, namespace: Any, dtype: Any = ABSENT,
    blob: Any = ABSENT,
) -> str:
    """A line in dump's compact form (the standard encoder, so any integer can be written); no
    ``blob`` or ``dtype`` key when it is ABSENT."""
    data = {"note": note, "vector": vector, "embedding_id": embedding_id, "namespace": namespace}
    if blob is not ABSENT:
        data["blob"] = blob
    if dtype is not ABSENT:
        data["dtype"] = dtype
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def note(metadata: Any = None, timestamp: Any = 1.5, text: str = "t", note_id: str = "a") -> dict[str, Any]:
    return {"id": note_id, "text": text, "timestamp": timestamp, "metadata": metadata or {}}


# -- strategies ------------------------------------------------------------------------------------

big_ints = st.sampled_from(
    [2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10**30, 2**53 + 1, 2**60 + 2**36 + 1]
)
numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    st.integers(-(2**20), 2**20),
    big_ints,
    st.sampled_from([65504.0, 65520.0, 3.4028235e38, 3.4028236e38, 3.5e38, 1e-46, -0.0, 5e-324]),
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=5)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
vectors = st.one_of(
    st.lists(numbers, min_size=1, max_size=6),
    st.lists(st.one_of(numbers, json_values), min_size=0, max_size=4),
)
texts = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)


FIELDS = ("id", "text", "timestamp", "metadata", "vector", "element", "embedding_id", "namespace", "dtype",
          "blob", "base64")
blobs = st.one_of(
    st.just(ABSENT),
    st.binary(max_size=12).map(lambda b: {"base64": base64.b64encode(b).decode("ascii")}),
    st.sampled_from([{"base64": "YQ"}, {"base64": "YQ=="}, {"base64": "Y Q=="}, {"base64": ""}, None]),
)


@st.composite
def record_lines(draw: st.DrawFn) -> str:
    """A compact line of valid values, or with one of them (or one vector element) replaced by any
    JSON value."""
    fields: dict[str, Any] = {
        "id": draw(texts.filter(bool)),
        "text": draw(texts),
        "timestamp": draw(numbers),
        "metadata": draw(st.dictionaries(texts, json_values, max_size=3)),
        "vector": draw(st.lists(numbers, min_size=1, max_size=6) | st.none()),
        "embedding_id": draw(st.one_of(st.none(), texts)),
        "namespace": draw(st.lists(texts.filter(bool), max_size=2)),
        "dtype": draw(st.sampled_from([ABSENT, "float16", "float32", "float64"])),
        "blob": draw(blobs),
    }
    if fields["vector"] is None and draw(st.booleans()):  # mostly as dump writes it
        fields["embedding_id"], fields["dtype"] = None, ABSENT
    broken = draw(st.sampled_from((None, *FIELDS)))
    if broken == "element":
        if fields["vector"] is not None:
            at = draw(st.integers(0, len(fields["vector"])))
            fields["vector"].insert(at, draw(json_values))
    elif broken == "base64":
        fields["blob"] = {"base64": draw(json_values)}
    elif broken is not None:
        fields[broken] = draw(json_values)
    n = {k: fields[k] for k in ("id", "text", "timestamp", "metadata")}
    return line_of(
        n, fields["vector"], fields["embedding_id"], fields["namespace"], fields["dtype"], fields["blob"]
    )


TOKENS = [" ", "true", '"x"', "null", "1", "1.0", "99999999999999999999999", '{"a":1}', "[1]",
          ',"a":1', ',"vector":[1]', '"vector":[', "]", "1e400", "-0.0", ':', ',', '"id":"b",']  # fmt: skip
REPEATS = [
    ('"metadata":{', '"metadata":{"k":1,"k":2,'),
    ('"metadata":{', '"metadata":{"k":1,'),
    (',"embedding_id":', ',"vector":[1.0],"embedding_id":'),
    (',"namespace":', ',"namespace":["x"],"namespace":'),
    ('"vector":[', '"vector":[true,'),
    ('"vector":[', '"vector":[null,'),
    ('"vector":[', '"vector":["1",'),
    ('"vector":[', '"vector":[99999999999999999999999,'),
    ('"vector":[', '"vector":[3.5e38,'),
    ('"vector":[', '"vector":[[1],'),
    ('{"note":{', '{"note":{"id":"z",'),
    ('"timestamp":', '"timestamp":99999999999999999999999,"timestamp":'),
    ('"blob":{', '"blob":{"base64":"AA==",'),
    (',"blob":', ',"blob":null,"blob":'),
    ('"vector":null', '"vector":null,"vector":null'),
    ('"vector":null', '"vector":[]'),
    ('"vector":null', '"vector": null'),
]


@st.composite
def mutated_lines(draw: st.DrawFn) -> str:
    """A dumped line (of a valid record where the drawn values make one) with a key repeated, a
    non-number put in the vector, or one token inserted or replacing a short stretch."""
    timestamp = draw(st.floats(-1e12, 1e12))
    dtype = draw(st.sampled_from(["float16", "float32", "float64"]))
    vector = draw(st.lists(st.floats(-1e4, 1e4), min_size=1, max_size=4))
    metadata = draw(st.dictionaries(st.text(max_size=3), json_values, max_size=2))
    vectorless, blob = draw(st.booleans()), draw(st.none() | st.binary(max_size=6))
    try:
        with np.errstate(over="ignore"):
            r = record("r1", timestamp, dtype=dtype, vector=vector, metadata=metadata, vectorless=vectorless,
                       blob=blob)
        line = memfile.record_bytes(r)[:-1].decode()
    except ContractError:
        line = line_of(note(metadata, timestamp), vector, None, [], dtype)
    if draw(st.booleans()):
        old, new = draw(st.sampled_from(REPEATS))
        return line.replace(old, new, 1)
    at = draw(st.integers(0, len(line)))
    cut = draw(st.integers(0, 3))
    return line[:at] + draw(st.sampled_from(TOKENS)) + line[at + cut :]


# -- the equivalence -------------------------------------------------------------------------------


@SETTINGS
@given(st.one_of(record_lines(), mutated_lines()))
def test_fast_path_accepts_only_what_the_contract_accepts(line: str) -> None:
    """When the fast path gives a record, the strict parse + contract give the same one bit for bit."""
    got = fast(line)
    if got is not None:
        assert got == reference(line)


@SETTINGS
@given(st.one_of(record_lines(), mutated_lines()))
def test_reader_verdict_is_the_contracts(line: str) -> None:
    """Fast path, else the general path: the same verdict and record as strict parse + contract."""
    got = fast(line)
    assert (got if got is not None else general(line)) == reference(line)


@SETTINGS
@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1, max_size=8),
    st.sampled_from(["float16", "float32", "float64"]),
    st.dictionaries(texts, json_values, max_size=3),
    st.floats(allow_nan=False, allow_infinity=False),
)
def test_dumped_lines_take_the_fast_path(
    values: list[float], dtype: str, metadata: dict[str, Any], timestamp: float
) -> None:
    """Every line dump writes for a valid record is read by the fast path, back to the same record."""
    try:
        with np.errstate(over="ignore"):
            r = record("id-1", timestamp, vector=values, dtype=dtype, metadata=metadata, namespace=("n",))
    except ContractError:
        return  # e.g. a float32 value that overflows float16, or a big integer in the metadata
    assert fast(memfile.record_bytes(r)[:-1].decode()) == exact(r)


@SETTINGS
@given(
    st.booleans(),
    st.none() | st.binary(max_size=40),
    st.dictionaries(texts, json_values, max_size=3),
    st.floats(allow_nan=False, allow_infinity=False),
)
def test_dumped_lines_without_a_vector_or_with_a_blob_take_the_fast_path(
    vectorless: bool, blob: bytes | None, metadata: dict[str, Any], timestamp: float
) -> None:
    """Every line dump writes for a record without a vector or with a blob is read by the fast
    path, back to the same record."""
    try:
        r = record("id-1", timestamp, vectorless=vectorless, blob=blob, metadata=metadata, namespace=("n",))
    except ContractError:
        return  # a big integer in the metadata
    assert fast(memfile.record_bytes(r)[:-1].decode()) == exact(r)


@SETTINGS
@given(json_values)
def test_plain_json_agrees_with_check_json_value(value: Any) -> None:
    """_plain_json accepts a parsed JSON value exactly when check_json_value does."""
    try:
        check_json_value(value, "metadata")
        accepted = True
    except ValueError:
        accepted = False
    assert memfile._plain_json(value) is accepted


@SETTINGS
@given(st.lists(numbers, min_size=1, max_size=8), st.sampled_from(["float16", "float32", "float64"]))
def test_vector_is_the_contracts_cast(values: list[Any], dtype: str) -> None:
    """A list of ints and floats becomes the array np.array(values, dtype) gives, bit for bit, or
    is refused exactly when that array is not finite."""
    with np.errstate(over="ignore"):
        expected = np.array(values, dtype=dtype)
        try:
            got = memfile._vector(values, dtype)
        except OverflowError:
            got = None
    if np.isfinite(expected).all():
        assert got is not None
        assert (got.dtype, got.tobytes(), got.flags.writeable) == (expected.dtype, expected.tobytes(), True)
    else:
        assert got is None


@pytest.mark.parametrize("depth", [63, 64, 65])
@pytest.mark.parametrize("leaf", [1, [], {}])
def test_plain_json_depth_limit_is_check_json_values(depth: int, leaf: Any) -> None:
    """At and around the nesting limit, _plain_json accepts exactly what check_json_value does."""
    value: Any = leaf
    for _ in range(depth):
        value = [value]
    try:
        check_json_value({"d": value}, "metadata")
        accepted = True
    except ValueError:
        accepted = False
    assert memfile._plain_json({"d": value}) is accepted


@pytest.mark.parametrize("dtype", [None, 32, "float8", ["float32"]])
def test_compact_line_with_a_bad_dtype_is_refused(dtype: Any) -> None:
    """A dtype key that is null or not a known name is refused, not read as float64."""
    _refused(line_of(note(), [1.0], None, [], dtype), "line 2: invalid record: .*dtype")


# -- single cases through load ---------------------------------------------------------------------


def _load(*lines: str) -> int:
    text = json.dumps(header(len(lines))) + "\n" + "".join(line + "\n" for line in lines)
    return memfile.load(InMemoryBackend(), io.StringIO(text))


def _refused(line: str, match: str) -> None:
    with pytest.raises(MemoryFileError, match=match):
        _load(line)


def test_compact_duplicate_metadata_key_is_refused() -> None:
    """A repeated key in a compact line (orjson would keep the last) is refused, naming the line."""
    line = line_of(note({"a": 1}), [1.0], None, []).replace('"a":1', '"a":1,"a":2')
    _refused(line, r"line 2: invalid JSON: duplicate key 'a'")


def test_compact_duplicate_top_level_key_is_refused() -> None:
    """A repeated vector key in a compact line is refused, naming the line."""
    line = line_of(note(), [1.0], None, [])
    line = line.replace('"vector":[1.0]', '"vector":[true],"vector":[1.0]')
    _refused(line, r"line 2: invalid JSON: duplicate key 'vector'")


@pytest.mark.parametrize("token", ["true", "false", "null", '"1.5"', "[1.0]", '{"a":1}'])
def test_non_number_in_compact_vector_is_refused(token: str) -> None:
    """A vector element that is not a number is refused even in a compact float32 line."""
    _refused(line_of(note(), "@", None, [], "float32").replace('"@"', f"[1.0,{token}]"), "line 2")


def test_integer_beyond_64_bits_in_compact_metadata_is_refused() -> None:
    """An integer beyond 64 bits in metadata (orjson reads it as a float) is refused."""
    _refused(line_of(note({"n": 10**30}), [1.0], None, []), "line 2: invalid record: .*64-bit")


def test_value_overflowing_float32_is_refused() -> None:
    """A value beyond float32's range in a compact float32 line is refused as not finite."""
    _refused(line_of(note(), [1.0, 3.5e38], None, [], "float32"), "line 2: invalid record: .*finite")


def test_value_rounding_down_to_float32_max_is_accepted() -> None:
    """A value just above float32's largest that rounds to it is accepted, as the contract does."""
    line = line_of(note(), [3.4028235e38, 3.40282356e38], None, [], "float32")
    assert fast(line) is not None
    assert fast(line) == reference(line)


def test_huge_integer_timestamp_is_a_memory_file_error() -> None:
    """A timestamp integer beyond the float range is refused with MemoryFileError naming the line."""
    _refused(line_of(note(timestamp=10**400), [1.0], None, []), "line 2: invalid record")


def test_huge_integer_in_vector_is_a_memory_file_error() -> None:
    """A vector integer beyond the float range is refused with MemoryFileError naming the line."""
    _refused(line_of(note(), [10**400], None, []), "line 2: invalid record")


def test_metadata_nested_too_deep_is_refused_on_the_fast_path() -> None:
    """Metadata nested deeper than the contract allows is refused from a compact line."""
    deep: Any = 1
    for _ in range(70):
        deep = [deep]
    line = line_of(note({"d": deep}), [1.0], None, [])
    assert fast(line) is None
    _refused(line, "line 2: invalid record: .*deeper")


def test_escaped_text_still_loads() -> None:
    """A line orjson would write differently (escaped non-ASCII) takes the general path, same record."""
    line = json.dumps(json.loads(line_of(note(text="café"), [0.5], "e", ["n"])), separators=(",", ":"))
    assert "\\u00e9" in line
    assert fast(line) is None
    assert general(line) == reference(line) is not None


def test_fast_path_needs_the_compact_form() -> None:
    """The same record with a space after a colon is not taken by the fast path, yet loads."""
    line = orjson.dumps(json.loads(line_of(note(), [0.5], None, []))).decode().replace(":", ": ", 1)
    assert fast(line) is None
    assert _load(line) == 1
