"""The keyword index (coniti/keyword.py): tokenisation, BM25 against hand-computed scores, sequence
masking, compaction and the serialisable state."""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coniti.actor import TimeRange
from coniti.errors import ContractError
from coniti.keyword import ALIVE, NO_SPACE, KeywordIndex, tokenize


def _three() -> KeywordIndex:
    index = KeywordIndex()
    index.add(
        ["d1", "d2", "d3"],
        ["apple banana apple", "banana cherry", "cherry date elder fig"],
        [1.0, 2.0, 3.0],
        [1, 2, 3],
    )
    return index


# -- tokenisation ------------------------------------------------------------------------------


def test_tokens_are_case_folded_word_runs() -> None:
    """Tokens are the \\w runs of the text, case-folded; punctuation separates them."""
    assert tokenize("Invoice INV-2024-0042, paid!") == ["invoice", "inv", "2024", "0042", "paid"]


def test_case_folding_is_unicode_aware() -> None:
    """casefold, not lower: 'Straße' and 'STRASSE' give the same token."""
    assert tokenize("Straße") == tokenize("STRASSE") == ["strasse"]


def test_nfkc_normalisation_joins_compatibility_forms() -> None:
    """Full-width letters and digits tokenise like their ASCII forms."""
    assert tokenize("ＡＢＣ１２３") == ["abc123"]


def test_cjk_runs_become_character_bigrams() -> None:
    """A run of Han characters becomes its overlapping bigrams."""
    assert tokenize("我在苏黎世") == ["我在", "在苏", "苏黎", "黎世"]


def test_a_lone_cjk_character_is_its_own_token() -> None:
    """A one-character run of a no-space script is one token."""
    assert tokenize("日") == ["日"]


def test_mixed_runs_split_at_the_script_boundary() -> None:
    """Latin letters glued to Han characters stay one token; the Han part becomes bigrams."""
    assert tokenize("coniti数据库") == ["coniti", "数据", "据库"]


def test_japanese_kana_are_bigrams_too() -> None:
    """Hiragana and Katakana are scripts without spaces as well."""
    assert tokenize("カタカナ") == ["カタ", "タカ", "カナ"]


# -- BM25, by hand -----------------------------------------------------------------------------


def test_bm25_single_term_matches_the_hand_computed_score() -> None:
    """'apple' on three notes (lengths 3, 2, 4; avgdl 3): only d1 (tf 2) holds it, df 1, so
    idf = ln(1 + 2.5/1.5) = ln(8/3) and the score is idf * 2 * 2.2 / (2 + 1.2) = 1.34864..."""
    hits = _three().search("apple", k=5)
    assert [h.id for h in hits] == ["d1"]
    assert hits[0].score == pytest.approx(math.log(8 / 3) * 4.4 / 3.2, rel=1e-12)
    assert hits[0].score == pytest.approx(1.3486403, abs=1e-7)


def test_bm25_two_terms_match_the_hand_computed_scores() -> None:
    """'banana cherry': each term has df 2, idf = ln(1 + 1.5/2.5) = ln 1.6. d2 (length 2, both
    terms once) scores 2 * ln1.6 * 2.2 / (1 + 0.9); d1 (length 3, banana) ln1.6 * 2.2 / 2.2; d3
    (length 4, cherry) ln1.6 * 2.2 / 2.5."""
    hits = _three().search("banana cherry", k=5)
    idf = math.log(1.6)
    assert [h.id for h in hits] == ["d2", "d1", "d3"]
    assert [h.score for h in hits] == pytest.approx(
        [2 * idf * 2.2 / 1.9, idf * 1.0, idf * 2.2 / 2.5], rel=1e-12
    )
    assert [round(h.score, 6) for h in hits] == [1.088429, 0.470004, 0.413603]


def test_k1_and_b_change_the_score_as_the_formula_says() -> None:
    """With b = 0 length does not matter and with k1 = 0 term frequency does not: 'apple' on d1
    then scores exactly idf."""
    index = KeywordIndex(k1=0.0, b=0.0)
    index.add(["d1", "d2", "d3"], ["apple banana apple", "banana cherry", "cherry date"], [1, 2, 3])
    assert index.search("apple", k=1)[0].score == pytest.approx(math.log(8 / 3), rel=1e-12)


def test_repeated_query_terms_count_once() -> None:
    """'apple apple' scores like 'apple': the distinct query terms are summed."""
    index = _three()
    assert index.search("apple apple", k=1) == index.search("apple", k=1)


def test_cjk_query_finds_the_note_holding_it() -> None:
    """'苏黎世' scores above zero on a note containing it (the bigrams match)."""
    index = KeywordIndex()
    index.add(["z", "o"], ["我们下周在苏黎世见面", "meeting in Berlin"], [1.0, 2.0])
    hits = index.search("苏黎世", k=5)
    assert [h.id for h in hits] == ["z"] and hits[0].score > 0


def test_notes_without_a_query_term_are_not_hits() -> None:
    """Only notes that hold at least one query term are returned."""
    assert _three().search("zebra", k=5) == []


def test_ties_are_broken_by_newer_timestamp_then_id() -> None:
    """Equal scores: the newer note first, then the smaller id."""
    index = KeywordIndex()
    index.add(["b", "a", "c"], ["same words", "same words", "same words"], [1.0, 1.0, 2.0])
    assert [h.id for h in index.search("same", k=3)] == ["c", "a", "b"]


def test_time_range_limits_the_hits() -> None:
    """Only notes with start <= timestamp < end are hits."""
    hits = _three().search("banana cherry", k=5, time_range=TimeRange(start=2.0, end=3.0))
    assert [h.id for h in hits] == ["d2"]


def test_bad_k1_or_b_is_refused_naming_it() -> None:
    """k1 must be a finite number >= 0 and b in [0, 1]."""
    with pytest.raises(ContractError, match="k1"):
        KeywordIndex(k1=-1)
    with pytest.raises(ContractError, match="b must be"):
        KeywordIndex(b=1.5)


def test_adding_a_live_id_again_is_refused_and_changes_nothing() -> None:
    """add is all or nothing: an id already live raises and no row of the batch is added."""
    index = _three()
    with pytest.raises(ContractError, match="d1"):
        index.add(["new", "d1"], ["x", "y"], [1.0, 1.0])
    assert len(index) == 3 and "new" not in index


# -- sequence masking -----------------------------------------------------------------------------


def test_as_of_search_sees_only_rows_live_then() -> None:
    """A row born at 2 and ended at 5 is visible as of 2..4 and not at 1 or 5."""
    index = _three()
    index.remove(["d2"], died=5)
    assert [h.id for h in index.search("banana", k=5)] == ["d1"]
    assert {h.id for h in index.search("banana", k=5, as_of=4)} == {"d1", "d2"}
    assert {h.id for h in index.search("banana", k=5, as_of=1)} == {"d1"}
    assert [h.id for h in index.search("banana", k=5, as_of=5)] == ["d1"]


def test_as_of_scores_equal_a_fresh_index_of_that_moment() -> None:
    """N, avgdl and df are taken over the rows visible as of S: the past search scores exactly
    as an index holding only those rows."""
    index = _three()
    index.remove(["d3"], died=9)
    index.add(["d4"], ["cherry cherry"], [4.0], [10])
    fresh = KeywordIndex()
    fresh.add(["d1", "d2", "d3"], ["apple banana apple", "banana cherry", "cherry date elder fig"], [1, 2, 3])
    assert index.search("cherry banana", k=5, as_of=8) == fresh.search("cherry banana", k=5)


def test_compact_drops_ended_rows_and_keeps_live_results() -> None:
    """compact() drops ended rows; current searches give the same hits afterwards."""
    index = _three()
    index.remove(["d1"], died=4)
    before = index.search("banana cherry apple", k=5)
    assert index.compact() == 1
    assert index.rows == 2
    assert index.search("banana cherry apple", k=5) == before


def test_readding_an_id_after_remove_makes_a_new_row() -> None:
    """An update is remove + add: the old row stays for as-of searches, the new one is live."""
    index = _three()
    index.remove(["d1"], died=4)
    index.add(["d1"], ["kiwi"], [1.0], [4])
    assert [h.id for h in index.search("kiwi", k=5)] == ["d1"]
    assert [h.id for h in index.search("apple", k=5, as_of=3)] == ["d1"]
    assert index.search("apple", k=5) == []


# -- state ----------------------------------------------------------------------------------------


def test_state_is_plain_arrays_tagged_with_seq() -> None:
    """state() holds numpy arrays and numbers only, with the seq it reflects."""
    index = _three()
    index.seq = 42
    state = index.state()
    assert state["seq"] == 42
    assert all(isinstance(v, np.ndarray | int | float) for v in state.values())
    assert list(state["died"]) == [ALIVE] * 3


def test_state_round_trip_answers_the_same_now_and_as_of() -> None:
    """from_state(state()) gives an index with the same hits now and as of an earlier point."""
    index = _three()
    index.remove(["d2"], died=7)
    copy = KeywordIndex.from_state(index.state())
    for as_of in (None, 2, 6, 7):
        assert copy.search("banana cherry", k=5, as_of=as_of) == index.search("banana cherry", k=5, as_of=as_of)
    assert copy.options == index.options and len(copy) == len(index)


def test_state_with_disagreeing_arrays_is_refused() -> None:
    """A state whose postings name a row that does not exist raises ContractError."""
    state = _three().state()
    state["posting_rows"] = state["posting_rows"] + 10
    with pytest.raises(ContractError, match="postings"):
        KeywordIndex.from_state(state)


def test_state_missing_a_field_is_refused_naming_it() -> None:
    """A state without 'born' raises ContractError naming the field."""
    state = _three().state()
    del state["born"]
    with pytest.raises(ContractError, match="born"):
        KeywordIndex.from_state(state)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.text(alphabet="ab cd苏黎世", min_size=1, max_size=12), min_size=1, max_size=12),
    st.text(alphabet="ab cd苏黎世", min_size=1, max_size=6),
)
def test_incremental_adds_equal_one_batch(texts: list[str], query: str) -> None:
    """Adding notes one at a time gives the same hits as one batch add."""
    ids = [f"n{i}" for i in range(len(texts))]
    times = [float(i % 3) for i in range(len(texts))]
    one = KeywordIndex()
    one.add(ids, texts, times)
    many = KeywordIndex()
    for i, text, t in zip(ids, texts, times, strict=True):
        many.add([i], [text], [t])
    assert one.search(query, k=20) == many.search(query, k=20)


def test_a_merged_corpus_scores_like_one_index_of_the_union() -> None:
    """Two indexes searched with their merged Corpus give the scores of one index holding both."""
    from coniti.keyword import Corpus

    a, b, both = KeywordIndex(), KeywordIndex(), KeywordIndex()
    a.add(["a1"], ["red apples in the orchard"], [1.0])
    b.add(["b1", "b2"], ["red apples for the pie", "blue boats on the lake"], [2.0, 3.0])
    both.add(["a1", "b1", "b2"], ["red apples in the orchard", "red apples for the pie", "blue boats on the lake"], [1.0, 2.0, 3.0])
    query = "red apples orchard"
    corpus = Corpus.merge([a.corpus(query), b.corpus(query)])
    merged = sorted([*a.search(query, k=5, corpus=corpus), *b.search(query, k=5, corpus=corpus)], key=lambda h: -h.score)
    expected = both.search(query, k=5)
    assert [h.id for h in merged] == [h.id for h in expected]
    assert [h.score for h in merged] == pytest.approx([h.score for h in expected], rel=1e-12)


def test_purge_hides_every_row_of_an_id_at_every_point() -> None:
    """After purge (an erasure), no search, now or as of any point, finds the id."""
    index = _three()
    index.remove(["d1"], died=4)
    index.add(["d1"], ["apple pie"], [1.0], [4])
    assert index.purge(["d1"]) == 2
    for as_of in (None, 1, 3, 4, 9):
        assert "d1" not in {h.id for h in index.search("apple", k=5, as_of=as_of)}
    assert "d1" not in index and len(index) == 2
    index.compact()
    assert index.rows == 2


def test_a_state_without_the_ids_sort_index_restores_the_same_index() -> None:
    """A state without id_order, id_keys and id_key_scheme (written before they were kept), or
    naming another key scheme, restores an index with the same hits and scores."""
    index = _three()
    index.remove(["d2"], died=7)
    old = {k: v for k, v in index.state().items() if not k.startswith("id_") or k == "id_offsets"}
    other = {**index.state(), "id_key_scheme": np.frombuffer(b"mix64-other-9", dtype=np.uint8)}
    for state in (old, other):
        copy = KeywordIndex.from_state(state)
        assert copy.search("banana cherry", k=5) == index.search("banana cherry", k=5)
        assert copy.score("banana", ["d1", "d2", "d3"]) == index.score("banana", ["d1", "d2", "d3"])


def test_a_restored_index_looks_ids_up_without_sorting_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """from_state(state()) keeps the ids' sort index: its lookups (score, timestamp) sort nothing."""
    index = _three()
    state = index.state()
    monkeypatch.setattr("coniti.packed.np.argsort", lambda *_a, **_k: pytest.fail("the ids were sorted"))
    copy = KeywordIndex.from_state(state)
    assert copy.score("banana", ["d1", "d2", "x"]) == index.score("banana", ["d1", "d2", "x"])
    assert copy.timestamp("d3") == 3.0


def test_a_state_whose_ids_sort_index_does_not_fit_is_refused() -> None:
    """A state whose id_order names a row that does not exist raises ContractError naming it."""
    state = _three().state()
    state["id_order"] = state["id_order"] + 5
    with pytest.raises(ContractError, match="id_order"):
        KeywordIndex.from_state(state)


def test_state_as_arrays_only_round_trips() -> None:
    """A state whose scalars came back as 0-d arrays (an on-disk snapshot) restores the same index."""
    index = _three()
    index.seq = 9
    arrays = {k: np.asarray(v) for k, v in index.state().items()}
    copy = KeywordIndex.from_state(arrays)
    assert copy.seq == 9 and copy.search("banana cherry", k=5) == index.search("banana cherry", k=5)


def test_an_expired_row_counts_for_nothing_in_scores_and_statistics() -> None:
    """A row whose expiry has passed is no hit and is left out of N, avgdl and df: the index
    scores as one that never held it; a row expiring later still counts."""
    index = _three()
    index.add(["gone"], ["banana banana"], [4.0], [4], expires=[1.0])
    index.add(["later"], ["cherry"], [5.0], [5], expires=[math.inf])
    plain = _three()
    plain.add(["later"], ["cherry"], [5.0], [5])
    assert index.search("banana cherry", k=9) == plain.search("banana cherry", k=9)
    assert index.corpus("banana") == plain.corpus("banana")


def test_an_as_of_view_judges_expiry_at_its_clock() -> None:
    """KeywordIndex.at(seq, clock=...) hides a row that had expired by that clock and shows one
    that had not, whatever the time now."""
    index = _three()
    index.add(["x"], ["banana split"], [4.0], [4], expires=[100.0])
    assert "x" in {h.id for h in index.at(9, clock=50.0).search("banana", k=9)}
    assert "x" not in {h.id for h in index.at(9, clock=150.0).search("banana", k=9)}


def test_an_as_of_view_is_read_only() -> None:
    """A view refuses every change with a ContractError naming its point, and the index it was
    made from is unchanged."""
    index = _three()
    view = index.at(2)
    for change in (lambda: view.add(["n"], ["t"], [1.0]), lambda: view.remove(["d1"]), view.clear):
        with pytest.raises(ContractError, match="as of seq 2 is read-only"):
            change()
    assert len(index) == 3 and "d1" in index


WORDS = ["apple", "pear", "plum", "fig", "kiwi"]


def _bm25_oracle(docs: dict[str, str], query: str, k1: float = 1.2, b: float = 0.75) -> dict[str, float]:
    """Plain BM25 over the live documents (the module docstring's formula), term by term."""
    tokens = {i: tokenize(t) for i, t in docs.items()}
    n = len(docs)
    avgdl = sum(len(t) for t in tokens.values()) / n if n else 0.0
    out = dict.fromkeys(docs, 0.0)
    for term in dict.fromkeys(tokenize(query)):
        df = sum(term in t for t in tokens.values())
        if not df:
            continue
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        for i, t in tokens.items():
            tf = t.count(term)
            if tf:
                out[i] += idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * len(t) / avgdl))
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["put", "put", "remove", "purge"]), st.integers(0, 7), st.lists(st.sampled_from(WORDS), max_size=6)),
        min_size=1,
        max_size=25,
    ),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    st.booleans(),
)
def test_scores_of_given_ids_and_search_equal_plain_bm25_after_any_writes(
    steps: list[tuple[str, int, list[str]]], query_words: list[str], restore: bool
) -> None:
    """After puts, removes and erasures (and, drawn, a restore from the state: postings packed),
    score(ids) and search agree with plain BM25 over the live documents, the scores of given ids
    read from the postings of those rows only."""
    index, docs = KeywordIndex(), {}
    for seq, (kind, n, words) in enumerate(steps, 1):
        id_ = f"n{n}"
        index.remove([id_], died=seq)
        docs.pop(id_, None)
        if kind == "purge":
            index.purge([id_])
        elif kind == "put":
            index.add([id_], [" ".join(words)], [float(seq)], born=seq)
            docs[id_] = " ".join(words)
    if restore:
        index = KeywordIndex.from_state(index.state())
    query = " ".join(query_words)
    expected = _bm25_oracle(docs, query)
    ids = [f"n{i}" for i in range(8)]
    assert index.score(query, ids) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    hits = {h.id: h.score for h in index.search(query, k=8)}
    assert hits == pytest.approx({i: s for i, s in expected.items() if s > 0}, rel=1e-12)
# -- the batch path against the definition -------------------------------------------------------

_SCRIPTS = st.sampled_from(
    list("abZ09_ -.,\n") + ["é", "ß", "Σ", "ς", "苏", "黎", "世", "カ", "タ", "ー", "ก", "\u0301", "ﬁ", "①"]
)
_KEY_TEXT = st.one_of(st.text(_SCRIPTS, max_size=30), st.text(max_size=20))


def _definition(text: str) -> list[str]:
    """The tokens by the module docstring, run by run with the regexes."""
    out: list[str] = []
    for run in re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold()):
        for i, part in enumerate(re.split(f"([{NO_SPACE}]+)", run)):
            if part and (i % 2 == 0 or len(part) == 1):
                out.append(part)
            elif part:
                out.extend(part[j : j + 2] for j in range(len(part) - 1))
    return out


@given(_KEY_TEXT)
def test_tokens_follow_the_definition(text: str) -> None:
    """tokenize gives the tokens of the definition (ASCII fast path included)."""
    assert tokenize(text) == _definition(text)


@settings(max_examples=80, deadline=None)
@given(st.lists(_KEY_TEXT, max_size=15), st.integers(0, 15))
def test_a_batch_posts_each_terms_rows_in_order_with_their_counts(texts: list[str], cut: int) -> None:
    """Added in two batches, every term's posting is the rows holding it in order, each with its
    count, and each row's length is its token count (the state says so)."""
    index = KeywordIndex()
    ids = [f"n{i}" for i in range(len(texts))]
    times = [float(i) for i in range(len(texts))]
    index.add(ids[:cut], texts[:cut], times[:cut], 1)
    index.add(ids[cut:], texts[cut:], times[cut:], 2)
    counts = [Counter(_definition(t)) for t in texts]
    state = index.state()
    terms = sorted({term for c in counts for term in c})
    want_rows = [r for term in terms for r, c in enumerate(counts) if term in c]
    want_tfs = [c[term] for term in terms for c in counts if term in c]
    assert state["terms"].tobytes() == "".join(terms).encode()
    assert state["posting_rows"].tolist() == want_rows
    assert state["posting_tfs"].tolist() == want_tfs
    assert state["length"].tolist() == [sum(c.values()) for c in counts]
    assert state["born"].tolist() == [1] * min(cut, len(texts)) + [2] * (len(texts) - cut)


def test_a_refused_batch_adds_no_row() -> None:
    """A batch repeating an id is refused before any row or posting is added."""
    index = _three()
    before = index.state()
    with pytest.raises(ContractError, match="'n1' is already in the keyword index"):
        index.add(["n1", "n2", "n1"], ["apple", "kiwi", "plum"], [4.0, 5.0, 6.0])
    after = index.state()
    assert all(np.array_equal(before[k], after[k]) for k in before)


def test_rows_added_without_threads_are_those_added_with_no_thread_each() -> None:
    """``threads=None`` (a batch where no note names a thread) gives the state that a thread of
    None per row gives, and a later threaded batch numbers its threads the same way."""
    ids, texts, times = ["a", "b", "c"], ["red fox", "blue fox", "green owl"], [1.0, 2.0, 3.0]
    bare, listed = KeywordIndex(), KeywordIndex()
    bare.add(ids, texts, times, threads=None)
    listed.add(ids, texts, times, threads=[None, None, None])
    for index in (bare, listed):
        index.add(["d", "e"], ["red owl", "blue owl"], [4.0, 5.0], threads=["t1", None])
    a, b = bare.state(), listed.state()
    assert a.keys() == b.keys()
    for key in a:
        assert np.array_equal(np.asarray(a[key]), np.asarray(b[key])), key
    assert bare.threaded


# -- a restored index keeps its terms packed -----------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(_KEY_TEXT, min_size=1, max_size=12),
    st.lists(_KEY_TEXT, max_size=4),
    st.lists(_KEY_TEXT, min_size=1, max_size=3),
    st.integers(0, 11),
)
def test_a_restored_index_scores_as_the_original_before_and_after_writes(
    texts: list[str], later: list[str], queries: list[str], gone: int
) -> None:
    """An index restored from its state (terms kept packed, looked up by binary search) gives the
    same search hits, scores and corpus statistics as the index it was saved from; after the same
    adds and removes on both (a write thaws the terms it touches), the same again, and the same
    state."""
    original = KeywordIndex(context_weight=0.0)
    original.add([f"n{i}" for i in range(len(texts))], texts, [float(i) for i in range(len(texts))], 1)
    restored = KeywordIndex.from_state(original.state())

    def same() -> None:
        ids = [f"n{i}" for i in range(len(texts) + len(later))]
        for query in [*queries, *texts[:3]]:
            assert restored.search(query, k=20) == original.search(query, k=20)
            assert restored.score(query, ids) == original.score(query, ids)
            assert restored.corpus(query) == original.corpus(query)

    same()
    for index in (original, restored):
        index.remove([f"n{gone}"], died=2)
        start = len(texts)
        index.add([f"n{start + i}" for i in range(len(later))], later, [float(start + i) for i in range(len(later))], 3)
    same()
    a, b = original.state(), restored.state()
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)

