"""The engine's write guard, shared by the facade (:mod:`coniti.engine.engine`) and its mixins: the
one place that refuses writes on a read-only engine and tells the background saver of a write."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from coniti.errors import ReadOnlyError

if TYPE_CHECKING:
    from coniti.engine.saver import Saver
    from coniti.engine.writes import Writes

__all__ = ["writing"]


class _Guarded(Protocol):
    """What the guard reads of an engine."""

    @property
    def _lock(self) -> AbstractContextManager[Any]: ...

    @property
    def _read_only(self) -> bool: ...

    @property
    def _writes(self) -> Writes | None: ...

    @property
    def _saver(self) -> Saver | None: ...

    @property
    def memory(self) -> Any: ...


@contextmanager
def writing(engine: _Guarded) -> Iterator[Writes]:
    """The write path of ``engine``, under its lock, after refusing writes on a read-only engine;
    the background saver (if any) is told of the write once it succeeded."""
    with engine._lock:
        if engine._read_only or engine._writes is None:
            raise ReadOnlyError(f"this engine is read-only (memory: {engine.memory.kind})")
        yield engine._writes
        if engine._saver is not None:
            engine._saver.wrote()
