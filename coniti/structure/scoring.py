"""The scoring every structure shares: unit rows, fast float32 candidates, exact float64 scores, and
the total order of hits (score desc, time desc, id asc). See :mod:`coniti.structure` for the rules.

:func:`unit_rows` is also how :mod:`coniti.embedding` normalises its rows: one definition of "unit".

:data:`kernels` is the compiled module ``coniti.structure._kernels`` when the install built it (a C
compiler was at hand), else None: :func:`exact_scores` and
:meth:`~coniti.structure.rows.SortedRows.top_of_slice` then take their numpy twins, which give the
same results bit for bit.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, Protocol, cast

import numpy as np


class Kernels(Protocol):
    """What ``coniti.structure._kernels`` offers (its C source documents each function)."""

    def exact_scores(self, rows: np.ndarray, query: np.ndarray, /) -> tuple[list[float], list[int]]:
        """(scores, unsure): each row's canonical score but at the positions ``unsure``, which
        are left to :func:`math.fsum` (their score is 0.0)."""

    def slice_top(
        self, vecs: np.ndarray, query: np.ndarray, approx: np.ndarray, lo: int, k: int, eps: float,
        alive: np.ndarray | None, born: np.ndarray | None, died: np.ndarray | None, seq: int,
        skip: int, /,
    ) -> tuple[list[int], list[float], list[int]] | None:
        """(rows, scores, unsure) of the candidates among the shown rows of main rows ``[lo, lo +
        len(approx))`` (``SortedRows.top_of_slice``), or None when a fast score is NaN."""


def _load_kernels() -> Kernels | None:
    """``coniti.structure._kernels``, or None when it was not built."""
    try:
        return cast(Kernels, importlib.import_module("coniti.structure._kernels"))
    except ImportError:  # pragma: no cover - an install without a C compiler
        return None


kernels: Kernels | None = _load_kernels()
"""The compiled kernels (see the module docstring), or None: the numpy twins answer."""

__all__ = [
    "error_bound",
    "exact_scores",
    "fast_scores",
    "fsum_unsure",
    "hits",
    "Kernels",
    "kernels",
    "ranked",
    "select_candidates",
    "StructureHit",
    "top_by_key",
    "top_with_ties",
    "unit_rows",
    "unit_vector",
]


def _c_einsum() -> Callable[..., Any]:
    """``np.einsum`` without its Python-level dispatch: the function it calls (the same kernel, bit
    for bit), or ``np.einsum`` itself where numpy does not expose it."""
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):  # numpy 2, numpy 1
        try:
            found: Callable[..., Any] = importlib.import_module(module).c_einsum
        except (ImportError, AttributeError):  # pragma: no cover - other numpy layouts
            continue
        return found
    return np.einsum  # pragma: no cover


_einsum = _c_einsum()


class StructureHit(NamedTuple):
    """One search result: the stored id and its score (higher is better)."""

    id: str
    score: float

_UNIT_BLOCK = 8_192
"""Rows converted to float64 at a time by :func:`unit_rows` (bounds its temporaries)."""


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in float64, returned as a new C-contiguous float32 array.

    Works through ``_UNIT_BLOCK`` rows at a time (each row's result does not depend on the blocking),
    so a large float32 batch never has a full float64 copy."""
    rows = np.asarray(vectors)
    if rows.dtype not in (np.float32, np.float64):
        rows = rows.astype(np.float64)
    if rows.ndim == 2 and rows.shape[0] == 1:  # one query: the same arithmetic, fewer calls
        return unit_vector(rows[0] if rows.dtype == np.float64 else rows[0].astype(np.float64))[0][None]
    out = np.empty(rows.shape, dtype=np.float32)
    for a in range(0, rows.shape[0], _UNIT_BLOCK):
        block = np.asarray(rows[a : a + _UNIT_BLOCK], dtype=np.float64)  # float64 rows: no copy
        norms = np.sqrt(_einsum("ij,ij->i", block, block))
        safe = np.where(norms > 0.0, norms, 1.0)
        # divided in float64, each quotient rounded once to float32 (as unit_vector does)
        np.divide(block, safe[:, None], out=out[a : a + _UNIT_BLOCK], casting="same_kind")
    return out


def unit_vector(vector: np.ndarray) -> tuple[np.ndarray, float]:
    """One float64 vector scaled as :func:`unit_rows` scales a row (bit for bit), as a new float32
    array, and its squared norm: finite whenever every value is (it is NaN or infinite when a value
    is not, and infinite too when finite values overflow it)."""
    row = vector[None, :]
    squared = float(_einsum("ij,ij->i", row, row)[0])
    norm = math.sqrt(squared)
    one: np.ndarray = np.empty(vector.shape, dtype=np.float32)
    np.divide(vector, norm if norm > 0.0 else 1.0, out=one, casting="same_kind")  # float64, cast
    return one, squared


def error_bound(dim: int) -> float:
    """An upper bound on |float32 dot - exact dot| for two vectors of norm at most 1 + 1e-6."""
    u = dim * 2.0**-24
    return 1.01 * u / (1.0 - u) + 1e-9


def fast_scores(rows: np.ndarray, query: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """float32 ``rows @ query`` on the calling thread (into ``out``, float32 of ``len(rows)``, when
    given).

    ``np.einsum`` rather than BLAS: OpenBLAS threads any matrix-vector product above ~9,000 elements,
    and a threaded product stalls for milliseconds whenever the other cores are busy.
    """
    if out is not None:
        _einsum("ij,j->i", rows, query, out=out)
        return out
    scores: np.ndarray = _einsum("ij,j->i", rows, query)
    return scores


def exact_scores(rows: np.ndarray, query: np.ndarray, *, unit: bool = False) -> list[float]:
    """The canonical scores: correctly rounded sums of the exact float64 products, one per row
    (what :func:`math.fsum` of them gives, bit for bit).

    float32 rows and query (what the structures hold) take a vectorised path. A float32 product is
    exact in float64; scaled by ``2**50`` it splits exactly into an integer part ``high`` and a
    fraction (``|fraction| < 1``). When the row's ``sum |high|`` is below ``2**52`` (unit rows: at
    most ``2**50``) every partial sum of ``high`` is an integer below ``2**53``, so float64 adds
    them exactly, in any order: ``H``. The fractions' float64 sum ``F`` is off their exact sum by
    at most ``SLACK`` (``(dim - 1) * 2**-53`` per unit of ``sum |fraction| < dim``, doubled), so
    the exact total ``(H + fractions) * 2**-50`` lies within ``SLACK`` of ``H + F`` (whose rounding
    error ``e`` one two-sum gives exactly). When that interval holds no rounding boundary of
    ``x = fl(H + F)``, the correctly rounded total is ``x * 2**-50``. Where it may (a score within
    ~``2**-37 ulp`` of a midpoint: exact midpoints are common, the products having few bits), ``F``
    itself is exact when every fraction is a multiple of ``2**-m`` with ``dim * 2**m <= 2**53``
    (every partial sum is then an integer multiple of ``2**-m`` below ``2**53`` of them): the total
    is ``H + F`` exactly and ``x`` its correct (half-even) rounding. Rows left (zero or near-zero
    scores, products with bits below ``2**-m``, a larger ``sum |high|``) and other dtypes go through
    :func:`math.fsum`.

    ``unit``: the caller vouches that rows and query have norms whose product is below 4 (unit
    vectors, as the structures hold): ``sum |high| < 2**52`` then follows (Cauchy-Schwarz) and is
    not summed."""
    if rows.shape[0] == 0:
        return []
    c, dim = rows.shape
    if rows.dtype != np.float32 or query.dtype != np.float32 or not 0 < dim <= _EXACT_DIM:
        return _fsum_scores(rows, query)
    if kernels is not None:  # the same result, compiled (the kernel bounds its products itself)
        scores, left = kernels.exact_scores(np.ascontiguousarray(rows), np.ascontiguousarray(query))
        return fsum_unsure(scores, left, rows, query)
    parts = np.empty((2 if unit else 3, c, dim))  # high, the fraction (, |high|)
    high, fraction = parts[0], parts[1]
    np.copyto(fraction, rows)  # exact; cast first: a mixed-dtype product casts slower
    np.multiply(fraction, query * _SCALE, out=fraction)  # the products scaled by 2**50: exact
    np.trunc(fraction, out=high)
    fraction -= high  # exact
    # the sums in einsum's order (no BLAS: it may thread, and stall): H is exact in any order, and
    # SLACK bounds F's error in any order
    if unit:
        highs, fractions = _einsum("kij->ki", parts).tolist()
        sizes = [0.0] * c
    else:
        np.abs(high, out=parts[2])
        highs, fractions, sizes = _einsum("kij->ki", parts).tolist()
    slack = 2.0 * (dim - 1) * dim * 2.0**-53 / (1.0 - (dim - 1) * 2.0**-53)
    ulp = math.ulp
    out: list[float] = []
    unsure: list[int] = []
    for i, (h, f, size) in enumerate(zip(highs, fractions, sizes, strict=True)):
        x = h + f
        back = x - h
        e = (h - (x - back)) + (f - back)  # x + e == h + f exactly (two-sum)
        gap = ulp(x)  # to both neighbours of x, unless |x| is a power of two (then x == 2**52 * gap)
        out.append(x * _UNSCALE)  # exact scaling
        if not (abs(e) + slack < 0.5 * gap and size < 2.0**52 and abs(x) != 2.0**52 * gap):
            unsure.append(i)
    if unsure:
        exacts = _exact_fractions(fraction.take(unsure, axis=0), dim).tolist()
        for i, exact in zip(unsure, exacts, strict=True):
            if not (exact and sizes[i] < 2.0**52 and out[i] != 0.0):
                out[i] = _fsum_scores(rows[i : i + 1], query)[0]
    return out


def _exact_fractions(fractions: np.ndarray, dim: int) -> np.ndarray:
    """Per row of ``fractions`` (each in (-1, 1)): whether every one is a multiple of ``2**-m``
    for the largest ``m`` with ``dim * 2**m <= 2**53``, so that float64 adds them exactly in any
    order."""
    scaled = fractions * 2.0 ** (53 - (dim - 1).bit_length())  # exact: a power of two
    whole: np.ndarray = np.logical_and.reduce(scaled == np.trunc(scaled), axis=1)  # no .all wrapper
    return whole


_HIGH = 50
"""The scale of the integer part ``high`` in :func:`exact_scores` (unit rows: ``sum |high| <=
2**50``)."""

_SCALE = np.float64(2.0**_HIGH)
"""``2**50`` as a float64 scalar: a float32 array times it is float64."""

_UNSCALE = 2.0**-_HIGH
"""``2**-50``: scales a sum of ``high`` and fractions back (exactly)."""

_EXACT_DIM = 1 << 20
"""Dimensions the vectorised path of :func:`exact_scores` takes (beyond, the fractions' rounding
error would send most rows to fsum)."""


def _fsum_scores(rows: np.ndarray, query: np.ndarray) -> list[float]:
    products = rows.astype(np.float64) * query.astype(np.float64)
    return [math.fsum(row) for row in products.tolist()]


def fsum_unsure(
    scores: list[float], unsure: list[int], rows: np.ndarray, query: np.ndarray
) -> list[float]:
    """``scores`` from a compiled kernel, with each position ``i`` of ``unsure`` (a row the kernel
    left to :func:`math.fsum`) set to the fsum score of ``rows[i]``."""
    for i in unsure:
        scores[i] = _fsum_scores(rows[i : i + 1], query)[0]
    return scores


def select_candidates(approx: np.ndarray, k: int, eps: float) -> np.ndarray:
    """Positions whose fast score is within ``2 * eps`` of the k-th best (all when there are <= k)."""
    m = approx.shape[0]
    if m <= k:
        return np.arange(m)
    kth = np.partition(approx, m - k)[m - k]
    return np.flatnonzero(approx >= np.float64(kth) - 2.0 * eps)


def top_by_key(
    ids: Sequence[str], scores: Sequence[float], times: Sequence[float], k: int
) -> list[StructureHit]:
    """The ``k`` best by (score desc, time desc, id asc)."""
    keys = sorted(zip([-s for s in scores], [-t for t in times], ids, strict=True))[:k]
    return [_hit(StructureHit, (id_, -negative)) for negative, _, id_ in keys]


def ranked(scores: list[float], k: int) -> list[int] | None:
    """Positions of the ``k`` best ``scores``, best first, when no two scores are equal (the order
    :func:`top_by_key` gives, whatever the times and ids); None when two are (the key decides)."""
    if len(set(scores)) < len(scores):
        return None
    return sorted(range(len(scores)), key=scores.__getitem__, reverse=True)[:k]


def hits(ids: Sequence[str], scores: Sequence[float], order: Iterable[int]) -> list[StructureHit]:
    """``StructureHit(ids[i], scores[i])`` for each ``i`` of ``order``, in that order."""
    return [_hit(StructureHit, (ids[i], scores[i])) for i in order]


_hit = tuple.__new__
"""``_hit(StructureHit, (id, score))``: a hit without the Python-level ``__new__`` of a named tuple
(the caller passes exactly its two fields)."""


def top_with_ties(values: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest ``values`` plus every position tied with the k-th largest."""
    m = values.shape[0]
    if m <= k:
        return np.arange(m)
    kth = np.partition(values, m - k)[m - k]
    return np.flatnonzero(values >= kth)
