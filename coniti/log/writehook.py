"""The hook a store in cluster mode runs around each write transaction (:meth:`Store.replicate
<coniti.log.store.Store.replicate>`; the hook itself is :class:`coniti.log.replica.Replica`)."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["Replan", "WriteHook"]


class Replan(Exception):
    """Raised by :meth:`WriteHook.before_commit`: the write was planned on a state the log of
    record has moved past; the store folds what it lacks (:meth:`WriteHook.catch_up`) and runs
    the write again."""


class WriteHook(Protocol):
    """What a store in cluster mode runs around each write transaction (see
    :mod:`coniti.log.replica`)."""

    def before_commit(self, txn: Any) -> None:
        """Called with each write transaction once its work is done, before it commits: publish
        what it appended (raise :class:`Replan` to have it rerun after a catch-up; anything else
        raised aborts it)."""

    def catch_up(self, txn: Any) -> bool:
        """Fold, in ``txn``, the next part of what the log of record holds beyond the store;
        whether more remains."""
