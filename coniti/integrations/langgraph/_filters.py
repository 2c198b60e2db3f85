"""LangGraph store filters as :mod:`coniti.filters` filters on the record's metadata.

A LangGraph filter maps keys of the item's value (dotted keys walk nested objects, as LangGraph's
SQL stores read them) to a plain value (equality), an object of operators (``$eq``, ``$ne``,
``$gt``, ``$gte``, ``$lt``, ``$lte``; coniti's ``$in``, ``$nin``, ``$exists`` and ``$contains`` work
too), or a nested object compared key by key. :func:`coniti_filter` prefixes every path with
``value`` (where the item's value lives in the record) and keeps the meaning of operands coniti's
filters refuse, because stored values are always finite JSON:

* ``NaN`` equals nothing and orders with nothing; ``inf``/``-inf`` equal nothing;
* ``$lt``/``$lte`` ``inf`` hold for every number, ``$gt``/``$gte`` ``-inf`` too; ``$gt``/``$gte``
  ``inf`` and ``$lt``/``$lte`` ``-inf`` hold for none;
* an integer outside the signed 64-bit range (which no stored value is) equals nothing and is
  compared as the nearest float.

Equality is coniti's (see :mod:`coniti.filters`): JSON equality, a bool is not a number. Logical
keys (``$and``, ``$or``, ``$not``) are coniti's and are translated recursively.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

from coniti.contracts import INT64_MAX, INT64_MIN
from coniti.errors import ContractError
from coniti.filters import check_filter

NEVER: dict[str, Any] = {"$in": []}
"""A condition no value meets."""
ALWAYS: dict[str, Any] = {"$nin": []}
"""A condition every value meets (a missing path too)."""
_ANY_NUMBER_ABOVE = {"$gte": -sys.float_info.max}
_ANY_NUMBER_BELOW = {"$lte": sys.float_info.max}
_LOGICAL = ("$and", "$or", "$not")


def coniti_filter(value_filter: Mapping[str, Any] | None, field: str = "filter") -> dict[str, Any] | None:
    """The coniti filter on the record's metadata equivalent to ``value_filter`` on the item's
    value (None or ``{}``: no filter). Raises :class:`ContractError` naming ``field`` for a
    malformed one."""
    if not value_filter:
        return None
    if not isinstance(value_filter, Mapping):
        raise ContractError(f"{field} must be an object of key: condition, got {type(value_filter).__name__}")
    translated = _level(value_filter, "value.")
    return check_filter(translated, field)


def _level(f: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, cond in f.items():
        if isinstance(key, str) and key in _LOGICAL:
            if key == "$not":
                out[key] = _level(cond, prefix) if isinstance(cond, Mapping) else cond
            elif isinstance(cond, list | tuple):
                out[key] = [_level(c, prefix) if isinstance(c, Mapping) else c for c in cond]
            else:
                out[key] = cond
        elif isinstance(key, str) and not key.startswith("$"):
            out[prefix + key] = _condition(cond)
        else:
            out[key] = cond  # refused by check_filter with its own message
    return out


def _condition(cond: Any) -> Any:
    if isinstance(cond, Mapping):
        if cond and all(isinstance(k, str) and k.startswith("$") for k in cond):
            return _operators(cond)
        if any(isinstance(k, str) and k.startswith("$") for k in cond):
            return dict(cond)  # a mix of operators and keys: check_filter names it
        return {k: _condition(v) for k, v in cond.items()}
    return NEVER if _has_non_finite(cond) else cond


def _operators(cond: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    numbers: dict[str, Any] | None = None
    for op, operand in cond.items():
        if op in ("$eq", "$ne") and _has_non_finite(operand):
            if op == "$eq":
                return dict(NEVER)
        elif op in ("$in", "$nin") and isinstance(operand, list | tuple):
            out[op] = [x for x in operand if not _has_non_finite(x)]
        elif op in ("$gt", "$gte", "$lt", "$lte") and _is_wide(operand):
            operand = _as_float(operand)
            if math.isfinite(operand):
                out[op] = operand
                continue
            upward = op in ("$gt", "$gte")
            if math.isnan(operand) or (operand > 0) == upward:
                return dict(NEVER)
            numbers = _ANY_NUMBER_ABOVE if upward else _ANY_NUMBER_BELOW
        else:
            out[op] = operand
    if numbers is not None:
        [(op, bound)] = numbers.items()
        if op not in out:
            out[op] = bound
        elif isinstance(out[op], str):
            return dict(NEVER)  # a number below/above infinity that is also a string
        # else another numeric bound on the same side already requires a number
    return out or dict(ALWAYS)


def _is_wide(value: Any) -> bool:
    """A number coniti's filters refuse: not finite, or an integer beyond 64 bits."""
    return _has_non_finite(value) and not isinstance(value, list | tuple | Mapping)


def _as_float(value: float | int) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _has_non_finite(value: Any) -> bool:
    """Whether ``value`` holds a number no stored value can equal: NaN, an infinity, or an
    integer outside the signed 64-bit range."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return not INT64_MIN <= value <= INT64_MAX
    if isinstance(value, list | tuple):
        return any(_has_non_finite(v) for v in value)
    if isinstance(value, Mapping):
        return any(_has_non_finite(v) for v in value.values())
    return False
