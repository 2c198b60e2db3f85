"""The scoped handle: :class:`ScopedEngine`, what ``engine.scoped(scope)`` and
``Container.scoped(scope)`` return.

It puts the trusted :class:`~coniti.scope.Scope` into every call (how a scope is stored and the
trust model: :mod:`coniti.scope`). Its calls mirror the engine's and the store's, with namespaces
*relative to the scope*: ``namespace=("notes",)`` is ``scope.home + ("notes",)`` in the store, and
``()`` (the default) the scope's own home. A namespace that starts with ``"@scope"`` is taken as
absolute: it must lie under the handle's scope (its own home, or that of a scope that extends it);
results carry absolute namespaces, so a namespace read from a result can be passed back.

Refused with :class:`~coniti.scope.ScopeError` (a :class:`~coniti.errors.ContractError`; one line
naming the field or record; nothing written, nothing read):

* a namespace or prefix of another scope (a forged scope), for reads and writes; a mutation of a
  record by id therefore never reaches a record outside the scope (an id of another scope is simply
  not there: ``get`` reports it ``missing``, ``remove`` too, ``update`` raises
  :class:`~coniti.errors.RecordNotFound`);
* the reserved metadata key ``"scope"`` in a note's metadata, ``update``'s ``metadata`` or
  ``metadata_patch``, a snapshot's records; a filter path ``"scope"`` (``query.filter``, ``scan``,
  ``count``).

Async twins (``aingest``, ``aingest_many``, ``aupsert``, ``aupdate``, ``aremove``, ``aget``,
``aask``, ``acontext``) run the sync call on a worker thread, with the same checks.

``conversation(name)`` opens a :class:`~coniti.conversation.Conversation` under the scope's home:
its appends go through the handle's write path (``restore``), its reads, windows, recall and state
stay in the scope.

Reads (``get``, ``ask``, ``context``, ``scan``, ``count``, ``namespaces``, ``history``, ``events``,
``follow``, ``diff``, ``feedback``, ``snapshot``, ``dump``, and a handle of the past from
:meth:`ScopedEngine.at`) see only namespaces under the scope's root. ``ask(prefix=())`` answers from
every namespace of the scope and the scopes that extend it. Calls of the audit trail (``history``,
``events``, ``follow``, ``diff``, ``erase``) need a backend that has them (LogBackend); elsewhere they
raise :class:`~coniti.errors.NotSupported`. Store-wide operations (``sweep``, ``compact``,
``verify``, ``export_log``, ``import_log``, ``load``) are not on the handle: they are the
administrator's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import EllipsisType
from typing import IO, TYPE_CHECKING, Any, Literal, cast

from coniti.actor import Note, Query, TimeRange
from coniti.batch import NoteBatch
from coniti.errors import ContractError, NotSupported, namespace_text
from coniti.memory import (
    CountRequest,
    DeleteResult,
    FeedbackResult,
    GetResult,
    ScanRequest,
    ScanResult,
    WriteResult,
    as_namespace,
    to_thread,
)
from coniti.recall import ContextBlock, HitLike
from coniti.scope import (
    SCOPE_ROOT,
    Scope,
    ScopeError,
    check_filter,
    check_metadata,
    scope_of,
    writing_as,
)

if TYPE_CHECKING:
    from coniti.conversation import Conversation
    from coniti.engine import Answer, ContinuityEngine, IngestResult, Snapshot
    from coniti.events import Diff, EraseResult, Event

__all__ = ["ScopedEngine"]


def as_scope(value: Any) -> Scope:
    """``value`` as a :class:`Scope`: a Scope, a mapping of its fields, or ``"user=alice,..."``."""
    if isinstance(value, Scope):
        return value
    if isinstance(value, str):
        return Scope.parse(value)
    if isinstance(value, Mapping):
        return Scope(**dict(value))
    raise ContractError(f"scope must be a Scope, a mapping or 'field=value,...', got {type(value).__name__}")


class _AsyncTwins:
    """The scoped handle's async twins: the sync call on a worker thread, with the same checks
    (a base of :class:`ScopedEngine` only)."""

    async def aingest(self, note: Note | str, **options: Any) -> IngestResult:
        """:meth:`ingest` on a worker thread."""
        return await to_thread(_handle(self).ingest, note, **options)

    async def aingest_many(
        self, notes: Iterable[Note | str] | NoteBatch, **options: Any
    ) -> list[IngestResult]:
        """:meth:`ingest_many` on a worker thread."""
        return await to_thread(_handle(self).ingest_many, notes, **options)

    async def aupsert(self, note: Note | str, **options: Any) -> WriteResult:
        """:meth:`upsert` on a worker thread."""
        return await to_thread(_handle(self).upsert, note, **options)

    async def aupdate(self, id: str, **options: Any) -> WriteResult:
        """:meth:`update` on a worker thread."""
        return await to_thread(_handle(self).update, id, **options)

    async def aremove(self, ids: Iterable[str], **options: Any) -> DeleteResult:
        """:meth:`remove` on a worker thread."""
        return await to_thread(_handle(self).remove, ids, **options)

    async def aget(self, ids: Iterable[str], **options: Any) -> GetResult:
        """:meth:`get` on a worker thread."""
        return await to_thread(_handle(self).get, ids, **options)

    async def aask(self, query: Query | str, **options: Any) -> Answer:
        """:meth:`ask` on a worker thread."""
        return await to_thread(_handle(self).ask, query, **options)

    async def acontext(self, query: Query | str, **options: Any) -> ContextBlock:
        """:meth:`context` on a worker thread."""
        return await to_thread(_handle(self).context, query, **options)


def _handle(twins: _AsyncTwins) -> ScopedEngine:
    """The scoped handle the twins belong to."""
    return cast("ScopedEngine", twins)


class ScopedEngine(_AsyncTwins):
    """An engine seen through a trusted :class:`Scope` (module docstring)."""

    def __init__(self, engine: ContinuityEngine, scope: Scope | Mapping[str, str] | str) -> None:
        self._engine = engine
        self._scope = as_scope(scope)

    @property
    def scope(self) -> Scope:
        """The trusted scope this handle adds to every call."""
        return self._scope

    @property
    def home(self) -> tuple[str, ...]:
        """The absolute namespace of the handle's ``namespace=()``."""
        return self._scope.home

    @property
    def read_only(self) -> bool:
        """True when writes are refused (a handle of the past, a read-only store)."""
        return self._engine.read_only

    def __repr__(self) -> str:
        return f"ScopedEngine({self._scope})"

    # -- namespaces ------------------------------------------------------------------------------

    def namespace(self, namespace: Sequence[str] = (), *, field: str = "namespace", what: str = "") -> tuple[str, ...]:
        """The absolute namespace of ``namespace`` (module docstring); :class:`ScopeError` for one
        of another scope, naming ``field`` and ``what`` (the record at stake, if any)."""
        try:
            ns = as_namespace(namespace)
        except ContractError as exc:
            raise ContractError(f"{field}: {exc}") from None
        if ns and ns[0] == SCOPE_ROOT:
            if scope_of(ns) is None or not self._scope.holds(ns):
                raise _outside(self._scope, ns, field, what)
            return ns
        return (*self._scope.home, *ns)

    def prefix(self, prefix: Sequence[str] = (), *, field: str = "prefix") -> tuple[str, ...]:
        """The absolute prefix of ``prefix``: ``()`` is the scope's root (its home and the scopes
        that extend it); else as :meth:`namespace`, an absolute one only under the root."""
        try:
            ns = as_namespace(prefix)
        except ContractError as exc:
            raise ContractError(f"{field}: {exc}") from None
        if not ns:
            return self._scope.root
        if ns[0] == SCOPE_ROOT:
            if not self._scope.holds(ns):
                raise _outside(self._scope, ns, field, "")
            return ns
        return (*self._scope.home, *ns)

    # -- writes ----------------------------------------------------------------------------------

    def ingest(self, note: Note | str, *, namespace: Sequence[str] = (), no_expiry: bool = False) -> IngestResult:
        """:meth:`ContinuityEngine.ingest <coniti.engine.ContinuityEngine.ingest>` into the scope."""
        return self.ingest_many([note], namespace=namespace, no_expiry=no_expiry)[0]

    def ingest_many(
        self,
        notes: Iterable[Note | str] | NoteBatch,
        *,
        namespace: Sequence[str] = (),
        op_id: str | None = None,
        no_expiry: bool = False,
    ) -> list[IngestResult]:
        """:meth:`ContinuityEngine.ingest_many <coniti.engine.ContinuityEngine.ingest_many>` into
        the scope; a note whose metadata holds ``"scope"`` refuses the whole batch."""
        batch: NoteBatch | list[Note | str] = notes if isinstance(notes, NoteBatch) else list(notes)
        for i, note in enumerate(batch):
            if isinstance(note, Note):
                check_metadata(note.metadata, f"notes[{i}].metadata")
        ns = self.namespace(namespace)
        with writing_as(self._scope):
            return self._engine.ingest_many(batch, namespace=ns, op_id=op_id, no_expiry=no_expiry)

    def upsert(
        self,
        note: Note | str,
        *,
        namespace: Sequence[str] = (),
        expected_version: int | None | EllipsisType = ...,
        op_id: str | None = None,
        expires_at: float | datetime | None = None,
        no_expiry: bool = False,
    ) -> WriteResult:
        """:meth:`ContinuityEngine.upsert <coniti.engine.ContinuityEngine.upsert>` in the scope
        (``expires_at``: the scoped way to expire a note)."""
        if isinstance(note, Note):
            check_metadata(note.metadata, "note.metadata")
        what = f"record {note.id!r}" if isinstance(note, Note) else ""
        ns = self.namespace(namespace, what=what)
        with writing_as(self._scope):
            return self._engine.upsert(
                note, namespace=ns, expected_version=expected_version, op_id=op_id, expires_at=expires_at,
                no_expiry=no_expiry,
            )

    def update(
        self,
        id: str,
        *,
        text: str | None = None,
        timestamp: float | datetime | None = None,
        metadata: dict[str, Any] | None = None,
        metadata_patch: dict[str, Any] | None = None,
        namespace: Sequence[str] = (),
        expected_version: int | None | EllipsisType = ...,
        op_id: str | None = None,
    ) -> WriteResult:
        """:meth:`ContinuityEngine.update <coniti.engine.ContinuityEngine.update>` (the patch path)
        of a note of the scope."""
        check_metadata(metadata, "metadata")
        check_metadata(metadata_patch, "metadata_patch")
        ns = self.namespace(namespace, what=f"record {id!r}")
        with writing_as(self._scope):
            return self._engine.update(
                id, text=text, timestamp=timestamp, metadata=metadata, metadata_patch=metadata_patch,
                namespace=ns, expected_version=expected_version, op_id=op_id,
            )  # fmt: skip

    def remove(self, ids: Iterable[str], *, namespace: Sequence[str] = ()) -> DeleteResult:
        """:meth:`ContinuityEngine.remove <coniti.engine.ContinuityEngine.remove>` of notes of the scope."""
        id_list = list(ids)
        ns = self.namespace(namespace, what=_records(id_list))
        with writing_as(self._scope):
            return self._engine.remove(id_list, namespace=ns)

    def improve(
        self, id: str, weight: float, *, namespace: Sequence[str] = (), reason: str | None = None
    ) -> FeedbackResult:
        """:meth:`ContinuityEngine.improve <coniti.engine.ContinuityEngine.improve>` of a note of the scope."""
        ns = self.namespace(namespace, what=f"record {id!r}")
        with writing_as(self._scope):
            return self._engine.improve(id, weight, namespace=ns, reason=reason)

    def restore(self, snapshot: Snapshot, *, namespace: Sequence[str] | None = None) -> int:
        """:meth:`ContinuityEngine.restore <coniti.engine.ContinuityEngine.restore>` into the
        scope: ``namespace`` (relative) if given, else the snapshot's own namespace, which must then
        be one of the scope (a snapshot taken through this handle is)."""
        for i, record in enumerate(getattr(snapshot, "records", ())):
            check_metadata(record.note.metadata, f"snapshot.records[{i}].metadata")
        if namespace is None:
            ns = self.namespace(getattr(snapshot, "namespace", ()), field="snapshot.namespace")
        else:
            ns = self.namespace(namespace)
        with writing_as(self._scope):
            return self._engine.restore(snapshot, namespace=ns)

    def erase(self, ids: Sequence[str], *, namespace: Sequence[str] = (), reason: str) -> EraseResult:
        """:meth:`LogBackend.erase <coniti.impl.log.LogBackend.erase>` of notes of the scope (every
        version's content), then the engine catches up."""
        id_list = list(ids)
        ns = self.namespace(namespace, what=_records(id_list))
        if self._engine.read_only:
            from coniti.errors import ReadOnlyError

            raise ReadOnlyError("this handle is read-only")
        result: EraseResult = _store(self._engine, "erase").erase(id_list, namespace=ns, reason=reason)
        self._engine.refresh()
        return result

    # -- reads -----------------------------------------------------------------------------------

    def get(self, ids: Iterable[str], *, namespace: Sequence[str] = ()) -> GetResult:
        """Notes of the scope by id; ids not there (also those of other scopes) in ``missing``."""
        return self._engine.get(ids, namespace=self.namespace(namespace))

    def ask(
        self,
        query: Query | str,
        *,
        namespace: Sequence[str] = (),
        prefix: Sequence[str] | None = None,
        valid_at: float | datetime | None = None,
        include_superseded: bool = False,
        receipt: bool | Literal["with_query"] = False,
    ) -> Answer:
        """:meth:`ContinuityEngine.ask <coniti.engine.ContinuityEngine.ask>` within the scope: from
        ``namespace`` (relative; default the scope's home), or with ``prefix`` from every namespace
        under it (``prefix=()``: the whole scope and the scopes that extend it); ``valid_at``,
        ``include_superseded`` and ``receipt`` as there (a receipt is kept in the store's log)."""
        if isinstance(query, Query):
            check_filter(query.filter, "query.filter")
        ns, pre = self._where(namespace, prefix)
        when: dict[str, Any] = {"valid_at": valid_at, "include_superseded": include_superseded, "receipt": receipt}
        if pre is not None:
            return self._engine.ask(query, prefix=pre, **when)
        return self._engine.ask(query, namespace=ns, **when)

    def context(
        self,
        query: Query | str,
        *,
        token_budget: int,
        namespace: Sequence[str] = (),
        prefix: Sequence[str] | None = None,
        estimator: Callable[[str], int] | None = None,
        render: Callable[[HitLike], str] | None = None,
        valid_at: float | datetime | None = None,
        include_superseded: bool = False,
        receipt: bool | Literal["with_query"] = False,
    ) -> ContextBlock:
        """:meth:`ContinuityEngine.context <coniti.engine.ContinuityEngine.context>` within the
        scope (``valid_at`` and ``include_superseded`` as there)."""
        if isinstance(query, Query):
            check_filter(query.filter, "query.filter")
        ns, pre = self._where(namespace, prefix)
        options: dict[str, Any] = {
            "token_budget": token_budget, "estimator": estimator, "render": render,
            "valid_at": valid_at, "include_superseded": include_superseded, "receipt": receipt,
        }  # fmt: skip
        if pre is not None:
            return self._engine.context(query, prefix=pre, **options)
        return self._engine.context(query, namespace=ns, **options)

    def _where(
        self, namespace: Sequence[str], prefix: Sequence[str] | None
    ) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
        if prefix is None:
            return self.namespace(namespace), None
        if as_namespace(namespace):
            raise ContractError("give namespace or prefix, not both")
        return (), self.prefix(prefix)

    def scan(
        self,
        *,
        namespace: Sequence[str] = (),
        time_range: TimeRange | None = None,
        filter: Any = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ScanResult:
        """A page of the scope's ``namespace`` in (timestamp, write order) (:meth:`MemoryBackend.scan
        <coniti.memory.MemoryBackend.scan>`)."""
        check_filter(filter, "filter")
        request = ScanRequest(
            namespace=self.namespace(namespace), time_range=time_range, filter=filter, limit=limit, cursor=cursor
        )
        return self._engine.memory.scan(request)

    def count(
        self, *, namespace: Sequence[str] = (), time_range: TimeRange | None = None, filter: Any = None
    ) -> int:
        """How many records the scope's ``namespace`` holds (matching ``filter``)."""
        check_filter(filter, "filter")
        request = CountRequest(namespace=self.namespace(namespace), time_range=time_range, filter=filter)
        return self._engine.memory.count(request).count

    def namespaces(self, prefix: Sequence[str] = ()) -> list[tuple[str, ...]]:
        """The live namespaces under ``prefix`` (``()``: every one of the scope), absolute."""
        return self._engine.memory.namespaces(self.prefix(prefix))

    def feedback(self, namespace: Sequence[str] = ()) -> dict[str, float]:
        """:meth:`ContinuityEngine.feedback <coniti.engine.ContinuityEngine.feedback>` of the scope's ``namespace``."""
        return self._engine.feedback(self.namespace(namespace))

    def snapshot(self, namespace: Sequence[str] = ()) -> Snapshot:
        """:meth:`ContinuityEngine.snapshot <coniti.engine.ContinuityEngine.snapshot>` of the scope's ``namespace``."""
        return self._engine.snapshot(self.namespace(namespace))

    def dump(self, target: str | Path | IO[str], namespace: Sequence[str] = ()) -> int:
        """The scope's ``namespace`` as a ``coniti-memory`` file (:meth:`MemoryBackend.dump
        <coniti.memory.MemoryBackend.dump>`); returns the record count."""
        return self._engine.memory.dump(target, self.namespace(namespace))

    def history(self, id: str, namespace: Sequence[str] = ()) -> list[Event]:
        """Every event that touched note ``id`` of the scope's ``namespace``, oldest first."""
        ns = self.namespace(namespace, what=f"record {id!r}")
        events: list[Event] = _store(self._engine, "history").history(id, ns)
        return events

    def events(
        self, after: int = 0, *, until: int | None = None, namespace: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> Iterator[Event]:  # fmt: skip
        """The audit trail of the scope: events with ``after < seq <= until`` of namespaces under
        the scope's root (of ``namespace`` only, when given), at most ``limit``, in order."""
        store = _store(self._engine, "events")
        if namespace is not None:
            return iter(store.events(after, until=until, namespace=self.namespace(namespace), limit=limit))
        return _first(_mine(self._scope, store.events(after, until=until)), limit)

    def follow(self, after: int | None = None, *, timeout: float | None = None) -> Iterator[Event]:
        """:meth:`LogBackend.follow <coniti.impl.log.LogBackend.follow>`: a live tail of the
        scope's events only."""
        return _mine(self._scope, _store(self._engine, "follow").follow(after, timeout=timeout))

    def diff(
        self, a: int, b: int, *, namespace: Sequence[str] | None = None, prefix: Sequence[str] | None = None
    ) -> list[Diff]:
        """Record ids added, removed and changed between points ``a`` and ``b``: of ``namespace``
        (one :class:`~coniti.events.Diff`), else of every namespace under ``prefix`` (default: the
        whole scope), one per namespace with a change."""
        store = _store(self._engine, "diff")
        if namespace is not None:
            if prefix is not None:
                raise ContractError("give namespace or prefix, not both")
            return [store.diff(a, b, namespace=self.namespace(namespace))]
        diffs: list[Diff] = store.diff_all(a, b, prefix=self.prefix(() if prefix is None else prefix))
        return diffs

    def at(self, seq: int | None = None, *, time: float | datetime | None = None) -> ScopedEngine:
        """A read-only handle of the same scope over memory as it was after event ``seq`` (or at
        ``time``): :meth:`ContinuityEngine.at <coniti.engine.ContinuityEngine.at>`."""
        return ScopedEngine(self._engine.at(seq, time=time), self._scope)

    def conversation(self, name: str, *, namespace: Sequence[str] = ()) -> Conversation:
        """The conversation ``name`` under the scope's ``namespace`` (relative; its turns live in
        ``(*home, *namespace, "conversations", name)``): appends go through this handle's write
        path, reads and recall stay in the scope (:class:`~coniti.conversation.Conversation`).
        :class:`ScopeError` for a ``namespace`` of another scope. Nothing is written until a turn
        is appended."""
        from coniti.conversation import Conversation

        return Conversation(self, name, namespace=namespace)

    def refresh(self) -> int:
        """:meth:`ContinuityEngine.refresh <coniti.engine.ContinuityEngine.refresh>`."""
        return self._engine.refresh()

    def close(self) -> None:
        """Drop the derived state of a handle from :meth:`at`; nothing on other handles (the
        engine's owner closes the engine)."""
        if self._engine.memory.as_of is not None:
            self._engine.close()


def _outside(scope: Scope, ns: tuple[str, ...], field: str, what: str) -> ScopeError:
    at = f" ({what})" if what else ""
    return ScopeError(
        f"{field} {namespace_text(ns)}{at} is outside this handle's scope {scope}; "
        "nothing was read or written"
    )


def _store(engine: ContinuityEngine, call: str) -> Any:
    """The engine's memory when it has the audit-trail call ``call``, else :class:`NotSupported`."""
    store = engine.memory
    if not callable(getattr(store, call, None)):
        raise NotSupported(f"{call} needs a memory backend with an audit trail (e.g. LogBackend); {store.kind!r} has none")
    return store


def _mine(scope: Scope, events: Iterable[Event]) -> Iterator[Event]:
    """The events of namespaces under ``scope``'s root."""
    root = scope.root
    n = len(root)
    return (e for e in events if tuple(e.namespace[:n]) == root)


def _first(events: Iterator[Event], limit: int | None) -> Iterator[Event]:
    if limit is None:
        yield from events
        return
    if limit <= 0:
        return
    for n, event in enumerate(events, start=1):
        yield event
        if n >= limit:
            return


def _records(ids: Sequence[str]) -> str:
    if not ids:
        return ""
    more = f" and {len(ids) - 1} more" if len(ids) > 1 else ""
    return f"record {ids[0]!r}{more}"
