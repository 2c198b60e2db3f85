"""The actor layer (spec/layers.md): Note, TimeRange, Query."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from coniti import ContractError, Note, Query, TimeRange
from coniti.contracts import MAX_JSON_DEPTH

AWARE = datetime(2026, 1, 5, 12, 30, tzinfo=UTC)


def note(**fields: Any) -> Note:
    values: dict[str, Any] = {"id": "n1", "text": "hello", "timestamp": 100.0}
    values.update(fields)
    return Note(**values)


# -- Note --------------------------------------------------------------------------------------


def test_note_holds_its_fields() -> None:
    """A note keeps id, text, timestamp and metadata as given."""
    n = note(metadata={"project": "q3"})
    assert (n.id, n.text, n.timestamp, n.metadata) == ("n1", "hello", 100.0, {"project": "q3"})


def test_note_metadata_defaults_to_empty() -> None:
    """metadata defaults to an empty dict."""
    assert note().metadata == {}


@pytest.mark.parametrize("field", ["id", "text", "timestamp", "metadata"])
def test_note_is_frozen(field: str) -> None:
    """No field of a note can be reassigned."""
    n = note()
    with pytest.raises(ValueError):
        setattr(n, field, n.id)


def test_note_empty_id_is_refused() -> None:
    """An empty id raises ContractError naming 'id'."""
    with pytest.raises(ContractError, match=r"\bid\b"):
        note(id="")


@pytest.mark.parametrize("bad", [1, None, ["n1"]])
def test_note_id_must_be_a_string(bad: Any) -> None:
    """A non-string id is refused, not converted."""
    with pytest.raises(ContractError, match=r"\bid\b"):
        note(id=bad)


def test_note_text_must_be_a_string() -> None:
    """A non-string text is refused."""
    with pytest.raises(ContractError, match="text"):
        note(text=5)


def test_note_empty_text_is_allowed() -> None:
    """An empty text is a valid note."""
    assert note(text="").text == ""


def test_note_unknown_field_is_refused() -> None:
    """An unknown field raises ContractError naming it."""
    with pytest.raises(ContractError, match="colour"):
        note(colour="red")


def test_note_metadata_is_deep_copied_in() -> None:
    """Changing the caller's dict (top level or nested) after construction leaves the note unchanged."""
    meta: dict[str, Any] = {"tags": ["a"], "inner": {"k": 1}}
    n = note(metadata=meta)
    meta["tags"].append("b")
    meta["inner"]["k"] = 2
    meta["new"] = True
    assert n.metadata == {"tags": ["a"], "inner": {"k": 1}}


def test_note_metadata_tuples_become_lists() -> None:
    """Tuples in metadata are stored as JSON lists."""
    assert note(metadata={"t": (1, (2, 3))}).metadata == {"t": [1, [2, 3]]}


@pytest.mark.parametrize(
    ("metadata", "path"),
    [
        ({"x": float("nan")}, "metadata.x"),
        ({"x": float("inf")}, "metadata.x"),
        ({"x": [1.0, float("-inf")]}, r"metadata.x\[1\]"),
        ({"x": {"y": float("nan")}}, "metadata.x.y"),
    ],
)
def test_note_metadata_must_be_finite(metadata: dict[str, Any], path: str) -> None:
    """A non-finite number anywhere in metadata is refused, naming its path."""
    with pytest.raises(ContractError, match=path):
        note(metadata=metadata)


@pytest.mark.parametrize(
    "metadata",
    [{"x": {1, 2}}, {"x": object()}, {"x": b"bytes"}, {1: "int key"}, {"x": {"y": {2: "k"}}}],
    ids=["set", "object", "bytes", "int-key", "nested-int-key"],
)
def test_note_metadata_must_be_json(metadata: dict[Any, Any]) -> None:
    """Metadata that JSON cannot hold (sets, objects, bytes, non-string keys) is refused."""
    with pytest.raises(ContractError, match="metadata"):
        note(metadata=metadata)


def test_note_metadata_must_be_a_dict() -> None:
    """Metadata that is not a dict is refused."""
    with pytest.raises(ContractError, match="metadata"):
        note(metadata=[1, 2])


def test_note_metadata_integer_outside_64_bits_is_refused() -> None:
    """An integer outside the signed 64-bit range is refused (it could not be stored exactly)."""
    with pytest.raises(ContractError, match="metadata.n"):
        note(metadata={"n": 2**63})


def test_note_metadata_nested_too_deep_is_refused() -> None:
    """Metadata nested deeper than MAX_JSON_DEPTH is refused, without a RecursionError."""
    deep: Any = 1
    for _ in range(MAX_JSON_DEPTH + 2):
        deep = [deep]
    with pytest.raises(ContractError, match="nested"):
        note(metadata={"d": deep})


def test_note_metadata_extremely_deep_is_refused() -> None:
    """Even metadata nested 100 000 deep is refused with ContractError."""
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ContractError):
        note(metadata={"d": deep})


# -- Note.create -------------------------------------------------------------------------------


def test_create_gives_a_random_hex_id() -> None:
    """Note.create gives a 32-character hex id, different on each call."""
    a, b = Note.create("x"), Note.create("x")
    assert len(a.id) == 32 and int(a.id, 16) >= 0
    assert a.id != b.id


def test_create_defaults_time_to_now() -> None:
    """Without a timestamp, Note.create uses the current time."""
    before = time.time()
    n = Note.create("x")
    assert before <= n.timestamp <= time.time()


def test_create_takes_metadata_as_keywords() -> None:
    """Keyword arguments of Note.create become metadata."""
    assert Note.create("met Ana", project="q3", n=2).metadata == {"project": "q3", "n": 2}


def test_create_accepts_an_aware_datetime() -> None:
    """Note.create converts an aware datetime timestamp to epoch seconds."""
    assert Note.create("kick-off", timestamp=AWARE).timestamp == AWARE.timestamp()


def test_create_validates_like_the_constructor() -> None:
    """Note.create refuses what the constructor refuses (here a NaN metadata value)."""
    with pytest.raises(ContractError, match="metadata.x"):
        Note.create("x", x=float("nan"))


# -- timestamps ----------------------------------------------------------------------------------


def test_timestamps_span_years_1_to_9999_and_all_print() -> None:
    """The first and the last timestamp of the horizon are accepted and print as ISO times."""
    from coniti.times import MAX_TIME, MIN_TIME, iso_time

    last = math.nextafter(MAX_TIME, 0.0)
    assert note(timestamp=MIN_TIME).timestamp == MIN_TIME and note(timestamp=last).timestamp == last
    assert iso_time(MIN_TIME) == "0001-01-01T00:00:00Z" and iso_time(last).startswith("9999-12-31T23:59:59")


@pytest.mark.parametrize(
    "bad",
    [253_402_300_800.0, -62_135_596_801.0, 8_639_999_999_913_600.0, 2**80,
     datetime(9999, 12, 31, 23, 30, tzinfo=timezone(timedelta(hours=-1)))],
    ids=["year-10000", "before-year-1", "year-273792727", "huge-int", "year-10000-in-utc"],
)
def test_a_timestamp_outside_the_horizon_is_refused(bad: Any) -> None:
    """A note timestamp outside years 1 to 9999 UTC raises ContractError naming the field and the
    horizon (so every stored timestamp can be printed)."""
    with pytest.raises(ContractError, match=r"timestamp (must lie in years 1 to 9999 UTC|is too large)"):
        note(timestamp=bad)


def test_a_time_range_is_not_bounded_by_the_horizon() -> None:
    """TimeRange bounds are not stored: any finite bound is accepted."""
    assert TimeRange(start=-1e300, end=1e300).contains(0.0)


def test_int_timestamp_becomes_float() -> None:
    """An integer timestamp is stored as a float."""
    n = note(timestamp=5)
    assert n.timestamp == 5.0 and type(n.timestamp) is float


def test_aware_datetime_is_converted() -> None:
    """An aware UTC datetime becomes its epoch seconds."""
    assert note(timestamp=AWARE).timestamp == AWARE.timestamp()


def test_aware_datetime_in_other_zone_is_converted() -> None:
    """An aware datetime in another zone gives the same instant as its UTC equivalent."""
    plus_two = AWARE.astimezone(timezone(timedelta(hours=2)))
    assert note(timestamp=plus_two).timestamp == AWARE.timestamp()


def test_naive_datetime_is_refused() -> None:
    """A naive datetime is refused (its meaning depends on the machine's timezone)."""
    with pytest.raises(ContractError, match="timestamp.*naive"):
        note(timestamp=datetime(2026, 1, 5))


@pytest.mark.parametrize("bad", [True, False])
def test_boolean_timestamp_is_refused(bad: bool) -> None:
    """A boolean timestamp is refused, not read as 0 or 1."""
    with pytest.raises(ContractError, match="timestamp"):
        note(timestamp=bad)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_timestamp_is_refused(bad: float) -> None:
    """NaN and infinite timestamps are refused."""
    with pytest.raises(ContractError, match="timestamp"):
        note(timestamp=bad)


@pytest.mark.parametrize("bad", ["100.0", None, [1.0], b"1"])
def test_non_number_timestamp_is_refused(bad: Any) -> None:
    """Strings, None and other non-numbers are refused, not converted."""
    with pytest.raises(ContractError, match="timestamp"):
        note(timestamp=bad)


def test_negative_and_fractional_timestamps_are_kept_exactly() -> None:
    """Any float within the horizon is a valid timestamp and is kept bit for bit."""
    for t in [-1e9, -0.0, 5e-324, 253402300799.99997, 0.1]:
        assert note(timestamp=t).timestamp.hex() == t.hex()


# -- TimeRange -----------------------------------------------------------------------------------


def test_time_range_defaults_unbounded() -> None:
    """TimeRange() has no bounds and contains every time."""
    window = TimeRange()
    assert (window.start, window.end) == (None, None)
    assert window.contains(-1e300) and window.contains(1e300)


def test_time_range_contains_start() -> None:
    """start is inside the range."""
    assert TimeRange(start=10.0, end=20.0).contains(10.0)


def test_time_range_excludes_end() -> None:
    """end is outside the range (half-open)."""
    assert not TimeRange(start=10.0, end=20.0).contains(20.0)


def test_time_range_contains_between_and_not_outside() -> None:
    """Times strictly between the bounds are in; times before start are out."""
    window = TimeRange(start=10.0, end=20.0)
    assert window.contains(19.999)
    assert not window.contains(9.999)


def test_time_range_open_start() -> None:
    """start=None is unbounded below."""
    window = TimeRange(end=20.0)
    assert window.contains(-1e300) and not window.contains(20.0)


def test_time_range_open_end() -> None:
    """end=None is unbounded above."""
    window = TimeRange(start=10.0)
    assert window.contains(1e300) and not window.contains(9.0)


def test_time_range_is_empty_when_start_equals_end() -> None:
    """start == end is allowed, is_empty, and contains nothing."""
    window = TimeRange(start=5.0, end=5.0)
    assert window.is_empty
    assert not window.contains(5.0)


@pytest.mark.parametrize(("start", "end"), [(None, None), (1.0, None), (None, 1.0), (1.0, 2.0)])
def test_time_range_not_empty_otherwise(start: float | None, end: float | None) -> None:
    """A range with start < end, or an open side, is not empty."""
    assert not TimeRange(start=start, end=end).is_empty


def test_time_range_start_after_end_is_refused() -> None:
    """start > end raises ContractError naming both bounds."""
    with pytest.raises(ContractError, match="start.*end"):
        TimeRange(start=2.0, end=1.0)


@pytest.mark.parametrize("side", ["start", "end"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_time_range_bounds_must_be_finite(side: str, bad: float) -> None:
    """A NaN or infinite bound is refused, naming the side."""
    with pytest.raises(ContractError, match=side):
        TimeRange(**{side: bad})


@pytest.mark.parametrize("side", ["start", "end"])
def test_time_range_naive_datetime_bound_is_refused(side: str) -> None:
    """A naive datetime bound is refused, naming the side."""
    with pytest.raises(ContractError, match=side):
        TimeRange(**{side: datetime(2026, 1, 5)})


@pytest.mark.parametrize("side", ["start", "end"])
def test_time_range_boolean_bound_is_refused(side: str) -> None:
    """A boolean bound is refused, naming the side."""
    with pytest.raises(ContractError, match=side):
        TimeRange(**{side: True})


def test_time_range_aware_datetime_bounds_are_converted() -> None:
    """Aware datetime bounds become epoch seconds."""
    window = TimeRange(start=AWARE, end=AWARE + timedelta(seconds=1))
    assert (window.start, window.end) == (AWARE.timestamp(), AWARE.timestamp() + 1.0)


def test_time_range_is_frozen() -> None:
    """A time range's bounds cannot be reassigned."""
    window = TimeRange(start=1.0)
    with pytest.raises(ValueError):
        window.start = 2.0  # type: ignore[misc]


# -- Query ---------------------------------------------------------------------------------------


def test_query_needs_something_to_ask() -> None:
    """A query with none of text, time_range or near is refused."""
    with pytest.raises(ContractError, match="text.*time_range.*near"):
        Query()


@pytest.mark.parametrize(
    "fields",
    [{"text": "budget"}, {"time_range": TimeRange(start=1.0)}, {"near": "n1"}],
    ids=["text", "time_range", "near"],
)
def test_query_with_any_one_is_valid(fields: dict[str, Any]) -> None:
    """Any one of text, time_range or near makes a valid query."""
    assert Query(**fields).k == 10


def test_query_mixes_all_three() -> None:
    """A query may combine text, time_range and near."""
    q = Query(text="budget", time_range=TimeRange(start=1.0), near="n1", k=5)
    assert (q.text, q.near, q.k) == ("budget", "n1", 5)


def test_query_near_must_be_non_empty() -> None:
    """near='' is refused, naming 'near'."""
    with pytest.raises(ContractError, match="near"):
        Query(near="")


def test_query_k_defaults_to_10() -> None:
    """k defaults to 10."""
    assert Query(text="x").k == 10


@pytest.mark.parametrize("k", [1, 10_000])
def test_query_k_bounds_are_inclusive(k: int) -> None:
    """k = 1 and k = 10000 are accepted."""
    assert Query(text="x", k=k).k == k


@pytest.mark.parametrize("k", [0, -1, 10_001])
def test_query_k_outside_range_is_refused(k: int) -> None:
    """k outside 1..10000 raises ContractError naming 'k'."""
    with pytest.raises(ContractError, match=r"\bk\b"):
        Query(text="x", k=k)


@pytest.mark.parametrize("k", [True, "5", 5.5])
def test_query_k_must_be_an_integer(k: Any) -> None:
    """k must be an int: booleans, strings and fractions are refused, not converted."""
    with pytest.raises(ContractError, match=r"\bk\b"):
        Query(text="x", k=k)


def test_query_time_range_from_dict() -> None:
    """A time_range given as a dict is validated into a TimeRange (and checked)."""
    with pytest.raises(ContractError, match="time_range"):
        Query(time_range={"start": 2.0, "end": 1.0})


def test_query_is_frozen() -> None:
    """A query cannot be changed after construction."""
    q = Query(text="x")
    with pytest.raises(ValueError):
        q.k = 3  # type: ignore[misc]


def test_layers_example_runs() -> None:
    """The actor example of spec/layers.md builds the objects it describes."""
    n = Note.create("met Ana about the budget", project="q3")
    dated = Note.create("kick-off", timestamp=datetime(2026, 1, 5, tzinfo=UTC))
    window = TimeRange(start=dated.timestamp, end=None)
    query = Query(text="budget", time_range=window, k=5)
    assert n.metadata == {"project": "q3"}
    assert window.contains(dated.timestamp)
    assert query.time_range == window
