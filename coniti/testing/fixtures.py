"""The fixtures every conformance mixin uses. A backend overrides ``backend_factory`` only."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from coniti.memory import MemoryBackend

__all__ = ["BackendFactory", "BackendFixtures"]

BackendFactory = Callable[[], MemoryBackend]
"""A callable that returns a fresh, empty backend on every call."""


class BackendFixtures:
    """Base of every mixin: ``backend_factory`` (override it), ``make_backend`` and ``backend``.

    ``make_backend`` calls the factory and closes everything it opened when the test ends; ``backend``
    is one such backend. Tests that need many short-lived backends (hypothesis properties) use the
    factory directly inside a ``with`` block.
    """

    @pytest.fixture
    def backend_factory(self) -> BackendFactory:
        """Override: a callable returning a fresh, empty backend on every call."""
        pytest.fail(f"{type(self).__name__} must override the backend_factory fixture")

    @pytest.fixture
    def make_backend(self, backend_factory: BackendFactory) -> Iterator[BackendFactory]:
        """Like ``backend_factory``, but every backend it gives is closed when the test ends."""
        opened: list[MemoryBackend] = []

        def make() -> MemoryBackend:
            backend = backend_factory()
            opened.append(backend)
            return backend

        yield make
        for backend in reversed(opened):
            backend.close()

    @pytest.fixture
    def backend(self, make_backend: BackendFactory) -> MemoryBackend:
        """A fresh, empty backend, closed after the test."""
        return make_backend()
