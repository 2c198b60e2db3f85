"""Metadata filters: one small predicate language over a note's metadata, the same for every backend.

A filter is a JSON object. Each key is a *path* into the metadata, each value a *condition*; all of
them must hold. ``{}`` (and no filter at all) matches every record::

    {"kind": "fact"}                                  kind equals "fact"
    {"user.name": "ana", "score": {"$gte": 0.5}}      a dotted path; an operator
    {"$or": [{"kind": "fact"}, {"tags": {"$contains": "pinned"}}]}

Paths. ``"a.b.c"`` walks nested objects (``{"a": {"b": {"c": ...}}}``); a path never walks into a
list, and a part that is absent, or an object expected where a list or scalar is, makes the path
*missing*. Every part must be non-empty (``"a..b"`` is refused). A metadata key that itself holds a
dot cannot be addressed. A condition that is an object with no ``$`` keys is a nested filter:
``{"a": {"b": 1}}`` means ``{"a.b": 1}``. An object mixing ``$`` keys and path keys is refused.

Conditions. A plain value means ``{"$eq": value}``; an object of operators means all of them:

====================  ===========================================================================
``$eq`` v             equal to v (see equality below); a missing path reads as null
``$ne`` v             not ``$eq`` v, so a missing path matches ``$ne`` of anything but null
``$gt`` ``$gte`` v    ordered comparison: number with number, string with string (code point
``$lt`` ``$lte`` v    order). Anything else (a missing path, null, a bool, a number against a
                      string) does not match and never raises. v must be a number or a string
``$in`` [..]          ``$eq`` one of the list (a missing path matches when the list holds null);
                      the operand must be a list
``$nin`` [..]         not ``$in``; the operand must be a list
``$exists`` b         the path is present (a stored null is present) when b is true, absent when
                      false; the operand must be a bool
``$contains`` v       a string value holds the string v as a substring; a list value has an
                      element equal to v. Any other value, or a string against a non-string v,
                      does not match
====================  ===========================================================================

Logic. At the level of paths, ``{"$and": [f, ...]}`` and ``{"$or": [f, ...]}`` take a non-empty list
of filters and ``{"$not": f}`` one filter; they combine with sibling path keys by "and". Any other
key starting with ``$`` at that level is refused.

Equality is JSON equality, strict about lists: numbers equal by value (``1`` equals ``1.0``), a bool
is not a number (``true`` never equals ``1``), lists equal element by element in order, objects key
by key. ``{"tags": "x"}`` does **not** match ``tags: ["x", "y"]``: use ``{"tags": {"$contains":
"x"}}``. This is LangGraph's store filter (``_compare_values``: plain values and lists compare
strictly, a nested object compares key by key, a missing key reads as null), with two deliberate
differences: LangGraph compares bools with Python's ``==`` (``True == 1``) and orders with
``float()`` (so ``"5" > 3``, and a non-numeric string raises); here a bool is not a number and a
comparison between types simply does not match. (A nested filter also reads through a non-object:
``{"a": {"b": None}}`` matches ``a: 5`` here, as ``{"a.b": None}`` does.)

Kind. The key ``"$kind"``, at the level of paths (also inside ``$and``/``$or``/``$not``), holds a
condition on the note's :attr:`~coniti.actor.Note.kind` instead of its metadata, with the same
operators: ``{"$kind": "fact"}``, ``{"$kind": {"$in": ["fact", "summary"]}}``, ``{"$kind":
{"$exists": false}}`` (plain notes: a kind of None reads as missing). :func:`compile_record_filter`
gives the predicate on ``(metadata, kind)`` every backend applies.

Empty. ``{}`` matches everything; an empty condition (``{"a": {}}``) is refused as ambiguous.

Scans. A backend applies a filter to the records of the requested range and namespace: a filtered
``scan`` page holds ``limit`` matching records unless no more follow, ``next_cursor`` is None exactly
when no match follows, and the cursor is the position of the page's last record, the same
(timestamp, write order) position an unfiltered scan gives. So a cursor is not tied to its filter:
resumed with another filter, or none, it continues right after that record. ``count`` with a filter
equals the length of the filtered scan. Time-travel views filter as of their point.

Limits. A filter is nested at most :data:`MAX_FILTER_DEPTH` levels (each ``$and``/``$or``/``$not``
and each nested filter object is a level); operands are JSON values as :func:`check_json_value`
accepts them. Every refusal is a :class:`ContractError` naming the place in the filter
(``filter['score']['$gte']``) and the operator or path at fault.

API: :func:`check_filter` validates and returns a normalized copy (what a contract field stores);
:func:`compile_filter` turns a filter into a predicate on a metadata dict, which never raises on
metadata a note can hold; :data:`MetadataFilter` is the pydantic field type (``None`` or a filter).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any

import pydantic

from coniti.contracts import check_json_value
from coniti.errors import ContractError

__all__ = [
    "MAX_FILTER_DEPTH",
    "OPERATORS",
    "MetadataFilter",
    "Predicate",
    "RecordPredicate",
    "check_filter",
    "compile_filter",
    "compile_record_filter",
]

MAX_FILTER_DEPTH = 32
"""How deeply filters may nest: the top level is 1; each ``$and``/``$or``/``$not`` or nested filter
object adds one."""

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$contains")
"""The operators of a condition, in the order the module docstring describes them."""

LOGICAL = ("$and", "$or", "$not")

Predicate = Callable[[Mapping[str, Any]], bool]
"""A compiled filter: ``predicate(metadata)`` is True when the metadata matches."""

RecordPredicate = Callable[[Mapping[str, Any], "str | None"], bool]
"""A compiled filter on a note: ``predicate(metadata, kind)`` is True when the note matches."""

_MISSING: Any = object()


class _KindKey:
    """The key under which a predicate reads the note's kind: no metadata key (a string) equals it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "$kind"


KIND_PATH = "$kind"
_KIND: Any = _KindKey()


def _always(metadata: Mapping[str, Any]) -> bool:
    return True


def check_filter(value: Any, field: str = "filter") -> dict[str, Any] | None:
    """``value`` validated as a filter: a deep copy (tuples become lists), or None for None.

    Raises :class:`ContractError` naming ``field`` and the place in the filter that is wrong.
    """
    if value is None:
        return None
    return _parse(value, field, 1)[0]


def compile_filter(f: Mapping[str, Any] | None) -> Predicate:
    """A predicate on metadata alone for filter ``f`` (None or ``{}``: matches everything). ``f`` is
    validated as by :func:`check_filter`; the predicate holds its own copy of the operands. A
    ``"$kind"`` condition reads every note as a plain one (kind None): to filter notes, use
    :func:`compile_record_filter`."""
    if f is None:
        return _always
    return _parse(f, "filter", 1)[1]


def compile_record_filter(f: Mapping[str, Any] | None) -> RecordPredicate:
    """The predicate ``(metadata, kind) -> bool`` of filter ``f`` (see :func:`compile_filter`): what
    a backend applies to a note, its ``"$kind"`` conditions on ``kind``."""
    test = compile_filter(f)
    if f is None or not _mentions_kind(f):
        return lambda metadata, kind: test(metadata)

    def match(metadata: Mapping[str, Any], kind: str | None) -> bool:
        return test(metadata if kind is None else {**metadata, _KIND: kind})

    return match


def _mentions_kind(value: Any) -> bool:
    if isinstance(value, Mapping):
        return any(k == KIND_PATH or _mentions_kind(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_mentions_kind(v) for v in value)
    return False


def _validate_field(value: Any) -> dict[str, Any] | None:
    return check_filter(value)


MetadataFilter = Annotated[dict[str, Any] | None, pydantic.BeforeValidator(_validate_field)]
"""A contract field holding ``None`` or a filter, validated by :func:`check_filter`."""


# -- parsing: validate and compile in one walk ---------------------------------------------------


def _where(field: str, key: str | int) -> str:
    return f"{field}[{key!r}]"


def _parse(value: Any, field: str, depth: int, prefix: tuple[str, ...] = ()) -> tuple[dict[str, Any], Predicate]:
    """``(normalized copy, predicate)`` of the filter ``value`` found at ``field``; paths in it are
    relative to ``prefix``."""
    if depth > MAX_FILTER_DEPTH:
        raise ContractError(f"{field} is nested deeper than {MAX_FILTER_DEPTH} levels")
    if not isinstance(value, Mapping):
        raise ContractError(f"{field} must be an object of path: condition, got {type(value).__name__}")
    copy: dict[str, Any] = {}
    tests: list[Predicate] = []
    for key, cond in value.items():
        if not isinstance(key, str):
            raise ContractError(f"{field} has a non-string key {key!r}")
        where = _where(field, key)
        if key == KIND_PATH:
            if prefix:
                raise ContractError(f"{where}: $kind is a condition on the note, not inside a path")
            copy[key], test = _condition(cond, (_KIND,), where, depth)
        elif key.startswith("$"):
            copy[key], test = _logical(key, cond, where, field, depth, prefix)
        else:
            path = prefix + _path(key, where)
            copy[key], test = _condition(cond, path, where, depth)
        tests.append(test)
    return copy, _all_of(tests)


def _logical(
    op: str, cond: Any, where: str, field: str, depth: int, prefix: tuple[str, ...]
) -> tuple[Any, Predicate]:
    if op == "$not":
        sub, test = _parse(cond, where, depth + 1, prefix)
        return sub, lambda m: not test(m)
    if op not in ("$and", "$or"):
        known = ", ".join(LOGICAL)
        if op in OPERATORS:
            raise ContractError(
                f"{field}: {op} is an operator of a condition, not a filter key: write "
                f"{{'path': {{'{op}': ...}}}} (at this level only {known})"
            )
        raise ContractError(f"{field}: unknown operator {op!r} at the level of paths (known: {known})")
    if not isinstance(cond, list | tuple) or not cond:
        raise ContractError(f"{where} must be a non-empty list of filters")
    subs = [_parse(f, _where(where, i), depth + 1, prefix) for i, f in enumerate(cond)]
    tests = tuple(t for _, t in subs)
    copies = [c for c, _ in subs]
    if op == "$and":
        return copies, lambda m: all(t(m) for t in tests)
    return copies, lambda m: any(t(m) for t in tests)


def _path(key: str, where: str) -> tuple[str, ...]:
    parts = tuple(key.split("."))
    if not all(parts):
        raise ContractError(f"{where}: path {key!r} has an empty part (write 'a.b', not 'a..b' or '.a')")
    return parts


def _condition(cond: Any, path: tuple[str, ...], where: str, depth: int) -> tuple[Any, Predicate]:
    """The condition ``cond`` on ``path``: a plain value, an operator object or a nested filter."""
    if not isinstance(cond, Mapping):
        operand = _json(cond, where)
        return operand, _op_test("$eq", operand, path)
    keys = list(cond)
    ops = [k for k in keys if isinstance(k, str) and k.startswith("$")]
    if not keys:
        raise ContractError(
            f"{where} is an empty condition: give a value, operators, or {{'$exists': true}}"
        )
    if not ops:
        return _parse(cond, where, depth + 1, path)
    if len(ops) != len(keys):
        others = [k for k in keys if k not in ops]
        raise ContractError(f"{where} mixes operators ({', '.join(ops)}) with paths ({others!r})")
    copy: dict[str, Any] = {}
    tests: list[Predicate] = []
    for op in ops:
        copy[op], test = _operator(op, cond[op], path, _where(where, op))
        tests.append(test)
    return copy, _all_of(tests)


def _operator(op: str, operand: Any, path: tuple[str, ...], where: str) -> tuple[Any, Predicate]:
    if op not in OPERATORS:
        hint = " (a logical operator: use it at the level of paths)" if op in LOGICAL else ""
        raise ContractError(
            f"{where}: unknown operator {op!r}{hint}; known: {', '.join(OPERATORS)}"
        )
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if type(operand) is bool or not isinstance(operand, int | float | str):
            raise ContractError(
                f"{where}: {op} needs a number or a string, got {type(operand).__name__}"
            )
    elif op in ("$in", "$nin"):
        if not isinstance(operand, list | tuple):
            raise ContractError(f"{where}: {op} needs a list, got {type(operand).__name__}")
    elif op == "$exists" and type(operand) is not bool:
        raise ContractError(f"{where}: $exists needs true or false, got {operand!r}")
    value = _json(operand, where)
    return value, _op_test(op, value, path)


def _json(value: Any, where: str) -> Any:
    try:
        return check_json_value(value, where)
    except ValueError as exc:
        raise ContractError(str(exc)) from None


def _all_of(tests: list[Predicate]) -> Predicate:
    if not tests:
        return _always
    if len(tests) == 1:
        return tests[0]
    group = tuple(tests)
    return lambda m: all(t(m) for t in group)


# -- evaluation -----------------------------------------------------------------------------------


def _lookup(metadata: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path``, or ``_MISSING``."""
    value = metadata
    for part in path:
        if type(value) is not dict:
            return _MISSING
        value = value.get(part, _MISSING)
        if value is _MISSING:
            return _MISSING
    return value


def _is_number(value: Any) -> bool:
    return type(value) is not bool and isinstance(value, int | float)


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value, a bool is not a number, lists in order, objects key by key."""
    if _is_number(a):
        return _is_number(b) and a == b
    if isinstance(a, list):
        return (
            isinstance(b, list) and len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b  # None, bool, str


def _ordered(op: str, value: Any, operand: Any) -> bool:
    if isinstance(operand, str):
        if not isinstance(value, str):
            return False
    elif not _is_number(value):
        return False
    if op == "$gt":
        return bool(value > operand)
    if op == "$gte":
        return bool(value >= operand)
    if op == "$lt":
        return bool(value < operand)
    return bool(value <= operand)


def _contains(value: Any, operand: Any) -> bool:
    if isinstance(value, str):
        return isinstance(operand, str) and operand in value
    if isinstance(value, list):
        return any(_json_equal(element, operand) for element in value)
    return False


def _op_test(op: str, operand: Any, path: tuple[str, ...]) -> Predicate:
    """The predicate of one operator on one path (the operand already validated and copied)."""

    def read(m: Mapping[str, Any]) -> Any:
        return _lookup(m, path)

    def or_null(m: Mapping[str, Any]) -> Any:
        value = _lookup(m, path)
        return None if value is _MISSING else value

    if op == "$eq":
        return lambda m: _json_equal(or_null(m), operand)
    if op == "$ne":
        return lambda m: not _json_equal(or_null(m), operand)
    if op == "$in":
        return lambda m: any(_json_equal(or_null(m), x) for x in operand)
    if op == "$nin":
        return lambda m: not any(_json_equal(or_null(m), x) for x in operand)
    if op == "$exists":
        return lambda m: (read(m) is not _MISSING) is operand
    if op == "$contains":
        return lambda m: _contains(read(m), operand)
    return lambda m: _ordered(op, read(m), operand)
