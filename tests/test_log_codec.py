"""The event codec (coniti.log.codec): exact round trips, the hash chain, and strict decoding."""

from __future__ import annotations

import hashlib
import struct

import msgpack
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coniti.errors import StoreCorrupted, StoreVersionError
from coniti.log import codec
from coniti.log.codec import (
    CLEAR,
    DELETE,
    EVENT_VERSION,
    GENESIS,
    META,
    PUT,
    decode_event,
    decode_record,
    decode_value,
    encode_event,
    encode_meta_payload,
    encode_put_payload,
    event_hash,
    recorded_at,
    split_frame,
)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**80), 2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
vectors = st.sampled_from(["<f2", "<f4", "<f8"]).flatmap(
    lambda dt: st.integers(1, 16).flatmap(
        lambda n: st.binary(min_size=n * np.dtype(dt).itemsize, max_size=n * np.dtype(dt).itemsize).map(
            lambda raw: np.frombuffer(raw, dt).copy()
        )
    )
)
namespaces = st.lists(st.text(min_size=1, max_size=12), max_size=3).map(tuple)


def _put(seq: int = 1, prev: bytes = GENESIS, **over: object) -> tuple[bytes, bytes]:
    payload = encode_put_payload("hello", {"a": 1}, "emb", np.arange(3, dtype="float32"))
    fields: dict[str, object] = {"id": "r1", "timestamp": 5.0, "actor": None, "reason": None}
    fields.update(over)
    return encode_event(seq, 100.0, PUT, (), prev, payload, **fields)  # type: ignore[arg-type]


@given(
    st.text(max_size=50),
    st.dictionaries(st.text(max_size=8), json_values, max_size=5),
    st.none() | st.text(max_size=10),
    vectors,
    st.text(min_size=1, max_size=30),
    st.floats(allow_nan=False, allow_infinity=False),
    namespaces,
    st.none() | st.text(max_size=10),
)
def test_put_event_round_trips_exactly(
    text: str,
    metadata: dict[str, object],
    emb: str | None,
    vector: np.ndarray,
    rid: str,
    ts: float,
    ns: tuple[str, ...],
    actor: str | None,
) -> None:
    """Every field of a put event decodes to what was encoded; the vector keeps dtype and bits
    (NaN payloads, -0.0 and subnormals included), and big integers in metadata survive."""
    payload = encode_put_payload(text, metadata, emb, vector)
    frame, h = encode_event(7, 12.5, PUT, ns, GENESIS, payload, id=rid, timestamp=ts, actor=actor)
    event = decode_event(frame, 7, strict=False)
    assert (event.seq, event.at, event.kind, event.namespace) == (7, 12.5, PUT, ns)
    assert (event.id, event.timestamp, event.actor, event.reason) == (rid, ts, actor, None)
    assert event.hash == h == event_hash(frame)
    assert event.record is not None
    assert (event.record.text, event.record.metadata, event.record.embedding_id) == (text, metadata, emb)
    assert event.record.vector.dtype == vector.dtype
    assert event.record.vector.tobytes() == vector.tobytes()
    assert decode_record(frame)[:2] == (rid, ts)


@given(json_values, st.text(min_size=1, max_size=20))
def test_meta_event_round_trips(value: object, key: str) -> None:
    """A meta event gives back its key and value."""
    frame, _ = encode_event(3, 1.0, META, ("n",), GENESIS, encode_meta_payload(value), key=key)
    event = decode_event(frame, 3)
    assert (event.kind, event.key, event.value) == (META, key, value)
    assert decode_value(frame) == (key, value, False)


def test_delete_and_clear_events_have_no_payload() -> None:
    """delete and clear carry no payload; their digest is that of the empty string."""
    for kind, extra in ((DELETE, {"id": "x"}), (CLEAR, {})):
        frame, _ = encode_event(2, 1.0, kind, (), GENESIS, **extra)  # type: ignore[arg-type]
        _, digest, payload = split_frame(frame)
        assert len(payload) == 0 and digest == hashlib.sha256(b"").digest()
        assert decode_event(frame, 2).kind == kind


def test_hash_is_prev_envelope_and_digest() -> None:
    """The event hash is SHA-256(prev || envelope bytes || payload digest)."""
    prev = bytes(range(32))
    frame, h = _put(prev=prev)
    env, digest, _ = split_frame(frame)
    assert h == hashlib.sha256(prev + bytes(env) + digest).digest()


def test_dropping_the_payload_keeps_the_hash() -> None:
    """An erased put (payload removed, digest kept) has the same hash and decodes as erased."""
    frame, h = _put()
    env, digest, _ = split_frame(frame)
    erased = struct.pack(">I", len(env)) + bytes(env) + digest
    event = decode_event(erased, 1)
    assert event.hash == h and event.erased and event.record is None
    assert decode_record(erased) == ("r1", 5.0, None)


def test_actor_and_reason_are_recorded_and_hashed() -> None:
    """actor and reason are in the envelope: they decode, and changing one changes the hash."""
    frame, h = _put(actor="alice", reason="cleanup")
    event = decode_event(frame, 1)
    assert (event.actor, event.reason) == ("alice", "cleanup")
    assert _put(actor="bob", reason="cleanup")[1] != h


def test_payload_that_does_not_match_its_digest_is_corrupt() -> None:
    """Strict decoding compares the payload with its digest and names the event."""
    frame, _ = _put()
    tampered = frame[:-1] + bytes([frame[-1] ^ 1])
    with pytest.raises(StoreCorrupted, match="event 1"):
        decode_event(tampered, 1)


def test_sequence_number_must_match_the_key() -> None:
    """An event stored under another key than its own seq is corrupt."""
    frame, _ = _put(seq=4)
    with pytest.raises(StoreCorrupted, match="sequence number"):
        decode_event(frame, 5)


@pytest.mark.parametrize("cut", [0, 3, 10, 40])
def test_truncated_frame_is_corrupt_not_a_crash(cut: int) -> None:
    """A frame cut short raises StoreCorrupted."""
    frame, _ = _put()
    with pytest.raises(StoreCorrupted):
        decode_event(frame[:cut], 1)


def _reframe(env: dict[str, object], payload: bytes = b"") -> bytes:
    raw = msgpack.packb(env)
    return struct.pack(">I", len(raw)) + raw + hashlib.sha256(payload).digest() + payload


def _env(**over: object) -> dict[str, object]:
    env: dict[str, object] = {"v": EVENT_VERSION, "k": DELETE, "s": 1, "t": 1.0, "p": GENESIS,
                              "n": [], "i": "x"}
    env.update(over)
    return env


def test_newer_event_version_is_refused() -> None:
    """An event written by a newer event version raises StoreVersionError, not a guess."""
    with pytest.raises(StoreVersionError, match=f"reads up to event version {EVENT_VERSION}"):
        decode_event(_reframe(_env(v=EVENT_VERSION + 1)), 1)


def test_unknown_event_kind_is_refused() -> None:
    """A kind outside put/delete/meta/clear/erase is corrupt."""
    with pytest.raises(StoreCorrupted, match="kind"):
        decode_event(_reframe(_env(k="rename")), 1)


def test_unknown_ext_type_is_refused() -> None:
    """Only the big-integer ext type is known; any other ext type in a payload is corrupt."""
    payload = msgpack.packb({"mv": msgpack.ExtType(42, b"x")})
    frame = _reframe(_env(k=META, mk="k"), payload)
    with pytest.raises(StoreCorrupted, match="ext type 42"):
        decode_event(frame, 1)


def test_timestamp_ext_is_not_accepted_as_json() -> None:
    """msgpack's built-in timestamp ext decodes, but is refused as a metadata value under strict."""
    payload = msgpack.packb({"mv": msgpack.Timestamp(1, 0)})
    with pytest.raises(StoreCorrupted, match="not a JSON value"):
        decode_event(_reframe(_env(k=META, mk="k"), payload), 1)


def test_non_string_map_keys_are_refused() -> None:
    """Map keys must be strings."""
    payload = msgpack.packb({"mv": {1: "x"}})
    with pytest.raises(StoreCorrupted):
        decode_event(_reframe(_env(k=META, mk="k"), payload), 1)


def test_vector_whose_bytes_disagree_with_its_shape_is_corrupt() -> None:
    """A vector's byte length must equal its shape times the dtype size."""
    payload = msgpack.packb({"tx": "", "md": {}, "e": None, "vd": "<f4", "vs": [3], "vb": b"\0" * 8})
    frame = _reframe(_env(k=PUT, ts=0.0), payload)
    with pytest.raises(StoreCorrupted, match="shape"):
        decode_event(frame, 1)


def test_lone_surrogates_round_trip() -> None:
    """Strings holding lone surrogates (valid Python str) encode and decode unchanged."""
    payload = encode_put_payload("x\udfffy", {"k\ud801": "v\udc00"}, None, np.ones(2, dtype="float64"))
    frame, _ = encode_event(1, 1.0, PUT, ("n\ud800",), GENESIS, payload, id="a\ud800b", timestamp=0.5)
    event = decode_event(frame, 1)
    assert event.id == "a\ud800b" and event.namespace == ("n\ud800",)
    assert event.record is not None
    assert (event.record.text, event.record.metadata) == ("x\udfffy", {"k\ud801": "v\udc00"})


@given(
    st.text(max_size=50),
    st.dictionaries(st.text(max_size=8), json_values, max_size=5),
    st.none() | st.text(max_size=10),
    vectors,
)
def test_put_payload_is_the_packed_map_whether_or_not_its_vector_shape_was_seen(
    text: str, metadata: dict[str, object], embedding_id: str | None, vector: np.ndarray
) -> None:
    """The put payload is byte for byte the packed map of its six fields (integers beyond 64 bits
    as ext values), the first time a vector dtype and shape is encoded and every time after."""
    expected = codec._pack(
        {
            "tx": text,
            "md": metadata,
            "e": embedding_id,
            "vd": vector.dtype.str,
            "vs": list(vector.shape),
            "vb": vector.tobytes(),
        }
    )
    assert encode_put_payload(text, metadata, embedding_id, vector) == expected
    assert encode_put_payload(text, metadata, embedding_id, vector) == expected


def test_recorded_at_reads_the_envelope_time_and_refuses_a_damaged_frame() -> None:
    """recorded_at gives an event's recorded time from its envelope alone, and a frame cut inside
    its envelope is StoreCorrupted, not a decoding crash."""
    frame, _ = _put()
    assert recorded_at(frame) == 100.0
    with pytest.raises(StoreCorrupted):
        recorded_at(frame[:10])


_NEXT = EVENT_VERSION + 1
"""A stand-in for the next event version."""


def _upcast_to_next(env: dict[str, object], payload: object) -> tuple[dict[str, object], object]:
    """A stand-in upcaster from the current version to the next: names an actor, and prefixes a put
    payload's text."""
    env = {**env, "v": _NEXT, "a": "upcast"}
    if isinstance(payload, dict) and "tx" in payload:
        payload = {**payload, "tx": "next " + payload["tx"]}
    return env, payload


def test_a_version_1_event_decodes_as_version_2(monkeypatch: pytest.MonkeyPatch) -> None:
    """A frame written by event version 1 decodes through the registered 1 -> 2 upcaster: the same
    fields and content, the hash of the stored bytes."""
    with monkeypatch.context() as m:
        m.setattr(codec, "EVENT_VERSION", 1)
        frame, h = _put()
    event = decode_event(frame, 1)
    assert (event.kind, event.id, event.hash, event.replaces, event.expires_at) == ("put", "r1", h, None, None)
    assert event.record is not None and event.record.text == "hello"
    assert codec.decode_content(frame).text == "hello"  # type: ignore[union-attr]


def test_an_older_event_is_upcast_on_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the next event version current and an upcaster to it that changes payloads, a frame of
    today's version decodes through it (envelope and payload, on the strict and the fast read
    paths); its hash stays that of the stored bytes."""
    frame, h = _put()
    monkeypatch.setattr(codec, "EVENT_VERSION", _NEXT)
    monkeypatch.setattr(codec, "UPCASTERS", {**codec.UPCASTERS, EVENT_VERSION: _upcast_to_next})
    monkeypatch.setattr(codec, "PAYLOAD_UPCASTS", frozenset({EVENT_VERSION}))
    event = decode_event(frame, 1)
    assert (event.actor, event.hash) == ("upcast", h)
    assert event.record is not None and event.record.text == "next hello"
    assert codec.decode_envelope(frame, 1).actor == "upcast"
    assert decode_record(frame)[2].text == "next hello"  # type: ignore[union-attr]
    assert codec.decode_content(frame).text == "next hello"  # type: ignore[union-attr]


def test_an_older_event_without_an_upcaster_is_corrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    """An event of a version below the current one that the table cannot upcast is refused as
    corrupt, naming the event and the version."""
    frame, _ = _put()
    monkeypatch.setattr(codec, "EVENT_VERSION", _NEXT)
    with pytest.raises(
        StoreCorrupted, match=f"event 1 does not decode: no upcaster from event version {EVENT_VERSION}"
    ):
        decode_event(frame, 1)
