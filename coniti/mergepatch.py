"""JSON Merge Patch (RFC 7386) over JSON values.

:func:`merge_patch` is the RFC's ``MergePatch(Target, Patch)`` exactly: a patch that is an object is
merged key by key (``null`` deletes the key, an object recurses, anything else replaces); a patch that
is not an object replaces the target whole. Neither argument is changed; the result shares no mutable
part with them. Arrays are values like any other: a patch never merges into an array.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["merge_patch"]


def merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with ``patch`` applied as RFC 7386 says (section 2, and the cases of appendix A)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out: dict[str, Any] = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out
