"""Random one-slice searches over ``flat`` rows, shared by the fused-path and kernel tests: rows
with many tied scores (few distinct values, duplicated rows), tied times, a share of removed rows,
a window, maybe an excluded row and an as-of event."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st

from coniti.structure.flat import FlatStructure
from coniti.structure.rows import SortedRows
from coniti.structure.scoring import unit_vector


class SliceCase(NamedTuple):
    structure: FlatStructure
    rows: SortedRows
    query: np.ndarray
    lo: int
    hi: int
    skip: int | None
    seq: int | None


def slice_case(seed: int, n: int, levels: int, dead_share: float, as_of: bool) -> SliceCase:
    """A random search case (see the module docstring) drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    dim = int(rng.integers(1, 40))
    vectors = rng.integers(-levels, levels + 1, (n, dim)).astype(np.float64)
    vectors[rng.random(n) < 0.1] = vectors[0]  # duplicated rows: equal exact scores
    ids = [f"id{i:04d}" for i in range(n)]
    times = np.sort(rng.integers(0, max(1, n // 3), n)).astype(np.float64)  # tied times
    s = FlatStructure()
    s.add(ids, vectors, times, born=np.arange(1, n + 1))
    gone = [ids[i] for i in np.flatnonzero(rng.random(n) < dead_share).tolist()]
    s.remove(gone, seq=n + 1)
    rows = s._rows
    query = unit_vector(rng.integers(-levels, levels + 1, dim).astype(np.float64))[0]
    seq = int(rng.integers(0, n + 3)) if as_of else None
    a, b = sorted(rng.uniform(-1.0, times[-1] + 1.0, 2).tolist())
    lo, hi = rows.interval(a, b)
    exclude = ids[int(rng.integers(0, n))] if rng.random() < 0.3 else None
    return SliceCase(s, rows, query, lo, hi, rows.skip_row(exclude, seq), seq)


def slice_cases() -> st.SearchStrategy[SliceCase]:
    """Random search cases: up to 300 rows, 2 to 64 levels per value, up to 90% removed, as of an
    event or now."""
    return st.builds(
        slice_case,
        st.integers(0, 2**32 - 1),
        st.integers(1, 300),
        st.sampled_from([2, 8, 64]),
        st.floats(0.0, 0.9),
        st.booleans(),
    )
