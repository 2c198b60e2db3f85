"""Revert a namespace to an earlier point: the compensating writes that make its records now equal
its records at that point (``ContinuityEngine.revert``, ``coniti revert``). History is untouched:
the revert is new events (deletes, and puts of the old versions' content) in one atomic write.

Records only: metadata keys keep their current values (the engine's own keys, such as the
embedder's, among them). A record whose content was erased since is not brought back (erasure
removed it from every point). Needs a backend with time travel (``at``) and ``write``.
"""

from __future__ import annotations

from typing import Any

from coniti.errors import ContractError
from coniti.memory import DeleteOp, MemoryBackend, MemoryRecord, UpsertOp, WriteRequest, WriteResult

__all__ = ["revert", "revert_request"]


def revert_request(memory: Any, to: int, namespace: tuple[str, ...]) -> WriteRequest | None:
    """The write that makes the records of ``namespace`` in ``memory`` now what they were right
    after event ``to``: a delete of each record live now but not then, an upsert of the content it
    had then for each record changed or gone since (in id order); None when nothing differs.
    Raises :class:`ContractError` for a ``to`` that is not a seq between 0 and the head."""
    head = memory.head
    if not isinstance(to, int) or isinstance(to, bool) or not 0 <= to <= head:
        raise ContractError(f"revert point to must be a seq between 0 and the head ({head}), got {to!r}")
    then: dict[str, MemoryRecord] = {r.id: r for r in memory.at(to).iter_all(namespace=namespace)}
    now: dict[str, MemoryRecord] = {r.id: r for r in memory.iter_all(namespace=namespace)}
    ops: list[UpsertOp | DeleteOp] = []
    for rid in sorted(now.keys() | then.keys()):
        old, new = then.get(rid), now.get(rid)
        if old is None:
            ops.append(DeleteOp(id=rid))
        elif new is None or not new.identical(old):
            record = MemoryRecord.trusted(
                old.note, old.vector, old.embedding_id, namespace, None, old.expires_at, old.blob
            )
            ops.append(UpsertOp(record=record))
    return WriteRequest(namespace=namespace, ops=ops) if ops else None


def revert(memory: MemoryBackend, to: int, namespace: tuple[str, ...], reason: str) -> WriteResult | None:
    """Apply :func:`revert_request` to ``memory`` in one atomic write stamped with ``reason`` (its
    :meth:`audit` block); returns the write's result, None when nothing differed. Raises
    :class:`ContractError` for an empty reason or a ``to`` out of range, and then writes nothing."""
    if not isinstance(reason, str) or not reason.strip():
        raise ContractError("revert needs a reason: it is kept in every event the revert writes")
    request = revert_request(memory, to, namespace)
    if request is None:
        return None
    with memory.audit(reason=reason):  # type: ignore[attr-defined]
        return memory.write(request)
