"""A batch of deletes (one event each) ended in one call (``Structure.end_each``, the keyword
index's ``remove`` with a seq per id) leaves the rows exactly as one ``remove([id], seq)`` a pair."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from coniti.keyword import KeywordIndex
from coniti.structure import FlatStructure, SegmentTreeStructure, Structure

IDS = [f"n{i:02d}" for i in range(12)]
# main rows and (added out of time order) buffered rows, an unknown id and a repeat
ENDED = ["n01", "n10", "nope", "n05", "n11", "n01", "n00"]
SEQS = [20, 21, 22, 23, 24, 25, 26]


def _ann() -> Structure:
    pytest.importorskip("usearch")
    from coniti.structure.ann import AnnStructure

    return AnnStructure(exact_rows=4)


MAKERS = {
    "flat": lambda: FlatStructure(buffer_min=2, buffer_fraction=0.25),
    "segment_tree": lambda: SegmentTreeStructure(leaf_size=2, direct_rows=3, buffer_min=4, buffer_fraction=0.25),
    "ann": _ann,
}


def _filled(kind: str) -> Structure:
    s: Structure = MAKERS[kind]()
    vectors = np.random.default_rng(0).normal(size=(len(IDS), 4))
    s.add(IDS[:9], vectors[:9], [float(i) for i in range(9)], born=list(range(1, 10)))
    s.add(IDS[9:], vectors[9:], [0.5, 1.5, 2.5], born=[10, 11, 12])  # out of order: buffered
    return s


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], np.ndarray):
            assert np.array_equal(a[key], b[key]), key
        else:
            assert a[key] == b[key], key


@pytest.mark.parametrize("kind", list(MAKERS))
def test_end_each_equals_one_remove_a_pair(kind: str) -> None:
    """Same count, same rows (state), same searches now and as of each event in between."""
    one, each = _filled(kind), _filled(kind)
    counted = sum(one.remove([id_], seq=seq) for id_, seq in zip(ENDED, SEQS, strict=True))
    assert each.end_each(ENDED, SEQS) == counted == 5
    _same(one.derived_state(), each.derived_state())
    query = np.ones(4)
    for as_of in [None, 12, 20, 21, 23, 26]:
        assert one.search(query, k=12, as_of=as_of) == each.search(query, k=12, as_of=as_of)


def test_keyword_remove_with_a_seq_each_equals_one_remove_a_pair() -> None:
    """The keyword index ends the same rows at the same seqs: same count, same state."""
    one, each = KeywordIndex(), KeywordIndex()
    for index in (one, each):
        index.add(IDS, [f"word{i % 3} note" for i in range(len(IDS))], [float(i) for i in range(len(IDS))], born=1)
    counted = sum(one.remove([id_], died=seq) for id_, seq in zip(ENDED, SEQS, strict=True))
    assert each.remove(ENDED, died=SEQS) == counted == 5
    _same(one.state(), each.state())


@pytest.mark.parametrize("kind", ["flat", "segment_tree"])
def test_end_each_on_restored_rows_ends_them_as_the_original_with_the_ids_kept_packed(kind: str) -> None:
    """Rows restored from a state (their ids packed, looked up in one search a batch) end the same
    rows at the same seqs as the original's, and the ids stay packed (the batch within budget)."""
    original = _filled(kind)
    original.buffer_min, original.buffer_fraction = 0, 0.0  # type: ignore[attr-defined]
    original.add(["n90"], np.ones((1, 4)), [99.0], born=[13])  # a merge: every row main
    restored: Structure = MAKERS[kind]()
    restored.restore_derived_state(original.derived_state())
    assert restored._rows.packed  # type: ignore[attr-defined]
    ended = ["n01", "n10", "n05", "n11", "n00", "n90"]
    seqs = [20, 21, 23, 24, 26, 27]
    assert restored.end_each(ended, seqs) == original.end_each(ended, seqs) == 6
    assert restored._rows.packed  # type: ignore[attr-defined]
    _same(original.derived_state(), restored.derived_state())


def test_keyword_remove_on_a_restored_index_ends_as_the_original_with_the_ids_kept_packed() -> None:
    """A restored keyword index (ids packed) ends the same rows at the same seqs as the original
    (an unknown id and a repeat among them), and its ids stay packed."""
    original = KeywordIndex()
    original.add(IDS, [f"word{i % 3} note" for i in range(len(IDS))], [float(i) for i in range(len(IDS))], born=1)
    original.remove(["n03"], died=5)
    original.add(["n03"], ["word1 again"], [3.0], born=6)  # n03: an ended row and a live one
    restored = KeywordIndex.from_state(original.state())
    assert restored.packed
    ended, seqs = [*ENDED, "n03"], [*SEQS, 27]
    assert restored.remove(ended, died=seqs) == original.remove(ended, died=seqs) == 6
    assert restored.packed
    _same(original.state(), restored.state())
