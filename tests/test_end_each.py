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
