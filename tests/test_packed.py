"""Packed ids (coniti/packed.py) and the restored indexes that keep them packed: a restored keyword
index, structure rows and content index answer and accept writes as a fresh one does, without
decoding every id, and unpack past the lookup budget with the same answers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti import ContinuityEngine, Note, Query
from coniti.derived import pack_strings
from coniti.embedding import LocalHashEmbedder
from coniti.impl.log import LogBackend
from coniti.keyword import KeywordIndex
from coniti.packed import IdColumn, PackedStrings
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure, SegmentTreeStructure, Structure

IDS = st.text(alphabet=st.sampled_from("ab\u00e9\u82cf\udcff-0"), max_size=10)
"""Short ids over a small alphabet (repeats, shared prefixes and suffixes, non-ASCII, a lone
surrogate), so that finds meet equal keys and near misses."""


# -- PackedStrings and IdColumn ------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(st.lists(IDS, min_size=1, max_size=30).flatmap(
    lambda values: st.tuples(st.just(values), st.lists(st.integers(0, len(values) - 1), max_size=12))
))
def test_take_gives_the_strings_of_the_rows_in_their_order(case: tuple[list[str], list[int]]) -> None:
    """take(rows) is [column[row] for row in rows] (repeats, row 0, non-ASCII and surrogates too)."""
    values, rows = case
    column = PackedStrings(*pack_strings(values))
    assert column.take(np.asarray(rows, dtype=np.int64)) == [values[r] for r in rows]


@settings(max_examples=150, deadline=None)
@given(st.lists(IDS, max_size=30), IDS)
def test_find_gives_every_index_holding_the_string(values: list[str], other: str) -> None:
    """find(s) is the ascending list of indexes i with values[i] == s, for strings in the column
    and not in it; getitem and tolist give the strings back."""
    column = PackedStrings(*pack_strings(values))
    for probe in {*values, other}:
        assert column.find(probe).tolist() == [i for i, v in enumerate(values) if v == probe]
    assert [column[i] for i in range(len(values))] == values == column.tolist()


@settings(max_examples=150, deadline=None)
@given(st.lists(IDS, max_size=30), st.lists(IDS, max_size=10), st.lists(IDS, max_size=5))
def test_find_each_gives_what_find_gives_for_each(values: list[str], others: list[str], tail: list[str]) -> None:
    """find_each(probes) is [find(p) for p in probes] as lists, on a column and on an id column
    with rows appended to it (repeats and strings not there among the probes)."""
    column = PackedStrings(*pack_strings(values))
    probes = [*values, *others, *values[:3]]
    assert column.find_each(probes) == [column.find(p).tolist() for p in probes]
    ids = IdColumn(PackedStrings(*pack_strings(values)))
    ids.extend(tail)
    assert ids.find_each(probes + tail) == [ids.find(p).tolist() for p in probes + tail]


def test_find_each_tells_apart_strings_that_share_their_key() -> None:
    """Strings of one length with the same first and last 8 bytes (one key) are told apart by
    their bytes."""
    values = ["abcdefgh1ijklmnop", "abcdefgh2ijklmnop", "abcdefgh1ijklmnop", "short"]
    column = PackedStrings(*pack_strings(values))
    probes = ["abcdefgh2ijklmnop", "abcdefgh1ijklmnop", "abcdefgh3ijklmnop", "short", "shorts"]
    assert column.find_each(probes) == [[1], [0, 2], [], [3], []]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="xy", min_size=9, max_size=9), min_size=1, max_size=40))
def test_find_over_strings_of_one_length(values: list[str]) -> None:
    """A column of equal-length strings (the keys are read as columns, not gathered) finds the
    same indexes as a scan, also for strings that share their first and last 8 bytes."""
    column = PackedStrings(*pack_strings(values))
    for probe in {*values, "x" * 9, "xyxyxyxyx"}:
        assert column.find(probe).tolist() == [i for i, v in enumerate(values) if v == probe]


def test_arrays_that_do_not_fit_are_refused() -> None:
    """Ends past the bytes, or out of order, raise ValueError."""
    raw, ends = pack_strings(["ab", "cd"])
    with pytest.raises(ValueError):
        PackedStrings(raw, ends + 1)
    with pytest.raises(ValueError):
        PackedStrings(raw, ends[::-1].copy())


@settings(max_examples=80, deadline=None)
@given(st.lists(IDS, max_size=30), IDS)
def test_a_column_given_its_sort_index_finds_as_one_that_sorts(values: list[str], other: str) -> None:
    """A column made with the sort_index of an equal column (kept from a snapshot) finds the
    same indexes, and gives that index back as its own."""
    made = PackedStrings(*pack_strings(values))
    order, keys = made.sort_index()
    given_one = PackedStrings(*pack_strings(values), (order.copy(), keys.copy()))
    for probe in {*values, other}:
        assert given_one.find(probe).tolist() == made.find(probe).tolist()
    assert [a.tolist() for a in given_one.sort_index()] == [order.tolist(), keys.tolist()]


def test_a_sort_index_that_does_not_fit_is_refused() -> None:
    """A sort index of another length or dtype, an order out of range or keys out of order raise
    ValueError."""
    raw, ends = pack_strings(["ab", "cd", "ef"])
    order, keys = PackedStrings(raw, ends).sort_index()
    for bad in (
        (order[:2], keys[:2]),
        (order.astype(np.int32), keys),
        (order + 1, keys),
        (order, keys[::-1].copy()),
    ):
        with pytest.raises(ValueError):
            PackedStrings(raw, ends, bad)


@settings(max_examples=40, deadline=None)
@given(st.lists(IDS, max_size=12), st.lists(IDS, max_size=8))
def test_pack_indexed_gives_the_sort_index_of_the_packed_ids(base: list[str], appended: list[str]) -> None:
    """pack_indexed() is pack() plus the sort index a column of the packed ids makes, with or
    without rows appended to a packed base, and unpacked."""
    column = IdColumn(PackedStrings(*pack_strings(base)))
    for id_ in appended:
        column.append(id_)
    for _ in range(2):
        raw, ends, order, keys = column.pack_indexed()
        assert [raw.tobytes(), ends.tolist()] == [a.tobytes() if i == 0 else a.tolist() for i, a in enumerate(column.pack())]
        fresh_order, fresh_keys = PackedStrings(raw, ends).sort_index()
        assert keys.tolist() == fresh_keys.tolist() and sorted(order.tolist()) == list(range(len(ends)))
        column.unpack()


@settings(max_examples=80, deadline=None)
@given(st.lists(IDS, max_size=12), st.lists(IDS, max_size=8))
def test_an_id_column_grows_like_a_list(base: list[str], appended: list[str]) -> None:
    """A column over packed ``base`` with ``appended`` added behaves as the list of both (len,
    index, find, pack), stays packed until unpack, and unpacks in place for every holder."""
    column = IdColumn(PackedStrings(*pack_strings(base)))
    holder = column
    for id_ in appended:
        column.append(id_)
    ids = base + appended
    assert column.packed and len(column) == len(ids)
    assert [column[i] for i in range(len(ids))] == ids
    for probe in set(ids):
        assert column.find(probe).tolist() == [i for i, v in enumerate(ids) if v == probe]
    raw, ends = column.pack()
    assert (raw.tobytes(), ends.tolist()) == (pack_strings(ids)[0].tobytes(), pack_strings(ids)[1].tolist())
    assert column.unpack() == ids and not holder.packed and list(holder) == ids


# -- the keyword index ---------------------------------------------------------------------------

WORDS = ["apple", "banana", "cherry", "date", "elder", "fig"]


def _index(n: int) -> KeywordIndex:
    index = KeywordIndex()
    texts = [f"{WORDS[i % 6]} {WORDS[(i * 5) % 6]} note {i}" for i in range(n)]
    index.add([f"n{i}" for i in range(n)], texts, [float(i) for i in range(n)], list(range(1, n + 1)))
    index.remove(["n1"], died=n + 1)
    index.seq = n + 1
    return index


WRITES = st.lists(
    st.tuples(st.sampled_from(["add", "remove", "retract", "purge", "readd"]), st.integers(0, 30)),
    max_size=8,
)


def _apply(index: KeywordIndex, writes: list[tuple[str, int]], seq: int) -> None:
    for step, (kind, i) in enumerate(writes, start=seq + 1):
        id_ = f"n{i}"
        if kind == "add" and id_ not in index:
            index.add([f"new{i}-{step}"], [f"{WORDS[i % 6]} fresh"], [float(i)], [step])
        elif kind == "remove":
            index.remove([id_], died=step)
        elif kind == "retract":
            index.retract([id_])
        elif kind == "purge":
            index.purge([id_])
        elif kind == "readd" and id_ not in index:
            index.add([id_], [f"{WORDS[(i + 1) % 6]} again"], [float(i)], [step])


def _observed(index: KeywordIndex, seq: int) -> tuple[object, ...]:
    ids = [f"n{i}" for i in range(32)] + ["absent"]
    return (
        [index.search(q, k=6, as_of=a) for q in ("apple note", "fresh again", "fig") for a in (None, 3, seq)],
        index.score("apple banana fresh", ids),
        [(i in index, index.timestamp(i) if i in index else None) for i in ids],
        len(index), index.rows, index.rows_state(),
    )  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(WRITES)
def test_a_restored_index_answers_and_accepts_writes_as_the_original_without_unpacking(
    writes: list[tuple[str, int]],
) -> None:
    """from_state(state()) then the same writes (add, remove, retract, purge, a re-add) gives the
    same searches, scores, membership, timestamps and rows as the original, and the same state;
    the restored ids stay packed throughout."""
    original = _index(30)
    restored = KeywordIndex.from_state(original.state())
    assert restored.packed and not original.packed
    _apply(original, writes, 31)
    _apply(restored, writes, 31)
    assert _observed(restored, 33) == _observed(original, 33)
    assert restored.packed
    mine, theirs = restored.state(), original.state()
    assert mine.keys() == theirs.keys()
    assert all(np.array_equal(np.asarray(mine[k]), np.asarray(theirs[k])) for k in mine)


@settings(max_examples=30, deadline=None)
@given(WRITES)
def test_a_restored_index_asked_before_writes_sees_them(writes: list[tuple[str, int]]) -> None:
    """Asks on a restored index before writes (its packed postings then keep the terms they looked
    up) and the same writes after: the searches, scores and state equal the original's."""
    original = _index(30)
    restored = KeywordIndex.from_state(original.state())
    assert _observed(restored, 31) == _observed(original, 31)
    _apply(original, writes, 31)
    _apply(restored, writes, 31)
    assert _observed(restored, 33) == _observed(original, 33)


def test_packed_postings_answer_the_same_asked_again_and_past_what_they_keep() -> None:
    """A packed posting's rows and frequencies, or None for a term it lacks, are the same asked
    once, asked again, and asked after more than FOUND_KEPT other terms."""
    from coniti import packed

    index = KeywordIndex.from_state(_index(30).state())
    postings = index._packed
    assert postings is not None
    terms = [*WORDS, "note", "absent", "n7"]
    first = {t: postings.get(t) for t in terms}
    assert first["absent"] is None and first["note"] is not None
    for i in range(packed.FOUND_KEPT + 1):
        postings.get(f"other{i}")
    for when in ("after many", "again"):
        for t in terms:
            got, want = postings.get(t), first[t]
            assert (got is None) == (want is None), (when, t)
            if got is not None and want is not None:
                assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_a_restored_index_unpacks_past_the_lookup_budget_with_the_same_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More lookups than LOOKUP_BUDGET (or a write of more ids than it) unpack the ids once; the
    answers are those of the original."""
    monkeypatch.setattr("coniti.keyword.LOOKUP_BUDGET", 4)
    original = _index(30)
    restored = KeywordIndex.from_state(original.state())
    assert [f"n{i}" in restored for i in range(4)] == [True, False, True, True] and restored.packed
    assert "n4" in restored and not restored.packed
    batch = KeywordIndex.from_state(original.state())
    ids = [f"b{i}" for i in range(5)]
    for index in (batch, original):
        index.add(ids, ["fig"] * 5, [1.0] * 5, [40] * 5)
    assert not batch.packed and _observed(batch, 40) == _observed(original, 40)


def test_an_as_of_view_of_a_restored_index_answers_as_one_of_the_original() -> None:
    """at(seq) over a restored index (ids still packed) gives the view of the original."""
    original = _index(30)
    restored = KeywordIndex.from_state(original.state())
    for seq in (2, 15, 31):
        mine, theirs = restored.at(seq), original.at(seq)
        assert _observed(mine, seq) == _observed(theirs, seq)


# -- structure rows ------------------------------------------------------------------------------

DIM = 8


def _rows(n: int, seed: int) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    return [f"r{i}" for i in range(n)], vectors, np.arange(n, dtype=np.float64), np.arange(1, n + 1)


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only copy, as a snapshot's memory-mapped arrays are."""
    out = np.array(array)
    out.flags.writeable = False
    return out


def _structure_answers(s: Structure, probe: np.ndarray) -> tuple[object, ...]:
    ids = [f"r{i}" for i in range(42)] + ["absent"]
    return (
        s.search(probe, k=5), s.search(probe, k=5, as_of=20), s.search(None, k=3),
        s.search(probe, k=4, anchor_id="r7") if "r7" in s else None,
        [(i in s) for i in ids], len(s),
    )  # fmt: skip


@pytest.mark.parametrize("make", [FlatStructure, lambda: SegmentTreeStructure(leaf_size=4)])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["add", "remove", "purge"]), st.integers(0, 40)), max_size=6))
def test_restored_rows_answer_and_accept_writes_as_the_original_without_unpacking(
    make: object, writes: list[tuple[str, int]],
) -> None:
    """A structure restored from derived_state() then given the same adds, removals and purges
    answers every search and membership as the original, and its main rows' ids stay packed."""
    assert callable(make)
    original, restored = make(), make()
    ids, vectors, times, born = _rows(40, 3)
    original.add(ids, vectors, times, born=born)
    original.remove(["r3"], seq=41)
    restored.restore_derived_state({k: _read_only(v) for k, v in original.derived_state().items()})
    rng = np.random.default_rng(9)
    for step, (kind, i) in enumerate(writes, start=42):
        id_, vector = f"r{i}", rng.standard_normal((1, DIM)).astype(np.float32)
        for s in (original, restored):
            if kind == "add" and id_ not in s:
                s.add([id_], vector, np.array([float(i)]), born=np.array([step]))
            elif kind == "remove" and id_ in s:
                s.remove([id_], seq=step)
            elif kind == "purge":
                s.purge([id_])
    probe = np.random.default_rng(1).standard_normal(DIM).astype(np.float32)
    assert _structure_answers(restored, probe) == _structure_answers(original, probe)
    assert restored._rows.packed  # type: ignore[attr-defined]


@pytest.mark.parametrize("make", [FlatStructure, lambda: SegmentTreeStructure(leaf_size=4)])
def test_restored_rows_look_ids_up_without_sorting_them(make: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """derived_state() carries the ids' sort index: a structure restored from it finds, ends and
    replaces rows by id without sorting its packed ids, with the original's answers."""
    assert callable(make)
    original, restored = make(), make()
    ids, vectors, times, born = _rows(40, 3)
    original.add(ids, vectors, times, born=born)
    state = {k: _read_only(v) for k, v in original.derived_state().items()}
    monkeypatch.setattr("coniti.packed.np.argsort", lambda *_a, **_k: pytest.fail("the ids were sorted"))
    restored.restore_derived_state(state)
    for s in (original, restored):
        s.remove(["r3", "r17", "r5"], seq=41)
        s.add(["r5"], vectors[:1], np.array([45.0]), born=np.array([42]))
    monkeypatch.undo()
    probe = np.random.default_rng(1).standard_normal(DIM).astype(np.float32)
    assert _structure_answers(restored, probe) == _structure_answers(original, probe)


# -- the engine on a restored store -------------------------------------------------------------

EMBEDDER = LocalHashEmbedder(dim=32)


def _engine(store: LogBackend) -> ContinuityEngine:
    return ContinuityEngine(store, EMBEDDER, [FlatStructure()], DefaultStrategy())


def _notes(n: int) -> list[Note]:
    return [
        Note(id=f"n{i}", text=f"{WORDS[i % 6]} {WORDS[(i * 5) % 6]} entry {i}", timestamp=float(i))
        for i in range(n)
    ]


def test_an_add_and_an_ask_on_a_restored_store_leave_its_ids_packed(tmp_path: Path) -> None:
    """On a store with a snapshot and events after it (a delete, a replacement), an engine
    admits and refuses notes as a fresh build does and answers the same, while the namespace's
    keyword ids, structure rows and content index stay packed."""
    with LogBackend(tmp_path / "store") as store:
        writer = _engine(store)
        writer.ingest_many(_notes(50))
        assert writer.persist() == 1
        writer.remove(["n3"])
        writer.upsert(Note(id="n4", text="a replaced entry", timestamp=4.0))
        late = [
            Note(id="x1", text="apple apple entry 0", timestamp=0.0),  # n0's text and time: a duplicate
            Note(id="x2", text="a replaced entry", timestamp=4.0),  # the replacement's duplicate
            Note(id="x3", text="fig entry 3", timestamp=3.0),
            Note(id="n3", text="back again", timestamp=3.0),  # deleted, so free again
        ]
        restored = _engine(store)
        fresh = ContinuityEngine(store.at(store.head), EMBEDDER, [FlatStructure()], DefaultStrategy(), read_only=True)
        fresh_answers = [
            (h.note.id, h.score) for h in fresh.ask(Query(text="apple entry", k=5)).hits
        ]
        assert [(h.note.id, h.score) for h in restored.ask(Query(text="apple entry", k=5)).hits] == fresh_answers
        decisions = [(r.admitted, r.reason) for r in (restored.ingest(n) for n in late)]
        assert decisions == [
            (False, "duplicate of stored note 'n0'"), (False, "duplicate of stored note 'n4'"),
            (True, None), (True, None),
        ]  # fmt: skip
        space = restored._indexes.get(())
        assert space.content.packed is not None and space.keyword.packed
        assert space.structures[0]._rows.packed  # type: ignore[attr-defined]
        assert restored.verify().ok


@settings(max_examples=150, deadline=None)
@given(st.sets(IDS, max_size=30), st.lists(IDS, max_size=10))
def test_bisect_finds_each_string_of_a_sorted_column_and_nothing_else(values: set[str], probes: list[str]) -> None:
    """In a column of distinct strings in ascending order of their UTF-8 bytes, bisect(x) is x's
    index, and None for a string not in it (non-ASCII, surrogates and prefixes of members too)."""
    ordered = sorted(values, key=lambda v: v.encode("utf-8", "surrogatepass"))
    column = PackedStrings(*pack_strings(ordered))
    for i, value in enumerate(ordered):
        assert column.bisect(value) == i
    for probe in [*probes, *(v[:-1] for v in ordered), *(v + "a" for v in ordered)]:
        assert column.bisect(probe) == (ordered.index(probe) if probe in values else None)
