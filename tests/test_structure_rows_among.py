"""Structure.rows_among: the stored ids among those asked, with the rows and times the searches
score; the sorted-rows structures gather them in one take (main rows and buffer) and give what the
row-by-row definition gives."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from coniti.structure import FlatStructure, SegmentTreeStructure, Structure


def as_dict(found: tuple[list[str], np.ndarray, np.ndarray]) -> dict[str, tuple[bytes, float]]:
    ids, vecs, times = found
    assert vecs.shape[0] == len(ids) == times.shape[0]
    return {i: (vecs[n].tobytes(), float(times[n])) for n, i in enumerate(ids)}


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(["flat", "segment_tree"]),
    batches=st.lists(st.integers(1, 40), min_size=1, max_size=5),
    removed=st.sets(st.integers(0, 199), max_size=30),
    asked=st.lists(st.integers(0, 220), max_size=60),
    seed=st.integers(0, 2**16),
)
def test_rows_among_equals_the_row_by_row_definition(
    kind: str, batches: list[int], removed: set[int], asked: list[int], seed: int
) -> None:
    """After batches of adds (some rows merged into the main rows, some still buffered) and
    removals (kept for history), the ids found, their rows and their times are those of asking
    each id alone; ids never stored or removed are not found."""
    s = (
        FlatStructure(buffer_min=8)
        if kind == "flat"
        else SegmentTreeStructure(leaf_size=4, buffer_min=8)
    )
    rng = np.random.default_rng(seed)
    n = 0
    for size in batches:
        ids = [f"id{n + i}" for i in range(size)]
        s.add(
            ids,
            rng.standard_normal((size, 8)),
            rng.uniform(0, 100, size),
            born=np.arange(n, n + size) + 1,
        )
        n += size
    gone = [f"id{i}" for i in sorted(removed) if i < n]
    if gone:
        s.remove(gone, seq=n + 1)
    ids = [f"id{i}" for i in asked]
    assert as_dict(s.rows_among(ids)) == as_dict(Structure.rows_among(s, ids))
    assert set(s.rows_among(ids)[0]) == {i for i in ids if i in s}
