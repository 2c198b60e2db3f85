"""The event codec: one place that turns events into bytes and back. See ``log/FORMAT.md``.

An event is stored in the ``log`` sub-database (key: its sequence number) as a *frame*::

    u32 big-endian E | envelope (E bytes, msgpack map) | digest (32 bytes) | payload (msgpack, or empty)

* The envelope holds what every event has: event version ``v``, kind ``k``, sequence number ``s``,
  recorded time ``t``, previous event's hash ``p``, namespace ``n``, and by kind the record id ``i``,
  note timestamp ``ts``, metadata key ``mk``, and the optional ``a`` (actor) and ``r`` (reason).
* The payload holds the content: for ``put`` the text ``tx``, metadata ``md``, embedding id ``e``,
  the vector (if the record has one) as dtype ``vd``, shape ``vs`` and raw bytes ``vb``, and the
  binary payload ``bl`` (msgpack bin, if the record has one); for ``meta`` the value ``mv``; for
  ``feedback`` the weight ``fw``. ``delete``, ``clear`` and ``erase`` have an empty payload.
* ``digest = SHA-256(payload)``. An erased event keeps its digest and drops its payload.
* The event's hash is ``SHA-256(prev || envelope || digest)``: the chain covers the payload through its
  digest only, so dropping a payload (erasure) leaves every hash intact.

The frame layout is written by :func:`_encode`, the one envelope encoder, and read by
:func:`split_frame`, nowhere else. Decoding is strict: map keys must be strings, the only ext type
is :data:`EXT_BIGINT` (integers outside 64 bits, as decimal text), lengths are bounded by the frame,
and an event of a newer :data:`EVENT_VERSION` is refused rather than guessed at. An older one is
upcast on read through :data:`UPCASTERS` (:func:`_current`). A frame that does not decode raises
:class:`~coniti.errors.StoreCorrupted` (:func:`_corrupted` words it). The payloads are packed by
:mod:`coniti.log.payloads` (its encoders are re-exported here); this module frames, checks and
decodes them.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from coniti.errors import StoreCorrupted, StoreVersionError
from coniti.jsonl import MAX_BLOB_BYTES
from coniti.log.payloads import (
    _BLOB,
    _DTYPES,
    _FACTS,
    _KIND,
    EMPTY_DIGEST,
    EXT_BIGINT,
    RecordData,
    _ext_hook,
    _facts,
    _stored_content,
    _stored_record,
    _unpack,
    encode_feedback_payload,
    encode_meta_payload,
    encode_op_payload,
    encode_put_payload,
    encode_put_payloads,
    packb,
    packer,
    payload_digest,
    payload_digests,
)

__all__ = [
    "CLEAR",
    "DELETE",
    "ERASE",
    "FEEDBACK",
    "OP",
    "PAYLOAD_UPCASTS",
    "EVENT_VERSION",
    "EXT_BIGINT",
    "GENESIS",
    "KINDS",
    "MAX_BLOB_BYTES",
    "META",
    "PUT",
    "UPCASTERS",
    "LogEvent",
    "RecordData",
    "Upcaster",
    "decode_content",
    "decode_envelope",
    "decode_event",
    "decode_op",
    "decode_put_meta",
    "decode_record",
    "decode_value",
    "encode_event",
    "encode_feedback_payload",
    "encode_meta_payload",
    "encode_op_payload",
    "encode_deletes",
    "encode_put_payload",
    "encode_put_payloads",
    "encode_puts",
    "erase_payload",
    "event_hash",
    "is_erased",
    "payload_digest",
    "payload_digests",
    "payload_view",
    "read_content",
    "read_feedback",
    "read_meta",
    "read_put",
    "recorded_at",
    "split_frame",
]

EVENT_VERSION = 3
"""The event version this coniti writes (envelope field ``v``); it reads every version up to it.
Version 2 added the kind ``op`` (an op id's receipt, field ``o``) and the put fields ``pv`` (the
version a put replaces) and ``x`` (expiry); a version-1 event means the same as version 2.
Version 3 made a put's vector (``vd``, ``vs``, ``vb``) optional, added its binary payload ``bl``,
added the kind ``feedback`` (a weight ``fw`` given to record ``i``), and lets an ``erase`` event
name a metadata key (``mk``) instead of a record id (``i``): the receipt of erasing that key's
values. A version-2 event (a put always with a vector, never a blob) means the same as version 3."""
PUT, DELETE, META, CLEAR, ERASE, OP = "put", "delete", "meta", "clear", "erase", "op"
FEEDBACK = "feedback"
KINDS = frozenset({PUT, DELETE, META, CLEAR, ERASE, OP, FEEDBACK})
GENESIS = bytes(32)
"""The ``prev`` hash of event 1."""

Upcaster = Callable[[dict[str, Any], Any], tuple[dict[str, Any], Any]]
"""Turns an event of version ``n`` into one of version ``n + 1``: ``(envelope map, payload)`` in,
the same out, with the envelope's ``v`` set to ``n + 1``. ``payload`` is the decoded payload map, or
None when the frame has none or the caller reads the envelope only; an upcaster must accept None."""


def _v1_to_v2(env: dict[str, Any], payload: Any) -> tuple[dict[str, Any], Any]:
    """Version 1 -> 2: the same fields and payloads (version 2 only added optional ones)."""
    return {**env, "v": 2}, payload


def _v2_to_v3(env: dict[str, Any], payload: Any) -> tuple[dict[str, Any], Any]:
    """Version 2 -> 3: the same fields and payloads (every version-2 put has a vector and no blob,
    which version 3 writes the same way; version 3 also added the kind ``feedback`` and erase
    receipts naming ``mk``)."""
    return {**env, "v": 3}, payload


UPCASTERS: dict[int, Upcaster] = {1: _v1_to_v2, 2: _v2_to_v3}
"""Event version ``n`` -> the :data:`Upcaster` from ``n`` to ``n + 1``; one for every version below
:data:`EVENT_VERSION`. Applied in order on decode, before the envelope is checked; the hash stays
that of the stored bytes."""
PAYLOAD_UPCASTS: frozenset[int] = frozenset()
"""The versions whose upcaster changes the payload (none: 1 -> 2 and 2 -> 3 change only ``v``).
While this is empty, :func:`decode_content` reads a put's payload without its envelope, whatever its version."""

_U32 = struct.Struct(">I")
_unpack_u32 = _U32.unpack_from
_HEAD = 4
_DIGEST = 32
_sha256 = hashlib.sha256
_unpackb = msgpack.unpackb
_frombuffer = np.frombuffer
_tuple_new = tuple.__new__
"""Builds a NamedTuple without its Python-level ``__new__`` (hot read paths)."""
_pack = packb
"""The log's msgpack encoder (:func:`coniti.log.payloads.packb`), by its name in the codec's tests."""


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One decoded stored event (the log layer's; :class:`coniti.events.Event` is the public one).
    ``record`` (put) and ``value`` (meta) are None when erased or not applicable."""

    seq: int
    at: float
    kind: str
    namespace: tuple[str, ...]
    prev: bytes
    digest: bytes
    hash: bytes
    id: str | None = None
    timestamp: float | None = None
    key: str | None = None
    actor: str | None = None
    reason: str | None = None
    record: RecordData | None = None
    value: Any = None
    erased: bool = False
    replaces: int | None = None
    """A put's ``pv``: the put seq of the live version it replaces (None: the id was not live)."""
    expires_at: float | None = None
    """A put's ``x``: when the version expires (None: never)."""
    op_id: str | None = None
    """An op event's ``o``: the op id its write request carried (``value`` is the receipt map)."""


# -- the frame layout ------------------------------------------------------------------------


def split_frame(frame: bytes | memoryview) -> tuple[bytes, bytes, bytes]:
    """``(envelope bytes, digest, payload bytes)`` of a frame: the one reader of the frame layout
    (:func:`_encode` writes it). Raises ValueError if the frame is too short for its envelope length
    and digest."""
    if type(frame) is not bytes:
        frame = bytes(frame)
    size = len(frame)
    if size < _HEAD + _DIGEST:
        raise ValueError("frame too short")
    end: int = _HEAD + _unpack_u32(frame)[0]
    if end + _DIGEST > size:
        raise ValueError("envelope length exceeds the frame")
    return frame[_HEAD:end], frame[end : end + _DIGEST], frame[end + _DIGEST :]


def erase_payload(frame: bytes) -> bytes:
    """``frame`` without its payload: envelope and digest kept, so its hash is unchanged."""
    return frame[: len(frame) - len(split_frame(frame)[2])]


def is_erased(frame: bytes) -> bool:
    """True when a put or meta ``frame`` has no payload (its content was erased)."""
    return not split_frame(frame)[2]


# -- encoding --------------------------------------------------------------------------------


def _feedback_weight(payload: Any) -> float:
    if not isinstance(payload, dict) or "fw" not in payload:
        raise ValueError("feedback payload has no field fw")
    weight = payload["fw"]
    if not isinstance(weight, float) or not math.isfinite(weight):
        raise ValueError("field fw (feedback weight) is not a finite float")
    return weight


def _encode(
    seq: int,
    at: float,
    kind: str,
    prev: bytes,
    events: Iterable[tuple[list[str], str | None, float | None, bytes, bytes]],
    key: str | None,
    actor: str | None,
    reason: str | None,
    extras: Sequence[dict[str, Any] | None] | None = None,
) -> tuple[list[bytes], bytes]:
    """The one envelope encoder: the frames of a run of events of one ``kind``, numbered from
    ``seq``, recorded at ``at``, chained from ``prev``, each ``(namespace, record id, note
    timestamp, payload, payload digest)`` (id and timestamp None where the kind has none), and the
    hash of the last. ``extras[i]``, when given, holds the version-2 fields of event ``i`` (``pv``,
    ``x``, ``o``). Envelope fields in §3.2's order, optional ones only when given; each frame is
    ``u32 E | envelope | digest | payload`` (the layout :func:`split_frame` reads)."""
    pack = packer().pack
    frames: list[bytes] = []
    add = frames.append
    join = b"".join
    u32 = _U32.pack
    h = prev
    for i, (namespace, record_id, timestamp, payload, digest) in enumerate(events):
        env: dict[str, Any] = {"v": EVENT_VERSION, "k": kind, "s": seq, "t": at, "p": h, "n": namespace}
        if record_id is not None:
            env["i"] = record_id
        if timestamp is not None:
            env["ts"] = timestamp
        if key is not None:
            env["mk"] = key
        extra = None if extras is None else extras[i]
        if extra:
            env.update(extra)
        if actor is not None:
            env["a"] = actor
        if reason is not None:
            env["r"] = reason
        env_bytes = pack(env)
        h = _sha256(h + env_bytes + digest).digest()
        add(join((u32(len(env_bytes)), env_bytes, digest, payload)))
        seq += 1
    return frames, h


def encode_event(
    seq: int,
    at: float,
    kind: str,
    namespace: Sequence[str],
    prev: bytes,
    payload: bytes = b"",
    *,
    id: str | None = None,
    timestamp: float | None = None,
    key: str | None = None,
    actor: str | None = None,
    reason: str | None = None,
    digest: bytes | None = None,
    replaces: int | None = None,
    expires_at: float | None = None,
    op_id: str | None = None,
) -> tuple[bytes, bytes]:
    """Encode one event; returns ``(frame, hash)``. ``prev`` is the previous event's hash;
    ``digest`` may be given if already computed (:func:`payload_digest`). ``replaces`` and
    ``expires_at`` (put) and ``op_id`` (op) are the version-2 fields ``pv``, ``x`` and ``o``."""
    if digest is None:
        digest = _sha256(payload).digest() if payload else EMPTY_DIGEST
    extra = _extra(replaces, expires_at, op_id)
    frames, h = _encode(
        seq, at, kind, prev, ((list(namespace), id, timestamp, payload, digest),), key, actor, reason,
        None if extra is None else (extra,),
    )
    return frames[0], h


def _extra(replaces: int | None, expires_at: float | None, op_id: str | None) -> dict[str, Any] | None:
    """The version-2 envelope fields that are set, or None."""
    extra: dict[str, Any] = {}
    if replaces is not None:
        extra["pv"] = replaces
    if expires_at is not None:
        extra["x"] = float(expires_at)
    if op_id is not None:
        extra["o"] = op_id
    return extra or None


def encode_puts(
    seq: int,
    at: float,
    prev: bytes,
    namespaces: Sequence[tuple[str, ...]],
    ids: Sequence[str],
    stamps: Sequence[float],
    payloads: Sequence[bytes],
    digests: Sequence[bytes],
    *,
    actor: str | None = None,
    reason: str | None = None,
    expiries: Sequence[float | None] | None = None,
    hashes: list[bytes] | None = None,
) -> tuple[list[bytes], bytes]:
    """Encode a run of put events numbered from ``seq``, all recorded at ``at``, chained from
    ``prev``; row ``i`` of the columns is one put: its namespace, record id, note timestamp (a
    float), payload, payload digest (:func:`payload_digest`) and, when ``expiries`` is given, its
    expiry or None. Returns ``(frames, hash of the last)``: what :func:`encode_event` gives for each
    in turn (bulk writes); ``hashes``, when given, gets each event's hash appended, in order.

    Byte for byte the envelope :func:`_encode` packs from its map (fields ``v k s t p n i ts [x]
    [a] [r]``, §3.2's order), assembled from parts instead: the parts shared by the run (map
    header, ``v``, ``k``, ``t``, the keys, each namespace, ``a``, ``r``) are packed once, and per
    event only ``s``, ``p`` (the previous hash, a 32-byte bin), ``i``, ``ts`` and ``x``."""
    if len(ids) == 1:  # the parts cost more to pack than the map for a single event
        extra = None if expiries is None or expiries[0] is None else ({"x": float(expiries[0])},)
        row = (list(namespaces[0]), ids[0], stamps[0], payloads[0], digests[0])
        single, h = _encode(seq, at, PUT, prev, (row,), None, actor, reason, extra)
        if hashes is not None:
            hashes.append(h)
        return single, h
    if len(prev) != _DIGEST:
        raise ValueError(f"a previous hash is {_DIGEST} bytes, got {len(prev)}")
    pack = packer().pack
    stamp, fields = _stamp(pack, actor, reason, 8)
    heads = (bytes((0x80 | fields,)) + _PUT_HEAD, bytes((0x80 | (fields + 1),)) + _PUT_HEAD)
    """The map header and the fields up to ``s``: without ``x``, with ``x``."""
    recorded = b"\xa1t" + pack(at) + b"\xa1p\xc4" + bytes((_DIGEST,))
    named: dict[tuple[str, ...], bytes] = {}
    """Per namespace: ``n``, its value, and the key ``i``."""
    frames: list[bytes] = []
    add = frames.append
    join = b"".join
    u32 = _U32.pack
    sha256 = _sha256
    if expiries is None:
        expiries = (None,) * len(ids)
    h = prev
    rows = zip(namespaces, ids, stamps, payloads, digests, expiries, strict=True)
    for namespace, record_id, timestamp, payload, digest, expiry in rows:
        ns = named.get(namespace)
        if ns is None:
            ns = named[namespace] = b"\xa1n" + pack(list(namespace)) + b"\xa1i"
        if expiry is None:
            env = join((heads[0], pack(seq), recorded, h, ns, pack(record_id), b"\xa2ts", pack(timestamp), stamp))
        else:
            env = join((
                heads[1], pack(seq), recorded, h, ns, pack(record_id), b"\xa2ts", pack(timestamp),
                b"\xa1x", pack(float(expiry)), stamp,
            ))  # fmt: skip
        h = sha256(join((h, env, digest))).digest()
        add(join((u32(len(env)), env, digest, payload)))
        seq += 1
        if hashes is not None:
            hashes.append(h)
    return frames, h


def _stamp(pack: Callable[[Any], bytes], actor: str | None, reason: str | None, fields: int) -> tuple[bytes, int]:
    """The packed ``a`` and ``r`` fields that are set (§3.2's order), and ``fields`` counting them."""
    stamp = b""
    if actor is not None:
        stamp, fields = b"\xa1a" + pack(actor), fields + 1
    if reason is not None:
        stamp, fields = stamp + b"\xa1r" + pack(reason), fields + 1
    return stamp, fields


def encode_deletes(
    seq: int,
    at: float,
    prev: bytes,
    namespace: Sequence[str],
    ids: Sequence[str],
    *,
    actor: str | None = None,
    reason: str | None = None,
    hashes: list[bytes] | None = None,
) -> tuple[list[bytes], bytes]:
    """Encode a run of delete events of the records ``ids`` of ``namespace``, numbered from
    ``seq``, all recorded at ``at``, chained from ``prev``. Returns ``(frames, hash of the last)``:
    what :func:`encode_event` gives for each in turn (a batch of deletes); ``hashes``, when given,
    gets each event's hash appended, in order.

    Byte for byte the envelope :func:`_encode` packs from its map (fields ``v k s t p n i [a] [r]``,
    §3.2's order), assembled from parts as :func:`encode_puts` does: the parts shared by the run
    are packed once, and per event only ``s``, ``p`` (the previous hash) and ``i``."""
    if len(prev) != _DIGEST:
        raise ValueError(f"a previous hash is {_DIGEST} bytes, got {len(prev)}")
    pack = packer().pack
    stamp, fields = _stamp(pack, actor, reason, 7)
    head = bytes((0x80 | fields,)) + _DELETE_HEAD
    recorded = b"\xa1t" + pack(at) + b"\xa1p\xc4" + bytes((_DIGEST,))
    named = b"\xa1n" + pack(list(namespace)) + b"\xa1i"
    frames: list[bytes] = []
    add = frames.append
    join = b"".join
    u32 = _U32.pack
    sha256 = _sha256
    h = prev
    for record_id in ids:
        env = join((head, pack(seq), recorded, h, named, pack(record_id), stamp))
        h = sha256(join((h, env, EMPTY_DIGEST))).digest()
        add(join((u32(len(env)), env, EMPTY_DIGEST)))
        seq += 1
        if hashes is not None:
            hashes.append(h)
    return frames, h


# -- decoding --------------------------------------------------------------------------------

_MALFORMED = (ValueError, KeyError, TypeError, struct.error, msgpack.UnpackException)
"""What decoding a damaged frame raises below the codec's boundary (:func:`_corrupted` translates)."""


def _corrupted(what: str, exc: BaseException) -> StoreCorrupted:
    """The error for a frame that does not decode: ``what`` names the event, ``exc`` says why."""
    return StoreCorrupted(f"{what} does not decode: {exc}")


def _current(env: Any, payload: Any) -> tuple[dict[str, Any], Any]:
    """``(env, payload)`` of the current event version: as they are when the envelope ``env`` is of
    :data:`EVENT_VERSION`, else upcast through :data:`UPCASTERS` (``payload``: decoded, or None).
    A newer version raises :class:`StoreVersionError`; a malformed or unknown one ValueError."""
    if type(env) is dict and env.get("v") == EVENT_VERSION:
        return env, payload
    if not isinstance(env, dict):
        raise ValueError("envelope is not a map")
    version = env.get("v")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValueError("field v (event version) is missing")
    if version > EVENT_VERSION:
        raise StoreVersionError(
            f"event {env.get('s')} was written by event version {version}; this coniti reads up to "
            f"event version {EVENT_VERSION}: upgrade coniti"
        )
    if version < 1:
        raise ValueError(f"unknown event version {version}")
    while version < EVENT_VERSION:
        upcaster = UPCASTERS.get(version)
        if upcaster is None:
            raise ValueError(f"no upcaster from event version {version}")
        env, payload = upcaster(env, payload)
        version += 1
    return env, payload


def event_hash(frame: bytes | memoryview) -> bytes:
    """The hash of the event in ``frame``: ``SHA-256(prev || envelope || digest)``."""
    env, digest, _ = split_frame(frame)
    prev = _unpack(env)["p"]
    if not isinstance(prev, bytes) or len(prev) != 32:
        raise ValueError("field p (previous hash) must be 32 bytes")
    return _sha256(prev + env + digest).digest()


def _check_json(value: Any, where: str, depth: int = 0) -> None:
    if depth > 64:
        raise ValueError(f"{where} is nested too deeply")
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is not finite")
        return
    if isinstance(value, list):
        for v in value:
            _check_json(v, where, depth + 1)
        return
    if isinstance(value, dict):
        for v in value.values():
            _check_json(v, where, depth + 1)
        return
    raise ValueError(f"{where} holds a {type(value).__name__}, not a JSON value")


def _vector(payload: dict[str, Any]) -> np.ndarray:
    dtype = _DTYPES.get(payload["vd"])
    if dtype is None:
        raise ValueError(f"unsupported vector dtype {payload['vd']!r}")
    raw = payload["vb"]
    shape = payload["vs"]
    if (
        not isinstance(raw, bytes)
        or not isinstance(shape, list)
        or len(shape) != 1
        or shape[0] * dtype.itemsize != len(raw)
        or shape[0] < 1
    ):
        raise ValueError("vector shape and bytes disagree")
    return np.frombuffer(raw, dtype).copy()


_PUT_KEYS = frozenset({"tx", "md", "e"})
_VECTOR_KEYS = frozenset({"vd", "vs", "vb"})


def _record(payload: Any, strict: bool) -> RecordData:
    if not strict:
        return _stored_record(payload)
    if not isinstance(payload, dict):
        raise ValueError("put payload is not a map")
    keys = payload.keys()
    unknown = sorted(map(str, keys - _PUT_KEYS - _VECTOR_KEYS - {_BLOB, _KIND, _FACTS}))
    if unknown:
        raise ValueError(f"put payload has unknown field {unknown[0]}")
    text, metadata, emb = payload["tx"], payload["md"], payload["e"]
    if not isinstance(text, str):
        raise ValueError("field tx (text) is not a string")
    if not isinstance(metadata, dict):
        raise ValueError("field md (metadata) is not a map")
    _check_json(metadata, "field md (metadata)")
    if emb is not None and not isinstance(emb, str):
        raise ValueError("field e (embedding id) is not a string")
    vector = None
    present = keys & _VECTOR_KEYS
    if present:
        if present != _VECTOR_KEYS:
            raise ValueError(f"put payload has field {sorted(present)[0]} without {sorted(_VECTOR_KEYS - present)[0]}")
        vector = _vector(payload)
        if not np.isfinite(vector).all():
            raise ValueError("field vb (vector) is not finite")
    elif emb is not None:
        raise ValueError("field e (embedding id) is set on a put without a vector")
    blob = payload.get(_BLOB)
    if _BLOB in payload:
        if type(blob) is not bytes:
            raise ValueError("field bl (blob) is not binary")
        if len(blob) > MAX_BLOB_BYTES:
            raise ValueError(f"field bl (blob) is {len(blob)} bytes, more than {MAX_BLOB_BYTES}")
    kind = payload.get(_KIND)
    if _KIND in payload and (type(kind) is not str or not kind):
        raise ValueError("field kd (kind) is not a non-empty string")
    facts = _facts(payload[_FACTS]) if _FACTS in payload else None
    return RecordData(text, metadata, emb, vector, blob, kind, facts)


_OPTIONAL_STR = ("i", "mk", "a", "r")


def _envelope(env: dict[str, Any], seq: int | None) -> dict[str, Any]:
    """``env`` (of the current event version) once every field is checked; ``seq`` is the key the
    frame was stored under, if known."""
    if type(env.get("v")) is not int:
        raise ValueError("field v (event version) is not an integer")
    kind = env.get("k")
    if kind not in KINDS:
        raise ValueError(f"unknown event kind {kind!r}")
    s = env.get("s")
    if not isinstance(s, int) or isinstance(s, bool) or (seq is not None and s != seq):
        raise ValueError(f"field s (sequence number) is {s!r}, expected {seq}")
    at = env.get("t")
    if not isinstance(at, float) or not math.isfinite(at):
        raise ValueError("field t (recorded time) is not a finite float")
    prev = env.get("p")
    if not isinstance(prev, bytes) or len(prev) != 32:
        raise ValueError("field p (previous hash) is not 32 bytes")
    ns = env.get("n")
    if not isinstance(ns, list) or not all(isinstance(x, str) and x for x in ns):
        raise ValueError("field n (namespace) is not a list of non-empty strings")
    for name in _OPTIONAL_STR:
        if name in env and not isinstance(env[name], str):
            raise ValueError(f"field {name} is not a string")
    if kind in (PUT, DELETE, FEEDBACK) and not env.get("i"):
        raise ValueError(f"a {kind} event needs field i (record id)")
    if kind == ERASE and (not env.get("i")) == (not env.get("mk")):
        raise ValueError("an erase event needs field i (record id) or field mk (metadata key), not both")
    if kind == PUT:
        ts = env.get("ts")
        if not isinstance(ts, float) or not math.isfinite(ts):
            raise ValueError("field ts (note timestamp) is not a finite float")
    if kind == META and not env.get("mk"):
        raise ValueError("a meta event needs field mk (metadata key)")
    if "pv" in env:
        pv = env["pv"]
        if kind != PUT or type(pv) is not int or not 1 <= pv < env["s"]:
            raise ValueError(f"field pv (replaced version) is {pv!r} on a {kind} event")
    if "x" in env:
        x = env["x"]
        if kind != PUT or not isinstance(x, float) or not math.isfinite(x):
            raise ValueError("field x (expiry) is not a finite float on a put event")
    if kind == OP and not (isinstance(env.get("o"), str) and env["o"]):
        raise ValueError("an op event needs field o (op id)")
    return env


def _event(
    env: dict[str, Any], env_bytes: bytes, digest: bytes, record: RecordData | None, value: Any,
    erased: bool,
) -> LogEvent:
    """The :class:`LogEvent` of a checked envelope (``env``, as stored: ``env_bytes``), its digest
    and what was read of its payload; its hash is computed here."""
    prev = env["p"]
    return LogEvent(
        seq=env["s"],
        at=env["t"],
        kind=env["k"],
        namespace=tuple(env["n"]),
        prev=prev,
        digest=digest,
        hash=_sha256(prev + env_bytes + digest).digest(),
        id=env.get("i"),
        timestamp=env.get("ts"),
        key=env.get("mk"),
        actor=env.get("a"),
        reason=env.get("r"),
        record=record,
        value=value,
        erased=erased,
        replaces=env.get("pv"),
        expires_at=env.get("x"),
        op_id=env.get("o"),
    )


def _where(seq: int | None) -> str:
    return f"event {seq}" if seq is not None else "event"


def decode_event(frame: bytes | memoryview, seq: int | None = None, *, strict: bool = True) -> LogEvent:
    """Decode a whole frame. ``seq`` is the key it was stored under (checked against field ``s``).

    With ``strict`` the payload is fully type-checked (``verify`` uses this). Raises
    :class:`StoreCorrupted` naming the sequence number and the field, or :class:`StoreVersionError`.
    """
    try:
        env_bytes, digest, payload_bytes = split_frame(frame)
        if strict and payload_bytes and _sha256(payload_bytes).digest() != digest:
            raise ValueError("payload does not match its digest")
        env, payload = _current(_unpack(env_bytes), _unpack(payload_bytes) if payload_bytes else None)
        env = _envelope(env, seq)
        kind = env["k"]
        record = None
        value: Any = None
        erased = False
        if payload_bytes:
            if kind not in (PUT, META, OP, FEEDBACK):
                raise ValueError(f"a {kind} event has a payload")
            if kind == PUT:
                record = _record(payload, strict)
            elif kind == OP:
                value = _op_receipt(payload)
            elif kind == FEEDBACK:
                value = _feedback_weight(payload)
            else:
                if not isinstance(payload, dict) or "mv" not in payload:
                    raise ValueError("meta payload has no field mv")
                value = payload["mv"]
                if strict:
                    _check_json(value, "field mv (value)")
        elif kind in (PUT, META, FEEDBACK):
            erased = True
        elif kind == OP:
            raise ValueError("an op event has no payload")
        elif strict and digest != EMPTY_DIGEST:
            raise ValueError("digest of an empty payload is wrong")
        return _event(env, env_bytes, digest, record, value, erased)
    except _MALFORMED as exc:
        raise _corrupted(_where(seq), exc) from exc


def _op_receipt(payload: Any) -> dict[str, Any]:
    """An op event's payload, checked: ``{"d": hex digest, "res": {versions, unchanged, deleted,
    missing}}``."""
    if not isinstance(payload, dict) or not isinstance(payload.get("d"), str):
        raise ValueError("op payload has no field d (request digest)")
    res = payload.get("res")
    if not isinstance(res, dict) or not isinstance(res.get("versions"), dict):
        raise ValueError("op payload has no field res (the write's result)")
    for name in ("unchanged", "deleted", "missing"):
        if not isinstance(res.get(name), list) or not all(isinstance(x, str) for x in res[name]):
            raise ValueError(f"op payload field res.{name} is not a list of ids")
    if not all(isinstance(k, str) and type(v) is int for k, v in res["versions"].items()):
        raise ValueError("op payload field res.versions is not a map of ids to versions")
    return payload


def decode_op(frame: bytes) -> tuple[str, dict[str, Any]]:
    """``(op id, receipt)`` of an op frame the store wrote (see :func:`_op_receipt`)."""
    try:
        env, payload = _stored(frame)
        if env["k"] != OP:
            raise ValueError(f"expected an op event, found {env['k']!r}")
        return env["o"], _op_receipt(payload)
    except _MALFORMED as exc:
        raise _corrupted("an op event", exc) from exc


def decode_put_meta(frame: bytes) -> tuple[str, float, float | None]:
    """``(record id, note timestamp, expiry or None)`` from a put frame's envelope."""
    try:
        env, _ = _current(_unpack(split_frame(frame)[0]), None)
        if env["k"] != PUT:
            raise ValueError(f"expected a put event, found {env['k']!r}")
        return env["i"], env["ts"], env.get("x")
    except _MALFORMED as exc:
        raise _corrupted("a put event", exc) from exc


def decode_envelope(frame: bytes, seq: int | None = None) -> LogEvent:
    """Decode and check a frame's envelope only (no payload: ``record``/``value`` are None;
    ``erased`` is set for a put, meta or feedback frame without a payload). Enough to fold and to follow the
    hash chain; raises like :func:`decode_event`."""
    try:
        env_bytes, digest, payload_bytes = split_frame(frame)
        env = _envelope(_current(_unpack(env_bytes), None)[0], seq)
        erased = not payload_bytes and env["k"] in (PUT, META, FEEDBACK)
        return _event(env, env_bytes, digest, None, None, erased)
    except _MALFORMED as exc:
        raise _corrupted(_where(seq), exc) from exc


def _stored(frame: bytes) -> tuple[dict[str, Any], Any]:
    """The envelope and the decoded payload (None if there is none) of a frame the store wrote, of
    the current event version (upcast if older). Fields are not checked (the fast read paths)."""
    env_bytes, _, payload_bytes = split_frame(frame)
    return _current(_unpack(env_bytes), _unpack(payload_bytes) if payload_bytes else None)


def decode_record(frame: bytes) -> tuple[str, float, RecordData | None]:
    """Fast path for reads: ``(record id, note timestamp, content)`` of a put frame the store wrote.

    The payload is not re-checked against its digest (``verify`` does that). Content is None when
    erased. Raises :class:`StoreCorrupted` if the frame is not a put that decodes.
    """
    try:
        env, payload = _stored(frame)
        if env["k"] != PUT:
            raise ValueError(f"expected a put event, found {env['k']!r}")
        return env["i"], env["ts"], None if payload is None else _record(payload, False)
    except _MALFORMED as exc:
        raise _corrupted("a put event", exc) from exc


def decode_value(frame: bytes) -> tuple[str, Any, bool]:
    """Fast path for reads: ``(key, value, erased)`` of a meta frame the store wrote."""
    try:
        env, payload = _stored(frame)
        if env["k"] != META:
            raise ValueError(f"expected a meta event, found {env['k']!r}")
        if payload is None:
            return env["mk"], None, True
        return env["mk"], payload["mv"], False
    except _MALFORMED as exc:
        raise _corrupted("a meta event", exc) from exc


def decode_content(frame: bytes) -> RecordData | None:
    """Fastest read path: only the content of a put frame the store wrote (None when erased). The
    caller knows the id and timestamp from the indexes. The envelope is not read unless
    :data:`PAYLOAD_UPCASTS` has an entry (then an older event's payload may need upcasting)."""
    if PAYLOAD_UPCASTS:
        return decode_record(frame)[2]
    try:
        payload_bytes = split_frame(frame)[2]
        if not payload_bytes:
            return None
        try:
            payload = _unpackb(payload_bytes, ext_hook=_ext_hook)
        except UnicodeDecodeError:
            payload = _unpack(payload_bytes)
        return _stored_record(payload)
    except _MALFORMED as exc:
        raise _corrupted("a put event", exc) from exc


def recorded_at(frame: bytes) -> float:
    """The recorded time of a frame's event (its envelope only; no hash, no payload)."""
    try:
        env, _ = _current(_unpack(split_frame(frame)[0]), None)
        at = env["t"]
        if type(at) is not float:
            raise ValueError("field t (recorded time) is not a float")
        return at
    except _MALFORMED as exc:
        raise _corrupted("an event envelope", exc) from exc


# -- checked reads ---------------------------------------------------------------------------


_PUT_HEAD = b"\xa1v" + bytes([EVENT_VERSION]) + b"\xa1k\xa3put\xa1s"
"""The envelope of a put as coniti writes it, after the map header: ``v``, ``k`` = put, ``s``."""
_DELETE_HEAD = b"\xa1v" + bytes([EVENT_VERSION]) + b"\xa1k\xa6delete\xa1s"
"""The envelope of a delete as coniti writes it, after the map header: ``v``, ``k`` = delete, ``s``."""


def _packed_uint(n: int) -> bytes:
    """msgpack's smallest encoding of the unsigned integer ``n``."""
    if n < 0x80:
        return bytes((n,))
    if n < 0x100:
        return b"\xcc" + bytes((n,))
    if n < 0x10000:
        return b"\xcd" + n.to_bytes(2, "big")
    if n < 0x100000000:
        return b"\xce" + n.to_bytes(4, "big")
    return b"\xcf" + n.to_bytes(8, "big")


Checksum = Callable[[Any, int], int]
"""A CRC function ``checksum(data, start)`` (the store layout's, chosen by
:class:`coniti.log.layout.Dbs`): the codec checks payloads with it and never picks one."""


def _checked_payload(
    digest: bytes, payload_bytes: bytes | memoryview, crc: int | None = None, checksum: Checksum | None = None
) -> Any:
    """The decoded payload (None when there is none) once it matches ``digest``, or, when ``crc``
    is given, once its ``checksum`` is ``crc`` (the check of store layouts 4 and 5, whose index
    entries carry it: 0 for an erased put, the CRC of no bytes)."""
    if crc is not None:
        assert checksum is not None
        if checksum(payload_bytes, 0) != crc:
            raise ValueError("its payload does not match the CRC its index entry holds")
        if not payload_bytes:
            return None
    elif not payload_bytes:
        return None
    elif _sha256(payload_bytes).digest() != digest:
        raise ValueError("its payload does not match its digest")
    try:
        return _unpackb(payload_bytes, ext_hook=_ext_hook)
    except UnicodeDecodeError:
        return _unpack(payload_bytes)


def payload_view(frame: bytes, *, checked: bool = False) -> memoryview:
    """The payload bytes of ``frame`` (empty when it has none: an erased put), whose CRC store
    layouts 4 and 5 keep in the index entries of a put (``log/FORMAT.md`` §1). ``checked``: the
    payload must first match the frame's digest (what a fold from the log seals must be genuine).
    Raises ValueError for a frame too short for its envelope length and digest, or a payload that
    does not match."""
    end = _HEAD + _unpack_u32(frame)[0]
    if end + _DIGEST > len(frame):
        raise ValueError("envelope length exceeds the frame")
    payload = memoryview(frame)[end + _DIGEST :]
    if checked and payload and _sha256(payload).digest() != frame[end : end + _DIGEST]:
        raise ValueError("its payload does not match its digest")
    return payload


def read_content(frame: bytes, seq: int, crc: int | None = None, checksum: Checksum | None = None) -> RecordData | None:
    """The content of put event ``seq`` for a read to return (None when erased), checked: the frame
    is the put numbered ``seq`` and its payload matches the digest it carries (the digest of an
    erased payload cannot be checked). Given ``crc`` (store layouts 4 and 5: the CRC the sealed
    index entry holds, computed by ``checksum``), the payload must have that CRC instead and the
    envelope is not read: content with the CRC the index sealed is the content written for that
    entry (an erased put's is the CRC of no payload). The envelope is decoded only when it does not
    begin as coniti writes a put of ``seq`` in the current event version (it is fully decoded and
    upcast when :data:`PAYLOAD_UPCASTS` says an older version's payload may change); the caller
    takes the id and timestamp from the index entries, which it checks against each other. Raises
    :class:`StoreCorrupted` naming the event."""
    if PAYLOAD_UPCASTS:
        return read_put(frame, seq, crc, checksum)[1]
    try:
        end = _HEAD + _unpack_u32(frame)[0]
        if end + _DIGEST > len(frame):
            raise ValueError("envelope length exceeds the frame")
        if crc is not None:  # the hot path of a sealed read, written out
            assert checksum is not None
            payload_bytes = frame[end + _DIGEST :]  # a copy costs less than a memoryview's setup
            if checksum(payload_bytes, 0) != crc:
                raise ValueError("its payload does not match the CRC its index entry holds")
            if not payload_bytes:
                return None
            return _stored_content(payload_bytes)
        if not frame.startswith(_PUT_HEAD + _packed_uint(seq), _HEAD + 1):
            env = _unpack(split_frame(frame)[0])
            if type(env) is not dict or env.get("k") != PUT or env.get("s") != seq:
                raise ValueError(f"it is not the put of event {seq}")
        payload = _checked_payload(frame[end : end + _DIGEST], frame[end + _DIGEST :])
        return None if payload is None else _stored_record(payload)
    except _MALFORMED as exc:
        raise _corrupted(f"event {seq}", exc) from exc


def _read_checked(
    frame: bytes, seq: int, kind: str, crc: int | None = None, checksum: Checksum | None = None
) -> tuple[dict[str, Any], Any]:
    """``(envelope, decoded payload or None)`` of event ``seq``, which must be of ``kind`` and carry
    a payload matching its digest (or ``crc``, see :func:`_checked_payload`); raises ValueError
    (and the like) otherwise."""
    env_bytes, digest, payload_bytes = split_frame(frame)
    env, payload = _current(_unpack(env_bytes), _checked_payload(digest, payload_bytes, crc, checksum))
    if env["k"] != kind or env["s"] != seq:
        raise ValueError(f"it is event {env['s']!r} of kind {env['k']!r}, not the {kind} event {seq}")
    return env, payload


def read_put(
    frame: bytes, seq: int, crc: int | None = None, checksum: Checksum | None = None
) -> tuple[dict[str, Any], RecordData | None]:
    """``(envelope, content)`` of put event ``seq`` for a read to return, checked like
    :func:`read_content` (``crc`` and ``checksum`` likewise); the caller compares the envelope's
    ``n``, ``i`` and ``ts`` with the index entry that led it here (a hashed id, or the timestamp key
    of 0.0 that loses -0.0's sign)."""
    try:
        env, payload = _read_checked(frame, seq, PUT, crc, checksum)
        return env, None if payload is None else _stored_record(payload)
    except _MALFORMED as exc:
        raise _corrupted(f"event {seq}", exc) from exc


def read_meta(frame: bytes, seq: int) -> tuple[dict[str, Any], Any, bool]:
    """``(envelope, value, erased)`` of meta event ``seq`` for a read to return, checked like
    :func:`read_put` (the caller compares ``n`` and ``mk``). Event ``seq`` may also be the erase
    event of a metadata key (version 3: kind ``erase`` with ``mk``, no payload): ``(envelope, None,
    True)``; the caller tells the two apart by the envelope's ``k``."""
    try:
        env_bytes, digest, payload_bytes = split_frame(frame)
        env, payload = _current(_unpack(env_bytes), _checked_payload(digest, payload_bytes))
        kind = env["k"]
        if env["s"] != seq or not (kind == META or (kind == ERASE and "mk" in env and payload is None)):
            raise ValueError(f"it is event {env['s']!r} of kind {kind!r}, not the meta event {seq}")
        return (env, None, True) if payload is None else (env, payload["mv"], False)
    except _MALFORMED as exc:
        raise _corrupted(f"event {seq}", exc) from exc


def read_feedback(frame: bytes, seq: int) -> tuple[dict[str, Any], float | None]:
    """``(envelope, weight)`` of feedback event ``seq`` for a read to use (weight None once
    erased), checked like :func:`read_put` (the caller compares ``n`` and ``i``)."""
    try:
        env, payload = _read_checked(frame, seq, FEEDBACK)
        return env, None if payload is None else _feedback_weight(payload)
    except _MALFORMED as exc:
        raise _corrupted(f"event {seq}", exc) from exc
