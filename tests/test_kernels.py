"""The compiled kernels (``coniti.structure._kernels``): built by the install, equal to their numpy
twins bit for bit, and refusing malformed arrays with an error instead of reading out of bounds.

The scoring and fused-search suites (``test_structure_scoring.py``, ``test_structure_fused.py``)
run once on the kernels and once on the numpy twins; this module compares the two directly."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slice_cases import SliceCase, slice_cases

from coniti.structure import scoring
from coniti.structure.scoring import error_bound, unit_rows


@pytest.fixture
def compiled() -> Iterator[object]:
    if scoring.kernels is None:
        pytest.fail("coniti.structure._kernels is not built: ./tools/test installs it with a C compiler")
    yield scoring.kernels


def fsum_scores(rows: np.ndarray, query: np.ndarray) -> list[str]:
    products = rows.astype(np.float64) * query.astype(np.float64)
    return [math.fsum(row).hex() for row in products.tolist()]


def test_the_compiled_kernels_are_built() -> None:
    """The install that ./tools/test (and CI) runs builds the kernels, so the suites exercise them."""
    assert scoring.kernels is not None


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from(["unit", "few_bits", "wide_exponents", "integers", "opposites"]),
    st.sampled_from([1, 2, 3, 7, 64, 256, 384]),
)
def test_kernel_scores_equal_fsum(seed: int, kind: str, dim: int) -> None:
    """Every score the kernel gives (rows it leaves to fsum aside) equals math.fsum of the float64
    products, bit for bit, for unit rows, few-bit rows (rounding midpoints), values across the
    float32 exponent range, large integers and rows that cancel to zero."""
    kernels = scoring.kernels
    if kernels is None:
        pytest.skip("not built")
    rng = np.random.default_rng(seed)
    c = int(rng.integers(1, 12))
    if kind == "unit":
        rows, query = unit_rows(rng.standard_normal((c, dim))), unit_rows(rng.standard_normal((1, dim)))[0]
    elif kind == "few_bits":
        rows = unit_rows(rng.integers(0, 3, (c, dim)).astype(np.float64))
        query = unit_rows(rng.integers(0, 3, (1, dim)).astype(np.float64))[0]
    elif kind == "wide_exponents":
        scale = 2.0 ** rng.integers(-140, 60, (c + 1, dim))
        both = (rng.standard_normal((c + 1, dim)) * scale).astype(np.float32)
        rows, query = both[:c].copy(), both[c].copy()
    elif kind == "integers":
        rows = rng.integers(-(2**24), 2**24, (c, dim)).astype(np.float32)
        query = rng.integers(-(2**24), 2**24, dim).astype(np.float32)
    else:
        half = unit_rows(rng.standard_normal((c, dim)))
        rows, query = np.concatenate([half, -half]), half[0].copy()
    scores, unsure = kernels.exact_scores(rows, query)
    want = fsum_scores(rows, query)
    assert [s.hex() for i, s in enumerate(scores) if i not in unsure] == [
        w for i, w in enumerate(want) if i not in unsure
    ]
    assert scoring.exact_scores(rows, query) == [float.fromhex(w) for w in want]


def test_unit_rows_are_never_left_to_fsum(compiled: object) -> None:
    """Unit rows with nonzero scores, the structures' case, are all scored by the kernel itself."""
    rng = np.random.default_rng(5)
    rows, query = unit_rows(rng.standard_normal((500, 384))), unit_rows(rng.standard_normal((1, 384)))[0]
    assert scoring.kernels is not None
    assert scoring.kernels.exact_scores(rows, query)[1] == []


def test_a_zero_score_is_left_to_fsum(compiled: object) -> None:
    """A row whose products cancel exactly is left to fsum, which decides the sign of zero."""
    assert scoring.kernels is not None
    rows = np.array([[1.0, -1.0], [0.0, 0.0]], dtype=np.float32)
    assert scoring.kernels.exact_scores(rows, np.array([0.5, 0.5], dtype=np.float32))[1] == [0, 1]


@settings(max_examples=250, deadline=None)
@given(slice_cases(), st.integers(1, 12))
def test_compiled_slice_search_equals_the_numpy_twin(case: SliceCase, k: int) -> None:
    """``top_of_slice`` through ``slice_top`` returns exactly the numpy path's hits (ids, order,
    score bits) on random windows with ties, removed rows (a few or most), an excluded row and an
    as-of event, k above and below the window's size."""
    if scoring.kernels is None:
        pytest.skip("not built")
    rows, query, lo, hi, skip, seq = case.rows, case.query, case.lo, case.hi, case.skip, case.seq
    eps = error_bound(query.shape[0])
    got = rows.top_of_slice(query, k, eps, lo, hi, skip, seq)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scoring, "kernels", None)
        want = rows.top_of_slice(query, k, eps, lo, hi, skip, seq)
    assert [(h.id, h.score.hex()) for h in got] == [(h.id, h.score.hex()) for h in want]


def test_slice_top_leaves_a_nan_score_to_the_masked_path(compiled: object) -> None:
    """A NaN fast score makes ``slice_top`` answer None (the caller takes the numpy path) rather
    than choose candidates by an order NaN breaks."""
    assert scoring.kernels is not None
    vecs = unit_rows(np.eye(4))
    approx = np.array([0.5, np.nan, 0.25, 0.1], dtype=np.float32)
    assert scoring.kernels.slice_top(vecs, vecs[0], approx, 0, 2, 1e-6, None, None, None, -1, -1) is None


def test_slice_top_reads_a_read_only_map(compiled: object, tmp_path: Path) -> None:
    """A restored snapshot's rows are a read-only memory map: the kernel reads them as they are."""
    assert scoring.kernels is not None
    path = tmp_path / "vecs.npy"
    np.save(path, unit_rows(np.random.default_rng(3).standard_normal((50, 8))))
    vecs = np.load(path, mmap_mode="r")
    query = np.array(vecs[7])
    approx = np.asarray(vecs[10:40] @ query, dtype=np.float32)
    rows, scores, unsure = scoring.kernels.slice_top(
        vecs, query, approx, 10, 3, 1e-6, None, None, None, -1, -1
    )
    assert unsure == [] and set(rows) <= set(range(10, 40)) and len(rows) >= 3
    assert [s.hex() for s in scores] == fsum_scores(np.asarray(vecs)[rows], query)


@pytest.mark.parametrize(
    ("rows", "query", "message"),
    [
        (np.zeros((2, 3), dtype=np.float64), np.zeros(3, dtype=np.float32), "rows must be"),
        (np.zeros((3, 4), dtype=np.float32)[:, ::2], np.zeros(2, dtype=np.float32), "contiguous"),
        (np.zeros(3, dtype=np.float32), np.zeros(3, dtype=np.float32), "rows must be"),
        (np.zeros((2, 3), dtype=np.float32), np.zeros(4, dtype=np.float32), "query has 4 values"),
    ],
)
def test_exact_scores_refuses_malformed_arrays(
    compiled: object, rows: np.ndarray, query: np.ndarray, message: str
) -> None:
    """Arrays of another dtype, layout or shape raise an error that names the argument."""
    assert scoring.kernels is not None
    with pytest.raises((ValueError, BufferError), match=message):
        scoring.kernels.exact_scores(rows, query)


@pytest.mark.parametrize(
    ("lo", "approx_rows", "alive_rows", "born_rows", "died_rows"),
    [(-1, 2, 5, 5, 5), (4, 2, 5, 5, 5), (0, 2, 1, 5, 5), (0, 2, 5, 1, 5), (0, 2, 5, 5, 1), (0, 2, 5, 5, None)],
)
def test_slice_top_refuses_a_window_outside_the_rows(
    compiled: object, lo: int, approx_rows: int, alive_rows: int, born_rows: int, died_rows: int | None
) -> None:
    """A window that starts before the rows, runs past them, past the live flags or past the
    born/died sequence numbers (or gives one of those without the other) raises ValueError instead
    of reading outside the arrays."""
    assert scoring.kernels is not None
    vecs = unit_rows(np.eye(5))
    approx = np.zeros(approx_rows, dtype=np.float32)
    alive = np.ones(alive_rows, dtype=bool)
    born = np.zeros(born_rows, dtype=np.int64)
    died = None if died_rows is None else np.full(died_rows, 9, dtype=np.int64)
    with pytest.raises(ValueError, match="out of range"):
        scoring.kernels.slice_top(vecs, vecs[0], approx, lo, 1, 1e-6, alive, born, died, 3, -1)


@pytest.mark.parametrize("structure", ["flat", "segment_tree"])
def test_engine_answers_equal_with_and_without_the_kernels(compiled: object, structure: str) -> None:
    """Through the whole engine (a LogBackend store, hybrid and semantic asks over windows, now and
    as of an earlier event, notes removed), asks answer the same hits with the same score bits on
    the compiled kernels and on their numpy twins."""
    import tempfile

    from coniti import Container, Note, Query, TimeRange

    words = ["budget", "lunch", "gym", "report", "trip", "code", "plan", "tea", "kitchen", "launch"]
    notes = [
        Note(id=f"n{i}", text=f"{words[i % 10]} {words[(i * 7) % 10]} {words[(i * 3) % 10]} {i}",
             timestamp=float(i))
        for i in range(600)
    ]
    with tempfile.TemporaryDirectory() as tmp, Container(
        memory="log", path=Path(tmp) / "s", structure=structure
    ) as c:
        c.engine.ingest_many(notes[:400])
        middle = c.memory.head
        c.engine.ingest_many(notes[400:])
        c.engine.remove([f"n{i}" for i in range(0, 600, 7)])
        queries = [
            Query(text=f"{a} {b}", k=k, strategy=strategy, time_range=window)
            for a, b in [("budget", "plan"), ("gym", "tea"), ("launch", "code")]
            for k in (1, 5, 20)
            for strategy in ("semantic", "hybrid")
            for window in (None, TimeRange(start=100.0, end=160.0), TimeRange(start=5.0, end=9.0))
        ]

        def answers() -> list[list[tuple[str, str]]]:
            return [
                [(h.note.id, h.score.hex()) for h in view.ask(q).hits]
                for view in (c.engine, c.engine.at(middle))
                for q in queries
            ]

        got = answers()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(scoring, "kernels", None)
            assert answers() == got
        assert any(got)


@pytest.mark.parametrize(
    ("argument", "bad", "message"),
    [
        ("vecs", np.eye(5), "vecs must be a C-contiguous 2-D float32"),
        ("alive", np.ones(5, dtype=np.int8), "alive must be a C-contiguous 1-D bool"),
        ("born", np.zeros(5, dtype=np.int32), "born must be a C-contiguous 1-D int64"),
    ],
)
def test_slice_top_refuses_an_array_of_another_type(
    compiled: object, argument: str, bad: np.ndarray, message: str
) -> None:
    """An argument of another dtype raises ValueError naming it, before anything is read."""
    assert scoring.kernels is not None
    vecs = unit_rows(np.eye(5))
    args: dict[str, object] = {
        "vecs": vecs, "alive": None, "born": None, "died": np.full(5, 9, dtype=np.int64)
    }
    if argument != "born":
        args["died"] = None
    args[argument] = bad
    approx = np.zeros(3, dtype=np.float32)
    with pytest.raises(ValueError, match=message):
        scoring.kernels.slice_top(
            args["vecs"], vecs[0], approx, 0, 1, 1e-6, args["alive"], args["born"], args["died"], 3, -1
        )
