"""Conformance: every operation refuses a request of the wrong type with ContractError."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from coniti.errors import ContractError
from coniti.memory import (
    ClearRequest,
    CountRequest,
    DeleteRequest,
    GetRequest,
    MemoryBackend,
    MetaGetRequest,
    MetaSetRequest,
    PutRequest,
    ScanRequest,
)
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import count, put, record

__all__ = ["RequestTypeTests"]

OPERATIONS: dict[str, Any] = {
    "put": PutRequest(records=[]),
    "get": GetRequest(ids=["a"]),
    "delete": DeleteRequest(ids=["a"]),
    "scan": ScanRequest(),
    "count": CountRequest(),
    "get_meta": MetaGetRequest(key="k"),
    "set_meta": MetaSetRequest(key="k", value=1),
    "clear": ClearRequest(),
}
"""A valid request per operation; any other operation's request is the wrong type for it."""


def _wrong_requests(operation: str) -> list[Any]:
    others = [req for name, req in OPERATIONS.items() if name != operation]
    return [*others, None, "put", {"ids": ["a"]}, OPERATIONS[operation].to_dict()]


def _label(value: Any) -> str:
    return type(value).__name__ if not isinstance(value, str) else repr(value)


CASES = [
    pytest.param(op, wrong, id=f"{op}-{_label(wrong)}")
    for op in OPERATIONS
    for wrong in _wrong_requests(op)
]


def _call(backend: MemoryBackend, operation: str, request: Any, use_async: bool) -> Any:
    if use_async:
        coroutine = getattr(backend, "a" + operation)(request)
        return asyncio.run(coroutine)
    return getattr(backend, operation)(request)


class RequestTypeTests(BackendFixtures):
    """A wrong request type raises ContractError, on the sync and the async path, changing nothing."""

    @pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
    @pytest.mark.parametrize(("operation", "wrong"), CASES)
    def test_wrong_request_type_raises(
        self, backend: MemoryBackend, operation: str, wrong: Any, use_async: bool
    ) -> None:
        """Each operation given a request of another type (or a dict, None, str) raises ContractError."""
        with pytest.raises(ContractError):
            _call(backend, operation, wrong, use_async)

    @pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
    def test_put_given_a_dict_writes_nothing(self, backend: MemoryBackend, use_async: bool) -> None:
        """put given the dict form of a valid request raises ContractError and writes nothing."""
        request = PutRequest(records=[record("a", 1.0)]).to_dict()
        with pytest.raises(ContractError):
            _call(backend, "put", request, use_async)
        assert count(backend) == 0

    @pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
    def test_clear_given_a_dict_clears_nothing(
        self, backend: MemoryBackend, use_async: bool
    ) -> None:
        """clear given a dict raises ContractError and removes nothing."""
        put(backend, record("a", 1.0))
        with pytest.raises(ContractError):
            _call(backend, "clear", {"namespace": []}, use_async)
        assert count(backend) == 1
