"""Retention: how long records live when a write gives them no expiry, and ``no_expiry``.

A :class:`~coniti.impl.log.LogBackend` opened with ``retention=timedelta(days=30)`` gives every
record written without an ``expires_at`` the expiry *time of the write + 30 days*; with
``kind_retention={"message": timedelta(days=7), "preference": None}`` a record whose note is of
that :attr:`~coniti.actor.Note.kind` takes that kind's retention instead (``None``: the kind never
expires by retention). The expiry is the store's ordinary one: reads hide the record from that
time on, :meth:`~coniti.impl.log.LogBackend.sweep` deletes it with an audited ``delete`` event
(actor ``coniti-ttl``, reason ``expired``), and views of the past still show it as it was.

* **Which writes.** Every record a ``put``, ``put_with_meta``, ``put_batch``, ``put_batches``
  (a memory-file ``load``) or an upsert of ``write`` stores without an expiry; an explicit
  ``expires_at`` is kept as given. A patch (``update``) keeps the record's expiry as it is. An
  upsert under retention renews the expiry, so it writes a new version even of identical content.
  Replaying a log (``import_log``) and ``rebuild`` keep the expiries the log holds.
* **The time.** The clock of the writing process when the call is made (``time.time()``).
* **Per write: no expiry.** Inside ``with no_expiry():`` (or ``engine.ingest(..., no_expiry=True)``,
  ``ingest_many`` and ``upsert`` likewise) records get no retention expiry: they live until deleted.
  Context-local (threads and asyncio tasks each have their own), carried into the async twins.
* **Where it is kept.** In the store, as the metadata key :data:`RETENTION_KEY` (``"retention"``)
  of the root namespace: ``{"default": seconds or null, "kinds": {kind: seconds or null}}``, a
  ``meta`` event of the audit trail like any other (stamped with the opener's actor and reason
  ``retention``), so a reopen, every other handle and process, an export and an import keep it.
  Opening with ``retention=`` or ``kind_retention=`` records the new policy when it differs (on a
  read-only store that is refused); opening without them keeps what the store holds. A handle
  reads the policy when it opens and applies it to its writes: a policy another handle or process
  records later applies to this one once it is reopened.

Bad input (a duration that is not a positive :class:`~datetime.timedelta`, a kind that is not a
non-empty string): :class:`~coniti.errors.ContractError` naming the argument; the store is not
opened.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from coniti.errors import ContractError

__all__ = ["RETENTION_KEY", "Retention", "no_expiry"]

RETENTION_KEY = "retention"
"""The root-namespace metadata key that holds a store's retention (module docstring)."""

_SUPPRESSED: contextvars.ContextVar[bool] = contextvars.ContextVar("coniti_no_expiry", default=False)


@contextmanager
def no_expiry() -> Iterator[None]:
    """Writes in this block get no retention expiry (module docstring)."""
    token = _SUPPRESSED.set(True)
    try:
        yield
    finally:
        _SUPPRESSED.reset(token)


@contextmanager
def retained(on: bool) -> Iterator[None]:
    """Nothing when ``on``, else :func:`no_expiry`: the ``no_expiry=`` flag of the engine's writes."""
    if on:
        yield
    else:
        with no_expiry():
            yield


def suppressed() -> bool:
    """True inside :func:`no_expiry`."""
    return _SUPPRESSED.get()


def _seconds(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, timedelta):
        raise ContractError(f"{field} must be a timedelta or None, got {type(value).__name__}")
    seconds = value.total_seconds()
    if not seconds > 0 or not math.isfinite(seconds):
        raise ContractError(f"{field} must be a positive duration, got {value!r}")
    return seconds


class Retention:
    """A store's retention: ``default`` seconds (None: no retention) and seconds per kind (None:
    that kind never expires by retention). Built by :meth:`make` from the open arguments or
    :meth:`from_meta` from the stored value."""

    __slots__ = ("default", "kinds")

    def __init__(self, default: float | None, kinds: Mapping[str, float | None]) -> None:
        self.default = default
        self.kinds = dict(kinds)

    @classmethod
    def make(cls, retention: Any, kind_retention: Any, stored: Retention) -> Retention:
        """The policy an open asks for: each argument given (not ``...``) replaces that part of
        ``stored``. Raises :class:`ContractError` naming the bad argument."""
        default = stored.default if retention is ... else _seconds(retention, "retention")
        if kind_retention is ...:
            kinds = stored.kinds
        elif kind_retention is None:
            kinds = {}
        elif not isinstance(kind_retention, Mapping):
            raise ContractError(
                f"kind_retention must be a mapping of kind to timedelta or None, got {type(kind_retention).__name__}"
            )
        else:
            kinds = {}
            for kind, value in kind_retention.items():
                if not isinstance(kind, str) or not kind.strip():
                    raise ContractError(f"kind_retention: a kind must be a non-empty string, got {kind!r}")
                kinds[kind] = _seconds(value, f"kind_retention[{kind!r}]")
        return cls(default, kinds)

    @classmethod
    def from_meta(cls, value: Any) -> Retention:
        """The policy of a stored :data:`RETENTION_KEY` value (None: no retention)."""
        if not isinstance(value, dict):
            return cls(None, {})
        kinds = value.get("kinds")
        return cls(value.get("default"), kinds if isinstance(kinds, dict) else {})

    def to_meta(self) -> dict[str, Any]:
        """The stored form (module docstring)."""
        return {"default": self.default, "kinds": dict(sorted(self.kinds.items()))}

    @property
    def active(self) -> bool:
        """Whether any write can get an expiry from this policy."""
        return self.default is not None or any(v is not None for v in self.kinds.values())

    def seconds(self, kind: str | None) -> float | None:
        """How long a record of ``kind`` lives (None: no retention expiry)."""
        if kind is not None and kind in self.kinds:
            return self.kinds[kind]
        return self.default

    def timedelta(self, kind: str | None = None) -> timedelta | None:
        """:meth:`seconds` as a timedelta."""
        s = self.seconds(kind)
        return None if s is None else timedelta(seconds=s)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Retention) and self.to_meta() == other.to_meta()

    def __hash__(self) -> int:
        return hash((self.default, tuple(sorted(self.kinds.items()))))

    def __repr__(self) -> str:
        return f"Retention(default={self.default!r}, kinds={self.kinds!r})"
