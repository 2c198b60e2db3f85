"""Valid time: superseding a fact, and which notes a recall shows at a moment of the world.

A note holds in the world over ``[valid_from, valid_to)`` (:attr:`~coniti.actor.Note.valid_from`,
an unset side unbounded); the log records separately when coniti learned it (its seq), so
``engine.at(seq).ask(..., valid_at=t)`` answers "what did we believe then about what was true at
``t``".

:func:`supersede` ends a live fact and adds its successor in one atomic write (a
:class:`~coniti.memory.WriteRequest` of two upserts, compare-and-set on the old note's version):
the old note's new version has ``valid_to`` set, the new note starts then and names the old one in
its ``derived_from`` as ``supersedes:ID@VERSION`` (:mod:`coniti.engine.lineage`).

:func:`gone` says which notes a recall leaves out: by default those whose validity ended by now
(``valid_to <= now``); with ``valid_at=t`` those not valid at ``t``. The engine filters the hits
of a ranking and, when some were left out and the ranking was full, asks again four times as deep
(:meth:`ContinuityEngine.ask <coniti.engine.ContinuityEngine.ask>`): no scan, and no cost when no
hit has a valid time. Reads never write.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from coniti.actor import Note, to_stored_time
from coniti.errors import ContractError, RecordNotFound, namespace_text
from coniti.memory import (
    GetRequest,
    MemoryRecord,
    UpsertOp,
    WriteRequest,
    WriteResult,
    audited,
)
from coniti.recall import Hit

if TYPE_CHECKING:
    from coniti.engine.writes import Writes

__all__ = ["SUPERSEDES", "gone", "marked", "moment_of", "supersede"]

SUPERSEDES = "supersedes:"
"""The prefix of the source reference a superseding note carries: ``supersedes:ID@VERSION``."""



def moment_of(value: Any, field: str = "valid_at") -> float:
    """``value`` (epoch seconds or an aware datetime) as epoch seconds; ContractError naming
    ``field`` otherwise."""
    try:
        return to_stored_time(value, field)
    except ValueError as exc:
        raise ContractError(str(exc)) from None


def supersede(
    writes: Writes,
    ns: tuple[str, ...],
    old_id: str,
    new: Note,
    *,
    reason: str | None,
    actor: str | None,
    op_id: str | None,
) -> WriteResult:
    """End the validity of live note ``old_id`` of ``ns`` and add ``new``, in one write (see the
    module docstring). Raises :class:`~coniti.errors.RecordNotFound` when ``old_id`` is not live,
    ContractError when it is already superseded (its ``valid_to`` is set), when ``new`` has the
    old note's id or is already stored, or when the new validity would start before the old one;
    nothing is written then."""
    writes.require_write()
    if new.id == old_id:
        raise ContractError(f"the new note has the id of the note it supersedes ({old_id!r}); nothing written")
    got = writes.memory.get(GetRequest(ids=[old_id, new.id], namespace=ns)).records
    live = {r.id: r for r in got}
    old = live.get(old_id)
    if old is None:
        raise RecordNotFound(f"no live note {old_id!r} in namespace {namespace_text(ns)} to supersede; nothing written")
    if new.id in live:
        raise ContractError(f"note id {new.id!r} is already stored in namespace {namespace_text(ns)}; nothing written")
    if old.note.valid_to is not None:
        raise ContractError(
            f"note {old_id!r} is already superseded (valid_to {old.note.valid_to!r}); nothing written"
        )
    end = time.time() if new.valid_from is None else new.valid_from
    if old.note.valid_from is not None and end < old.note.valid_from:
        raise ContractError(
            f"valid_from of the new note ({end!r}) is before valid_from of {old_id!r} "
            f"({old.note.valid_from!r}); nothing written"
        )
    if new.valid_to is not None and new.valid_to < end:
        raise ContractError(f"valid_to of the new note is before its valid_from ({end!r}); nothing written")
    link = f"{SUPERSEDES}{old_id}@{old.version}"
    ended = old.note.model_copy(update={"valid_to": end})
    started = new.model_copy(
        update={"valid_from": end, "derived_from": (*[r for r in new.derived_from if r != link], link)}
    )
    spec = writes.recipe.spec_id
    vector = old.vector if old.embedding_id == spec else writes.embedder.embed([old.note.text])[0].copy()
    records = [
        MemoryRecord.trusted(ended, None if vector is None else vector.copy(), spec, ns, None, old.expires_at),
        MemoryRecord.trusted(started, writes.embedder.embed([new.text])[0].copy(), spec, ns),
    ]
    request = WriteRequest(
        ops=[UpsertOp(record=r) for r in records],
        namespace=ns,
        expect={old_id: old.version, new.id: None},
        op_id=op_id,
    )
    with audited(writes.memory, actor, reason):
        return writes._apply(ns, writes.indexes.writable(ns), request)


def gone(note: Note, valid_at: float | None, now: float) -> bool:
    """Whether a recall leaves ``note`` out: not valid at ``valid_at``, or (None) its validity
    ended by ``now``."""
    if valid_at is None:
        return note.valid_to is not None and note.valid_to <= now
    return not note.valid_at(valid_at)


def marked(hits: Sequence[Hit], valid_at: float | None, now: float, *, keep: bool) -> list[Hit]:
    """``hits`` without those :func:`gone` leaves out or (``keep``) with them marked ``superseded``."""
    if not keep:
        return [h for h in hits if not gone(h.note, valid_at, now)]
    return [h.model_copy(update={"superseded": True}) if gone(h.note, valid_at, now) else h for h in hits]
