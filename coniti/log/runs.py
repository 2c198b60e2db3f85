"""Runs of delete events encoded from parts (a batch of deletes, :meth:`EventLog.delete
<coniti.log.eventlog.EventLog.delete>`): byte for byte the frames and hashes
:func:`~coniti.log.codec.encode_event` gives for each in turn (a property test holds them to it),
the envelope's parts shared by the run packed once."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

from coniti.log.codec import EVENT_VERSION
from coniti.log.payloads import EMPTY_DIGEST, packer

__all__ = ["encode_deletes"]

DIGEST_LEN = 32
"""The length of an event hash (SHA-256)."""
_U32 = struct.Struct(">I")
_DELETE_HEAD = b"\xa1v" + bytes([EVENT_VERSION]) + b"\xa1k\xa6delete\xa1s"
"""The envelope of a delete as coniti writes it, after the map header: ``v``, ``k`` = delete, ``s``."""


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
    what :func:`~coniti.log.codec.encode_event` gives for each in turn (a batch of deletes); ``hashes``, when given,
    gets each event's hash appended, in order.

    Byte for byte the envelope the codec packs from its map (fields ``v k s t p n i [a] [r]``,
    §3.2's order), assembled from parts as :func:`~coniti.log.codec.encode_puts` does: the parts
    shared by the run are packed once, and per event only ``s``, ``p`` (the previous hash) and
    ``i``."""
    if len(prev) != DIGEST_LEN:
        raise ValueError(f"a previous hash is {DIGEST_LEN} bytes, got {len(prev)}")
    pack = packer().pack
    stamp = b""
    fields = 7
    if actor is not None:
        stamp, fields = b"\xa1a" + pack(actor), fields + 1
    if reason is not None:
        stamp, fields = stamp + b"\xa1r" + pack(reason), fields + 1
    head = bytes((0x80 | fields,)) + _DELETE_HEAD
    recorded = b"\xa1t" + pack(at) + b"\xa1p\xc4" + bytes((DIGEST_LEN,))
    named = b"\xa1n" + pack(list(namespace)) + b"\xa1i"
    frames: list[bytes] = []
    add = frames.append
    join = b"".join
    u32 = _U32.pack
    sha256 = hashlib.sha256
    h = prev
    for record_id in ids:
        env = join((head, pack(seq), recorded, h, named, pack(record_id), stamp))
        h = sha256(join((h, env, EMPTY_DIGEST))).digest()
        add(join((u32(len(env)), env, EMPTY_DIGEST)))
        seq += 1
        if hashes is not None:
            hashes.append(h)
    return frames, h
