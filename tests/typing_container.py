"""Typing checks for Container, run by mypy --strict in tests/test_container_typing.py (pytest never
collects this file). Each ``assert_type`` fails the type check when Container's typing regresses."""

from __future__ import annotations

from typing import assert_type

from coniti import Container
from coniti.container import ResolvedPiece
from coniti.events import Event
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.memory import MemoryBackend


def checks(name: str, backend: InMemoryBackend) -> None:
    log = Container(memory="log", path="store")
    assert_type(log.memory, LogBackend)
    assert_type(log.memory.history("n1"), list[Event])
    assert_type(Container().memory, InMemoryBackend)
    assert_type(Container(memory="in_memory").memory, InMemoryBackend)
    assert_type(Container(memory=backend).memory, InMemoryBackend)
    assert_type(Container(memory=name).memory, MemoryBackend)
    assert_type(Container().resolved()["embedding"], ResolvedPiece)
    assert_type(Container().resolved()["embedding"].spec_id, str)
