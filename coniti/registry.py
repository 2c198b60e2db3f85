"""Named registries of engine pieces, open to third parties through entry points.

Each kind of piece (embedding, structure, strategy, memory) has one :class:`Registry` mapping a name to
a factory: a class or any callable that takes the piece's options as keyword arguments and returns an
instance. Built-in pieces register themselves when their module is imported. A third-party package
adds a piece either by calling :meth:`Registry.register` or by declaring an entry point in the
registry's group, e.g. in its ``pyproject.toml``::

    [project.entry-points."coniti.embedders"]
    my_embedder = "my_package.embedding:MyEmbedder"

A factory registered in code may be given as ``"module:attribute"`` text, imported on first use.
Entry points are read once, on the first lookup of a name that was not registered in code; a name
registered in code wins over an entry point of the same name. Loading an entry point that fails raises
:class:`UnknownPiece` naming the entry point and keeping the original error as ``__cause__``.

The registries are module-level and guarded by a lock, so registering and looking up from several
threads is safe.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar, cast

from coniti.errors import UnknownPiece

__all__ = ["Registry", "canonical_json", "spec_id"]

T = TypeVar("T")

_IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


class Registry(Generic[T]):
    """Name -> factory for one kind of piece; ``group`` is its entry-point group."""

    def __init__(self, kind: str, group: str) -> None:
        self.kind = kind
        self.group = group
        self._factories: dict[str, Callable[..., T] | importlib.metadata.EntryPoint] = {}
        self._entry_points: dict[str, importlib.metadata.EntryPoint] | None = None
        self._lock = threading.Lock()

    def register(
        self, name: str, factory: Callable[..., T] | str, *, replace: bool = False
    ) -> None:
        """Register ``factory`` under ``name``; an existing name raises unless ``replace``.

        ``factory`` may be given as ``"module:attribute"`` text, like an entry point: it is imported
        on the first lookup of ``name``, so a registering module need not import the piece's module
        (which may import it back, or need an optional extra)."""
        if not isinstance(name, str) or not name:
            raise UnknownPiece(f"a {self.kind} name must be a non-empty string, got {name!r}")
        if isinstance(factory, str):
            if not _IMPORT_PATH.fullmatch(factory):
                raise UnknownPiece(
                    f"the {self.kind} factory for {name!r} must be 'module:attribute', got {factory!r}"
                )
            factory_or_path: Callable[..., T] | importlib.metadata.EntryPoint = (
                importlib.metadata.EntryPoint(name, factory, self.group)
            )
        elif callable(factory):
            factory_or_path = factory
        else:
            raise UnknownPiece(f"the {self.kind} factory for {name!r} is not callable")
        with self._lock:
            known = self._factories.get(name)
            if known is not None and not replace and known != factory_or_path:
                raise UnknownPiece(
                    f"{self.kind} {name!r} is already registered; pass replace=True to replace it"
                )
            self._factories[name] = factory_or_path

    def unregister(self, name: str) -> None:
        """Forget a name registered in code (entry points stay discoverable)."""
        with self._lock:
            self._factories.pop(name, None)

    def names(self, *, registered_first: bool = False) -> list[str]:
        """Every known name, registered in code or by entry point, sorted; with
        ``registered_first``, the names registered in code in registration order, then the other
        entry points sorted."""
        with self._lock:
            if not registered_first:
                return sorted(set(self._factories) | set(self._discover()))
            return [*self._factories, *sorted(set(self._discover()) - set(self._factories))]

    def in_order(self) -> Iterator[str]:
        """The names of ``names(registered_first=True)``, yielded one by one: the entry points are
        read only when the caller asks for more than the names registered in code (reading them
        scans every installed distribution)."""
        with self._lock:
            registered = list(self._factories)
        yield from registered
        with self._lock:
            rest = sorted(set(self._discover()) - set(registered))
        yield from rest

    def get(self, name: str) -> Callable[..., T]:
        """The factory registered as ``name``; unknown names raise :class:`UnknownPiece` listing all."""
        with self._lock:
            factory = self._factories.get(name)
            if factory is not None and not isinstance(factory, importlib.metadata.EntryPoint):
                return factory
            entry = factory if factory is not None else self._discover().get(name)
        what = "entry point" if factory is None else "factory"
        if entry is None:
            known = ", ".join(self.names()) or "(none)"
            raise UnknownPiece(f"unknown {self.kind} {name!r}; registered: {known}")
        try:
            loaded = entry.load()
        except Exception as exc:
            raise UnknownPiece(
                f"{self.kind} {name!r}: {what} {entry.value!r} in group {self.group!r} "
                f"failed to load: {exc}"
            ) from exc
        if not callable(loaded):
            raise UnknownPiece(f"{self.kind} {name!r}: {what} {entry.value!r} is not a class or callable")
        with self._lock:
            current = self._factories.get(name)
            if current is None or current == entry:
                self._factories[name] = loaded
            return cast("Callable[..., T]", self._factories[name])

    def create(self, name: str, **options: Any) -> T:
        """A new piece: the factory registered as ``name`` called with ``options``."""
        return self.get(name)(**options)

    def _discover(self) -> dict[str, importlib.metadata.EntryPoint]:
        if self._entry_points is None:
            found = importlib.metadata.entry_points(group=self.group)
            self._entry_points = {ep.name: ep for ep in found}
        return self._entry_points

    def rescan(self) -> None:
        """Read the entry points again (after installing a package in a running process)."""
        with self._lock:
            self._entry_points = None


def canonical_json(data: Any) -> str:
    """The canonical JSON text of ``data``: sorted keys, no spaces, ASCII, no NaN or infinity."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def spec_id(prefix: str, spec: Any) -> str:
    """``prefix`` + ``-`` + the first 12 hex digits of the SHA-256 of the canonical JSON of ``spec``.

    The same spec gives the same id on every machine, Python version and run.
    """
    digest = hashlib.sha256(canonical_json(spec).encode("ascii")).hexdigest()
    return f"{prefix}-{digest[:12]}"
