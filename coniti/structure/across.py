"""Rows of several namespaces' sorted row stores scored as one: :func:`top_across` gives the
candidates of an exact top ``k`` over all of them in one pass (one array of fast scores, one
``k``-th best), for the engine's asks over a prefix (:mod:`coniti.engine.across`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from coniti.structure import scoring
from coniti.structure.pool import NEG_INF, float32_at_most, kth_largest
from coniti.structure.rows import SortedRows
from coniti.structure.scoring import exact_scores, fast_scores


def top_across(
    stores: Sequence[SortedRows], query: np.ndarray, k: int, start: float, end: float
) -> list[tuple[int, str, float, float]] | None:
    """Every live row of ``stores`` with ``start <= t < end`` that can be among the exact top ``k``
    of all of them scored as one (``query``: a unit float32 vector of their dimension), as ``(store,
    id, score, time)``, unordered: ``store`` its position in ``stores``, ``score`` its exact score.

    One pass: every store's rows in range (main rows and buffered ones) get their fast score into one
    array, the ``k``-th best of it is taken once, and the candidates are the rows within ``2 * eps``
    of it (:func:`~coniti.structure.scoring.select_candidates`' rule), scored exactly. They hold
    every row whose exact score reaches the ``k``-th best exact score, ties included, so the first
    ``k`` of them by (score desc, time desc, id asc) are the first ``k`` of the stores' own exact
    searches merged by that order. None when a fast score is NaN (the caller searches each store)."""
    spans: list[tuple[int, bool, Any, int]] = []  # (store, main rows?, lo or buffer rows, count)
    total = 0
    for i, rows in enumerate(stores):
        lo, hi = rows.interval(start, end)
        if hi > lo:
            spans.append((i, True, lo, hi - lo))
            total += hi - lo
        if rows.buffer.n:
            at = rows.buffer.in_range(start, end, None)
            if at.shape[0]:
                spans.append((i, False, at, at.shape[0]))
                total += at.shape[0]
    if not total:
        return []
    approx = np.empty(total, dtype=np.float32)
    starts = []
    offset = 0
    for i, main, at, m in spans:
        rows, out = stores[i], approx[offset : offset + m]
        starts.append(offset)
        if main:
            rows.check_rows(at, at + m)
            fast_scores(rows.vecs[at : at + m], query, out)
            mask = rows.visible(at, at + m, None)
            if mask is not None:
                out[~mask] = NEG_INF
        else:
            fast_scores(rows.buffer.vecs[at], query, out)
        offset += m
    if np.isnan(approx).any():
        return None
    kth = kth_largest(approx, k) if total > k else NEG_INF
    if kth > NEG_INF:
        chosen = approx >= float32_at_most(float(kth) - 2.0 * scoring.error_bound(query.shape[0]))
    else:
        chosen = approx > NEG_INF
    picks = chosen.nonzero()[0]
    where = np.searchsorted(np.asarray(starts), picks, "right") - 1
    vectors: list[np.ndarray] = []
    found: list[tuple[int, str, float]] = []
    for p, s in zip(picks.tolist(), where.tolist(), strict=True):
        i, main, at, _ = spans[s]
        rows = stores[i]
        if main:
            row = at + p - starts[s]
            vectors.append(rows.vecs[row])
            found.append((i, rows.id_at(row), float(rows.times[row])))
        else:
            row = int(at[p - starts[s]])
            vectors.append(rows.buffer.vecs[row])
            found.append((i, rows.buffer.ids[row], float(rows.buffer.times[row])))
    if not found:
        return []
    scores = exact_scores(np.stack(vectors), query, unit=True)
    return [(i, id_, score, when) for (i, id_, when), score in zip(found, scores, strict=True)]
