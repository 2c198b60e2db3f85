"""KeywordIndex.at(seq): a view finds the row of an id as of its seq without indexing every row,
and stays right while the index it shares rows with keeps changing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coniti.keyword import KeywordIndex

TEXTS = ["budget plan", "lunch with ana", "budget review", "gym", "plan the trip"]


def replay(steps: list[tuple[str, int, int]], until: int | None = None) -> KeywordIndex:
    """An index of ``steps`` (kind, id number, text number) at seqs 1, 2, ... (up to ``until``)."""
    index = KeywordIndex()
    for seq, (kind, i, t) in enumerate(steps, 1):
        if until is not None and seq > until:
            break
        id_ = f"n{i}"
        if kind == "put":
            index.remove([id_], died=seq)
            index.add([id_], [TEXTS[t]], [float(seq)], born=seq)
        elif kind == "remove":
            index.remove([id_], died=seq)
        else:  # an erasure of every version
            index.purge([id_])
    return index


def facts(index: KeywordIndex, ids: list[str]) -> tuple[dict[str, float], dict[str, float], int]:
    present = [i for i in ids if i in index]
    return index.score("budget plan", ids), {i: index.timestamp(i) for i in present}, len(index)


history = st.lists(
    st.tuples(st.sampled_from(["put", "put", "remove", "erase"]), st.integers(0, 5), st.integers(0, 4)),
    min_size=1,
    max_size=20,
)


@settings(max_examples=60, deadline=None)
@given(steps=history, data=st.data())
def test_a_view_made_before_later_writes_answers_as_the_index_as_of_its_seq(
    steps: list[tuple[str, int, int]], data: st.DataObject
) -> None:
    """A view at seq, made and read while the index goes on (puts, removes), answers score,
    timestamp, membership and len as an index holding only the events up to seq; an erasure
    after the view hides the id in it too."""
    seq = data.draw(st.integers(0, len(steps)))
    check_view_under_later_writes(replay(steps[:seq]), seq, steps, data)


@settings(max_examples=60, deadline=None)
@given(steps=history, data=st.data())
def test_a_view_of_a_restored_index_with_packed_ids_follows_later_writes(
    steps: list[tuple[str, int, int]], data: st.DataObject
) -> None:
    """The same for an index restored from its state (ids still packed when the view is made):
    the view finds live rows through the index, so the writes after it are seen as they are."""
    seq = data.draw(st.integers(0, len(steps)))
    index = KeywordIndex.from_state(replay(steps[:seq]).state())
    assert index.packed
    check_view_under_later_writes(index, seq, steps, data)


def check_view_under_later_writes(
    index: KeywordIndex, seq: int, steps: list[tuple[str, int, int]], data: st.DataObject
) -> None:
    """``index`` holds ``steps[:seq]``: a view at seq answers as a replay up to seq while the rest
    of the steps but erasures are written to ``index``, and an erasure after it hides the id."""
    ids = [f"n{i}" for i in range(6)]
    view = index.at(seq)
    assert facts(view, ids) == facts(replay(steps, seq), ids)
    later = [s for s in steps[seq:] if s[0] != "erase"]
    for offset, (kind, i, t) in enumerate(later, seq + 1):  # writes after the view was made
        if kind == "put":
            index.remove([f"n{i}"], died=offset)
            index.add([f"n{i}"], [TEXTS[t]], [float(offset)], born=offset)
        else:
            index.remove([f"n{i}"], died=offset)
        assert facts(view, ids) == facts(replay(steps, seq), ids)
    gone = data.draw(st.sampled_from(ids))
    index.purge([gone])
    assert gone not in view and gone not in view.score("budget plan", ids)


def test_a_view_made_after_a_current_search_masks_as_of_its_seq() -> None:
    """A view made after the index answered a current search (its visible rows kept) scores with
    the rows of its seq, not the current ones; and the index sees a removal made after it."""
    index = KeywordIndex()
    index.add(["a"], ["budget plan"], [1.0], born=1)
    index.add(["b"], ["budget"], [2.0], born=2)
    assert {h.id for h in index.search("budget", k=5)} == {"a", "b"}
    view = index.at(1)
    assert {h.id for h in view.search("budget", k=5)} == {"a"}
    assert view.corpus("budget").n == 1
    index.remove(["a"], died=3)
    assert {h.id for h in index.search("budget", k=5)} == {"b"}
    assert index.corpus("budget").n == 1
