"""Key encodings for the LMDB sub-databases. Pure functions over bytes; see ``log/FORMAT.md``.

* ``seq_key(n)``: a sequence number as 8 bytes, unsigned big-endian, so byte order is numeric order.
* ``inv_seq_key(n)``: ``2**64 - 1 - n`` as 8 bytes, so the newest version of a thing sorts first.
* ``ts_key(x)``: a finite float64 as 8 bytes whose byte order is numeric order (``-0.0`` is stored
  as ``0.0``: the two are equal numbers).
* ``name_key(s)``: a record id or metadata key, self-delimiting so that no key is a prefix of another:
  ``0x00 || u16 length || UTF-8`` up to :data:`INLINE_MAX` bytes, else ``0x01 || SHA-256(UTF-8)``.
  A hashed key does not identify its name on its own: readers compare the full name stored with
  the value (the put event, the namespace table) before trusting a match.
* ``ns_bytes(ns)``: the canonical bytes of a namespace (msgpack array of strings), and ``ns_key`` the
  same inline-or-hashed encoding of those bytes for the namespace table.

Every key stays within LMDB's 511-byte limit whatever the length of the ids and namespaces.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Sequence

import msgpack
import numpy as np

from coniti.errors import StoreCorrupted, namespace_text

__all__ = [
    "INLINE_MAX",
    "INLINE_NAME",
    "MAX_SEQ",
    "NSID_LEN",
    "SEQ_LEN",
    "Namespace",
    "decode_position",
    "decode_ts_key",
    "inline_name",
    "inv_seq_key",
    "is_hashed",
    "name_key",
    "name_keys",
    "ns_bytes",
    "ns_key",
    "seq_from_inv",
    "seq_from_key",
    "seq_key",
    "ts_key",
    "ts_keys",
    "unpack_position",
]

Namespace = tuple[str, ...]
"""A namespace as the log layer holds it: its parts in order (``()`` is the root namespace)."""

SEQ_LEN = 8
NSID_LEN = 4
MAX_SEQ = (1 << 64) - 1
INLINE_MAX = 400
"""Longest UTF-8 name (bytes) kept inline in a key; longer names are keyed by their hash."""

_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_F64 = struct.Struct(">d")
_POSITION = struct.Struct(">dQ")
_unpack_f64 = _F64.unpack
_SIGN = 1 << 63
_ALL = MAX_SEQ

seq_key = _U64.pack


def seq_from_key(key: bytes) -> int:
    """The sequence number of an 8-byte :func:`seq_key`."""
    return int(_U64.unpack(key)[0])


def inv_seq_key(seq: int) -> bytes:
    """``seq`` encoded so that larger sequence numbers sort first."""
    return _U64.pack(_ALL - seq)


def seq_from_inv(key: bytes) -> int:
    """The sequence number of an 8-byte :func:`inv_seq_key`."""
    return int(_ALL - _U64.unpack(key)[0])


def ts_key(value: float) -> bytes:
    """8 bytes whose unsigned byte order equals the numeric order of the finite float ``value``."""
    (bits,) = _U64.unpack(_F64.pack(value + 0.0))
    return _U64.pack(bits ^ _ALL if bits & _SIGN else bits | _SIGN)


def ts_keys(values: np.ndarray) -> list[bytes]:
    """:func:`ts_key` of each of the finite float64 ``values`` (a 1-D array), computed in one go."""
    bits = (np.asarray(values, dtype=np.float64) + 0.0).view(np.uint64)
    flipped = np.where(bits & np.uint64(_SIGN), ~bits, bits | np.uint64(_SIGN))
    raw = flipped.astype(">u8").tobytes()
    return [raw[i : i + 8] for i in range(0, len(raw), 8)]


def decode_ts_key(key: bytes) -> float:
    """The float of an 8-byte :func:`ts_key` (``-0.0`` comes back as ``0.0``)."""
    flipped: float = _unpack_f64(key)[0]
    if flipped < 0.0:  # a timestamp above 0.0: its bits with the sign bit set (see unpack_position)
        return -flipped
    (bits,) = _U64.unpack(key)
    bits = bits ^ _SIGN if bits & _SIGN else bits ^ _ALL
    return float(_F64.unpack(_U64.pack(bits))[0])


unpack_position = _POSITION.unpack_from
"""``unpack_position(key, offset)``: ``(flipped, seq)`` of the :func:`ts_key` then :func:`seq_key`
at ``offset`` in ``key``, in one unpack. The key of a positive timestamp is its bits with the sign
bit set, so read as a float64 it is the negated timestamp: ``flipped < 0.0`` exactly when the
timestamp is positive, and it is then ``-flipped``; otherwise :func:`decode_position` decodes it.
Raises ``struct.error`` when ``key`` is too short. (The hot loop of a scan, without a call.)"""


def decode_position(key: bytes, offset: int) -> tuple[float, int]:
    """``(timestamp, seq)`` of the :func:`ts_key` then :func:`seq_key` at ``offset`` in ``key``: what
    :func:`decode_ts_key` and :func:`seq_from_key` give for those 16 bytes, in one unpack
    (:data:`unpack_position`). Raises ``struct.error`` when ``key`` is too short."""
    flipped, seq = unpack_position(key, offset)
    if flipped < 0.0:
        return -flipped, seq
    return decode_ts_key(key[offset : offset + 8]), seq


_INLINE_HEADS = [b"\x00" + _U16.pack(n) for n in range(INLINE_MAX + 1)]
"""The first three bytes of the inline key of a name of ``n`` bytes (index ``n``)."""


def _blob_key(raw: bytes) -> bytes:
    if len(raw) <= INLINE_MAX:
        return _INLINE_HEADS[len(raw)] + raw
    return b"\x01" + hashlib.sha256(raw).digest()


def name_key(name: str) -> bytes:
    """The key form of a record id or metadata key (inline up to :data:`INLINE_MAX` bytes, else hashed)."""
    raw = name.encode("utf-8", "surrogatepass")
    if len(raw) <= INLINE_MAX:  # _blob_key written out: the lookup of every get
        return _INLINE_HEADS[len(raw)] + raw
    return b"\x01" + hashlib.sha256(raw).digest()


def name_keys(names: Iterable[str]) -> list[bytes]:
    """:func:`name_key` of each of ``names``, in order (bulk writes)."""
    blob_key = _blob_key
    return [blob_key(name.encode("utf-8", "surrogatepass")) for name in names]


INLINE_NAME = slice(3, None)
"""Where an inline (not hashed) :func:`name_key` holds its name, after ``0x00`` and the u16 length:
``key[INLINE_NAME].decode("utf-8", "surrogatepass")`` is :func:`inline_name` (written out in a
scan's hot loop, without the call)."""


def inline_name(key: bytes) -> str:
    """The name of an inline (not hashed) :func:`name_key`."""
    return key[INLINE_NAME].decode("utf-8", "surrogatepass")


def is_hashed(key: bytes) -> bool:
    """True when ``key`` (from :func:`name_key` or :func:`ns_key`) is a hash, not the name itself."""
    return key[:1] == b"\x01"


def ns_bytes(namespace: Sequence[str]) -> bytes:
    """The canonical bytes of a namespace: a msgpack array of its strings."""
    return bytes(msgpack.packb(list(namespace)))


def ns_key(canonical: bytes) -> bytes:
    """The namespace-table key of canonical namespace bytes (inline or hashed like :func:`name_key`)."""
    return _blob_key(canonical)


def damaged(
    names: list[str] | str, idk: bytes, record_id: str | None, seq: int, why: str
) -> StoreCorrupted:
    """The error for a read that found record ``record_id`` (else the one of id key ``idk``, or the
    put at event ``seq``) of namespace ``names`` (or its label, :meth:`IndexView.label`)
    damaged: ``why``."""
    if record_id is None and not is_hashed(idk):
        try:
            record_id = inline_name(idk)
        except ValueError:
            record_id = None
    what = repr(record_id) if record_id is not None else f"put at event {seq}"
    where = names if isinstance(names, str) else namespace_text(names)
    return StoreCorrupted(f"record {what} of namespace {where} is damaged: {why}")
