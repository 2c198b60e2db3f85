"""check_json_value's inline path for plain scalars in a dict gives what the general recursion gives."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coniti.contracts import INT64_MAX, INT64_MIN, MAX_JSON_DEPTH, check_json_value


def reference(value: Any, field: str, depth: int = 0) -> Any:
    """The recursion without the inline path (every value through the checks)."""
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"{field} is nested deeper than {MAX_JSON_DEPTH} levels")
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"{field} is an integer outside the signed 64-bit range")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{field} must be finite, got {value!r}")
        return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{field} has a non-string key {k!r}")
            out[k] = reference(v, f"{field}.{k}", depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [reference(v, f"{field}[{i}]", depth + 1) for i, v in enumerate(value)]
    raise ValueError(f"{field} is not JSON-serialisable: {type(value).__name__}")


_scalars = (
    st.none() | st.booleans() | st.integers(-(2**65), 2**65) | st.floats() | st.text(max_size=3)
    | st.just(b"x") | st.just(1j)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=2) | st.integers(0, 2), inner, max_size=3),
    max_leaves=10,
)


def _outcome(fn: Any, value: Any) -> tuple[str, Any]:
    try:
        return ("ok", fn(value, "metadata"))
    except ValueError as exc:
        return ("error", str(exc))


@settings(max_examples=300, deadline=None)
@given(_values)
def test_same_copy_or_same_error_as_the_plain_recursion(value: Any) -> None:
    """For any value, check_json_value returns an equal copy or raises the same message as the
    recursion that checks every scalar in its own call."""
    assert _outcome(check_json_value, value) == _outcome(reference, value)


def test_the_depth_limit_counts_scalars_inline_too() -> None:
    """A scalar one level below the deepest allowed dict is refused, as before the inline path."""
    for depth, ok in ((MAX_JSON_DEPTH, True), (MAX_JSON_DEPTH + 1, False)):
        value: Any = 1
        for _ in range(depth):
            value = {"k": value}
        assert (_outcome(check_json_value, value)[0] == "ok") is ok
