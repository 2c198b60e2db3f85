"""LangGraph's own checkpointer conformance suite (``langgraph-checkpoint-conformance``) against
:class:`ConitiSaver`, on a LogBackend and on an InMemoryBackend: every base and every extended
capability is detected and passes."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, Callable
from pathlib import Path

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import (
    BASE_CAPABILITIES,
    EXTENDED_CAPABILITIES,
)
from langgraph.checkpoint.conformance.report import CapabilityReport

from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.integrations.langgraph import ConitiSaver
from coniti.memory import MemoryBackend

CAPABILITIES = sorted(c.value for c in BASE_CAPABILITIES | EXTENDED_CAPABILITIES)


def _report(name: str, open_memory: Callable[[int], MemoryBackend]) -> CapabilityReport:
    """Run the whole suite once, a fresh memory for each capability (as the suite asks)."""
    counter = itertools.count()

    async def factory() -> AsyncGenerator[BaseCheckpointSaver[str], None]:
        memory = open_memory(next(counter))
        try:
            yield ConitiSaver(memory)
        finally:
            memory.close()

    return asyncio.run(validate(checkpointer_test(name=name)(factory)))


@pytest.fixture(scope="module")
def log_report(tmp_path_factory: pytest.TempPathFactory) -> CapabilityReport:
    root: Path = tmp_path_factory.mktemp("saver-conformance")
    return _report("ConitiSaver(LogBackend)", lambda i: LogBackend(root / f"store-{i}", durability="nosync"))


@pytest.fixture(scope="module")
def memory_report() -> CapabilityReport:
    return _report("ConitiSaver(InMemoryBackend)", lambda i: InMemoryBackend())


def _failures(report: CapabilityReport, capability: str) -> str:
    result = report.results[capability]
    return f"{capability}: detected={result.detected} failures={result.failures}"


def test_log_backend_passes_all_base_capabilities(log_report: CapabilityReport) -> None:
    """On a LogBackend, ``report.passed_all_base()`` is True."""
    assert log_report.passed_all_base(), [_failures(log_report, c.value) for c in BASE_CAPABILITIES]


@pytest.mark.parametrize("capability", CAPABILITIES)
def test_log_backend_capability_is_detected_and_passes(log_report: CapabilityReport, capability: str) -> None:
    """On a LogBackend, the capability is implemented (detected) and every one of its tests passes."""
    result = log_report.results[capability]
    assert result.detected and result.passed is True and result.tests_failed == 0, _failures(
        log_report, capability
    )
    assert result.tests_passed > 0


def test_log_backend_conformance_level_is_full(log_report: CapabilityReport) -> None:
    """The suite's own verdict on a LogBackend is FULL: every detected capability passed."""
    assert log_report.conformance_level() == "FULL"


@pytest.mark.parametrize("capability", CAPABILITIES)
def test_in_memory_backend_capability_is_detected_and_passes(
    memory_report: CapabilityReport, capability: str
) -> None:
    """On an InMemoryBackend, the capability is detected and every one of its tests passes."""
    result = memory_report.results[capability]
    assert result.detected and result.passed is True and result.tests_failed == 0, _failures(
        memory_report, capability
    )
