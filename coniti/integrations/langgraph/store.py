"""ConitiStore: LangGraph's long-term memory (``BaseStore``) on a coniti memory backend.

An item ``(namespace, key) -> value`` is one coniti record (layout: :mod:`._items`), so every
change to the store is an event in coniti's log with its audit stamp, every past state is readable
(:meth:`ConitiStore.at`) and every item has a history (:meth:`ConitiStore.history`).

Contracts:

* **Batches** (``batch``/``abatch``, the abstract core every other method uses) run their reads
  first, in op order, on the state before the batch, then its puts: the last put of a
  ``(namespace, key)`` wins; the puts of one namespace are one :class:`~coniti.memory.WriteRequest`
  (one event per put, one transaction, the audit stamp of the block the call runs in, e.g.
  :meth:`LogBackend.audit <coniti.impl.log.LogBackend.audit>`), namespaces in order of first
  appearance. Every op is validated (namespace labels as LangGraph's ``validate_op_namespace``, keys,
  values as JSON, ``ttl``, ``limit``/``offset``) before anything is read or written: a bad op fails
  the whole batch and changes nothing. A put keeps the item's ``created_at`` (compare-and-set on the
  version it read, retried on a concurrent change).
* **Search**: ``namespace_prefix`` matches whole labels; ``filter`` is LangGraph's (see
  :mod:`._filters`); without ``query`` results are in ``updated_at`` order, newest first (ties: newer
  version, then namespace and key). With ``query`` and an index, items are scored by the cosine
  similarity of their best-matching vector (one vector per indexed text) with coniti's scoring
  (:mod:`coniti.structure.scoring`: float32 candidates, exact float64 scores), best first, then the
  items that are not indexed (score ``None``) in listing order. A search reads every item under the
  prefix that matches the filter, each namespace in one snapshot (one unlimited filtered ``scan``):
  its cost grows with them (there is no approximate index).
* **Index**: ``index`` is LangGraph's ``IndexConfig``: ``embed`` is a LangChain ``Embeddings``, an
  embedding function (sync or async), a provider string, or a coniti
  :class:`~coniti.embedding.Embedder` (then ``dims`` defaults to its ``dim`` and records carry its
  ``spec_id``); ``fields`` the JSON paths to embed (default ``["$"]``, the whole value); a put's
  ``index`` overrides them (``False``: not indexed, stored without a vector). Without ``index``,
  ``query`` is ignored.
* **TTL** (``supports_ttl``, ``ttl`` is LangGraph's ``TTLConfig``): a put with a ttl of ``m``
  minutes writes coniti's expiry ``now + 60 m`` into its event, so every coniti read (this store,
  the engine, the CLI, views) hides the item once it passes and :meth:`~coniti.memory.MemoryBackend.sweep`
  deletes it with an audited delete. As in LangGraph's SQL stores, a read refreshes the ttl of the
  items it returns when it asks to (``refresh_ttl``, which ``BaseStore`` fills from the config) and
  the config sets ``refresh_on_read``. A refresh writes no event: it renews a
  *lease* (the new deadline ``now + 60 m``) that this store instance keeps in memory, outside the
  hash chain, and that hides the item from this store once it passes. Only when a lease would outlive
  the expiry in the log does the read append one event, a patch of the expiry to ``now + 120 m``, so
  a continuously read item costs at most one event per ttl, whatever the number of reads. Leases are
  per instance and are not history: another process, or this one after a restart, sees the item
  until the expiry in the log (never less than its lease). A ttl whose ``now + 120 m`` falls after
  year 9999 UTC (the horizon of :mod:`coniti.times`) is refused. :meth:`~ConitiStore.sweep_ttl` deletes the
  items whose lease passed, then runs the backend's sweep; both write deletes stamped ``coniti-ttl``
  / ``expired`` on a :class:`~coniti.impl.log.LogBackend`.
* **Threads**: an instance is thread-safe as its backend is; ``abatch`` embeds on the event loop
  (async embedding functions are awaited) and runs the store work on a worker thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, cast

import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

from coniti.contracts import check_json_value
from coniti.embedding import Embedder
from coniti.errors import ContractError, NotSupported, ReadOnlyError, VersionConflict
from coniti.events import Event
from coniti.impl.log import TTL_ACTOR, LogBackend
from coniti.integrations.langgraph._filters import coniti_filter
from coniti.integrations.langgraph._items import (
    CREATED,
    item_of,
    make_record,
    search_item_of,
    ttl_of,
    vectors_of,
)
from coniti.memory import (
    DeleteOp,
    GetRequest,
    MemoryBackend,
    MemoryRecord,
    PatchOp,
    ScanRequest,
    UpsertOp,
    WriteRequest,
    WriteResult,
    time_travel,
)
from coniti.structure.scoring import (
    error_bound,
    exact_scores,
    fast_scores,
    select_candidates,
    unit_rows,
)
from coniti.times import in_horizon

__all__ = ["ConitiStore"]

logger = logging.getLogger(__name__)

Namespace = tuple[str, ...]
_RETRIES = 16
"""How often a namespace's puts are re-read and retried when a concurrent write changed a version."""
_DEFAULT_SWEEP_MINUTES = 5.0


@dataclass
class _Put:
    """One put of a batch, its texts to embed and (after embedding) their vectors."""

    op: PutOp
    value: dict[str, Any] | None
    texts: list[str]
    vectors: np.ndarray | None = None


@dataclass
class _Plan:
    """A validated batch: its ops, its puts (last one per item), the queries to embed."""

    ops: list[Op]
    puts: dict[tuple[Namespace, str], _Put] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)

    def texts(self) -> list[str]:
        return [t for put in self.puts.values() for t in put.texts]

    def attach(self, vectors: np.ndarray) -> None:
        at = 0
        for put in self.puts.values():
            n = len(put.texts)
            if n:
                put.vectors = vectors[at : at + n]
                at += n


class _Index:
    """The embedding side of an ``IndexConfig``: what to embed and how."""

    def __init__(self, config: IndexConfig) -> None:
        embed = config.get("embed")
        self.embedder: Embedder | None = embed if isinstance(embed, Embedder) else None
        dims = config.get("dims")
        if self.embedder is not None:
            dims = self.embedder.dim if dims is None else dims
            if dims != self.embedder.dim:
                raise ContractError(
                    f"index dims is {dims}, but the embedder {self.embedder.spec_id} gives {self.embedder.dim}"
                )
            self.embeddings: Embeddings | None = None
            self.embedding_id: str | None = self.embedder.spec_id
        else:
            if embed is None:
                raise ContractError("index needs 'embed': an Embeddings, an embedding function or a coniti Embedder")
            self.embeddings = ensure_embeddings(embed)
            self.embedding_id = None
        if type(dims) is not int or dims < 1:
            raise ContractError(f"index dims must be a positive integer, got {dims!r}")
        self.dims: int = dims
        self.fields = [_path(p) for p in (config.get("fields") or ["$"])]

    def texts(self, value: dict[str, Any], index: list[str] | None) -> list[str]:
        paths = self.fields if index is None else [_path(p) for p in index]
        return [text for _, tokens in paths for text in get_text_at_path(value, tokens)]

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.embedder is not None:
            return self._check(self.embedder.embed(texts), len(texts))
        assert self.embeddings is not None
        return self._check(self.embeddings.embed_documents(texts), len(texts))

    async def aembed(self, texts: list[str]) -> np.ndarray:
        if self.embedder is not None:
            return self._check(await asyncio.to_thread(self.embedder.embed, texts), len(texts))
        assert self.embeddings is not None
        return self._check(await self.embeddings.aembed_documents(texts), len(texts))

    def embed_queries(self, queries: list[str]) -> dict[str, np.ndarray]:
        if self.embedder is not None:
            rows = self._check(self.embedder.embed(queries), len(queries))
        else:
            assert self.embeddings is not None
            rows = self._check([self.embeddings.embed_query(q) for q in queries], len(queries))
        return dict(zip(queries, rows, strict=True))

    async def aembed_queries(self, queries: list[str]) -> dict[str, np.ndarray]:
        if self.embedder is not None:
            rows = self._check(await asyncio.to_thread(self.embedder.embed, queries), len(queries))
        else:
            assert self.embeddings is not None
            found = await asyncio.gather(*(self.embeddings.aembed_query(q) for q in queries))
            rows = self._check(list(found), len(queries))
        return dict(zip(queries, rows, strict=True))

    def _check(self, vectors: Any, n: int) -> np.ndarray:
        rows = np.asarray(vectors, dtype=np.float32)
        if rows.ndim != 2 or rows.shape != (n, self.dims):
            raise ContractError(
                f"the embedding function returned shape {rows.shape} for {n} texts; the index "
                f"says dims={self.dims}"
            )
        if not np.isfinite(rows).all():
            raise ContractError("the embedding function returned a NaN or infinite value")
        return rows


def _path(path: str) -> tuple[str, Any]:
    if not isinstance(path, str) or not path:
        raise ContractError(f"an index field must be a non-empty JSON path, got {path!r}")
    return (path, path) if path == "$" else (path, tokenize_path(path))


class _Leases:
    """TTL leases renewed by reads: ``(namespace, key) -> (version, deadline)``, in memory only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by: dict[tuple[Namespace, str], tuple[int, float]] = {}

    def renew(self, namespace: Namespace, key: str, version: int, deadline: float) -> None:
        with self._lock:
            self._by[namespace, key] = (version, deadline)

    def visible(self, record: MemoryRecord, now: float) -> bool:
        """False when this version's lease has passed."""
        lease = self._by.get((record.namespace, record.id))
        return lease is None or lease[0] != record.version or lease[1] > now

    def due(self, now: float) -> list[tuple[Namespace, str, int]]:
        with self._lock:
            return [(ns, key, v) for (ns, key), (v, deadline) in self._by.items() if deadline <= now]

    def drop(self, namespace: Namespace, keys: Iterable[str]) -> None:
        with self._lock:
            for key in keys:
                self._by.pop((namespace, key), None)


def _by_namespace(pairs: Iterable[tuple[Namespace, Any]]) -> dict[Namespace, list[Any]]:
    groups: dict[Namespace, list[Any]] = {}
    for ns, x in pairs:
        groups.setdefault(ns, []).append(x)
    return groups


def _matches(condition: MatchCondition, namespace: Namespace) -> bool:
    """Whether ``namespace`` starts (``prefix``) or ends (``suffix``) with the condition's labels,
    ``"*"`` matching any one label (the match type was checked when the batch was planned)."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


def _count(value: Any, name: str) -> int:
    if type(value) is not int or value < 0:
        raise ContractError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def _listing_key(record: MemoryRecord) -> tuple[float, int, Namespace, str]:
    return (-record.note.timestamp, -(record.version or 0), record.namespace, record.id)


class ConitiStore(BaseStore):
    """A LangGraph ``BaseStore`` on coniti: see the module docstring for the contracts.

    ``memory``: a coniti :class:`~coniti.memory.MemoryBackend` that supports ``write`` (a
    :class:`~coniti.impl.log.LogBackend` for durability, time travel and history; an
    :class:`~coniti.impl.memory.InMemoryBackend` for tests), a read-only view, or the path of a
    store directory (opened as a LogBackend and closed by :meth:`close`). ``index``: LangGraph's
    ``IndexConfig`` (or None: no semantic search). ``ttl``: LangGraph's ``TTLConfig``. ``clock``:
    epoch seconds for ``updated_at``, expiries, leases and sweeps (give the backend the same one).
    """

    supports_ttl: ClassVar[bool] = True  # type: ignore[misc]

    def __init__(
        self,
        memory: MemoryBackend | str | os.PathLike[str],
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._owned = False
        self._clock = clock
        if isinstance(memory, str | os.PathLike):
            memory = LogBackend(memory)
            self._owned = True
        elif not isinstance(memory, MemoryBackend):
            raise ContractError(f"memory must be a coniti MemoryBackend or a store path, got {type(memory).__name__}")
        if not memory.read_only and not memory.supports_write:
            raise NotSupported(f"the {memory.kind!r} backend has no write (upsert, delete, expiry)")
        self._memory = memory
        self._index_arg = index
        self._index = None if index is None else _Index(index)
        self.index_config: IndexConfig | None = None if index is None else cast(IndexConfig, dict(index))
        self.embeddings: Embeddings | None = None if self._index is None else self._index.embeddings
        self.ttl_config: TTLConfig | None = None if ttl is None else _ttl_config(ttl)
        self._refresh_on_read = bool((self.ttl_config or {}).get("refresh_on_read", False))
        self._leases = _Leases()
        self._sweeper: tuple[threading.Thread, threading.Event, concurrent.futures.Future[None]] | None = None
        self._sweeper_lock = threading.Lock()

    @property
    def memory(self) -> MemoryBackend:
        """The coniti backend the items live in."""
        return self._memory

    def __repr__(self) -> str:
        return f"ConitiStore({self._memory!r})"

    # -- the abstract core -----------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        plan = self._plan(ops)
        index = self._index
        queries: dict[str, np.ndarray] = {}
        if index is not None:
            texts = plan.texts()
            if texts:
                plan.attach(index.embed(texts))
            if plan.queries:
                queries = index.embed_queries(plan.queries)
        return self._run(plan, queries)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        plan = self._plan(ops)
        index = self._index
        queries: dict[str, np.ndarray] = {}
        if index is not None:
            texts = plan.texts()
            if texts:
                plan.attach(await index.aembed(texts))
            if plan.queries:
                queries = await index.aembed_queries(plan.queries)
        return await asyncio.to_thread(self._run, plan, queries)

    # -- planning: validate everything before anything runs ------------------------------------

    def _plan(self, ops: Iterable[Op]) -> _Plan:
        plan = _Plan(list(ops))
        queries: dict[str, None] = {}
        for i, op in enumerate(plan.ops):
            if not isinstance(op, GetOp | PutOp | SearchOp | ListNamespacesOp):
                raise ContractError(f"ops[{i}] is not a LangGraph store op: {type(op).__name__}")
            validate_op_namespace(op)
            if isinstance(op, PutOp):
                put = self._plan_put(op, i)
                plan.puts.pop((op.namespace, op.key), None)  # the last put wins, in its own place
                plan.puts[op.namespace, op.key] = put
            elif isinstance(op, GetOp):
                _key(op.key, i)
            elif isinstance(op, SearchOp):
                _count(op.limit, f"ops[{i}].limit")
                _count(op.offset, f"ops[{i}].offset")
                coniti_filter(op.filter, f"ops[{i}].filter")
                if op.query and self._index is not None:
                    queries[op.query] = None
            else:
                _count(op.limit, f"ops[{i}].limit")
                _count(op.offset, f"ops[{i}].offset")
                if op.max_depth is not None and (type(op.max_depth) is not int or op.max_depth < 1):
                    raise ContractError(f"ops[{i}].max_depth must be a positive integer or None, got {op.max_depth!r}")
                for cond in op.match_conditions or ():
                    if cond.match_type not in ("prefix", "suffix"):
                        raise ContractError(
                            f"ops[{i}]: match_type must be 'prefix' or 'suffix', got {cond.match_type!r}"
                        )
        if plan.puts and self._memory.read_only:
            raise ReadOnlyError(f"this store reads {self._memory!r}, which is read-only; nothing was written")
        plan.queries = list(queries)
        return plan

    def _plan_put(self, op: PutOp, i: int) -> _Put:
        if not op.namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        key = _key(op.key, i)
        if op.value is None:
            return _Put(op, None, [])
        if not isinstance(op.value, dict):
            raise ContractError(f"ops[{i}].value must be a dict (or None to delete), got {type(op.value).__name__}")
        try:
            value: dict[str, Any] = check_json_value(op.value, f"the value of key {key!r}")
        except ValueError as exc:
            raise ContractError(f"ops[{i}]: {exc}") from None
        if op.ttl is not None and (
            isinstance(op.ttl, bool) or not isinstance(op.ttl, int | float) or not math.isfinite(op.ttl) or op.ttl < 0
        ):
            raise ContractError(f"ops[{i}].ttl must be a non-negative number of minutes or None, got {op.ttl!r}")
        if op.ttl is not None and not in_horizon(self._clock() + 120.0 * op.ttl):
            raise ContractError(
                f"ops[{i}].ttl: {op.ttl!r} minutes from now (twice that once refreshed) ends after "
                "year 9999 UTC, the latest expiry coniti stores"
            )
        texts: list[str] = []
        if self._index is not None and op.index is not False:
            texts = self._index.texts(value, None if op.index is None else list(op.index))
        return _Put(op, value, texts)

    # -- running a planned batch ---------------------------------------------------------------

    def _run(self, plan: _Plan, queries: dict[str, np.ndarray]) -> list[Result]:
        results: list[Result] = [None] * len(plan.ops)
        now = self._clock()
        refresh: list[MemoryRecord] = []
        gets = _by_namespace((op.namespace, i) for i, op in enumerate(plan.ops) if isinstance(op, GetOp))
        for ns, positions in gets.items():
            keys = list(dict.fromkeys(cast(GetOp, plan.ops[i]).key for i in positions))
            found = {r.id: r for r in self._memory.get(GetRequest(ids=keys, namespace=ns)).records}
            for i in positions:
                op = cast(GetOp, plan.ops[i])
                record = found.get(op.key)
                if record is not None and self._leases.visible(record, now):
                    results[i] = item_of(record)
                    if op.refresh_ttl and self._refresh_on_read:
                        refresh.append(record)
        for i, read in enumerate(plan.ops):
            if isinstance(read, SearchOp):
                results[i] = self._search(read, queries, now, refresh)
            elif isinstance(read, ListNamespacesOp):
                results[i] = self._list(read)
        if refresh and not self._memory.read_only:
            self._refresh(refresh, now)
        if plan.puts:
            self._apply(plan.puts, now)
        return results

    def _search(
        self, op: SearchOp, queries: dict[str, np.ndarray], now: float, refresh: list[MemoryRecord]
    ) -> list[SearchItem]:
        match = coniti_filter(op.filter)
        records = [
            r
            for ns in self._memory.namespaces(op.namespace_prefix)
            for r in self._memory.scan(ScanRequest(namespace=ns, filter=match)).records
            if self._leases.visible(r, now)
        ]
        records.sort(key=_listing_key)
        end = op.offset + op.limit
        if op.query and op.query in queries:
            page = _ranked(records, queries[op.query], end)[op.offset : end]
        else:
            page = [(r, None) for r in records[op.offset : end]]
        if op.refresh_ttl and self._refresh_on_read:
            refresh.extend(r for r, _ in page)
        return [search_item_of(r, score) for r, score in page]

    def _list(self, op: ListNamespacesOp) -> list[Namespace]:
        conditions = tuple(op.match_conditions or ())
        base: list[str] = []
        if conditions and conditions[0].match_type == "prefix":
            for part in conditions[0].path:
                if part == "*":
                    break
                base.append(part)
        live = self._memory.namespaces(tuple(base))
        chosen = [ns for ns in live if all(_matches(c, ns) for c in conditions)]
        if op.max_depth is not None:
            chosen = sorted({ns[: op.max_depth] for ns in chosen})
        return chosen[op.offset : op.offset + op.limit]

    def _apply(self, puts: dict[tuple[Namespace, str], _Put], now: float) -> None:
        index = self._index
        embedding_id = None if index is None else index.embedding_id
        for ns, group in _by_namespace((ns, (key, put)) for (ns, key), put in puts.items()).items():
            keys = [key for key, _ in group]
            for _ in range(_RETRIES):
                current = {r.id: r for r in self._memory.get(GetRequest(ids=keys, namespace=ns)).records}
                ops: list[UpsertOp | PatchOp | DeleteOp] = []
                expect: dict[str, int | None] = {}
                for key, put in group:
                    live = current.get(key)
                    expect[key] = None if live is None else live.version
                    if put.value is None:
                        ops.append(DeleteOp(id=key))
                        continue
                    ttl = put.op.ttl
                    created = now if live is None else float(live.note.metadata[CREATED])
                    record = make_record(
                        ns, key, put.value,
                        created_at=created, updated_at=now, ttl=ttl,
                        texts=put.texts, vectors=put.vectors,
                        expires_at=None if ttl is None else now + 60.0 * ttl,
                        embedding_id=embedding_id,
                    )
                    ops.append(UpsertOp(record=record))
                try:
                    self._memory.write(WriteRequest(ops=ops, namespace=ns, expect=expect))
                    break
                except VersionConflict:
                    continue  # another writer changed one of these items between the read and the write
            else:
                raise VersionConflict(keys[0], None, None, ns)
            self._leases.drop(ns, keys)

    # -- TTL -------------------------------------------------------------------------------------

    def _refresh(self, records: list[MemoryRecord], now: float) -> None:
        """Renew the lease of every record read with ``refresh_ttl`` that has a ttl; append one
        expiry patch for those whose lease would outlive their expiry in the log."""
        extend: list[tuple[Namespace, tuple[str, int, float, float]]] = []
        for r in records:
            ttl = ttl_of(r)
            if ttl is None or r.version is None or r.expires_at is None:
                continue
            deadline = now + 60.0 * ttl
            if r.expires_at >= deadline:
                self._leases.renew(r.namespace, r.id, r.version, deadline)
            else:
                extend.append((r.namespace, (r.id, r.version, deadline, now + 120.0 * ttl)))
        for ns, items in _by_namespace(extend).items():
            unique = {key: (version, deadline, horizon) for key, version, deadline, horizon in items}
            ops = [PatchOp(id=key, expires_at=horizon) for key, (_, _, horizon) in unique.items()]
            expect: dict[str, int | None] = {key: v for key, (v, _, _) in unique.items()}
            for result in self._write_each(ns, ops, expect):
                for key, version in result.versions.items():
                    self._leases.renew(ns, key, version, unique[key][1])

    def _write_each(
        self, ns: Namespace, ops: Sequence[PatchOp | DeleteOp], expect: dict[str, int | None]
    ) -> Iterator[WriteResult]:
        """``ops`` as one write; when a concurrent change makes an expectation fail, one write per
        op, skipping those whose item changed."""
        try:
            yield self._memory.write(WriteRequest(ops=list(ops), namespace=ns, expect=expect, missing_ok=True))
            return
        except VersionConflict:
            pass
        for op in ops:
            with contextlib.suppress(VersionConflict):
                yield self._memory.write(
                    WriteRequest(ops=[op], namespace=ns, expect={op.id: expect[op.id]}, missing_ok=True)
                )

    def _ttl_stamp(self) -> contextlib.AbstractContextManager[None]:
        memory = self._memory
        return memory.audit(TTL_ACTOR, "expired") if isinstance(memory, LogBackend) else contextlib.nullcontext()

    def sweep_ttl(self) -> int:
        """Delete every item whose lease passed, then every item the backend's expiry hides (its
        ``sweep``); returns how many items were deleted. Each is one delete event, stamped
        ``coniti-ttl`` / ``expired`` on a LogBackend; safe to run concurrently."""
        if self._memory.read_only:
            raise ReadOnlyError(f"this store reads {self._memory!r}, which is read-only; nothing was swept")
        now = self._clock()
        deleted = 0
        with self._ttl_stamp():
            for ns, items in _by_namespace((ns, (key, v)) for ns, key, v in self._leases.due(now)).items():
                ops = [DeleteOp(id=key) for key, _ in items]
                expect: dict[str, int | None] = dict(items)
                for result in self._write_each(ns, ops, expect):
                    deleted += len(result.deleted)
                self._leases.drop(ns, expect)
            deleted += self._memory.sweep(now).deleted
        return deleted

    async def asweep_ttl(self) -> int:
        """:meth:`sweep_ttl` on a worker thread."""
        return await asyncio.to_thread(self.sweep_ttl)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> concurrent.futures.Future[None]:
        """Run :meth:`sweep_ttl` every ``sweep_interval_minutes`` (default: the ttl config's
        ``sweep_interval_minutes``, else 5) on a daemon thread until :meth:`stop_ttl_sweeper` or
        :meth:`close`. Returns a future that completes when the sweeper stops; a second call returns
        the running sweeper's future. A failed sweep is logged and the next one runs as planned."""
        minutes = sweep_interval_minutes
        if minutes is None:
            minutes = (self.ttl_config or {}).get("sweep_interval_minutes") or _DEFAULT_SWEEP_MINUTES
        if isinstance(minutes, bool) or not isinstance(minutes, int | float) or not minutes > 0:
            raise ContractError(f"sweep_interval_minutes must be a positive number, got {minutes!r}")
        with self._sweeper_lock:
            if self._sweeper is not None and self._sweeper[0].is_alive():
                return self._sweeper[2]
            stop = threading.Event()
            done: concurrent.futures.Future[None] = concurrent.futures.Future()
            interval = 60.0 * float(minutes)

            def loop() -> None:
                try:
                    while not stop.wait(interval):
                        try:
                            self.sweep_ttl()
                        except Exception:
                            logger.exception("coniti TTL sweep failed")
                finally:
                    done.set_result(None)

            thread = threading.Thread(target=loop, name="coniti-ttl-sweeper", daemon=True)
            self._sweeper = (thread, stop, done)
            thread.start()
            return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper started by :meth:`start_ttl_sweeper`; True when it has stopped (within
        ``timeout`` seconds) or none was running."""
        with self._sweeper_lock:
            sweeper, self._sweeper = self._sweeper, None
        if sweeper is None:
            return True
        thread, stop, _ = sweeper
        stop.set()
        thread.join(timeout)
        return not thread.is_alive()

    # -- coniti's extensions -------------------------------------------------------------------

    def at(self, seq: int | None = None, *, time: float | datetime | None = None) -> ConitiStore:
        """A read-only store of the items as they were right after event ``seq`` of the log (or the
        last event at or before ``time``), with the same index; puts raise :class:`ReadOnlyError`.
        Needs a backend that declares ``supports_time_travel`` (a LogBackend)."""
        travel = time_travel(self._memory)
        if travel is None:
            raise NotSupported(f"the {self._memory.kind!r} backend keeps no past states")
        return ConitiStore(travel.at(seq, time=time), index=self._index_arg, clock=self._clock)

    def history(self, namespace: tuple[str, ...], key: str) -> list[Event]:
        """Every event of the item, oldest first: each put (``record.note.metadata["value"]`` is
        the value it wrote, ``replaces`` the version it replaced) and the delete that ended a
        version, each with its ``seq``, ``at``, ``actor`` and ``reason``. Needs a LogBackend."""
        validate_op_namespace(GetOp(tuple(namespace), key))
        if not isinstance(key, str) or not key:
            raise ContractError(f"key must be a non-empty string, got {key!r}")
        memory = self._memory
        if not isinstance(memory, LogBackend):
            raise NotSupported(f"the {memory.kind!r} backend keeps no history")
        return memory.history(key, tuple(namespace))

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the sweeper; close the backend if this store opened it (from a path)."""
        self.stop_ttl_sweeper()
        if self._owned:
            self._memory.close()

    def __enter__(self) -> ConitiStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _key(key: Any, i: int) -> str:
    if not isinstance(key, str) or not key:
        raise ContractError(f"ops[{i}].key must be a non-empty string, got {key!r}")
    return key


def _ttl_config(ttl: TTLConfig) -> TTLConfig:
    if not isinstance(ttl, dict):
        raise ContractError(f"ttl must be a TTLConfig dict, got {type(ttl).__name__}")
    default = ttl.get("default_ttl")
    if default is not None and (
        isinstance(default, bool) or not isinstance(default, int | float) or not math.isfinite(default) or default < 0
    ):
        raise ContractError(f"ttl['default_ttl'] must be a non-negative number of minutes or None, got {default!r}")
    return cast(TTLConfig, dict(ttl))


def _ranked(
    records: list[MemoryRecord], query: np.ndarray, k: int
) -> list[tuple[MemoryRecord, float | None]]:
    """The first ``k`` of ``records`` (in listing order) ranked for ``query``: items with vectors by
    their best vector's cosine similarity (exact for every item that can reach the first ``k``),
    then the others, unscored, in listing order."""
    blocks: list[np.ndarray] = []
    owners: list[int] = []
    scoreless: list[MemoryRecord] = []
    for position, record in enumerate(records):
        rows = vectors_of(record)
        if rows is None or rows.shape[1] != query.shape[0]:
            scoreless.append(record)
            continue
        blocks.append(rows)
        owners.append(position)
    if not blocks:
        return [(r, None) for r in scoreless[:k]]
    starts = np.cumsum([0] + [b.shape[0] for b in blocks[:-1]])
    unit = unit_rows(np.concatenate(blocks))
    q = unit_rows(query[None, :])[0]
    approx = np.maximum.reduceat(fast_scores(unit, q), starts)
    candidates = select_candidates(approx, k, error_bound(q.shape[0]))
    scored: list[tuple[float, int]] = []
    for c in candidates.tolist():
        a = int(starts[c])
        b = a + blocks[c].shape[0]
        scored.append((max(exact_scores(unit[a:b], q)), c))
    scored.sort(key=lambda sc: (-sc[0], sc[1]))
    out: list[tuple[MemoryRecord, float | None]] = [(records[owners[c]], s) for s, c in scored[:k]]
    if len(out) < k:
        out.extend((r, None) for r in scoreless[: k - len(out)])
    return out
