"""The default strategy: what it admits, what it refuses and why, and how it answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from coniti.actor import Note, Query, TimeRange
from coniti.embedding import LocalHashEmbedder
from coniti.errors import ContractError, UnknownPiece
from coniti.strategy import STRATEGIES, Admission, DefaultStrategy, StrategyContext
from coniti.structure import FlatStructure, SegmentTreeStructure, Structure

EMBEDDER = LocalHashEmbedder(dim=64)
ADMIT = Admission(True, None)


class Stored:
    """A namespace's stored notes as the engine would present them: structures plus a key index."""

    def __init__(self, strategy: DefaultStrategy, structure: Structure | None = None) -> None:
        self.strategy = strategy
        self.structure = structure or FlatStructure()
        self.keys: dict[str, list[str]] = {}

    def add(self, *notes: Note) -> None:
        vectors = EMBEDDER.embed([n.text for n in notes])
        self.structure.add([n.id for n in notes], vectors, [n.timestamp for n in notes])
        for note in notes:
            key = self.strategy.content_key(note)
            if key is not None:
                self.keys.setdefault(key, []).append(note.id)

    def context(self) -> StrategyContext:
        return StrategyContext(
            namespace=(),
            structures=(self.structure,),
            stored_with_key=lambda key: list(self.keys.get(key, [])),
            is_stored=self.structure.__contains__,
        )


def note(id_: str, text: str, t: float = 0.0, **metadata: object) -> Note:
    return Note(id=id_, text=text, timestamp=t, metadata=metadata)


def admit(strategy: DefaultStrategy, stored: Stored, *notes: Note) -> list[Admission]:
    return strategy.admit(notes, EMBEDDER.embed([n.text for n in notes]), stored.context())


def test_admits_new_notes_with_text() -> None:
    """A note with non-blank text and a new id is admitted without a reason."""
    s = DefaultStrategy()
    assert admit(s, Stored(s), note("a", "met Ana")) == [Admission(True, None)]


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_refuses_blank_text(text: str) -> None:
    """Blank text is refused with the reason 'blank text'."""
    s = DefaultStrategy()
    assert admit(s, Stored(s), note("a", text)) == [Admission(False, "blank text")]


def test_refuses_an_id_already_stored() -> None:
    """A note whose id is stored is refused, naming the id."""
    s = DefaultStrategy()
    stored = Stored(s)
    stored.add(note("a", "first"))
    [decision] = admit(s, stored, note("a", "second"))
    assert not decision.admitted and decision.reason == "id 'a' is already stored"


def test_refuses_exact_duplicate_of_stored_note() -> None:
    """Same text at the same timestamp as a stored note (other id) is refused naming that note."""
    s = DefaultStrategy()
    stored = Stored(s)
    stored.add(note("orig", "met Ana about the budget", 1.0, project="q3"))
    [decision] = admit(s, stored, note("copy", "met Ana about the budget", 1.0, project="q4"))
    assert decision == Admission(False, "duplicate of stored note 'orig'")


def test_same_text_at_a_later_time_is_admitted() -> None:
    """By default the same text at another timestamp is a new note (a daily event each day)."""
    s = DefaultStrategy()
    stored = Stored(s)
    stored.add(note("monday", "stand-up meeting", 1.0))
    assert admit(s, stored, note("tuesday", "stand-up meeting", 86_401.0))[0].admitted


def test_text_metadata_rule_refuses_same_text_at_any_time() -> None:
    """duplicate_key="text_metadata": same text and metadata at another time is refused."""
    s = DefaultStrategy(duplicate_key="text_metadata")
    stored = Stored(s)
    stored.add(note("orig", "met Ana about the budget", 1.0, project="q3"))
    [decision] = admit(s, stored, note("copy", "met Ana about the budget", 99.0, project="q3"))
    assert decision == Admission(False, "duplicate of stored note 'orig'")


def test_text_metadata_rule_admits_other_metadata() -> None:
    """duplicate_key="text_metadata": same text with different metadata is admitted."""
    s = DefaultStrategy(duplicate_key="text_metadata")
    stored = Stored(s)
    stored.add(note("orig", "met Ana", project="q3"))
    assert admit(s, stored, note("other", "met Ana", project="q4"))[0].admitted


def test_unknown_duplicate_key_is_refused() -> None:
    """duplicate_key must name a known rule."""
    with pytest.raises(ContractError, match="duplicate_key"):
        DefaultStrategy(duplicate_key="text")


def test_other_text_is_not_a_duplicate() -> None:
    """Texts that differ only in case embed alike but are not exact duplicates."""
    s = DefaultStrategy()
    stored = Stored(s)
    stored.add(note("orig", "met Ana"))
    assert admit(s, stored, note("other", "Met Ana"))[0].admitted


def test_refuses_duplicates_within_one_batch() -> None:
    """The second of two identical notes in one batch is refused naming the first."""
    s = DefaultStrategy()
    decisions = admit(s, Stored(s), note("a", "same"), note("b", "same"), note("a", "other"))
    assert decisions == [
        Admission(True, None),
        Admission(False, "duplicate of note 'a' earlier in this batch"),
        Admission(False, "id 'a' appears earlier in this batch"),
    ]


def test_duplicates_allowed_when_switched_off() -> None:
    """refuse_duplicates=False admits exact duplicates and needs no content index."""
    s = DefaultStrategy(refuse_duplicates=False)
    stored = Stored(s)
    stored.add(note("orig", "same"))
    assert s.content_key(note("x", "same")) is None
    assert admit(s, stored, note("copy", "same"), note("copy2", "same")) == [ADMIT, ADMIT]


def test_content_key_is_stable_and_ignores_id_and_time() -> None:
    """With duplicate_key="text_metadata" the content key depends on text and metadata only."""
    s = DefaultStrategy(duplicate_key="text_metadata")
    a = s.content_key(note("a", "text", 1.0, k=[1, 2]))
    assert a == s.content_key(note("b", "text", 2.0, k=[1, 2]))
    assert a != s.content_key(note("a", "text", 1.0, k=[2, 1]))


def test_bad_option_is_refused() -> None:
    """refuse_duplicates must be a boolean."""
    with pytest.raises(ContractError, match="refuse_duplicates"):
        DefaultStrategy(refuse_duplicates="yes")  # type: ignore[arg-type]


# -- answering ----------------------------------------------------------------------------------


@pytest.fixture(params=["flat", "segment_tree"])
def diary(request: pytest.FixtureRequest) -> Stored:
    structure = FlatStructure() if request.param == "flat" else SegmentTreeStructure(leaf_size=2)
    stored = Stored(DefaultStrategy(), structure)
    stored.add(
        note("d1", "budget meeting with Ana", 10.0),
        note("d2", "lunch with Bob", 20.0),
        note("d3", "the budget is approved", 30.0),
        note("d4", "gym session", 40.0),
        note("d5", "Ana sent the budget spreadsheet", 50.0),
    )
    return stored


def answer(stored: Stored, query: Query) -> list[str]:
    vector = None if query.text is None else EMBEDDER.embed([query.text])[0]
    return [h.id for h in stored.strategy.answer(query, vector, stored.context())]


def test_text_query_answers_by_similarity(diary: Stored) -> None:
    """A text query ranks notes sharing its words first."""
    assert answer(diary, Query(text="budget", k=3)) == ["d3", "d1", "d5"]


def test_time_only_query_gives_most_recent_in_range(diary: Stored) -> None:
    """A time-only query returns the newest notes of the range, newest first."""
    assert answer(diary, Query(time_range=TimeRange(start=10.0, end=40.0), k=2)) == ["d3", "d2"]


def test_near_query_without_text_goes_by_time(diary: Stored) -> None:
    """near alone returns the notes closest in time to the anchor, not the anchor."""
    assert answer(diary, Query(near="d3", k=2)) == ["d4", "d2"]


def test_text_query_honours_time_range_and_k(diary: Stored) -> None:
    """Hits outside the range are left out and at most k come back."""
    hits = answer(diary, Query(text="budget", time_range=TimeRange(start=20.0), k=1))
    assert hits == ["d3"]


def test_near_query_with_text_leaves_out_the_anchor(diary: Stored) -> None:
    """near plus text ranks by both, never returning the anchor itself."""
    hits = answer(diary, Query(text="budget", near="d1", k=4))
    assert "d1" not in hits and hits[0] in {"d3", "d5"}


def test_answer_with_no_structures_is_empty() -> None:
    """A context without structures answers nothing."""
    s = DefaultStrategy()
    context = StrategyContext((), (), lambda key: [], lambda id_: False)
    assert s.answer(Query(text="x"), np.zeros(64, dtype=np.float32), context) == []


def test_registry_has_default_and_refuses_unknown() -> None:
    """'default' is registered; an unknown name lists the registered ones."""
    assert isinstance(STRATEGIES.create("default"), DefaultStrategy)
    with pytest.raises(UnknownPiece, match="unknown strategy 'greedy'; registered: .*default"):
        STRATEGIES.create("greedy")


@pytest.mark.parametrize("value", [2**63 - 1, "caf\u00e9 \U0001f600", [1.5, {"z": None, "a": True}]])
def test_duplicates_found_for_any_json_metadata(value: object) -> None:
    """Exact duplicates are refused whatever JSON the metadata holds (large ints, text beyond ASCII)."""
    s = DefaultStrategy()
    stored = Stored(s)
    stored.add(note("orig", "same text", key=value))
    assert admit(s, stored, note("copy", "same text", key=value))[0] == Admission(
        False, "duplicate of stored note 'orig'"
    )


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from("abcdef"), st.sampled_from(["x", "y", "z", "", "  "])),
        min_size=1, max_size=6,
    ),
    stored_ids=st.sets(st.sampled_from("abcdefgh"), max_size=3),
    stored_texts=st.sets(st.sampled_from(["x", "y", "w"]), max_size=2),
    duplicates=st.sampled_from(["refuse", "allow"]),
)
@example(rows=[("a", "x"), ("b", "x")], stored_ids=set(), stored_texts=set(), duplicates="refuse")
@example(rows=[("a", "x"), ("b", "y")], stored_ids=set(), stored_texts={"y"}, duplicates="refuse")
@example(rows=[("a", "x"), ("b", "y")], stored_ids={"b"}, stored_texts=set(), duplicates="refuse")
def test_batch_lookups_decide_as_note_by_note(
    rows: list[tuple[str, str]], stored_ids: set[str], stored_texts: set[str], duplicates: str
) -> None:
    """Given the context's batch lookups (``stored_among``, ``held_among``), the default strategy
    decides every note as it does note by note without them: blank texts, ids repeated or stored,
    content repeated in the batch or held by a stored note."""
    strategy = DefaultStrategy(refuse_duplicates=duplicates == "refuse")
    notes = [note(id_, text) for id_, text in rows]
    stored = [note(f"s{i}", text) for i, text in enumerate(sorted(stored_texts))]
    ids = stored_ids | {n.id for n in stored}
    keys: dict[str, list[str]] = {}
    for n in stored:
        key = strategy.content_key(n)
        if key is not None:
            keys.setdefault(key, []).append(n.id)
    plain = StrategyContext((), (), lambda key: list(keys.get(key, [])), ids.__contains__)
    batch = StrategyContext(
        (), (), lambda key: list(keys.get(key, [])), ids.__contains__,
        stored_among=lambda among: ids & set(among), held_among=lambda among: among & keys.keys(),
    )  # fmt: skip
    vectors = np.zeros((len(notes), 4))
    assert strategy.admit(notes, vectors, batch) == strategy.admit(notes, vectors, plain)
