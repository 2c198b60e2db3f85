"""Indexes built by one scan of memory (:class:`ScannedIndexes`): the current engine over a backend
without an event feed (InMemoryBackend), an engine over a time-travel view, or structures that keep
no versions. Rows are the live records only; nothing is kept on disk.

After a write the touched ids are read back from memory (a put adds its rows directly). With an
event feed, :meth:`ScannedIndexes.refresh` reads only the events after the last sequence number seen
and re-reads the records they touch (a ``clear`` rescans its namespace); without one, it rescans
every loaded namespace.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from coniti.engine.index import FOLD_BATCH, NamespaceIndex, Recipe, with_vectors
from coniti.engine.indexes import CurrentIndexes, PutRows, Wrote
from coniti.engine.results import EMBEDDING_KEY
from coniti.memory import EventFeed, GetRequest, MemoryBackend, MemoryRecord

__all__ = ["ScannedIndexes", "scan_build"]


def scan_build(memory: MemoryBackend, recipe: Recipe, ns: tuple[str, ...], head: int | None) -> NamespaceIndex:
    """A fresh index of ``ns`` filled by one scan of ``memory``, tagged with ``head``."""
    index = recipe.spawn(seq=head)
    for chunk in _chunks(memory.iter_all(namespace=ns, page_size=1000), FOLD_BATCH):
        recipe.check_records(ns, chunk)
        records = with_vectors(chunk)
        if records:
            recipe.check_dim(ns, max(r.vector.shape[0] for r in records if r.vector is not None))
            index.add_records(records, recipe.content_keys([r.note for r in records]))
    return index


class ScannedIndexes(CurrentIndexes):
    """Indexes of ``memory`` built by scan (see the module docstring); ``feed``: its event feed, if
    it declares one."""

    def __init__(self, memory: MemoryBackend, recipe: Recipe, feed: EventFeed | None) -> None:
        super().__init__(memory, recipe)
        self.feed = feed

    def load(self, ns: tuple[str, ...]) -> NamespaceIndex:
        return scan_build(self.memory, self.recipe, ns, self.head())

    def refresh(self) -> int:
        """With an event feed, the records touched by the events after the oldest loaded
        namespace's seq are read again; without one, every loaded namespace is rescanned (0)."""
        if self.feed is None:
            for ns in self.namespaces:
                self.reload(ns)
            return 0
        return self._catch_up(self.feed)

    def _catch_up(self, feed: EventFeed) -> int:
        loaded = dict(self.loaded())
        if not loaded:
            return 0
        head = feed.head
        after = min(index.seq or 0 for index in loaded.values())
        if after >= head:
            return 0
        touched: dict[tuple[str, ...], set[str]] = {}
        cleared: set[tuple[str, ...]] = set()
        count = 0
        for event in feed.events(after=after):
            count += 1
            ns = tuple(event.namespace)
            index = loaded.get(ns)
            if index is None or event.seq <= (index.seq or 0):
                continue
            if event.kind == "feedback":  # changes no record; hybrid reads the weights at ask
                pass
            elif event.kind == "clear":
                cleared.add(ns)
            elif event.kind == "meta":
                if event.key == EMBEDDING_KEY and event.value is not None:
                    self.recipe.refuse_mismatch(event.value, ns)
            elif event.id is not None:
                touched.setdefault(ns, set()).add(event.id)
            head = max(head, int(event.seq))
        for ns in cleared:
            self.reload(ns)
        for ns, ids in touched.items():
            if ns not in cleared:
                self.reconcile(ns, loaded[ns], sorted(ids))
        for _, index in self.loaded():
            index.seq = max(index.seq or 0, head)
        return count

    def reconcile(self, ns: tuple[str, ...], index: NamespaceIndex, ids: Sequence[str]) -> None:
        """Make the index agree with memory for ``ids`` (read back)."""
        try:
            found = self.memory.get(GetRequest(ids=list(ids), namespace=ns)).records
            index.forget(ids, self.head() or index.keyword.seq)
            self.recipe.check_records(ns, found)
            records = with_vectors(found)
            index.add_records(records, self.recipe.content_keys([r.note for r in records]))
        except BaseException:
            self.recover(ns)
            raise

    # -- writes -----------------------------------------------------------------------------------

    def put(self, ns: tuple[str, ...], index: NamespaceIndex, rows: PutRows, wrote: Wrote) -> None:
        """Add the rows' text (born at the head), and skip the write's own events on the next
        refresh when nobody else wrote."""
        rows.add_to(index, [self.head() or 0] * len(rows.ids))
        self.advance(index, wrote)

    def deleted(self, ns: tuple[str, ...], index: NamespaceIndex, ids: Sequence[str], wrote: Wrote) -> None:
        """Take ``ids`` out of the index."""
        try:
            index.forget(ids, self.head() or index.keyword.seq)
        except BaseException:
            self.recover(ns)
            raise
        self.advance(index, wrote)

    def written(self, ns: tuple[str, ...], index: NamespaceIndex, ids: Sequence[str], wrote: Wrote) -> None:
        """Read ``ids`` back from memory."""
        self.reconcile(ns, index, ids)
        self.advance(index, wrote)


def _chunks(records: Iterator[MemoryRecord], size: int) -> Iterator[list[MemoryRecord]]:
    chunk: list[MemoryRecord] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
