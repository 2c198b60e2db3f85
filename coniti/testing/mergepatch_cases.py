"""The test cases of RFC 7386 (JSON Merge Patch) as data: appendix A, and the example of section 3.

Each case is ``(original, patch, result)``. :data:`OBJECT_CASES` are those whose original and patch
are both JSON objects: the ones that apply to a record's metadata through ``metadata_patch``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["APPENDIX_A", "OBJECT_CASES", "SECTION_3"]

Case = tuple[Any, Any, Any]

APPENDIX_A: list[Case] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]

SECTION_3: Case = (
    {
        "title": "Goodbye!",
        "author": {"givenName": "John", "familyName": "Doe"},
        "tags": ["example", "sample"],
        "content": "This will be unchanged",
    },
    {"title": "Hello!", "phoneNumber": "+01-123-456-7890", "author": {"familyName": None}, "tags": ["example"]},
    {
        "title": "Hello!",
        "author": {"givenName": "John"},
        "tags": ["example"],
        "content": "This will be unchanged",
        "phoneNumber": "+01-123-456-7890",
    },
)

OBJECT_CASES: list[Case] = [
    case for case in [*APPENDIX_A, SECTION_3] if isinstance(case[0], dict) and isinstance(case[1], dict)
]
