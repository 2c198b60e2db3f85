"""Event version 3 in the codec: put payloads without a vector and with a blob, exact round trips
on every read path, the usual put's bytes unchanged, strict refusals, and the blob bound."""

from __future__ import annotations

import hashlib
import struct

import msgpack
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coniti.errors import ContractError, StoreCorrupted
from coniti.log import codec
from coniti.log.codec import (
    EVENT_VERSION,
    GENESIS,
    MAX_BLOB_BYTES,
    PUT,
    decode_content,
    decode_event,
    decode_record,
    encode_event,
    encode_put_payload,
    encode_puts,
    payload_digest,
    read_content,
    read_put,
)

vectors = st.none() | st.sampled_from(["<f2", "<f4", "<f8"]).flatmap(
    lambda dt: st.integers(1, 8).flatmap(
        lambda n: st.binary(min_size=n * np.dtype(dt).itemsize, max_size=n * np.dtype(dt).itemsize).map(
            lambda raw: np.frombuffer(raw, dt).copy()
        )
    )
).filter(lambda v: v is None or bool(np.isfinite(v).all()))
blobs = st.none() | st.binary(max_size=300)


def _frame(payload: bytes, seq: int = 1) -> bytes:
    return encode_event(seq, 10.0, PUT, (), GENESIS, payload, id="r", timestamp=1.0)[0]


def _raw_frame(content: dict[str, object]) -> bytes:
    """A put frame around ``content`` packed as given (its digest matches)."""
    return _frame(msgpack.packb(content, use_bin_type=True))


def test_event_version_is_3() -> None:
    """This coniti writes event version 3 and upcasts 1 and 2 without touching payloads."""
    assert EVENT_VERSION == 3
    assert set(codec.UPCASTERS) == {1, 2}
    assert frozenset() == codec.PAYLOAD_UPCASTS


@given(st.text(max_size=20), st.none() | st.just("emb"), vectors, blobs)
def test_every_read_path_gives_the_content_back(
    text: str, emb: str | None, vector: np.ndarray | None, blob: bytes | None
) -> None:
    """For a vector or none and a blob or none, the strict decoder and the three fast read paths
    return the same text, vector (dtype and bytes) and blob."""
    payload = encode_put_payload(text, {"k": 1}, None if vector is None else emb, vector, blob)
    frame = _frame(payload)
    for data in (
        decode_event(frame, 1).record,
        decode_record(frame)[2],
        decode_content(frame),
        read_content(frame, 1),
        read_put(frame, 1)[1],
    ):
        assert data is not None and data.text == text and data.blob == blob
        if vector is None:
            assert data.vector is None and data.embedding_id is None
        else:
            assert data.vector is not None and data.vector.dtype == vector.dtype
            assert data.vector.tobytes() == vector.tobytes()


def test_the_usual_put_is_packed_as_in_version_2() -> None:
    """A put with a vector and no blob is the six-key map of version 2, byte for byte, on the fast
    path (second call) as on the first."""
    vector = np.arange(5, dtype=np.float32)
    expected = msgpack.packb(
        {"tx": "t", "md": {"a": 1}, "e": "emb", "vd": "<f4", "vs": [5], "vb": vector.tobytes()},
        use_bin_type=True,
    )
    assert encode_put_payload("t", {"a": 1}, "emb", vector) == expected
    assert encode_put_payload("t", {"a": 1}, "emb", vector) == expected


def test_a_put_without_a_vector_has_no_vector_fields() -> None:
    """Without a vector the payload is tx, md, e (and bl when there is a blob), nothing else."""
    plain = msgpack.unpackb(encode_put_payload("t", {}, None, None))
    assert plain == {"tx": "t", "md": {}, "e": None}
    with_blob = msgpack.unpackb(encode_put_payload("t", {}, None, None, b"\x00\xff"))
    assert with_blob == {"tx": "t", "md": {}, "e": None, "bl": b"\x00\xff"}


def test_a_blob_is_packed_as_bin() -> None:
    """The blob is msgpack bin (not str), after the vector's fields."""
    payload = encode_put_payload("t", {}, None, np.ones(1), b"abc")
    assert payload.endswith(b"\xa2bl\xc4\x03abc")


def test_the_blob_is_covered_by_the_digest_and_the_hash() -> None:
    """Two puts differing only in one blob byte have different digests and event hashes."""
    a = encode_put_payload("t", {}, None, None, b"abc")
    b = encode_put_payload("t", {}, None, None, b"abd")
    assert payload_digest(a) != payload_digest(b)
    assert decode_event(_frame(a), 1).hash != decode_event(_frame(b), 1).hash


def test_encode_puts_carries_the_payload_as_given() -> None:
    """The bulk encoder frames payloads without a vector or with a blob like encode_event does."""
    payload = encode_put_payload("t", {}, None, None, b"blob")
    frames, h = encode_puts(1, 10.0, GENESIS, [()], ["r"], [1.0], [payload], [payload_digest(payload)])
    assert frames == [_frame(payload)] and decode_event(frames[0], 1).hash == h


def test_a_blob_over_the_bound_is_refused_by_the_encoder() -> None:
    """encode_put_payload refuses a blob longer than MAX_BLOB_BYTES, naming the blob and the bound."""
    with pytest.raises(ContractError, match=rf"blob is {MAX_BLOB_BYTES + 1} bytes; at most {MAX_BLOB_BYTES}"):
        encode_put_payload("t", {}, None, None, bytes(MAX_BLOB_BYTES + 1))


def test_a_blob_at_the_bound_is_accepted() -> None:
    """A blob of exactly MAX_BLOB_BYTES is stored and decodes back."""
    blob = bytes(MAX_BLOB_BYTES)
    data = decode_event(_frame(encode_put_payload("t", {}, None, None, blob)), 1).record
    assert data is not None and data.blob == blob


def test_a_blob_that_is_not_bytes_is_refused_by_the_encoder() -> None:
    """A str (or bytearray) blob given to the log layer is refused, not stored as something else."""
    with pytest.raises(ContractError, match="blob must be bytes"):
        encode_put_payload("t", {}, None, None, "text")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"tx": "t", "md": {}, "e": None, "vd": "<f8", "vs": [1]}, "field v. without vb"),
        ({"tx": "t", "md": {}, "e": None, "vb": b"\x00" * 8}, "field vb without vd"),
        ({"tx": "t", "md": {}, "e": "emb"}, "e .embedding id. is set on a put without a vector"),
        ({"tx": "t", "md": {}, "e": None, "bl": "text"}, "field bl .blob. is not binary"),
        ({"tx": "t", "md": {}, "e": None, "zz": 1}, "unknown field zz"),
    ],
    ids=["vector-without-bytes", "bytes-without-dtype", "embedding-without-vector", "blob-as-str", "unknown"],
)
def test_a_malformed_payload_is_refused_by_the_strict_decoder(content: dict[str, object], message: str) -> None:
    """verify's strict decoder refuses partial vector fields, an embedding id without a vector, a
    blob that is not bin and unknown fields, naming the field."""
    with pytest.raises(StoreCorrupted, match=f"event 1 does not decode: .*{message}"):
        decode_event(_raw_frame(content), 1)


@pytest.mark.parametrize(
    "content",
    [
        {"tx": "t", "md": {}, "e": None, "bl": "text"},
        {"tx": "t", "md": {}, "e": None, "vd": "<f8", "vs": [1]},
        {"tx": "t", "md": {}, "e": None, "zz": 1},
    ],
    ids=["blob-as-str", "vector-without-bytes", "unknown"],
)
def test_a_malformed_payload_is_refused_by_the_fast_read_paths(content: dict[str, object]) -> None:
    """The read paths that skip the strict checks still refuse what would decode to something else."""
    frame = _raw_frame(content)
    for read in (lambda: decode_content(frame), lambda: read_content(frame, 1), lambda: decode_record(frame)):
        with pytest.raises(StoreCorrupted):
            read()


def test_a_blob_over_the_bound_is_refused_by_the_strict_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stored blob longer than the bound (written by a writer that ignored it) fails verify."""
    frame = _frame(encode_put_payload("t", {}, None, None, b"12345"))
    monkeypatch.setattr(codec, "MAX_BLOB_BYTES", 4)
    with pytest.raises(StoreCorrupted, match="field bl .blob. is 5 bytes, more than 4"):
        decode_event(frame, 1)


def test_a_version_2_put_reads_as_version_3() -> None:
    """A put written as event version 2 (vector, no blob) decodes unchanged, blob None, its hash
    that of the stored bytes."""
    payload = encode_put_payload("old", {}, "emb", np.ones(2, dtype=np.float32))
    env = {"v": 2, "k": PUT, "s": 1, "t": 1.0, "p": GENESIS, "n": [], "i": "r", "ts": 1.0}
    raw = msgpack.packb(env, use_bin_type=True)
    digest = hashlib.sha256(payload).digest()
    frame = struct.pack(">I", len(raw)) + raw + digest + payload
    event = decode_event(frame, 1)
    assert event.record is not None and event.record.blob is None and event.record.text == "old"
    assert event.hash == hashlib.sha256(GENESIS + raw + digest).digest()
    data = read_content(frame, 1)
    assert data is not None and data.vector is not None and data.blob is None
