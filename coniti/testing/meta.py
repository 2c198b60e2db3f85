"""Conformance: small JSON metadata per namespace."""

from __future__ import annotations

from typing import Any

import pytest

from coniti.errors import ContractError
from coniti.memory import MemoryBackend, MetaGetRequest, MetaSetRequest
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import count

__all__ = ["MetaTests"]

JSON_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -(2**63),
    2**63 - 1,
    1.5,
    -0.0,
    5e-324,
    1.7976931348623157e308,
    "",
    "ünïcode \n\x00 text",
    [],
    {},
    [1, "a", None, 2.5, [True]],
    {"a": {"b": [1.0, {"c": None}]}, "": "empty key"},
]


class MetaTests(BackendFixtures):
    """get_meta/set_meta: JSON values stored exactly, None when unset, separate from records."""

    def test_unset_key_is_none(self, backend: MemoryBackend) -> None:
        """get_meta of a key never set returns None."""
        assert backend.get_meta(MetaGetRequest(key="nothing")).value is None

    @pytest.mark.parametrize("value", JSON_VALUES, ids=repr)
    def test_value_reads_back_equal(self, backend: MemoryBackend, value: Any) -> None:
        """A JSON value reads back equal, with the same types (1 stays int, 1.0 float, True bool)."""
        backend.set_meta(MetaSetRequest(key="k", value=value))
        got = backend.get_meta(MetaGetRequest(key="k")).value
        assert repr(got) == repr(value)

    def test_set_returns_the_stored_value(self, backend: MemoryBackend) -> None:
        """set_meta returns the value as stored."""
        assert backend.set_meta(MetaSetRequest(key="k", value={"x": [1]})).value == {"x": [1]}

    def test_tuple_is_stored_as_list(self, backend: MemoryBackend) -> None:
        """A tuple value is stored as a JSON list."""
        backend.set_meta(MetaSetRequest(key="k", value=(1, (2, 3))))
        assert backend.get_meta(MetaGetRequest(key="k")).value == [1, [2, 3]]

    def test_set_overwrites(self, backend: MemoryBackend) -> None:
        """Setting a key again replaces its value."""
        backend.set_meta(MetaSetRequest(key="k", value="one"))
        backend.set_meta(MetaSetRequest(key="k", value=["two"]))
        assert backend.get_meta(MetaGetRequest(key="k")).value == ["two"]

    def test_set_none_unsets(self, backend: MemoryBackend) -> None:
        """Setting None makes the key read as unset (None)."""
        backend.set_meta(MetaSetRequest(key="k", value="one"))
        backend.set_meta(MetaSetRequest(key="k", value=None))
        assert backend.get_meta(MetaGetRequest(key="k")).value is None

    def test_keys_are_independent(self, backend: MemoryBackend) -> None:
        """Setting one key leaves the others as they were."""
        backend.set_meta(MetaSetRequest(key="a", value=1))
        backend.set_meta(MetaSetRequest(key="b", value=2))
        assert backend.get_meta(MetaGetRequest(key="a")).value == 1
        assert backend.get_meta(MetaGetRequest(key="b")).value == 2

    def test_meta_is_not_a_record(self, backend: MemoryBackend) -> None:
        """Metadata does not count as, or scan as, a record."""
        backend.set_meta(MetaSetRequest(key="k", value=1))
        assert count(backend) == 0

    @pytest.mark.parametrize(
        "value", [float("nan"), float("inf"), [1, float("-inf")], {"x": {1, 2}}, object(), {1: "a"}]
    )
    def test_non_json_value_is_refused(self, backend: MemoryBackend, value: Any) -> None:
        """A non-finite or non-JSON value is refused with ContractError naming 'value'."""
        with pytest.raises(ContractError, match="value"):
            backend.set_meta(backend.meta_set_request("k", value))
        assert backend.get_meta(MetaGetRequest(key="k")).value is None
