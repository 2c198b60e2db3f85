"""Keeping memory true, the engine's part: :class:`KeepingTrue`, the methods of
:class:`~coniti.engine.ContinuityEngine` that supersede facts (:mod:`coniti.engine.validity`),
explain lineage (:mod:`coniti.engine.lineage`) and consolidate (:mod:`coniti.engine.consolidate`).
A mixin so that the facade stays within its method bound; each method is a thin call into its
module under the engine's lock and write path."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from coniti.actor import Note
from coniti.engine import consolidate as consolidation
from coniti.engine import lineage, validity
from coniti.engine.guard import writing
from coniti.errors import ContractError
from coniti.memory import WriteRequest, WriteResult, as_namespace

if TYPE_CHECKING:
    from coniti.engine.engine import ContinuityEngine

__all__ = ["KeepingTrue"]


def _note(value: Any) -> Note:
    if isinstance(value, Note):
        return value
    if isinstance(value, str):
        return Note.create(value)
    raise ContractError(f"new_note must be a Note or a string, got {type(value).__name__}")


def _engine(mixed: KeepingTrue) -> ContinuityEngine:
    """The engine this mixin is part of (KeepingTrue is only ever a base of ContinuityEngine)."""
    return cast("ContinuityEngine", mixed)


class KeepingTrue:
    """Supersede, explain, blame, consolidate (see the module docstring)."""

    def supersede(
        self,
        old_id: str,
        new_note: Note | str,
        *,
        reason: str | None = None,
        actor: str | None = None,
        namespace: Sequence[str] = (),
        op_id: str | None = None,
    ) -> WriteResult:
        """End the validity of the live note ``old_id`` and add ``new_note`` in one atomic write:
        the old note's new version gets ``valid_to`` = the new note's ``valid_from`` (or the write's
        time when it has none, which then becomes the new note's ``valid_from``), and the new note
        records ``supersedes:OLD_ID@VERSION`` in its ``derived_from``. ``reason`` and ``actor`` stamp
        the write (a backend with an audit trail; NotSupported otherwise). Raises
        :class:`~coniti.errors.RecordNotFound` for a missing note and ContractError for one already
        superseded; nothing is written then (:func:`coniti.engine.validity.supersede`)."""
        note = _note(new_note)
        ns = as_namespace(namespace)
        with writing(_engine(self)) as writes:
            return validity.supersede(writes, ns, old_id, note, reason=reason, actor=actor, op_id=op_id)

    def explain(self, id: str, *, namespace: Sequence[str] = ()) -> lineage.Explanation:
        """Note ``id``'s versions (who, when, why), sources (recursively), what it superseded, what
        superseded it and the notes derived from it (:func:`coniti.engine.lineage.explain`).
        Writes nothing."""
        ns = as_namespace(namespace)
        with _engine(self)._lock:
            return lineage.explain(_engine(self).memory, id, ns)

    def blame(self, id: str, *, namespace: Sequence[str] = ()) -> str:
        """The one-line form of :meth:`explain` (:func:`coniti.engine.lineage.blame`)."""
        return lineage.blame(self.explain(id, namespace=namespace))

    def consolidate(
        self,
        scope: Sequence[str] | Any = (),
        *,
        max_items: int | None = None,
        summarizer: Any = None,
        extractor: Any = None,
        older_than: float | datetime | None = None,
        prune_sources: bool = False,
        actor: str | None = None,
    ) -> consolidation.ConsolidationReport:
        """Summarise the unsummarised message turns of ``scope`` (a namespace, or a
        :class:`~coniti.conversation.Conversation`), extract facts, prune, in one atomic and
        idempotent write (:func:`coniti.engine.consolidate.consolidate`)."""
        ns = as_namespace(getattr(scope, "namespace", scope))
        return consolidation.consolidate(
            _engine(self), ns, max_items=max_items, summarizer=summarizer, extractor=extractor,
            older_than=older_than, prune_sources=prune_sources, actor=actor,
        )  # fmt: skip

    def consolidate_every(
        self, interval: float, scope: Sequence[str] | Any = (), **options: Any
    ) -> consolidation.Consolidator:
        """:meth:`consolidate` of ``scope`` with ``options`` every ``interval`` seconds on a
        background thread, until the returned :class:`~coniti.engine.consolidate.Consolidator` is
        stopped or this engine closes."""
        worker = consolidation.consolidate_every(interval, lambda: self.consolidate(scope, **options))
        _engine(self).__dict__.setdefault("_consolidators", []).append(worker)
        return worker

    def _write(self, ns: tuple[str, ...], request: WriteRequest) -> WriteResult:
        """One atomic write of ``request`` through the write path (indexes kept in line)."""
        with writing(_engine(self)) as writes:
            writes.require_write()
            return writes._apply(ns, writes.indexes.writable(ns), request)
