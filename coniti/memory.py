"""The memory backend interface: records, request/result contracts, and :class:`MemoryBackend`.

Every read and write of memory goes through :class:`MemoryBackend`. Its abstract core is the spec's
eight operations (``put``, ``get``, ``delete``, ``scan``, ``count``, ``get_meta``, ``set_meta``,
``clear``), each taking a request contract and returning a result contract, plus ``namespaces``
(the live namespaces under a prefix). Everything else — paging (``iter_all``), the memory file
(``dump``/``load``), async twins and request factories — is written once here on top of that core,
so every backend inherits it.

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
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import (
    IO,
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Literal,
    Protocol,
    Self,
    TypeVar,
    cast,
)

import numpy as np
import pydantic

from coniti.actor import Note, TimeRange, to_stored_time
from coniti.contracts import Contract, check_json_value
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
    namespace_text,
)
from coniti.filters import MetadataFilter
from coniti.jsonl import MAX_BLOB_BYTES

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
    "closest_namespaces",
    "derived_home",
    "event_feed",
    "namespace_listing",
    "require",
    "time_travel",
    "unique_ids",
]

VECTOR_DTYPES = ("float16", "float32", "float64")
_FLOAT_TYPES = (np.float16, np.float32, np.float64)
_NUMBER_TYPES = {int, float, np.float16, np.float32, np.float64, np.int32, np.int64}


def as_namespace(value: Any) -> tuple[str, ...]:
    """``value`` as a namespace tuple; raises :class:`ContractError` unless it is a sequence of
    non-empty strings (a bare string is refused: ``"alice"`` is not ``("alice",)``)."""
    if type(value) is tuple:  # the common case, without the Sequence ABC check
        for part in value:
            if type(part) is not str or not part:
                break
        else:
            return value
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ContractError(f"namespace must be a tuple of strings, got {type(value).__name__}")
    out = tuple(value)
    for i, part in enumerate(out):
        if not isinstance(part, str) or not part:
            raise ContractError(f"namespace[{i}] must be a non-empty string, got {part!r}")
    return out


Namespace = Annotated[
    tuple[str, ...],
    pydantic.BeforeValidator(as_namespace),
    pydantic.PlainSerializer(list, return_type=list[str]),
]
"""A namespace: a tuple of non-empty strings, ``()`` by default. Addressing, not a session."""


def as_vector(value: Any, dtype: str | None = None) -> np.ndarray:
    """A fresh 1-D finite float vector from ``value``; float16/32/64 arrays keep their dtype."""
    if dtype is not None and dtype not in VECTOR_DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(VECTOR_DTYPES)}, got {dtype!r}")
    # A value too large for the dtype becomes infinity and is refused below; no RuntimeWarning.
    if isinstance(value, np.ndarray):
        if value.dtype.type in _FLOAT_TYPES:
            with np.errstate(over="ignore"):
                arr = np.array(value, dtype=dtype, copy=True)
        elif value.dtype.kind in "iu":
            arr = np.array(value, dtype=dtype or np.float64)
        else:
            raise ValueError(f"vector dtype {value.dtype} is not a supported float type")
    elif isinstance(value, list | tuple):
        if not set(map(type, value)) <= _NUMBER_TYPES:
            raise ValueError("vector must contain only numbers")
        try:
            with np.errstate(over="ignore"):
                arr = np.array(value, dtype=dtype or np.float64)
        except OverflowError:  # an int beyond float range
            raise ValueError("vector must be finite (an integer is too large for a float)") from None
    else:
        raise ValueError(f"vector must be a numpy array or a list of numbers, got {type(value).__name__}")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"vector must be one-dimensional and non-empty, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError("vector must be finite (no NaN or infinity)")
    return arr


def _vector_to_list(arr: np.ndarray) -> list[float]:
    return [float(x) for x in arr.tolist()]


Vector = Annotated[
    np.ndarray,
    pydantic.PlainValidator(as_vector),
    pydantic.PlainSerializer(_vector_to_list, return_type=list[float], when_used="json"),
    pydantic.WithJsonSchema({"type": "array", "items": {"type": "number"}, "minItems": 1}),
]


def _dtype_schema(schema: dict[str, Any]) -> None:
    """JSON-schema hook: the optional ``dtype`` key that ``to_dict`` writes for float16/32 vectors."""
    schema.setdefault("properties", {})["dtype"] = {"enum": list(VECTOR_DTYPES), "default": "float64"}


def as_blob(value: Any) -> bytes:
    """``value`` as a record's binary payload: bytes (a bytearray or memoryview is copied to
    bytes), or ``{"base64": text}`` (the JSON form: standard base64 with padding, RFC 4648 §4),
    at most :data:`~coniti.jsonl.MAX_BLOB_BYTES`; raises ValueError otherwise."""
    if isinstance(value, dict):
        if value.keys() != {"base64"} or not isinstance(value["base64"], str):
            raise ValueError('blob in JSON must be an object {"base64": text}')
        text = value["base64"]
        if len(text) > (MAX_BLOB_BYTES + 2) // 3 * 4:
            raise ValueError(f"blob is larger than {MAX_BLOB_BYTES} bytes")
        try:
            value = base64.b64decode(text.encode("ascii"), validate=True)
        except (UnicodeEncodeError, binascii.Error, ValueError):
            raise ValueError("blob.base64 is not valid base64 (RFC 4648, with padding)") from None
    elif isinstance(value, bytearray | memoryview):
        value = bytes(value)
    elif type(value) is not bytes:
        raise ValueError(f"blob must be bytes, got {type(value).__name__}")
    if len(value) > MAX_BLOB_BYTES:
        raise ValueError(f"blob is {len(value)} bytes; at most {MAX_BLOB_BYTES} allowed")
    return bytes(value)


def _blob_json(value: bytes) -> dict[str, str]:
    return {"base64": base64.b64encode(value).decode("ascii")}


Blob = Annotated[
    bytes,
    pydantic.PlainValidator(as_blob),
    pydantic.PlainSerializer(_blob_json, return_type=dict[str, str], when_used="json"),
    pydantic.WithJsonSchema(
        {
            "type": "object",
            "properties": {"base64": {"type": "string", "contentEncoding": "base64"}},
            "required": ["base64"],
            "additionalProperties": False,
        }
    ),
]
"""Opaque bytes: ``bytes`` in Python, ``{"base64": text}`` in JSON (``to_dict``/``from_dict``)."""

StoredRow = tuple[
    str, float, tuple[str, dict[str, Any], str | None, np.ndarray | None, bytes | None], int, float | None
]
"""A record as a store reads it back (what :meth:`MemoryRecord.trusted_rows` takes): ``(id,
timestamp, (text, metadata, embedding_id, vector, blob), version, expires_at)``."""


class MemoryRecord(Contract):
    """A stored note with its vector (or none), the embedding spec id that made it, its namespace,
    and optionally an opaque binary payload.

    The vector is copied in. Its dtype (float16, float32 or float64) is kept; ``to_dict`` writes the
    values as full-precision floats and adds ``"dtype"`` when it is not float64, so
    ``from_dict(to_dict())`` is bit-identical.

    ``vector`` must be given, and may be ``None``: a record without a vector is stored and read like
    any other but is in no engine structure (never a semantic hit); its ``embedding_id`` must then be
    None too. ``blob`` (default None) is stored with the record, byte-exact, at most
    :data:`~coniti.jsonl.MAX_BLOB_BYTES`; ``to_dict`` writes it as ``{"base64": text}`` and only when
    set. Either may be combined with the other.
    """

    model_config = pydantic.ConfigDict(frozen=True, json_schema_extra=_dtype_schema)

    note: Note
    vector: Vector | None
    embedding_id: pydantic.StrictStr | None = None
    namespace: Namespace = ()
    expires_at: float | None = None
    """Epoch seconds on the store's recorded-time clock from which reads hide the record (``None``:
    never), within the horizon of years 1 to 9999 (:mod:`coniti.times`). Written by ``to_dict``
    only when set."""
    blob: Blob | None = None
    """Opaque bytes stored with the record (None: none). Written by ``to_dict`` only when set."""
    version: int | None = pydantic.Field(default=None, exclude=True)
    """The version the store gave this record, filled on every read: the sequence number of the
    event that wrote it (``LogBackend``) or an increasing counter (``InMemoryBackend``). Ignored on
    writes, not serialised, not compared by ``==``."""

    @pydantic.field_validator("expires_at", mode="before")
    @classmethod
    def _expires_at(cls, value: Any) -> float | None:
        return None if value is None else to_stored_time(value, "expires_at") + 0.0  # no -0.0

    @pydantic.model_validator(mode="before")
    @classmethod
    def _dtype(cls, data: Any) -> Any:
        if isinstance(data, dict) and "dtype" in data:
            data = dict(data)
            dtype = data.pop("dtype")
            if not isinstance(dtype, str) or dtype not in VECTOR_DTYPES:
                raise ValueError(f"dtype must be one of {', '.join(VECTOR_DTYPES)}, got {dtype!r}")
            if data.get("vector") is None:
                raise ValueError("dtype is given but vector is null (a record without a vector has no dtype)")
            data["vector"] = as_vector(data.get("vector"), dtype)
        return data

    @pydantic.model_validator(mode="after")
    def _vectorless(self) -> Self:
        if self.vector is None and self.embedding_id is not None:
            raise ValueError(
                f"embedding_id must be None for a record without a vector, got {self.embedding_id!r}"
            )
        return self

    @property
    def id(self) -> str:
        """The note's id."""
        return self.note.id

    # No return annotation on purpose: pydantic then derives the serialization JSON schema from the
    # fields (an annotated dict[str, Any] would make it a bare object without properties).
    @pydantic.model_serializer(mode="wrap")
    def _serialize(  # type: ignore[no-untyped-def]
        self, handler: pydantic.SerializerFunctionWrapHandler, info: pydantic.SerializationInfo
    ):
        out: dict[str, Any] = handler(self)
        if out.get("expires_at", 0) is None:
            del out["expires_at"]
        if out.get("blob", 0) is None:
            del out["blob"]
        vector = self.vector
        if info.mode_is_json() and vector is not None and vector.dtype.name != "float64":
            out["dtype"] = vector.dtype.name
        return out

    @staticmethod
    def trusted(
        note: Note,
        vector: np.ndarray | None,
        embedding_id: str | None,
        namespace: tuple[str, ...],
        version: int | None = None,
        expires_at: float | None = None,
        blob: bytes | None = None,
    ) -> MemoryRecord:
        """The one unvalidated constructor of a MemoryRecord (:meth:`Contract.constructor`), for values
        already validated (data the store itself wrote). No checks, no copy. Its bulk form:
        :meth:`trusted_rows`."""
        return _memory_record(
            {
                "note": note,
                "vector": vector,
                "embedding_id": embedding_id,
                "namespace": namespace,
                "expires_at": expires_at,
                "blob": blob,
                "version": version,
            }
        )

    @staticmethod
    def trusted_rows(rows: Iterable[StoredRow], namespace: tuple[str, ...]) -> list[MemoryRecord]:
        """The records of ``rows`` in ``namespace``, in order: of each ``(id, timestamp, (text,
        metadata, embedding_id, vector, blob), version, expires_at)`` what :meth:`trusted` builds
        with a :meth:`Note.trusted <coniti.actor.Note.trusted>` note, for values already validated
        (rows a store read back, its own writing). No checks, no copy. The two written out in one
        comprehension, without their two calls a record: the hot loop of every page a store reads."""
        note = _note
        return [
            _memory_record({
                "note": note({"id": rid, "text": text, "timestamp": ts, "metadata": metadata}),
                "vector": vector, "embedding_id": embedding_id, "namespace": namespace,
                "expires_at": expires_at, "blob": blob, "version": version,
            })
            for rid, ts, (text, metadata, embedding_id, vector, blob), version, expires_at in rows
        ]

    def with_version(self, version: int | None) -> MemoryRecord:
        """This record (shared, not copied) stamped with ``version``."""
        return MemoryRecord.trusted(
            self.note, self.vector, self.embedding_id, self.namespace, version, self.expires_at, self.blob
        )

    def identical(self, other: MemoryRecord) -> bool:
        """The same content bit for bit: note (timestamp bits, metadata with its JSON types: ``1``,
        ``1.0`` and ``True`` differ), vector dtype and bytes (or both none), embedding id, namespace,
        expiry, blob bytes. This is what makes an upsert ``unchanged``. The version is not compared."""
        if self != other:
            return False
        a, b = self.note, other.note
        return (
            _bits(a.timestamp) == _bits(b.timestamp)
            and _bits(self.expires_at) == _bits(other.expires_at)
            and _json_key(a.metadata) == _json_key(b.metadata)
            and (self.vector is None or other.vector is not None and self.vector.tobytes() == other.vector.tobytes())
        )

    def copy_out(self) -> MemoryRecord:
        """A deep copy (vector and metadata; the blob is immutable bytes, shared), for handing a
        stored record to a caller."""
        note = self.note
        return MemoryRecord.trusted(
            Note.trusted(note.id, note.text, note.timestamp, check_json_value(note.metadata, "metadata")),
            None if self.vector is None else self.vector.copy(),
            self.embedding_id,
            self.namespace,
            self.version,
            self.expires_at,
            self.blob,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MemoryRecord):
            return NotImplemented
        return (
            self.note == other.note
            and self.embedding_id == other.embedding_id
            and self.namespace == other.namespace
            and self.expires_at == other.expires_at
            and self.blob == other.blob
            and _same_vector(self.vector, other.vector)
        )

    __hash__ = None  # type: ignore[assignment]


def _same_vector(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))


_memory_record = MemoryRecord.constructor()
_note = Note.constructor()


def _bits(value: float | None) -> str | None:
    return None if value is None else float(value).hex()


def _json_key(value: Any) -> str:
    """``value`` as canonical JSON that tells ``1``, ``1.0`` and ``True`` apart."""
    return json.dumps(_typed(value), sort_keys=True, separators=(",", ":"), allow_nan=False)


def _typed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, bool):
        return ["b", value]
    if isinstance(value, int):
        return ["i", value]
    if isinstance(value, float):
        return ["f", value.hex()]
    return value


class PutRequest(Contract):
    """Write ``records`` (all or nothing)."""

    records: list[MemoryRecord]


_put_request = PutRequest.constructor()


class PutResult(Contract):
    written: int


class GetRequest(Contract):
    """Read ``ids`` from ``namespace``; unknown ids are reported, not raised."""

    ids: list[pydantic.StrictStr]
    namespace: Namespace = ()


class GetResult(Contract):
    records: list[MemoryRecord]
    missing: list[str]


class DeleteRequest(Contract):
    """Remove ``ids`` from ``namespace``; unknown ids are reported, not raised."""

    ids: list[pydantic.StrictStr]
    namespace: Namespace = ()


class DeleteResult(Contract):
    deleted: list[str]
    missing: list[str]


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


MetaKey = Annotated[pydantic.StrictStr, pydantic.Field(min_length=1)]


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


RecordId = Annotated[pydantic.StrictStr, pydantic.Field(min_length=1)]


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
    text: pydantic.StrictStr | None = None
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
    op_id: Annotated[pydantic.StrictStr, pydantic.Field(min_length=1, max_length=1024)] | None = None
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
                    f"ops[{i}].record.namespace {op.record.namespace!r} is not the request's "
                    f"namespace {self.namespace!r}"
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
        return hashlib.sha256(_json_key(data).encode("utf-8", "surrogatepass")).hexdigest()


class WriteResult(Contract):
    """What a write did. ``versions``: the live version, after the write, of every id upserted or
    patched (written or unchanged); ``unchanged``: ids whose op wrote nothing; ``deleted``: ids a
    delete ended; ``missing``: deletes (and, with ``missing_ok``, patches) of ids that were not
    live; ``replayed``: True when this is the stored result of an earlier request with the same
    op id, and nothing was written now."""

    versions: dict[str, int] = pydantic.Field(default_factory=dict)
    unchanged: list[str] = pydantic.Field(default_factory=list)
    deleted: list[str] = pydantic.Field(default_factory=list)
    missing: list[str] = pydantic.Field(default_factory=list)
    replayed: bool = False


class FeedbackRequest(Contract):
    """Give the live record ``id`` of ``namespace`` the feedback ``weight`` (a finite number;
    positive promotes it in hybrid recall, negative demotes it), with an optional ``reason``."""

    id: pydantic.StrictStr = pydantic.Field(min_length=1)
    weight: float = pydantic.Field(allow_inf_nan=False)
    namespace: Namespace = ()
    reason: str | None = None

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
                        f"ops[{i}]: no live record {op.id!r} in namespace {ns!r} to patch; "
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
        f"op id {op_id!r} was used by another write request in namespace {namespace!r}; "
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
    expires_at = None if op.clear_expiry else (live.expires_at if op.expires_at is None else op.expires_at)
    blob = None if op.clear_blob else (live.blob if op.blob is None else op.blob)
    return MemoryRecord.trusted(
        Note.trusted(
            note.id,
            text,
            note.timestamp if op.timestamp is None else op.timestamp,
            check_json_value(metadata, "metadata"),
        ),
        None if vector is None else vector.copy(),
        live.embedding_id,
        live.namespace,
        None,
        expires_at,
        blob,
    )


R = TypeVar("R", bound=Contract)
T = TypeVar("T")


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


class MemoryBackend(ABC):
    """Where memory lives. Subclasses implement the eight operations and :meth:`namespaces`; the rest
    is derived here.

    Concrete helpers: :meth:`iter_all`, :meth:`dump`, :meth:`load`, the async twins (``aput`` ...,
    which run the sync call in a worker thread unless a backend overrides them), request factories
    (``put_request`` ...), :meth:`close` and use as a context manager. Optional capabilities are
    declared by the ``supports_*`` class attributes below (never detected), typed for callers by
    :func:`time_travel` and :func:`event_feed`, and checked by ``coniti.testing.CapabilityTests``.
    """

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
    event when it carries an op id (the engine relies on these counts). Read it with
    :func:`event_feed`."""

    supports_put_with_meta: ClassVar[bool] = False
    """:meth:`put_with_meta` sets one metadata value and writes records as one all-or-nothing step."""

    supports_put_batches: ClassVar[bool] = False
    """:meth:`put_batches` writes any number of records (and one metadata value) as one
    all-or-nothing step; :meth:`load` then is all or nothing even when the process is killed."""
    supports_write: ClassVar[bool] = False
    supports_feedback: ClassVar[bool] = False
    """:meth:`feedback` records feedback on a record and :meth:`feedback_weights` reads it back."""
    """:meth:`write` (upsert, patch, delete, compare-and-set, op ids) and expiry (``expires_at``
    hidden from reads once passed, :meth:`sweep`) are implemented."""

    supports_derived_state: ClassVar[bool] = False
    """The backend is a :class:`DerivedHome`: it names a directory beside the store where derived
    state (the engine's indexes) may be kept, and the store's identity that such state is checked
    against. Read it with :func:`derived_home`."""

    # -- the abstract core -------------------------------------------------------------------

    @abstractmethod
    def put(self, request: PutRequest) -> PutResult:
        """Write the records, all or nothing."""

    @abstractmethod
    def get(self, request: GetRequest) -> GetResult:
        """Read records by id, in request order; unknown ids in ``missing``."""

    @abstractmethod
    def delete(self, request: DeleteRequest) -> DeleteResult:
        """Remove records by id; unknown ids in ``missing``."""

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

    # -- derived helpers ---------------------------------------------------------------------

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

    # -- request factories -------------------------------------------------------------------

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

    # -- async twins: the sync call on a worker thread (context variables are carried along) --

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


# -- typed views of the optional capabilities (declared by the class attributes above) ------------


class TimeTravel(Protocol):
    """A backend that declares ``supports_time_travel``: read-only views of earlier states."""

    def at(self, seq: int | None = None, *, time: float | datetime | None = None) -> MemoryBackend:
        """Memory right after event ``seq`` (or the last event at or before ``time``)."""
        ...


class EventFeed(Protocol):
    """A backend that declares ``supports_event_feed``: the audit trail in sequence order."""

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
