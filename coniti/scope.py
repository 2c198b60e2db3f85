"""Scopes: who a record belongs to (:class:`Scope`), kept in its namespace, and the write guard.

A :class:`Scope` names up to four owners of a record: ``app``, ``user``, ``agent`` and
``conversation``. A handle made with ``engine.scoped(scope)`` (:class:`coniti.scoped.ScopedEngine`)
writes every record under the scope and reads only records under it.

**How a scope is stored: in the namespace.** The scope of a record is the start of its namespace:
the reserved part :data:`SCOPE_ROOT` (``"@scope"``), then one part ``"field=value"`` for each field
the scope sets, in the fixed order :data:`FIELDS` (``app``, ``user``, ``agent``, ``conversation``),
then the part :data:`SCOPE_END` (``"@"``), then the namespace the handle's caller chose::

    Scope(user="alice", agent="bot")  +  ("notes",)
      -> ("@scope", "user=alice", "agent=bot", "@", "notes")

The namespace is the one fact that says where a record is: every read of the store (``get``,
``scan``, ``count``, ``ask``, ``history``, ``diff``, ``events``, views of the past, dumps) already
takes it, so a handle that reads only namespaces under its scope cannot read another's records, and
a record's scope cannot change without it becoming another record. Nothing of the scope is kept
in the note's metadata (which anyone writing a note chooses): the metadata key :data:`SCOPE_KEY`
(``"scope"``) is refused in the metadata and filters a handle is given, so a client cannot believe it
sets or narrows a scope that way.

**Which records a handle sees.** Those whose namespace starts with the handle's :attr:`Scope.root`
(``SCOPE_ROOT`` and its ``field=value`` parts, without ``SCOPE_END``): its own records, and those of
scopes that extend it by fields later in the order. ``Scope(user="alice")`` sees the records of
``Scope(user="alice", conversation="c1")``, but not those of ``Scope(app="x", user="alice")``
(whose root starts with ``app=x``) nor of ``Scope(agent="bot")``. Put the widest field first: a
scope is a path ``app / user / agent / conversation`` with the unset fields left out.

**Trust model.** The scoped handle is the boundary: give the untrusted side (an MCP client, a
user's session, a tool an agent calls) a handle, never the engine or the store. Within the process,
code that holds the unscoped engine is trusted to read everything (``engine.ask(prefix=())``
reads every user's notes), but it cannot *write* into a scope: the engine's write paths
(``ingest``, ``ingest_many``, ``upsert``, ``update``, ``remove``, ``improve``, ``restore``) refuse a
namespace under :data:`SCOPE_ROOT` with :class:`ScopeError` unless the write comes from a handle
whose scope holds it (:func:`check_write`), so a note cannot be planted in ``alice``'s scoped reads
through the unscoped engine, the command line's ``add``/``rm`` or an unscoped MCP server. The
memory backend under the engine (``put``, ``load``, ``import_log``, ``erase``) and the store's files
are the administrator's: they move whole stores, scopes included, as they are.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pydantic

from coniti.contracts import Contract, text_problem
from coniti.errors import ContractError, namespace_text

__all__ = [
    "FIELDS",
    "SCOPE_END",
    "SCOPE_KEY",
    "SCOPE_ROOT",
    "Scope",
    "ScopeError",
    "check_write",
    "scope_of",
]

SCOPE_ROOT = "@scope"
"""The first part of every scoped namespace; reserved (module docstring)."""

SCOPE_END = "@"
"""The part that ends a scope's ``field=value`` parts in a namespace; the caller's namespace follows."""

SCOPE_KEY = "scope"
"""The metadata key a scoped handle refuses in metadata and filters (module docstring)."""

FIELDS = ("app", "user", "agent", "conversation")
"""The scope fields, in the order their parts appear in a namespace (widest first)."""


class ScopeError(ContractError):
    """A call through a scoped handle addressed something outside its scope, or forged a scope
    (a namespace of another scope, the reserved metadata key), or an unscoped write addressed a
    scoped namespace. Nothing was written."""


class Scope(Contract):
    """Who records belong to: any of ``user``, ``agent``, ``conversation``, ``app`` (each a
    non-empty string without surrounding whitespace, or None); at least one is set. Frozen.

    ``Scope.parse("user=alice,agent=bot")`` reads the command line's form. An unknown field, an
    empty value or no field at all raises :class:`~coniti.errors.ContractError` naming it."""

    model_config = pydantic.ConfigDict(frozen=True)

    user: str | None = None
    agent: str | None = None
    conversation: str | None = None
    app: str | None = None

    @pydantic.field_validator("user", "agent", "conversation", "app", mode="before")
    @classmethod
    def _value(cls, value: Any, info: pydantic.ValidationInfo) -> Any:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError(f"scope field {info.field_name} must be a string, got {type(value).__name__}")
        if not value.strip() or value != value.strip():
            raise ValueError(
                f"scope field {info.field_name} must be non-blank without surrounding whitespace, got {value!r}"
            )
        problem = text_problem(value)
        if problem is not None:
            raise ValueError(f"scope field {info.field_name}: {problem}")
        return value

    @pydantic.model_validator(mode="after")
    def _some(self) -> Scope:
        if all(getattr(self, f) is None for f in FIELDS):
            raise ValueError(f"a scope sets at least one of {', '.join(FIELDS)}")
        return self

    @classmethod
    def parse(cls, text: str) -> Scope:
        """``"user=alice,agent=bot"`` as a Scope; raises :class:`ContractError` naming the bad part."""
        fields: dict[str, str] = {}
        for part in text.split(","):
            name, eq, value = part.partition("=")
            name = name.strip()
            if not eq:
                raise ContractError(f"scope {part!r} is not FIELD=VALUE (fields: {', '.join(FIELDS)})")
            if name not in FIELDS:
                raise ContractError(f"unknown scope field {name!r}; known: {', '.join(FIELDS)}")
            if name in fields:
                raise ContractError(f"scope field {name!r} is given twice")
            fields[name] = value
        return cls(**fields)

    @property
    def fields(self) -> dict[str, str]:
        """The fields set, in :data:`FIELDS` order."""
        return {f: v for f in FIELDS if (v := getattr(self, f)) is not None}

    @property
    def root(self) -> tuple[str, ...]:
        """The namespace prefix of every record this scope sees: :data:`SCOPE_ROOT` and the
        ``field=value`` parts."""
        return (SCOPE_ROOT, *(f"{f}={v}" for f, v in self.fields.items()))

    @property
    def home(self) -> tuple[str, ...]:
        """Where a handle of this scope writes: :attr:`root` and :data:`SCOPE_END`; the caller's
        namespace follows it."""
        return (*self.root, SCOPE_END)

    def holds(self, namespace: Sequence[str]) -> bool:
        """Whether records of ``namespace`` are under this scope (their namespace starts with
        :attr:`root`)."""
        root = self.root
        return tuple(namespace[: len(root)]) == root

    def __str__(self) -> str:
        return ",".join(f"{f}={v}" for f, v in self.fields.items())


def scope_of(namespace: Sequence[str]) -> tuple[Scope, tuple[str, ...]] | None:
    """``(scope, the caller's namespace)`` of a scoped namespace, None for one not under
    :data:`SCOPE_ROOT` (or not well formed: no :data:`SCOPE_END`, a part that is not a known
    ``field=value`` in order)."""
    ns = tuple(namespace)
    if not ns or ns[0] != SCOPE_ROOT or SCOPE_END not in ns:
        return None
    end = ns.index(SCOPE_END)
    fields: dict[str, str] = {}
    for part in ns[1:end]:
        name, eq, value = part.partition("=")
        if not eq or name not in FIELDS or name in fields or (fields and FIELDS.index(name) <= FIELDS.index(list(fields)[-1])):
            return None
        fields[name] = value
    try:
        return Scope(**fields), ns[end + 1 :]
    except ContractError:
        return None


# -- the write guard ----------------------------------------------------------------------------

_WRITER: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar("coniti_scope_writer", default=None)
"""The root of the scoped handle whose call is running in this context (None: no handle's)."""


@contextmanager
def writing_as(scope: Scope) -> Iterator[None]:
    """Run the engine's writes of the enclosed block as ``scope``'s handle (for
    :class:`coniti.scoped.ScopedEngine` only): :func:`check_write` lets them into namespaces
    under ``scope.root``."""
    token = _WRITER.set(scope.root)
    try:
        yield
    finally:
        _WRITER.reset(token)


def check_write(namespace: tuple[str, ...], what: str) -> None:
    """Refuse (:class:`ScopeError`) a write of ``what`` into a namespace under :data:`SCOPE_ROOT`
    unless it runs for a scoped handle whose scope holds that namespace (module docstring)."""
    if not namespace or namespace[0] != SCOPE_ROOT:
        return
    root = _WRITER.get()
    if root is not None and namespace[: len(root)] == root:
        return
    raise ScopeError(
        f"{what}: namespace {namespace_text(namespace)} is a scope's; write through "
        "engine.scoped(Scope(...)), nothing was written"
    )


def check_metadata(metadata: Mapping[str, Any] | None, field: str) -> None:
    """Refuse (:class:`ScopeError`) metadata that holds the reserved key :data:`SCOPE_KEY`."""
    if metadata is not None and SCOPE_KEY in metadata:
        raise ScopeError(
            f"{field}: key {SCOPE_KEY!r} is reserved: a scoped handle's records take their scope "
            "from the handle; nothing was written"
        )


def check_filter(value: Any, field: str) -> None:
    """Refuse (:class:`ScopeError`) a metadata filter with a top-level path :data:`SCOPE_KEY`
    (or ``scope.…``), also inside ``$and``/``$or``/``$not``."""
    if not isinstance(value, Mapping):
        return
    for key, cond in value.items():
        if key in ("$and", "$or") and isinstance(cond, list):
            for i, sub in enumerate(cond):
                check_filter(sub, f"{field}[{key!r}][{i}]")
        elif key == "$not":
            check_filter(cond, f"{field}['$not']")
        elif isinstance(key, str) and (key == SCOPE_KEY or key.startswith(SCOPE_KEY + ".")):
            raise ScopeError(
                f"{field}: path {key!r} is reserved: a scoped handle reads its own scope only"
            )
