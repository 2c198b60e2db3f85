"""The log engine's fast paths give exactly what its reference paths give.

* ``encode_puts`` (bulk writes) encodes the same bytes and hashes as ``encode_event`` one by one;
* ``encode_deletes`` (a batch of deletes) likewise;
* ``Projections.put_many`` leaves every sub-database byte-identical to ``append`` + ``put`` per event;
* ``decode_content`` (reads) returns the content the strict ``decode_event`` returns, and refuses a
  damaged payload with ``StoreCorrupted`` rather than decoding it to something else.
"""

from __future__ import annotations

import struct
from typing import Any

import lmdb
import msgpack
import numpy as np
import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from coniti.errors import StoreCorrupted
from coniti.log.codec import (
    DELETE,
    GENESIS,
    PUT,
    decode_content,
    decode_event,
    encode_deletes,
    encode_event,
    encode_put_payload,
    encode_puts,
    payload_digest,
    payload_view,
)
from coniti.log.keys import name_key, ns_bytes, ts_key
from coniti.log.projections import Dbs, Projections, payload_crcs
from coniti.log.store import ALL_DBS

names = st.text(min_size=1, max_size=12) | st.just("x" * 500) | st.just("\ud800lone")
namespaces = st.lists(st.text(min_size=1, max_size=6), max_size=2).map(tuple)
timestamps = st.floats(allow_nan=False, allow_infinity=False, width=64)
events = st.lists(st.tuples(namespaces, names, timestamps, st.binary(max_size=40)), min_size=1, max_size=6)
stamps = st.none() | st.text(max_size=8)


expiries = st.none() | st.floats(-1e10, 1e10, allow_nan=False) | st.integers(0, 2**40)


@settings(max_examples=80, deadline=None)
@given(
    events, st.integers(1, 2**40), st.floats(0, 2e9) | st.integers(0, 2**33), stamps, stamps,
    st.none() | st.lists(expiries, min_size=6, max_size=6),
)
def test_encode_puts_gives_the_bytes_of_encode_event(
    puts: list[tuple[tuple[str, ...], str, float, bytes]],
    first: int,
    at: float,
    actor: str | None,
    reason: str | None,
    expiry: list[float | None] | None,
) -> None:
    """Frames and hashes of encode_puts equal encode_event's for each event in turn (actor and
    reason present or absent, expiries on some or none, long ids, lone surrogates, several
    namespaces, any sequence number and recorded time)."""
    expected: list[bytes] = []
    h = GENESIS
    for k, (ns, rid, ts, payload) in enumerate(puts):
        frame, h = encode_event(
            first + k, at, PUT, ns, h, payload, id=rid, timestamp=ts, actor=actor, reason=reason,
            digest=payload_digest(payload), expires_at=None if expiry is None else expiry[k],
        )
        expected.append(frame)
    frames, last = encode_puts(
        first, at, GENESIS, [p[0] for p in puts], [p[1] for p in puts], [p[2] for p in puts],
        [p[3] for p in puts], [payload_digest(p[3]) for p in puts], actor=actor, reason=reason,
        expiries=None if expiry is None else expiry[: len(puts)],
    )
    assert frames == expected
    assert last == h


@settings(max_examples=80, deadline=None)
@given(
    namespaces, st.lists(names, min_size=1, max_size=6), st.integers(1, 2**40),
    st.floats(0, 2e9) | st.integers(0, 2**33), stamps, stamps,
)
def test_encode_deletes_gives_the_bytes_of_encode_event(
    ns: tuple[str, ...], ids: list[str], first: int, at: float, actor: str | None, reason: str | None
) -> None:
    """Frames and hashes of encode_deletes equal encode_event's for each delete in turn (actor and
    reason present or absent, long ids, lone surrogates, any namespace, sequence number and
    recorded time), and each event's hash is collected in order."""
    expected: list[bytes] = []
    chain: list[bytes] = []
    h = GENESIS
    for k, rid in enumerate(ids):
        frame, h = encode_event(first + k, at, DELETE, ns, h, id=rid, actor=actor, reason=reason)
        expected.append(frame)
        chain.append(h)
    hashes: list[bytes] = []
    frames, last = encode_deletes(first, at, GENESIS, ns, ids, actor=actor, reason=reason, hashes=hashes)
    assert (frames, last, hashes) == (expected, h, chain)


def _dbs(env: lmdb.Environment) -> Dbs:
    with env.begin(write=True) as txn:
        return Dbs({name: env.open_db(name, txn=txn) for name in ALL_DBS})


def _dump(env: lmdb.Environment, dbs: Dbs) -> dict[str, list[tuple[bytes, bytes]]]:
    with env.begin() as txn:
        return {
            name: [(bytes(k), bytes(v)) for k, v in txn.cursor(db=getattr(dbs, name))]
            for name in Dbs.__slots__
            if name not in ("legacy", "sealed", "seals")  # flags, not tables
        }


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([(), ("a",), ("b", "c")]), timestamps), min_size=1, max_size=30))
def test_put_many_writes_what_append_and_put_write(tmp_path_factory: Any, records: list[Any]) -> None:
    """Two batches of puts over several namespaces, timestamps in any order: put_many leaves every
    sub-database byte-identical to append + put per event."""
    base = tmp_path_factory.mktemp("put_many")
    ref_env = lmdb.open(str(base / "reference"), max_dbs=len(ALL_DBS) + 2, map_size=1 << 26)
    fast_env = lmdb.open(str(base / "fast"), max_dbs=len(ALL_DBS) + 2, map_size=1 << 26)
    try:
        ref, fast = _dbs(ref_env), _dbs(fast_env)
        half = len(records) // 2
        seq = 1
        for batch in (records[:half], records[half:]):
            if not batch:
                continue
            # frame-shaped bytes (no envelope, a zero digest, a payload): put_many keeps the payload's CRC
            frames = [bytes(4 + 32) + f"payload {seq + k}".encode() for k in range(len(batch))]
            keys = []
            for k, (ns, ts) in enumerate(batch):
                with ref_env.begin(write=True) as txn:
                    nsid = Projections(txn, ref).intern(ns_bytes(ns))
                keys.append((nsid, name_key(f"id{seq + k}"), ts_key(ts)))
            with fast_env.begin(write=True) as txn:
                p = Projections(txn, fast)
                for ns, _ in batch:
                    p.intern(ns_bytes(ns))
                crcs = payload_crcs([bytes(payload_view(f)) for f in frames])
                p.put_many(seq, frames, *(list(column) for column in zip(*keys, strict=True)), crcs)
            with ref_env.begin(write=True) as txn:
                p = Projections(txn, ref)
                for k, (nsid, idk, tsk) in enumerate(keys):
                    p.append(seq + k, frames[k])
                    p.put(seq + k, nsid, idk, tsk, struct.pack(">I", crc32c(payload_view(frames[k]))))
            seq += len(batch)
        assert _dump(fast_env, fast) == _dump(ref_env, ref)
    finally:
        ref_env.close()
        fast_env.close()


def _put_frame(**payload_fields: Any) -> bytes:
    payload = msgpack.packb(
        {"tx": "t", "md": {}, "e": None, "vd": "<f4", "vs": [2], "vb": b"\x00" * 8, **payload_fields},
        use_bin_type=True,
    )
    frame, _ = encode_event(1, 1.0, PUT, (), GENESIS, payload, id="r", timestamp=0.5)
    return frame


@pytest.mark.parametrize("dtype", ["<f2", "<f4", "<f8", ">f4"])
def test_decode_content_returns_what_decode_event_returns(dtype: str) -> None:
    """Text, metadata, embedding id and the vector's dtype and bits agree with the strict decoder;
    the vector is a writable array of its own."""
    vector = np.array([1.5, -2.25, 3.0], dtype=dtype)
    payload = encode_put_payload("some text \ud800", {"k": [1, {"x": None}]}, "emb", vector)
    frame, _ = encode_event(7, 1.0, PUT, ("n",), GENESIS, payload, id="r", timestamp=2.0)
    fast = decode_content(frame)
    strict = decode_event(frame, 7).record
    assert fast is not None and strict is not None
    assert (fast.text, fast.metadata, fast.embedding_id) == (strict.text, strict.metadata, strict.embedding_id)
    assert fast.vector.dtype == strict.vector.dtype == np.dtype(dtype)
    assert fast.vector.tobytes() == strict.vector.tobytes() == vector.tobytes()
    fast.vector[0] = 9.0  # writable, and no other decode shares it
    assert decode_content(frame).vector.tobytes() == vector.tobytes()  # type: ignore[union-attr]


def test_decoded_vector_owns_its_memory() -> None:
    """The vector a read decodes owns its data: no bytearray or memoryview behind it (two objects
    fewer for the garbage collector to track per record read)."""
    payload = encode_put_payload("t", {}, "emb", np.array([1.5, -2.25], dtype="<f4"))
    frame, _ = encode_event(7, 1.0, PUT, ("n",), GENESIS, payload, id="r", timestamp=2.0)
    data = decode_content(frame)
    assert data is not None and data.vector is not None
    assert data.vector.base is None and data.vector.flags.owndata


@pytest.mark.parametrize(
    "damage",
    [
        {"vb": "not bytes"},
        {"vb": 8},
        {"vd": "<i4"},
        {"vd": ["<f4"]},
        {"vs": [3]},
        {"vs": 2},
        {"vb": b"\x00" * 7},
        {"vb": b"", "vs": [0]},
    ],
)
def test_decode_content_refuses_a_damaged_payload(damage: dict[str, Any]) -> None:
    """A payload whose vector fields disagree or have the wrong types raises StoreCorrupted."""
    with pytest.raises(StoreCorrupted):
        decode_content(_put_frame(**damage))


def test_decode_content_of_an_erased_frame_is_none() -> None:
    """A put frame without payload (erased) has no content."""
    frame, _ = encode_event(1, 1.0, PUT, (), GENESIS, b"", id="r", timestamp=0.5)
    assert decode_content(frame) is None


def test_records_read_back_keep_independent_fields_sets(tmp_path: Any) -> None:
    """Records a read builds share pydantic's fields-set (it names every field); copying one with
    an update, assigning to a result or pickling leaves every other record's fields-set intact."""
    import pickle

    from coniti.impl.log import LogBackend
    from coniti.memory import GetRequest, GetResult, PutRequest
    from coniti.testing.helpers import record

    with LogBackend(tmp_path / "store") as store:
        store.put(PutRequest(records=[record("a"), record("b")]))
        result = store.get(GetRequest(ids=["a", "b"]))
        a, b = result.records
        every = {"note", "vector", "embedding_id", "namespace", "expires_at", "blob", "version"}
        assert a.model_fields_set == b.model_fields_set == every
        a.model_copy(update={"embedding_id": "x"})
        result.missing = ["zz"]
        copied = pickle.loads(pickle.dumps(b))
        assert copied == b and copied.model_fields_set == every
        again = store.get(GetRequest(ids=["a"]))
        assert again.records[0].model_fields_set == b.model_fields_set == every
        assert again.model_fields_set == result.model_fields_set == set(GetResult.model_fields)


read_ids = st.sampled_from(["a", "b", "c", "h" * 500, "\ud800z"])
read_times = st.sampled_from([0.0, -0.0, 1.5, -2.0, 1e300])
read_steps = st.lists(st.tuples(st.booleans(), read_ids, read_times), min_size=1, max_size=20)


@settings(max_examples=40, deadline=None)
@given(read_steps)
def test_rows_read_through_the_index_keys_are_the_rows_the_events_hold(
    tmp_path_factory: Any, steps: list[tuple[bool, str, float]]
) -> None:
    """After any puts and deletes (hashed ids, timestamps 0.0 and -0.0), get and scan, now and as of
    every event, return exactly the id, timestamp (with its sign), text and metadata of the put
    event of each visible version, scans in (timestamp, write order), pages resuming in order."""
    from coniti.log import EventLog, PutItem

    log = EventLog(tmp_path_factory.mktemp("reads") / "store", durability="nosync")
    try:
        visible: dict[str, tuple[int, float, str]] = {}
        states: list[dict[str, tuple[int, float, str]]] = [{}]
        for k, (is_put, rid, ts) in enumerate(steps):
            if is_put and rid not in visible:
                text = f"text {k}"
                log.put([PutItem((), rid, text, ts, {"k": k}, None, np.zeros(2, dtype=np.float32))])
                visible[rid] = (log.head().seq, ts, text)
            elif not is_put and rid in visible:
                log.delete((), [rid])
                del visible[rid]
            else:
                continue
            states.append(dict(visible))  # one event per step taken: states[s] is right after s

        def seen(rows: Any) -> list[tuple[str, str, str]]:
            return [(r.id, r.timestamp.hex(), r.data.text) for r in rows]

        ids = ["a", "b", "c", "h" * 500, "\ud800z"]
        head = len(states) - 1
        for at, state in [*enumerate(states), (None, states[head])]:
            want = sorted(state.items(), key=lambda kv: (kv[1][1], kv[1][0]))
            expected = [(rid, ts.hex(), text) for rid, (_, ts, text) in want]
            rows, missing = log.get((), ids, at)
            assert sorted(seen(rows)) == sorted(expected)
            assert sorted(missing) == sorted(set(ids) - set(state))
            assert all(r.data.metadata == {"k": int(r.data.text.split()[1])} for r in rows)
            rows, more = log.scan((), None, None, None, None, at)
            assert seen(rows) == expected and more is None
            paged: list[Any] = []
            after = None
            while True:
                page, after = log.scan((), None, None, after, 2, at)
                paged += page
                if after is None:
                    break
            assert seen(paged) == expected
    finally:
        log.close()


# -- the sealed read's payload decode (codec._stored_content) ----------------------------------

tail_texts = st.text(max_size=30) | st.just("lone \ud800 surrogate")
tail_metadata = st.dictionaries(
    st.text(max_size=4), st.none() | st.integers(-(2**70), 2**70) | st.text(max_size=5) | st.lists(st.integers(), max_size=3),
    max_size=3,
)
tail_vectors = st.sampled_from(["<f2", "<f4", "<f8", ">f4"]).flatmap(
    lambda dt: st.integers(1, 300).map(lambda n: (np.arange(n) * 0.5 - 3).astype(dt))
)


def _full_decode(payload: bytes) -> Any:
    from coniti.log import codec

    return codec._stored_record(codec._unpack(payload))


def _same_content(a: Any, b: Any) -> None:
    assert (a.text, a.metadata, a.embedding_id, a.blob, a.kind, a.facts) == (
        b.text, b.metadata, b.embedding_id, b.blob, b.kind, b.facts,
    )
    if b.vector is None:
        assert a.vector is None
    else:
        assert a.vector.dtype == b.vector.dtype and a.vector.tobytes() == b.vector.tobytes()
        assert a.vector.flags.owndata and a.vector.flags.writeable and a.vector.base is None


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            tail_texts, tail_metadata, st.none() | st.just("emb"), st.none() | tail_vectors,
            st.none() | st.binary(max_size=40), st.none() | st.just("fact"),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_sealed_payload_decode_equals_the_full_decode(rows: list[Any]) -> None:
    """Whatever tail the decoder learnt from the payloads before, each put payload the store writes
    (texts with lone surrogates, integers past 64 bits, any vector dtype and length, with or
    without a vector, a blob or a kind) decodes to exactly what the full msgpack decode gives."""
    from coniti.log import codec

    for text, metadata, emb, vector, blob, kind in rows * 2:  # the second pass meets learnt tails
        payload = encode_put_payload(text, metadata, emb, vector, blob, kind)
        _same_content(codec._stored_content(payload), _full_decode(payload))


def test_a_payload_ending_like_a_learnt_tail_is_decoded_in_full() -> None:
    """A payload whose last bytes equal a learnt vector tail but whose head is not the three usual
    fields (here a blob that ends with them) decodes as the full decode does."""
    from coniti.log import codec

    vector = np.arange(4, dtype="<f4")
    usual = encode_put_payload("t", {}, "emb", vector)
    codec._stored_content(usual)  # learns this tail
    tail = usual[-(len(usual) - usual.index(b"\xa2vd")) :]
    payload = msgpack.packb(
        {"tx": "t", "md": {}, "e": None, "vd": "<f4", "vs": [4], "vb": vector.tobytes(), "bl": b"x" + tail},
        use_bin_type=True,
    )
    assert payload.endswith(tail)
    _same_content(codec._stored_content(payload), _full_decode(payload))
    assert codec._stored_content(payload).blob == b"x" + tail
    # six entries, the usual tail, but a head of other keys: the full decode refuses it
    other = b"\x86" + msgpack.packb({"tx": "t", "md": {}, "xx": 1})[1:] + tail
    with pytest.raises(KeyError):
        codec._stored_content(other)


def test_a_damaged_head_before_a_learnt_tail_is_refused() -> None:
    """A payload (its CRC taken after the damage) whose tail is intact but whose head is cut short
    raises StoreCorrupted on the sealed read path, as the full decode does."""
    from coniti.log import codec

    vector = np.arange(6, dtype="<f4")
    good = encode_put_payload("some text", {"k": 1}, "emb", vector)
    codec._stored_content(good)
    cut = good.index(b"\xa2vd")
    damaged = good[: cut - 3] + good[cut:]  # the embedding id's bytes lost
    frame, _ = encode_event(7, 1.0, PUT, ("n",), GENESIS, damaged, id="r", timestamp=2.0)
    with pytest.raises(StoreCorrupted):
        codec.read_content(frame, 7, crc32c(damaged), crc32c)
