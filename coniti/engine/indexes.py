"""The namespace indexes one engine has loaded, and how they are made and kept in line with memory.

:class:`Indexes` holds the map namespace -> :class:`~coniti.engine.index.NamespaceIndex` and loads a
namespace the first time a call touches it (after checking its ``embedding_id`` metadata). How an
index is made is what sets the three kinds apart:

* :class:`~coniti.engine.fold.FoldedIndexes`: over a backend with an event feed and structures that
  keep versions (LogBackend): a fold of the namespace's events, restored from its snapshot on disk
  and caught up when there is one;
* :class:`~coniti.engine.scan.ScannedIndexes`: one scan of memory, live rows only (InMemoryBackend,
  a time-travel view, or structures that keep no versions);
* :class:`~coniti.engine.past.PastIndexes`: an engine as of a point: the owner's folded rows masked
  by that point's sequence number.

The first two are :class:`CurrentIndexes`: after each write the write path
(:mod:`coniti.engine.writes`) tells them what memory wrote, with the sequence numbers and versions
memory returned (:class:`Wrote`), and they bring the namespace's index in line. No method here ever writes to the store:
saving snapshots is :class:`~coniti.engine.fold.FoldedIndexes`'s ``save``, called by writers only.
Not thread-safe: the engine's lock serialises every call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from coniti.engine.index import NamespaceIndex, Recipe, differences
from coniti.engine.results import EMBEDDING_KEY, DerivedReport, derived_report
from coniti.memory import MemoryBackend, MetaGetRequest, event_feed

__all__ = ["CurrentIndexes", "Indexes", "PutRows", "Wrote"]


class Indexes(ABC):
    """The loaded indexes of one engine over ``memory``, made by ``recipe`` (see the module
    docstring)."""

    def __init__(self, memory: MemoryBackend, recipe: Recipe) -> None:
        self.memory = memory
        self.recipe = recipe
        self._loaded: dict[tuple[str, ...], NamespaceIndex] = {}

    @property
    def namespaces(self) -> list[tuple[str, ...]]:
        """The namespaces loaded so far, sorted."""
        return sorted(self._loaded)

    def loaded(self) -> list[tuple[tuple[str, ...], NamespaceIndex]]:
        """Every loaded namespace with its index."""
        return list(self._loaded.items())

    def get(self, ns: tuple[str, ...]) -> NamespaceIndex:
        """The index of ``ns``, loaded (after its embedding id is checked) on first use."""
        index = self._loaded.get(ns)
        if index is None:
            self.check_meta(ns)
            index = self.load(ns)
            self._loaded[ns] = index
        return index

    def get_many(self, namespaces: Sequence[tuple[str, ...]]) -> list[NamespaceIndex]:
        """The index of each of ``namespaces``, in that order (:meth:`get` of each; a kind that
        can load several at once for less overrides it)."""
        return [self.get(ns) for ns in namespaces]

    def check_meta(self, ns: tuple[str, ...]) -> None:
        """Raise :class:`~coniti.errors.EmbeddingMismatch` when ``ns`` holds another embedding."""
        stored = self.memory.get_meta(MetaGetRequest(key=EMBEDDING_KEY, namespace=ns)).value
        if stored is not None:
            self.recipe.refuse_mismatch(stored, ns)

    def head(self) -> int | None:
        """The backend's last sequence number, if it declares an event feed."""
        feed = event_feed(self.memory)
        return None if feed is None else feed.head

    @abstractmethod
    def load(self, ns: tuple[str, ...]) -> NamespaceIndex:
        """A new index of ``ns`` (its embedding id checked already)."""

    def build(self, ns: tuple[str, ...]) -> NamespaceIndex:
        """A new index of ``ns`` made from memory alone (what a reindex and a recovery use)."""
        return self.load(ns)

    def reload(self, ns: tuple[str, ...]) -> NamespaceIndex:
        """Replace the index of ``ns`` by a new :meth:`build`."""
        self._loaded.pop(ns, None)
        index = self.build(ns)
        self._loaded[ns] = index
        return index

    def recover(self, ns: tuple[str, ...]) -> None:
        """After a failure: :meth:`reload` ``ns``, or, if that fails too, unload it (the next call
        that touches it loads it again). Never raises, so the original error propagates."""
        try:
            self.reload(ns)
        except Exception:
            self._loaded.pop(ns, None)

    def reindex(self, ns: tuple[str, ...]) -> None:
        """Rebuild ``ns`` from memory now (load it when it was not loaded)."""
        if ns in self._loaded:
            self.reload(ns)
        else:
            self.get(ns)

    def checked(self, ns: tuple[str, ...]) -> NamespaceIndex:
        """The index of ``ns`` for a write, a save or a verify (every snapshot block checked)."""
        return self.get(ns)

    def heal(self) -> bool:
        """After :class:`~coniti.derived.StaleSnapshot` from a read: rebuild what failed; True when
        a retry can succeed."""
        return False

    @abstractmethod
    def refresh(self) -> int:
        """Catch up with writes made through other handles; returns the number of events read."""

    def persist(self, lagging: int = 1) -> int:
        """Save the snapshots that lag by ``lagging`` events or more; returns how many were
        written (none: only folded indexes are kept on disk)."""
        return 0

    def verify(self, ns: tuple[str, ...]) -> DerivedReport:
        """Compare the index of ``ns`` with a fresh :meth:`build` (after a :meth:`refresh`)."""
        self.refresh()
        index = self.checked(ns)
        problems = [f"loaded: {p}" for p in differences(index, self.build(ns))]
        return report(ns, index, problems, "none")

    def clear(self) -> list[NamespaceIndex]:
        """Drop every loaded index; returns them (to be released by the caller)."""
        dropped = list(self._loaded.values())
        self._loaded.clear()
        return dropped


def report(ns: tuple[str, ...], index: NamespaceIndex, problems: list[str], status: str) -> DerivedReport:
    return derived_report({
        "namespace": ns, "seq": index.seq, "rows": len(index.structures[0]), "ok": not problems,
        "snapshot": status, "problems": problems,
    })  # fmt: skip


@dataclass(frozen=True)
class PutRows:
    """What a put of records added to a namespace, and its parts still to add once memory said
    which events wrote it: ``ids`` (the records that have a vector; rows were added for them,
    ``rows`` False when none), ``positions`` (each one's place among the records written),
    ``texts``, ``times``, ``keys`` (content keys), ``tokens`` (keyword tokens, None: made from the
    texts), ``expires`` and ``threads`` (conversation threads, None: none)."""

    ids: Sequence[str]
    positions: Sequence[int]
    texts: Sequence[str]
    times: np.ndarray
    keys: Sequence[str | None]
    rows: bool
    tokens: Sequence[Sequence[str]] | None = None
    expires: Sequence[float | None] | None = None
    threads: Sequence[str | None] | None = None

    def add_to(self, index: NamespaceIndex, born: Sequence[int]) -> None:
        """Add the put's parts still to add to ``index``: the rows' text and tokens, born at
        ``born`` (one per id), or only the content keys of a put whose records have no vector."""
        if self.rows:
            index.add_text(
                self.ids, self.texts, self.times, born, self.keys, expires=self.expires,
                tokens=self.tokens, threads=self.threads,
            )  # fmt: skip
        else:
            index.content.add(self.ids, self.keys)


@dataclass(frozen=True)
class Wrote:
    """What memory says a write did, from its result: ``seqs``, the sequence numbers of its
    changes in order (its events, over an event feed), made after ``apart`` events of the writer's
    own just before them (a namespace claim set on its own); for a put, ``versions``, the version
    each record received, in the order written (over an event feed, its put event's seq)."""

    seqs: Sequence[int]
    apart: int = 0
    versions: Sequence[int] = ()

    def follows(self, seq: int | None) -> bool:
        """Whether the write's events (its ``apart`` ones first) come right after event ``seq``:
        nobody else wrote in between. False without events, or when ``seq`` is unknown."""
        seqs = self.seqs
        if seq is None or not seqs:
            return False
        return seqs[0] == seq + self.apart + 1 and seqs[-1] == seqs[0] + len(seqs) - 1


class CurrentIndexes(Indexes):
    """Indexes of current memory, which writes change: after each write the write path calls one
    of :meth:`put`, :meth:`deleted`, :meth:`written` or :meth:`advance` with what memory said it
    wrote (:class:`Wrote`)."""

    def writable(self, ns: tuple[str, ...]) -> NamespaceIndex:
        """The index of ``ns`` for a write, caught up with what others wrote to it."""
        return self.checked(ns)

    @abstractmethod
    def put(self, ns: tuple[str, ...], index: NamespaceIndex, rows: PutRows, wrote: Wrote) -> None:
        """After memory wrote ``rows`` (their structure rows added before, not stamped yet):
        complete the index."""

    @abstractmethod
    def deleted(self, ns: tuple[str, ...], index: NamespaceIndex, ids: Sequence[str], wrote: Wrote) -> None:
        """After memory deleted ``ids`` (one change each, in order)."""

    @abstractmethod
    def written(self, ns: tuple[str, ...], index: NamespaceIndex, ids: Sequence[str], wrote: Wrote) -> None:
        """After a :meth:`~coniti.memory.MemoryBackend.write` that named ``ids``."""

    def advance(self, index: NamespaceIndex, wrote: Wrote) -> None:
        """After a write that changed no row: the index skips its events on the next refresh when
        they follow the index's seq (nobody else wrote in between); otherwise a refresh reads them
        again, which is harmless."""
        if wrote.follows(index.seq):
            index.seq = index.keyword.seq = wrote.seqs[-1]
