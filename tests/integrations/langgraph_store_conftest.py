"""conftest.py for LangGraph's own store tests (copied in by test_langgraph_store_suite.py): the
store classes their tests import are replaced by :class:`ConitiStore` before any test module loads.

* ``langgraph.store.sqlite.SqliteStore`` (and ``.aio``/package ``AsyncSqliteStore``): built by
  ``from_conn_string(conn, index=..., ttl=...)``; ``":memory:"`` gives a ConitiStore on coniti's
  ``InMemoryBackend``, any other string one on a ``LogBackend`` in the directory ``<conn>.coniti``
  (removed afterwards). SQLite's index config names its fields ``text_fields``: they become
  ``fields``.
* The async store is LangGraph's ``AsyncBatchedBaseStore`` (LangGraph's batching layer, the base of
  ``AsyncSqliteStore``) over a ConitiStore: every op runs through ``ConitiStore.abatch``.
* ``langgraph.store.memory.InMemoryStore(index=...)``: a ConitiStore on an ``InMemoryBackend``.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import langgraph.store.memory
import langgraph.store.sqlite
import langgraph.store.sqlite.aio
from langgraph.store.base import Op, Result
from langgraph.store.base.batch import AsyncBatchedBaseStore

from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.integrations.langgraph import ConitiStore
from coniti.memory import MemoryBackend


def _index(index: dict[str, Any] | None) -> Any:
    if index is None:
        return None
    out = {k: v for k, v in index.items() if k != "distance_type"}
    if "text_fields" in out and "fields" not in out:
        out["fields"] = out["text_fields"]
    return out


@contextmanager
def _backend(conn_string: str) -> Iterator[MemoryBackend]:
    if conn_string == ":memory:":
        yield InMemoryBackend()
        return
    path = conn_string + ".coniti"
    backend = LogBackend(path)
    try:
        yield backend
    finally:
        backend.close()
        shutil.rmtree(path, ignore_errors=True)


class SqliteStore(ConitiStore):
    """``SqliteStore`` as LangGraph's tests build it, on coniti."""

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, conn_string: str, *, index: Any = None, ttl: Any = None
    ) -> Iterator[SqliteStore]:
        with _backend(conn_string) as backend, cls(backend, index=_index(index), ttl=ttl) as store:
            yield store

    def setup(self) -> None:
        """Nothing to create: a coniti store needs no schema."""


class AsyncSqliteStore(AsyncBatchedBaseStore):
    """``AsyncSqliteStore`` as LangGraph's tests build it: LangGraph's batching layer over a
    ConitiStore."""

    supports_ttl = True

    def __init__(self, store: ConitiStore) -> None:
        super().__init__()
        self.store = store
        self.index_config = store.index_config
        self.embeddings = store.embeddings
        self.ttl_config = store.ttl_config

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, *, index: Any = None, ttl: Any = None
    ) -> AsyncIterator[AsyncSqliteStore]:
        with _backend(conn_string) as backend, ConitiStore(backend, index=_index(index), ttl=ttl) as store:
            yield cls(store)

    async def setup(self) -> None:
        """Nothing to create: a coniti store needs no schema."""

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self.store.abatch(ops)

    async def sweep_ttl(self) -> int:
        return await self.store.asweep_ttl()

    async def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Any:
        return asyncio.wrap_future(self.store.start_ttl_sweeper(sweep_interval_minutes))

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        return await asyncio.to_thread(self.store.stop_ttl_sweeper, timeout)


class InMemoryStore(ConitiStore):
    """``InMemoryStore(index=...)`` as LangGraph's tests build it, on coniti's InMemoryBackend."""

    def __init__(self, *, index: Any = None) -> None:
        super().__init__(InMemoryBackend(), index=index)


langgraph.store.sqlite.SqliteStore = SqliteStore  # type: ignore[misc]
langgraph.store.sqlite.AsyncSqliteStore = AsyncSqliteStore  # type: ignore[misc]
langgraph.store.sqlite.aio.AsyncSqliteStore = AsyncSqliteStore  # type: ignore[misc]
langgraph.store.memory.InMemoryStore = InMemoryStore  # type: ignore[misc]
