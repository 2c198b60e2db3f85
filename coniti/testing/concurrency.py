"""Conformance: use from several threads, and after ``os.fork()``, as the backend declares."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import ClassVar

import pytest

from coniti.errors import DuplicateRecord, MemoryBackendError
from coniti.memory import GetRequest, MemoryBackend
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import count, ids, put, record, scan_all

__all__ = ["ConcurrencyTests"]


def _in_threads(n: int, work: Callable[[int], None]) -> list[BaseException]:
    """Run ``work(i)`` for i in 0..n-1 on n threads started together; return what they raised."""
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []
    lock = threading.Lock()

    def main(i: int) -> None:
        barrier.wait()
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - collected and checked by the caller
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=main, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return errors


class ConcurrencyTests(BackendFixtures):
    """Threads and fork. Capabilities are declared with the class attributes below, never detected."""

    supports_threads: ClassVar[bool] = False
    """Declare True if one instance may be used from several threads at once."""

    supports_fork_safety: ClassVar[bool] = False
    """Declare True if an instance inherited through ``os.fork()`` keeps working in the child.
    False means the child's first use raises :class:`~coniti.errors.MemoryBackendError`: use after
    fork is detected, never undefined."""

    def _need_threads(self) -> None:
        if not self.supports_threads:
            pytest.skip(f"{type(self).__name__} does not declare supports_threads")

    def test_concurrent_puts_all_land(self, backend: MemoryBackend) -> None:
        """Puts from 8 threads at once all land, and scan order stays (timestamp, write order)."""
        self._need_threads()

        def work(i: int) -> None:
            for j in range(25):
                put(backend, record(f"t{i}-{j}", float(j % 5)))

        assert _in_threads(8, work) == []
        assert count(backend) == 200
        stamps = [r.note.timestamp for r in scan_all(backend)]
        assert stamps == sorted(stamps)

    def test_concurrent_puts_of_one_id_write_it_once(self, backend: MemoryBackend) -> None:
        """When 8 threads put the same id at once, exactly one succeeds; the rest get DuplicateRecord."""
        self._need_threads()

        def work(i: int) -> None:
            put(backend, record("same", float(i), text=str(i)))

        errors = _in_threads(8, work)
        assert len(errors) == 7
        assert all(isinstance(e, DuplicateRecord) for e in errors)
        assert ids(scan_all(backend)) == ["same"]

    def test_reads_during_writes_see_whole_puts(self, backend: MemoryBackend) -> None:
        """A reader running beside writers only ever sees whole put calls (counts in steps of 4)."""
        self._need_threads()
        seen: list[int] = []

        def work(i: int) -> None:
            if i == 0:
                for _ in range(50):
                    seen.append(count(backend))
                return
            for j in range(10):
                put(backend, *[record(f"w{i}-{j}-{k}", float(k)) for k in range(4)])

        assert _in_threads(4, work) == []
        assert all(n % 4 == 0 for n in seen)
        assert count(backend) == 120

    @pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
    def test_use_after_fork(self, backend: MemoryBackend) -> None:
        """In a forked child, reads work (supports_fork_safety) or raise MemoryBackendError; never
        anything else."""
        put(backend, record("a", 1.0), record("b", 2.0))
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: report by exit status only
            code = 3
            try:
                ok = count(backend) == 2 and ids(backend.get(GetRequest(ids=["b"])).records) == ["b"]
                code = 0 if ok else 1
            except MemoryBackendError:
                code = 2
            except BaseException:  # noqa: BLE001 - any other error is the failure being tested
                code = 3
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        outcome = os.waitstatus_to_exitcode(status)
        expected = 0 if self.supports_fork_safety else 2
        meaning = {0: "worked", 1: "wrong answer", 2: "MemoryBackendError", 3: "other error"}
        assert outcome == expected, f"child: {meaning.get(outcome, outcome)}"
        assert count(backend) == 2
