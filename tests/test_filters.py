"""Metadata filters (coniti.filters): each rule of the language, every refusal, the request fields,
time-travel views of LogBackend, and hypothesis properties against a plain Python model.

The conformance mixins (coniti.testing.filters / listing) check the backends' side on both backends;
this module checks the language itself and what only LogBackend has (views).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti.actor import TimeRange
from coniti.errors import ContractError
from coniti.filters import MAX_FILTER_DEPTH, check_filter, compile_filter
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.memory import (
    ClearRequest,
    CountRequest,
    DeleteRequest,
    MemoryBackend,
    MemoryRecord,
    ScanRequest,
)
from coniti.testing.helpers import count, ids, pages, put, record, scan_all


def matches(f: Any, metadata: dict[str, Any]) -> bool:
    return compile_filter(f)(metadata)


# -- the rules, one per test -----------------------------------------------------------------------


def test_empty_filter_matches_everything() -> None:
    """{} matches any metadata, the empty one included."""
    assert matches({}, {}) and matches({}, {"a": [1, {"b": None}]})


def test_no_filter_matches_everything() -> None:
    """compile_filter(None) matches any metadata, and check_filter(None) is None."""
    assert matches(None, {"a": 1}) and check_filter(None) is None


def test_scalar_equality() -> None:
    """A plain value on a path means equality with it."""
    assert matches({"kind": "fact"}, {"kind": "fact"})
    assert not matches({"kind": "fact"}, {"kind": "facts"})


def test_numbers_equal_by_value() -> None:
    """1 equals 1.0; big integers are compared exactly, not through floats."""
    assert matches({"n": 1}, {"n": 1.0})
    assert not matches({"n": 2**53 + 1}, {"n": float(2**53)})


def test_bool_is_not_a_number() -> None:
    """true does not equal 1, nor false 0, and a bool is not ordered against numbers."""
    assert not matches({"n": 1}, {"n": True})
    assert not matches({"n": False}, {"n": 0})
    assert not matches({"n": {"$gte": 0}}, {"n": True})


def test_equality_against_a_list_is_strict() -> None:
    """{'tags': 'x'} does not match tags ['x', 'y'] (no MongoDB-style element match)."""
    assert not matches({"tags": "x"}, {"tags": ["x", "y"]})


def test_list_equality_is_element_by_element_in_order() -> None:
    """A list value equals a list with equal elements in the same order only."""
    assert matches({"tags": ["x", "y"]}, {"tags": ["x", "y"]})
    assert not matches({"tags": ["y", "x"]}, {"tags": ["x", "y"]})
    assert not matches({"tags": ["x"]}, {"tags": ["x", "y"]})


def test_object_equality_needs_eq() -> None:
    """{'$eq': {...}} compares a whole object, key by key (nested numbers by value)."""
    assert matches({"a": {"$eq": {"b": 1}}}, {"a": {"b": 1.0}})
    assert not matches({"a": {"$eq": {"b": 1}}}, {"a": {"b": 1, "c": 2}})


def test_nested_object_is_a_nested_filter() -> None:
    """{'a': {'b': 1}} means {'a.b': 1}: it matches an object with more keys."""
    metadata = {"a": {"b": 1, "c": 2}}
    assert matches({"a": {"b": 1}}, metadata) and matches({"a.b": 1}, metadata)


def test_contains_finds_a_list_element() -> None:
    """$contains on a list value matches when an element equals the operand."""
    assert matches({"tags": {"$contains": "x"}}, {"tags": ["x", "y"]})
    assert matches({"n": {"$contains": 2}}, {"n": [1, 2.0]})
    assert not matches({"n": {"$contains": True}}, {"n": [1]})


def test_contains_finds_a_substring() -> None:
    """$contains on a string value matches a substring, case-sensitively."""
    assert matches({"text": {"$contains": "udge"}}, {"text": "budget"})
    assert not matches({"text": {"$contains": "UDGE"}}, {"text": "budget"})


def test_contains_on_other_values_does_not_match() -> None:
    """$contains on a number, an object or a missing path, or a non-string in a string, is no match."""
    assert not matches({"n": {"$contains": 1}}, {"n": 1})
    assert not matches({"n": {"$contains": "a"}}, {"n": {"a": 1}})
    assert not matches({"n": {"$contains": "a"}}, {})
    assert not matches({"n": {"$contains": 1}}, {"n": "1"})


def test_comparison_across_types_is_no_match_not_an_error() -> None:
    """A number against a string (either way), null, a list or an object simply does not match."""
    for value in ["5", None, [5], {"v": 5}]:
        assert not matches({"n": {"$gt": 3}}, {"n": value})
    assert not matches({"n": {"$lt": "b"}}, {"n": 1})


def test_comparisons_order_numbers_and_strings() -> None:
    """$gt $gte $lt $lte order numbers with numbers and strings with strings (code point order)."""
    assert matches({"n": {"$gt": 1, "$lte": 2.5}}, {"n": 2})
    assert matches({"s": {"$lt": "b"}}, {"s": "a"}) and not matches({"s": {"$lt": "B"}}, {"s": "a"})
    assert matches({"n": {"$gte": 2}}, {"n": 2.0}) and not matches({"n": {"$lt": 2}}, {"n": 2})


def test_missing_path_exists_false() -> None:
    """$exists: false matches a missing path; $exists: true matches a stored null."""
    assert matches({"a": {"$exists": False}}, {})
    assert matches({"a": {"$exists": True}}, {"a": None})
    assert not matches({"a": {"$exists": False}}, {"a": None})


def test_missing_path_matches_ne() -> None:
    """$ne of a value matches a missing path (it reads as null), $ne null does not."""
    assert matches({"a": {"$ne": 1}}, {})
    assert not matches({"a": {"$ne": None}}, {})


def test_missing_path_equals_null() -> None:
    """{'a': None} matches a stored null and a missing path, not any other value."""
    assert matches({"a": None}, {}) and matches({"a": None}, {"a": None})
    assert not matches({"a": None}, {"a": 0})


def test_in_and_nin() -> None:
    """$in matches a value equal to one in the list; $nin is its negation (missing reads as null)."""
    assert matches({"a": {"$in": [1, "x"]}}, {"a": "x"})
    assert not matches({"a": {"$in": [1, "x"]}}, {"a": True})
    assert matches({"a": {"$nin": [1, "x"]}}, {})
    assert not matches({"a": {"$nin": [None]}}, {})


def test_paths_walk_objects_only() -> None:
    """A path does not walk into lists or scalars: 'a.b' is missing in {'a': [{'b': 1}]}."""
    assert matches({"a.b": {"$exists": False}}, {"a": [{"b": 1}]})
    assert matches({"a.b": {"$exists": False}}, {"a": "b"})
    assert matches({"a.b.c": 1}, {"a": {"b": {"c": 1}}})


def test_logical_operators() -> None:
    """$and needs all, $or any, $not negates; sibling keys combine by and."""
    m = {"a": 1, "b": 2}
    assert matches({"$and": [{"a": 1}, {"b": 2}]}, m) and not matches({"$and": [{"a": 1}, {"b": 3}]}, m)
    assert matches({"$or": [{"a": 5}, {"b": 2}]}, m) and not matches({"$or": [{"a": 5}], "b": 2}, m)
    assert matches({"$not": {"a": 5}}, m) and not matches({"$not": {"a": 1}}, m)


def test_operators_in_one_condition_combine_by_and() -> None:
    """Several operators on one path must all hold."""
    assert matches({"n": {"$gt": 1, "$lt": 3}}, {"n": 2})
    assert not matches({"n": {"$gt": 1, "$lt": 3}}, {"n": 3})


def test_check_filter_returns_a_normalized_copy() -> None:
    """check_filter returns an equal deep copy with tuples as lists; later edits do not reach it."""
    given_filter: dict[str, Any] = {"tags": {"$in": ("x", "y")}, "$or": [{"a": [1]}]}
    normalized = check_filter(given_filter)
    assert normalized == {"tags": {"$in": ["x", "y"]}, "$or": [{"a": [1]}]}
    given_filter["$or"][0]["a"].append(2)
    assert normalized is not None and normalized["$or"][0]["a"] == [1]


def test_compiled_predicate_keeps_its_operands() -> None:
    """Editing a filter after compiling it does not change the predicate."""
    f: dict[str, Any] = {"tags": {"$in": ["x"]}}
    match = compile_filter(f)
    f["tags"]["$in"].append("y")
    assert match({"tags": "x"}) and not match({"tags": "y"})


def test_predicate_never_raises_on_odd_metadata() -> None:
    """Every operator against every kind of JSON value answers True or False, never raises."""
    values = [None, True, 0, -1.5, "", "a", [], [1, "a"], {}, {"a": None}]
    for op, operand in [("$eq", 1), ("$ne", "a"), ("$gt", 0), ("$lte", "a"), ("$in", [None]),
                        ("$nin", [1]), ("$exists", True), ("$contains", "a")]:
        match = compile_filter({"k.x": {op: operand}, "k": {op: operand}})
        for value in values:
            assert match({"k": value}) in (True, False)


# -- refusals: ContractError naming the operator or the path ---------------------------------------

BAD: list[tuple[str, Any, str]] = [
    ("not-an-object", ["a"], "must be an object"),
    ("non-string-key", {1: "a"}, "non-string key 1"),
    ("unknown-condition-operator", {"a": {"$regex": "x"}}, r"unknown operator '\$regex'"),
    ("unknown-top-level-operator", {"$where": "x"}, r"unknown operator '\$where'"),
    ("condition-operator-at-top", {"$gt": 1}, r"\$gt is an operator of a condition"),
    ("logical-inside-a-condition", {"a": {"$or": [{"b": 1}]}}, r"\['a'\]\['\$or'\]: unknown operator"),
    ("in-needs-a-list", {"a": {"$in": "xy"}}, r"\$in needs a list, got str"),
    ("nin-needs-a-list", {"a": {"$nin": {"x": 1}}}, r"\$nin needs a list, got dict"),
    ("exists-needs-a-bool", {"a": {"$exists": 1}}, r"\$exists needs true or false"),
    ("gt-needs-number-or-string", {"a": {"$gt": None}}, r"\['\$gt'\]: \$gt needs a number or a string"),
    ("lt-refuses-a-bool", {"a": {"$lt": True}}, r"\$lt needs a number or a string, got bool"),
    ("gte-refuses-a-list", {"a": {"$gte": [1]}}, r"\$gte needs a number or a string, got list"),
    ("empty-path-part", {"a..b": 1}, r"path 'a..b' has an empty part"),
    ("leading-dot", {".a": 1}, r"path '.a' has an empty part"),
    ("empty-path", {"": 1}, r"path '' has an empty part"),
    ("empty-condition", {"a": {}}, r"\['a'\] is an empty condition"),
    ("mixed-condition", {"a": {"$gt": 1, "b": 2}}, r"mixes operators \(\$gt\) with paths"),
    ("and-needs-a-list", {"$and": {"a": 1}}, r"\['\$and'\] must be a non-empty list"),
    ("or-needs-filters", {"$or": []}, r"\['\$or'\] must be a non-empty list"),
    ("and-of-non-filters", {"$and": [1]}, r"\['\$and'\]\[0\] must be an object"),
    ("not-needs-a-filter", {"$not": [{"a": 1}]}, r"\['\$not'\] must be an object"),
    ("operand-not-json", {"a": {"$eq": object()}}, r"filter\['a'\]\['\$eq'\] is not JSON"),
    ("operand-not-finite", {"a": math.inf}, r"filter\['a'\] must be finite"),
    ("bad-in-element", {"a": {"$in": [1, {2}]}}, r"\['\$in'\]\[1\] is not JSON"),
]


@pytest.mark.parametrize(("f", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_filter_is_refused_by_name(f: Any, message: str) -> None:
    """A bad filter raises ContractError whose message names the operator or path at fault."""
    with pytest.raises(ContractError, match=message):
        check_filter(f)


@pytest.mark.parametrize(("f", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_compile_refuses_what_check_refuses(f: Any, message: str) -> None:
    """compile_filter validates as check_filter does."""
    with pytest.raises(ContractError, match=message):
        compile_filter(f)


def _nested_not(levels: int) -> dict[str, Any]:
    f: dict[str, Any] = {"a": 1}
    for _ in range(levels - 1):
        f = {"$not": f}
    return f


def test_nesting_up_to_the_limit_is_accepted() -> None:
    """A filter nested exactly MAX_FILTER_DEPTH levels is valid."""
    assert check_filter(_nested_not(MAX_FILTER_DEPTH)) is not None


def test_nesting_beyond_the_limit_is_refused() -> None:
    """A filter nested one level deeper than MAX_FILTER_DEPTH raises ContractError saying so."""
    with pytest.raises(ContractError, match=f"nested deeper than {MAX_FILTER_DEPTH} levels"):
        check_filter(_nested_not(MAX_FILTER_DEPTH + 1))


def test_field_name_is_used_in_messages() -> None:
    """check_filter names the field it was given (for Query.filter and the like)."""
    with pytest.raises(ContractError, match=r"^query\.filter\['a'\]"):
        check_filter({"a": {"$bogus": 1}}, "query.filter")


# -- the request fields ------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [ScanRequest, CountRequest])
def test_request_filter_defaults_to_none(cls: type[ScanRequest | CountRequest]) -> None:
    """ScanRequest and CountRequest have filter None unless given."""
    assert cls().filter is None


@pytest.mark.parametrize("cls", [ScanRequest, CountRequest])
def test_request_refuses_a_bad_filter(cls: type[ScanRequest | CountRequest]) -> None:
    """A request with a bad filter raises ContractError naming the field and the operator."""
    with pytest.raises(ContractError, match=r"filter.*\$nope"):
        cls(filter={"a": {"$nope": 1}})


@pytest.mark.parametrize("cls", [ScanRequest, CountRequest])
def test_request_round_trips_its_filter(cls: type[ScanRequest | CountRequest]) -> None:
    """to_json / from_json keep the filter (normalized: tuples as lists)."""
    request = cls(filter={"tags": {"$in": ("x",)}, "$not": {"a.b": None}})
    again = cls.from_json(request.to_json())
    assert again == request and again.filter == {"tags": {"$in": ["x"]}, "$not": {"a.b": None}}


def test_request_keeps_its_own_copy_of_the_filter() -> None:
    """Editing the dict a request was built from does not change the request."""
    f: dict[str, Any] = {"tags": {"$in": ["x"]}}
    request = ScanRequest(filter=f)
    f["tags"]["$in"].append("y")
    assert request.filter == {"tags": {"$in": ["x"]}}


# -- LogBackend views: filters and namespaces as of their point ------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LogBackend]:
    backend = LogBackend(tmp_path / "store")
    yield backend
    backend.close()


def _history(store: LogBackend) -> tuple[int, int]:
    """Writes a history; returns (seq after the first put, seq after a delete and a later put)."""
    put(store, *[record(f"r{i}", float(i), metadata={"m3": i % 3 == 0}) for i in range(12)])
    first = store.head
    store.delete(DeleteRequest(ids=["r0", "r3"]))
    put(store, record("late", 20.0, metadata={"m3": True}))
    return first, store.head


def test_view_filters_as_of_its_point(store: LogBackend) -> None:
    """A view's filtered scan shows the matching records live at its point: deleted ones still,
    later ones not yet."""
    first, _ = _history(store)
    assert ids(scan_all(store.at(first), filter={"m3": True})) == ["r0", "r3", "r6", "r9"]
    assert ids(scan_all(store, filter={"m3": True})) == ["r6", "r9", "late"]


def test_view_filtered_count_agrees_with_its_scan(store: LogBackend) -> None:
    """A view's filtered count equals the length of its filtered scan."""
    first, _ = _history(store)
    view = store.at(first)
    assert count(view, filter={"m3": True}) == len(scan_all(view, filter={"m3": True})) == 4
    window = TimeRange(start=5.0)
    odd = {"m3": False}
    assert count(view, time_range=window, filter=odd) == len(scan_all(view, time_range=window, filter=odd)) == 5


def test_view_filtered_pages_are_exact(store: LogBackend) -> None:
    """A view's filtered scan pages exactly and its cursors resume."""
    first, _ = _history(store)
    got = pages(store.at(first), 3, filter={"m3": True})
    assert [ids(p.records) for p in got] == [["r0", "r3", "r6"], ["r9"]]


def test_view_cursor_resumes_on_the_store(store: LogBackend) -> None:
    """A cursor from a view's filtered page resumes a filtered scan of the current store."""
    first, _ = _history(store)
    page = store.at(first).scan(ScanRequest(limit=2, filter={"m3": True}))
    rest = store.scan(ScanRequest(filter={"m3": True}, cursor=page.next_cursor))
    assert ids(page.records) == ["r0", "r3"] and ids(rest.records) == ["r6", "r9", "late"]


def test_view_namespaces_as_of_its_point(store: LogBackend) -> None:
    """A view lists the namespaces live at its point: not those written later, still those
    cleared later."""
    put(store, record("a", 1.0, namespace=("x",)))
    one = store.head
    put(store, record("b", 1.0, namespace=("y", "z")))
    two = store.head
    store.clear(ClearRequest(namespace=("x",)))
    assert store.at(0).namespaces() == []
    assert store.at(one).namespaces() == [("x",)]
    assert store.at(two).namespaces(max_depth=1) == [("x",), ("y",)]
    assert store.namespaces() == [("y", "z")]


def test_namespaces_after_reopening(tmp_path: Path) -> None:
    """namespaces() reads the store, not a cache: a reopened store lists the same."""
    with LogBackend(tmp_path / "s") as first:
        put(first, record("a", 1.0, namespace=("u", "1")), record("b", 1.0, namespace=("u", "2")))
        first.delete(DeleteRequest(ids=["b"], namespace=("u", "2")))
    with LogBackend(tmp_path / "s") as again:
        assert again.namespaces(("u",)) == [("u", "1")]


def test_log_page_is_read_again_when_a_write_lands_mid_page(
    store: LogBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filtered page of LogBackend spans several snapshots; when a write changes the rows between
    the read of a chunk and the re-read that finds its cursor, the page is read again, so it holds
    the new match and its cursor loses nothing."""
    put(store, record("r0", 0.0), *[record(f"r{i}", float(i), metadata={"hit": True}) for i in range(1, 6)])
    scan = store._log.scan
    calls: list[int] = []

    def scan_with_a_write(*args: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:  # the re-read of the second chunk (r2, r3) to find r2's position
            put(store, record("new", 1.5, metadata={"hit": True}))
        return scan(*args)

    monkeypatch.setattr(store._log, "scan", scan_with_a_write)
    first = store.scan(ScanRequest(limit=2, filter={"hit": True}))
    assert len(calls) > 3 and ids(first.records) == ["r1", "new"]
    rest = store.scan(ScanRequest(filter={"hit": True}, cursor=first.next_cursor))
    assert ids(rest.records) == ["r2", "r3", "r4", "r5"]


# -- hypothesis: the language against a reference, the backends against a model ---------------------

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
KEYS = ["a", "b", "tags"]
leaves = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.0, -0.0, 1.0, 2.5, -1.5, 2.0**53])
    | st.sampled_from(["", "a", "ab", "b", "x y", "A"])
)
json_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3),
    max_leaves=8,
)
metadata_dicts = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=3)
paths = st.sampled_from(["a", "b", "tags", "a.b", "a.tags", "b.a.b"])
ordered_operands = st.integers(-3, 3) | st.sampled_from([0.5, -1.5, 2.0**53]) | st.sampled_from(["", "a", "b"])
OPERANDS: dict[str, st.SearchStrategy[Any]] = {
    "$eq": json_values,
    "$ne": json_values,
    "$gt": ordered_operands,
    "$gte": ordered_operands,
    "$lt": ordered_operands,
    "$lte": ordered_operands,
    "$in": st.lists(json_values, max_size=3),
    "$nin": st.lists(json_values, max_size=3),
    "$exists": st.booleans(),
    "$contains": json_values,
}


@st.composite
def operator_conditions(draw: st.DrawFn) -> dict[str, Any]:
    ops = draw(st.lists(st.sampled_from(sorted(OPERANDS)), min_size=1, max_size=3, unique=True))
    return {op: draw(OPERANDS[op]) for op in ops}


plain_conditions = json_values.filter(lambda v: not isinstance(v, dict)) | st.builds(
    lambda v: {"$eq": v}, json_values
)
path_filters = st.dictionaries(paths, plain_conditions | operator_conditions(), max_size=3)


def _extend(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    nested = inner.filter(lambda f: bool(f) and not any(k.startswith("$") for k in f))
    return (
        st.builds(lambda fs: {"$and": fs}, st.lists(inner, min_size=1, max_size=3))
        | st.builds(lambda fs: {"$or": fs}, st.lists(inner, min_size=1, max_size=3))
        | st.builds(lambda f: {"$not": f}, inner)
        | st.builds(lambda k, f: {k: f}, st.sampled_from(["a", "b"]), nested)
        | st.builds(lambda f, g: {**f, **g}, path_filters, inner)
    )


filters = st.recursive(path_filters, _extend, max_leaves=6)


# A deliberately plain reference: values are compared in a canonical form (exact fractions for
# numbers, tagged by type), paths are resolved step by step, every rule is spelled out.


def canon(value: Any) -> Any:
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", Fraction(value))
    if isinstance(value, str):
        return ("string", value)
    if value is None:
        return ("null",)
    if isinstance(value, list):
        return ("list", tuple(canon(v) for v in value))
    return ("object", frozenset((k, canon(v)) for k, v in value.items()))


def resolve(metadata: Any, path: list[str]) -> tuple[bool, Any]:
    here = metadata
    for part in path:
        if not isinstance(here, dict) or part not in here:
            return False, None
        here = here[part]
    return True, here


def reference_operator(op: str, operand: Any, present: bool, value: Any) -> bool:
    if op == "$exists":
        return present == operand
    if op in ("$eq", "$ne", "$in", "$nin"):
        seen = canon(value if present else None)
        wanted = [canon(operand)] if op in ("$eq", "$ne") else [canon(x) for x in operand]
        return (seen in wanted) == (op in ("$eq", "$in"))
    if not present:
        return False
    if op == "$contains":
        if isinstance(value, str):
            return isinstance(operand, str) and operand in value
        if isinstance(value, list):
            return canon(operand) in [canon(v) for v in value]
        return False
    kind_of_value, kind_of_operand = canon(value)[0], canon(operand)[0]
    if kind_of_value != kind_of_operand or kind_of_value not in ("number", "string"):
        return False
    a = canon(value)[1]
    b = canon(operand)[1]
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


def reference(f: dict[str, Any], metadata: dict[str, Any], base: list[str] | None = None) -> bool:
    base = base or []
    results = []
    for key, cond in f.items():
        if key == "$and":
            results.append(all(reference(g, metadata, base) for g in cond))
        elif key == "$or":
            results.append(any(reference(g, metadata, base) for g in cond))
        elif key == "$not":
            results.append(not reference(cond, metadata, base))
        else:
            path = base + key.split(".")
            if isinstance(cond, dict) and not any(k.startswith("$") for k in cond):
                results.append(reference(cond, metadata, path))
            else:
                ops = cond if isinstance(cond, dict) else {"$eq": cond}
                present, value = resolve(metadata, path)
                results.append(all(reference_operator(o, x, present, value) for o, x in ops.items()))
    return all(results)


@SETTINGS
@given(f=filters, metadata=metadata_dicts)
def test_compiled_filter_agrees_with_the_reference(f: dict[str, Any], metadata: dict[str, Any]) -> None:
    """For random metadata and filters, compile_filter answers what the reference evaluator does,
    and so does the filter check_filter normalized."""
    want = reference(f, metadata)
    assert compile_filter(f)(metadata) is want
    assert compile_filter(check_filter(f))(metadata) is want


junk = st.recursive(
    leaves | st.sampled_from(["$and", "$or", "$not", "$gt", "$in", "$exists", "$x", "a..b"]),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(
        st.sampled_from(["a", "b.c", "$and", "$or", "$not", "$eq", "$gt", "$in", "$exists", "$contains", "$x", ""]),
        inner,
        max_size=3,
    ),
    max_leaves=10,
)


@SETTINGS
@given(value=junk, metadata=metadata_dicts)
def test_any_value_is_a_filter_or_a_contract_error(value: Any, metadata: dict[str, Any]) -> None:
    """check_filter either accepts a value (and its predicate answers a bool on any metadata) or
    raises ContractError; nothing else escapes."""
    try:
        normalized = check_filter(value)
    except ContractError:
        return
    assert compile_filter(normalized)(metadata) in (True, False)


Model = list[tuple[str, float, dict[str, Any]]]
record_specs = st.lists(
    st.tuples(st.sampled_from([0.0, 1.0, 1.5, 2.0]), metadata_dicts), min_size=0, max_size=12
)


def _records(specs: list[tuple[float, dict[str, Any]]], prefix: str) -> list[MemoryRecord]:
    return [record(f"{prefix}{i}", t, metadata=m) for i, (t, m) in enumerate(specs)]


def _model_ids(model: Model, f: dict[str, Any], start: float | None) -> list[str]:
    """The ids the filter selects, in (timestamp, write order): a stable sort of the model."""
    ordered = sorted(model, key=lambda entry: entry[1])
    return [i for i, t, m in ordered if (start is None or t >= start) and reference(f, m)]


def _check_reads(backend: MemoryBackend, f: dict[str, Any], limit: int, start: float | None, want: list[str]) -> None:
    window = None if start is None else TimeRange(start=start)
    got = pages(backend, limit, time_range=window, filter=f)
    assert [i for p in got for i in ids(p.records)] == want
    assert all(len(p.records) == limit for p in got[:-1])
    assert len(got) == max(1, math.ceil(len(want) / limit))
    assert count(backend, time_range=window, filter=f) == len(want)


BACKENDS: list[tuple[str, Callable[[Path], MemoryBackend]]] = [
    ("in_memory", lambda _: InMemoryBackend()),
    ("log", lambda path: LogBackend(path / "store")),
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=record_specs,
    second=record_specs,
    deleted=st.sets(st.integers(0, 11)),
    f=filters,
    limit=st.integers(1, 5),
    start=st.none() | st.sampled_from([1.0, 1.5]),
)
def test_backends_filter_as_the_model_does(
    first: list[tuple[float, dict[str, Any]]],
    second: list[tuple[float, dict[str, Any]]],
    deleted: set[int],
    f: dict[str, Any],
    limit: int,
    start: float | None,
) -> None:
    """Both backends' filtered scan (all pages, each full but the last) and count equal the Python
    model's answer on the same records, after puts and deletes; a LogBackend view of the point
    before the deletes answers as the model of that point."""
    early = _records(first, "p")
    model: Model = [(r.id, r.note.timestamp, r.note.metadata) for r in early]
    gone = {f"p{i}" for i in deleted}
    late = _records(second, "q")
    after: Model = [e for e in model if e[0] not in gone] + [
        (r.id, r.note.timestamp, r.note.metadata) for r in late
    ]
    for _, make in BACKENDS:
        with tempfile.TemporaryDirectory() as tmp, make(Path(tmp)) as backend:
            if early:
                put(backend, *early)
            point = backend.head if isinstance(backend, LogBackend) else None
            backend.delete(DeleteRequest(ids=sorted(gone)))
            if late:
                put(backend, *late)
            _check_reads(backend, f, limit, start, _model_ids(after, f, start))
            if isinstance(backend, LogBackend):
                assert point is not None
                _check_reads(backend.at(point), f, limit, start, _model_ids(model, f, start))
