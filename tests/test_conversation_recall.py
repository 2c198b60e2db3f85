"""Conversational recall: keyword windows over session turns, question words, score fusion with
dates, vector queries, ask_many and hits grouped by session."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import pytest

from coniti import Container, Note, Query
from coniti.engine import ContinuityEngine
from coniti.errors import ContractError
from coniti.fusion import Fusion
from coniti.keyword import KeywordIndex, question_text, thread_of
from coniti.recall import Hit, group_hits

DAY = 86_400.0
MAY = datetime(2023, 5, 8, 13, 0, tzinfo=UTC).timestamp()
JULY = datetime(2023, 7, 2, 18, 0, tzinfo=UTC).timestamp()

TURNS = [
    ("D1:1", 1, "Alice: What did you do last weekend?"),
    ("D1:2", 1, "Bob: I went hiking near the lake with my brother."),
    ("D1:3", 1, "Alice: That sounds lovely."),
    ("D2:1", 2, "Alice: How is the new job going?"),
    ("D2:2", 2, "Bob: Busy, but the team is friendly."),
    ("D2:3", 2, "Alice: Glad to hear it."),
]


def turn_notes() -> list[Note]:
    out = []
    for id_, session, text in TURNS:
        start = MAY if session == 1 else JULY
        out.append(Note(id=id_, text=text, timestamp=start + int(id_.split(":")[1]),
                        metadata={"session": session, "speaker": text.split(":")[0]}))  # fmt: skip
    return out


@pytest.fixture
def engine() -> Iterator[ContinuityEngine]:
    with Container() as c:
        for session in (1, 2):
            c.engine.ingest_many([n for n in turn_notes() if n.metadata["session"] == session], namespace=("chat",))
        yield c.engine


def ids(hits: list[Hit]) -> list[str]:
    return [h.note.id for h in hits]


# -- question words ---------------------------------------------------------------------------------


def test_question_text_drops_function_words() -> None:
    """Interrogatives, auxiliaries, articles and pronouns leave the question."""
    assert question_text("What did Bob do last weekend?") == "Bob last weekend"


def test_question_text_keeps_a_question_of_function_words_only() -> None:
    """A question left empty by the cut is searched as written."""
    assert question_text("Who are you?") == "Who are you?"


# -- keyword windows -----------------------------------------------------------------------------------


def test_thread_of_reads_the_session() -> None:
    """A string or integer ``session`` names the thread; anything else, or none, is no thread."""
    assert thread_of({"session": 3}) == "3" and thread_of({"session": "s1"}) == "s1"
    assert thread_of({}) is None and thread_of({"session": True}) is None and thread_of({"session": [1]}) is None


def test_a_reply_is_found_by_the_words_of_the_question_before_it(engine: ContinuityEngine) -> None:
    """'weekend' is only in Alice's question; Bob's reply after it is found by keyword through its
    window, above every turn of the other session."""
    hits = engine.ask(Query(text="weekend", strategy="keyword"), namespace=("chat",)).hits
    assert set(ids(hits)) == {"D1:1", "D1:2", "D1:3"}


def test_windows_stay_inside_a_session(engine: ContinuityEngine) -> None:
    """The first turn of session 2 does not borrow the words of session 1's last turns."""
    hits = engine.ask(Query(text="lovely", strategy="keyword"), namespace=("chat",)).hits
    assert "D2:1" not in ids(hits)


def test_without_context_weight_a_turn_is_its_own_text() -> None:
    """context_weight=0 scores turns as plain notes: the reply holds no query word."""
    with Container(keyword=KeywordIndex(context_weight=0.0)) as c:
        c.engine.ingest_many(turn_notes(), namespace=("chat",))
        hits = c.engine.ask(Query(text="weekend", strategy="keyword"), namespace=("chat",)).hits
        assert ids(hits) == ["D1:1"]


def test_plain_notes_score_as_without_windows() -> None:
    """Notes without a session get exactly the scores of an index without windows."""
    texts = ["the cat sat on the mat", "a dog on a rug", "cats and dogs", "the mat is red"]
    on, off = KeywordIndex(), KeywordIndex(context_weight=0.0)
    for index in (on, off):
        index.add([f"n{i}" for i in range(4)], texts, [1.0, 2.0, 3.0, 4.0])
    assert on.search("cat mat", k=4) == off.search("cat mat", k=4)


def test_window_bm25_equals_bm25_of_the_window_text() -> None:
    """A threaded row scores as a plain row holding its window's tokens would, when the window's
    tokens are whole (weight 1): the windows are real BM25 documents."""
    threaded = KeywordIndex(context_before=1, context_after=0, context_weight=1.0)
    threaded.add(["a", "b", "c"], ["red apple", "green pear", "blue plum"], [1.0, 2.0, 3.0], threads=["t", "t", "t"])
    plain = KeywordIndex(context_weight=0.0)
    plain.add(["a", "b", "c"], ["red apple", "red apple green pear", "green pear blue plum"], [1.0, 2.0, 3.0])
    got = threaded.score("apple pear", ["a", "b", "c"])
    want = plain.score("apple pear", ["a", "b", "c"])
    assert got == pytest.approx(want, rel=1e-12)


def test_windows_survive_the_state_round_trip() -> None:
    """from_state(state()) scores threaded rows as the original does."""
    index = KeywordIndex()
    index.add(["a", "b", "c"], ["what about lunch", "pizza sounds good", "sure"], [1.0, 2.0, 3.0],
              threads=["s", "s", None])  # fmt: skip
    again = KeywordIndex.from_state(index.state())
    assert again.search("lunch", k=3) == index.search("lunch", k=3)
    assert again.options == index.options


def test_an_as_of_view_sees_the_windows_of_its_point() -> None:
    """A view as of a seq before the reply's neighbour was written scores the reply alone."""
    index = KeywordIndex(context_before=1, context_after=1, context_weight=1.0)
    index.add(["q"], ["what about lunch"], [1.0], born=1, threads=["s"])
    index.add(["r"], ["pizza sounds good"], [2.0], born=2, threads=["s"])
    index.add(["z"], ["unrelated words here"], [3.0], born=3)
    assert {h.id for h in index.search("pizza", k=3)} == {"q", "r"}
    assert {h.id for h in index.at(2).search("pizza", k=3)} == {"q", "r"}
    index.remove(["q"], died=4)
    assert {h.id for h in index.search("lunch", k=3)} == set()
    assert {h.id for h in index.at(3).search("lunch", k=3)} == {"q", "r"}


# -- score fusion and dates ----------------------------------------------------------------------------


def test_a_named_month_lifts_the_notes_of_that_month(engine: ContinuityEngine) -> None:
    """'in July' sets the date signal of July's turns only, and raises their fused score by the
    date weight over (semantic + keyword) weights."""
    plain = engine.ask(Query(text="Alice job", k=6, fusion=Fusion(date=0.0)), namespace=("chat",)).hits
    dated = engine.ask(Query(text="Alice job in July", k=6), namespace=("chat",)).hits
    flags = {h.note.id: h.signals.date for h in dated if h.signals}
    assert flags == {i: (1.0 if i.startswith("D2") else 0.0) for i in flags}
    assert all(h.signals and h.signals.fused == h.score for h in plain)


def test_the_date_weight_adds_its_share() -> None:
    """With date weight d and semantic + keyword weights 2, a note in the named time scores d / 2
    more than the same note asked without the date signal."""
    with Container() as c:
        c.engine.ingest(Note(id="n", text="garden party", timestamp=JULY))
        plain, dated = (Fusion(method="score", semantic=1.0, keyword=1.0, date=d) for d in (0.0, 0.4))
        base = c.engine.ask(Query(text="garden party in July 2023", fusion=plain)).hits[0].score
        lifted = c.engine.ask(Query(text="garden party in July 2023", fusion=dated)).hits[0].score
        assert lifted - base == pytest.approx(0.2)


# -- vector queries and ask_many ------------------------------------------------------------------------


def test_a_vector_query_equals_the_text_query(engine: ContinuityEngine) -> None:
    """Query(text=q, vector=embed(q)) answers as Query(text=q)."""
    text = "hiking with my brother"
    vector = engine.embedder.embed([text])[0]
    by_text = engine.ask(Query(text=text, k=4), namespace=("chat",))
    by_vector = engine.ask(Query(text=text, vector=vector, k=4), namespace=("chat",))
    assert by_vector.hits == by_text.hits


def test_a_vector_alone_is_a_semantic_query(engine: ContinuityEngine) -> None:
    """A query with only a vector resolves to semantic and ranks by cosine to it."""
    vector = engine.embedder.embed(["hiking near the lake"])[0]
    hits = engine.ask(Query(vector=vector, k=3), namespace=("chat",)).hits
    assert hits and all(h.signals and h.signals.strategy == "semantic" for h in hits)
    assert hits[0].note.id == "D1:2"


def test_a_vector_of_another_dimension_is_refused(engine: ContinuityEngine) -> None:
    """A vector whose length is not the embedder's dimension is a contract error naming it."""
    with pytest.raises(ContractError, match=r"Query.vector has 3 numbers"):
        engine.ask(Query(vector=[0.1, 0.2, 0.3]), namespace=("chat",))


def test_a_vector_must_be_finite_numbers() -> None:
    """NaN, booleans, an empty list and a 2-D array are refused when the query is made."""
    for bad in ([float("nan")], [True], [], np.zeros((2, 2))):
        with pytest.raises(ContractError, match="vector"):
            Query(vector=bad)


def test_keyword_with_only_a_vector_is_refused() -> None:
    """strategy keyword still needs text."""
    with pytest.raises(ContractError, match="keyword"):
        Query(vector=[0.0, 1.0], strategy="keyword")


def test_ask_many_answers_as_ask_each(engine: ContinuityEngine) -> None:
    """ask_many gives, in order, the answers ask gives one by one."""
    queries = [Query(text="hiking", k=3), "new job", Query(text="weekend", strategy="keyword")]
    many = engine.ask_many(queries, namespace=("chat",))
    assert many == [engine.ask(q, namespace=("chat",)) for q in queries]


def test_ask_many_embeds_every_question_in_one_call(engine: ContinuityEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three questions that need vectors cost one embedder call; a keyword one needs none."""
    calls: list[list[str]] = []
    embed = engine.embedder.embed
    monkeypatch.setattr(engine.embedder, "embed", lambda texts: calls.append(list(texts)) or embed(texts))
    engine.ask_many(["a", "b", "c", Query(text="d", strategy="keyword")], namespace=("chat",))
    assert calls == [["a", "b", "c"]]


def test_ask_many_names_the_bad_query_and_answers_none(engine: ContinuityEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad query anywhere in the list fails the call before anything is embedded."""
    monkeypatch.setattr(engine.embedder, "embed", lambda texts: pytest.fail("embedded"))
    with pytest.raises(ContractError, match=r"queries\[1\]"):
        engine.ask_many([Query(text="fine"), Query(vector=[1.0])], namespace=("chat",))


# -- grouping by session --------------------------------------------------------------------------------


def test_group_hits_groups_by_session_in_order_of_the_best_hit(engine: ContinuityEngine) -> None:
    """Groups follow their best hit; each holds its hits in rank order, at most per_group."""
    hits = engine.ask(Query(text="Alice Bob", k=6), namespace=("chat",)).hits
    groups = group_hits(hits, per_group=2)
    assert [g.value for g in groups] == list(dict.fromkeys(h.note.metadata["session"] for h in hits))
    for group in groups:
        members = [h for h in hits if h.note.metadata["session"] == group.value]
        assert group.hits == members[:2] and group.total == len(members) and group.score == members[0].score


def test_group_hits_keeps_a_note_without_the_key_alone() -> None:
    """Two hits without a session are two groups; a bad per_group is refused."""
    hits = [Hit(note=Note(id=i, text=i, timestamp=1.0), score=1.0) for i in ("a", "b")]
    assert [g.hits[0].note.id for g in group_hits(hits)] == ["a", "b"]
    with pytest.raises(ContractError, match="per_group"):
        group_hits(hits, per_group=0)


# -- superseded notes ------------------------------------------------------------------------------------

UPDATES = [
    Note(id="old", text="The team stand-up is at 9:30 every weekday in room B.", timestamp=1_000.0),
    Note(id="new", text="Stand-up is now at 10:00 every weekday in room B.", timestamp=2_000.0),
    Note(id="other", text="Lunch is served at noon in the canteen.", timestamp=3_000.0),
]
LOOSE = {"supersede": 2.0, "supersede_similarity": 0.6}
"""Wide enough for the hash embedder's vectors (the default is calibrated for minilm's)."""


@pytest.mark.parametrize("method", ["rank", "score"])
def test_a_question_about_now_prefers_the_newer_of_two_notes_saying_the_same(method: str) -> None:
    """'When is the stand-up?' puts the newer note first, by rank or by score; the older one names
    it as superseded_by; with supersede 0 the older one leads."""
    with Container() as c:
        c.engine.ingest_many(UPDATES)
        text = "When is the team stand-up?"
        off = c.engine.ask(Query(text=text, fusion=Fusion(method=method, supersede=0.0))).hits
        hits = c.engine.ask(Query(text=text, fusion=Fusion(method=method, **LOOSE))).hits
        assert ids(off)[:2] == ["old", "new"]
        assert ids(hits)[:2] == ["new", "old"]
        assert hits[1].signals is not None and hits[1].signals.superseded_by == "new"
        assert hits[1].score < hits[0].score


def test_a_question_about_the_past_keeps_the_order() -> None:
    """'When was the stand-up ...?' is not about now: nothing is moved."""
    with Container() as c:
        c.engine.ingest_many(UPDATES)
        text = "When was the team stand-up?"
        moved = c.engine.ask(Query(text=text, fusion=Fusion(**LOOSE))).hits
        assert ids(moved)[:2] == ["old", "new"]
        assert all(h.signals and h.signals.superseded_by is None for h in moved)


def test_supersede_moves_nothing_below_the_similarity() -> None:
    """With supersede_similarity 1.0 no two different notes are close enough."""
    from coniti.fusion import supersede

    ranked = [("a", 0.9), ("b", 0.8)]
    unit = {"a": np.array([1.0, 0.0]), "b": np.array([0.6, 0.8])}
    times = {"a": 1.0, "b": 2.0}
    assert supersede(ranked, times, unit, fusion=Fusion(supersede_similarity=1.0)) == (ranked, {})
    moved, by = supersede(ranked, times, unit, fusion=Fusion(supersede_similarity=0.5))
    assert [i for i, _ in moved] == ["b", "a"] and by == {"a": "b"}
