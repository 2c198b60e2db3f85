"""Group commit: concurrent write calls on one store handle share one LMDB write transaction and one flush.

A durable LMDB commit costs two flushes (data pages, then the meta page), so one-record writes are
bound by the disk, not by the work. :class:`GroupCommit` merges the write calls that arrive while
another commit is under way: the first caller to reach the front of the queue becomes the *leader*,
takes every call queued behind it (up to :attr:`GroupCommit.max_group`), runs them in one write
transaction and commits once; every *follower* sleeps until its call is settled.

Contracts:

* **Each call is all or nothing on its own.** With more than one call in a group, each call's work
  function runs in its own nested write transaction (``env.begin(write=True, parent=txn)``), in
  arrival order, and sees the calls before it. A call that raises is rolled back alone and gets its
  own exception; the others commit. A group of one runs directly in the transaction.
* **Merging.** Neighbouring calls of a group that offer the same merger
  (``run(fn, merge=(merger, data))``) run through one ``merger(txn, [data, ...])`` in one nested
  transaction instead of one nested transaction each: ``EventLog.put`` checks each call against the
  store and the calls before it and appends the accepted ones together. The merger gives each call
  the outcome ``fn`` would have given and writes nothing for a call it refuses; if it raises, the
  calls run one by one after all.
* **Acknowledged after the flush.** No call returns before the group's transaction has committed
  (with durability ``"sync"``: flushed). If the commit fails, nothing of the group is written and
  every call raises the failure (followers a copy of it, with the original as ``__cause__``).
* **Growth.** A full map is grown and the whole group runs again from a fresh transaction (see
  :meth:`Store.write <coniti.log.store.Store.write>`): work functions keep their state in the
  transaction, as for ``Store.write``.
* **Lingering.** When the last group carried several calls, the next leader waits until the writers
  of the last two groups have queued again (they are busy preparing their next call), for at most
  a quarter of the last commit's duration and never over 1 ms: fewer, larger commits while many
  threads write; no wait at all for a lone writer or after a group of one.
* **Order.** Calls commit in the order they were queued; a call's effects are visible to the calls
  after it in the same group and to every later group.
* **Scope.** One queue per handle: calls through one :class:`~coniti.log.store.Store` (one
  ``EventLog``/``LogBackend`` and its views) are merged; calls through other handles or processes are
  serialised with them by the store's write lock and LMDB's, not merged.
* Work functions run on the leader's thread. They must not depend on the calling thread (capture
  context-local values such as audit stamps before the call) and must not call back into the queue.
* After ``fork()`` the queue is not used: calls go straight to the store, which refuses them
  (:class:`~coniti.errors.StoreForked`).
"""

from __future__ import annotations

import copy
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar, cast

import lmdb

from coniti.errors import StoreError
from coniti.log.store import Store, translate

__all__ = ["MAX_GROUP", "GroupCommit"]

T = TypeVar("T")

Outcome = tuple[Any, BaseException | None]
"""A call's ``(result, None)`` or ``(None, error)``."""
Merger = Callable[[Any, list[Any]], list[Outcome]]
"""Runs several calls of one kind at once: ``merger(txn, [data, ...])`` returns one outcome per
call, in order, and MUST have written nothing for a call whose outcome is an error."""
Merge = tuple[Merger, Any]
"""``(merger, this call's data)``: how a call may run together with its neighbours."""

MAX_GROUP = 128
"""Most calls one group commits (bounds a group's transaction and the wait of its last caller)."""


class _Call:
    """One queued write call and, once settled, its outcome."""

    __slots__ = ("done", "error", "fn", "merge", "result", "taken", "thread", "wake")

    def __init__(self, fn: Callable[[Any], Any], merge: Merge | None) -> None:
        self.fn = fn
        self.merge = merge
        self.wake: threading.Condition | None = None
        """Made when the call has to wait (a lone writer never needs one)."""
        self.thread = threading.get_ident()
        self.taken = False
        """A leader has put the call in its group: it will be settled by that leader."""
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None

    def outcome(self) -> Any:
        error = self.error
        if error is not None:
            self.error = None  # no reference cycle through the traceback
            raise error
        return self.result


def _wake(call: _Call) -> None:
    """Wake a queued call. Every call that can be waiting has its condition: a call makes one
    before it waits behind others or lingers."""
    if call.wake is not None:
        call.wake.notify()


def _shared_failure(exc: BaseException) -> BaseException:
    """The error a follower raises when its group failed as a whole: a copy of ``exc`` (one object
    must not be raised in several threads), or a :class:`StoreError` when it cannot be copied or
    is not an ``Exception`` (an interrupt belongs to the leader's thread only)."""
    if isinstance(exc, Exception):
        try:
            clone = copy.copy(exc)
        except Exception:  # noqa: BLE001 - an exception type that cannot be copied
            clone = None
        if isinstance(clone, Exception) and clone is not exc:
            clone.__traceback__ = None
            clone.__cause__ = exc
            return clone
    error = StoreError(f"the write was not committed: its group failed with {exc!r}")
    error.__cause__ = exc
    return error


class GroupCommit:
    """The write queue of one :class:`Store` handle; see the module docstring. Thread-safe.

    ``commits`` and ``calls`` count the transactions committed (or attempted) and the calls they
    carried, for tests and benchmarks.
    """

    def __init__(self, store: Store, *, max_group: int = MAX_GROUP) -> None:
        if max_group < 1:
            raise ValueError(f"max_group must be at least 1, got {max_group}")
        self._store = store
        self.max_group = max_group
        self._mu = threading.Lock()
        self._queue: deque[_Call] = deque()
        self.commits = 0
        self.calls = 0
        self.linger = True
        """Let a leader wait briefly for the writers of the last groups (see the module docstring)."""
        self._last_threads: set[int] = set()
        self._target = 1
        self._wanted = 0
        self._last_commit = 0.0

    def pending(self) -> int:
        """Calls queued or being committed right now."""
        with self._mu:
            return len(self._queue)

    def run(self, fn: Callable[[Any], T], merge: Merge | None = None) -> T:
        """Run ``fn(txn)`` in a write transaction shared with concurrent calls and return its result
        once that transaction has committed. Raises what ``fn`` raised (its writes rolled back, the
        other calls unaffected), or the commit's failure (nothing of the group written).

        ``merge``, optional, lets consecutive calls of a group that name the same merger run through
        one ``merger(txn, [data, ...])`` instead of one ``fn`` each (less work per call); its outcome
        for a call must be what ``fn`` would have given. If the merger raises, the calls run one by
        one after all."""
        if self._store.forked:
            return self._store.write(fn)
        mu = self._mu
        call = _Call(fn, merge)
        queue = self._queue
        with mu:
            queue.append(call)
            if self._wanted and len(queue) >= self._wanted:
                _wake(queue[0])
            try:
                if queue[0] is not call:
                    wake = call.wake = threading.Condition(mu)
                    while not call.done and queue[0] is not call:
                        wake.wait()
                if not call.done and self.linger and len(queue) < self._target:
                    self._linger(call)
            except BaseException:
                self._withdraw(call)
                raise
            if call.done:
                return cast(T, call.outcome())
            group = [queue[i] for i in range(min(len(queue), self.max_group))]
            self._plan_next(group)
            for c in group:
                c.taken = True
        try:
            self._execute(group)
        except BaseException as exc:  # the group failed as a whole (commit, growth, interrupt)
            for c in group:
                c.result = None
                c.error = exc if c is call else _shared_failure(exc)
        finally:
            with mu:
                for c in group:
                    queue.popleft()
                    c.done = True
                    if c is not call:
                        _wake(c)
                if queue:
                    _wake(queue[0])
        return cast(T, call.outcome())

    def _plan_next(self, group: list[_Call]) -> None:
        """After taking ``group``: how many calls the next leader waits for. Holds ``_mu``."""
        threads = {c.thread for c in group}
        if len(group) > 1:
            self._target = min(len(threads | self._last_threads), self.max_group)
        else:
            self._target = 1
        self._last_threads = threads

    def _linger(self, call: _Call) -> None:
        """Wait (``_mu`` released while waiting) until the writers of the last two groups have queued
        their next call, at most a quarter of the time the last commit took (and never over 1 ms):
        a straggler joins the next group rather than hold up this one."""
        queue = self._queue
        deadline = time.monotonic() + min(self._last_commit / 4, 0.001)
        if call.wake is None:
            call.wake = threading.Condition(self._mu)
        wake = call.wake
        self._wanted = self._target
        try:
            while len(queue) < self._target:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                wake.wait(left)
        finally:
            self._wanted = 0

    def _withdraw(self, call: _Call) -> None:
        """Take a call whose caller was interrupted while waiting out of the queue, unless a leader
        already holds it (then it runs, unacknowledged, like any write in flight). Holds ``_mu``."""
        if call.taken or call.done:
            return
        queue = self._queue
        front = queue[0] is call
        queue.remove(call)
        if front and queue:
            _wake(queue[0])

    def _execute(self, group: list[_Call]) -> None:
        """Run ``group`` in one write transaction and commit; settle each call's result or error."""
        store = self._store
        self.commits += 1
        self.calls += len(group)
        started = time.monotonic()
        try:
            self._commit_group(store, group)
        finally:
            self._last_commit = time.monotonic() - started

    def _commit_group(self, store: Store, group: list[_Call]) -> None:
        if len(group) == 1:
            only = group[0]
            try:
                only.result = store.write(only.fn)
            except Exception as exc:
                only.error = exc
            return
        outcomes: list[Outcome] = []
        path = store.path

        def run_one(txn: Any, env: Any, c: _Call) -> None:
            child = env.begin(write=True, parent=txn)
            try:
                result = c.fn(child)
                child.commit()
            except lmdb.MapFullError:
                child.abort()
                raise
            except Exception as exc:
                child.abort()
                error = translate(path, exc)
                if error is None:
                    outcomes.append((None, exc))
                else:
                    error.__cause__ = exc
                    outcomes.append((None, error))
            except BaseException:
                child.abort()
                raise
            else:
                outcomes.append((result, None))

        def run_merged(txn: Any, env: Any, run: list[_Call]) -> bool:
            merger = cast(Merge, run[0].merge)[0]
            child = env.begin(write=True, parent=txn)
            try:
                results = merger(child, [cast(Merge, c.merge)[1] for c in run])
                if len(results) != len(run):
                    raise ValueError(f"merger gave {len(results)} outcomes for {len(run)} calls")
                child.commit()
            except lmdb.MapFullError:
                child.abort()
                raise
            except Exception:  # noqa: BLE001 - the calls run one by one instead, with their errors
                child.abort()
                return False
            except BaseException:
                child.abort()
                raise
            outcomes.extend(results)
            return True

        def run_all(txn: Any) -> None:
            outcomes.clear()  # a retry after growth starts over
            env = store.env
            i, n = 0, len(group)
            while i < n:
                merge = group[i].merge
                j = i + 1
                if merge is not None:
                    while j < n and (other := group[j].merge) is not None and other[0] is merge[0]:
                        j += 1
                if j - i > 1 and run_merged(txn, env, group[i:j]):
                    i = j
                    continue
                for c in group[i:j]:
                    run_one(txn, env, c)
                i = j

        store.write(run_all)
        for c, (result, error) in zip(group, outcomes, strict=True):
            c.result = result
            c.error = error
