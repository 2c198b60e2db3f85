"""Conformance properties (hypothesis): paging, scan order, and the memory file round trip.

Each example builds its own backend from ``backend_factory`` and closes it, so the factory must give
a fresh, empty backend on every call.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from coniti.actor import Note, TimeRange
from coniti.memory import MemoryRecord, MetaSetRequest
from coniti.testing.fixtures import BackendFactory, BackendFixtures
from coniti.testing.helpers import exact, ids, pages, put, record, scan_all
from coniti.times import MAX_TIME, MIN_TIME

__all__ = ["PropertyTests"]

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    # Each example opens its own backend from the factory (so the function-scoped fixture is fine),
    # and one mixin method runs for several backend classes in a session (so executors differ; a
    # saved failing example of one backend is merely replayed against another).
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.differing_executors,
    ],
)

# Few distinct timestamps so that ties (where write order decides) are common.
timestamps = st.sampled_from([-2.5, -0.0, 0.0, 1.0, 1.5, 2.0, 1e9])
batches = st.lists(st.lists(timestamps, min_size=1, max_size=6), min_size=1, max_size=6)
bounds = st.one_of(st.none(), timestamps)

finite = st.floats(allow_nan=False, allow_infinity=False)
stored_times = st.floats(MIN_TIME, MAX_TIME, exclude_max=True)
"""Every time a note or an expiry may hold: years 1 to 9999 UTC (:mod:`coniti.times`)."""
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | finite | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


VECTOR_ELEMENTS = [
    ("float16", st.floats(allow_nan=False, allow_infinity=False, width=16)),
    ("float32", st.floats(allow_nan=False, allow_infinity=False, width=32)),
    ("float64", st.floats(allow_nan=False, allow_infinity=False, width=64)),
]


@st.composite
def memory_records(draw: st.DrawFn, record_id: str) -> MemoryRecord:
    """A record with any text, any timestamp of the horizon, JSON metadata and a float16/32/64 vector."""
    dtype, elements = draw(st.sampled_from(VECTOR_ELEMENTS))
    vector = draw(hnp.arrays(np.dtype(dtype), st.integers(1, 6), elements=elements))
    note = Note(
        id=record_id,
        text=draw(st.text(max_size=20)),
        timestamp=draw(stored_times),
        metadata=draw(st.dictionaries(st.text(max_size=6), json_values, max_size=4)),
    )
    embedding_id = draw(st.none() | st.sampled_from(["emb-1", "emb-2"]))
    return MemoryRecord(note=note, vector=vector, embedding_id=embedding_id)


@st.composite
def record_lists(draw: st.DrawFn) -> list[MemoryRecord]:
    n = draw(st.integers(0, 8))
    return [draw(memory_records(f"id-{i}")) for i in range(n)]


def _write(batch_list: list[list[float]]) -> list[list[MemoryRecord]]:
    """Records grouped into the given put calls, with ids that sort against write order (so a
    backend breaking ties by id instead of write order is caught)."""
    out: list[list[MemoryRecord]] = []
    n = 0
    for batch in batch_list:
        out.append([record(f"w{999 - n - i:03d}", t) for i, t in enumerate(batch)])
        n += len(batch)
    return out


class PropertyTests(BackendFixtures):
    """Properties over generated data, each example on a fresh backend."""

    @SETTINGS
    @given(batch_list=batches, data=st.data())
    def test_paging_at_any_size_equals_one_scan(
        self, backend_factory: BackendFactory, batch_list: list[list[float]], data: st.DataObject
    ) -> None:
        """For any data, range and page size, the pages concatenated equal one unlimited scan."""
        start, end = data.draw(bounds), data.draw(bounds)
        if start is not None and end is not None and start > end:
            start, end = end, start
        window = TimeRange(start=start, end=end)
        with backend_factory() as backend:
            for batch in _write(batch_list):
                put(backend, *batch)
            whole = ids(scan_all(backend, time_range=window))
            limit = data.draw(st.integers(1, len(whole) + 2))
            got = pages(backend, limit, time_range=window)
            assert [i for p in got for i in ids(p.records)] == whole
            assert all(len(p.records) == limit for p in got[:-1])
            assert len(got) == max(1, -(-len(whole) // limit))

    @SETTINGS
    @given(batch_list=batches)
    def test_scan_order_is_timestamp_then_write_order(
        self, backend_factory: BackendFactory, batch_list: list[list[float]]
    ) -> None:
        """scan returns records sorted by (timestamp, write order), whatever the put calls were."""
        written = [r for batch in _write(batch_list) for r in batch]
        expected = [r.id for _, r in sorted(enumerate(written), key=lambda p: (p[1].note.timestamp, p[0]))]
        with backend_factory() as backend:
            for batch in _write(batch_list):
                put(backend, *batch)
            assert ids(scan_all(backend)) == expected

    @SETTINGS
    @given(records=record_lists(), embedding_id=st.none() | st.just("emb-1"))
    def test_dump_then_load_round_trips_bit_for_bit(
        self,
        backend_factory: BackendFactory,
        records: list[MemoryRecord],
        embedding_id: Any,
    ) -> None:
        """dump then load into a fresh backend gives every record back bit for bit, in scan order."""
        with backend_factory() as source, backend_factory() as target:
            put(source, *records)
            if embedding_id is not None:
                source.set_meta(MetaSetRequest(key="embedding_id", value=embedding_id))
            stream = io.StringIO()
            assert source.dump(stream) == len(records)
            stream.seek(0)
            assert target.load(stream) == len(records)
            assert [exact(r) for r in scan_all(target)] == [exact(r) for r in scan_all(source)]
