"""Records: :class:`MemoryRecord`, its namespace, vector and blob types, and their validators.

What memory stores, as values: a record is a :class:`~coniti.actor.Note` with its vector (or none),
the embedding id that made it, its :data:`Namespace` (a tuple of non-empty strings), an optional
expiry and an optional opaque :data:`Blob`. This module knows no backend and no request; the
request/result contracts build on it (:mod:`coniti.requests`), and :mod:`coniti.memory` re-exports
every public name here (the spec's import path).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Self

import numpy as np
import pydantic

from coniti.actor import Note, to_stored_time
from coniti.contracts import Contract, check_json_value, check_text
from coniti.errors import ContractError
from coniti.jsonl import MAX_BLOB_BYTES

__all__ = [
    "VECTOR_DTYPES",
    "Blob",
    "MemoryRecord",
    "Namespace",
    "StoredRow",
    "Vector",
    "as_blob",
    "as_namespace",
    "as_vector",
    "json_key",
]

VECTOR_DTYPES = ("float16", "float32", "float64")
_FLOAT_TYPES = (np.float16, np.float32, np.float64)
_NUMBER_TYPES = {int, float, np.float16, np.float32, np.float64, np.int32, np.int64}


def as_namespace(value: Any) -> tuple[str, ...]:
    """``value`` as a namespace tuple; raises :class:`ContractError` unless it is a sequence of
    non-empty strings of valid Unicode (a bare string is refused: ``"alice"`` is not ``("alice",)``)."""
    if type(value) is tuple:  # the common case, without the Sequence ABC check
        for part in value:
            if type(part) is not str or not part or not part.isascii():
                break
        else:
            return value
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ContractError(f"namespace must be a tuple of strings, got {type(value).__name__}")
    out = tuple(value)
    for i, part in enumerate(out):
        if not isinstance(part, str) or not part:
            raise ContractError(f"namespace[{i}] must be a non-empty string, got {part!r}")
        try:
            check_text(part, f"namespace[{i}]")
        except ValueError as exc:
            raise ContractError(str(exc)) from None
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
    str,
    float,
    tuple[
        str,
        dict[str, Any],
        str | None,
        np.ndarray | None,
        bytes | None,
        str | None,
        tuple[float | None, float | None, tuple[str, ...]] | None,
    ],
    int,
    float | None,
]
"""A record as a store reads it back (what :meth:`MemoryRecord.trusted_rows` takes): ``(id,
timestamp, (text, metadata, embedding_id, vector, blob, kind, facts), version, expires_at)``."""


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
        metadata, embedding_id, vector, blob, kind, facts), version, expires_at)`` what :meth:`trusted` builds
        with a :meth:`Note.trusted <coniti.actor.Note.trusted>` note, for values already validated
        (rows a store read back, its own writing). No checks, no copy. The two written out in one
        comprehension, without their two calls a record: the hot loop of every page a store reads."""
        note = _note
        return [
            _memory_record({
                "note": note({
                    "id": rid, "text": text, "timestamp": ts, "metadata": metadata, "kind": kind,
                    "valid_from": None if facts is None else facts[0],
                    "valid_to": None if facts is None else facts[1],
                    "derived_from": () if facts is None else facts[2],
                }),
                "vector": vector, "embedding_id": embedding_id, "namespace": namespace,
                "expires_at": expires_at, "blob": blob, "version": version,
            })
            for rid, ts, (text, metadata, embedding_id, vector, blob, kind, facts), version, expires_at in rows
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
            and json_key(a.metadata) == json_key(b.metadata)
            and (self.vector is None or other.vector is not None and self.vector.tobytes() == other.vector.tobytes())
        )

    def copy_out(self) -> MemoryRecord:
        """A deep copy (vector and metadata; the blob is immutable bytes, shared), for handing a
        stored record to a caller."""
        note = self.note
        return MemoryRecord.trusted(
            Note.trusted(
                note.id, note.text, note.timestamp, check_json_value(note.metadata, "metadata"), note.kind,
                note.facts(),
            ),
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


def json_key(value: Any) -> str:
    """``value`` as canonical JSON that tells ``1``, ``1.0`` and ``True`` apart (keys sorted,
    floats by their bits): what :meth:`MemoryRecord.identical` compares metadata by and
    :meth:`~coniti.requests.WriteRequest.digest` hashes. Raises ValueError for NaN or infinity."""
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

