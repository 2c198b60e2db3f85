"""coniti.mergepatch: RFC 7386 exactly (its appendix A and section 3 cases), without changing inputs."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coniti.mergepatch import merge_patch
from coniti.testing.mergepatch_cases import APPENDIX_A, SECTION_3

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=12,
)


@pytest.mark.parametrize(("original", "patch", "result"), [*APPENDIX_A, SECTION_3])
def test_rfc7386_cases(original: Any, patch: Any, result: Any) -> None:
    """Every example of RFC 7386 gives the result the RFC states."""
    assert merge_patch(original, patch) == result


@given(JSON, JSON)
def test_inputs_are_not_changed(target: Any, patch: Any) -> None:
    """merge_patch changes neither argument."""
    t, p = copy.deepcopy(target), copy.deepcopy(patch)
    merge_patch(target, patch)
    assert (target, patch) == (t, p)


@given(JSON, JSON)
def test_applying_twice_is_applying_once(target: Any, patch: Any) -> None:
    """A merge patch is idempotent: applying it to its own result changes nothing."""
    once = merge_patch(target, patch)
    assert merge_patch(once, patch) == once


@given(st.dictionaries(st.text(max_size=2), JSON, max_size=4))
def test_empty_object_patch_keeps_an_object(target: dict[str, Any]) -> None:
    """The patch {} leaves an object as it is."""
    assert merge_patch(target, {}) == target
