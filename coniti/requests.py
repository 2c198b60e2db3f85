"""Requests and results: the contract of every :class:`~coniti.memory.MemoryBackend` operation,
the write operations, and the helpers a backend applies them with.

Each operation takes one request contract and returns one result contract (pydantic models, see
:mod:`coniti.contracts`). A write returns what it wrote: :class:`PutResult` and :class:`WriteResult`
carry the versions the records received, and they and :class:`DeleteResult` the sequence numbers
of the call's changes (``seqs``: on a backend with an event feed, its events'), so nothing above a
backend predicts them.

Helpers for backends: :func:`plan_write` (what a :class:`WriteRequest` changes, checked against the
live state) and :func:`patched`, :func:`check_put_ids`, :func:`unique_ids`, :func:`require` and
:func:`idempotency_conflict`. :mod:`coniti.memory` re-exports every public name here (the spec's
import path).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any, Literal, Self, TypeVar

import pydantic

from coniti.actor import Note, TimeRange, to_stored_time
from coniti.contracts import Contract, NonEmptyText, Text, TextCheck, check_json_value
from coniti.errors import (
    ContractError,
    DuplicateRecord,
    IdempotencyConflict,
    RecordNotFound,
    VersionConflict,
    namespace_text,
)
from coniti.filters import MetadataFilter
from coniti.jsonl import MAX_STAMP_CHARS, note_size_problem
from coniti.records import Blob, MemoryRecord, Namespace, Vector, as_namespace, json_key

__all__ = [
    "Change",
    "ClearRequest",
    "ClearResult",
    "CountRequest",
    "CountResult",
    "DeleteOp",
    "DeleteRequest",
    "DeleteResult",
    "FeedbackRequest",
    "FeedbackResult",
    "GetRequest",
    "GetResult",
    "MetaGetRequest",
    "MetaKey",
    "MetaResult",
    "MetaSetRequest",
    "PatchOp",
    "PutRequest",
    "PutResult",
    "RecordId",
    "ScanRequest",
    "ScanResult",
    "SweepResult",
    "UpsertOp",
    "WriteOp",
    "WriteRequest",
    "WriteResult",
    "check_put_ids",
    "idempotency_conflict",
    "op_id_of",
    "patched",
    "plan_write",
    "require",
    "unique_ids",
]

class PutRequest(Contract):
    """Write ``records`` (all or nothing)."""

    records: list[MemoryRecord]


class PutResult(Contract):
    """What a put wrote: ``written`` records; ``versions``: the version each record received, in
    the order of the request (of the batch, for ``put_batch``), the version a later read of it
    shows; ``seqs``: the sequence numbers of the call's changes, in order. On a backend with an
    event feed these are its events (with a metadata value, ``put_with_meta``, the meta event
    first, then one per record: the versions); a backend without one numbers its changes likewise
    (InMemoryBackend: its change counter) or leaves ``seqs`` empty."""

    written: int
    versions: list[int] = pydantic.Field(default_factory=list)
    seqs: list[int] = pydantic.Field(default_factory=list)


class GetRequest(Contract):
    """Read ``ids`` from ``namespace``; unknown ids are reported, not raised."""

    ids: list[Text]
    namespace: Namespace = ()


class GetResult(Contract):
    records: list[MemoryRecord]
    missing: list[str]


class DeleteRequest(Contract):
    """Remove ``ids`` from ``namespace``; unknown ids are reported, not raised."""

    ids: list[Text]
    namespace: Namespace = ()


class DeleteResult(Contract):
    """What a delete did: ``deleted`` ids (live before) and ``missing`` ones, in request order;
    ``seqs``: the sequence number of each deleted id's change, in the order of ``deleted`` (with
    an event feed, its delete event; see :class:`PutResult` for a backend without one)."""

    deleted: list[str]
    missing: list[str]
    seqs: list[int] = pydantic.Field(default_factory=list)


class ScanRequest(Contract):
    """Read in (timestamp, write order) within ``time_range``; ``limit`` per page, resume at ``cursor``.

    ``filter`` (a :mod:`coniti.filters` filter on the metadata, None for all) keeps only matching
    records: a page still holds ``limit`` of them unless the range is exhausted, and ``next_cursor``
    is the position of the page's last record, the same position an unfiltered scan uses, so it is
    not tied to the filter (resuming it with another filter continues after that record).
    """

    time_range: TimeRange | None = None
    namespace: Namespace = ()
    limit: int | None = pydantic.Field(default=None, ge=1, strict=True)
    cursor: str | None = None
    filter: MetadataFilter = None


class ScanResult(Contract):
    records: list[MemoryRecord]
    next_cursor: str | None = None


class CountRequest(Contract):
    """Count records in ``namespace`` (within ``time_range``, matching ``filter``, if given)."""

    time_range: TimeRange | None = None
    namespace: Namespace = ()
    filter: MetadataFilter = None


class CountResult(Contract):
    count: int


MetaKey = NonEmptyText


class MetaGetRequest(Contract):
    """Read metadata ``key`` of ``namespace`` (``None`` when unset)."""

    key: MetaKey
    namespace: Namespace = ()


class MetaSetRequest(Contract):
    """Set metadata ``key`` of ``namespace`` to a JSON-serialisable, finite ``value`` (copied)."""

    key: MetaKey
    value: Any
    namespace: Namespace = ()

    @pydantic.field_validator("value", mode="before")
    @classmethod
    def _json(cls, value: Any) -> Any:
        return check_json_value(value, "value")


class MetaResult(Contract):
    value: Any = None

    @pydantic.field_validator("value", mode="before")
    @classmethod
    def _json(cls, value: Any) -> Any:
        return check_json_value(value, "value")


class ClearRequest(Contract):
    """Remove every record of ``namespace``. Its metadata is kept (set a key to ``None`` to drop it)."""

    namespace: Namespace = ()


class ClearResult(Contract):
    deleted: int


RecordId = NonEmptyText


class UpsertOp(Contract):
    """Create ``record`` or replace the live record of its id whole. Its namespace must be the
    request's. An upsert identical to the live record (:meth:`MemoryRecord.identical`) writes
    nothing and is reported ``unchanged``."""

    kind: Literal["upsert"] = "upsert"
    record: MemoryRecord


class PatchOp(Contract):
    """Change only what is given of the live record ``id``; ``None`` (the default) keeps a field.

    ``metadata`` replaces the metadata object; ``metadata_patch`` is an RFC 7386 merge patch of it
    (a ``null`` value deletes a key); give at most one of the two. ``vector`` is required when
    ``text`` differs from the stored text of a record with a vector, and must have the stored
    vector's dtype; a record without a vector keeps none unless the patch gives one (then of any
    dtype). ``expires_at`` sets the expiry, ``clear_expiry=True`` removes it; ``blob`` replaces the
    binary payload, ``clear_blob=True`` removes it. A patch whose result is identical to the live
    record writes nothing and is reported ``unchanged``.
    """

    kind: Literal["patch"] = "patch"
    id: RecordId
    text: Text | None = None
    timestamp: float | None = None
    metadata: dict[str, Any] | None = None
    metadata_patch: dict[str, Any] | None = None
    vector: Vector | None = None
    expires_at: float | None = None
    clear_expiry: pydantic.StrictBool = False
    blob: Blob | None = None
    clear_blob: pydantic.StrictBool = False

    @pydantic.field_validator("timestamp", "expires_at", mode="before")
    @classmethod
    def _time(cls, value: Any, info: pydantic.ValidationInfo) -> float | None:
        if value is None:
            return None
        out = to_stored_time(value, info.field_name or "timestamp")
        return out + 0.0 if info.field_name == "expires_at" else out  # an expiry is never -0.0

    @pydantic.field_validator("metadata", "metadata_patch", mode="before")
    @classmethod
    def _object(cls, value: Any, info: pydantic.ValidationInfo) -> dict[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ValueError(f"{info.field_name} must be a JSON object, got {type(value).__name__}")
        checked: dict[str, Any] = check_json_value(value, info.field_name or "metadata")
        return checked

    @pydantic.model_validator(mode="after")
    def _one_metadata(self) -> Self:
        if self.metadata is not None and self.metadata_patch is not None:
            raise ValueError("give metadata (a replacement) or metadata_patch (a merge patch), not both")
        if self.clear_expiry and self.expires_at is not None:
            raise ValueError("give expires_at or clear_expiry, not both")
        if self.clear_blob and self.blob is not None:
            raise ValueError("give blob or clear_blob, not both")
        return self


class DeleteOp(Contract):
    """Remove the live record ``id``; an id that is not live is reported in ``missing``."""

    kind: Literal["delete"] = "delete"
    id: RecordId


WriteOp = Annotated[UpsertOp | PatchOp | DeleteOp, pydantic.Field(discriminator="kind")]
_OP_TYPES = (UpsertOp, PatchOp, DeleteOp)


def op_id_of(op: UpsertOp | PatchOp | DeleteOp) -> str:
    """The record id an op writes."""
    return op.record.note.id if isinstance(op, UpsertOp) else op.id


class WriteRequest(Contract):
    """One atomic write: ``ops`` applied in order in one transaction, all or nothing, one audit stamp.

    * ``expect``: compare-and-set. ``{id: version}`` requires that live version, ``{id: None}``
      requires the id not to be live (an expired record is not live). A failed expectation raises
      :class:`VersionConflict` before anything is written.
    * ``op_id``: idempotency key, per namespace. A request with an op id already used by the same
      request (same :meth:`digest`) returns that first result with ``replayed=True`` and writes
      nothing; by a different request, :class:`IdempotencyConflict`. Op ids are durable (see the
      backend for how long they are kept).
    * ``missing_ok``: a patch of an id that is not live is reported in ``missing`` instead of
      raising :class:`RecordNotFound`.
    * An id appears in at most one op of a request (compose the changes into one op).
    """

    ops: list[WriteOp]
    namespace: Namespace = ()
    expect: dict[RecordId, Annotated[int, pydantic.Field(ge=1, strict=True)] | None] = pydantic.Field(
        default_factory=dict
    )
    op_id: (
        Annotated[pydantic.StrictStr, pydantic.StringConstraints(min_length=1, max_length=1024), TextCheck]
        | None
    ) = None
    missing_ok: pydantic.StrictBool = False

    @pydantic.field_validator("ops", mode="before")
    @classmethod
    def _known_ops(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            for i, op in enumerate(value):
                if not isinstance(op, (*_OP_TYPES, dict)):
                    raise ValueError(
                        f"ops[{i}] must be an UpsertOp, PatchOp or DeleteOp, got {type(op).__name__}"
                    )
        return value

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> Self:
        seen: set[str] = set()
        for i, op in enumerate(self.ops):
            if isinstance(op, UpsertOp) and op.record.namespace != self.namespace:
                raise ValueError(
                    f"ops[{i}].record.namespace {namespace_text(op.record.namespace)} is not the "
                    f"request's namespace {namespace_text(self.namespace)}"
                )
            record_id = op_id_of(op)
            if record_id in seen:
                raise ValueError(f"ops[{i}]: id {record_id!r} appears in two ops of one write")
            seen.add(record_id)
        return self

    def digest(self) -> str:
        """SHA-256 (hex) of the request's canonical form without its ``op_id``: what an op id is
        bound to. Bit-exact: timestamps, vectors (dtype and bytes) and JSON types count."""
        data = self.model_dump(mode="json", exclude={"op_id"})
        for op, original in zip(data["ops"], self.ops, strict=True):
            if isinstance(original, UpsertOp):
                vector, target = original.record.vector, op["record"]
            elif isinstance(original, PatchOp):
                vector, target = original.vector, op
                # fields added with blobs count only when used: older digests stay valid
                if original.blob is None:
                    del op["blob"]
                if not original.clear_blob:
                    del op["clear_blob"]
            else:
                continue
            if vector is not None:
                target["vector"] = [vector.dtype.str, vector.tobytes().hex()]
        return hashlib.sha256(json_key(data).encode("utf-8", "surrogatepass")).hexdigest()


class WriteResult(Contract):
    """What a write did. ``versions``: the live version, after the write, of every id upserted or
    patched (written or unchanged); ``unchanged``: ids whose op wrote nothing; ``deleted``: ids a
    delete ended; ``missing``: deletes (and, with ``missing_ok``, patches) of ids that were not
    live; ``replayed``: True when this is the stored result of an earlier request with the same
    op id, and nothing was written now; ``seqs``: the sequence numbers of the write's changes, in
    order (one per record written or deleted, then the op id's; none when every op was unchanged
    or missing and there is no op id): with an event feed its events (see :class:`PutResult` for a
    backend without one). A replay carries the first write's versions and seqs."""

    versions: dict[str, int] = pydantic.Field(default_factory=dict)
    unchanged: list[str] = pydantic.Field(default_factory=list)
    deleted: list[str] = pydantic.Field(default_factory=list)
    missing: list[str] = pydantic.Field(default_factory=list)
    replayed: bool = False
    seqs: list[int] = pydantic.Field(default_factory=list)


class FeedbackRequest(Contract):
    """Give the live record ``id`` of ``namespace`` the feedback ``weight`` (a finite number;
    positive promotes it in hybrid recall, negative demotes it), with an optional ``reason``."""

    id: NonEmptyText
    weight: float = pydantic.Field(allow_inf_nan=False)
    namespace: Namespace = ()
    reason: (
        Annotated[pydantic.StrictStr, pydantic.StringConstraints(max_length=MAX_STAMP_CHARS), TextCheck]
        | None
    ) = None

    @pydantic.field_validator("weight", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"weight must be a number, got {type(value).__name__}")
        return value

    @pydantic.field_validator("namespace", mode="before")
    @classmethod
    def _ns(cls, value: Any) -> tuple[str, ...]:
        return as_namespace(value)


class FeedbackResult(Contract):
    """What a feedback write did: the record ``id``, its total ``weight`` afterwards (the sum of
    all its feedback) and the ``seq`` of the event (None on a backend without an event log)."""

    id: str
    weight: float
    seq: int | None = None


class SweepResult(Contract):
    """What a sweep did: how many expired records it deleted (each one delete, actor ``coniti-ttl``,
    reason ``expired``)."""

    deleted: int


Change = tuple[str, "MemoryRecord | None"]
"""One planned change of a write: ``(record id, the record to write)``, or ``(record id, None)``
for a delete."""


def plan_write(
    request: WriteRequest,
    live: Callable[[str], MemoryRecord | None],
    held: Callable[[str], bool],
) -> tuple[list[Change], WriteResult]:
    """What ``request`` changes (everything but its op id), for a backend to apply in order:
    ``live(id)`` is the visible record of an id (with its version; None when absent or expired),
    ``held(id)`` whether the id is live at all (expired or not: a delete removes it). Raises
    :class:`VersionConflict`, :class:`RecordNotFound` or :class:`ContractError` before anything is
    planned to be written. The result lists unchanged, deleted and missing ids and the versions of
    unchanged ones; the backend adds the version each planned write receives."""
    ns = request.namespace
    for record_id, expected in request.expect.items():
        current = live(record_id)
        actual = None if current is None else current.version
        if actual != expected:
            raise VersionConflict(record_id, expected, actual, ns)
    changes: list[Change] = []
    result = WriteResult()
    for i, op in enumerate(request.ops):
        if isinstance(op, DeleteOp):
            if held(op.id):
                changes.append((op.id, None))
                result.deleted.append(op.id)
            else:
                result.missing.append(op.id)
            continue
        record_id = op.record.id if isinstance(op, UpsertOp) else op.id
        current = live(record_id)
        if isinstance(op, PatchOp):
            if current is None:
                if not request.missing_ok:
                    raise RecordNotFound(
                        f"ops[{i}]: no live record {op.id!r} in namespace {namespace_text(ns)} to patch; "
                        "nothing was written"
                    )
                result.missing.append(op.id)
                continue
            new = patched(current, op, i)
        else:
            new = op.record
        if current is not None and current.version is not None and current.identical(new):
            result.unchanged.append(record_id)
            result.versions[record_id] = current.version
        else:
            changes.append((record_id, new))
    return changes, result


def idempotency_conflict(op_id: str, namespace: tuple[str, ...]) -> IdempotencyConflict:
    """The error for an op id already recorded with another request's digest."""
    return IdempotencyConflict(
        f"op id {op_id!r} was used by another write request in namespace "
        f"{namespace_text(namespace)}; "
        "nothing was written"
    )


def patched(live: MemoryRecord, op: PatchOp, index: int) -> MemoryRecord:
    """The record ``op`` makes of ``live`` (validated: a text change needs a vector of the stored
    dtype; ``index`` names the op in errors). The version is not set."""
    from coniti.mergepatch import merge_patch

    note = live.note
    text = note.text if op.text is None else op.text
    vector = live.vector
    if op.vector is not None:
        if vector is not None and op.vector.dtype != vector.dtype:
            raise ContractError(
                f"ops[{index}].vector: dtype {op.vector.dtype.name} is not the stored record's "
                f"{vector.dtype.name}"
            )
        vector = op.vector
    elif text != note.text and vector is not None:
        raise ContractError(f"ops[{index}].vector is required: the patch changes the text of {op.id!r}")
    metadata = note.metadata
    if op.metadata is not None:
        metadata = op.metadata
    elif op.metadata_patch is not None:
        metadata = merge_patch(metadata, op.metadata_patch)
    metadata = check_json_value(metadata, "metadata")
    problem = note_size_problem(note.id, text, metadata)
    if problem is not None:
        raise ContractError(f"ops[{index}]: {problem}")
    expires_at = None if op.clear_expiry else (live.expires_at if op.expires_at is None else op.expires_at)
    blob = None if op.clear_blob else (live.blob if op.blob is None else op.blob)
    return MemoryRecord.trusted(
        Note.trusted(
            note.id,
            text,
            note.timestamp if op.timestamp is None else op.timestamp,
            metadata,
            note.kind,
            note.facts(),
        ),
        None if vector is None else vector.copy(),
        live.embedding_id,
        live.namespace,
        None,
        expires_at,
        blob,
    )


R = TypeVar("R", bound=Contract)


def require(request: Any, cls: type[R]) -> R:
    """Return ``request`` if it is a ``cls``, else raise :class:`ContractError` naming both types."""
    if not isinstance(request, cls):
        raise ContractError(f"expected a {cls.__name__}, got {type(request).__name__}")
    return request


def unique_ids(ids: Iterable[str]) -> list[str]:
    """``ids`` without repeats, in first-occurrence order."""
    return list(dict.fromkeys(ids))


def check_put_ids(records: Sequence[MemoryRecord]) -> None:
    """Raise :class:`DuplicateRecord` if an (namespace, id) repeats within one put call."""
    seen: set[tuple[tuple[str, ...], str]] = set()
    for record in records:
        key = (record.namespace, record.note.id)
        if key in seen:
            raise DuplicateRecord(
                f"record id {record.note.id!r} appears twice in one put (namespace {namespace_text(record.namespace)})"
            )
        seen.add(key)


