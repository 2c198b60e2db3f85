"""The engine as of a point (:class:`PastIndexes`): what :meth:`ContinuityEngine.at
<coniti.engine.ContinuityEngine.at>` answers from over a backend with versioned rows.

A past engine reads memory through the backend's time-travel view and answers from its owner's
folded rows masked by the view's sequence number: no rebuild, and it stays valid while the owner
goes on writing (rows written after the point are never visible in it). It is handed what it needs
when it is made: the view, the owner's :class:`~coniti.engine.fold.FoldedIndexes` (whose rows it
masks, folding them up to the point first when they lag) and the time the point's event was
recorded (expiry is judged at that time). It writes nothing, ever.
"""

from __future__ import annotations

from coniti.engine.fold import FoldedIndexes
from coniti.engine.index import NamespaceIndex
from coniti.engine.indexes import Indexes
from coniti.memory import EventFeed, MemoryBackend

__all__ = ["PastIndexes", "recorded_at"]


def recorded_at(feed: EventFeed, seq: int) -> float:
    """When event ``seq`` was recorded (0.0 for 0, before the first event)."""
    if seq <= 0:
        return 0.0
    return next(iter(feed.events(after=seq - 1, until=seq))).at


class PastIndexes(Indexes):
    """The indexes of ``view`` (memory as of event ``seq``, recorded at ``clock``): the rows of
    ``owner`` masked by ``seq``."""

    def __init__(self, view: MemoryBackend, owner: FoldedIndexes, seq: int, clock: float) -> None:
        super().__init__(view, owner.recipe)
        self.owner = owner
        self.seq = seq
        self.clock = clock

    def load(self, ns: tuple[str, ...]) -> NamespaceIndex:
        return self.owner.at_least(ns, self.seq).at(self.seq, self.clock)

    def heal(self) -> bool:
        """Rebuild the owner's namespaces whose snapshot blocks failed, and drop the views of them
        (made again from the owner's rows on next use)."""
        self.owner.heal()
        self.clear()
        return True

    def refresh(self) -> int:
        """A view as of an event never changes: 0."""
        return 0
