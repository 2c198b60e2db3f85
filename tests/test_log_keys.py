"""Key encodings of the event log (coniti.log.keys): order preservation and the 511-byte key limit."""

from __future__ import annotations

import math
import struct

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from coniti.log.keys import (
    INLINE_MAX,
    decode_position,
    decode_ts_key,
    inv_seq_key,
    is_hashed,
    name_key,
    ns_bytes,
    ns_key,
    seq_from_inv,
    seq_from_key,
    seq_key,
    ts_key,
    ts_keys,
    unpack_position,
)

finite = st.floats(allow_nan=False, allow_infinity=False)
seqs = st.integers(0, 2**64 - 1)
names = st.text(min_size=1, max_size=700)


def _cmp(a: object, b: object) -> int:
    return (a > b) - (a < b)  # type: ignore[operator]


@given(finite, finite)
def test_timestamp_key_order_is_numeric_order(a: float, b: float) -> None:
    """For any two finite floats, comparing the keys gives the same answer as comparing the numbers."""
    assert _cmp(ts_key(a), ts_key(b)) == _cmp(a, b)


def test_timestamp_key_order_on_edge_values() -> None:
    """-max < -1 < -tiny < -0.0 == 0.0 < tiny < 1 < max, in key order too."""
    values = [-1.7976931348623157e308, -1.0, -5e-324, -0.0, 0.0, 5e-324, 1.0, 1.7976931348623157e308]
    keys = [ts_key(v) for v in values]
    assert keys == sorted(keys)
    assert ts_key(-0.0) == ts_key(0.0)
    assert all(len(k) == 8 for k in keys)


@given(finite)
def test_timestamp_key_round_trips(value: float) -> None:
    """decode_ts_key(ts_key(x)) == x bit for bit (except -0.0, which is stored as 0.0)."""
    back = decode_ts_key(ts_key(value))
    assert back == value and (value == 0.0 or math.copysign(1, back) == math.copysign(1, value))
    assert struct.pack(">d", back) == struct.pack(">d", value + 0.0)


@given(finite, seqs, st.binary(max_size=6), st.binary(max_size=6))
def test_position_decodes_as_its_timestamp_and_sequence_keys(value: float, seq: int, head: bytes, tail: bytes) -> None:
    """decode_position gives decode_ts_key and seq_from_key of the 16 bytes at its offset, bit for
    bit (-0.0 and 0.0, negative, subnormal and huge timestamps alike), whatever surrounds them."""
    key = head + ts_key(value) + seq_key(seq) + tail
    ts, back = decode_position(key, len(head))
    assert struct.pack(">d", ts) == struct.pack(">d", decode_ts_key(ts_key(value))) and back == seq
    assert type(ts) is float and type(back) is int


@given(finite, seqs, st.binary(max_size=6), st.binary(max_size=6))
def test_unpacked_position_is_negated_exactly_for_positive_timestamps(
    value: float, seq: int, head: bytes, tail: bytes
) -> None:
    """unpack_position's first value is below 0.0 exactly when the timestamp is positive, and is then
    the timestamp negated bit for bit (what a scan takes without decode_position); its seq is the seq."""
    key = head + ts_key(value) + seq_key(seq) + tail
    flipped, back = unpack_position(key, len(head))
    ts = decode_position(key, len(head))[0]
    assert (flipped < 0.0) == (ts > 0.0) and back == seq
    if flipped < 0.0:
        assert struct.pack(">d", -flipped) == struct.pack(">d", ts)


@given(seqs, seqs)
def test_sequence_keys_sort_numerically_and_inverted_keys_backwards(a: int, b: int) -> None:
    """seq_key is order-preserving, inv_seq_key order-reversing; both decode back."""
    assert _cmp(seq_key(a), seq_key(b)) == _cmp(a, b)
    assert _cmp(inv_seq_key(a), inv_seq_key(b)) == _cmp(b, a)
    assert seq_from_key(seq_key(a)) == a and seq_from_inv(inv_seq_key(a)) == a


@given(names, names)
def test_no_name_key_is_a_prefix_of_another(a: str, b: str) -> None:
    """Name keys are self-delimiting: distinct names never give keys where one prefixes the other."""
    ka, kb = name_key(a), name_key(b)
    if a != b:
        assert not ka.startswith(kb) and not kb.startswith(ka)
    else:
        assert ka == kb


@given(st.text(min_size=1, max_size=3000))
def test_name_keys_fit_the_lmdb_key_limit(name: str) -> None:
    """Any id fits: inline up to INLINE_MAX bytes, hashed (33 bytes) beyond, always < 511 with room for
    a namespace id and a sequence number."""
    key = name_key(name)
    assert len(key) + 4 + 8 + 8 <= 511
    assert is_hashed(key) == (len(name.encode("utf-8", "surrogatepass")) > INLINE_MAX)


def test_lone_surrogates_are_valid_names() -> None:
    """An id holding a lone surrogate (a valid Python str) still gets a key."""
    assert name_key("\ud800x") != name_key("x")


@given(st.lists(st.text(min_size=1, max_size=300), max_size=4))
def test_namespace_keys_are_bounded_and_distinct_from_their_parts(parts: list[str]) -> None:
    """A namespace's table key fits LMDB whatever its length, and differs from a one-part namespace
    holding the parts joined."""
    key = ns_key(ns_bytes(parts))
    assert len(key) <= 511
    if len(parts) > 1:
        assert key != ns_key(ns_bytes(["".join(parts)]))


@given(st.lists(finite, max_size=50))
def test_ts_keys_are_the_ts_key_of_each_value(values: list[float]) -> None:
    """The bulk timestamp keys of a put's columns are, value by value, what ts_key gives (-0.0,
    subnormals and negatives included)."""
    assert ts_keys(np.array(values, dtype=np.float64)) == [ts_key(v) for v in values]


@given(st.binary(min_size=8, max_size=8))
def test_decode_ts_key_of_any_eight_bytes_is_the_bit_flip_decode(key: bytes) -> None:
    """decode_ts_key of any 8 bytes (a damaged key too) gives the float of the key's bits flipped
    back (sign bit set: cleared; else every bit inverted), bit for bit: its shortcut for keys of
    positive timestamps (read as a float64, the negated timestamp) changes no value."""
    (bits,) = struct.unpack(">Q", key)
    bits = bits ^ (1 << 63) if bits & (1 << 63) else bits ^ (2**64 - 1)
    expected = struct.unpack(">d", struct.pack(">Q", bits))[0]
    back = decode_ts_key(key)
    assert struct.pack(">d", back) == struct.pack(">d", expected) or (math.isnan(back) and math.isnan(expected))


@given(st.text(max_size=500) | st.just("\ud800") | st.just("é" * 200) | st.just("x" * 401))
def test_name_key_is_the_length_prefixed_name_or_its_hash(name: str) -> None:
    """name_key is 0x00, the u16 length and the UTF-8 bytes (lone surrogates passed) up to
    INLINE_MAX bytes, else 0x01 and the SHA-256 of those bytes."""
    import hashlib

    raw = name.encode("utf-8", "surrogatepass")
    expected = b"\x00" + struct.pack(">H", len(raw)) + raw if len(raw) <= INLINE_MAX else b"\x01" + hashlib.sha256(raw).digest()
    assert name_key(name) == expected
