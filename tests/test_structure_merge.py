"""The merge of a sorted-rows structure's buffer into its main rows (coniti.structure.rows): after
adds out of time order (merged again and again, the buffer's arrays reused between merges) and
removals between them (dead rows among the moved ones), every live id is found at its own row."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from coniti.structure import FlatStructure, rows


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(st.integers(1, 30), min_size=2, max_size=12),
    removed=st.lists(st.sets(st.integers(0, 400), max_size=8), min_size=12, max_size=12),
    with_seq=st.booleans(),
    chunk=st.sampled_from([rows._CHUNK, 3]),
    seed=st.integers(0, 2**16),
)
def test_every_live_id_keeps_its_vector_and_time_across_merges(
    batches: list[int], removed: list[set[int]], with_seq: bool, chunk: int, seed: int
) -> None:
    """Each live id's vector and timestamp are those it was added with, removed ids are gone, and
    the main rows stay in time order, whatever the merges moved (in steps of ``chunk`` rows: 3
    makes every merge and compaction take many)."""
    default, rows._CHUNK = rows._CHUNK, chunk
    try:
        _merges(batches, removed, with_seq, seed)
    finally:
        rows._CHUNK = default


def _merges(batches: list[int], removed: list[set[int]], with_seq: bool, seed: int) -> None:
    s = FlatStructure(buffer_min=4, buffer_fraction=0.25)
    rng = np.random.default_rng(seed)
    added: dict[str, tuple[np.ndarray, float]] = {}
    n = 0
    for b, size in enumerate(batches):
        ids = [f"n{n + i}" for i in range(size)]
        vecs = rng.standard_normal((size, 8)).astype(np.float32)
        times = rng.uniform(0.0, 100.0, size)
        s.add(ids, vecs, times, born=np.full(size, b + 1))
        for i, id_ in enumerate(ids):
            added[id_] = (s._rows.vector(id_), float(times[i]))
        n += size
        gone = [f"n{i}" for i in removed[b] if f"n{i}" in added]
        s.remove(gone, seq=b + 1 if with_seq else None)
        for id_ in gone:
            del added[id_]
    assert len(s) == len(added)
    for id_, (vector, time) in added.items():
        assert id_ in s
        assert np.array_equal(s._rows.vector(id_), vector)
        assert s._rows.timestamp(id_) == time
    rows = s._rows
    assert (np.diff(rows.times[: rows.n]) >= 0).all()
    assert all(f"n{i}" not in s for i in range(n) if f"n{i}" not in added)
