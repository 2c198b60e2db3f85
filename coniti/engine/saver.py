"""The engine's background saver (:class:`Saver`): snapshots written by the writer, off the call path.

After each of an engine's write calls, :meth:`Saver.wrote` looks at the namespaces it has loaded;
when one's snapshot lags by :data:`SAVE_LAG` events or more, a daemon thread waits until the engine
has had no write call for :data:`IDLE` seconds, then, holding the engine's lock, folds what other
handles wrote (an erasure among it drops the erased rows first) and saves each lagging namespace.
A bulk ingest therefore saves nothing while it runs; a process that stays open (a server) gets its
snapshots written in its pauses. A call made while a save runs waits for it (about a second per
100,000 rows here). The thread ends when nothing is due, and at :meth:`Saver.stop` (the engine's
``close``), which does not wait for it: a save cut short by the process's exit leaves the previous
snapshot (``coniti.derived`` writes atomically). A failed save is ignored: derived state is
optional, and the next open folds the events instead. Reads never start it.
"""

from __future__ import annotations

import contextlib
import threading
import time

from coniti.engine.content import ContentIndex
from coniti.engine.fold import FoldedIndexes
from coniti.engine.index import NamespaceIndex
from coniti.keyword import KeywordIndex

__all__ = ["IDLE", "RELEASE_ROWS", "SAVE_LAG", "Saver", "release"]

SAVE_LAG = 1_000
"""Events a namespace's snapshot may lag by before the saver (or ``coniti`` writer commands at their
end) writes it again: a lag is folded at every open until then (about 75 µs of CPU an event here,
with ``local_hash``'s 256-dimensional vectors)."""

IDLE = 2.0
"""Seconds without a write call after which the saver writes what is due."""

RELEASE_ROWS = 10_000
"""Rows from which :func:`release` frees dropped indexes on a thread of its own."""


def release(dropped: list[NamespaceIndex]) -> None:
    """Free ``dropped`` indexes (the engine's ``close``): at once when they hold fewer than
    :data:`RELEASE_ROWS` rows, else on a daemon thread, one part at a time, so that ``close`` does
    not wait for it (freeing the arrays and objects of 100,000 rows took 30-70 ms here). The caller
    holds no other reference to them."""
    if sum(len(index.structures[0]) for index in dropped) < RELEASE_ROWS:
        dropped.clear()
        return
    threading.Thread(target=_free, args=(dropped,), name="coniti-release", daemon=True).start()


def _free(dropped: list[NamespaceIndex]) -> None:
    """Drop ``dropped`` part by part, letting other threads run in between (``sleep(0)``; the
    first lets ``close`` return before anything is freed)."""
    time.sleep(0)
    while dropped:
        index = dropped.pop()
        while index.structures:
            index.structures.pop()
            time.sleep(0)
        index.content = ContentIndex()
        time.sleep(0)
        index.keyword = KeywordIndex()
        del index
        time.sleep(0)


class Saver:
    """Saves the lagging snapshots of ``indexes`` in the background (see the module docstring);
    ``lock``: the engine's lock, held while it saves. ``lag`` and ``idle``: :data:`SAVE_LAG` and
    :data:`IDLE` (read when the saver is made) unless given."""

    def __init__(
        self,
        indexes: FoldedIndexes,
        lock: threading.RLock,
        *,
        lag: int | None = None,
        idle: float | None = None,
    ) -> None:
        self._indexes = indexes
        self._lock = lock
        self.lag = SAVE_LAG if lag is None else lag
        self.idle = IDLE if idle is None else idle
        self._wake = threading.Condition(threading.Lock())
        self._last = 0.0
        self._stopped = False
        self._thread: threading.Thread | None = None

    def wrote(self) -> None:
        """After a write call, under the engine's lock: restart the idle clock, and start the thread
        when a namespace is due."""
        if not self._indexes.due(self.lag):
            return
        with self._wake:
            self._last = time.monotonic()
            if self._stopped or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(target=self._run, name="coniti-saver", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """No save starts after this (one under way finishes its namespace)."""
        with self._wake:
            self._stopped = True
            self._wake.notify_all()

    @property
    def running(self) -> bool:
        """Whether the thread is alive (waiting or saving)."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _idle_for(self) -> float:
        """Seconds left before the engine counts as idle (the caller holds ``_wake``)."""
        return self._last + self.idle - time.monotonic()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._stopped and (left := self._idle_for()) > 0:
                    self._wake.wait(left)
                if self._stopped:
                    return
            with self._lock:  # no write call runs now
                with self._wake:
                    if self._stopped:
                        return
                    if self._idle_for() > 0:  # a write came in while the lock was awaited
                        continue
                self._save()
                return

    def _save(self) -> None:
        """Save every namespace due (under the engine's lock), after a refresh."""
        with contextlib.suppress(Exception):  # derived state is optional; memory is intact
            self._indexes.refresh()
            for ns in self._indexes.due(self.lag):
                if self._stopped:
                    return
                self._indexes.save(ns)
