"""Indexes folded from an event feed (:class:`FoldedIndexes`): the current engine over a backend
that declares ``supports_event_feed`` (LogBackend), with structures that keep their rows' versions.

Every row knows the sequence numbers between which it was live, so an engine as of a point masks
the same rows (:mod:`coniti.engine.past`). A namespace is loaded from its snapshot on disk when
there is a usable one (:mod:`coniti.engine.snapshots`), caught up with the events written after it;
else it is a fold of every event of the namespace (none read when the feed says nothing was ever
written to it: :meth:`~coniti.memory.EventFeed.written`). Loading never writes: a snapshot is written by
:meth:`FoldedIndexes.save`, which only writers call (``persist``, ``reindex``, the engine's
background saver), never on a read-only store. A snapshot that fails a check on first touch makes
the namespace rebuilt from its events.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from coniti import derived
from coniti.engine.index import Folder, NamespaceIndex, Recipe, differences
from coniti.engine.indexes import CurrentIndexes, PutRows, Wrote, report
from coniti.engine.results import EMBEDDING_KEY, DerivedReport
from coniti.engine.snapshots import Snapshots
from coniti.memory import EventFeed, MemoryBackend

__all__ = ["FoldedIndexes"]


class FoldedIndexes(CurrentIndexes):
    """Indexes of ``memory`` (whose event feed is ``feed``) folded from its events; kept on disk by
    ``snapshots`` when given (see the module docstring)."""

    def __init__(
        self, memory: MemoryBackend, feed: EventFeed, recipe: Recipe, snapshots: Snapshots | None
    ) -> None:
        super().__init__(memory, recipe)
        self.feed = feed
        self.snapshots = snapshots

    # -- loading ----------------------------------------------------------------------------------

    def load(self, ns: tuple[str, ...]) -> NamespaceIndex:
        """The snapshot of ``ns`` restored and caught up, else a fold of every event of ``ns``."""
        index = self._restored(ns)
        if index is not None:
            with contextlib.suppress(derived.StaleSnapshot):  # a block failed: rebuilt below
                self._fold_into(ns, index)
                return index
        return self.build(ns)

    def _restored(self, ns: tuple[str, ...]) -> NamespaceIndex | None:
        """The index the snapshot of ``ns`` holds, not caught up; None without a usable one."""
        if self.snapshots is None:
            return None
        try:
            loaded = self.snapshots.load(ns, self.feed.head, deferred=True)
        except derived.StaleSnapshot:
            return None
        return self.snapshots.restore(loaded)

    def get_many(self, namespaces: Sequence[tuple[str, ...]]) -> list[NamespaceIndex]:
        """The index of each of ``namespaces``, as :meth:`get` gives it; those not loaded yet whose
        snapshots restore are caught up together, in one pass over the events after the oldest of
        their snapshots (each event read and its hash chained once, not once per namespace: at a
        reopen, the first ask over every namespace). That pass reads the events of the other
        namespaces in its range too (skipped, as a pass per namespace skips them). If a snapshot
        block fails during it, each of those namespaces is loaded alone (:meth:`load`: restored
        again, or rebuilt from its events)."""
        missing = [ns for ns in dict.fromkeys(namespaces) if ns not in self._loaded]
        if len(missing) > 1 and self.snapshots is not None:
            for ns in missing:
                self.check_meta(ns)
            restored: dict[tuple[str, ...], NamespaceIndex] = {}
            for ns in missing:
                index = self._restored(ns)
                if index is None:
                    self._loaded[ns] = self.build(ns)
                else:
                    restored[ns] = index
            if self._catch_up(restored):
                self._loaded.update(restored)
            else:
                for ns in restored:
                    self._loaded[ns] = self.load(ns)
        return [self.get(ns) for ns in namespaces]

    def _catch_up(self, restored: dict[tuple[str, ...], NamespaceIndex]) -> bool:
        """Fold into each of the ``restored`` indexes (not registered yet) the events of its
        namespace after its seq, in one pass; False when a snapshot block failed meanwhile (the
        indexes must then not be used)."""
        if not restored:
            return True
        head = self.feed.head
        after = min(index.seq or 0 for index in restored.values())
        folders = {ns: Folder(self.recipe, ns, index, EMBEDDING_KEY) for ns, index in restored.items()}
        try:
            self._pass(folders, after, head)
        except derived.StaleSnapshot:
            return False
        for index in restored.values():
            index.seq = index.keyword.seq = max(index.seq or 0, head)
        return True

    def _pass(self, folders: dict[tuple[str, ...], Folder], after: int, head: int) -> int:
        """Fold the events ``after < seq <= head`` into the folder of their namespace, each event
        after that folder's index's seq, in one read of the feed, then flush every folder; returns
        the number of events read."""
        count = 0
        for event in self.feed.events(after=after, until=head):
            count += 1
            folder = folders.get(tuple(event.namespace))
            if folder is not None and event.seq > (folder.index.seq or 0):
                folder.event(event)
                folder.index.changed += 1
        for folder in folders.values():
            folder.flush()
        return count

    def build(self, ns: tuple[str, ...], until: int | None = None) -> NamespaceIndex:
        """A fold of every event of ``ns`` (up to event ``until``; None: the head) into a fresh
        index."""
        index = self.recipe.spawn(seq=0)
        head = self.feed.head if until is None else until
        if self.feed.written(ns):  # asked after the head: no event up to it was written to ns
            self._fold_into(ns, index, head)
        else:  # nothing to fold (the first write to a new namespace): no event read
            index.seq = index.keyword.seq = head
        index.changed = max(index.changed, 1)  # nothing on disk reflects it yet
        return index

    def at_least(self, ns: tuple[str, ...], seq: int) -> NamespaceIndex:
        """The index of ``ns`` with every event up to ``seq`` folded in (for a view as of ``seq``)."""
        index = self.get(ns)
        if (index.seq or 0) < seq:
            self.fold(ns, index)
            index = self.get(ns)
        return index

    # -- folding ----------------------------------------------------------------------------------

    def _fold_into(self, ns: tuple[str, ...], index: NamespaceIndex, until: int | None = None) -> int:
        """Fold the events of ``ns`` after ``index.seq`` up to event ``until`` (None: the head);
        returns how many."""
        head = self.feed.head if until is None else until
        folder = Folder(self.recipe, ns, index, EMBEDDING_KEY)
        count = 0
        for event in self.feed.events(after=index.seq or 0, until=head, namespace=ns):
            folder.event(event)
            count += 1
        folder.flush()
        index.seq = index.keyword.seq = max(index.seq or 0, head)
        index.changed += count
        return count

    def fold(self, ns: tuple[str, ...], index: NamespaceIndex, until: int | None = None) -> int:
        """:meth:`_fold_into` a loaded index; on failure ``ns`` is rebuilt (or unloaded) and the
        error raised."""
        try:
            return self._fold_into(ns, index, until)
        except BaseException:
            self.recover(ns)
            raise

    def refresh(self) -> int:
        """Fold, in one pass, the events after the oldest loaded namespace's seq into every loaded
        namespace; returns the number of events read."""
        try:
            return self._fold_all()
        except derived.StaleSnapshot:  # a fold touched a failed block: rebuilt (recover)
            return 0

    def _fold_all(self) -> int:
        loaded = self.loaded()
        if not loaded:
            return 0
        head = self.feed.head
        after = min(index.seq or 0 for _, index in loaded)
        if after >= head:
            return 0
        folders = {ns: Folder(self.recipe, ns, index, EMBEDDING_KEY) for ns, index in loaded}
        try:
            count = self._pass(folders, after, head)
        except BaseException:
            for ns in folders:
                self.recover(ns)
            raise
        for _, index in loaded:
            index.seq = index.keyword.seq = max(index.seq or 0, head)
        return count

    # -- writes -----------------------------------------------------------------------------------

    def writable(self, ns: tuple[str, ...]) -> NamespaceIndex:
        """The index of ``ns`` with every snapshot block checked and what others wrote to it
        folded in, so that the write's own events follow its rows' seq."""
        index = self.checked(ns)
        if (index.seq or 0) < self.feed.head:
            self.fold(ns, index)
            index = self.get(ns)
        return index

    def put(self, ns: tuple[str, ...], index: NamespaceIndex, rows: PutRows, wrote: Wrote) -> None:
        """Stamp the rows with the versions the put returned and add their text, when its events
        directly follow the index's seq; else (another writer's events in between, or versions
        missing) take the rows out again and fold the namespace's events."""
        versions = wrote.versions
        try:
            if not wrote.follows(index.seq) or (rows.positions and len(versions) <= max(rows.positions)):
                index.take_rows(rows.ids)
                self.fold(ns, index)
                return
            born = [versions[p] for p in rows.positions]
            if rows.rows:
                index.set_born(rows.ids, born)
            rows.add_to(index, born)
        except BaseException:
            self.recover(ns)
            raise
        self._moved(index, wrote)

    def deleted(self, ns: tuple[str, ...], index: NamespaceIndex, ids: Sequence[str], wrote: Wrote) -> None:
        """End the rows of ``ids`` at the seqs the delete returned, when its events directly
        follow the index's seq; else fold the namespace's events."""
        if not ids:
            return
        if not wrote.follows(index.seq) or len(wrote.seqs) != len(ids):
            self.fold(ns, index)
            return
        try:
            index.end(ids, wrote.seqs)
        except BaseException:
            self.recover(ns)
            raise
        self._moved(index, wrote)

    def _moved(self, index: NamespaceIndex, wrote: Wrote) -> None:
        """The index now reflects the write's events (and its ``apart`` ones before them); so does
        every other loaded index that reflected the event right before them (:meth:`_passed`)."""
        last = wrote.seqs[-1]
        before = wrote.seqs[0] - wrote.apart - 1
        index.changed += last - (index.seq or 0)
        index.seq = last
        self._passed(index, before, last)

    def _passed(self, written: NamespaceIndex, before: int, last: int) -> None:
        """A write's events ``before + 1 .. last`` are all of the namespace of ``written`` (one
        atomic write: nobody else's event among them), so every other loaded index whose ``seq``
        is ``before`` reflects event ``last`` as well, none of its rows changed: its ``seq`` moves
        to ``last``, and the next write to it folds no event (without this, the catch-up before
        that write read every event the other namespaces wrote since; issue 33). O(loaded
        namespaces) per write. A cache kept for one ``seq`` (the filter's metadata column) moves
        with it."""
        for _, index in self.loaded():
            if index is not written and index.seq == before:
                index.seq = index.keyword.seq = last
                column = index.metadata
                if column is not None and getattr(column, "seq", None) == before:
                    column.seq = last  # type: ignore[attr-defined]

    def written(self, ns: tuple[str, ...], index: NamespaceIndex, ids: Sequence[str], wrote: Wrote) -> None:
        """When the write's events directly follow the index's seq and memory reported the records
        they hold (``wrote.changes``, one per event before the op id's receipt): fold those records
        in as their events would be, without reading the events back (issue 33); when it reported
        that nothing was written, nothing (the next catch-up folds what others wrote). Else fold the
        namespace's events (the write's among them). Either way, when the write's events directly
        followed the index's seq, every other loaded index that reflected the event right before
        them moves past them (:meth:`_passed`: without it, the catch-up before the next write to
        each other namespace read every update, upsert or ingest with an op id written since;
        issue 33)."""
        follows = wrote.follows(index.seq)
        changes = wrote.changes
        if changes is not None and not changes and not wrote.seqs:
            return  # memory reported that nothing was written (a replay, or every op unchanged)
        if follows and changes is not None and len(changes) + wrote.receipt == len(wrote.seqs):
            folder = Folder(self.recipe, ns, index, EMBEDDING_KEY)
            try:
                for seq, (id_, record) in zip(wrote.seqs, changes, strict=False):
                    folder.change(seq, id_, record)
                folder.flush()
            except BaseException:
                self.recover(ns)
                raise
            index.keyword.seq = wrote.seqs[-1]
            self._moved(index, wrote)
            return
        self.fold(ns, index)
        if follows:
            self._passed(index, wrote.seqs[0] - wrote.apart - 1, wrote.seqs[-1])

    # -- snapshots --------------------------------------------------------------------------------

    def checked(self, ns: tuple[str, ...]) -> NamespaceIndex:
        """The index of ``ns`` with every block of its snapshot checked (before a write, a save or
        a verify): one that fails rebuilds ``ns`` from the events, as a load that found it would."""
        index = self.get(ns)
        try:
            index.check_blocks()
        except derived.StaleSnapshot:
            return self.reload(ns)
        return index

    def heal(self) -> bool:
        """Rebuild the namespaces whose snapshot blocks failed their check; True when there were."""
        damaged = [ns for ns, index in self.loaded() if index.damaged]
        for ns in damaged:
            self.reload(ns)
        return bool(damaged)

    def save(self, ns: tuple[str, ...]) -> bool:
        """Write the snapshot of ``ns`` (loaded); False when this engine keeps none or its memory
        is read-only. Raises what the file system raises."""
        if self.snapshots is None or self.memory.read_only:
            return False
        self.snapshots.save(ns, self.checked(ns))
        return True

    def due(self, least: int) -> list[tuple[str, ...]]:
        """The loaded namespaces whose snapshot lags by at least ``least`` events."""
        return [ns for ns, index in self.loaded() if index.changed >= least]

    def persist(self, lagging: int = 1) -> int:
        """After a :meth:`refresh`, save every loaded namespace whose snapshot lags by ``lagging``
        events or more; returns how many were written."""
        if self.snapshots is None or self.memory.read_only:
            return 0
        self.refresh()
        return sum(self.save(ns) for ns in self.due(lagging))

    def reindex(self, ns: tuple[str, ...]) -> None:
        """Rebuild ``ns`` by a fold of every event and rewrite its snapshot (not on a read-only
        store; a failure to write it is ignored: the next open rebuilds)."""
        self._loaded.pop(ns, None)
        self.check_meta(ns)
        self.reload(ns)
        with contextlib.suppress(OSError):
            self.save(ns)

    def verify(self, ns: tuple[str, ...]) -> DerivedReport:
        """Compare the loaded index of ``ns``, and its snapshot restored and caught up, with a fold
        of every event (after a :meth:`refresh`), the three at one event: the loaded rows' after
        the refresh, or the snapshot's if another writer saved a later one meanwhile (the loaded
        rows are caught up to it). Reads only."""
        self.refresh()
        index = self.checked(ns)
        status = "none"
        loaded: derived.Loaded | None = None
        if self.snapshots is not None:
            try:
                loaded = self.snapshots.load(ns, self.feed.head)
            except derived.StaleSnapshot as exc:
                status = str(exc)
        at = max(index.seq or 0, 0 if loaded is None else loaded.seq)
        if (index.seq or 0) < at:  # other writers may append meanwhile: fold no further than one event
            self.fold(ns, index, at)
            index = self.get(ns)
        fresh = self.build(ns, at)
        problems = [f"loaded: {p}" for p in differences(index, fresh)]
        if loaded is not None:
            restored = self.snapshots.restore(loaded) if self.snapshots is not None else None
            if restored is None:
                status = "refused: its arrays do not fit"
                problems.append("snapshot: its arrays do not fit")
            else:
                self._fold_into(ns, restored, index.seq)
                status = "current"
                problems += [f"snapshot: {p}" for p in differences(restored, fresh)]
        return report(ns, index, problems, status)
