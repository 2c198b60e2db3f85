"""Structures: (id, vector, timestamp) organised over time, searched by cosine similarity or by time.

A :class:`Structure` is derived data: the engine fills it from memory and can always rebuild it. Every
structure answers :meth:`Structure.search` with exactly the same hits, in the same order:

* with a ``vector``: the ``k`` stored vectors most similar to it by cosine similarity;
* with an ``anchor_id`` and a ``vector``: most similar to the sum of the unit query vector and the
  anchor's unit vector (recall around that note, steered by the text);
* with an ``anchor_id`` and no vector: the ``k`` notes closest in time to the anchor, score
  ``-|t - t_anchor|`` (seconds);
* with neither: the ``k`` most recent notes, score ``0.0``.

Only notes with ``time_range.start <= t < time_range.end`` are hits (``None`` = unbounded); the anchor
itself never is. Hits are ordered by score (descending), then timestamp (descending, so newer first),
then id (ascending): a total order, so ties are broken identically everywhere.

Scores are exact and reproducible. Stored vectors and the query are scaled to unit length in float64
and kept as float32 (an all-zero vector stays zero and scores 0). The score of a stored vector ``v`` for
the query ``q`` is the correctly rounded float64 sum of the exact products ``q[i] * v[i]``
(:func:`math.fsum`), whatever the batch or the order in which rows are visited. Fast float32
products only choose candidates: a candidate set always includes every row whose fast score is within
twice the proven float32 error bound of the k-th best fast score, so the exact top k is never missed.

Built-ins, registered by name in :data:`STRUCTURES`:

``flat``
    Contiguous numpy arrays kept sorted by time (:class:`~coniti.structure.rows.SortedRows`). A time
    range is a slice found by binary search, scored with one matrix-vector product: O(rows in range).
``segment_tree``
    Rows sorted by time under a segment tree over blocks of ``leaf_size`` rows; each node stores the
    centroid of its rows and a radius bounding their distance to it, so ``q . c + r`` bounds every score
    inside. A time range becomes a row interval by binary search; a short interval is scored directly;
    a long one is covered by O(log n) nodes searched best-first, and nodes whose bound cannot reach
    the current k-th score are skipped. New rows go to a small unsorted buffer, merged into the tree
    when it outgrows ``buffer_fraction`` of the tree (amortised O(log n) per row); removed rows are
    masked and compacted away when they reach half the tree.

Bad input to :meth:`Structure.add` or :meth:`Structure.search` raises
:class:`~coniti.errors.ContractError` naming the id or the field; a call that raises changes nothing.
Structures are not thread-safe: the engine serialises access to them.

Modules: :mod:`~coniti.structure.base` (the :class:`Structure` base class and :data:`STRUCTURES`),
:mod:`~coniti.structure.scoring` (unit rows, candidate selection, exact scores, the order of hits),
:mod:`~coniti.structure.rows` (the time-sorted row store and candidate pool),
:mod:`~coniti.structure.flat`, :mod:`~coniti.structure.segment_tree` and
:mod:`~coniti.structure.ann` (the built-ins).
"""

from coniti.structure.ann import AnnStructure
from coniti.structure.base import STRUCTURES, Structure
from coniti.structure.flat import FlatStructure
from coniti.structure.scoring import StructureHit, unit_rows
from coniti.structure.segment_tree import SegmentTreeStructure

__all__ = [
    "STRUCTURES",
    "AnnStructure",
    "FlatStructure",
    "SegmentTreeStructure",
    "Structure",
    "StructureHit",
    "unit_rows",
]

STRUCTURES.register(FlatStructure.name, FlatStructure)
STRUCTURES.register(SegmentTreeStructure.name, SegmentTreeStructure)
STRUCTURES.register(AnnStructure.name, AnnStructure)
