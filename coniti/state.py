"""StateStore: named JSON values (offsets, checkpoints, application state) on any memory backend.

Each key is a record of the store's namespace (default ``("state",)``): id the key, kind
``"state"``, no vector, the value under the metadata key ``"value"``. So every change is a write of
the backend: on a :class:`~coniti.impl.log.LogBackend` an event of the log with its ``actor`` and
``reason`` (``history(key, namespace=...)`` lists them, ``at(seq)`` reads the values as of any
point); on the in-memory backend a change like any other (it keeps no audit trail, and refuses an
``actor`` or ``reason`` with :class:`~coniti.errors.NotSupported`).

Versions. :meth:`StateStore.set` and :meth:`StateStore.delete` return or take the record's version
(the seq of the write on a log store): ``expected_version=v`` sets only if the live version is
``v``, ``expected_version=None`` only if the key is not set (compare-and-set); a mismatch raises
:class:`~coniti.errors.VersionConflict` and writes nothing. Needs a backend with ``write``
(both built-in backends have it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import EllipsisType
from typing import Any

from coniti.actor import Note
from coniti.contracts import check_json_value
from coniti.errors import ContractError, NotSupported
from coniti.memory import (
    DeleteOp,
    GetRequest,
    MemoryBackend,
    MemoryRecord,
    UpsertOp,
    WriteRequest,
    as_namespace,
    audited,
)

__all__ = ["STATE_KIND", "StateEntry", "StateStore"]

STATE_KIND = "state"
"""The kind of a state record's note."""

_MISSING: Any = object()


@dataclass(frozen=True)
class StateEntry:
    """A key's value and the version that wrote it."""

    key: str
    value: Any
    version: int


class StateStore:
    """Get, set, delete and list JSON values by key, on ``memory`` in ``namespace`` (module docstring)."""

    def __init__(self, memory: MemoryBackend, *, namespace: Sequence[str] = ("state",)) -> None:
        if not isinstance(memory, MemoryBackend):
            raise ContractError(f"memory must be a MemoryBackend, got {type(memory).__name__}")
        self.memory = memory
        self.namespace: tuple[str, ...] = as_namespace(namespace)

    def __repr__(self) -> str:
        return f"StateStore(namespace={self.namespace!r})"

    def entry(self, key: str) -> StateEntry | None:
        """The value and version of ``key``, or None when it is not set."""
        found = self.memory.get(GetRequest(ids=[_key(key)], namespace=self.namespace)).records
        if not found:
            return None
        record = found[0]
        return StateEntry(key, record.note.metadata.get("value"), int(record.version or 0))

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` (a copy), or ``default`` when it is not set."""
        got = self.entry(key)
        return default if got is None else got.value

    def version(self, key: str) -> int | None:
        """The live version of ``key``, or None when it is not set."""
        got = self.entry(key)
        return None if got is None else got.version

    def keys(self, prefix: str = "") -> list[str]:
        """The keys set, sorted, those starting with ``prefix`` when given."""
        if not isinstance(prefix, str):
            raise ContractError(f"prefix must be a string, got {type(prefix).__name__}")
        found = self.memory.iter_all(namespace=self.namespace, filter={"$kind": STATE_KIND})
        return sorted(r.id for r in found if r.id.startswith(prefix))

    def set(
        self,
        key: str,
        value: Any,
        *,
        expected_version: int | None | EllipsisType = ...,
        actor: str | None = None,
        reason: str | None = None,
    ) -> int:
        """Set ``key`` to the JSON ``value`` (copied; :class:`ContractError` naming ``value``
        otherwise); returns the new version. ``expected_version``: see the module docstring."""
        try:
            checked = check_json_value(value, "value")
        except ValueError as exc:
            raise ContractError(str(exc)) from None
        note = Note(id=_key(key), text="", timestamp=time.time(), metadata={"value": checked}, kind=STATE_KIND)
        record = MemoryRecord(note=note, vector=None, namespace=self.namespace)
        result = self._write(UpsertOp(record=record), note.id, expected_version, actor, reason)
        return int(result.versions[note.id])

    def delete(
        self,
        key: str,
        *,
        expected_version: int | None | EllipsisType = ...,
        actor: str | None = None,
        reason: str | None = None,
    ) -> bool:
        """Delete ``key``; True when it was set. ``expected_version``: see the module docstring."""
        rid = _key(key)
        result = self._write(DeleteOp(id=rid), rid, expected_version, actor, reason)
        return rid in result.deleted

    def _write(
        self,
        op: UpsertOp | DeleteOp,
        rid: str,
        expected: int | None | EllipsisType,
        actor: str | None,
        reason: str | None,
    ) -> Any:
        if not self.memory.supports_write:
            raise NotSupported(f"the {self.memory.kind!r} memory backend has no write (a StateStore needs it)")
        if expected is not ... and expected is not None and (
            isinstance(expected, bool) or not isinstance(expected, int) or expected < 1
        ):
            raise ContractError(f"expected_version must be a version (an int >= 1), None or left out, got {expected!r}")
        expect = {} if expected is ... else {rid: expected}
        request = WriteRequest(ops=[op], namespace=self.namespace, expect=expect)
        with audited(self.memory, actor, reason):
            return self.memory.write(request)



def _key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise ContractError(f"key must be a non-empty string, got {key!r}")
    return key

