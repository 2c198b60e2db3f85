"""The memory backend interface: :class:`MemoryBackend` and its declared capabilities.

Every read and write of memory goes through :class:`MemoryBackend`. Its abstract core is the spec's
eight operations (``put``, ``get``, ``delete``, ``scan``, ``count``, ``get_meta``, ``set_meta``,
``clear``), each taking a request contract and returning a result contract, plus ``namespaces``
(the live namespaces under a prefix). Everything else — paging (``iter_all``), the memory file
(``dump``/``load``), async twins and request factories — is written once here on top of that core,
so every backend inherits it. :class:`MemoryBackend` is assembled from its parts: the operations
(:class:`BackendOperations`), their async twins (:class:`AsyncTwins`), the request factories
(:class:`RequestFactories`), and the helpers built on ``scan`` and the memory file.

The values it moves live beside it: records in :mod:`coniti.records` (:class:`MemoryRecord`,
:data:`Namespace`), requests, results and write operations in :mod:`coniti.requests`. This module
re-exports every public name of both (and the memory errors), so ``from coniti.memory import X``
is the one import path the spec gives for all of them.

Rules every backend follows (checked by :mod:`coniti.testing`):

* ``put`` is all-or-nothing per call: an existing id, or an id repeated in the call, raises
  :class:`DuplicateRecord` and nothing is written. The same id in different namespaces is allowed.
* ``get``/``delete`` report unknown ids in ``missing`` and never raise for them; repeated ids count once,
  in first-occurrence order; ``get`` keeps request order.
* ``scan`` orders by (timestamp, write order), uses half-open ranges and pages exactly; a cursor resumes
  correctly across deletes and inserts between pages.
* Cursors are opaque: malformed, empty, foreign-instance and foreign-namespace cursors raise
  :class:`InvalidCursor`.
* Namespaces are isolated; records are copied in and out; async results equal sync results.
* A record without a vector (``vector=None``) or with a blob is stored, read, counted, filtered,
  dumped and loaded like any other; a blob comes back byte for byte.
* A write returns what it wrote: the versions a put, ``put_batch`` or ``write`` result gives its
  records are the versions later reads show; with an event feed, the ``seqs`` of a put, write or
  delete result are the sequence numbers of its events.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, ClassVar, Protocol, Self, TypeVar, cast

from coniti.actor import TimeRange
from coniti.errors import (
    ContractError,
    DuplicateRecord,
    IdempotencyConflict,
    InvalidCursor,
    MemoryBackendError,
    MemoryFileError,
    NotSupported,
    ReadOnlyError,
    RecordNotFound,
    VersionConflict,
)
from coniti.records import VECTOR_DTYPES as VECTOR_DTYPES
from coniti.records import Blob as Blob
from coniti.records import MemoryRecord, Namespace, as_namespace
from coniti.records import StoredRow as StoredRow
from coniti.records import Vector as Vector
from coniti.records import as_blob as as_blob
from coniti.records import as_vector as as_vector
from coniti.requests import Change as Change
from coniti.requests import (
    ClearRequest,
    ClearResult,
    CountRequest,
    CountResult,
    DeleteOp,
    DeleteRequest,
    DeleteResult,
    FeedbackRequest,
    FeedbackResult,
    GetRequest,
    GetResult,
    MetaGetRequest,
    MetaResult,
    MetaSetRequest,
    PatchOp,
    PutRequest,
    PutResult,
    ScanRequest,
    ScanResult,
    SweepResult,
    UpsertOp,
    WriteRequest,
    WriteResult,
    require,
    unique_ids,
)
from coniti.requests import MetaKey as MetaKey
from coniti.requests import RecordId as RecordId
from coniti.requests import WriteOp as WriteOp
from coniti.requests import check_put_ids as check_put_ids
from coniti.requests import idempotency_conflict as idempotency_conflict
from coniti.requests import op_id_of as op_id_of
from coniti.requests import patched as patched
from coniti.requests import plan_write as plan_write

if TYPE_CHECKING:
    from coniti.batch import RecordBatch
    from coniti.events import Event

__all__ = [
    "ClearRequest",
    "ClearResult",
    "CountRequest",
    "CountResult",
    "DeleteOp",
    "DeleteRequest",
    "DeleteResult",
    "DerivedHome",
    "DuplicateRecord",
    "EventFeed",
    "FeedbackRequest",
    "FeedbackResult",
    "GetRequest",
    "GetResult",
    "IdempotencyConflict",
    "InvalidCursor",
    "MemoryBackend",
    "MemoryBackendError",
    "MemoryFileError",
    "MemoryRecord",
    "MetaGetRequest",
    "MetaResult",
    "MetaSetRequest",
    "Namespace",
    "PatchOp",
    "PutRequest",
    "PutResult",
    "ReadOnlyError",
    "RecordNotFound",
    "ScanRequest",
    "ScanResult",
    "SweepResult",
    "TimeTravel",
    "UpsertOp",
    "VersionConflict",
    "WriteRequest",
    "WriteResult",
    "as_namespace",
    "audited",
    "closest_namespaces",
    "derived_home",
    "event_feed",
    "namespace_listing",
    "require",
    "time_travel",
    "unique_ids",
]

T = TypeVar("T")
_put_request = PutRequest.constructor()


def namespace_listing(
    live: Iterable[tuple[str, ...]], prefix: Sequence[str] = (), max_depth: int | None = None
) -> list[tuple[str, ...]]:
    """What :meth:`MemoryBackend.namespaces` returns, given every live namespace: those under
    ``prefix``, cut to their first ``max_depth`` parts, without repeats, sorted. The arguments are
    checked (:class:`ContractError`) before ``live`` is consumed."""
    try:
        start = as_namespace(prefix)
    except ContractError as exc:
        raise ContractError(f"prefix: {exc}") from None
    if max_depth is not None and (type(max_depth) is not int or max_depth < 1):
        raise ContractError(f"max_depth must be a positive integer or None, got {max_depth!r}")
    n = len(start)
    under = (ns for ns in live if ns[:n] == start)
    if max_depth is None:
        return sorted(set(under))
    return sorted({ns[:max_depth] for ns in under})


def closest_namespaces(
    namespace: Sequence[str], candidates: Iterable[tuple[str, ...]]
) -> list[tuple[str, ...]]:
    """``candidates`` ordered by closeness to ``namespace``: most leading parts in common first,
    then the most similar spelling (``difflib`` ratio of the parts joined by ``/``), then sorted.
    For "did you mean" hints when a namespace holds nothing."""
    from difflib import SequenceMatcher  # only for hints: not imported with the module

    asked = as_namespace(namespace)
    joined = "/".join(asked)

    def key(ns: tuple[str, ...]) -> tuple[int, float, tuple[str, ...]]:
        common = 0
        for a, b in zip(asked, ns, strict=False):
            if a != b:
                break
            common += 1
        return -common, -SequenceMatcher(None, joined, "/".join(ns)).ratio(), ns

    return sorted(set(candidates), key=key)


async def to_thread(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """:func:`asyncio.to_thread` (context variables carried along), for the async twins. asyncio
    is imported on first use, not with this module: a running event loop has imported it."""
    import asyncio

    return await asyncio.to_thread(func, *args, **kwargs)


class RequestFactories:
    """Request builders, a part of :class:`MemoryBackend`: ``put_request(records)``,
    ``get_request(ids, namespace)`` ... each the request contract of its operation built from
    plain arguments (validated as the contract validates them)."""

    def put_request(self, records: Iterable[MemoryRecord]) -> PutRequest:
        return PutRequest(records=list(records))

    def get_request(self, ids: Iterable[str], namespace: Sequence[str] = ()) -> GetRequest:
        return GetRequest(ids=list(ids), namespace=namespace)

    def delete_request(self, ids: Iterable[str], namespace: Sequence[str] = ()) -> DeleteRequest:
        return DeleteRequest(ids=list(ids), namespace=namespace)

    def scan_request(
        self,
        time_range: TimeRange | None = None,
        namespace: Sequence[str] = (),
        limit: int | None = None,
        cursor: str | None = None,
        *,
        filter: Any = None,
    ) -> ScanRequest:
        return ScanRequest(
            time_range=time_range, namespace=namespace, limit=limit, cursor=cursor, filter=filter
        )

    def count_request(
        self, time_range: TimeRange | None = None, namespace: Sequence[str] = (), *, filter: Any = None
    ) -> CountRequest:
        return CountRequest(time_range=time_range, namespace=namespace, filter=filter)

    def meta_get_request(self, key: str, namespace: Sequence[str] = ()) -> MetaGetRequest:
        return MetaGetRequest(key=key, namespace=namespace)

    def meta_set_request(self, key: str, value: Any, namespace: Sequence[str] = ()) -> MetaSetRequest:
        return MetaSetRequest(key=key, value=value, namespace=namespace)

    def clear_request(self, namespace: Sequence[str] = ()) -> ClearRequest:
        return ClearRequest(namespace=namespace)

    def write_request(
        self,
        ops: Iterable[UpsertOp | PatchOp | DeleteOp],
        namespace: Sequence[str] = (),
        *,
        expect: dict[str, int | None] | None = None,
        op_id: str | None = None,
        missing_ok: bool = False,
    ) -> WriteRequest:
        return WriteRequest(
            ops=list(ops), namespace=namespace, expect=expect or {}, op_id=op_id, missing_ok=missing_ok
        )


class BackendOperations(ABC):
    """The operations of a memory backend, the first part of :class:`MemoryBackend` (subclass that,
    not this): the abstract core (the spec's eight operations and :meth:`namespaces`), the optional
    operations each ``supports_*`` attribute declares (here they refuse with
    :class:`NotSupported`; ``put_batch`` builds the records and puts them), and the lifecycle
    (:meth:`close`, use as a context manager)."""

    kind: ClassVar[str]
    """Short name of the implementation, e.g. ``"in_memory"`` or ``"log"``."""

    read_only: bool = False
    """True when writes raise :class:`ReadOnlyError`: a time-travel view, or a store opened
    read-only (set per instance)."""

    as_of: int | None = None
    """For a time-travel view, the sequence number it shows memory right after; None for current
    memory (set per instance)."""

    # Optional capabilities: declared here, never detected; coniti.testing.CapabilityTests checks
    # that each declaration agrees with what the backend does.

    supports_time_travel: ClassVar[bool] = False
    """The backend is a :class:`TimeTravel`: ``at(seq, *, time=None)`` gives a read-only view of
    memory right after event ``seq`` (or at ``time``). Read it with :func:`time_travel`."""

    supports_event_feed: ClassVar[bool] = False
    """The backend is an :class:`EventFeed`: ``head`` and ``events(after, *, namespace=None)``, and
    every accepted write appends exactly one event per record put, per id deleted, per metadata
    write and per clear, and a :meth:`write` one per record it writes or deletes plus one ``op``
    event when it carries an op id; the results of :meth:`put`, :meth:`put_with_meta`,
    :meth:`put_batch`, :meth:`write` and :meth:`delete` carry the sequence numbers of the events
    they appended (``seqs``), which is how the engine knows its own events. Read it with
    :func:`event_feed`."""

    supports_put_with_meta: ClassVar[bool] = False
    """:meth:`put_with_meta` sets one metadata value and writes records as one all-or-nothing step."""

    supports_put_batches: ClassVar[bool] = False
    """:meth:`put_batches` writes any number of records (and one metadata value) as one
    all-or-nothing step; :meth:`load` then is all or nothing even when the process is killed."""

    supports_write: ClassVar[bool] = False
    """:meth:`write` (upsert, patch, delete, compare-and-set, op ids) and expiry (``expires_at``
    hidden from reads once passed, :meth:`sweep`) are implemented."""

    supports_feedback: ClassVar[bool] = False
    """:meth:`feedback` records feedback on a record and :meth:`feedback_weights` reads it back."""

    supports_derived_state: ClassVar[bool] = False
    """The backend is a :class:`DerivedHome`: it names a directory beside the store where derived
    state (the engine's indexes) may be kept, and the store's identity that such state is checked
    against. Read it with :func:`derived_home`."""

    # -- the abstract core -------------------------------------------------------------------

    @abstractmethod
    def put(self, request: PutRequest) -> PutResult:
        """Write the records, all or nothing; the result carries the version each received (and,
        with an event feed, the seqs of the events)."""

    @abstractmethod
    def get(self, request: GetRequest) -> GetResult:
        """Read records by id, in request order; unknown ids in ``missing``."""

    @abstractmethod
    def delete(self, request: DeleteRequest) -> DeleteResult:
        """Remove records by id; unknown ids in ``missing`` (with an event feed, ``seqs`` holds
        each deleted id's event)."""

    @abstractmethod
    def scan(self, request: ScanRequest) -> ScanResult:
        """One page in (timestamp, write order)."""

    @abstractmethod
    def count(self, request: CountRequest) -> CountResult:
        """How many records (in the time range)."""

    @abstractmethod
    def get_meta(self, request: MetaGetRequest) -> MetaResult:
        """A metadata value, or ``None``."""

    @abstractmethod
    def set_meta(self, request: MetaSetRequest) -> MetaResult:
        """Set a metadata value."""

    @abstractmethod
    def clear(self, request: ClearRequest) -> ClearResult:
        """Remove every record of the namespace."""

    @abstractmethod
    def namespaces(
        self, prefix: Sequence[str] = (), max_depth: int | None = None
    ) -> list[tuple[str, ...]]:
        """The live namespaces (holding at least one record; metadata alone does not count, so a
        cleared or emptied one is gone) that start with ``prefix``, sorted; with ``max_depth``, each
        cut to its first ``max_depth`` parts, without repeats. A view of a past point answers as of
        that point. Implement with :func:`namespace_listing`."""

    # -- optional operations (declared by the supports_* attributes) and the lifecycle ------

    def put_with_meta(self, request: PutRequest, meta: MetaSetRequest) -> PutResult:
        """``set_meta(meta)`` and ``put(request)`` as one all-or-nothing step: when the put is refused
        the metadata is unchanged and, with an event feed, no event is recorded (the meta event
        comes first, then one per record). Only where :attr:`supports_put_with_meta` is True; the
        base class raises :class:`NotSupported`."""
        require(request, PutRequest)
        require(meta, MetaSetRequest)
        raise NotSupported(f"the {self.kind!r} memory backend has no atomic put_with_meta")

    def put_batch(self, batch: RecordBatch, meta: MetaSetRequest | None = None) -> PutResult:
        """Write the records of a columnar :class:`~coniti.batch.RecordBatch`, all or nothing, with
        the rules of :meth:`put` (an id live in the batch's namespace or repeated in the batch raises
        :class:`DuplicateRecord`, same messages); with ``meta``, as :meth:`put_with_meta` (backends
        with :attr:`supports_put_with_meta`). The batch was validated when it was made, so this
        writes the same records as ``put(PutRequest(records=batch.records()))`` without building
        them again where a backend can (this default builds them)."""
        from coniti.batch import RecordBatch

        if not isinstance(batch, RecordBatch):
            raise ContractError(f"batch must be a RecordBatch, got {type(batch).__name__}")
        request = _put_request({"records": batch.records()})
        if meta is None:
            return self.put(request)
        return self.put_with_meta(request, meta)

    def put_batches(
        self, batches: Iterable[Sequence[MemoryRecord]], meta: MetaSetRequest | None = None
    ) -> int:
        """Write every record of every batch, and ``meta`` when given, as one all-or-nothing step;
        returns the number of records. The batches are trusted records (the caller validated them)
        and may be iterated more than once (a backend may retry); an error raised while iterating
        writes nothing. Only where :attr:`supports_put_batches` is True; the base class raises
        :class:`NotSupported`."""
        raise NotSupported(f"the {self.kind!r} memory backend has no atomic put_batches")

    def write(self, request: WriteRequest) -> WriteResult:
        """Apply a :class:`WriteRequest` atomically (see there). Only where :attr:`supports_write` is
        True; the base class raises :class:`NotSupported`."""
        require(request, WriteRequest)
        raise NotSupported(f"the {self.kind!r} memory backend has no write (upsert, patch, compare-and-set)")

    def write_changes(self, request: WriteRequest) -> tuple[WriteResult, list[Change] | None]:
        """:meth:`write`, and the changes it made (each a :data:`~coniti.requests.Change`: the
        record as written, or None for a delete), in the order of the result's ``seqs`` (an op
        id's receipt, last, is none of them; a replay made none): for a caller that keeps derived
        state of the records (the engine's index) without reading them back. None when the backend
        does not report them, as here: the base class returns what :meth:`write` returns, and
        None."""
        return self.write(request), None

    def op_result(self, op_id: str, namespace: Sequence[str] = ()) -> WriteResult | None:
        """The result of the write that recorded ``op_id`` in ``namespace`` (``replayed=True``), or
        None when no write did. Only where :attr:`supports_write` is True."""
        raise NotSupported(f"the {self.kind!r} memory backend records no op ids")

    def sweep(self, now: float | None = None) -> SweepResult:
        """Delete every live record whose ``expires_at <= now`` (default: the store's clock), one
        delete each, stamped actor ``coniti-ttl``, reason ``expired``. Safe to run concurrently: a
        record is deleted once. Only where :attr:`supports_write` is True."""
        raise NotSupported(f"the {self.kind!r} memory backend has no expiry sweep")

    def feedback(self, request: FeedbackRequest) -> FeedbackResult:
        """Record feedback on a live record (one ``feedback`` event on a log); raises
        :class:`RecordNotFound` naming the id when it is not live, and writes nothing then. Only
        where :attr:`supports_feedback` is True; the base class raises :class:`NotSupported`."""
        require(request, FeedbackRequest)
        raise NotSupported(f"the {self.kind!r} memory backend records no feedback")

    def feedback_weights(self, namespace: Sequence[str] = ()) -> dict[str, float]:
        """Record id -> the sum of its feedback weights in ``namespace`` (as of the view's point
        for a time-travel view; erased records' feedback left out), for ids with any feedback,
        deleted ids included. Only where :attr:`supports_feedback` is True."""
        raise NotSupported(f"the {self.kind!r} memory backend records no feedback")

    def close(self) -> None:  # noqa: B027 - optional hook, not abstract
        """Release resources. The default does nothing; closing twice is harmless."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncTwins(BackendOperations):
    """The async twin of each operation, the second part of :class:`MemoryBackend`: the same
    signature, the sync call run on a worker thread (:func:`to_thread`, context variables carried
    along), so it blocks no event loop. A backend with native async I/O overrides them."""

    async def aput(self, request: PutRequest) -> PutResult:
        return await to_thread(self.put, request)

    async def aget(self, request: GetRequest) -> GetResult:
        return await to_thread(self.get, request)

    async def adelete(self, request: DeleteRequest) -> DeleteResult:
        return await to_thread(self.delete, request)

    async def ascan(self, request: ScanRequest) -> ScanResult:
        return await to_thread(self.scan, request)

    async def acount(self, request: CountRequest) -> CountResult:
        return await to_thread(self.count, request)

    async def aget_meta(self, request: MetaGetRequest) -> MetaResult:
        return await to_thread(self.get_meta, request)

    async def aset_meta(self, request: MetaSetRequest) -> MetaResult:
        return await to_thread(self.set_meta, request)

    async def aclear(self, request: ClearRequest) -> ClearResult:
        return await to_thread(self.clear, request)

    async def awrite(self, request: WriteRequest) -> WriteResult:
        return await to_thread(self.write, request)

    async def asweep(self, now: float | None = None) -> SweepResult:
        return await to_thread(self.sweep, now)

    async def afeedback(self, request: FeedbackRequest) -> FeedbackResult:
        return await to_thread(self.feedback, request)

    async def afeedback_weights(self, namespace: Sequence[str] = ()) -> dict[str, float]:
        return await to_thread(self.feedback_weights, namespace)

    async def anamespaces(
        self, prefix: Sequence[str] = (), max_depth: int | None = None
    ) -> list[tuple[str, ...]]:
        return await to_thread(self.namespaces, prefix, max_depth)


class MemoryBackend(RequestFactories, AsyncTwins):
    """Where memory lives. Subclasses implement the eight operations and :meth:`namespaces`; the rest
    is derived, written once in this class and its parts:

    * :class:`BackendOperations`: the abstract core, the optional operations (refused unless a
      backend declares and implements them) and :meth:`close` / use as a context manager;
    * :class:`AsyncTwins`: the async twins (``aput`` ..., which run the sync call in a worker thread
      unless a backend overrides them);
    * :class:`RequestFactories`: the request factories (``put_request`` ...);
    * here: :meth:`iter_all`, :meth:`dump`, :meth:`load`, built on :meth:`scan` and :mod:`coniti.memfile`.

    Optional capabilities are declared by the ``supports_*`` class attributes (never detected),
    typed for callers by :func:`time_travel` and :func:`event_feed`, and checked by
    ``coniti.testing.CapabilityTests``.
    """

    def iter_all(
        self,
        time_range: TimeRange | None = None,
        namespace: Sequence[str] = (),
        page_size: int = 500,
        *,
        filter: Any = None,
    ) -> Iterator[MemoryRecord]:
        """Every record in (timestamp, write order), following cursors page by page; with
        ``filter``, only those whose metadata it matches (see :mod:`coniti.filters`)."""
        cursor: str | None = None
        while True:
            page = self.scan(
                ScanRequest(
                    time_range=time_range,
                    namespace=namespace,
                    limit=page_size,
                    cursor=cursor,
                    filter=filter,
                )
            )
            yield from page.records
            cursor = page.next_cursor
            if cursor is None:
                return

    def dump(self, target: str | Path | IO[str], namespace: Sequence[str] = ()) -> int:
        """Write ``namespace`` as a ``coniti-memory`` JSONL file; returns the record count.

        See :func:`coniti.memfile.dump` for the guarantees (atomic for paths, gzip by ``.gz``).
        """
        from coniti import memfile

        return memfile.dump(self, target, namespace=tuple(namespace))

    def load(
        self, source: str | Path | IO[str] | IO[bytes], namespace: Sequence[str] | None = None
    ) -> int:
        """Validate a ``coniti-memory`` file completely, then write it; returns the record count.

        See :func:`coniti.memfile.load`: nothing is written when anything is wrong.
        """
        from coniti import memfile

        return memfile.load(self, source, namespace=None if namespace is None else tuple(namespace))



# -- typed views of the optional capabilities (declared by the class attributes above) ------------


class TimeTravel(Protocol):
    """A backend that declares ``supports_time_travel``: read-only views of earlier states."""

    def at(self, seq: int | None = None, *, time: float | datetime | None = None) -> MemoryBackend:
        """Memory right after event ``seq`` (or the last event at or before ``time``)."""
        ...


class EventFeed(Protocol):
    """A backend that declares ``supports_event_feed``: the audit trail in sequence order, and the
    block that stamps the events written inside it with who and why."""

    def audit(self, actor: str | None = None, reason: str | None = None) -> AbstractContextManager[None]:
        """The block stamping ``actor`` and ``reason`` on the events written inside it."""
        ...

    @property
    def head(self) -> int:
        """Sequence number of the last event (0 when none)."""
        ...

    def events(
        self,
        after: int = 0,
        *,
        until: int | None = None,
        namespace: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> Iterator[Event]:
        """Events with ``after < seq <= until``, of ``namespace`` only when given."""
        ...

    def written(self, namespace: Sequence[str]) -> bool:
        """Whether any event but a clear names ``namespace``, as of now (False: the events of
        ``namespace`` up to any head read before the call are clears of a namespace never
        written to, which end nothing: an index folds none of them)."""
        ...


class DerivedHome(Protocol):
    """A backend that declares ``supports_derived_state``: where derived state may live, and what
    identifies the store it was derived from."""

    @property
    def derived_path(self) -> str:
        """A directory (it may not exist yet) that belongs to this store and moves with it."""
        ...

    @property
    def store_id(self) -> str:
        """The store's id: the same for every handle, different for another store."""
        ...

    def event_hash(self, seq: int) -> str:
        """The hash (hex) of event ``seq`` (64 zeros for 0): a store rebuilt or swapped under the
        same sequence numbers has other hashes."""
        ...


def derived_home(backend: MemoryBackend) -> DerivedHome | None:
    """``backend`` typed as a :class:`DerivedHome` if its class declares ``supports_derived_state``."""
    return cast(DerivedHome, backend) if backend.supports_derived_state else None


def time_travel(backend: MemoryBackend) -> TimeTravel | None:
    """``backend`` typed as a :class:`TimeTravel` if its class declares ``supports_time_travel``."""
    return cast(TimeTravel, backend) if backend.supports_time_travel else None


def event_feed(backend: MemoryBackend) -> EventFeed | None:
    """``backend`` typed as an :class:`EventFeed` if its class declares ``supports_event_feed``."""
    return cast(EventFeed, backend) if backend.supports_event_feed else None


def audited(backend: MemoryBackend, actor: str | None, reason: str | None) -> AbstractContextManager[None]:
    """The block stamping ``actor`` and ``reason`` on the writes inside it (:meth:`EventFeed.audit`);
    a no-op when both are None. Raises :class:`NotSupported` when either is given and ``backend``
    keeps no audit trail (declares no ``supports_event_feed``)."""
    if actor is None and reason is None:
        return nullcontext()
    feed = event_feed(backend)
    if feed is None:
        raise NotSupported(f"the {backend.kind!r} memory backend keeps no audit trail (actor, reason)")
    return feed.audit(actor=actor, reason=reason)

