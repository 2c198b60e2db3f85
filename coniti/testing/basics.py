"""Conformance: what every backend is, before any operation."""

from __future__ import annotations

from coniti.memory import MemoryBackend
from coniti.testing.fixtures import BackendFactory, BackendFixtures
from coniti.testing.helpers import count, put, record

__all__ = ["BasicsTests"]


class BasicsTests(BackendFixtures):
    """The factory gives fresh, independent backends; ``kind``; ``close`` and the context manager."""

    def test_is_a_memory_backend(self, backend: MemoryBackend) -> None:
        """The factory returns a MemoryBackend."""
        assert isinstance(backend, MemoryBackend)

    def test_kind_is_a_nonempty_string(self, backend: MemoryBackend) -> None:
        """kind names the implementation."""
        assert isinstance(backend.kind, str) and backend.kind

    def test_factory_backends_are_independent(self, make_backend: BackendFactory) -> None:
        """Two backends from the factory do not share records."""
        first, second = make_backend(), make_backend()
        put(first, record("a", 1.0))
        assert count(second) == 0

    def test_context_manager_returns_the_backend(self, backend_factory: BackendFactory) -> None:
        """``with backend as b`` gives the backend itself and closes it on exit."""
        backend = backend_factory()
        with backend as entered:
            assert entered is backend
            put(entered, record("a", 1.0))

    def test_close_twice_is_harmless(self, backend_factory: BackendFactory) -> None:
        """Closing a backend a second time does not raise."""
        backend = backend_factory()
        backend.close()
        backend.close()
