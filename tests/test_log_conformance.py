"""The conformance suite run against LogBackend, one class per capability (sync and async paths)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from coniti import testing as conformance
from coniti.impl.log import LogBackend
from coniti.memory import MemoryBackend
from coniti.testing import BackendFactory


class LogFixtures:
    """A fresh store directory per backend; LogBackend's declared capabilities."""

    supports_threads = True
    supports_fork_safety = False
    actor: str | None = None
    """The stores' default actor (stamped on every event)."""

    @pytest.fixture
    def backend_factory(self, tmp_path_factory: pytest.TempPathFactory) -> BackendFactory:
        root: Path = tmp_path_factory.mktemp("stores")
        counter = itertools.count()
        return lambda: LogBackend(root / f"store-{next(counter)}", actor=self.actor)


class TestLogBasics(LogFixtures, conformance.BasicsTests):
    pass


class TestLogPut(LogFixtures, conformance.PutTests):
    pass


class TestLogGet(LogFixtures, conformance.GetTests):
    pass


class TestLogDelete(LogFixtures, conformance.DeleteTests):
    pass


class TestLogScan(LogFixtures, conformance.ScanTests):
    pass


class TestLogCursors(LogFixtures, conformance.CursorTests):
    pass


class TestLogNamespaces(LogFixtures, conformance.NamespaceTests):
    pass


class TestLogCopies(LogFixtures, conformance.CopyTests):
    pass


class TestLogMeta(LogFixtures, conformance.MetaTests):
    pass


class TestLogClear(LogFixtures, conformance.ClearTests):
    pass


class TestLogCount(LogFixtures, conformance.CountTests):
    pass


class TestLogFilters(LogFixtures, conformance.FilterTests):
    pass


class TestLogNamespaceListing(LogFixtures, conformance.NamespaceListingTests):
    pass


class TestLogRequestTypes(LogFixtures, conformance.RequestTypeTests):
    pass


class TestLogAsync(LogFixtures, conformance.AsyncTests):
    pass


class TestLogIterAll(LogFixtures, conformance.IterAllTests):
    pass


class TestLogDump(LogFixtures, conformance.DumpTests):
    pass


class TestLogLoad(LogFixtures, conformance.LoadTests):
    pass


class TestLogReject(LogFixtures, conformance.RejectTests):
    pass


class TestLogRollback(LogFixtures, conformance.RollbackTests):
    pass


class TestLogProperties(LogFixtures, conformance.PropertyTests):
    pass


class TestLogConcurrency(LogFixtures, conformance.ConcurrencyTests):
    pass


class TestLogCapabilities(LogFixtures, conformance.CapabilityTests):
    pass


class TestLogPayloads(LogFixtures, conformance.PayloadTests):
    pass


class TestAuditedLogPayloads(LogFixtures, conformance.PayloadTests):
    """LogBackend with a default actor, every write stamped: the stamps change no content."""

    actor = "auditor"


class TestLogFeedback(LogFixtures, conformance.FeedbackTests):
    pass


class TestLogWrite(LogFixtures, conformance.WriteTests):
    @pytest.fixture
    def reopen(self) -> Callable[[MemoryBackend], MemoryBackend]:
        def again(backend: MemoryBackend) -> MemoryBackend:
            assert isinstance(backend, LogBackend)
            path = backend.path
            backend.close()
            return LogBackend(path)

        return again


class TestLogWritten(LogFixtures, conformance.WrittenTests):
    pass
