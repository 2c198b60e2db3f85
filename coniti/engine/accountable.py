"""The engine's accountable undo and replay (a mixin of :class:`~coniti.engine.ContinuityEngine`):
:meth:`Accountable.revert` appends the compensating writes that bring a namespace back to an
earlier point (:mod:`coniti.revert`), :meth:`Accountable.replay` replays a recall receipt
(:mod:`coniti.receipts`). Both need a log memory (time travel, an event feed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from coniti.engine.guard import writing
from coniti.memory import WriteResult, as_namespace

if TYPE_CHECKING:
    from coniti.actor import Query
    from coniti.engine.engine import ContinuityEngine
    from coniti.engine.results import Answer

__all__ = ["Accountable"]


class _Engine(Protocol):
    """What the mixin needs of the engine."""

    @property
    def memory(self) -> Any: ...

    @property
    def _indexes(self) -> Any: ...

    def at(self, seq: int | None = None) -> Any: ...


class Accountable:
    """``revert`` and ``replay``; the engine gives ``memory``, ``_indexes`` and ``at`` (and is the
    engine whose writes :func:`~coniti.engine.guard.writing` guards)."""

    def revert(self: _Engine, *, to: int, namespace: Sequence[str] = (), reason: str) -> WriteResult | None:
        """Make the records of ``namespace`` now what they were right after event ``to``, by
        appending the compensating writes (:mod:`coniti.revert`: deletes and puts of the old
        content, one atomic write stamped with ``reason``; history untouched, metadata keys kept).
        Returns the write's result (None when nothing differed). Raises :class:`ContractError` for
        a ``to`` past the head or an empty reason, and then writes nothing. Needs a log memory."""
        from coniti.revert import revert

        ns = as_namespace(namespace)
        with writing(cast("ContinuityEngine", self)):
            result = revert(self.memory, to, ns, reason)
            self._indexes.refresh()
            return result

    def replay(self: _Engine, receipt: int, query: Query | str | None = None) -> tuple[Answer, bool]:
        """Ask the query of recall receipt ``receipt`` (the seq of its event; ``query``, with the
        receipt's digest, when it kept only that) of memory as it was at the receipt's point
        (:meth:`at`): ``(answer, whether its hits are the receipt's, scores bit for bit)``. Raises
        :class:`ContractError` for an event that is not a receipt or a query of another digest."""
        from coniti.receipts import read_receipt

        kept = read_receipt(self.memory, receipt)
        asked = kept.query_for(query)
        past = self.at(kept.point)
        found: Answer = past.ask(asked, namespace=kept.namespace, prefix=kept.prefix)
        return found, kept.matches(found.hits)


