"""Conformance: ``namespaces(prefix, max_depth)`` lists the live namespaces (sync and async)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from coniti.errors import ContractError
from coniti.memory import ClearRequest, DeleteRequest, MemoryBackend, MetaSetRequest
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import put, record

__all__ = ["NamespaceListingTests"]

SPACES = [("users", "bo"), ("users", "ana", "notes"), (), ("users", "ana"), ("usersx",), ("team",)]


def _fill(backend: MemoryBackend) -> None:
    """One record in each of ``SPACES`` (written in an unsorted order)."""
    put(backend, *[record(f"r{i}", float(i), namespace=ns) for i, ns in enumerate(SPACES)])


class NamespaceListingTests(BackendFixtures):
    """``namespaces``: live only, sorted, under a prefix, cut to ``max_depth``; bad arguments refused."""

    def test_fresh_backend_lists_nothing(self, backend: MemoryBackend) -> None:
        """An empty backend has no namespaces."""
        assert backend.namespaces() == []

    def test_lists_every_live_namespace_sorted(self, backend: MemoryBackend) -> None:
        """Every namespace holding a record is listed once, sorted as tuples (the root first)."""
        _fill(backend)
        assert backend.namespaces() == sorted(SPACES)

    def test_metadata_alone_is_not_live(self, backend: MemoryBackend) -> None:
        """A namespace holding only metadata is not listed."""
        backend.set_meta(MetaSetRequest(key="k", value=1, namespace=("meta", "only")))
        assert backend.namespaces() == []

    def test_emptied_namespace_is_gone(self, backend: MemoryBackend) -> None:
        """A namespace whose records were all deleted is no longer listed."""
        _fill(backend)
        backend.delete(DeleteRequest(ids=["r5"], namespace=("team",)))
        assert ("team",) not in backend.namespaces()

    def test_cleared_namespace_is_gone(self, backend: MemoryBackend) -> None:
        """A cleared namespace is no longer listed, though its metadata is kept."""
        _fill(backend)
        backend.set_meta(MetaSetRequest(key="k", value=1, namespace=("usersx",)))
        backend.clear(ClearRequest(namespace=("usersx",)))
        assert backend.namespaces() == sorted(set(SPACES) - {("usersx",)})

    def test_refilled_namespace_is_back(self, backend: MemoryBackend) -> None:
        """A namespace emptied and written to again is listed again."""
        put(backend, record("a", 1.0, namespace=("x",)))
        backend.delete(DeleteRequest(ids=["a"], namespace=("x",)))
        put(backend, record("a", 2.0, namespace=("x",)))
        assert backend.namespaces() == [("x",)]

    def test_prefix_selects_by_whole_parts(self, backend: MemoryBackend) -> None:
        """A prefix selects the namespaces starting with its parts, itself included; ('users',) is
        not a prefix of ('usersx',)."""
        _fill(backend)
        assert backend.namespaces(("users",)) == [
            ("users", "ana"),
            ("users", "ana", "notes"),
            ("users", "bo"),
        ]

    def test_prefix_with_nothing_under_it(self, backend: MemoryBackend) -> None:
        """A prefix no live namespace starts with lists nothing."""
        _fill(backend)
        assert backend.namespaces(("nobody",)) == []

    def test_prefix_accepts_a_list(self, backend: MemoryBackend) -> None:
        """The prefix may be any sequence of strings, as a namespace may."""
        _fill(backend)
        assert backend.namespaces(["users", "ana"]) == [("users", "ana"), ("users", "ana", "notes")]

    def test_max_depth_cuts_and_deduplicates(self, backend: MemoryBackend) -> None:
        """max_depth cuts each namespace to its first parts and lists each result once; shorter ones
        stay as they are."""
        _fill(backend)
        assert backend.namespaces(max_depth=1) == [(), ("team",), ("users",), ("usersx",)]
        assert backend.namespaces(("users",), max_depth=2) == [("users", "ana"), ("users", "bo")]

    def test_max_depth_shorter_than_the_prefix(self, backend: MemoryBackend) -> None:
        """max_depth cuts even below the prefix's length (as LangGraph's list_namespaces does)."""
        _fill(backend)
        assert backend.namespaces(("users", "ana"), max_depth=1) == [("users",)]

    @pytest.mark.parametrize("prefix", ["users", ("",), ("a", 1), 5])
    def test_bad_prefix_is_refused(self, backend: MemoryBackend, prefix: Any) -> None:
        """A prefix that is not a sequence of non-empty strings raises ContractError naming it."""
        with pytest.raises(ContractError, match="prefix"):
            backend.namespaces(prefix)

    @pytest.mark.parametrize("max_depth", [0, -1, True, 1.0, "2"])
    def test_bad_max_depth_is_refused(self, backend: MemoryBackend, max_depth: Any) -> None:
        """max_depth other than a positive integer or None raises ContractError naming it."""
        with pytest.raises(ContractError, match="max_depth"):
            backend.namespaces(max_depth=max_depth)

    def test_anamespaces_matches_namespaces(self, backend: MemoryBackend) -> None:
        """anamespaces returns what namespaces returns, with and without arguments."""
        _fill(backend)
        for args in [((), None), (("users",), None), ((), 1)]:
            assert asyncio.run(backend.anamespaces(*args)) == backend.namespaces(*args)
