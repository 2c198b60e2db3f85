"""The payloads of events, encoded: what follows a frame's digest (``log/FORMAT.md`` §3), and the
msgpack the log writes it with; and a put payload's content read back (:class:`RecordData`, with the
checks the read paths make and their shortcut for the usual payload). The envelope and the frame
around a payload, the strict decoding of every event and the checks against the frame's digest or
its index entry's CRC are :mod:`coniti.log.codec`'s (which re-exports these encoders and
:class:`RecordData`).

Payload maps: ``put`` ``{"tx", "md", "e"[, "vd", "vs", "vb"][, "bl"][, "kd"][, "vl"]}`` (text, metadata, embedding
id, the vector's dtype, shape and raw bytes, the binary payload), ``meta`` ``{"mv"}``, ``feedback``
``{"fw"}``, ``op`` ``{"d", "res"}``; ``delete``, ``clear`` and ``erase`` carry none. Integers
outside 64 bits are written as :data:`EXT_BIGINT` values (decimal ASCII).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import msgpack
import numpy as np

from coniti.errors import ContractError
from coniti.jsonl import MAX_BLOB_BYTES

__all__ = [
    "EMPTY_DIGEST",
    "EXT_BIGINT",
    "VECTOR_TAIL",
    "RecordData",
    "encode_feedback_payload",
    "encode_meta_payload",
    "encode_op_payload",
    "encode_put_payload",
    "encode_put_payloads",
    "learn_vector_tail",
    "packb",
    "packer",
    "payload_digest",
    "payload_digests",
]

EXT_BIGINT = 1
"""msgpack ext type code for an integer outside the signed/unsigned 64-bit range (decimal ASCII)."""
_sha256 = hashlib.sha256
EMPTY_DIGEST = _sha256(b"").digest()
"""The digest of no payload (every event without one carries it)."""


def _bigints(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if -(1 << 63) <= value < (1 << 64):
            return value
        return msgpack.ExtType(EXT_BIGINT, str(value).encode("ascii"))
    if isinstance(value, dict):
        return {k: _bigints(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_bigints(v) for v in value]
    return value


_local = threading.local()


def packer() -> msgpack.Packer:
    """This thread's msgpack packer (binary as bin, lone surrogates passed through): its ``pack``
    raises OverflowError for an integer beyond 64 bits, which :func:`packb` encodes instead."""
    try:
        found: msgpack.Packer = _local.packer
    except AttributeError:
        found = _local.packer = msgpack.Packer(use_bin_type=True, unicode_errors="surrogatepass")
    return found


def packb(obj: Any) -> bytes:
    """``obj`` packed as the log packs it: msgpack, integers outside 64 bits as
    :data:`EXT_BIGINT` values."""
    try:
        packing: msgpack.Packer = _local.packer
    except AttributeError:
        packing = packer()
    try:
        out: bytes = packing.pack(obj)
    except OverflowError:
        out = packing.pack(_bigints(obj))
    return out


def encode_put_payload(
    text: str,
    metadata: dict[str, Any],
    embedding_id: str | None,
    vector: np.ndarray | None,
    blob: bytes | None = None,
    kind: str | None = None,
    facts: tuple[float | None, float | None, tuple[str, ...]] | None = None,
) -> bytes:
    """The payload of a put event. ``vector`` keeps its dtype and exact bits; ``blob`` (at most
    :data:`MAX_BLOB_BYTES`, else :class:`ContractError`) is stored as msgpack bin; ``kind`` (the
    note's kind) as the string ``"kd"``, written only when set (a put without it reads as kind None);
    ``facts`` (the note's valid time and sources) as ``"vl"``: ``[valid_from, valid_to, [source,
    ...]]``, written only when given.

    Byte for byte ``packb({"tx": text, "md": metadata, "e": embedding_id, "vd": vector.dtype.str,
    "vs": list(vector.shape), "vb": vector.tobytes(), "bl": blob})``, the vector's three keys left
    out when it is None and ``"bl"`` when the blob is. For a vector without a blob (the usual put),
    once a (dtype, shape) has been seen, the payload is assembled from parts instead: the map
    header and keys are constants, and everything from ``"vd"`` up to the vector's first byte
    depends on the dtype and shape alone."""
    if vector is None or blob is not None or kind is not None or facts is not None:
        return _general_put_payload(text, metadata, embedding_id, vector, blob, kind, facts)
    shape = vector.shape
    middle = _VECTOR_HEADS.get((vector.dtype, shape))
    if middle is not None:
        pack = packer().pack
        try:
            return b"".join(
                (_TX, pack(text), _MD, pack(metadata), _E, pack(embedding_id), middle, vector.tobytes())
            )
        except OverflowError:
            pass  # an integer beyond 64 bits in the metadata: the general path encodes it
    raw = vector.tobytes()
    vd, vs = vector.dtype.str, list(shape)
    payload = packb({"tx": text, "md": metadata, "e": embedding_id, "vd": vd, "vs": vs, "vb": raw})
    if middle is None and len(_VECTOR_HEADS) < 64:
        tail = packb({"vd": vd, "vs": vs, "vb": raw})
        _VECTOR_HEADS[(vector.dtype, shape)] = tail[1 : len(tail) - len(raw)]
    return payload


def encode_put_payloads(
    texts: Sequence[str],
    metadata: Sequence[dict[str, Any]],
    embedding_id: str | None,
    vectors: np.ndarray | None,
) -> list[bytes]:
    """The put payloads of a column of records sharing ``embedding_id``, row ``i`` of the
    C-contiguous matrix ``vectors`` (or no vector when None) being record ``i``'s vector: each
    equal byte for byte to ``encode_put_payload(texts[i], metadata[i], embedding_id,
    vectors[i])``. Rows are sliced from one ``tobytes()`` of the matrix, and the parts that depend
    on the dtype and width alone are packed once (bulk writes)."""
    n = len(texts)
    if vectors is None or n == 0:
        return [encode_put_payload(texts[i], metadata[i], embedding_id, None) for i in range(n)]
    out = [encode_put_payload(texts[0], metadata[0], embedding_id, vectors[0])]
    middle = _VECTOR_HEADS.get((vectors.dtype, vectors.shape[1:]))
    if middle is None or not vectors.flags.c_contiguous:  # the heads cache is full: one by one
        return out + [
            encode_put_payload(texts[i], metadata[i], embedding_id, vectors[i]) for i in range(1, n)
        ]
    raw = vectors.tobytes()
    width = len(raw) // n
    pack = packer().pack
    e = _E + pack(embedding_id)
    join = b"".join
    add = out.append
    for i in range(1, n):
        try:
            add(join((_TX, pack(texts[i]), _MD, pack(metadata[i]), e, middle, raw[i * width : (i + 1) * width])))
        except OverflowError:  # an integer beyond 64 bits in the metadata: the general path
            add(encode_put_payload(texts[i], metadata[i], embedding_id, vectors[i]))
    return out


def _general_put_payload(
    text: str,
    metadata: dict[str, Any],
    embedding_id: str | None,
    vector: np.ndarray | None,
    blob: bytes | None,
    kind: str | None = None,
    facts: tuple[float | None, float | None, tuple[str, ...]] | None = None,
) -> bytes:
    """A put payload without a vector, or with a blob or a kind (see :func:`encode_put_payload`)."""
    content: dict[str, Any] = {"tx": text, "md": metadata, "e": embedding_id}
    if vector is not None:
        content.update(vd=vector.dtype.str, vs=list(vector.shape), vb=vector.tobytes())
    if blob is not None:
        if type(blob) is not bytes:
            raise ContractError(f"blob must be bytes, got {type(blob).__name__}")
        if len(blob) > MAX_BLOB_BYTES:
            raise ContractError(f"blob is {len(blob)} bytes; at most {MAX_BLOB_BYTES} allowed")
        content["bl"] = blob
    if kind is not None:
        content["kd"] = kind
    if facts is not None:
        content["vl"] = [facts[0], facts[1], list(facts[2])]
    return packb(content)


_TX, _MD, _E = b"\x86\xa2tx", b"\xa2md", b"\xa1e"
"""The packed map header (six entries) with key ``"tx"``; keys ``"md"`` and ``"e"``."""
_VECTOR_HEADS: dict[tuple[np.dtype[Any], tuple[int, ...]], bytes] = {}
"""Per vector (dtype, shape): the packed payload bytes from key ``"vd"`` up to the vector's first
byte (``"vd"``, its value, ``"vs"``, its value, ``"vb"`` and the bin header). At most 64 kept."""


VectorTail = tuple[bytes, np.dtype[Any], int, int]
VECTOR_TAIL: list[VectorTail | None] = [None]
"""The vector tail a read tries first (:func:`coniti.log.codec.read_content`): ``(the packed bytes of
a usual payload from key "vd" up to the vector's first byte, dtype, element count, vector bytes)``
of the last usual payload read, as :func:`learn_vector_tail` made it; None before any."""
_TAILS: dict[tuple[str, int], VectorTail] = {}
"""The vector tails made, per (dtype string, element count); at most 64 kept."""


def learn_vector_tail(vd: str, vector: np.ndarray) -> None:
    """Make the tail of a usual payload whose vector has dtype string ``vd`` (as stored) and
    ``vector``'s length (and dtype) :data:`VECTOR_TAIL`."""
    key = (vd, len(vector))
    tail = _TAILS.get(key)
    if tail is None:
        raw = vector.tobytes()
        packed = packb({"vd": vd, "vs": [len(vector)], "vb": raw})
        tail = (packed[1 : len(packed) - len(raw)], vector.dtype, len(vector), len(raw))
        if len(_TAILS) < 64:
            _TAILS[key] = tail
    VECTOR_TAIL[0] = tail


def payload_digest(payload: bytes) -> bytes:
    """``SHA-256(payload)``, the digest a frame carries."""
    return _sha256(payload).digest() if payload else EMPTY_DIGEST


def payload_digests(payloads: Iterable[bytes]) -> list[bytes]:
    """:func:`payload_digest` of each of ``payloads``, in order (bulk writes)."""
    sha256 = _sha256
    return [sha256(payload).digest() if payload else EMPTY_DIGEST for payload in payloads]


def encode_meta_payload(value: Any) -> bytes:
    """The payload of a meta event."""
    return packb({"mv": value})


def encode_feedback_payload(weight: float) -> bytes:
    """The payload of a feedback event: its finite float weight."""
    return packb({"fw": float(weight)})


def encode_op_payload(digest: str, result: dict[str, Any]) -> bytes:
    """The payload of an op event: the request's digest (hex) and its result map."""
    return packb({"d": digest, "res": result})


# -- a put payload's content, read back (the checks and the shortcut of the read paths) ----------

_unpackb = msgpack.unpackb
_frombuffer = np.frombuffer
_tuple_new = tuple.__new__
"""Builds a NamedTuple without its Python-level ``__new__`` (hot read paths)."""
_NOT_THIS_TAIL = (ValueError, KeyError, TypeError, msgpack.UnpackException)
_VECTOR_DTYPES = frozenset({"<f2", "<f4", "<f8", ">f2", ">f4", ">f8"})
_DTYPES: dict[str, np.dtype[Any]] = {name: np.dtype(name) for name in _VECTOR_DTYPES}


class RecordData(NamedTuple):
    """The content of a put event (absent once erased): ``vector`` None for a record without one,
    ``blob`` the binary payload or None, ``kind`` the note's kind (payload field ``kd``) or None,
    ``facts`` the note's ``(valid_from, valid_to, derived_from)`` (payload field ``vl``) or None."""

    text: str
    metadata: dict[str, Any]
    embedding_id: str | None
    vector: np.ndarray | None
    blob: bytes | None = None
    kind: str | None = None
    facts: tuple[float | None, float | None, tuple[str, ...]] | None = None


def _ext_hook(code: int, data: bytes) -> Any:
    if code == EXT_BIGINT:
        text = data.decode("ascii")
        if not text or not text.lstrip("-").isdigit():
            raise ValueError("malformed big integer")
        return int(text)
    raise ValueError(f"unknown msgpack ext type {code}")


def _unpack(data: bytes | memoryview) -> Any:
    # msgpack >= 1.0 defaults: raw=False (str as str), strict_map_key=True, use_list=True.
    # Strict UTF-8 first (fast); a lone surrogate, written with "surrogatepass", takes the retry.
    try:
        return msgpack.unpackb(data, ext_hook=_ext_hook)
    except UnicodeDecodeError:
        return msgpack.unpackb(data, ext_hook=_ext_hook, unicode_errors="surrogatepass")


_BLOB = "bl"
_KIND = "kd"
_FACTS = "vl"


def _facts(value: Any) -> tuple[float | None, float | None, tuple[str, ...]]:
    """Payload field ``vl``: ``[valid_from or nil, valid_to or nil, [source, ...]]``."""
    if type(value) is not list or len(value) != 3:
        raise ValueError("field vl (valid time and sources) is not an array of three")
    start, end, sources = value
    for name, t in (("valid_from", start), ("valid_to", end)):
        if t is not None and (type(t) is not float or not np.isfinite(t)):
            raise ValueError(f"field vl ({name}) is not a finite float or nil")
    if start is not None and end is not None and end < start:
        raise ValueError("field vl: valid_to is before valid_from")
    if type(sources) is not list or not all(type(r) is str and r for r in sources):
        raise ValueError("field vl (sources) is not an array of non-empty strings")
    return (start, end, tuple(sources))


def _stored_record(payload: Any) -> RecordData:
    """The content of a put payload the store wrote, with just the checks that make a damaged one
    raise (ValueError, KeyError, TypeError) instead of decoding to something else. The vector is a
    fresh writable array that owns its data (a copy, not a view of a bytearray: no buffer object
    and memoryview behind it for the garbage collector to track, per record read)."""
    size = len(payload)
    vector = None
    if size == 6 or "vb" in payload:  # six fields: the usual put, a vector and no blob
        raw = payload["vb"]
        if type(raw) is not bytes:
            raise ValueError("field vb (vector bytes) is not binary")
        dtype = _DTYPES.get(payload["vd"])
        if dtype is None:
            raise ValueError(f"unsupported vector dtype {payload['vd']!r}")
        vector = _frombuffer(raw, dtype).copy()
        n = len(vector)
        if not n or payload["vs"] != [n]:
            raise ValueError("vector shape and bytes disagree")
        if size == 6:
            return _tuple_new(RecordData, (payload["tx"], payload["md"], payload["e"], vector, None, None, None))
    blob = payload.get(_BLOB)
    if blob is not None and type(blob) is not bytes:
        raise ValueError("field bl (blob) is not binary")
    kind = payload.get(_KIND)
    if kind is not None and type(kind) is not str:
        raise ValueError("field kd (kind) is not a string")
    facts = payload.get(_FACTS)
    if facts is not None:
        facts = _facts(facts)
    if size != 3 + 3 * (vector is not None) + (blob is not None) + (kind is not None) + (facts is not None):
        raise ValueError("put payload has unknown or missing fields")
    return _tuple_new(RecordData, (payload["tx"], payload["md"], payload["e"], vector, blob, kind, facts))


def _stored_content(payload: bytes) -> RecordData:
    """``_stored_record`` of ``payload`` decoded (a put payload the store wrote, checksum confirmed).
    When it begins as a map of six and ends with the packed ``"vd"``, ``"vs"``, ``"vb"`` entries of
    :data:`VECTOR_TAIL`, only its first three entries are unpacked (as a map of three, which must
    decode completely to ``tx``, ``md``, ``e``) and the vector is copied from its bytes: msgpack
    decodes left to right, so this is what the full decode gives. Anything else (another tail, more
    fields, damage) takes the full decode, which raises for a damaged payload."""
    tail = VECTOR_TAIL[0]
    if tail is not None:
        mid, dtype, count, nbytes = tail
        vector_at = len(payload) - nbytes
        cut = vector_at - len(mid)
        if cut > 1 and payload[0] == 0x86 and payload.startswith(mid, cut):
            try:
                head = _unpackb(b"\x83" + payload[1:cut], ext_hook=_ext_hook)
                if len(head) == 3:
                    vector = _frombuffer(payload, dtype, count, vector_at).copy()
                    return _tuple_new(RecordData, (head["tx"], head["md"], head["e"], vector, None, None, None))
            except _NOT_THIS_TAIL:
                pass  # not that tail after all, or a lone surrogate in the text: the full decode
    decoded = _unpack(payload)
    record = _stored_record(decoded)
    if record.vector is not None and len(decoded) == 6:
        learn_vector_tail(decoded["vd"], record.vector)
    return record
